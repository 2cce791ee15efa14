"""A table's partitions, which split for heat (`--throttling on`; api/throttle.py draws on them).

A table starts with its hash space cut in equal ranges, as many as its throughput needs (api/throttle.py). The
Developer Guide and AWS's "Scaling DynamoDB" articles say a partition also splits when it receives read or write
traffic near its limit for a sustained time ("split for heat", part of adaptive capacity), and that partitions are
only split, never merged; a split spreads the partition's keys over two partitions, each with its own 3,000 RCU and
1,000 WCU a second, so an even workload over many keys outgrows its first partitions without being throttled, while
one hot key, which no split can divide, stays throttled at one partition's limit.

Here each partition has, beside its bucket of one second, a heat bucket filled at SPLIT_LOAD (80%) of the
partition's capacity and holding (1 - SPLIT_LOAD) x `heat_seconds` of it: a partition that runs at its limit for
`heat_seconds` (`openddb serve --split-for-heat`) empties it, one at 90% in twice that, one at 80% or below never.
The partition then splits where the load it saw divides in halves: at the middle of the partition-key hashes its
requests named, weighted by what they consumed (each process keeps SAMPLE_KEYS of them a partition). Traffic to
one partition key cannot be split (an item collection is not split by sort key here, which DynamoDB may do for a
table without local secondary indexes). Best guess: how long DynamoDB waits and where it cuts are not documented;
its articles show splits within minutes of sustained load.

A split is a range (lo, hi) of hashes cut at a boundary, kept in a SplitBook: a dict in one process, or the host's
shared buckets (api/shared_buckets.py: a pinned slot per split and a generation every split raises, so the workers
see each other's splits), told to other PostgreSQL nodes with the draws (api/throttle_exchange.py), and kept in the
store (`Engine.save_splits`, by the throttle's background upkeep within about a second), from which a restarted
server takes them on its first request: its partitions are laid out as they had split. A change of capacity past
the table's partitions lays them out afresh (the ranges' keys name their first count). A partition also splits
when its data passes 10 GB (api/partition_sizes.py).
"""

from __future__ import annotations

from itertools import pairwise
from typing import Protocol

from openddb.api.shared_buckets import SharedBuckets
from openddb.api.token_buckets import MakeBucket, TokenBucket

SPLIT_LOAD = 0.8  # best guess for "near its throughput capacity limit"
SAMPLE_KEYS = 64
DEFAULT_HEAT_SECONDS = 300.0  # best guess: minutes of sustained load, as the articles' graphs show
_HASH_SPACE = 1 << 32
_GENERATION = "partition splits"  # (the shared slot every split raises)


class SplitBook(Protocol):
    """Where splits are kept: `boundary` of a range's key, or None while it is whole."""

    def generation(self) -> float: ...

    def boundary(self, key: str) -> int | None: ...

    def split(self, key: str, boundary: int) -> int:
        """Record that the range `key` is cut at `boundary`, unless it already is; the boundary it is cut at."""
        ...


class LocalSplits:
    """The splits of one process."""

    def __init__(self) -> None:
        self._splits: dict[str, int] = {}

    def generation(self) -> float:
        return float(len(self._splits))

    def boundary(self, key: str) -> int | None:
        return self._splits.get(key)

    def split(self, key: str, boundary: int) -> int:
        return self._splits.setdefault(key, boundary)


class SharedSplits:
    """The splits of every worker of the host, in its shared buckets (hold their lock around each use)."""

    def __init__(self, shared: SharedBuckets) -> None:
        self._shared = shared
        shared.lock()  # (workers starting together make the generation's slot once)
        try:
            self._generation = shared.pin(_GENERATION, 0.0)
        finally:
            shared.unlock()

    def generation(self) -> float:
        return self._shared.read(self._generation)[0]

    def boundary(self, key: str) -> int | None:
        found = self._shared.find("split " + key)
        return None if found is None else int(self._shared.read(found)[0])

    def split(self, key: str, boundary: int) -> int:
        known = self.boundary(key)
        if known is not None:
            return known
        self._shared.pin("split " + key, float(boundary))
        count, stamp = self._shared.read(self._generation)
        self._shared.write(self._generation, count + 1.0, stamp)
        return boundary


class Partition:
    """A range of hashes [lo, hi): its bucket of one second, its heat, and the hashes this process saw drawn."""

    __slots__ = ("bucket", "heat", "hi", "lo", "sample", "written")

    def __init__(self, lo: int, hi: int, bucket: TokenBucket, heat: TokenBucket) -> None:
        self.lo, self.hi = lo, hi
        self.bucket = bucket
        self.heat = heat
        self.sample: dict[int, float] = {}
        self.written = 0  # bytes this process wrote to it since its size was last looked at (api/throttle.py)

    def note(self, h: int, share: float) -> None:
        sample = self.sample
        if h not in sample and len(sample) >= SAMPLE_KEYS:  # (full: keep the heavier half)
            kept = sorted(sample.items(), key=lambda entry: entry[1], reverse=True)[:SAMPLE_KEYS // 2]
            self.sample = sample = dict(kept)
        sample[h] = sample.get(h, 0.0) + share

    def boundary(self) -> int | None:
        """Where the load this process saw divides in halves: a hash of the sample, the first of the upper half;
        None when one partition key carries it all (which no split divides)."""
        if len(self.sample) < 2:
            return None
        sample = self.sample
        hashes = sorted(sample)
        half = sum(sample.values()) / 2
        below, best, best_gap = 0.0, hashes[1], float("inf")
        for previous, h in pairwise(hashes):
            below += sample[previous]
            if abs(half - below) < best_gap:
                best, best_gap = h, abs(half - below)
        return best


class PartitionMap:
    """A table's partitions: `count` equal ranges at first, then as they split."""

    def __init__(self, key: str, count: int, make: MakeBucket, book: SplitBook, heat_seconds: float) -> None:
        self.key = key  # (the table's ARN and uuid, and the throughput that laid the ranges out)
        self._count = count
        self._make = make
        self._book = book
        self._heat_seconds = heat_seconds
        self._generation = book.generation()
        self._cuts: dict[tuple[int, int], int] = {}  # ranges known to be split (for good)
        self._leaves: dict[tuple[int, int], Partition] = {}  # ranges known whole, as of `_generation`

    def __len__(self) -> int:
        return self._count

    def partition(self, h: int, now: float) -> Partition:
        """The partition holding hash `h` now."""
        generation = self._book.generation()
        if generation != self._generation:  # (a split somewhere: the ranges now cut are looked up again; the others
            self._generation = generation   # keep their partitions, buckets, heat and key sample)
            book, key = self._book, self.key
            self._leaves = {span: leaf for span, leaf in self._leaves.items()
                            if book.boundary(f"{key} {span[0]}-{span[1]}") is None}
        i = h * self._count >> 32
        lo, hi = -(-(i << 32) // self._count), -(-((i + 1) << 32) // self._count)
        while True:
            cut = self._cuts.get((lo, hi))
            if cut is None:
                leaf = self._leaves.get((lo, hi))
                if leaf is not None:
                    return leaf
                cut = self._book.boundary(f"{self.key} {lo}-{hi}")
                if cut is None:
                    leaf = self._leaves[(lo, hi)] = self._whole(lo, hi, now)
                    return leaf
                self._cuts[(lo, hi)] = cut
            lo, hi = (lo, cut) if h < cut else (cut, hi)

    def _whole(self, lo: int, hi: int, now: float) -> Partition:
        key = f"{self.key} p{lo}-{hi}"
        heat_capacity = (1.0 - SPLIT_LOAD) * self._heat_seconds
        return Partition(lo, hi, self._make(key, 1.0, 1.0, now, 0.0),
                         self._make(key + " heat", SPLIT_LOAD, heat_capacity, now, heat_capacity / SPLIT_LOAD))

    def split_if_hot(self, partition: Partition, now: float) -> tuple[str, int] | None:
        """Split `partition` if its heat is spent and the load it saw can be divided: (the range's key, the
        boundary it was cut at) to tell other nodes, or None."""
        if partition.heat.level(now) > 0:
            return None
        cut = partition.boundary()
        return None if cut is None else self.split_at(partition, cut)

    def split_at(self, partition: Partition, cut: int) -> tuple[str, int] | None:
        """Split `partition` at hash `cut` (for heat, or for size: api/partition_sizes.py) unless it is no cut
        inside it: (the range's key, the boundary it was cut at) to tell other nodes, or None."""
        if not partition.lo < cut < partition.hi:
            return None
        key = f"{self.key} {partition.lo}-{partition.hi}"
        cut = self._book.split(key, cut)
        self._cuts[(partition.lo, partition.hi)] = cut
        self._leaves.pop((partition.lo, partition.hi), None)
        return key, cut
