"""DynamoDB Streams on PostgreSQL: what the shared contract (test_stream_contract.py) cannot show on one engine
alone: nodes writing one stream at once, writer-driven rollover, shard ranges, retention of whole streams, and the
schema migration."""

from __future__ import annotations

import multiprocessing
import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import psycopg
import pytest

from openddb.model import Item
from openddb.model.schema import StreamMeta, StreamViewType, TableMeta
from openddb.storage.base import HASH_SPACE, StorageKey, StreamRecord, StreamSettings, WriteOp, shard_slot
from tests.storage.conftest import needs_postgres, scratch_database
from tests.storage.test_engine_contract import new_meta

pytestmark = needs_postgres

KEYS = 6  # items the writers share


_OPENED: list[Any] = []  # the engines a test opened, closed after it
_STORE: list[str] = []  # the URL of the test's own database


def engine_with(settings: StreamSettings, url: str | None = None) -> Any:
    from openddb.storage.postgres import PostgresEngine

    engine = PostgresEngine(url or _STORE[0])
    engine.stream_settings = settings
    _OPENED.append(engine)
    return engine


@pytest.fixture(autouse=True)
def _own_database() -> Iterator[None]:
    """Each test on a database of its own: the upkeep's settings (short rollover, short retention) reach every
    stream of a store, and must not reach the streams of tests running beside it."""
    with scratch_database() as url:
        _STORE[:] = [url]
        try:
            yield
        finally:
            for engine in _OPENED:
                if not engine._conn.closed:
                    engine.close()
            _OPENED.clear()


_PREFIX = "pgstream-"


def streamed(engine: Any, view: StreamViewType = "NEW_AND_OLD_IMAGES") -> TableMeta:
    meta = new_meta(f"{_PREFIX}{uuid.uuid4().hex[:12]}")
    meta.stream = StreamMeta(label=f"2026-11-29T00:00:00.{uuid.uuid4().int % 1000:03d}", view_type=view,
                             created_at=time.time())
    created: TableMeta = engine.create_table(meta)
    return created


def skey(k: int) -> StorageKey:
    # Keys spread over the hash space, so several slots (and their rollovers) are busy at once.
    return StorageKey(k * (HASH_SPACE // KEYS), b"p", b"k%d" % k)


def bump(k: int) -> Any:
    def apply(old: Item | None) -> Item | None:
        n = 0 if old is None else int(old["n"]["N"])
        return {"pk": {"S": "p"}, "sk": {"S": f"k{k}"}, "n": {"N": str(n + 1)}}
    return apply


def by_shard(engine: Any, sid: int) -> list[tuple[Any, list[StreamRecord]]]:
    return [(shard, engine.read_stream(sid, shard.shard_id, 0, 100_000)) for shard in engine.list_shards(sid)]


def _writer(url: str, name: str, rounds: int) -> None:
    """One node: increments of the shared items, alone and in multi-item writes (one key twice, too)."""
    engine = engine_with(StreamSettings(shards=3, shard_seconds=0.05, retention_seconds=3600), url)
    meta = engine.get_table(name)
    for i in range(rounds):
        a, b = i % KEYS, (i * 5 + 1) % KEYS
        if i % 3 == 0:
            ops = [WriteOp(meta, skey(a), bump(a))]
        elif i % 3 == 1:
            ops = [WriteOp(meta, skey(a), bump(a)), WriteOp(meta, skey(b), bump(b))]
        else:
            ops = [WriteOp(meta, skey(a), bump(a)), WriteOp(meta, skey(a), bump(a))]
        engine.write([op for op in ops if op.key != skey(b) or a != b])


def test_nodes_writing_one_stream_record_every_change_once_in_order() -> None:
    """Two processes (two nodes) increment shared items while shards roll over (by writers and by the upkeep
    running beside them): every change has exactly one record, each item's records read 1, 2, 3... in sequence
    order along its slot's lineage, and every record lies within its shard's sequence range."""
    engine = engine_with(StreamSettings(shards=3, shard_seconds=0.05, retention_seconds=3600))
    meta = streamed(engine)
    assert meta.stream is not None
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_writer, args=(_STORE[0], meta.name, 150)) for _ in range(2)]
    for process in writers:
        process.start()
    while any(process.is_alive() for process in writers):
        engine.maintain_streams(time.time())
        time.sleep(0.02)
    assert all(process.exitcode == 0 for process in writers)
    lineage: dict[int, list[StreamRecord]] = {}
    shards = by_shard(engine, meta.stream.stream_id)
    assert len(shards) > 3  # (rolled over)
    for shard, records in shards:
        assert all(shard.starting_seq < r.seq for r in records)
        assert shard.ending_seq is None or all(r.seq <= shard.ending_seq for r in records)
        lineage.setdefault(shard.slot, []).extend(records)
    for k in range(KEYS):
        slot = shard_slot(skey(k).h, 3)
        mine = [r for r in lineage[slot] if r.key_item(("pk", "sk"))["sk"]["S"] == f"k{k}"]
        assert [r.seq for r in mine] == sorted(r.seq for r in mine)
        stored = engine.get(meta, skey(k))
        final = int(orjson.loads(stored.data)["n"]["N"])
        assert [int(orjson.loads(r.new or b"")["n"]["N"]) for r in mine] == list(range(1, final + 1))
        assert [r.kind for r in mine] == ["INSERT"] + ["MODIFY"] * (final - 1)


def test_a_writer_rolls_over_only_its_own_slot() -> None:
    """A write finding its shard past its period closes it at its last record and opens its child; the other
    slots' shards wait for their own writes (or the upkeep)."""
    engine = engine_with(StreamSettings(shards=2, shard_seconds=0.2, retention_seconds=3600))
    meta = streamed(engine)
    assert meta.stream is not None
    engine.write([WriteOp(meta, skey(0), bump(0))])
    time.sleep(0.25)
    engine.write([WriteOp(meta, skey(0), bump(0))])
    shards = engine.list_shards(meta.stream.stream_id)
    parent, other, child = shards
    assert (parent.slot, other.slot, child.slot) == (0, 1, 0)
    assert child.parent_id == parent.shard_id and other.ending_seq is None and child.ending_seq is None
    (first,) = engine.read_stream(meta.stream.stream_id, parent.shard_id, 0, 10)
    (second,) = engine.read_stream(meta.stream.stream_id, child.shard_id, 0, 10)
    assert parent.ending_seq == first.seq < child.starting_seq < second.seq


def test_shard_ids_and_empty_shards() -> None:
    """Shard ids have DynamoDB's form; a shard closed empty ends at its starting number, which no record has."""
    engine = engine_with(StreamSettings(shards=4, shard_seconds=3600, retention_seconds=3600))
    meta = streamed(engine, "KEYS_ONLY")
    assert meta.stream is not None
    shards = engine.list_shards(meta.stream.stream_id)
    assert all(re.fullmatch(r"shardId-\d{20}-[0-9a-f]{8}", s.shard_id) for s in shards)
    assert len({s.shard_id for s in shards}) == 4
    meta.stream.enabled = False
    engine.update_table(meta)
    assert all(s.ending_seq == s.starting_seq for s in engine.list_shards(meta.stream.stream_id))


def test_the_stream_fixes_its_shard_count() -> None:
    """A node started with another --stream-shards writes a stream's records into the shards it was created with."""
    first = engine_with(StreamSettings(shards=2))
    second = engine_with(StreamSettings(shards=8))
    meta = streamed(first)
    assert meta.stream is not None
    key = StorageKey(HASH_SPACE - 1, b"p", b"k")
    second.write([WriteOp(meta, key, lambda old: {"pk": {"S": "p"}, "sk": {"S": "k"}})])
    (shard,) = [s for s, records in by_shard(first, meta.stream.stream_id) if records]
    assert shard.slot == 1


def test_disabling_while_another_node_writes() -> None:
    """A stream disabled while another node writes: the records are those of the writes committed before the
    change, one per increment with no gap, each inside its closed shard's range; later writes record nothing."""
    engine = engine_with(StreamSettings(shards=2, shard_seconds=3600, retention_seconds=3600))
    other = engine_with(StreamSettings(shards=2, shard_seconds=3600, retention_seconds=3600))
    meta = streamed(engine)
    assert meta.stream is not None
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            table = other.get_table(meta.name)
            while not stop.is_set():
                other.write([WriteOp(table, skey(1), bump(1))])
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=write)
    thread.start()
    time.sleep(0.2)
    meta.stream.enabled = False
    engine.update_table(meta)
    time.sleep(0.1)
    stop.set()
    thread.join()
    assert not errors
    records = [(shard, r) for shard, rs in by_shard(engine, meta.stream.stream_id) for r in rs]
    assert all(shard.ending_seq is not None and r.seq <= shard.ending_seq for shard, r in records)
    ns = [int(orjson.loads(r.new or b"")["n"]["N"]) for _shard, r in records]
    final = int(orjson.loads(engine.get(meta, skey(1)).data)["n"]["N"])
    assert ns == list(range(1, len(ns) + 1)) and 0 < len(ns) < final


def test_retention_drops_disabled_streams_and_closed_shards() -> None:
    """Past retention, a disabled stream (or a deleted table's) is gone with its shards and records."""
    engine = engine_with(StreamSettings(shards=2, shard_seconds=3600, retention_seconds=0.3))
    meta = streamed(engine)
    assert meta.stream is not None
    engine.write([WriteOp(meta, skey(0), bump(0))])
    engine.delete_table(meta.name)
    assert engine.get_stream(str(meta.stream_arn)) is not None
    time.sleep(0.4)
    engine.maintain_streams(time.time())
    assert engine.get_stream(str(meta.stream_arn)) is None and engine.list_streams(meta.name) == []
    cur = engine._cursor()
    assert cur.execute("SELECT count(*) FROM openddb_stream_shards WHERE sid=%s",
                       (meta.stream.stream_id,)).fetchone()[0] == 0
    assert cur.execute("SELECT count(*) FROM openddb_stream_records r WHERE NOT EXISTS (SELECT 1 FROM "
                       "openddb_stream_shards s WHERE s.shard_no = r.shard_no)").fetchone()[0] == 0


def test_a_version_5_database_gains_streams() -> None:
    """A database of schema version 5 (tables, items) migrates on start and its tables can enable streams."""
    from openddb.storage.postgres import _MIGRATIONS, SCHEMA_VERSION

    with scratch_database() as url:
        with psycopg.connect(url, autocommit=True) as old, old.cursor() as cur:
            for version in range(1, 6):
                for statement in _MIGRATIONS[version]:
                    statement(cur) if callable(statement) else cur.execute(statement)
            cur.execute("INSERT INTO openddb_catalog VALUES ('schema_version', 5), ('catalog_version', 0), "
                        "('next_tid', 1)")
        engine = engine_with(StreamSettings(shards=1), url)
        try:
            assert engine._cursor().execute(
                "SELECT value FROM openddb_catalog WHERE key='schema_version'").fetchone()[0] == SCHEMA_VERSION
            meta = streamed(engine, "NEW_IMAGE")
            engine.write([WriteOp(meta, skey(0), bump(0))])
            assert meta.stream is not None and len(by_shard(engine, meta.stream.stream_id)[0][1]) == 1
        finally:
            engine.close()  # (before its database is dropped)


def test_the_sequence_number_is_taken_after_the_shard_lock() -> None:
    """A record waiting for its shard's lock takes its number once it holds the lock, so a number taken by anyone
    while it waited is lower: the order of numbers in a shard is the order of the commits."""
    engine = engine_with(StreamSettings(shards=1))
    meta = streamed(engine)
    assert meta.stream is not None
    (shard,) = engine.list_shards(meta.stream.stream_id)
    with psycopg.connect(_STORE[0], autocommit=True) as holder:
        holder.execute("BEGIN")
        holder.execute("SELECT 1 FROM openddb_stream_shards WHERE shard_id=%s FOR UPDATE", (shard.shard_id,))
        writer = threading.Thread(target=engine.write, args=([WriteOp(meta, skey(0), bump(0))],))
        writer.start()
        time.sleep(0.3)  # (the write now waits for the shard's lock)
        taken = holder.execute("SELECT nextval('openddb_stream_seq')").fetchone()[0]
        holder.execute("COMMIT")
        writer.join()
    (record,) = engine.read_stream(meta.stream.stream_id, shard.shard_id, 0, 10)
    assert record.seq > taken
