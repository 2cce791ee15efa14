"""Reads fetched ahead on PostgreSQL (`Engine.read_ahead`): the GetItem and Query reads of a server's event-loop
pass go out in one round trip before the requests run; each request's read then takes its rows from there."""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from openddb.storage.base import QueryStart, Row, SortRange
from openddb.storage.postgres import PostgresEngine
from tests.storage.conftest import needs_postgres
from tests.storage.test_engine_contract import item, key, new_meta, put

pytestmark = needs_postgres


def numbers(rows: Iterable[Row | None]) -> list[int | None]:
    """The `n` of each row (None: no row)."""
    return [None if row is None else int(orjson.loads(row.data)["n"]["N"]) for row in rows]


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
    first.read_ahead([(meta, key(b"a")), (meta, key(b"x", h=8, pk=b"q")), (meta, key(b"none"))], [start])
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
    first.read_ahead([(meta, key(b"a")), (meta, key(b"b"))], [])
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
    first.read_ahead([(meta, key(b"a")), (meta, key(b"b"))], [])
    second.write([put(meta, key(b"a"), item(30))])
    assert second.commit() == "committed"
    assert numbers([first.get(meta, key(b"a"))]) == [30]
    assert numbers([first.get(meta, key(b"b"))]) == [20]
    assert first.commit() == "committed"
    first.end_read_ahead()
