"""The daily budget of provisioned-capacity decreases: four, then one an hour after the last, until UTC midnight."""

from __future__ import annotations

import calendar
import time

import pytest

from openddb.api.throughput import count_decrease, decreases_today
from openddb.errors import LimitExceededException
from openddb.model.schema import IndexMeta


def at(text: str) -> float:
    """Epoch seconds of a UTC time written YYYY-MM-DD HH:MM:SS."""
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M:%S")))


def test_fifth_decrease_waits_for_the_hour_or_for_midnight() -> None:
    index = IndexMeta(name="g", kind="GLOBAL", hash_keys=[])
    for minute in (0, 5, 10, 20):
        count_decrease(index, at(f"2026-10-08 23:{minute:02d}:48"))
    with pytest.raises(LimitExceededException) as refused:
        count_decrease(index, at("2026-10-08 23:40:00"))
    assert str(refused.value.message).endswith(
        "Number of decreases today: 4. Last decrease at Thursday, October 8, 2026 at 11:20:48 PM Coordinated "
        "Universal Time. Next decrease can be made at Friday, October 9, 2026 at 12:00:00 AM Coordinated Universal "
        "Time")
    assert decreases_today(index, at("2026-10-08 23:59:59")) == 4
    assert decreases_today(index, at("2026-10-09 00:00:00")) == 0  # a new UTC day starts the count again
    count_decrease(index, at("2026-10-09 00:00:01"))
    assert index.decreases_today == 1


def test_one_more_an_hour_after_the_last_accepted() -> None:
    index = IndexMeta(name="g", kind="GLOBAL", hash_keys=[])
    for second in range(4):
        count_decrease(index, at(f"2026-10-09 00:21:3{second}"))
    with pytest.raises(LimitExceededException) as refused:
        count_decrease(index, at("2026-10-09 01:00:20"))  # the top of the hour is not the rule
    assert "Next decrease can be made at Friday, October 9, 2026 at 1:21:33 AM Coordinated Universal Time" in \
        refused.value.message
    count_decrease(index, at("2026-10-09 01:21:33"))
    assert decreases_today(index, at("2026-10-09 01:21:34")) == 5
    with pytest.raises(LimitExceededException):
        count_decrease(index, at("2026-10-09 01:26:33"))
