"""Partitions splitting for heat (api/partition_splits.py): a split one worker makes is the layout every worker of
the host draws on, the cut divides the load in halves, one hot key is never split, and a split is not given up
when the slots its key probes are all taken."""

from __future__ import annotations

from pathlib import Path

import pytest

from openddb.api import shared_buckets
from openddb.api.partition_splits import LocalSplits, PartitionMap, SharedSplits
from openddb.api.shared_buckets import SharedBucket, SharedBuckets, create_buckets
from openddb.api.token_buckets import TokenBucket, local_bucket
from tests.unit.test_shared_buckets import few_slots

_QUARTER = 1 << 30


def _worker(path: str) -> PartitionMap:
    """One worker's view of a table of two partitions, that splits after 5 s at its limit."""
    store = SharedBuckets(path)

    def make(key: str, rate: float, capacity: float, now: float, unused: float) -> TokenBucket:
        return SharedBucket(store, key, rate, capacity, now, unused)

    return PartitionMap("table n2", 2, make, SharedSplits(store), 5.0)


def _run_hot(partitions: PartitionMap, hashes: list[int], seconds: int) -> tuple[str, int] | None:
    """Draw a partition-second a second from the partition of `hashes[0]`, spread over `hashes`, for `seconds`
    (tenths apart); the split made, if any."""
    for tenth in range(seconds * 10):
        now = 10.0 + tenth / 10
        h = hashes[tenth % len(hashes)]
        partition = partitions.partition(h, now)
        partition.bucket.take(0.1, now)
        partition.heat.take(0.1, now)
        partition.note(h, 0.1)
        split = partitions.split_if_hot(partition, now)
        if split is not None:
            return split
    return None


def test_a_split_one_worker_makes_is_every_workers_layout(tmp_path: Path) -> None:
    path = str(tmp_path / "buckets")
    create_buckets(path)
    first, second = _worker(path), _worker(path)
    hashes = [_QUARTER - 40, _QUARTER - 30, _QUARTER + 10, _QUARTER + 20]  # (all in the first half: partition 0)
    assert second.partition(hashes[0], 10.0).bucket.key == "table n2 p0-2147483648"
    split = _run_hot(first, hashes, 10)
    assert split == ("table n2 0-2147483648", _QUARTER + 10)  # (two keys each side: the load in halves)
    for h, lower in ((hashes[0], True), (hashes[3], False)):
        mine, theirs = first.partition(h, 20.0), second.partition(h, 20.0)
        assert mine.bucket.key == theirs.bucket.key
        assert (mine.lo, mine.hi) == ((0, _QUARTER + 10) if lower else (_QUARTER + 10, 1 << 31))
    assert second.partition(3 * _QUARTER, 20.0).bucket.key == "table n2 p2147483648-4294967296"  # (the other one)


def test_one_hot_key_is_never_split(tmp_path: Path) -> None:
    path = str(tmp_path / "buckets")
    create_buckets(path)
    partitions = _worker(path)
    assert _run_hot(partitions, [12345], 30) is None
    assert partitions.partition(12345, 40.0).heat.level(39.9) <= 0  # (spent: hot all along)


def test_a_split_keeps_its_slot_when_every_slot_its_key_probes_is_taken(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    store = few_slots(tmp_path, monkeypatch, 4, 1)
    splits = SharedSplits(store)  # (the generation's slot, pinned: slot 3, where "split range" starts too)
    assert splits.split("range", 77) == 77 and splits.generation() == 1.0
    keys = [key for key in (f"bucket{n}" for n in range(200))
            if int.from_bytes(shared_buckets._digest(key)[:8], "little") % 4 == 3][:4]
    for n, key in enumerate(keys):  # (each starts at slot 3 and gives up a slot not pinned, never a split's)
        bucket = SharedBucket(store, key, 1.0, 1.0, float(n + 1))
        assert bucket.offset - 16 not in (0, 3 * 32)
    assert splits.boundary("range") == 77 and splits.generation() == 1.0
    assert splits.split("range", 99) == 77


def test_a_split_leaves_the_other_partitions_as_they_were() -> None:
    """One process: a split of one partition keeps every other partition's bucket, heat and key sample (a split
    used to make every partition of the table start again, full, with its heat back)."""
    partitions = PartitionMap("table n2", 2, local_bucket, LocalSplits(), 5.0)
    other = partitions.partition(3 * _QUARTER, 10.0)
    other.bucket.take(0.9, 10.0)
    other.note(3 * _QUARTER, 0.9)
    hashes = [_QUARTER - 40, _QUARTER - 30, _QUARTER + 10, _QUARTER + 20]
    assert _run_hot(partitions, hashes, 10) is not None
    after = partitions.partition(3 * _QUARTER, 20.0)
    assert after is other and after.sample == {3 * _QUARTER: 0.9}
