"""Several server processes on one port.

Each worker is a forked process with its own event loop, its own listening socket bound with SO_REUSEPORT (so
the kernel spreads connections across workers) and its own engine connection. Workers share nothing but the
store: the engine's transactions keep conditional writes correct across them, and its catalog version makes a
table created through one worker visible to all at once. The parent only supervises: it forwards SIGINT/SIGTERM
and restarts a worker that died unexpectedly.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import time
from collections.abc import Callable

log = logging.getLogger("openddb.workers")

_PR_SET_PDEATHSIG = 1


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


def supervise(count: int, run_worker: Callable[[int], int]) -> int:
    """Fork `count` workers running `run_worker(index)`; return when all have stopped after a signal."""
    children: dict[int, int] = {}
    stopping = False

    parent = os.getpid()

    def spawn(index: int) -> None:
        # Signals stay blocked across the fork: a SIGTERM forwarded to a worker before it has dropped the
        # supervisor's handler would otherwise run that handler in the worker and be lost.
        stop_signals = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
        pid = os.fork()
        if pid != 0:
            children[pid] = index  # before unblocking: a pending SIGTERM must be forwarded to this worker too
            signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
            return
        # the worker
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
        stop_with_parent(parent)
        code = 1
        try:
            code = run_worker(index)
        except BaseException:
            log.exception("worker %d failed", index)
        finally:
            os._exit(code)

    def forward(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    for index in range(count):
        if stopping:  # a signal arrived while starting: do not fork workers nobody will stop
            break
        spawn(index)
    restarts: list[float] = []
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        dead = children.pop(pid, None)
        if dead is None or stopping:
            continue
        # A worker died on its own: restart it, unless workers keep dying (then give up and stop all).
        now = time.monotonic()
        restarts = [t for t in restarts if now - t < 10] + [now]
        log.error("worker %d exited unexpectedly (status %d)", dead, status)
        if len(restarts) > 5:
            log.error("workers keep failing; stopping")
            forward(signal.SIGTERM, None)
            continue
        spawn(dead)
    return 0
