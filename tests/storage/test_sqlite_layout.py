"""SQLite layout: a Scan page continues with a B-tree seek to its start key, not a walk from the segment's start."""

from __future__ import annotations

import sqlite3

import pytest

from openddb.storage.base import HASH_SPACE, IndexKey, StorageKey
from openddb.storage.sqlite import SQLiteEngine, scan_sql
from openddb.storage.sqlite_indexes import index_scan_sql
from tests.storage.test_stream_contract import streamed


@pytest.fixture
def database() -> sqlite3.Connection:
    engine = SQLiteEngine(None)
    yield engine._db
    engine.close()


def plan(db: sqlite3.Connection, sql: str, params: object) -> str:
    return "\n".join(row[3] for row in db.execute("EXPLAIN QUERY PLAN " + sql, params))


def test_scan_continuation_seeks_to_the_start_key(database: sqlite3.Connection) -> None:
    sql, params = scan_sql(1, 0, HASH_SPACE // 2, StorageKey(12345, b"p", b"s"))
    assert "SEARCH items USING PRIMARY KEY (tid=? AND (h,pk,sk)>(?,?,?)" in plan(database, sql, params)


def test_index_scan_continuation_seeks_to_the_start_key(database: sqlite3.Connection) -> None:
    sql, params = index_scan_sql(1, 2, 0, HASH_SPACE, IndexKey(12345, b"p", b"s", b"tp", b"ts"))
    assert "(tid=? AND iid=? AND (h,pk,sk,tpk,tsk)>(?,?,?,?,?)" in plan(database, sql, params)


def test_a_start_key_before_the_segment_starts_at_the_segment(database: sqlite3.Connection) -> None:
    sql, params = scan_sql(1, 1000, 2000, StorageKey(5, b"p", b"s"))
    assert params == (1, 1000, 2000)
    assert "(tid=? AND h>? AND h<?)" in plan(database, sql, params)


def test_a_store_made_before_gains_the_token_sizes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A data directory whose tokens table predates the sizes column gets it when it is opened; its tokens stay."""
    old = sqlite3.connect(tmp_path / "openddb.sqlite3")
    old.execute("CREATE TABLE tokens (token TEXT PRIMARY KEY, hash BLOB NOT NULL, created_at REAL NOT NULL)")
    old.execute("INSERT INTO tokens VALUES ('t', x'01', 1.0)")
    old.commit()
    old.close()
    engine = SQLiteEngine(str(tmp_path))
    try:
        stored = engine.get_token("t")
        assert stored is not None and (stored.request_hash, stored.charged) == (b"\x01", None)
    finally:
        engine.close()


def test_a_stream_puts_no_trigger_on_items(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Stream records are written by the write path itself: a store with a streamed table has no trigger that
    every other table's writes would run through."""
    engine = SQLiteEngine(str(tmp_path))
    try:
        streamed(engine)
        assert engine._db.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall() == []
    finally:
        engine.close()
