"""Work a process drives in the background, one chunk a turn of the server's event loop, so requests keep being
served between chunks: index and vector index backfills, backups, restores, exports and imports.

Each kind keeps a `Runs` of the jobs this process drives (by a key: an ARN, a table's uuid, a table's uuid and
index id). `Runs.start` is a no-op for a job already running here; otherwise it runs the job's step (one chunk;
True while more remain) until the step answers False or raises, and forgets the job then, whichever way it ended.
Who drives a job across workers and nodes is the step's own business (a lease in the store, taken each chunk): a
step that finds another process holding it answers False, and a later duty round takes the job up once the lease
has expired.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

log = logging.getLogger("openddb.api")

# Seconds to wait between chunks: 0 in service; tests raise it to widen the windows of online work.
PAUSE = float(os.environ.get("OPENDDB_BACKFILL_PAUSE", "0"))

K = TypeVar("K", bound=Hashable)


class Runs(Generic[K]):
    """The jobs of one kind this process drives."""

    def __init__(self) -> None:
        self._keys: set[K] = set()

    def __contains__(self, key: K) -> bool:
        return key in self._keys

    def start(self, key: K, step: Callable[[], bool], what: str, failed: Callable[[], None] | None = None) -> None:
        """Drive `step` for the job `key` unless it runs here already; `failed` (after the job is forgotten) if a
        step raises, with the error logged as `what` failing."""
        if key in self._keys:
            return
        self._keys.add(key)

        def run_step() -> bool:
            more = False
            try:
                more = step()
            finally:
                if not more:
                    self._keys.discard(key)
            return more

        drive(run_step, failed or (lambda: None), what)


def drive(step: Callable[[], bool], failed: Callable[[], None], what: str) -> None:
    """Run `step` (one chunk; True while more remain) on the server's loop, one chunk a turn (or all at once
    without a loop); `failed` is called, and the error logged, if a step raises."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # no server loop (a direct call): run synchronously
        while step():
            pass
        return

    def run() -> None:
        try:
            if step():
                loop.call_later(PAUSE, run) if PAUSE else loop.call_soon(run)
        except Exception:
            failed()
            log.exception("%s failed", what)

    loop.call_soon(run)
