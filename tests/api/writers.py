"""Work beside a test: a writer that keeps writing (one client of its own, one thread), counting what was
acknowledged; a call cut off by kill -9."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.conftest import ServerProcess, make_client


@contextmanager
def writing(endpoint: str, write: Callable[[Any, int], None]) -> Iterator[list[int]]:
    """Call `write(client, n)` for n = 1, 2, ... until the block ends; yields the list of the n acknowledged so far,
    in order. The block starts once 20 writes are acknowledged."""
    client = make_client(endpoint)
    acknowledged: list[int] = []
    stop = threading.Event()

    def run() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            write(client, n)
            acknowledged.append(n)

    writer = threading.Thread(target=run)
    writer.start()
    try:
        while len(acknowledged) < 20 and writer.is_alive():
            time.sleep(0.01)
        yield acknowledged
    finally:
        stop.set()
        writer.join()


def wait_for(acknowledged: list[int], count: int) -> None:
    """Until `count` writes are acknowledged."""
    while len(acknowledged) < count:
        time.sleep(0.01)


def kill_during(server: ServerProcess, call: Callable[[], object], after: float) -> None:
    """Send `call` from a thread, kill -9 the server `after` seconds later and restart nothing: the call may have
    been answered, refused or cut off, which is what the caller's test looks at once it restarts the server."""

    def send() -> None:
        try:
            call()
        except Exception:
            pass

    caller = threading.Thread(target=send)
    caller.start()
    time.sleep(after)
    try:
        server.stop(kill=True)
        caller.join()
    finally:
        server.log.close()
