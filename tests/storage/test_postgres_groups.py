"""Group commit on PostgreSQL: the writes of a server's event-loop pass share one transaction and one commit."""

from __future__ import annotations

import threading
import time

import orjson
import psycopg
import pytest

from openddb.errors import ConditionalCheckFailedException
from openddb.model import Item
from openddb.model.schema import TableMeta
from openddb.storage.base import StorageKey, WriteOp
from openddb.storage.postgres import GROUP_WRITES, PostgresEngine
from tests.storage.conftest import POSTGRES_URL, TERMINATE_CLIENT, needs_postgres, scratch_database
from tests.storage.test_engine_contract import item, key, new_meta, put
from tests.storage.test_index_contract import GSI, doc, indexed_meta
from tests.storage.test_index_contract import put as put_doc

pytestmark = needs_postgres


def add(meta_key: tuple[TableMeta, StorageKey], amount: int) -> WriteOp:
    """An increment of `n` (a read-modify-write: it must see the committed value)."""
    meta, at = meta_key

    def apply(old: Item | None) -> Item:
        return {"pk": {"S": "p"}, "n": {"N": str(amount + (0 if old is None else int(old["n"]["N"])))}}
    return WriteOp(meta, at, apply)


def value(engine: PostgresEngine, meta: TableMeta, at: StorageKey) -> int | None:
    row = engine.get(meta, at)
    return None if row is None else int(orjson.loads(row.data)["n"]["N"])


def test_writes_commit_together_at_commit(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """A group's writes are seen by their own node at once, by the others only after `commit`, all together."""
    first, second = pair
    meta = first.create_table(new_meta())
    for n in range(3):
        first.write([put(meta, key(b"s%d" % n), item(n))])
    assert first.session.pending and first.session.writes == 3
    assert value(first, meta, key(b"s2")) == 2 and value(second, meta, key(b"s2")) is None
    commits = first.session.commits
    assert first.commit() == "committed"
    assert not first.session.pending and first.session.commits == commits + 1
    assert [value(second, meta, key(b"s%d" % n)) for n in range(3)] == [0, 1, 2]


def test_a_refused_write_undoes_itself_alone(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """A write refused after its locks (a failed condition) leaves the group's other writes to commit."""
    first, second = pair
    meta = first.create_table(new_meta())
    first.write([put(meta, key(b"a"), item(1))])

    def refuse(old: Item | None) -> Item:
        raise ConditionalCheckFailedException("The conditional request failed")
    with pytest.raises(ConditionalCheckFailedException):
        first.write([put(meta, key(b"b"), item(2)), WriteOp(meta, key(b"c"), refuse)])
    first.write([put(meta, key(b"d"), item(4))])
    first.commit()
    assert [value(second, meta, key(k)) for k in (b"a", b"b", b"c", b"d")] == [1, None, None, 4]


def test_groups_of_two_nodes_never_deadlock(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """Each node's open group holds a key the other then writes: the second waiter commits its group and waits
    on its own, so both finish at once (no deadlock detector's second) and no increment is lost."""
    first, second = pair
    meta = first.create_table(new_meta())
    one, two = (meta, key(b"one")), (meta, key(b"two"))
    first.write([add(one, 1)])
    second.write([add(two, 1)])
    done = threading.Event()

    def second_node() -> None:
        second.write([add(one, 10)])  # waits for the first node's group
        second.commit()
        done.set()

    started = time.monotonic()
    thread = threading.Thread(target=second_node)
    thread.start()
    time.sleep(0.05)
    first.write([add(two, 10)])  # the second node committed its group before waiting: `two` is free
    first.commit()
    thread.join(10)
    assert done.is_set() and time.monotonic() - started < 0.9
    assert value(first, meta, key(b"one")) == 11 and value(first, meta, key(b"two")) == 11


def test_reads_of_a_snapshot_and_ddl_commit_the_group_first(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """A transaction of its own (a multi-item read in one snapshot, a table change) commits the open group
    first, and counts it, so the server knows which group each request wrote into."""
    first, second = pair
    meta = first.create_table(new_meta())
    first.write([put(meta, key(b"a"), item(1))])
    commits = first.session.commits
    rows = first.get_many([(meta, key(b"a")), (meta, key(b"b"))])
    assert rows[0] is not None and rows[1] is None
    assert not first.session.pending and first.session.commits == commits + 1
    assert value(second, meta, key(b"a")) == 1


def test_a_long_group_commits_early(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """Past GROUP_WRITES writes (each a subtransaction) the group commits and a new one begins."""
    first, second = pair
    meta = first.create_table(new_meta())
    commits = first.session.commits
    for n in range(GROUP_WRITES + 1):
        first.write([put(meta, key(b"s%03d" % n), item(n))])
    assert first.session.commits == commits + 1 and first.session.pending
    assert value(second, meta, key(b"s000")) == 0 and value(second, meta, key(b"s%03d" % GROUP_WRITES)) is None
    first.commit()


def test_a_lost_group_is_never_acknowledged(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """The connection dies with a group open: `commit` raises (the server answers its requests with errors),
    nothing of the group is stored, and the next group works over a new connection."""
    first, second = pair
    meta = first.create_table(new_meta())
    first.write([put(meta, key(b"lost"), item(1))])
    with psycopg.connect(str(POSTGRES_URL), autocommit=True) as admin:
        assert admin.execute(TERMINATE_CLIENT, (first._conn.pgconn.backend_pid,)).fetchone() == (True,)
    time.sleep(0.1)
    with pytest.raises(psycopg.OperationalError):
        first.write([put(meta, key(b"during"), item(2))])
    with pytest.raises(RuntimeError):
        first.commit()
    first.write([put(meta, key(b"after"), item(3))])
    assert first.commit() == "committed"
    assert [value(second, meta, key(k)) for k in (b"lost", b"during", b"after")] == [None, None, 3]


def test_a_change_sent_with_the_next_statements_commits_with_its_group(
        pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """An update of a present item goes out with its node's next statements (here a refused write's locks):
    its node reads it at once, the refused write does not undo it, the other node sees it after the commit."""
    first, second = pair
    meta = first.create_table(new_meta())
    counter = (meta, key(b"n"))
    first.write([add(counter, 1)])
    first.commit()
    first.write([add(counter, 5)])

    def refuse(old: Item | None) -> Item:
        raise ConditionalCheckFailedException("The conditional request failed")
    with pytest.raises(ConditionalCheckFailedException):
        first.write([WriteOp(meta, key(b"other"), refuse)])
    assert value(first, meta, key(b"n")) == 6 and value(second, meta, key(b"n")) == 1
    assert first.commit() == "committed"
    assert value(second, meta, key(b"n")) == 6 and value(second, meta, key(b"other")) is None


def test_only_what_may_wait_on_another_transaction_is_bounded_at_1_ms(
        pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """Inside a group a creation (a concurrent creator's row may be locked) runs under the 1 ms bound, while the
    change of a present item, left for the next round trip, runs under the lone writes' 2 s (it may wait for the
    lock that extends the table's file); a refused write's rollback to its savepoint keeps the bound it had."""
    first, _second = pair
    meta = first.create_table(new_meta())
    counter = (meta, key(b"n"))
    first.write([add(counter, 1)])
    first.commit()

    def bound() -> str:
        return str(first._rows("SELECT current_setting('lock_timeout')", ())[0][0])

    def refuse(old: Item | None) -> Item:
        raise ConditionalCheckFailedException("The conditional request failed")
    first.write([put(meta, key(b"new"), item(1))])
    assert bound() == "1ms"
    first.write([add(counter, 5)])
    assert bound() == "2s"
    with pytest.raises(ConditionalCheckFailedException):
        first.write([WriteOp(meta, key(b"n"), refuse)])
    assert bound() == "2s"
    first.write([put(meta, key(b"newer"), item(2))])
    with pytest.raises(ConditionalCheckFailedException):
        first.write([WriteOp(meta, key(b"n"), refuse)])
    assert bound() == "1ms"
    assert first.commit() == "committed" and value(first, meta, key(b"n")) == 6
    indexed = first.create_table(indexed_meta(GSI))
    first.write([put_doc(indexed, doc("p", "a", g="red", n=1))])  # (a creation, and its index entry)
    assert bound() == "1ms"
    first.write([add(counter, 1)])
    assert bound() == "2s"
    first.write([put_doc(indexed, doc("p", "a", g="red", n=1, y="more"))])  # (no entry changes: carried)
    assert bound() == "2s"
    assert first.commit() == "committed"


def test_a_sent_later_change_that_fails_loses_its_group() -> None:
    """Should the update a write left for its node's next round trip fail there (a trigger refuses it, in a
    database of the test's own), the write that carried it fails, `commit` raises (so no request of the group is
    answered as a success) and nothing of the group is stored; the next group works."""
    with scratch_database() as url:
        engine = PostgresEngine(url, group_commit=True)
        try:
            meta = engine.create_table(new_meta())
            counter = (meta, key(b"n"))
            engine.write([add(counter, 1)])
            engine.commit()
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute("CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                              "$$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$")
                admin.execute("CREATE TRIGGER refuse BEFORE UPDATE ON openddb_items FOR EACH ROW "
                              "EXECUTE FUNCTION refuse()")
            engine.write([put(meta, key(b"new"), item(1))])  # (a creation is sent at once: it succeeds)
            engine.write([add(counter, 5)])  # its UPDATE is left for the next round trip
            with pytest.raises(psycopg.errors.RaiseException):
                engine.write([put(meta, key(b"next"), item(2))])
            with pytest.raises(RuntimeError):
                engine.commit()
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute("DROP TRIGGER refuse ON openddb_items")
            assert [value(engine, meta, key(k)) for k in (b"n", b"new", b"next")] == [1, None, None]
            engine.write([add(counter, 2)])
            assert engine.commit() == "committed" and value(engine, meta, key(b"n")) == 3
        finally:
            engine.close()


def send_and_finish(engine: PostgresEngine) -> None:
    """What the server does with a group: send its COMMIT, wait for it (off the event loop), finish it."""
    assert engine.send_commit() == "sent"
    waiter = threading.Thread(target=engine.wait_for_commit)
    waiter.start()
    waiter.join(10)
    engine.finish_commit()


def test_a_commit_in_flight_lets_the_node_serve_on(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """`send_commit` leaves the group's COMMIT in flight and serves on over its other connection: reads there see
    the committed state only, a new group forms (even on a key of the group in flight, waiting for its commit),
    and each group is acknowledged once its own commit is answered."""
    first, second = pair
    meta = first.create_table(new_meta())
    counter = (meta, key(b"n"))
    first.write([add(counter, 1)])
    first.write([put(meta, key(b"a"), item(1))])
    commits = first.session.commits
    assert first.send_commit() == "sent"
    assert not first.session.pending and first.session.commits == commits + 1
    first.write([add(counter, 10)])  # a new group, on the other connection: waits for the commit in flight
    first.write([put(meta, key(b"b"), item(2))])
    assert first.session.pending
    waiter = threading.Thread(target=first.wait_for_commit)
    waiter.start()
    waiter.join(10)
    first.finish_commit()
    assert value(second, meta, key(b"a")) == 1
    send_and_finish(first)
    assert [value(second, meta, key(k)) for k in (b"n", b"a", b"b")] == [11, 1, 2]


def test_two_commits_in_flight_each_on_its_own_connection(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """A group that formed while a commit is in flight sends its COMMIT too (on a third connection) instead of
    waiting for the first's answer; the commits are finished in the order sent, and a group formed while two are
    in flight commits at once, as `commit` does."""
    first, second = pair
    meta = first.create_table(new_meta())
    first.write([put(meta, key(b"a"), item(1))])
    assert first.send_commit() == "sent"
    first.write([put(meta, key(b"b"), item(2))])
    assert first.send_commit() == "sent"
    first.write([put(meta, key(b"c"), item(3))])
    assert first.send_commit() == "committed"
    assert value(second, meta, key(b"c")) == 3
    for _ in range(2):
        waiter = threading.Thread(target=first.wait_for_commit)
        waiter.start()
        waiter.join(10)
        first.finish_commit()
    assert [value(second, meta, key(k)) for k in (b"a", b"b", b"c")] == [1, 2, 3]
    backends = {link.conn.pgconn.backend_pid for link in first._spares} | {first._conn.pgconn.backend_pid}
    assert len(backends) == 3


def test_a_commit_in_flight_that_fails_is_never_acknowledged(pair: tuple[PostgresEngine, PostgresEngine]) -> None:
    """The connection dies while the group's COMMIT is in flight: `finish_commit` raises (its requests are
    answered with errors), and the node goes on over a new connection."""
    first, second = pair
    meta = first.create_table(new_meta())
    first.write([put(meta, key(b"kept"), item(1))])
    send_and_finish(first)  # (now both connections exist; the next commit goes on the first again)
    first.write([put(meta, key(b"lost"), item(2))])
    in_flight = first._conn.pgconn.backend_pid
    with psycopg.connect(str(POSTGRES_URL), autocommit=True) as admin:
        assert admin.execute(TERMINATE_CLIENT, (in_flight,)).fetchone() == (True,)
    time.sleep(0.1)
    with pytest.raises(psycopg.OperationalError):  # (the send itself may already find the connection closed)
        assert first.send_commit() == "sent"
        first.wait_for_commit()
        first.finish_commit()
    first.write([put(meta, key(b"after"), item(3))])
    send_and_finish(first)
    assert [value(second, meta, key(k)) for k in (b"kept", b"lost", b"after")] == [1, None, 3]
