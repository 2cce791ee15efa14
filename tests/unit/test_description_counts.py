"""ItemCount and TableSizeBytes: counted at each DescribeTable, except that a slow count is reused for a while."""

from __future__ import annotations

import dataclasses
import time

from openddb.api import figures as description_figures
from openddb.api.figures import counted
from openddb.model.schema import TableMeta
from openddb.storage.sqlite import SQLiteEngine
from tests.storage.test_engine_contract import fill, new_meta


class SlowCountEngine(SQLiteEngine):
    """The embedded engine, whose counts take as long as a table of some 100,000 items would."""

    delay = 0.0
    counts = 0

    def table_stats(self, meta: TableMeta) -> tuple[int, int]:
        self.counts += 1
        time.sleep(self.delay)
        return super().table_stats(meta)


def test_fast_counts_are_always_fresh(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(description_figures, "_SLOW_COUNT", 1.0)  # (a loaded machine's count is still "fast")
    engine = SlowCountEngine(None)
    meta = engine.create_table(new_meta())
    fill(engine, meta, 3)
    assert counted(engine, meta)[0] == 3
    fill(engine, meta, 5)
    assert counted(engine, meta)[0] == 5
    assert engine.counts == 2
    engine.close()


def counted_slowly_then_filled() -> tuple[SlowCountEngine, TableMeta]:
    """A table of 3 items counted slowly (so the count is kept for reuse), then grown to 5."""
    engine = SlowCountEngine(None)
    meta = engine.create_table(new_meta())
    fill(engine, meta, 3)
    engine.delay = 0.02
    assert counted(engine, meta)[0] == 3
    fill(engine, meta, 5)
    return engine, meta


def test_a_slow_count_is_reused_for_a_hundred_times_its_cost() -> None:
    engine, meta = counted_slowly_then_filled()
    assert counted(engine, meta)[0] == 3  # reused: counting takes at most 1% of the worker's time
    assert engine.counts == 1
    other = engine.create_table(new_meta())  # each table (and index) has its own figures
    assert counted(engine, other) == (0, 0)
    key = (meta.uuid, meta.version, None)
    _, figures = description_figures._COUNTS[key]
    description_figures._COUNTS[key] = (time.monotonic() - 1, figures)  # as when the reuse time has run out
    assert counted(engine, meta)[0] == 5
    assert engine.counts == 3
    engine.close()


def test_a_slow_count_is_not_reused_for_another_version_of_the_table() -> None:
    """A count taken before a table change (an index that was CREATING, say) is not shown after it."""
    engine, meta = counted_slowly_then_filled()
    changed = dataclasses.replace(meta, version=meta.version + 1)
    assert counted(engine, changed)[0] == 5
    assert engine.counts == 2
    engine.close()
