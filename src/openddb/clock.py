"""The server's clock: the one source of "now" (epoch seconds) for TTL expiry, stream records, shard rollover and
retention, iterator expiry and quotas.

Read it as `clock.now()`, through the module, never `from openddb.clock import now`: until a test moves it,
`now` *is* `time.time` (no added call on the request path); `advance` rebinds it to real time plus an offset.
The offset belongs to the process (a server with several workers or nodes has one clock each; the test-control
endpoints need a one-process server for that reason). Imports nothing internal.
"""

from __future__ import annotations

import time
from collections.abc import Callable

_real = time.time
_offset = 0.0

now: Callable[[], float] = _real


def offset() -> float:
    """How far the clock is ahead of real time, in seconds."""
    return _offset


def set_offset(seconds: float) -> None:
    """Run the clock `seconds` ahead of real time from now on (0: real time again, at no cost per call)."""
    global _offset, now
    _offset = float(seconds)
    if _offset == 0.0:
        now = _real
        return
    ahead = _offset

    def shifted() -> float:
        return _real() + ahead

    now = shifted


def advance(seconds: float) -> float:
    """Move the clock `seconds` further ahead (never back: a negative amount is refused); the new offset."""
    if seconds < 0:
        raise ValueError("the clock only moves forward")
    set_offset(_offset + seconds)
    return _offset
