"""SQLite read snapshots shared by the requests of one event-loop pass (`shared_reads`): renewed as soon as any
engine on the store commits, consistent within one get_many, and released by end_reads."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from openddb.storage.base import EngineBusy, StorageKey, WriteOp
from openddb.storage.sqlite import SQLiteEngine
from tests.storage.test_engine_contract import item, new_meta, put

KEY = StorageKey(7, b"p", b"s")


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[SQLiteEngine, SQLiteEngine]]:
    """A writer and a reader engine on one store, as two worker processes would have."""
    writer = SQLiteEngine(str(tmp_path), group_commit=True)
    reader = SQLiteEngine(str(tmp_path), group_commit=True, shared_reads=True)
    yield writer, reader
    reader.close()
    writer.close()


def value(engine: SQLiteEngine, meta: object, key: StorageKey = KEY) -> bytes | None:
    row = engine.get(meta, key)  # type: ignore[arg-type]
    return None if row is None else row.data


def test_a_commit_elsewhere_renews_the_snapshot_at_once(two: tuple[SQLiteEngine, SQLiteEngine]) -> None:
    writer, reader = two
    meta = writer.create_table(new_meta())
    assert value(reader, meta) is None
    assert reader.reading  # the snapshot is open, as within one pass
    for n in range(3):
        writer.write([put(meta, KEY, item(n))])
        writer.commit()
        assert value(reader, meta) == b'{"pk":{"S":"p"},"n":{"N":"%d"}}' % n  # no end_reads in between
    reader.end_reads()
    assert not reader.reading


def test_get_many_reads_one_snapshot(two: tuple[SQLiteEngine, SQLiteEngine]) -> None:
    writer, reader = two
    meta = writer.create_table(new_meta())
    keys = [StorageKey(i, b"p%d" % i, b"") for i in range(3)]
    writer.write([put(meta, key, item(1)) for key in keys])
    writer.commit()
    seen = []
    original = reader._db

    class Interleaved:
        """Commits another write after the reader's first row: the later rows must not see it."""

        def __init__(self) -> None:
            self.calls = 0

        def __getattr__(self, name: str) -> object:
            return getattr(original, name)

        def execute(self, sql: str, params: object = ()) -> object:
            cursor = original.execute(sql, params)  # type: ignore[arg-type]
            if sql.startswith("SELECT size, data"):
                self.calls += 1
                if self.calls == 1:
                    writer.write([put(meta, key, item(2)) for key in keys])
                    writer.commit()
            return cursor

    reader._db = Interleaved()  # type: ignore[assignment]
    try:
        rows = reader.get_many([(meta, key) for key in keys])
    finally:
        reader._db = original
    seen = [row.data for row in rows if row is not None]
    assert len(set(seen)) == 1, seen  # all before or all after the other commit, never a mix
    assert value(reader, meta, keys[0]) == b'{"pk":{"S":"p"},"n":{"N":"2"}}'  # and the next read renews


def test_without_shared_reads_nothing_is_held(tmp_path: Path) -> None:
    engine = SQLiteEngine(str(tmp_path), group_commit=True)
    meta = engine.create_table(new_meta())
    assert value(engine, meta) is None
    assert not engine.reading and not engine._db.in_transaction
    engine.close()


def test_a_write_waiting_for_the_lock_first_releases_its_snapshot(two: tuple[SQLiteEngine, SQLiteEngine],
                                                                  tmp_path: Path) -> None:
    """A reader parked on the writer lock would hold back a RESTART checkpoint, which holds back the lock's
    holder (its commit waits for the checkpoint), which holds back the reader: every writer of the store stalled
    until the checkpoint gave up. So the snapshot ends before the wait, and the checkpoint can complete."""
    holder, waiter = two
    waiter.session.wait = False
    meta = holder.create_table(new_meta())
    holder.write([put(meta, KEY, item(0))])
    holder.commit()
    assert value(waiter, meta) is not None
    assert waiter.reading
    holder.write([put(meta, KEY, item(1))])  # holds the writer lock until its flush
    with pytest.raises(EngineBusy):
        waiter.write([put(meta, StorageKey(8, b"q", b"s"), item(2))])
    holder.commit()
    checkpoint = sqlite3.connect(tmp_path / "openddb.sqlite3", isolation_level=None, timeout=0)
    try:
        busy, _, _ = checkpoint.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
    finally:
        checkpoint.close()
    assert busy == 0


def test_a_rejected_blind_request_leaves_its_group_as_it_was(two: tuple[SQLiteEngine, SQLiteEngine]) -> None:
    """One worker's pass under the writer lock (not optimistic): a write, then a request of blind writes whose
    last apply fails. The failed request writes nothing; the group around it commits as it was."""
    writer, reader = two
    meta = writer.create_table(new_meta())
    writer.write([put(meta, KEY, item(1))])
    assert writer.session.pending  # the group is open, holding the lock

    def reject(old: object) -> None:
        raise ValueError("rejected")

    other = StorageKey(7, b"p", b"other")
    with pytest.raises(ValueError):
        writer.write([WriteOp(meta, other, lambda old: item(2), blind=True),
                      WriteOp(meta, StorageKey(7, b"p", b"third"), reject, blind=True)])
    writer.write([WriteOp(meta, StorageKey(7, b"p", b"fourth"), lambda old: item(4), blind=True)])
    writer.commit()
    reader.end_reads()
    assert value(reader, meta) == orjson.dumps(item(1))
    assert value(reader, meta, other) is None
    assert value(reader, meta, StorageKey(7, b"p", b"fourth")) is not None
