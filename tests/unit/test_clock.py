"""The clock seam: real time until a test moves it, then real time plus an offset that only grows."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from openddb import clock


@pytest.fixture(autouse=True)
def real_time() -> Iterator[None]:
    yield
    clock.set_offset(0)


def test_unmoved_clock_is_time_time_itself() -> None:
    # Why: the request path reads the clock; unmoved, it must cost exactly what time.time() does.
    assert clock.now is time.time
    assert clock.offset() == 0


def test_advance_moves_now_ahead_and_accumulates() -> None:
    assert clock.advance(3600) == 3600
    assert clock.advance(60) == 3660
    assert abs(clock.now() - (time.time() + 3660)) < 1


def test_the_clock_does_not_move_back() -> None:
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_offset_zero_is_real_time_again() -> None:
    clock.advance(10)
    clock.set_offset(0)
    assert clock.now is time.time
