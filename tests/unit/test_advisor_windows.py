"""The advisor's time slices (advisor/windows.py) over many hours of a moved clock: a table keeps at most 60 minute
slices, `retention_hours` hour slices and its current one; a window's report counts the calls within it exactly,
and the slices merged by the hour keep their counts and their hot key."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from openddb import clock
from openddb.advisor import rules_traffic
from openddb.advisor.findings import Finding
from openddb.advisor.listener import Advisor
from openddb.advisor.observations import COUNT
from openddb.advisor.settings import Settings, Thresholds
from openddb.model.keys import encode_key, partition_hash
from openddb.model.schema import KeyAttribute, TableMeta
from openddb.observe.record import Charge, RequestRecord
from openddb.startup import open_sqlite
from openddb.storage.base import StorageKey


@pytest.fixture
def moved_clock() -> Iterator[None]:
    try:
        yield
    finally:
        clock.set_offset(0)


def get_item(table: str, key: str) -> RequestRecord:
    encoded = encode_key({"S": key})
    record = RequestRecord("GetItem")
    record.status, record.latency, record.access_key = 200, 0.0003, "unit"
    record.request = {"TableName": table, "Key": {"pk": {"S": key}}}
    record.charges.append(Charge(table, table, None, False, 0.5, False, 80,
                                 StorageKey(partition_hash(encoded), encoded, b"")))
    return record


def test_slices_are_bounded_and_windows_exact(moved_clock: None) -> None:
    engine = open_sqlite(None, "normal")
    name = "windows-" + uuid.uuid4().hex[:6]
    engine.create_table(TableMeta(name=name, table_id=0, uuid=str(uuid.uuid4()), hash_key=KeyAttribute("pk", "S"),
                                  range_key=None, attribute_definitions=[{"AttributeName": "pk",
                                                                          "AttributeType": "S"}],
                                  created_at=time.time(), billing_mode="PAY_PER_REQUEST"))
    thresholds = Thresholds(observe_budget=1.0, retention_hours=3, hot_key_min_requests=300)
    advisor = Advisor(Settings(thresholds), lambda: engine)
    clock.set_offset(-clock.now() % 3600)  # (from the start of an hour: the minutes fill whole hours)
    for minute in range(6 * 60):  # six hours, 20 calls a minute, half of them of one key
        for call in range(20):
            advisor.observe(get_item(name, "hot" if call % 2 else f"k{minute}-{call}"))
        clock.set_offset(clock.offset() + 60)
        kept = len(advisor.windows.sealed.get(name, ()))
        assert kept <= 60 + 3 + 1
    advisor.expire()
    assert len(advisor.windows.sealed[name]) <= 60 + 3 + 1

    meta = engine.get_table(name)
    assert meta is not None

    def gets(since: float | None) -> tuple[int, list[object]]:
        seen = advisor.observed(name, since)
        assert seen is not None
        count = sum(int(figures[COUNT]) for key, figures in seen.patterns.items() if key[0] == "GetItem")
        hot = [finding.evidence["key"] for finding in rules_traffic.hot_partition(advisor, seen, meta)
               if isinstance(finding, Finding)]
        return count, hot

    now = clock.now()
    assert gets(now - 10 * 60) == (200, [])  # the last ten minutes: 200 calls (below hot_key_min_requests)
    assert gets(now - 30 * 60) == (600, [{"S": "hot"}])
    assert gets(None) == (3 * 60 * 20, [{"S": "hot"}])  # the retention's three hours, merged by the hour
