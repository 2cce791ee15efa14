"""Figures a table description reports that are not stored: item counts and sizes (counted when asked for), and
timestamps in DynamoDB's form."""

from __future__ import annotations

import time

from openddb.model.schema import IndexMeta, TableMeta
from openddb.storage.base import Engine

# ItemCount and size in bytes are counted when a description is asked for. A count slower than _SLOW_COUNT (a
# table of some 50,000 items and more) is reused for a while, so that counting takes at most _COUNT_SHARE of a
# worker's time and a waiter polling DescribeTable on a big table does not stall the requests beside it.
# DynamoDB itself refreshes these figures about every six hours.
_SLOW_COUNT = 0.01
_COUNT_SHARE = 0.01
# Keyed by the table's version too: a count taken while an index was CREATING is not the count once it is ACTIVE.
_COUNTS: dict[tuple[str, int, str | None], tuple[float, tuple[int, int]]] = {}


def counted(engine: Engine, meta: TableMeta, index: IndexMeta | None = None) -> tuple[int, int]:
    """(item count, size in bytes) of a table or of one of its indexes, counted now or by a recent slow count."""
    started = time.monotonic()
    key = (meta.uuid, meta.version, None if index is None else index.name)
    known = _COUNTS.get(key)
    if known is not None and known[0] > started:
        return known[1]
    figures = engine.table_stats(meta) if index is None else engine.index_stats(meta, index)
    spent = time.monotonic() - started
    if spent > _SLOW_COUNT:
        for stale in [cached for cached, (until, _) in _COUNTS.items() if until <= started]:
            del _COUNTS[stale]
        _COUNTS[key] = (started + spent / _COUNT_SHARE, figures)
    return figures


def epoch_millis(seconds: float) -> float:
    """A timestamp as DynamoDB writes one in a description: epoch seconds to the millisecond."""
    return round(seconds, 3)
