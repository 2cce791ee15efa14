"""The engine contract for DynamoDB Streams (storage/base.py): every engine records item changes the same way."""

from __future__ import annotations

import time

import orjson
import pytest

from openddb.model import Item
from openddb.model.schema import StreamMeta, StreamViewType, TableMeta
from openddb.storage.base import Engine, StorageKey, StreamRecord, StreamSettings, WriteOp, shard_slot
from tests.storage.conftest import EngineFactory
from tests.storage.test_engine_contract import new_meta


def streamed(engine: Engine, view: StreamViewType = "NEW_AND_OLD_IMAGES") -> TableMeta:
    meta = new_meta()
    meta.stream = StreamMeta(label="2026-11-29T00:00:00.000", view_type=view, created_at=time.time())
    return engine.create_table(meta)


def it(sk: str, n: int) -> Item:
    return {"pk": {"S": "p"}, "sk": {"S": sk}, "n": {"N": str(n)}}


def skey(sk: str, h: int = 7) -> StorageKey:
    return StorageKey(h, b"p", sk.encode())


def records(engine: Engine, meta: TableMeta) -> list[StreamRecord]:
    """Every record of the table's stream, shard by shard (parents first), in sequence order within each."""
    assert meta.stream is not None
    found: list[StreamRecord] = []
    for shard in engine.list_shards(meta.stream.stream_id):
        found += engine.read_stream(meta.stream.stream_id, shard.shard_id, 0, 10_000)
    return found


def test_stream_created_with_table(engine: Engine) -> None:
    """CreateTable with a stream stores it with its shards, one open shard per hash range."""
    meta = streamed(engine)
    assert meta.stream is not None and meta.stream.stream_id > 0
    stored = engine.get_table(meta.name)
    assert stored is not None and stored.stream is not None and stored.stream.stream_id == meta.stream.stream_id
    info = engine.get_stream(str(meta.stream_arn))
    assert info is not None and info.table_name == meta.name and info.disabled_at is None
    assert info.key_schema == meta.key_schema_wire()
    assert [s.arn for s in engine.list_streams(meta.name)] == [meta.stream_arn]
    shards = engine.list_shards(meta.stream.stream_id)
    assert sorted(s.slot for s in shards) == list(range(engine.stream_settings.shards))
    assert all(s.ending_seq is None and s.parent_id is None for s in shards)


def test_every_change_is_one_record_in_order(engine: Engine) -> None:
    """Puts, updates and deletes write one record each, with the images the view type keeps; a write that
    changes nothing writes none; two changes of one key in one request are two records, in order."""
    meta = streamed(engine)
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 1))])
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 2))])
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 2))])  # unchanged: no record
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 3)), WriteOp(meta, skey("a"), lambda old: None)])
    engine.write([WriteOp(meta, skey("b"), lambda old: None)])  # nothing to delete: no record
    got = records(engine, meta)
    assert [r.kind for r in got] == ["INSERT", "MODIFY", "MODIFY", "REMOVE"]
    assert [r.seq for r in got] == sorted(r.seq for r in got)
    assert all(r.key_item(("pk", "sk")) == {"pk": {"S": "p"}, "sk": {"S": "a"}} for r in got)
    assert [None if r.old is None else orjson.loads(r.old)["n"]["N"] for r in got] == [None, "1", "2", "3"]
    assert [None if r.new is None else orjson.loads(r.new)["n"]["N"] for r in got] == ["1", "2", "3", None]
    assert all(r.origin == "user" for r in got)


@pytest.mark.parametrize("view", ["NEW_AND_OLD_IMAGES", "KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE"])
def test_blind_writes_record_the_item_as_stored(engine: Engine, view: StreamViewType) -> None:
    """Writes whose caller needs nothing of the old item (blind) are recorded with the item as it was stored:
    a blind rewrite of the same item (its attributes in another order) and a blind delete of no item write no
    record; two blind writes of one key in one request are two records, in order."""
    meta = streamed(engine, view)
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 1), blind=True)])
    engine.write([WriteOp(meta, skey("a"), lambda old: dict(reversed(it("a", 1).items())), blind=True)])
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 2), blind=True),
                  WriteOp(meta, skey("a"), lambda old: it("a", 3), blind=True)])
    engine.write([WriteOp(meta, skey("a"), lambda old: None, blind=True),
                  WriteOp(meta, skey("b"), lambda old: None, blind=True)])
    got = records(engine, meta)
    assert [r.kind for r in got] == ["INSERT", "MODIFY", "MODIFY", "REMOVE"]
    assert all(r.key_item(("pk", "sk")) == {"pk": {"S": "p"}, "sk": {"S": "a"}} for r in got)
    olds = [None, "1", "2", "3"] if view in ("NEW_AND_OLD_IMAGES", "OLD_IMAGE") else [None] * 4
    news = ["1", "2", "3", None] if view in ("NEW_AND_OLD_IMAGES", "NEW_IMAGE") else [None] * 4
    assert [None if r.old is None else orjson.loads(r.old)["n"]["N"] for r in got] == olds
    assert [None if r.new is None else orjson.loads(r.new)["n"]["N"] for r in got] == news


@pytest.mark.parametrize("view", ["KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE"])
def test_view_type_keeps_only_its_images(engine: Engine, view: StreamViewType) -> None:
    meta = streamed(engine, view)
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 1))])
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 2), origin="ttl")])
    first, second = records(engine, meta)
    assert (first.old, second.old is not None) == (None, view == "OLD_IMAGE")
    assert (first.new is not None, second.new is not None) == (view == "NEW_IMAGE",) * 2
    assert second.origin == "ttl"


def test_rejected_write_writes_no_record(engine: Engine) -> None:
    meta = streamed(engine)

    def fail(old: Item | None) -> Item | None:
        raise ValueError("refused")

    with pytest.raises(ValueError):
        engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 1)), WriteOp(meta, skey("b"), fail)])
    assert records(engine, meta) == []


def test_disable_and_delete_keep_the_stream_readable(engine: Engine) -> None:
    """Disabling closes every shard and stops recording; the stream stays listed (disabled) with its records;
    a deleted table's enabled stream is disabled likewise."""
    meta = streamed(engine)
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 1))])
    assert meta.stream is not None
    meta.stream.enabled = False
    engine.update_table(meta)
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 2))])
    info = engine.get_stream(str(meta.stream_arn))
    assert info is not None and info.disabled_at is not None
    assert all(s.ending_seq is not None for s in engine.list_shards(meta.stream.stream_id))
    assert len(records(engine, meta)) == 1
    other = streamed(engine)
    engine.delete_table(other.name)
    gone = engine.get_stream(str(other.stream_arn))
    assert gone is not None and gone.disabled_at is not None


def test_rollover_keeps_lineage_and_order(open_private_engine: EngineFactory) -> None:
    """A shard older than its period closes at its last record; its child (same hash range, naming it as
    parent) takes the later records, so one item's records read in order across the lineage."""
    engine = open_private_engine()
    engine.stream_settings = StreamSettings(shards=2, shard_seconds=0.2, retention_seconds=3600)
    meta = streamed(engine)
    assert meta.stream is not None
    for n in range(3):
        engine.write([WriteOp(meta, skey("a"), lambda old, n=n: it("a", n))])
        time.sleep(0.25)
    engine.maintain_streams(time.time())
    shards = engine.list_shards(meta.stream.stream_id)
    slot = shard_slot(7, 2)
    lineage = [s for s in shards if s.slot == slot]
    assert len(lineage) == 4 and lineage[0].parent_id is None
    assert [s.parent_id for s in lineage[1:]] == [s.shard_id for s in lineage[:-1]]
    assert all(s.ending_seq is not None for s in lineage[:-1]) and lineage[-1].ending_seq is None
    got = [r for s in lineage for r in engine.read_stream(meta.stream.stream_id, s.shard_id, 0, 100)]
    assert [orjson.loads(r.new or b"{}")["n"]["N"] for r in got] == ["0", "1", "2"]
    for shard in lineage[:-1]:
        inside = engine.read_stream(meta.stream.stream_id, shard.shard_id, 0, 100)
        assert all(r.seq <= (shard.ending_seq or 0) for r in inside)


def test_retention_trims_records(open_private_engine: EngineFactory) -> None:
    engine = open_private_engine()
    engine.stream_settings = StreamSettings(shards=1, shard_seconds=3600, retention_seconds=0.3)
    meta = streamed(engine)
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 1))])
    time.sleep(0.4)
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 2))])
    engine.maintain_streams(time.time())
    got = records(engine, meta)
    assert [r.kind for r in got] == ["MODIFY"]
    assert meta.stream is not None
    (shard,) = engine.list_shards(meta.stream.stream_id)
    assert 0 < shard.trimmed_seq <= got[0].seq


def test_two_processes_record_every_change_once(open_engine: EngineFactory) -> None:
    """Two engines on one store (two workers or nodes) writing one table: every change recorded once, each
    item's records in its write order."""
    first, second = open_engine(), open_engine()
    meta = streamed(first)
    other = second.get_table(meta.name)
    assert other is not None
    for n in range(20):
        engine, table = (first, meta) if n % 2 else (second, other)
        sk = f"k{n % 3}"
        engine.write([WriteOp(table, skey(sk, h=n % 3 * 1_500_000_000), lambda old, n=n, sk=sk: it(sk, n))])
    got = records(first, meta)
    assert len(got) == 20 and len({r.seq for r in got}) == 20
    for k in range(3):
        ns = [int(orjson.loads(r.new or b"{}")["n"]["N"]) for r in got
              if r.key_item(("pk", "sk"))["sk"]["S"] == f"k{k}"]
        assert ns == list(range(k if k else 3, 20, 3)) if k else ns == list(range(0, 20, 3))


def test_a_streams_shard_count_is_fixed_at_creation(open_engine: EngineFactory) -> None:
    """A process started with another shard count still writes a stream's records to the shards it was created
    with, so each key keeps to one lineage."""
    first, second = open_engine(), open_engine()
    first.stream_settings = StreamSettings(shards=2)
    second.stream_settings = StreamSettings(shards=5)
    meta = streamed(first)
    table = second.get_table(meta.name)
    assert table is not None and meta.stream is not None
    h = 3_000_000_000
    second.write([WriteOp(table, skey("a", h=h), lambda old: it("a", 1))])
    shards = second.list_shards(meta.stream.stream_id)
    assert len(shards) == 2
    (holder,) = [s for s in shards if second.read_stream(meta.stream.stream_id, s.shard_id, 0, 10)]
    assert holder.slot == shard_slot(h, 2)
