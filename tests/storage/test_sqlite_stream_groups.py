"""Stream records of SQLite's group commit: the writes a worker stages for `flush` (optimistic, several workers)
and the ones it writes under the lock (one worker) record every change, in request order, only once committed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from openddb.errors import ItemCollectionSizeLimitExceededException
from openddb.model import Item
from openddb.model.indexes import entry_of
from openddb.model.schema import StreamMeta, TableMeta
from openddb.model.values import item_size
from openddb.storage.base import StreamSettings, WriteOp
from openddb.storage.sqlite import SQLiteEngine
from tests.storage.test_index_contract import LSI, doc, indexed_meta, put
from tests.storage.test_stream_contract import it, records, skey, streamed


@pytest.fixture(params=[True, False], ids=["optimistic", "locked"])
def worker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[SQLiteEngine, SQLiteEngine]]:
    """A server's engine (grouping its writes) and a second engine on the same store to look from."""
    engine = SQLiteEngine(str(tmp_path), group_commit=True, shared_reads=True)
    engine.session.optimistic = request.param
    other = SQLiteEngine(str(tmp_path))
    yield engine, other
    other.close()
    engine.close()


def test_a_group_records_each_write_in_order(worker: tuple[SQLiteEngine, SQLiteEngine]) -> None:
    engine, other = worker
    meta = streamed(engine)
    blind = WriteOp(meta, skey("a"), lambda old: it("a", 1), blind=True)  # the stream still needs the old item
    engine.write([blind])
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 2))])
    engine.write([WriteOp(meta, skey("a"), lambda old: None)])
    assert records(other, meta) == []  # nothing before the commit
    engine.commit()
    got = records(other, meta)
    assert [r.kind for r in got] == ["INSERT", "MODIFY", "REMOVE"]
    assert [orjson.loads(r.old)["n"]["N"] for r in got if r.old] == ["1", "2"]


def test_a_groups_blind_writes_record_each_change_in_order_in_its_shard(
        worker: tuple[SQLiteEngine, SQLiteEngine]) -> None:
    """Blind writes to keys of every shard slot, staged (optimistic: their records go in together at the commit)
    or not; then again, some rewriting their items with the same bytes (no change, no record): each shard holds
    its keys' records in order, up to its newest (which a reader reads to)."""
    engine, other = worker
    meta = streamed(engine)
    slots = [skey(f"k{i}", (i % 4) << 30) for i in range(8)]  # (4 shards: h >> 30 is the slot)
    for n, same in ((1, ()), (2, (1, 2, 5))):
        for i, key in enumerate(slots):
            value = 1 if i in same else n
            engine.write([WriteOp(meta, key, lambda old, i=i, value=value: it(f"k{i}", value), blind=True)])
        assert engine.commit() == "committed"
    got = records(other, meta)
    by_key: dict[str, list[tuple[str, str | None, str]]] = {}
    for record in got:
        image = orjson.loads(record.new or b"{}")
        old = orjson.loads(record.old)["n"]["N"] if record.old else None
        by_key.setdefault(image["sk"]["S"], []).append((record.kind, old, image["n"]["N"]))
    assert by_key == {f"k{i}": [("INSERT", None, "1")] + ([] if i in (1, 2, 5) else [("MODIFY", "1", "2")])
                      for i in range(8)}
    assert meta.stream is not None
    sid = meta.stream.stream_id
    for shard in other.list_shards(sid):
        seqs = [r.seq for r in other.read_stream(sid, shard.shard_id, 0, 100)]
        assert seqs == sorted(seqs) and len(seqs) >= 2
        assert other.shard_end(sid, shard.shard_id) == seqs[-1] + 1


def test_a_conflicted_group_records_nothing(tmp_path: Path) -> None:
    """A group that loses its check commits no record; its requests run again and record then."""
    engine = SQLiteEngine(str(tmp_path), group_commit=True, shared_reads=True)
    engine.session.optimistic = True
    other = SQLiteEngine(str(tmp_path))
    try:
        meta = streamed(engine)
        engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 1))])
        assert other.get_table(meta.name) is not None
        other.write([WriteOp(meta, skey("a"), lambda old: it("a", 9))])  # another worker changes the row read
        assert engine.commit() == "conflict"
        assert [r.new and orjson.loads(r.new)["n"]["N"] for r in records(other, meta)] == ["9"]
    finally:
        other.close()
        engine.close()


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[tuple[SQLiteEngine, SQLiteEngine]]:
    """One worker's engine, writing each request under the lock into the group's transaction, and a second engine
    on the same store to look from."""
    engine = SQLiteEngine(str(tmp_path), group_commit=True, shared_reads=True)
    other = SQLiteEngine(str(tmp_path))
    yield engine, other
    other.close()
    engine.close()


def test_a_shard_rolling_over_in_a_group_ends_at_the_groups_earlier_records(
        locked: tuple[SQLiteEngine, SQLiteEngine]) -> None:
    """The records of a group written under the lock wait for its commit; a shard that rolls over meanwhile (its
    period past at the group's next write to it) takes the ones queued for it first, so it ends at them and its
    child takes the later ones."""
    engine, other = locked
    engine.stream_settings = StreamSettings(shards=1, shard_seconds=0.2, retention_seconds=3600)
    meta = streamed(engine)
    assert meta.stream is not None
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 1))])
    time.sleep(0.25)
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 2))])
    assert engine.commit() == "committed"
    lineage = other.list_shards(meta.stream.stream_id)
    assert [s.parent_id for s in lineage[1:]] == [s.shard_id for s in lineage[:-1]]
    got = [[orjson.loads(r.new or b"{}")["n"]["N"] for r in other.read_stream(meta.stream.stream_id, s.shard_id, 0,
                                                                               100)] for s in lineage]
    assert got[-2:] == [["1"], ["2"]]
    assert lineage[-2].ending_seq == other.read_stream(meta.stream.stream_id, lineage[-2].shard_id, 0, 1)[0].seq


def refusing_second(engine: SQLiteEngine, monkeypatch: pytest.MonkeyPatch) -> tuple[TableMeta, Item, Item]:
    """A streamed table with a local secondary index and two items of one partition: the item collection limit
    is lowered so that the second one's put is refused by its index upkeep, after its record was made."""
    meta = indexed_meta(LSI)
    meta.stream = StreamMeta(label="2026-11-29T00:00:00.000", view_type="NEW_AND_OLD_IMAGES",
                             created_at=time.time())
    meta = engine.create_table(meta)
    first, second = doc("q", "a", l="l", x="v" * 300), doc("q", "b", l="l", x="v" * 300)
    size = item_size(first)
    entry = entry_of(meta, LSI, first, size)
    assert entry is not None
    monkeypatch.setattr("openddb.storage.sqlite_indexes.ITEM_COLLECTION_LIMIT", 2 * (size + entry.size) - 1)
    return meta, first, second


def test_a_refused_request_leaves_the_groups_earlier_records(locked: tuple[SQLiteEngine, SQLiteEngine],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A request written under the lock that its index upkeep refuses (an item collection past its limit) is
    undone alone, to its savepoint; the records the group queued before it still commit, its own do not."""
    engine, other = locked
    meta, first, second = refusing_second(engine, monkeypatch)
    engine.write([put(meta, first)])
    with pytest.raises(ItemCollectionSizeLimitExceededException):
        engine.write([put(meta, second)])
    assert engine.commit() == "committed"
    got = records(other, meta)
    assert [(r.kind, r.new and orjson.loads(r.new)["sk"]["S"]) for r in got] == [("INSERT", "a")]


def test_a_rollover_a_refused_request_undid_is_forgotten(locked: tuple[SQLiteEngine, SQLiteEngine],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard rolled over inside a request that is then undone to its savepoint is open again, its child gone:
    the worker's next record goes to the shard that is open (records go to the shard the worker knows open)."""
    engine, other = locked
    engine.stream_settings = StreamSettings(shards=1, shard_seconds=0.2, retention_seconds=3600)
    meta, first, second = refusing_second(engine, monkeypatch)
    assert meta.stream is not None
    engine.write([put(meta, first)])
    time.sleep(0.25)
    with pytest.raises(ItemCollectionSizeLimitExceededException):
        engine.write([put(meta, second)])  # (its record rolled the shard over first)
    engine.write([put(meta, doc("r", "c", l="l"))])
    assert engine.commit() == "committed"
    lineage = other.list_shards(meta.stream.stream_id)
    got = [(r.kind, orjson.loads(r.new or b"{}")["sk"]["S"]) for s in lineage
           for r in other.read_stream(meta.stream.stream_id, s.shard_id, 0, 100)]
    assert got == [("INSERT", "a"), ("INSERT", "c")]
    assert [s.parent_id for s in lineage[1:]] == [s.shard_id for s in lineage[:-1]]


def test_a_caught_up_reader_goes_on_past_the_other_shards_records(tmp_path: Path) -> None:
    """A reader of an open shard that took all its records goes on from past the log's newest record (so it does
    not pass over the other shards' records again at its next read), and still gets the shard's next record; a
    reader inside the group's open transaction goes on only from past the records it read (the newest may not
    commit)."""
    engine = SQLiteEngine(str(tmp_path), group_commit=True)
    meta = streamed(engine)
    assert meta.stream is not None
    sid = meta.stream.stream_id
    quiet, busy = skey("q", 0), skey("b", 3 << 30)  # (4 shards: slots 0 and 3)
    engine.write([WriteOp(meta, quiet, lambda old: it("q", 1))])
    for n in range(5):
        engine.write([WriteOp(meta, busy, lambda old, n=n: it("b", n))])
    assert engine.commit() == "committed"
    shard = next(s for s in engine.list_shards(sid) if s.slot == 0)
    top = max(r.seq for r in records(engine, meta))
    got, after = engine.read_stream_on(sid, shard.shard_id, 0, 100)
    assert [r.seq for r in got] == [shard.starting_seq] and after == top + 1
    assert engine.read_stream_on(sid, shard.shard_id, after, 100) == ([], after)
    engine.write([WriteOp(meta, quiet, lambda old: it("q", 2))])
    assert engine.commit() == "committed"
    got, _ = engine.read_stream_on(sid, shard.shard_id, after, 100)
    assert [orjson.loads(r.new or b"{}")["n"]["N"] for r in got] == ["2"]
    engine.write([WriteOp(meta, busy, lambda old: it("b", 9), blind=True)])  # (in the group's open transaction)
    assert engine.read_stream_on(sid, shard.shard_id, got[0].seq + 1, 100) == ([], got[0].seq + 1)
    assert engine.commit() == "committed"
    engine.close()
