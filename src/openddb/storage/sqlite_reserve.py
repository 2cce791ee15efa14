"""Disk space the embedded store keeps in reserve, so that a full disk is survived.

When the disk fills, SQLite refuses the write or commit that needs more room (SQLITE_FULL), and it cannot
checkpoint either: copying the write-ahead log into the database file needs room too, so freeing a few
megabytes does not help when the checkpoint takes them first. So the store holds a file of `RESERVE_BYTES`
(allocated, not sparse) beside its database. On the first refusal it gives that file up: the checkpoint finishes
in the room it leaves, and writes go on in the log's recycled space while the operator frees more. Once the disk
has room again, the reserve is taken back.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("openddb.storage")

RESERVE_BYTES = 32 * 1024 * 1024
_NAME = "openddb.reserve"


class SpaceReserve:
    """The reserve file of the store in `folder` (None: an in-memory store, which has none; nor has a `size` of 0)."""

    def __init__(self, folder: str | None, size: int = RESERVE_BYTES) -> None:
        self.path = None if folder is None or size <= 0 else os.path.join(folder, _NAME)
        self.size = size
        self.held = False
        self._given_up = False  # the reserve was freed for a full disk (taking it back is then worth a line)
        self.hold()

    def hold(self) -> bool:
        """Take the reserve if it is not held and the disk has room for it and as much again; whether it is held."""
        if self.path is None or self.held:
            return self.held
        try:
            if os.path.exists(self.path) and os.path.getsize(self.path) >= self.size:
                self.held = True
                return True
            stats = os.statvfs(os.path.dirname(self.path))
            if stats.f_bavail * stats.f_frsize < 2 * self.size:
                return False
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                os.posix_fallocate(fd, 0, self.size)  # (blocks allocated: a sparse file would reserve nothing)
            finally:
                os.close(fd)
        except OSError as error:
            log.warning("cannot keep %d MB of disk in reserve: %s", self.size >> 20, error)
            self._remove()
            return False
        self.held = True
        if self._given_up:
            self._given_up = False
            log.warning("the disk has room again: %d MB are back in reserve", self.size >> 20)
        return True

    def give_up(self) -> None:
        """The disk is full: free the reserve (once) for the checkpoint and the writes that follow."""
        if not self.held:
            return
        self._remove()
        self.held = False
        self._given_up = True
        log.warning("the disk is full: writes are refused (503, retryable) until there is room; %d MB kept in "
                    "reserve were freed so the store can checkpoint", self.size >> 20)

    def _remove(self) -> None:
        if self.path is not None:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
