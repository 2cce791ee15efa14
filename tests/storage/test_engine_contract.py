"""The engine contract (storage/base.py): every engine passes the same suite, so every feature works on either."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import orjson
import pytest

from openddb.errors import ConditionalCheckFailedException, ResourceInUseException
from openddb.model import Item
from openddb.model.schema import KeyAttribute, TableMeta
from openddb.storage.base import (
    HASH_SPACE,
    TOKEN_LIFETIME,
    ApplyFn,
    CatalogChanged,
    Engine,
    RequestToken,
    SortRange,
    StorageKey,
    TokenInUse,
    WriteOp,
)
from tests.storage.conftest import EngineFactory


def new_meta(name: str | None = None) -> TableMeta:
    return TableMeta(name=name or f"t-{uuid.uuid4().hex[:12]}", table_id=0, uuid=str(uuid.uuid4()),
                     hash_key=KeyAttribute("pk", "S"), range_key=KeyAttribute("sk", "S"),
                     attribute_definitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                            {"AttributeName": "sk", "AttributeType": "S"}], created_at=time.time())


def put(meta: TableMeta, key: StorageKey, item: Item) -> WriteOp:
    return WriteOp(meta, key, lambda old: item)


def delete(meta: TableMeta, key: StorageKey) -> WriteOp:
    return WriteOp(meta, key, lambda old: None)


def item(n: int) -> Item:
    return {"pk": {"S": "p"}, "n": {"N": str(n)}}


def key(sk: bytes, h: int = 7, pk: bytes = b"p") -> StorageKey:
    return StorageKey(h, pk, sk)


def fill(engine: Engine, meta: TableMeta, count: int, h: int = 7, pk: bytes = b"p") -> None:
    engine.write([put(meta, key(b"s%03d" % i, h, pk), item(i)) for i in range(count)])


def test_create_get_list_delete_table(engine: Engine) -> None:
    """The catalog round-trips a description, assigns distinct ids, lists names sorted, refuses duplicates."""
    a, b = engine.create_table(new_meta()), engine.create_table(new_meta())
    assert a.table_id != b.table_id and a.table_id > 0
    got = engine.get_table(a.name)
    assert got is not None and got.uuid == a.uuid and got.table_id == a.table_id
    names = engine.list_tables()
    assert {a.name, b.name} <= set(names) and names == sorted(names)
    with pytest.raises(ResourceInUseException) as excinfo:
        engine.create_table(new_meta(a.name))
    assert excinfo.value.message == f"Table already exists: {a.name}"
    engine.delete_table(a.name)
    assert engine.get_table(a.name) is None and a.name not in engine.list_tables()


def test_namespaced_tables_are_kept_under_their_stored_name(engine: Engine) -> None:
    """Two namespaces may each have a table of one name: the catalog keeps each under its stored name (namespace
    and name), round-trips the namespace, updates, backs up and deletes each apart from the other."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    first, second = new_meta(name), new_meta(name)
    first.namespace, second.namespace = "111111111111/eu-west-1/", "222222222222/eu-west-1/"
    engine.create_table(first)
    engine.create_table(second)
    assert engine.get_table(name) is None
    got = engine.get_table(first.stored_name)
    assert got is not None and got.uuid == first.uuid and got.namespace == first.namespace and got.name == name
    assert {first.stored_name, second.stored_name} <= set(engine.list_tables())
    engine.write([put(first, key(b"a"), item(1))])
    assert engine.get(second, key(b"a")) is None and engine.get(first, key(b"a")) is not None
    with pytest.raises(ResourceInUseException) as excinfo:
        engine.create_table(_in(second.namespace, name))
    assert excinfo.value.message == f"Table already exists: {name}"  # (the name the client gave)
    first.billing_mode = "PAY_PER_REQUEST"
    engine.update_table(first)
    updated, other = engine.get_table(first.stored_name), engine.get_table(second.stored_name)
    assert updated is not None and updated.billing_mode == "PAY_PER_REQUEST"
    assert other is not None and other.billing_mode == "PROVISIONED"
    engine.delete_table(first.stored_name)
    assert engine.get_table(first.stored_name) is None and engine.get_table(second.stored_name) is not None
    engine.delete_table(second.stored_name)


def _in(namespace: str, name: str) -> TableMeta:
    meta = new_meta(name)
    meta.namespace = namespace
    return meta


def test_update_table_is_seen(engine: Engine) -> None:
    """UpdateTable replaces the stored description."""
    meta = engine.create_table(new_meta())
    meta.billing_mode = "PAY_PER_REQUEST"
    engine.update_table(meta)
    got = engine.get_table(meta.name)
    assert got is not None and got.billing_mode == "PAY_PER_REQUEST"


def eventually(check: Callable[[], bool], within: float = 2.0) -> bool:
    """True once `check()` is; engines that learn of DDL by notification (PostgreSQL LISTEN/NOTIFY) see it
    a fraction of a millisecond after the commit rather than at once, so the contract allows a short delay."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def test_ddl_is_seen_by_another_engine_on_the_same_store(open_engine: EngineFactory) -> None:
    """Stateless nodes: a table created, updated or deleted through one engine is seen by another without restart."""
    first, second = open_engine(), open_engine()
    meta = first.create_table(new_meta())
    seen = second.get_table(meta.name)  # a table the other engine never cached is read at once
    assert seen is not None and seen.table_id == meta.table_id
    meta.deletion_protection = True
    first.update_table(meta)
    assert eventually(lambda: getattr(second.get_table(meta.name), "deletion_protection", False))
    first.delete_table(meta.name)
    assert eventually(lambda: second.get_table(meta.name) is None)
    again = first.create_table(new_meta(meta.name))
    seen = second.get_table(meta.name)
    assert seen is not None and seen.table_id == again.table_id != meta.table_id


def test_write_get_delete(engine: Engine) -> None:
    """A put stores the item's JSON and size; a delete removes it; results report old and new."""
    meta = engine.create_table(new_meta())
    [result] = engine.write([put(meta, key(b"a"), item(1))])
    assert (result.old, result.new, result.old_size) == (None, item(1), 0) and result.new_size > 0
    row = engine.get(meta, key(b"a"))
    assert row is not None and orjson.loads(row.data) == item(1) and row.size == result.new_size
    assert row.key == key(b"a")
    [result] = engine.write([WriteOp(meta, key(b"a"), lambda old: None)])
    assert result.old == item(1) and result.new is None and result.new_size == 0
    assert engine.get(meta, key(b"a")) is None


def test_returning_old_leaves_the_row_untouched(engine: Engine) -> None:
    """apply returning the very old object means no change; on an absent item, nothing is created."""
    meta = engine.create_table(new_meta())
    engine.write([put(meta, key(b"a"), item(1))])
    [result] = engine.write([WriteOp(meta, key(b"a"), lambda old: old)])
    assert result.old == result.new == item(1) and result.old_size == result.new_size
    [result] = engine.write([WriteOp(meta, key(b"b"), lambda old: old)])
    assert result.old is None and result.new is None
    assert engine.get(meta, key(b"b")) is None


def test_write_is_atomic(engine: Engine) -> None:
    """An exception from any apply rolls back every op of the write."""
    meta = engine.create_table(new_meta())
    engine.write([put(meta, key(b"a"), item(1))])

    def reject(old: Item | None) -> Item | None:
        raise ConditionalCheckFailedException()

    with pytest.raises(ConditionalCheckFailedException):
        engine.write([put(meta, key(b"a"), item(2)), put(meta, key(b"b"), item(3)),
                      WriteOp(meta, key(b"c"), reject)])
    row = engine.get(meta, key(b"a"))
    assert row is not None and orjson.loads(row.data) == item(1)
    assert engine.get(meta, key(b"b")) is None
    engine.write([put(meta, key(b"b"), item(4))])  # the engine is usable after a rollback


def test_blind_write_is_atomic(engine: Engine) -> None:
    """Blind ops (written without reading the row) too: an exception from a later apply writes nothing."""
    meta = engine.create_table(new_meta())

    def reject(old: Item | None) -> Item | None:
        raise ConditionalCheckFailedException()

    with pytest.raises(ConditionalCheckFailedException):
        engine.write([WriteOp(meta, key(b"a"), lambda old: item(1), blind=True),
                      WriteOp(meta, key(b"b"), lambda old: None, blind=True),
                      WriteOp(meta, key(b"c"), reject, blind=True)])
    assert engine.get(meta, key(b"a")) is None
    results = engine.write([WriteOp(meta, key(b"a"), lambda old: item(2), blind=True),
                            WriteOp(meta, key(b"b"), lambda old: None, blind=True)])
    assert [(r.new, r.old_size) for r in results] == [(item(2), 0), (None, 0)] and results[0].new_size > 0
    row = engine.get(meta, key(b"a"))
    assert row is not None and orjson.loads(row.data) == item(2) and row.size == results[0].new_size


def test_ops_apply_in_order(engine: Engine) -> None:
    """A key written twice in one write: the second op sees the first op's outcome."""
    meta = engine.create_table(new_meta())
    seen: list[Item | None] = []

    def record(old: Item | None) -> Item | None:
        seen.append(old)
        return item(9)

    results = engine.write([put(meta, key(b"a"), item(1)), WriteOp(meta, key(b"a"), record),
                            WriteOp(meta, key(b"a"), lambda old: None), WriteOp(meta, key(b"a"), record)])
    assert seen == [item(1), None]
    assert [r.new for r in results] == [item(1), item(9), None, item(9)]
    row = engine.get(meta, key(b"a"))
    assert row is not None and orjson.loads(row.data) == item(9)


def test_get_many(engine: Engine) -> None:
    """get_many answers in request order, None for missing rows, across tables."""
    one, two = engine.create_table(new_meta()), engine.create_table(new_meta())
    engine.write([put(one, key(b"a"), item(1)), put(two, key(b"a"), item(2))])
    rows = engine.get_many([(two, key(b"a")), (one, key(b"x")), (one, key(b"a"))])
    assert [None if r is None else orjson.loads(r.data) for r in rows] == [item(2), None, item(1)]


def test_query_order_bounds_and_after(engine: Engine) -> None:
    """Query reads one partition in sort-key order, honours bounds, direction and the exclusive start."""
    meta = engine.create_table(new_meta())
    fill(engine, meta, 150)
    fill(engine, meta, 5, pk=b"other")
    fill(engine, meta, 5, h=8)

    def sks(sort: SortRange, forward: bool = True, after: bytes | None = None) -> list[bytes]:
        return [row.key.sk for row in engine.query(meta, 7, b"p", sort, forward, after)]

    everything = [b"s%03d" % i for i in range(150)]
    assert sks(SortRange()) == everything
    assert sks(SortRange(), forward=False) == everything[::-1]
    assert sks(SortRange(b"s010", True, b"s020", False)) == everything[10:20]
    assert sks(SortRange(b"s010", False, b"s020", True)) == everything[11:21]
    assert sks(SortRange(low=b"s100"), after=b"s120") == everything[121:]
    assert sks(SortRange(high=b"s100"), forward=False, after=b"s050") == everything[:50][::-1]
    first = next(iter(engine.query(meta, 7, b"p", SortRange(), True, None)))
    assert orjson.loads(first.data) == item(0) and first.key == key(b"s000")


def test_query_can_be_abandoned(engine: Engine) -> None:
    """Closing a query iterator early leaves the engine usable."""
    meta = engine.create_table(new_meta())
    fill(engine, meta, 50)
    rows = engine.query(meta, 7, b"p", SortRange(), True, None)
    next(iter(rows))
    rows.close()  # type: ignore[attr-defined]
    engine.write([put(meta, key(b"new"), item(1))])
    assert engine.get(meta, key(b"new")) is not None


def test_scan_segments_and_after(engine: Engine) -> None:
    """Scan walks (h, pk, sk) order within [h_low, h_high), strictly after a given key."""
    meta = engine.create_table(new_meta())
    hashes = [0, 5, HASH_SPACE // 2, HASH_SPACE - 1]
    engine.write([put(meta, key(b"s%d" % i, h, b"p%d" % j), item(i)) for h in hashes for j in range(2)
                  for i in range(30)])
    everything = [row.key for row in engine.scan(meta, 0, HASH_SPACE, None)]
    assert len(everything) == 240
    assert everything == sorted(everything, key=lambda k: (k.h, k.pk, k.sk))
    low_half = [row.key for row in engine.scan(meta, 0, HASH_SPACE // 2, None)]
    assert low_half == everything[:120]
    assert [row.key for row in engine.scan(meta, 0, HASH_SPACE, everything[99])] == everything[100:]
    other = engine.create_table(new_meta())
    assert list(engine.scan(other, 0, HASH_SPACE, None)) == []


def test_table_stats_and_delete_table_removes_items(engine: Engine) -> None:
    """Stats count a table's rows and sizes; a deleted and recreated table starts empty."""
    meta = engine.create_table(new_meta())
    fill(engine, meta, 10)
    count, size = engine.table_stats(meta)
    assert count == 10 and size == sum(row.size for row in engine.scan(meta, 0, HASH_SPACE, None))
    engine.delete_table(meta.name)
    again = engine.create_table(new_meta(meta.name))
    assert engine.table_stats(again) == (0, 0)
    assert list(engine.scan(again, 0, HASH_SPACE, None)) == []


def test_tokens(engine: Engine) -> None:
    """A live token refuses a second write (writing nothing); an expired one is replaced; tokens are stored with
    the size each write was charged on (the larger of the item's old and new size)."""
    meta = engine.create_table(new_meta())
    name, now = str(uuid.uuid4()), time.time()
    engine.write([put(meta, key(b"a"), item(1))], RequestToken(name, b"hash-1", now))
    stored = engine.get_token(name)
    assert stored is not None and stored.request_hash == b"hash-1" and abs(stored.created_at - now) < 1e-3
    assert stored.charged == [engine.get(meta, key(b"a")).size]  # type: ignore[union-attr]
    with pytest.raises(TokenInUse) as excinfo:
        engine.write([put(meta, key(b"b"), item(2))], RequestToken(name, b"hash-2", now + 1))
    assert excinfo.value.existing.request_hash == b"hash-1"
    assert engine.get(meta, key(b"b")) is None
    later = now + TOKEN_LIFETIME + 1
    engine.write([put(meta, key(b"b"), item(2)), delete(meta, key(b"a"))], RequestToken(name, b"hash-3", later))
    stored = engine.get_token(name)
    assert stored is not None and stored.request_hash == b"hash-3"
    assert stored.charged is not None and len(stored.charged) == 2 and stored.charged[1] > 0  # the deleted item
    assert engine.get_token(str(uuid.uuid4())) is None


def test_tokens_and_names_with_nul_and_backslash(engine: Engine) -> None:
    """A ClientRequestToken may hold any character, NUL and backslash included, and each token stays itself;
    a table name with NUL (which no table can have) is simply not found."""
    meta = engine.create_table(new_meta())
    now = time.time()
    run = uuid.uuid4().hex[:8]  # (a shared database keeps tokens from earlier runs for 10 minutes)
    # Distinct tokens that a careless escaping could confuse:
    tokens = [run + suffix for suffix in ("\x00", "\\0", "\\", "\\\x00", "")]
    for number, token in enumerate(tokens):
        engine.write([put(meta, key(b"k%d" % number), item(number))], RequestToken(token, b"h%d" % number, now))
    for number, token in enumerate(tokens):
        stored = engine.get_token(token)
        assert stored is not None and stored.request_hash == b"h%d" % number
        with pytest.raises(TokenInUse):
            engine.write([put(meta, key(b"again"), item(0))], RequestToken(token, b"other", now + 1))
    assert engine.get_table(meta.name + "\x00") is None


def test_token_rolls_back_with_the_write(engine: Engine) -> None:
    """A write that fails does not record its token."""
    meta = engine.create_table(new_meta())
    name = str(uuid.uuid4())

    def reject(old: Item | None) -> Item | None:
        raise ConditionalCheckFailedException()

    with pytest.raises(ConditionalCheckFailedException):
        engine.write([WriteOp(meta, key(b"a"), reject)], RequestToken(name, b"h", time.time()))
    assert engine.get_token(name) is None


def _increment(engine: Engine, meta: TableMeta, count: int, errors: list[BaseException]) -> None:
    def bump(old: Item | None) -> Item | None:
        n = 0 if old is None else int(old["n"]["N"])
        return {"pk": {"S": "p"}, "n": {"N": str(n + 1)}}

    try:
        current = engine.get_table(meta.name)  # as a request does: this engine's own look at the table
        assert current is not None
        for _ in range(count):
            engine.write([WriteOp(current, key(b"counter"), bump)])
    except BaseException as error:
        errors.append(error)


def test_concurrent_increments_from_several_engines_are_never_lost(open_engine: EngineFactory) -> None:
    """Read-modify-writes racing from several engines (nodes) on one store, starting from an absent row, add up."""
    engines = [open_engine() for _ in range(4)]
    meta = engines[0].create_table(new_meta())
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_increment, args=(e, meta, 25, errors)) for e in engines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    row = engines[0].get(meta, key(b"counter"))
    assert row is not None and orjson.loads(row.data)["n"] == {"N": "100"}


def _transfer(engine: Engine, meta: TableMeta, seed: int, rounds: int, errors: list[BaseException]) -> None:
    # Each round moves one unit between two of three rows, one of which may be absent (balance 0).
    def move(delta: int) -> ApplyFn:
        def apply(old: Item | None) -> Item | None:
            n = (0 if old is None else int(old["n"]["N"])) + delta
            if n < 0:
                raise ConditionalCheckFailedException()
            return None if n == 0 else {"pk": {"S": "p"}, "n": {"N": str(n)}}
        return apply

    try:
        meta = engine.get_table(meta.name) or meta
        for i in range(rounds):
            a, b = (seed + i) % 3, (seed + i + 1) % 3
            try:
                engine.write([WriteOp(meta, key(b"acct%d" % a), move(-1)),
                              WriteOp(meta, key(b"acct%d" % b), move(+1))])
            except ConditionalCheckFailedException:
                pass
    except BaseException as error:
        errors.append(error)


def test_concurrent_multi_item_writes_keep_the_total(open_engine: EngineFactory) -> None:
    """Multi-item writes across engines, on rows that come and go, keep their invariant (no write skew)."""
    engines = [open_engine() for _ in range(3)]
    meta = engines[0].create_table(new_meta())
    engines[0].write([put(meta, key(b"acct0"), {"pk": {"S": "p"}, "n": {"N": "2"}})])
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_transfer, args=(e, meta, i, 40, errors)) for i, e in enumerate(engines)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    rows = [engines[0].get(meta, key(b"acct%d" % i)) for i in range(3)]
    assert sum(int(orjson.loads(r.data)["n"]["N"]) for r in rows if r is not None) == 2


def test_lease_is_held_by_one_process_at_a_time(open_engine: EngineFactory) -> None:
    """A background duty's lease goes to one holder across processes until it expires, and its holder renews it."""
    first, second = open_engine(), open_engine()
    name = f"duty-{uuid.uuid4().hex}"
    assert first.try_lease(name, "a", 10, now=1000.0)
    assert not second.try_lease(name, "b", 10, now=1005.0)  # held by a
    assert first.try_lease(name, "a", 10, now=1008.0)  # renewed by its holder, until 1018
    assert not second.try_lease(name, "b", 10, now=1015.0)
    assert second.try_lease(name, "b", 10, now=1019.0)  # expired: b takes over
    assert not first.try_lease(name, "a", 10, now=1020.0)


def test_partition_splits_are_kept_for_every_process(open_engine: EngineFactory) -> None:
    """The throttle's splits one process keeps are read by the next one to open the store; a range recorded twice
    keeps its first cut (two processes splitting one range at once agree on the one stored)."""
    first, second = open_engine(), open_engine()
    key = f"arn:aws:dynamodb:us-east-1:000000000000:table/t {uuid.uuid4().hex} n8 0-536870912"
    first.save_splits({key: 268435456})
    second.save_splits({key: 300000000, key + " 0-268435456": 100})
    found = open_engine().load_splits()
    assert found[key] == 268435456 and found[key + " 0-268435456"] == 100


def test_update_table_refuses_a_stale_description(open_engine: EngineFactory) -> None:
    """A description derived from one another engine has since replaced (or from a table since deleted and
    created again) is not stored: CatalogChanged, and the other engine's change stays."""
    first, second = open_engine(), open_engine()
    meta = first.create_table(new_meta())
    seen = second.get_table(meta.name)
    assert seen is not None
    tagged = first.get_table(meta.name)
    assert tagged is not None
    tagged = TableMeta.from_json(tagged.to_json())
    tagged.tags = [{"Key": "a", "Value": "1"}]
    first.update_table(tagged)
    stale = TableMeta.from_json(seen.to_json())
    stale.deletion_protection = True
    with pytest.raises(CatalogChanged):
        second.update_table(stale)
    assert eventually(lambda: getattr(second.get_table(meta.name), "tags", None) == [{"Key": "a", "Value": "1"}])
    fresh = second.get_table(meta.name)
    assert fresh is not None and not fresh.deletion_protection
    fresh = TableMeta.from_json(fresh.to_json())
    fresh.deletion_protection = True
    second.update_table(fresh)
    assert eventually(lambda: getattr(first.get_table(meta.name), "deletion_protection", False))
    stored = first.get_table(meta.name)
    assert stored is not None and stored.tags == [{"Key": "a", "Value": "1"}]
    # Deleted and created again under the same name: the old description's changes are refused.
    first.delete_table(meta.name)
    first.create_table(new_meta(meta.name))
    with pytest.raises(CatalogChanged):
        second.update_table(stored)


def test_delete_table_with_an_expected_description(open_engine: EngineFactory) -> None:
    """DeleteTable's delete goes through only if the table is still the one checked (not protected, not gone)."""
    first, second = open_engine(), open_engine()
    meta = first.create_table(new_meta())
    seen = second.get_table(meta.name)
    assert seen is not None
    protected = TableMeta.from_json(seen.to_json())
    protected.deletion_protection = True
    first.update_table(protected)
    with pytest.raises(CatalogChanged):
        second.delete_table(meta.name, seen)
    assert first.get_table(meta.name) is not None
    assert eventually(lambda: getattr(second.get_table(meta.name), "deletion_protection", False))
    current = second.get_table(meta.name)
    assert current is not None
    second.delete_table(meta.name, current)
    assert eventually(lambda: first.get_table(meta.name) is None)
    with pytest.raises(CatalogChanged):  # already gone
        first.delete_table(meta.name, current)


def test_write_to_a_table_deleted_meanwhile_leaves_nothing(open_engine: EngineFactory) -> None:
    """A write handed the description of a table another engine has since deleted writes nothing under the dead
    table's id: CatalogChanged, so the request runs again and finds the table gone."""
    first, second = open_engine(), open_engine()
    meta = first.create_table(new_meta())
    stale = second.get_table(meta.name)
    assert stale is not None
    first.delete_table(meta.name)
    with pytest.raises(CatalogChanged):
        second.write([put(stale, key(b"orphan"), item(1))])
    assert list(first.scan(stale, 0, HASH_SPACE, None)) == []
    first.end_reads()
