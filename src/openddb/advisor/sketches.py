"""Bounded summaries of unbounded streams: the heaviest keys (space-saving), sizes as a log-2 histogram, and a
small sample of distinct values. Each holds at most a fixed number of entries, whatever the traffic."""

from __future__ import annotations

import math
from typing import Generic, TypeVar

K = TypeVar("K")

# A space-saving counter's members: requests (an over-estimate by at most ERROR), that error, read and write units,
# the second of the last charge, the units within that second, and the highest units within one second.
COUNT, ERROR, READ, WRITE, SECOND, SECOND_READ, SECOND_WRITE, PEAK_READ, PEAK_WRITE = range(9)


class HeavyHitters(Generic[K]):
    """Space-saving (Metwally, Agrawal, El Abbadi 2005): at most `capacity` counters; a key not counted takes the
    smallest counter's place, inheriting its count as its error. Any key with more than total/capacity requests is
    among the counters, with a count at most its error too high."""

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self.total = 0.0
        self.counters: dict[K, list[float]] = {}
        # Keys whose counters held the smallest count when last looked for (some may have grown since): the next
        # evictions take them, so a stream of new keys costs one scan of the counters per `capacity` keys or so.
        self._smallest: list[K] = []
        self._floor = 0.0

    def add(self, key: K, read: float, write: float, second: int, count: float = 1.0) -> None:
        """Count `count` requests of `key` (more than 1: a sample's) and their units."""
        self.total += count
        counter = self.counters.get(key)
        if counter is None:
            floor = self.counters.pop(self._evicted())[COUNT] if len(self.counters) >= self.capacity else 0.0
            counter = self.counters[key] = [floor + count, floor, read, write, second, read, write, read, write]
            return
        counter[COUNT] += count
        counter[READ] += read
        counter[WRITE] += write
        if counter[SECOND] == second:
            counter[SECOND_READ] += read
            counter[SECOND_WRITE] += write
        else:
            counter[SECOND], counter[SECOND_READ], counter[SECOND_WRITE] = second, read, write
        if counter[SECOND_READ] > counter[PEAK_READ]:
            counter[PEAK_READ] = counter[SECOND_READ]
        if counter[SECOND_WRITE] > counter[PEAK_WRITE]:
            counter[PEAK_WRITE] = counter[SECOND_WRITE]

    def _evicted(self) -> K:
        """A key with the smallest count."""
        counters = self.counters
        while self._smallest:
            key = self._smallest.pop()
            counter = counters.get(key)
            if counter is not None and counter[COUNT] <= self._floor:
                return key
        self._floor = min(counter[COUNT] for counter in counters.values())
        self._smallest = [key for key, counter in counters.items() if counter[COUNT] == self._floor]
        return self._smallest.pop()

    def top(self, count: int) -> list[tuple[K, list[float]]]:
        return sorted(self.counters.items(), key=lambda pair: -pair[1][COUNT])[:count]

    def merge(self, other: HeavyHitters[K]) -> None:
        """Add `other`'s counts (another time slice's): a key in both adds its counts, errors and units and keeps
        the higher per-second peaks; then the `capacity` largest counters stay. COUNT - ERROR stays a lower bound of
        each key's requests (a slice that lost a key adds nothing for it), the bound the rules report."""
        self.total += other.total
        counters = self.counters
        for key, counter in other.counters.items():
            mine = counters.get(key)
            if mine is None:
                counters[key] = list(counter)
                continue
            for member in (COUNT, ERROR, READ, WRITE):
                mine[member] += counter[member]
            mine[PEAK_READ] = max(mine[PEAK_READ], counter[PEAK_READ])
            mine[PEAK_WRITE] = max(mine[PEAK_WRITE], counter[PEAK_WRITE])
        if len(counters) > self.capacity:
            self.counters = dict(self.top(self.capacity))
        self._smallest, self._floor = [], 0.0

    def shrink(self, capacity: int) -> None:
        """Keep the `capacity` largest counters (a sealed time slice's: no key is added to it any more)."""
        if len(self.counters) > capacity:
            self.counters = dict(self.top(capacity))
        self._smallest, self._floor = [], 0.0


class Sizes:
    """Sizes in bytes: count, total, the largest, and a log-2 histogram (bucket b counts sizes below 2**b) for
    percentiles within a factor of two."""

    __slots__ = ("buckets", "count", "largest", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0
        self.largest = 0
        self.buckets = [0] * 24

    def add(self, size: int, count: int = 1) -> None:
        """Count `count` items of `size` bytes (more than 1: a sample's)."""
        self.count += count
        self.total += size * count
        if size > self.largest:
            self.largest = size
        self.buckets[min(size.bit_length(), 23)] += count

    def percentile(self, share: float) -> int:
        """An upper bound of the `share` percentile (the top of its bucket, never above the largest)."""
        wanted = math.ceil(self.count * share)
        running = 0
        for bucket, count in enumerate(self.buckets):
            running += count
            if count and running >= wanted:
                return min((1 << bucket) - 1, self.largest)
        return self.largest

    def merge(self, other: Sizes) -> None:
        self.count += other.count
        self.total += other.total
        self.largest = max(self.largest, other.largest)
        self.buckets = [mine + theirs for mine, theirs in zip(self.buckets, other.buckets, strict=True)]

    def summary(self) -> dict[str, int]:
        return {"count": self.count, "p50": self.percentile(0.5), "p99": self.percentile(0.99),
                "max": self.largest}


class Distinct:
    """The first `capacity` distinct values seen (enough to show and classify; later ones are counted, not kept)."""

    __slots__ = ("capacity", "seen", "values")

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self.values: dict[str, None] = {}
        self.seen = 0

    def add(self, value: str) -> None:
        self.seen += 1
        if len(self.values) < self.capacity:
            self.values[value] = None

    def merge(self, other: Distinct) -> None:
        self.seen += other.seen
        for value in other.values:
            if len(self.values) >= self.capacity:
                break
            self.values[value] = None

    def shrink(self, capacity: int) -> None:
        """Keep the first `capacity` values (a sealed time slice's)."""
        if len(self.values) > capacity:
            self.values = dict.fromkeys(list(self.values)[:capacity])
        self.capacity = min(self.capacity, capacity)
