"""Writes locked ahead on PostgreSQL (`Engine.lock_ahead`): the items of a pass's single-item writes are locked and
read in one round trip inside the group; each write then runs on its row without a round trip of its own."""

from __future__ import annotations

import psycopg
import pytest

from openddb.errors import ConditionalCheckFailedException
from openddb.model import Item
from openddb.model.schema import TableMeta
from openddb.storage.base import EngineBusy, StorageKey, WriteOp
from openddb.storage.postgres import PostgresEngine
from openddb.storage.postgres_locks_ahead import item_key
from tests.storage.conftest import POSTGRES_URL, needs_postgres
from tests.storage.test_engine_contract import item, key, new_meta, put
from tests.storage.test_postgres_groups import add, value

pytestmark = needs_postgres


def refuse(old: Item | None) -> Item:
    raise ConditionalCheckFailedException("The conditional request failed")


def locked_elsewhere(meta: TableMeta, at: StorageKey) -> bool:
    """Whether another transaction holds the item's row lock (a third connection tries it without waiting)."""
    with psycopg.connect(str(POSTGRES_URL), autocommit=True) as other:
        try:
            other.execute("BEGIN")
            other.execute("SELECT 1 FROM openddb_items WHERE tid=%s AND h=%s AND pk=%s AND sk=%s FOR UPDATE NOWAIT",
                          (meta.table_id, at.h, at.pk, at.sk))
        except psycopg.errors.LockNotAvailable:
            return True
        finally:
            other.execute("ROLLBACK")
    return False


def counters(engine: PostgresEngine) -> tuple[TableMeta, StorageKey, StorageKey]:
    """A table with two committed counters, `a` at 1 and `b` at 2."""
    meta = engine.create_table(new_meta())
    engine.write([add((meta, key(b"a")), 1)])
    engine.write([add((meta, key(b"b")), 2)])
    assert engine.commit() == "committed"
    return meta, key(b"a"), key(b"b")


def test_writes_locked_ahead_run_without_a_round_trip_and_commit_with_the_group(
        pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """After `lock_ahead` the items are locked (another transaction cannot take them) and each write on one only
    queues its change: it reads the row locked ahead and commits with the group, unseen by others until then."""
    first, second = pair
    meta, a, b = counters(first)
    first.lock_ahead([(meta, a), (meta, b), (meta, key(b"absent"))])
    assert first.session.pending and locked_elsewhere(meta, a) and locked_elsewhere(meta, b)
    queued = len(first._pipe)
    first.write([add((meta, a), 10)])
    first.write([add((meta, b), 20)])
    assert len(first._pipe) == queued + 2  # (each change queued, nothing sent)
    first.write([put(meta, key(b"absent"), item(7))])  # (absent: it locks and creates for itself)
    assert value(second, meta, a) == 1 and first.session.writes >= 3
    first.end_read_ahead()
    assert first.commit() == "committed"
    assert [value(second, meta, at) for at in (a, b, key(b"absent"))] == [11, 22, 7]


def test_a_refused_write_locked_ahead_changes_nothing(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """A write refused on its row locked ahead (a failed condition) queued nothing: the group's other writes
    commit, its item is as it was."""
    first, second = pair
    meta, a, b = counters(first)
    first.lock_ahead([(meta, a), (meta, b)])
    first.write([add((meta, a), 10)])
    with pytest.raises(ConditionalCheckFailedException):
        first.write([WriteOp(meta, b, refuse)])
    first.end_read_ahead()
    assert first.commit() == "committed"
    assert [value(second, meta, a), value(second, meta, b)] == [11, 2]


def test_an_item_held_elsewhere_is_skipped(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """Another node's group holds one of the items: it is skipped (its write locks for itself), the others are
    locked ahead; the write on the held item, once that group committed, commits this group and runs on its own."""
    first, second = pair
    meta, a, b = counters(first)
    second.write([add((meta, b), 100)])  # (second's group holds b)
    first.lock_ahead([(meta, a), (meta, b)])
    assert first.session.pending and list(first._locked) == [item_key(meta.table_id, a)]
    assert locked_elsewhere(meta, a)
    first.write([add((meta, a), 10)])
    assert second.commit() == "committed"
    first.write([add((meta, b), 20)])
    first.end_read_ahead()
    assert first.commit() == "committed"
    assert [value(second, meta, a), value(second, meta, b)] == [11, 122]


def test_a_first_write_meeting_a_held_lock_is_put_off(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """In a server's engine (no `session.wait`), a request's first write whose item another group holds raises
    EngineBusy at once, having changed nothing: the group's other writes stand and commit, and the request runs
    again later (before, the group committed and the write waited for the lock, blocking the event loop). A later
    write of a request is not put off (its earlier writes would run again): it waits as before."""
    first, second = pair
    meta, a, b = counters(first)
    second.write([add((meta, b), 100)])  # (second's group holds b)
    first.session.wait = False
    first.write([add((meta, a), 10)])
    first.session.request_began = first.session.writes
    with pytest.raises(EngineBusy):
        first.write([add((meta, b), 20)])
    assert first.session.pending and locked_elsewhere(meta, a)
    first.session.request_began = -1
    assert second.commit() == "committed"
    first.write([add((meta, b), 20)])  # (not at a request's start: waits for the lock as before)
    assert first.commit() == "committed"
    second.write([add((meta, a), 1)])  # (second's group holds a)
    first.session.request_began = first.session.writes
    with pytest.raises(EngineBusy):  # (a write that began a group: the group is not left open)
        first.write([add((meta, a), 5)])
    assert not first.session.pending
    assert second.commit() == "committed"
    assert [value(second, meta, a), value(second, meta, b)] == [12, 122]


def test_an_item_written_by_a_write_of_another_kind_is_read_again(
        pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """A write of several items changes an item locked ahead: a later single-item write of the pass reads the
    item as that write left it, not as it was locked."""
    first, second = pair
    meta, a, b = counters(first)
    first.lock_ahead([(meta, a), (meta, b)])
    first.write([add((meta, a), 10), add((meta, b), 20)])
    first.write([add((meta, a), 100)])
    first.end_read_ahead()
    assert first.commit() == "committed"
    assert [value(second, meta, a), value(second, meta, b)] == [111, 22]


def test_a_group_no_write_joined_is_rolled_back(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """The pass's writes never reached the engine (refused before it): the group `lock_ahead` began holds no
    locks past the pass."""
    first, _second = pair
    meta, a, _b = counters(first)
    first.lock_ahead([(meta, a)])
    assert first.session.pending and locked_elsewhere(meta, a)
    first.end_read_ahead()
    assert not first.session.pending and not locked_elsewhere(meta, a)
    assert first.commit() == "committed"
