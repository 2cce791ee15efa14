"""An optimistic group (workers sharing a SQLite store): the writes of one pass, staged and written by `flush`.

Rows of tables without indexes are written together after the group's checks; rows of tables with indexes are
written one by one with their index upkeep, whose item collection check must see the group's earlier rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from openddb.model.indexes import entry_of
from openddb.model.values import item_size
from openddb.storage.base import SortRange, WriteOp
from openddb.storage.sqlite import SQLiteEngine
from tests.storage.test_engine_contract import new_meta
from tests.storage.test_index_contract import LSI, delete, doc, indexed_meta, put, skey


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[tuple[SQLiteEngine, SQLiteEngine]]:
    """A worker's engine writing optimistically, and a second engine on the same store to look from."""
    engine = SQLiteEngine(str(tmp_path), group_commit=True, shared_reads=True)
    engine.session.optimistic = True
    other = SQLiteEngine(str(tmp_path))
    yield engine, other
    other.close()
    engine.close()


def blind(op: WriteOp) -> WriteOp:
    return WriteOp(op.table, op.key, op.apply, True)


def test_a_group_of_puts_and_deletes_over_several_tables(worker: tuple[SQLiteEngine, SQLiteEngine]) -> None:
    engine, other = worker
    plain = engine.create_table(new_meta("plain"))
    indexed = engine.create_table(indexed_meta(LSI))
    gone, kept = doc("p", "gone"), doc("p", "kept", x="old")
    engine.write([put(plain, gone), put(plain, kept)])
    engine.commit()

    new = [doc(f"p{i}", "s", x="v" * i) for i in range(30)]
    engine.write([blind(put(plain, item)) for item in new])  # one request: a batch of puts
    engine.write([blind(delete(plain, gone)), blind(put(plain, doc("p", "kept", x="new")))])
    engine.write([put(indexed, doc("q", "a", l="l1")), put(indexed, doc("q", "b", l="l2"))])
    assert other.get(plain, skey(new[0])) is None  # nothing is written before the flush
    engine.commit()

    for item in new:
        row = other.get(plain, skey(item))
        assert row is not None and row.size == item_size(item)
    assert other.get(plain, skey(gone)) is None
    row = other.get(plain, skey(kept))
    assert row is not None and b'"new"' in row.data
    assert [r.key.tsk for r in other.index_query(indexed, LSI, skey(doc("q", "a")).h, b"q", SortRange(), True, None)] \
        == [b"a", b"b"]


def test_the_collection_check_counts_the_groups_earlier_rows(worker: tuple[SQLiteEngine, SQLiteEngine],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Two writes to one item collection, each within the limit alone but not together: the group conflicts
    (its requests then run again one by one, and the second is refused) and writes nothing."""
    engine, other = worker
    plain = engine.create_table(new_meta("plain"))
    indexed = engine.create_table(indexed_meta(LSI))
    first, second = doc("q", "a", l="l", x="v" * 300), doc("q", "b", l="l", x="v" * 300)
    size = item_size(first)  # the same for both items
    entry = entry_of(indexed, LSI, first, size)
    assert entry is not None
    # Both items and both entries exceed the limit by a byte. The entries are written before the check: were the
    # first item's row not written by then, the second write would count 2 entries and 1 item, which fit.
    monkeypatch.setattr("openddb.storage.sqlite_indexes.ITEM_COLLECTION_LIMIT", 2 * (size + entry.size) - 1)
    engine.write([blind(put(plain, doc("p", "s")))])
    engine.write([put(indexed, first)])
    engine.write([put(indexed, second)])
    assert engine.commit() == "conflict"
    assert other.get(indexed, skey(first)) is None and other.get(plain, skey(doc("p", "s"))) is None
    engine.write([put(indexed, first)])  # alone, the first fits
    engine.commit()
    assert other.get(indexed, skey(first)) is not None
