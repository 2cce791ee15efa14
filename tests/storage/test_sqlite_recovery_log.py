"""SQLite's recovery log, written by the write path: one record per change of a table with recovery on (the item
before it), in order, committed with the change, from whichever way the write was grouped; none for other tables,
none for a rewrite with the very same bytes, none once recovery is off."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from openddb.model.schema import TableMeta
from openddb.storage.base import WriteOp
from openddb.storage.sqlite import SQLiteEngine
from tests.storage.test_engine_contract import new_meta
from tests.storage.test_stream_contract import it, skey


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
