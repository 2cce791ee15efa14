"""Several server processes on one port.

Each worker is a forked process with its own event loop and its own engine connection; the workers share the
server's listening socket, each accepting while it holds no more connections than the others (server/balance.py).
Workers share nothing else but the store: the engine's transactions keep conditional writes correct across them,
and its catalog version makes a table created through one worker visible to all at once. The parent only
supervises: it forwards SIGINT/SIGTERM and restarts a worker that died unexpectedly (telling the balance it
stopped).
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable

log = logging.getLogger("openddb.workers")

_PR_SET_PDEATHSIG = 1
SHARE_PREFIX = "openddb-metrics-"


def share_directory() -> str:
    """A new temporary directory for what the workers share (metrics snapshots, throttle buckets), named for this
    server's process id. The supervisor removes its own when it stops; one killed with -9 cannot, so the
    directories left by servers whose process is gone are removed here first."""
    root = tempfile.gettempdir()
    for name in os.listdir(root):
        owner = _owner_pid(name)
        if owner is not None and not _alive(owner):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"{SHARE_PREFIX}{os.getpid()}-")


def _owner_pid(name: str) -> int | None:
    """The server process id in a share directory's name, or None for any other name."""
    if not name.startswith(SHARE_PREFIX):
        return None
    pid, dash, _ = name[len(SHARE_PREFIX):].partition("-")
    return int(pid) if dash and pid.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # (another user's process)
        return True
    return True


def stop_with_parent(parent: int) -> None:
    """Ask the kernel to send this worker SIGTERM when the supervisor dies, even by kill -9, so no orphaned
    worker keeps serving (and holding the store) after its server is gone."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the supervisor died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def supervise(count: int, run_worker: Callable[[int], int], exited: Callable[[int], None] | None = None) -> int:
    """Fork `count` workers running `run_worker(index)`; return when all have stopped after a signal; `exited`:
    told the index of each worker that stopped, before it is restarted."""
    return _Supervisor(run_worker, exited).run(count)


class _Supervisor:
    """The parent of the workers: starts them, forwards SIGINT/SIGTERM to them, restarts one that dies on its own
    (unless workers keep dying: then it stops them all)."""

    def __init__(self, run_worker: Callable[[int], int], exited: Callable[[int], None] | None = None) -> None:
        self.run_worker = run_worker
        self.exited = exited
        self.children: dict[int, int] = {}  # pid -> worker index
        self.stopping = False
        self.parent = os.getpid()
        self.restarts: list[float] = []

    def run(self, count: int) -> int:
        signal.signal(signal.SIGINT, self.forward)
        signal.signal(signal.SIGTERM, self.forward)
        for index in range(count):
            if self.stopping:  # a signal arrived while starting: do not fork workers nobody will stop
                break
            self.spawn(index)
        while self.children:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            dead = self.children.pop(pid, None)
            if dead is not None and self.exited is not None:
                self.exited(dead)
            if dead is not None and not self.stopping:
                self.restart(dead, status)
        return 0

    def spawn(self, index: int) -> None:
        # Signals stay blocked across the fork: a SIGTERM forwarded to a worker before it has dropped the
        # supervisor's handler would otherwise run that handler in the worker and be lost.
        stop_signals = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
        pid = os.fork()
        if pid != 0:
            self.children[pid] = index  # before unblocking: a pending SIGTERM must be forwarded to this worker too
            signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
            return
        # the worker
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
        stop_with_parent(self.parent)
        code = 1
        try:
            code = self.run_worker(index)
        except BaseException:
            log.exception("worker %d failed", index)
        finally:
            os._exit(code)

    def forward(self, signum: int, _frame: object) -> None:
        self.stopping = True
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def restart(self, index: int, status: int) -> None:
        """A worker died on its own: start it again, unless workers keep dying (then stop them all)."""
        now = time.monotonic()
        self.restarts = [t for t in self.restarts if now - t < 10] + [now]
        log.error("worker %d exited unexpectedly (status %d)", index, status)
        if len(self.restarts) > 5:
            log.error("workers keep failing; stopping")
            self.forward(signal.SIGTERM, None)
            return
        self.spawn(index)
