"""Partitions split for size (`--throttling on`; api/throttle.py draws on them, api/partition_splits.py holds them).

The Developer Guide (Partitions and data distribution; the throttling guide's key range pages) says a partition
holds up to 10 GB of data and that DynamoDB adds partitions as a table's data grows past what its partitions hold;
each new partition then serves its own 3,000 RCU and 1,000 WCU a second. Here each process counts the bytes its
writes charged to each partition (`SizeWatch.wrote`, from the item sizes the write path already computed); a
partition that received CHECK_SHARE of the limit since it was last looked at is looked at by the throttle's
background upkeep (`cut_for_size`): its rows are read from the store, and if they hold more than the limit the
partition splits at the hash where its data divides in halves (the size median). The store decides, not the
count: a count lost with a restart, or one that a delete inflated, costs a look, never a wrong split. One partition
key holds one item collection, which is not split by sort key here (as for heat), so a partition of one key stays
whole whatever its size.

The limit is `openddb serve --partition-size-limit BYTES` (a development option, hidden from --help: a test shows a
split with a few MB); 10 GB by default. Best guess: how soon after passing 10 GB DynamoDB splits is not documented.
Cost: the look reads the partition's rows on the event loop between requests (a pause of about a second per GB
here), at most once per CHECK_SHARE of the limit written to it; nothing is counted with `--throttling off`.
"""

from __future__ import annotations

from typing import NamedTuple

from openddb.api.partition_splits import Partition, PartitionMap
from openddb.model.schema import TableMeta
from openddb.storage.base import Engine

DEFAULT_PARTITION_BYTES = 10 << 30  # 10 GB a partition (Developer Guide, Partitions and data distribution)
CHECK_SHARE = 0.25  # best guess: how much of the limit is written between looks at a partition's size


class Due(NamedTuple):
    """A partition whose size is to be looked at: its table's stored name and layout, and the partition."""

    table: str
    partitions: PartitionMap
    partition: Partition


class SizeWatch:
    """The bytes written to each partition by this process, and the partitions due for a look at their size."""

    def __init__(self, limit: int = DEFAULT_PARTITION_BYTES) -> None:
        self.limit = limit
        self._every = max(1, int(limit * CHECK_SHARE))
        self._due: dict[tuple[int, int, int], Due] = {}  # (layout, lo, hi) -> what to look at

    def wrote(self, table: str, partitions: PartitionMap, partition: Partition, size: int) -> None:
        partition.written += size
        if partition.written >= self._every:
            partition.written = 0
            self._due[(id(partitions), partition.lo, partition.hi)] = Due(table, partitions, partition)

    def take_due(self) -> list[Due]:
        due, self._due = list(self._due.values()), {}
        return due


def cut_for_size(engine: Engine, meta: TableMeta, lo: int, hi: int, limit: int) -> int | None:
    """The hash at which the rows of `meta` hashed in [lo, hi) divide in halves by size, if they hold more than
    `limit` bytes and more than one partition key's hash; else None."""
    total = sum(row.size for row in engine.scan(meta, lo, hi, None))
    if total <= limit:
        return None
    below, first, cut = 0, -1, None
    for row in engine.scan(meta, lo, hi, None):  # (read to its end: an engine's scan is not left open)
        h = row.key.h
        if first < 0:
            first = h
        elif cut is None and below * 2 >= total and h > first:
            cut = h  # (the first hash of the upper half; rows below it hold half the bytes or more)
        below += row.size
    return cut
