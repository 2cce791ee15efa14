"""SQLite's recovery log, written by the write path: one record per change of a table with recovery on (the item
before it), in order, committed with the change, from whichever way the write was grouped; none for other tables,
none for a rewrite with the very same bytes, none once recovery is off."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from openddb.model import Item
from openddb.model.schema import TableMeta
from openddb.storage.base import WriteOp
from openddb.storage.sqlite import SQLiteEngine
from tests.storage.test_engine_contract import new_meta
from tests.storage.test_stream_contract import it, skey
from tests.storage.test_stream_contract import streamed as stream_table


@pytest.fixture(params=["optimistic", "locked", "alone"])
def engines(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[SQLiteEngine, SQLiteEngine]]:
    """An engine grouping its writes (staged for commit, or each written under the lock into the group's
    transaction) or committing each one, and a second engine on the same store that turns recovery on."""
    grouped = request.param != "alone"
    engine = SQLiteEngine(str(tmp_path), group_commit=grouped, shared_reads=grouped)
    engine.session.optimistic = request.param == "optimistic"
    other = SQLiteEngine(str(tmp_path))
    yield engine, other
    other.close()
    engine.close()


def logged(path: Path, tid: int) -> list[tuple[str, int | None]]:
    """The table's recovery log, in order: each record's key (sk) and its old item's `n` (None: inserted)."""
    with sqlite3.connect(path / "openddb.sqlite3") as db:
        rows = db.execute("SELECT sk, old FROM recovery_log WHERE tid=? ORDER BY seq", (tid,)).fetchall()
    return [(bytes(sk).decode(), None if old is None else int(orjson.loads(old)["n"]["N"])) for sk, old in rows]


def fresh(engine: SQLiteEngine, meta: TableMeta) -> TableMeta:
    """The table's description as `engine` reads it again after another process's catalog change."""
    found = engine.get_table(meta.name)
    assert found is not None
    return found


def test_each_change_is_logged_once_with_the_item_before_it(engines: tuple[SQLiteEngine, SQLiteEngine],
                                                             tmp_path: Path) -> None:
    engine, other = engines
    meta = engine.create_table(new_meta())
    plain = engine.create_table(new_meta())
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 1))])  # (before recovery: not logged)
    engine.commit()
    other.set_recovery(meta, 7, time.time())  # (another process: this one learns it from the catalog counter)
    meta = fresh(engine, meta)
    blind = WriteOp(meta, skey("a"), lambda old: it("a", 2), blind=True)  # the log still gets the item before
    engine.write([blind])
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 3)), WriteOp(meta, skey("b"), lambda old: it("b", 1))])
    engine.write([WriteOp(meta, skey("b"), lambda old: it("b", 1), blind=True)])  # the same bytes: no change
    engine.write([WriteOp(meta, skey("a"), lambda old: None), WriteOp(plain, skey("a"), lambda old: it("a", 9))])
    assert engine.commit() == "committed"
    assert logged(tmp_path, meta.table_id) == [("a", 1), ("a", 2), ("b", None), ("a", 3)]
    assert logged(tmp_path, plain.table_id) == []
    other.set_recovery(meta, None, time.time())
    meta = fresh(engine, meta)
    engine.write([WriteOp(meta, skey("b"), lambda old: None)])
    assert engine.commit() == "committed"
    assert logged(tmp_path, meta.table_id) == []  # (off: the log is gone, and nothing more is logged)


def test_a_group_that_conflicts_logs_nothing(tmp_path: Path) -> None:
    engine = SQLiteEngine(str(tmp_path), group_commit=True, shared_reads=True)
    engine.session.optimistic = True
    other = SQLiteEngine(str(tmp_path))
    try:
        meta = engine.create_table(new_meta())
        engine.set_recovery(meta, 7, time.time())
        engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 1))])
        # another worker changes the row read
        other.write([WriteOp(fresh(other, meta), skey("a"), lambda old: it("a", 9))])
        assert engine.commit() == "conflict"
        assert logged(tmp_path, meta.table_id) == [("a", None)]  # (the other worker's insertion alone)
    finally:
        other.close()
        engine.close()


Logged = list[tuple[bytes, int | None, bytes | None]]  # records as `stored_log` gives them


def stored_log(path: Path, tid: int) -> Logged:
    """The table's recovery log, in order: each record's sk, and its old item's size and bytes as stored."""
    with sqlite3.connect(path / "openddb.sqlite3") as db:
        rows = db.execute("SELECT sk, old_size, old FROM recovery_log WHERE tid=? ORDER BY seq", (tid,)).fetchall()
    return [(bytes(sk), size, None if old is None else bytes(old)) for sk, size, old in rows]


def stored_rows(path: Path, tid: int) -> dict[bytes, tuple[int, bytes]]:
    """The table's rows as stored: sk -> (size, bytes)."""
    with sqlite3.connect(path / "openddb.sqlite3") as db:
        rows = db.execute("SELECT sk, size, data FROM items WHERE tid=?", (tid,)).fetchall()
    return {bytes(sk): (size, bytes(data)) for sk, size, data in rows}


@pytest.mark.parametrize("streamed", [False, True])
def test_a_blind_write_logs_the_stored_row_exactly(engines: tuple[SQLiteEngine, SQLiteEngine], tmp_path: Path,
                                                   streamed: bool) -> None:
    # A blind write's record reads the row as it stands (in its own statement, or, on a table whose stream needs
    # the row too, once for both): its bytes and size as stored, whatever order its attributes were written in.
    engine, _ = engines
    meta = stream_table(engine) if streamed else engine.create_table(new_meta())
    engine.set_recovery(meta, 7, time.time())
    meta = fresh(engine, meta)
    odd = {"n": {"N": "1"}, "z": {"SS": ["b", "a"]}, "sk": {"S": "a"}, "pk": {"S": "p"}}
    engine.write([WriteOp(meta, skey("a"), lambda old: odd), WriteOp(meta, skey("b"), lambda old: it("b", 1))])
    assert engine.commit() == "committed"
    before = stored_rows(tmp_path, meta.table_id)
    start = len(stored_log(tmp_path, meta.table_id))
    blind = [WriteOp(meta, skey("a"), lambda old: it("a", 2), blind=True),  # an overwrite: the row's bytes
             WriteOp(meta, skey("c"), lambda old: it("c", 1), blind=True),  # an insertion: no item before
             WriteOp(meta, skey("b"), lambda old: None, blind=True),  # a deletion: the row's bytes
             WriteOp(meta, skey("d"), lambda old: None, blind=True)]  # a deletion of nothing: no change
    for op in blind:
        engine.write([op])
    assert engine.commit() == "committed"
    assert stored_log(tmp_path, meta.table_id)[start:] == [
        (b"a", *before[b"a"]), (b"c", None, None), (b"b", *before[b"b"])]



def forty_writes(engine: SQLiteEngine, path: Path, blind: Callable[[int], bool]) -> tuple[Logged, Logged]:
    """Writes to 40 keys of their own in one group (a table with recovery on holding items at every other key), the
    i-th blind if `blind(i)`: the same item again at every eighth key, else a deletion at every third, else a new
    item. The records the log gained, and those expected: one each, in order, with the stored row's size and
    bytes (overwrites, deletions), none for an insertion's old image, none for a rewrite of the same bytes or a
    deletion of nothing."""
    meta = engine.create_table(new_meta())
    engine.set_recovery(meta, 7, time.time())
    meta = fresh(engine, meta)
    engine.write([WriteOp(meta, skey(f"k{i:02}"), lambda old, i=i: it(f"k{i:02}", i)) for i in range(0, 40, 2)])
    assert engine.commit() == "committed"
    before = stored_rows(path, meta.table_id)
    start = len(stored_log(path, meta.table_id))
    expected: Logged = []
    for i in range(40):
        sk = f"k{i:02}"
        if i % 8 == 0:  # the same bytes again: no record
            engine.write([WriteOp(meta, skey(sk), lambda old, i=i, sk=sk: it(sk, i), blind=blind(i))])
            continue
        engine.write([WriteOp(meta, skey(sk), lambda old, i=i, sk=sk: None if i % 3 == 0 else it(sk, i + 100),
                              blind=blind(i))])
        if sk.encode() in before:
            expected.append((sk.encode(), *before[sk.encode()]))
        elif i % 3:  # (a deletion of nothing is no change)
            expected.append((sk.encode(), None, None))
    assert engine.commit() == "committed"
    return stored_log(path, meta.table_id)[start:], expected


def test_a_group_of_many_blind_writes_logs_each_exactly(engines: tuple[SQLiteEngine, SQLiteEngine],
                                                        tmp_path: Path) -> None:
    # Blind writes to 40 keys of their own in one group (more than one statement's worth of records that read
    # their rows): one record each, in order, as `forty_writes` expects.
    engine, _ = engines
    gained, expected = forty_writes(engine, tmp_path, lambda i: True)
    assert gained == expected


def test_a_group_of_writes_that_read_their_items_logs_each_exactly(engines: tuple[SQLiteEngine, SQLiteEngine],
                                                                  tmp_path: Path) -> None:
    # Writes that read their items (updates, insertions, deletions) to 40 keys of their own in one group, with
    # runs of three blind ones among them (more than one statement's worth of records of the items read, in
    # runs): one record each, in order, holding the stored row's size and bytes, as `forty_writes` expects.
    engine, _ = engines
    gained, expected = forty_writes(engine, tmp_path, lambda i: i % 20 in (5, 6, 7))
    assert gained == expected


def recovering(engine: SQLiteEngine, path: Path, keys: str) -> tuple[TableMeta, int]:
    """A new table with recovery on holding an item of `n` 1 at each of `keys`, and how many records its log
    holds then."""
    meta = engine.create_table(new_meta())
    engine.set_recovery(meta, 7, time.time())
    meta = fresh(engine, meta)
    engine.write([WriteOp(meta, skey(k), lambda old, k=k: it(k, 1)) for k in keys])
    assert engine.commit() == "committed"
    return meta, len(logged(path, meta.table_id))


def test_a_group_logs_read_and_unread_changes_in_order(engines: tuple[SQLiteEngine, SQLiteEngine],
                                                       tmp_path: Path) -> None:
    # One request's changes, blind and read, to keys seen and unseen: one record each, in request order, each with
    # the item before it (the stored row for a key's first blind change, the previous change's item after it).
    engine, _ = engines
    meta, start = recovering(engine, tmp_path, "abc")
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 2), blind=True),
                  WriteOp(meta, skey("b"), lambda old: it("b", 2), blind=True),
                  WriteOp(meta, skey("a"), lambda old: it("a", 3)),
                  WriteOp(meta, skey("c"), lambda old: it("c", 1), blind=True),  # (the same bytes: no change)
                  WriteOp(meta, skey("d"), lambda old: it("d", 1), blind=True),
                  WriteOp(meta, skey("b"), lambda old: it("b", 3), blind=True),
                  WriteOp(meta, skey("c"), lambda old: it("c", 2))])
    assert engine.commit() == "committed"
    assert logged(tmp_path, meta.table_id)[start:] == [("a", 1), ("b", 1), ("a", 2), ("d", None), ("b", 2),
                                                        ("c", 1)]


def test_writes_held_for_the_group_are_seen_by_what_follows_them(engines: tuple[SQLiteEngine, SQLiteEngine],
                                                                 tmp_path: Path) -> None:
    # Under the lock, a group's writes to a table with recovery on wait to be written together (their records,
    # then their rows): a read in the group, a later write that reads their row and a second write of one of
    # their keys each come after them, and each record holds the item before its change, as if each write had
    # been written at once.
    engine, _ = engines
    meta, start = recovering(engine, tmp_path, "ab")

    def bump(old: Item | None) -> Item | None:
        return None if old is None else it(old["sk"]["S"], int(old["n"]["N"]) + 10)

    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 2), blind=True)])
    engine.write([WriteOp(meta, skey("c"), lambda old: it("c", 1), blind=True)])
    # (a read inside the group's transaction, or after the write's own commit; an optimistic group reads the
    # committed rows, its writes staged apart)
    row = engine.get(meta, skey("a"))
    assert row is not None and orjson.loads(row.data)["n"] == {"N": "1" if engine.session.optimistic else "2"}
    engine.write([WriteOp(meta, skey("a"), bump)])  # (a read and a blind write to keys of their own)
    engine.write([WriteOp(meta, skey("d"), lambda old: it("d", 1), blind=True)])
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 12), blind=True)])  # (the same bytes: no change)
    assert engine.commit() == "committed"
    engine.write([WriteOp(meta, skey("b"), lambda old: it("b", 2), blind=True)])
    engine.write([WriteOp(meta, skey("b"), bump)])  # (reads the blind write's item)
    engine.write([WriteOp(meta, skey("c"), lambda old: it("c", 2), blind=True)])
    engine.write([WriteOp(meta, skey("c"), lambda old: None, blind=True)])
    assert engine.commit() == "committed"
    assert logged(tmp_path, meta.table_id)[start:] == [("a", 1), ("c", None), ("a", 2), ("d", None), ("b", 1),
                                                        ("b", 2), ("c", 1), ("c", 2)]
    assert {sk: orjson.loads(data)["n"]["N"] for sk, (_, data) in stored_rows(tmp_path, meta.table_id).items()} \
        == {b"a": "12", b"b": "12", b"d": "1"}
