"""Reads fetched ahead on PostgreSQL (`Engine.read_ahead`): the GetItem, BatchGetItem, Query and Scan reads of a
server's event-loop pass go out in one round trip before the requests run; each request's read then takes its rows
from there."""

from __future__ import annotations

import time
from collections.abc import Iterable

import orjson
import psycopg

from openddb.storage.base import HASH_SPACE, IndexRow, QueryStart, ReadsAhead, Row, ScanStart, SortRange
from openddb.storage.postgres import PostgresEngine
from openddb.storage.postgres_replicas import PRIMARY_POSITION, REPLAYED_POSITION
from tests.api.test_postgres_replicas import Replica, replica  # noqa: F401 - (a fixture)
from tests.storage.conftest import POSTGRES_URL, needs_postgres
from tests.storage.test_engine_contract import item, key, new_meta, put
from tests.storage.test_index_contract import GSI, doc, g_key, indexed_meta, skey
from tests.storage.test_index_contract import put as put_doc

pytestmark = needs_postgres


def numbers(rows: Iterable[Row | None]) -> list[int | None]:
    """The `n` of each row (None: no row)."""
    return [None if row is None else int(orjson.loads(row.data)["n"]["N"]) for row in rows]


def sort_keys(rows: Iterable[IndexRow]) -> list[str]:
    """The table sort key (`sk`) of each index entry."""
    return [orjson.loads(row.data)["sk"]["S"] for row in rows]


def test_reads_are_answered_from_what_was_read_ahead(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """After `read_ahead`, gets and a Query's first page are answered from the rows it fetched (another node's
    later change is not seen: nothing was read again), each from its own statement; after `end_read_ahead` they
    read again."""
    first, second = pair
    meta = first.create_table(new_meta())
    for n, sk in enumerate((b"a", b"b", b"c")):
        first.write([put(meta, key(sk), item(n))])
    first.write([put(meta, key(b"x", h=8, pk=b"q"), item(9))])
    assert first.commit() == "committed"
    start = QueryStart(meta, 7, b"p", SortRange(low=b"b"), True)
    first.read_ahead(ReadsAhead([(meta, key(b"a")), (meta, key(b"x", h=8, pk=b"q")), (meta, key(b"none"))],
                                [start]))
    for sk in (b"a", b"b"):
        second.write([put(meta, key(sk), item(50))])
    assert second.commit() == "committed"
    assert numbers([first.get(meta, key(b"a")), first.get(meta, key(b"x", h=8, pk=b"q")),
                    first.get(meta, key(b"none"))]) == [0, 9, None]
    assert numbers(first.query(meta, 7, b"p", SortRange(low=b"b"), True, None)) == [1, 2]
    assert numbers(first.query(meta, 7, b"p", SortRange(), True, None)) == [50, 50, 2]  # (not read ahead)
    first.end_read_ahead()
    assert numbers([first.get(meta, key(b"a"))]) == [50]
    assert numbers(first.query(meta, 7, b"p", SortRange(low=b"b"), True, None)) == [50, 2]


def test_a_write_forgets_what_was_read_ahead(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """A write of the pass (its group still open) is seen by the reads after it, not the rows read before it."""
    first, _second = pair
    meta = first.create_table(new_meta())
    first.write([put(meta, key(b"a"), item(1)), put(meta, key(b"b"), item(2))])
    assert first.commit() == "committed"
    first.read_ahead(ReadsAhead([(meta, key(b"a")), (meta, key(b"b"))]))
    first.write([put(meta, key(b"a"), item(10))])
    assert first.session.pending
    assert numbers([first.get(meta, key(b"a"))]) == [10]
    assert first.commit() == "committed"
    first.end_read_ahead()


def test_nothing_is_read_ahead_inside_an_open_group(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """With a group of writes open, reads are not fetched ahead (a failing statement would cost the group): each
    read goes to the database, and sees the group's own writes."""
    first, second = pair
    meta = first.create_table(new_meta())
    first.write([put(meta, key(b"a"), item(1)), put(meta, key(b"b"), item(2))])
    assert first.commit() == "committed"
    first.write([put(meta, key(b"b"), item(20))])
    first.read_ahead(ReadsAhead([(meta, key(b"a")), (meta, key(b"b"))]))
    second.write([put(meta, key(b"a"), item(30))])
    assert second.commit() == "committed"
    assert numbers([first.get(meta, key(b"a"))]) == [30]
    assert numbers([first.get(meta, key(b"b"))]) == [20]
    assert first.commit() == "committed"
    first.end_read_ahead()


def test_batch_gets_are_answered_from_what_was_read_ahead(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """A BatchGetItem's keys (`get_many`), all read ahead in one snapshot, are answered from there; a batch with a
    key that was not reads for itself."""
    first, second = pair
    meta = first.create_table(new_meta())
    first.write([put(meta, key(b"a"), item(1)), put(meta, key(b"b"), item(2))])
    assert first.commit() == "committed"
    first.read_ahead(ReadsAhead([(meta, key(b"a")), (meta, key(b"b")), (meta, key(b"none"))]))
    second.write([put(meta, key(b"a"), item(10)), put(meta, key(b"c"), item(30))])
    assert second.commit() == "committed"
    assert numbers(first.get_many([(meta, key(b"b")), (meta, key(b"none")), (meta, key(b"a"))])) == [2, None, 1]
    assert numbers(first.get_many([(meta, key(b"a")), (meta, key(b"c"))])) == [10, 30]  # ("c" not read ahead)
    first.end_read_ahead()
    assert numbers(first.get_many([(meta, key(b"b")), (meta, key(b"a"))])) == [2, 10]


def test_pages_from_a_start_key_and_index_queries_are_read_ahead(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """A Query's first page from its ExclusiveStartKey and an index Query's (from the start and from a start key)
    are answered from what was read ahead, each for exactly its own statement."""
    first, second = pair
    meta = first.create_table(indexed_meta(GSI))
    docs = [doc("p", sk, g="red", n=n) for n, sk in enumerate(("a", "b", "c"))]
    first.write([put_doc(meta, one) for one in docs])
    assert first.commit() == "committed"
    h, pk = g_key("red")
    whole = SortRange()
    b = skey(docs[1])
    after_b = next(row.key for row in first.index_query(meta, GSI, h, pk, whole, True, None) if row.key.tsk == b.sk)
    first.read_ahead(ReadsAhead([], [QueryStart(meta, b.h, b.pk, whole, True, None, b.sk),
                                     QueryStart(meta, h, pk, whole, True, GSI, None),
                                     QueryStart(meta, h, pk, whole, False, GSI, after_b)]))
    second.write([put_doc(meta, doc("p", sk, g="red", n=9)) for sk in ("a", "c", "d")])
    assert second.commit() == "committed"
    assert numbers(first.query(meta, b.h, b.pk, whole, True, b.sk)) == [2]
    assert sort_keys(first.index_query(meta, GSI, h, pk, whole, True, None)) == ["a", "b", "c"]
    assert sort_keys(first.index_query(meta, GSI, h, pk, whole, False, after_b)) == ["a"]
    first.end_read_ahead()
    assert numbers(first.query(meta, b.h, b.pk, whole, True, b.sk)) == [9, 9]
    assert sort_keys(first.index_query(meta, GSI, h, pk, whole, True, None)) == ["b", "a", "c", "d"]


def test_scan_pages_are_read_ahead(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """A Scan's first page of a segment, from the start or from a start key, is answered from what was read
    ahead; pages past what was fetched are read then."""
    first, second = pair
    meta = first.create_table(new_meta())
    first.write([put(meta, key(b"s%02d" % n), item(n)) for n in range(20)])
    assert first.commit() == "committed"
    first.read_ahead(ReadsAhead(scans=[ScanStart(meta, None, 0, HASH_SPACE, None),
                                       ScanStart(meta, None, 0, 8, key(b"s17"))]))
    second.write([put(meta, key(b"s%02d" % n), item(50)) for n in (0, 18, 19)])
    assert second.commit() == "committed"
    assert numbers(first.scan(meta, 0, 8, key(b"s17"))) == [18, 19]
    assert numbers(first.scan(meta, 0, HASH_SPACE, None)) == [*range(18), 50, 50]  # (the first page: 16 rows)
    first.end_read_ahead()
    assert numbers(first.scan(meta, 0, 8, key(b"s17"))) == [50, 50]


def caught_up(standby: Replica) -> None:
    """Wait until the replica has replayed everything the primary has written."""
    with psycopg.connect(str(POSTGRES_URL), autocommit=True) as primary, \
            psycopg.connect(standby.url, autocommit=True) as replayer:
        target = primary.execute(PRIMARY_POSITION).fetchone()
        deadline = time.monotonic() + 10
        while replayer.execute(REPLAYED_POSITION).fetchone() < target:  # type: ignore[operator]
            assert time.monotonic() < deadline, "the replica did not catch up"
            time.sleep(0.02)


def test_eventually_consistent_reads_are_read_ahead_from_a_replica(replica: Replica) -> None:  # noqa: F811
    """With a replica, the reads that may be eventually consistent are fetched from it in one round trip and
    answered from there, to eventually consistent reads only; strongly consistent ones read the primary."""
    engine = PostgresEngine(str(POSTGRES_URL), group_commit=True, replicas=[replica.url], replica_max_lag=0.3)
    try:
        meta = engine.create_table(new_meta())
        engine.write([put(meta, key(b"a"), item(1)), put(meta, key(b"b"), item(2))])
        assert engine.commit() == "committed"
        caught_up(replica)
        deadline = time.monotonic() + 10
        while engine._replicas is not None and not engine._replicas.run([(REPLAYED_POSITION, ())]):
            assert time.monotonic() < deadline, "the replica never counted as fresh"
            time.sleep(0.1)  # (until the node has noted the primary long enough to trust the replica)
        engine.read_ahead(ReadsAhead([(meta, key(b"a"))], eventual=ReadsAhead([(meta, key(b"b")), (meta, key(b"c"))])))
        engine.write([put(meta, key(b"b"), item(20))])
        assert engine.commit() == "committed"
        caught_up(replica)
        engine.eventual_reads = True
        assert numbers([engine.get(meta, key(b"b"))]) == [2]  # (as fetched from the replica)
        engine.eventual_reads = False
        assert numbers([engine.get(meta, key(b"b"))]) == [20]  # (never a replica's rows)
        engine.end_read_ahead()
        engine.eventual_reads = True
        assert numbers([engine.get(meta, key(b"b"))]) == [20]
    finally:
        engine.eventual_reads = False
        engine.close()
