"""ItemCount and TableSizeBytes: counted at each DescribeTable, except that a slow count is reused for a while."""

from __future__ import annotations

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


def test_fast_counts_are_always_fresh() -> None:
    engine = SlowCountEngine(None)
    meta = engine.create_table(new_meta())
    fill(engine, meta, 3)
    assert counted(engine, meta)[0] == 3
    fill(engine, meta, 5)
    assert counted(engine, meta)[0] == 5
    assert engine.counts == 2
    engine.close()


def test_a_slow_count_is_reused_for_a_hundred_times_its_cost() -> None:
    engine = SlowCountEngine(None)
    meta = engine.create_table(new_meta())
    fill(engine, meta, 3)
    engine.delay = 0.02
    assert counted(engine, meta)[0] == 3
    fill(engine, meta, 5)
    assert counted(engine, meta)[0] == 3  # reused: counting takes at most 1% of the worker's time
    assert engine.counts == 1
    other = engine.create_table(new_meta())  # each table (and index) has its own figures
    assert counted(engine, other) == (0, 0)
    key = (meta.uuid, None)
    _, figures = description_figures._COUNTS[key]
    description_figures._COUNTS[key] = (time.monotonic() - 1, figures)  # as when the reuse time has run out
    assert counted(engine, meta)[0] == 5
    assert engine.counts == 3
    engine.close()
