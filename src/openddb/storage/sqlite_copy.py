"""`openddb backup` and `openddb restore`: a whole embedded store copied to or from a directory.

The copy is made with SQLite's online backup API, file by file (the store, and the file of its on-demand backups
if it has one), each in one step, which reads one snapshot of the source: in WAL mode a running server's workers
go on reading and writing meanwhile, and the copy holds every write committed before it began (a write the copy
overlaps is in it whole or not at all). The copy is a data directory: `openddb serve --data-dir COPY` serves it
as it is. A restore replaces a store's files the same way, and only while no server has the store open (the
checkpoint duty's lock, which a serving process holds, tells)."""

from __future__ import annotations

import fcntl
import os
import sqlite3

STORE_FILES = ("openddb.sqlite3", "openddb-backups.sqlite3")
_SERVING_LOCK = "openddb.sqlite3.checkpoint-lock"  # held by a serving process's checkpointer (see sqlite.py)


class StoreCopyError(Exception):
    """A copy that cannot be made: the message says why, for the command line."""


def _copy_file(source: str, target: str) -> None:
    """One SQLite file copied, consistently, into `target` (replaced if it exists)."""
    origin = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        os.close(os.open(target, os.O_RDWR | os.O_CREAT, 0o600))
        copy = sqlite3.connect(target)
        try:
            origin.backup(copy)  # (all pages in one step: one snapshot of the source)
            copy.execute("PRAGMA journal_mode = WAL")
        finally:
            copy.close()
    finally:
        origin.close()


def _serving(data_dir: str) -> bool:
    """Whether a server has the store at `data_dir` open."""
    path = os.path.join(data_dir, _SERVING_LOCK)
    if not os.path.exists(path):
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # (closing drops a lock taken here)
    return False


def backup_store(data_dir: str, target: str) -> list[str]:
    """Copy the store at `data_dir` into the directory `target` (made, mode 0700, if missing); the files copied."""
    if not os.path.exists(os.path.join(data_dir, STORE_FILES[0])):
        raise StoreCopyError(f"no store at {data_dir} (no {STORE_FILES[0]})")
    os.makedirs(target, mode=0o700, exist_ok=True)
    if os.path.exists(os.path.join(target, STORE_FILES[0])):
        raise StoreCopyError(f"{target} already holds a store: copy into a new directory")
    copied = []
    for name in STORE_FILES:
        if os.path.exists(os.path.join(data_dir, name)):
            _copy_file(os.path.join(data_dir, name), os.path.join(target, name))
            copied.append(name)
    return copied


def restore_store(source: str, data_dir: str) -> list[str]:
    """Replace the store at `data_dir` (made if missing) with the copy in `source`; refused while a server has it
    open. The files restored."""
    if not os.path.exists(os.path.join(source, STORE_FILES[0])):
        raise StoreCopyError(f"no store copy at {source} (no {STORE_FILES[0]})")
    os.makedirs(data_dir, mode=0o700, exist_ok=True)
    if _serving(data_dir):
        raise StoreCopyError(f"a server has the store at {data_dir} open: stop it first")
    restored = []
    for name in STORE_FILES:
        target = os.path.join(data_dir, name)
        if os.path.exists(os.path.join(source, name)):
            _copy_file(os.path.join(source, name), target)
            restored.append(name)
        elif os.path.exists(target):  # (the copy had no on-demand backups: neither has the store now)
            for stale in (target, target + "-wal", target + "-shm"):
                if os.path.exists(stale):
                    os.remove(stale)
    return restored
