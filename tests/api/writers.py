"""A writer that keeps writing beside a test (one client of its own, one thread), counting what was acknowledged."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.conftest import make_client


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
