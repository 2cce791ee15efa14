"""The engine contract for secondary indexes (storage/base.py): maintenance inside `write`, index reads, online
creation and deletion. Runs on every engine (conftest), so the API behaves the same over either."""

from __future__ import annotations

import threading
import time
from typing import Any

import orjson
import pytest

from openddb.errors import ItemCollectionSizeLimitExceededException
from openddb.model import Item
from openddb.model.indexes import entry_of
from openddb.model.keys import encode_key, partition_hash
from openddb.model.schema import IndexMeta, KeyAttribute, TableMeta
from openddb.model.values import item_size
from openddb.storage.base import HASH_SPACE, CatalogChanged, Engine, IndexKey, SortRange, StorageKey, WriteOp
from tests.storage.conftest import EngineFactory
from tests.storage.test_engine_contract import new_meta

GSI = IndexMeta("by-g", "GLOBAL", [KeyAttribute("g", "S")], [KeyAttribute("n", "N")], "KEYS_ONLY", index_id=1)
LSI = IndexMeta("by-l", "LOCAL", [KeyAttribute("pk", "S")], [KeyAttribute("l", "S")], "INCLUDE", ["x"], index_id=2)


def indexed_meta(*indexes: IndexMeta) -> TableMeta:
    meta = new_meta()
    meta.attribute_definitions += [{"AttributeName": "g", "AttributeType": "S"},
                                   {"AttributeName": "n", "AttributeType": "N"},
                                   {"AttributeName": "l", "AttributeType": "S"}]
    meta.indexes = list(indexes or (GSI, LSI))
    return meta


def doc(pk: str, sk: str, **attrs: Any) -> Item:
    """An item with table key (pk, sk); keyword values become S attributes, ints N attributes."""
    item: Item = {"pk": {"S": pk}, "sk": {"S": sk}}
    for name, value in attrs.items():
        item[name] = {"N": str(value)} if isinstance(value, int) else {"S": value}
    return item


def skey(item: Item) -> StorageKey:
    pk = encode_key(item["pk"])
    return StorageKey(partition_hash(pk), pk, encode_key(item["sk"]))


def put(meta: TableMeta, item: Item) -> WriteOp:
    return WriteOp(meta, skey(item), lambda old: item)


def delete(meta: TableMeta, item: Item) -> WriteOp:
    return WriteOp(meta, skey(item), lambda old: None)


def expected(meta: TableMeta, index: IndexMeta, items: list[Item]) -> list[tuple[IndexKey, Item, int]]:
    """The entries `index` must hold for `items`, in index-scan order."""
    rows = []
    for item in items:
        entry = entry_of(meta, index, item)
        if entry is not None:
            key = skey(item)
            rows.append((IndexKey(entry.h, entry.pk, entry.sk, key.pk, key.sk), entry.item, entry.size))
    return sorted(rows, key=lambda row: (row[0].h, row[0].pk, row[0].sk, row[0].tpk, row[0].tsk))


def held(engine: Engine, meta: TableMeta, index: IndexMeta) -> list[tuple[IndexKey, Item, int]]:
    return [(row.key, orjson.loads(row.data), row.size) for row in engine.index_scan(meta, index, 0, HASH_SPACE, None)]


def g_key(value: str) -> tuple[int, bytes]:
    pk = encode_key({"S": value})
    return partition_hash(pk), pk


def test_writes_maintain_every_index(engine: Engine) -> None:
    """Puts, key changes, projection changes, sparse items and deletes leave exactly the entries of the items."""
    meta = engine.create_table(indexed_meta())
    a, b = doc("p", "a", g="red", n=1, l="x1", x="keep", y="drop"), doc("p", "b", g="red", n=2)
    c = doc("q", "c", l="only-lsi")  # no g: absent from the GSI (sparse)
    engine.write([put(meta, a), put(meta, b), put(meta, c)])
    for index in (GSI, LSI):
        assert held(engine, meta, index) == expected(meta, index, [a, b, c])
    assert held(engine, meta, LSI)[0][1] == {"pk": {"S": "p"}, "sk": {"S": "a"}, "l": {"S": "x1"}, "x": {"S": "keep"}}
    moved, b2 = doc("p", "a", g="blue", n=1, l="x2", x="new"), doc("p", "b", g="red", n=2, y="other")
    engine.write([put(meta, moved), put(meta, b2), delete(meta, c)])
    for index in (GSI, LSI):
        assert held(engine, meta, index) == expected(meta, index, [moved, b2])
    engine.write([WriteOp(meta, skey(moved), lambda old: old)])  # untouched: entries stay
    assert held(engine, meta, GSI) == expected(meta, GSI, [moved, b2])
    count, size = engine.index_stats(meta, GSI)
    assert (count, size) == (2, sum(row[2] for row in expected(meta, GSI, [moved, b2])))
    engine.write([delete(meta, moved), delete(meta, b2)])
    assert engine.index_stats(meta, GSI) == engine.index_stats(meta, LSI) == (0, 0)


def test_a_key_written_twice_in_one_write(engine: Engine) -> None:
    """Several ops on one item in one write leave the entries of its final state only."""
    meta = engine.create_table(indexed_meta())
    first, second = doc("p", "a", g="one", n=1), doc("p", "a", g="two", n=1)
    engine.write([put(meta, first), put(meta, second)])
    assert held(engine, meta, GSI) == expected(meta, GSI, [second])
    engine.write([put(meta, first), delete(meta, first)])
    assert held(engine, meta, GSI) == []


def test_failed_write_leaves_the_index(engine: Engine) -> None:
    """An exception rolls back index entries with the items."""
    meta = engine.create_table(indexed_meta())
    item = doc("p", "a", g="red", n=1)
    engine.write([put(meta, item)])

    def fail(old: Item | None) -> Item | None:
        raise RuntimeError("rejected")

    with pytest.raises(RuntimeError):
        engine.write([put(meta, doc("p", "a", g="blue", n=1)), put(meta, doc("p", "z", g="new", n=1)),
                      WriteOp(meta, skey(doc("p", "q")), fail)])
    assert held(engine, meta, GSI) == expected(meta, GSI, [item])


def test_index_query_order_bounds_direction_and_after(engine: Engine) -> None:
    """An index Query reads one index partition in (sk, tpk, tsk) order, many items sharing one index key."""
    meta = engine.create_table(indexed_meta())
    items = [doc(f"p{i % 7}", f"s{i:03d}", g="hot", n=i % 50) for i in range(150)]
    items += [doc("p0", f"o{i}", g="cold", n=i) for i in range(5)]
    engine.write([put(meta, item) for item in items])
    h, pk = g_key("hot")
    everything = [row[0] for row in expected(meta, GSI, items) if row[0].pk == pk]
    assert len(everything) == 150

    def keys(sort: SortRange, forward: bool = True, after: IndexKey | None = None) -> list[IndexKey]:
        return [row.key for row in engine.index_query(meta, GSI, h, pk, sort, forward, after)]

    assert keys(SortRange()) == everything
    assert keys(SortRange(), forward=False) == everything[::-1]
    low, high = encode_key({"N": "10"}), encode_key({"N": "20"})
    assert keys(SortRange(low, True, high, False)) == [k for k in everything if low <= k.sk < high]
    assert keys(SortRange(low, False, high, True)) == [k for k in everything if low < k.sk <= high]
    assert keys(SortRange(), after=everything[99]) == everything[100:]
    assert keys(SortRange(high=high), forward=False, after=everything[40]) == \
        [k for k in everything[:40] if k.sk <= high][::-1]
    first = next(iter(engine.index_query(meta, GSI, h, pk, SortRange(), True, None)))
    assert set(orjson.loads(first.data)) == {"pk", "sk", "g", "n"}  # KEYS_ONLY: table and index keys


def test_index_scan_segments_and_after(engine: Engine) -> None:
    """An index Scan walks (h, pk, sk, tpk, tsk) order within [h_low, h_high), strictly after a given entry."""
    meta = engine.create_table(indexed_meta())
    items = [doc(f"p{i}", "s", g=f"g{i % 40}", n=i) for i in range(200)]
    engine.write([put(meta, item) for item in items])
    everything = [row.key for row in engine.index_scan(meta, GSI, 0, HASH_SPACE, None)]
    assert everything == [row[0] for row in expected(meta, GSI, items)]
    half = [row.key for row in engine.index_scan(meta, GSI, 0, HASH_SPACE // 2, None)]
    assert half == [k for k in everything if k.h < HASH_SPACE // 2]
    assert [row.key for row in engine.index_scan(meta, GSI, 0, HASH_SPACE, everything[120])] == everything[121:]


def test_collection_size_and_limit(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """An item collection is its items plus their LSI entries; a write growing it past the limit is refused."""
    meta = engine.create_table(indexed_meta())
    items = [doc("p", f"s{i}", l=f"l{i}", x="v" * 100, g="g", n=i) for i in range(3)]
    engine.write([put(meta, item) for item in items] + [put(meta, doc("other", "s", l="l"))])
    lsi_sizes = sum(row[2] for row in expected(meta, LSI, items))
    size = sum(item_size(item) for item in items) + lsi_sizes
    where = skey(items[0])
    assert engine.collection_size(meta, where.h, where.pk) == size
    for module in ("openddb.storage.sqlite_indexes", "openddb.storage.postgres_indexes"):
        monkeypatch.setattr(f"{module}.ITEM_COLLECTION_LIMIT", size + 50)
    with pytest.raises(ItemCollectionSizeLimitExceededException):
        engine.write([put(meta, doc("p", "big", l="l", x="v" * 200))])
    assert engine.get(meta, skey(doc("p", "big"))) is None
    engine.write([put(meta, doc("p", "small", x="v"))])  # no LSI entry, and it fits
    engine.write([put(meta, doc("other", "big", x="v" * 500))])  # another collection
    shrunk = doc("p", "s0", l="l0")
    engine.write([put(meta, shrunk)])  # shrinking is always allowed


def test_write_maintains_an_index_another_engine_added(open_engine: EngineFactory) -> None:
    """A write maintains the indexes as committed, even if the TableMeta it was handed predates them."""
    first, second = open_engine(), open_engine()
    meta = first.create_table(indexed_meta(LSI))
    stale = second.get_table(meta.name)
    assert stale is not None and [i.index_id for i in stale.indexes] == [2]
    first.update_table(TableMeta.from_json(_with_indexes(meta, LSI, GSI)))
    item = doc("p", "a", g="red", n=1, l="l")
    write_or_refresh(second, stale, item)
    current = first.get_table(meta.name)
    assert current is not None
    assert held(first, current, GSI) == expected(current, GSI, [item])
    dropped = TableMeta.from_json(_with_indexes(current, GSI))
    first.update_table(dropped)  # the LSI dropped, its entries with it: no longer maintained
    write_or_refresh(second, stale, doc("p", "b", g="red", n=2, l="l"))
    assert held(first, current, LSI) == []
    assert [row[0].tsk for row in held(first, current, GSI)] == [b"a", b"b"]


def write_or_refresh(engine: Engine, stale: TableMeta, item: Item) -> None:
    """Write with a description that predates a catalog change: an engine either maintains the indexes as
    committed anyway, or refuses (CatalogChanged, nothing written) until the table is looked up again."""
    try:
        engine.write([put(stale, item)])
    except CatalogChanged:
        fresh = engine.get_table(stale.name)
        assert fresh is not None
        engine.write([put(fresh, item)])


def _with_indexes(meta: TableMeta, *indexes: IndexMeta) -> bytes:
    copy = TableMeta.from_json(meta.to_json())
    copy.indexes = list(indexes)
    return copy.to_json()


def test_backfill_in_chunks_then_drop(engine: Engine) -> None:
    """A backfill fills an index from existing items chunk by chunk; drop_index removes every entry."""
    meta = engine.create_table(indexed_meta(LSI))
    items = [doc(f"p{i}", f"s{i}", g=f"g{i % 9}", n=i) for i in range(50)] + [doc("sparse", "s")]
    engine.write([put(meta, item) for item in items])
    meta = TableMeta.from_json(_with_indexes(meta, LSI, GSI))
    engine.update_table(meta)
    after, chunks = None, 0
    while True:
        after = engine.backfill_index(meta, GSI, after, 7)
        chunks += 1
        if after is None:
            break
    assert chunks == 8  # 51 rows: seven full chunks, the last one short
    assert held(engine, meta, GSI) == expected(meta, GSI, items)
    assert engine.backfill_index(meta, GSI, None, 100) is None  # idempotent
    assert held(engine, meta, GSI) == expected(meta, GSI, items)
    engine.update_table(TableMeta.from_json(_with_indexes(meta, LSI)))
    engine.drop_index(meta, GSI.index_id)
    assert engine.index_stats(meta, GSI) == (0, 0)
    assert engine.backfill_index(meta, GSI, None, 100) is None  # no longer in the catalog: nothing written
    assert engine.index_stats(meta, GSI) == (0, 0)
    assert engine.index_stats(meta, LSI)[0] == 0 and held(engine, meta, LSI) == []


def test_dropping_an_index_removes_its_entries_with_the_catalog_change(engine: Engine) -> None:
    """UpdateTable's removal of an index takes its entries in the same transaction: a crash after the catalog
    change can leave no orphaned entries behind (no separate drop_index needed)."""
    meta = engine.create_table(indexed_meta(GSI, LSI))
    engine.write([put(meta, doc(f"p{i}", "s", g="g", n=i, l="l")) for i in range(5)])
    assert engine.index_stats(meta, GSI)[0] == 5
    engine.update_table(TableMeta.from_json(_with_indexes(meta, LSI)))
    assert engine.index_stats(meta, GSI) == (0, 0)
    assert engine.index_stats(meta, LSI)[0] == 5


def test_delete_table_removes_index_entries(engine: Engine) -> None:
    """Deleting a table removes its entries; a table recreated under the name starts with empty indexes."""
    meta = engine.create_table(indexed_meta())
    engine.write([put(meta, doc("p", "a", g="red", n=1, l="l"))])
    engine.delete_table(meta.name)
    assert engine.index_stats(meta, GSI) == engine.index_stats(meta, LSI) == (0, 0)
    again = engine.create_table(indexed_meta())
    assert engine.index_stats(again, GSI) == (0, 0)


def _churn(engine: Engine, name: str, stop: threading.Event, errors: list[BaseException]) -> None:
    # Moves items between GSI keys, deletes and recreates them, while a backfill runs elsewhere. Each write
    # looks the table up first, as a request does.
    try:
        i = 0
        while not stop.is_set():
            n = i % 60
            item = doc(f"p{n}", "s", g=f"g{i % 5}", n=i)
            meta = engine.get_table(name)
            assert meta is not None
            try:
                engine.write([delete(meta, item)] if i % 7 == 0 else [put(meta, item)])
            except CatalogChanged:  # the index was added since the look-up: look again, as the server does
                continue
            i += 1
    except BaseException as error:
        errors.append(error)


def test_backfill_racing_writes_from_another_engine(open_engine: EngineFactory) -> None:
    """Writes on another engine (node) during online creation: the index ends exactly equal to the items."""
    writer, builder = open_engine(), open_engine()
    meta = builder.create_table(indexed_meta(LSI))
    builder.write([put(meta, doc(f"p{n}", "s", g="g0", n=n)) for n in range(60)])
    stop, errors = threading.Event(), []
    thread = threading.Thread(target=_churn, args=(writer, meta.name, stop, errors))
    thread.start()
    try:
        time.sleep(0.05)
        meta = TableMeta.from_json(_with_indexes(meta, LSI, GSI))
        builder.update_table(meta)
        after = builder.backfill_index(meta, GSI, None, 4)
        while after is not None:
            after = builder.backfill_index(meta, GSI, after, 4)
        time.sleep(0.05)
    finally:
        stop.set()
        thread.join()
    assert not errors
    items = [orjson.loads(row.data) for row in builder.scan(meta, 0, HASH_SPACE, None)]
    assert held(builder, meta, GSI) == expected(meta, GSI, items)


def test_index_ids_are_per_table(engine: Engine) -> None:
    """Two tables' indexes with the same index id never see each other's entries."""
    one, two = engine.create_table(indexed_meta()), engine.create_table(indexed_meta())
    engine.write([put(one, doc("p", "a", g="red", n=1)), put(two, doc("p", "b", g="red", n=2))])
    h, pk = g_key("red")
    assert [row.key.tsk for row in engine.index_query(one, GSI, h, pk, SortRange(), True, None)] == [b"a"]
    assert [row.key.tsk for row in engine.index_query(two, GSI, h, pk, SortRange(), True, None)] == [b"b"]


def test_index_created_during_a_write_waits_for_it(open_engine: EngineFactory) -> None:
    """A write in flight when another node adds an index either commits first (and the backfill sees its item)
    or maintains the new index itself: its item is never missing from the index."""
    writer, builder = open_engine(), open_engine()
    meta = builder.create_table(indexed_meta(LSI))
    meta = writer.get_table(meta.name) or meta  # the writer's own look at the table, as a request's
    item = doc("p", "a", g="red", n=1)
    inside, go = threading.Event(), threading.Event()

    def slow(old: Item | None) -> Item | None:
        inside.set()  # the write's transaction is open, with the description that has no GSI
        go.wait(5)
        return item

    errors: list[BaseException] = []

    def write() -> None:
        try:
            writer.write([WriteOp(meta, skey(item), slow)])
        except BaseException as error:
            errors.append(error)

    def create() -> None:
        try:
            builder.update_table(updated)
            after = builder.backfill_index(updated, GSI, None, 10)
            while after is not None:
                after = builder.backfill_index(updated, GSI, after, 10)
        except BaseException as error:
            errors.append(error)

    updated = TableMeta.from_json(_with_indexes(meta, LSI, GSI))
    threads = [threading.Thread(target=write), threading.Thread(target=create)]
    threads[0].start()
    assert inside.wait(5)
    threads[1].start()
    time.sleep(0.2)  # the index creation is under way (or waiting for the write)
    go.set()
    for thread in threads:
        thread.join()
    assert not errors
    assert held(builder, updated, GSI) == expected(updated, GSI, [item])
