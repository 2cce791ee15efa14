"""The throttle's buckets in shared memory: two views of one file (two workers) draw on one bucket, a bucket found
again keeps its tokens, and when the slots a key probes are all taken the least recently used one is given up."""

from __future__ import annotations

from pathlib import Path

import pytest

from openddb.api import shared_buckets
from openddb.api.shared_buckets import SharedBucket, SharedBuckets, create_buckets


def test_two_workers_draw_on_one_bucket(tmp_path: Path) -> None:
    path = str(tmp_path / "buckets")
    create_buckets(path)
    first, second = SharedBuckets(path), SharedBuckets(path)
    mine = SharedBucket(first, "table r", 5.0, 1500.0, 100.0)
    theirs = SharedBucket(second, "table r", 5.0, 1500.0, 101.0, unused=50.0)  # found: keeps its 5 tokens
    assert theirs.level(100.0) == 5.0
    mine.take(15.0, 100.0)
    assert theirs.level(100.0) == -10.0
    assert mine.level(102.0) == 0.0  # two seconds at 5 a second
    theirs.take(1.0, 101.0)  # (stamped before the other's read of the clock: no refill, no going back)
    assert mine.level(102.0) == -1.0


def few_slots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slots: int, probe: int) -> SharedBuckets:
    """Buckets of `slots` slots, a key probing `probe` of them."""
    monkeypatch.setattr(shared_buckets, "SLOTS", slots)
    monkeypatch.setattr(shared_buckets, "PROBE", probe)
    path = str(tmp_path / "buckets")
    with open(path, "wb") as handle:
        handle.truncate(shared_buckets.SIZE)
    return SharedBuckets(path)


def test_a_full_probe_gives_up_the_least_recently_used_slot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = few_slots(tmp_path, monkeypatch, 2, 2)
    old = SharedBucket(store, "old", 1.0, 10.0, 1.0)
    recent = SharedBucket(store, "recent", 1.0, 10.0, 5.0)
    assert {old.offset, recent.offset} == {16, 16 + 32}
    new = SharedBucket(store, "new", 2.0, 10.0, 6.0)
    assert new.offset == old.offset and new.level(6.0) == 2.0
    assert recent.level(5.0) == 1.0


def test_what_other_nodes_drew_is_owed_by_a_bucket_made_or_yet_to_be(tmp_path: Path) -> None:
    path = str(tmp_path / "buckets")
    create_buckets(path)
    store = SharedBuckets(path)
    made = SharedBucket(store, "made", 5.0, 1500.0, 10.0)
    store.owe("made", 12.0, 10.0)
    assert made.level(10.0) == -7.0
    store.owe("later", 4.0, 10.0)
    store.owe("later", 3.0, 11.0)
    later = SharedBucket(store, "later", 5.0, 1500.0, 12.0)  # starts with a second's 5, less the 7 owed
    assert later.level(12.0) == -2.0
    again = SharedBucket(SharedBuckets(path), "later", 5.0, 1500.0, 12.0)  # (found: owed once only)
    assert again.level(12.0) == -2.0
