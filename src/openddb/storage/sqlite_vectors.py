"""Vector indexes for the SQLite engine (a mixin of `SQLiteEngine`).

Layout: `vector_entries` holds one row per item a vector index holds: (tid, iid, part) is the search partition
(`vectors.entries.part_of`), (tpk, tsk) the item's table key, `vec` its packed float32 vector, `filters` its
INLINE_FILTER values and `seq` the partition's change sequence when it was last written; a rowid table (rows of
1-16 KB read in bulk) with a unique index on its key and one on (partition, seq). `vector_partitions` holds each
partition's state: `version`, its epoch (a random stamp given when the row is made), and `seq`, raised by one by
every change to its entries in the writing transaction. `vector_tombstones` holds (partition, seq, key) for each
entry a change removed, kept for `exact.RETAIN` changes of its partition. A search reads the state in its snapshot
and applies only the entries and tombstones stamped after the matrix it has cached (`vectors.exact.find`).

Upkeep runs in `SQLiteEngine.write`'s transaction beside the secondary indexes' (`_maintain_vectors`, called by
`_maintain_indexes` with the description the catalog holds inside that transaction), so a search never sees a
vector whose item is gone or misses one whose write was acknowledged. Results are read from `items` in the same
snapshot as the entries, and projected by the API. A search inside a write transaction (a lone worker's group of
the same event-loop pass) sees changes that may yet be rolled back: it searches them without caching them.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import orjson

from openddb.model import Item
from openddb.model.keys import partition_hash
from openddb.model.schema import TableMeta, VectorIndexMeta
from openddb.storage.base import StorageKey, VectorHit
from openddb.storage.sqlite_indexes import committed, items_after
from openddb.storage.sqlite_schema import add_columns
from openddb.vectors.entries import RETAIN, Changes, EntryRow, entry_of, unchanged

if TYPE_CHECKING:
    from openddb.vectors.exact import PartitionCache

VECTOR_SCHEMA = """;
CREATE TABLE IF NOT EXISTS vector_entries (
    tid INTEGER NOT NULL, iid INTEGER NOT NULL, part BLOB NOT NULL, tpk BLOB NOT NULL, tsk BLOB NOT NULL,
    vec BLOB NOT NULL, filters BLOB NOT NULL, seq INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS vector_entries_key ON vector_entries (tid, iid, part, tpk, tsk);
CREATE TABLE IF NOT EXISTS vector_partitions (
    tid INTEGER NOT NULL, iid INTEGER NOT NULL, part BLOB NOT NULL, version INTEGER NOT NULL,
    seq INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (tid, iid, part)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vector_tombstones (
    tid INTEGER NOT NULL, iid INTEGER NOT NULL, part BLOB NOT NULL, seq INTEGER NOT NULL, tpk BLOB NOT NULL,
    tsk BLOB NOT NULL, PRIMARY KEY (tid, iid, part, seq, tpk, tsk)
) WITHOUT ROWID
"""
# Run after VECTOR_SCHEMA: a store made before change sequences gains the columns (its partitions keep their
# version stamps as epochs, at seq 0), then the index on them.
_SEQ_INDEX = "CREATE INDEX IF NOT EXISTS vector_entries_seq ON vector_entries (tid, iid, part, seq)"

_PUT = ("INSERT INTO vector_entries (tid, iid, part, tpk, tsk, vec, filters, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (tid, iid, part, tpk, tsk) DO UPDATE SET vec=excluded.vec, filters=excluded.filters, "
        "seq=excluded.seq")
_DELETE = "DELETE FROM vector_entries WHERE tid=? AND iid=? AND part=? AND tpk=? AND tsk=?"
# The partition's next change: a new partition's epoch is a random stamp, so a partition made again (after a
# rollback, or under a table id reused) never matches a matrix cached under an earlier one.
_BUMP = ("INSERT INTO vector_partitions (tid, iid, part, version, seq) VALUES (?, ?, ?, random(), 1) "
         "ON CONFLICT (tid, iid, part) DO UPDATE SET seq=seq + 1 RETURNING seq")
_TOMBSTONE = "INSERT INTO vector_tombstones (tid, iid, part, seq, tpk, tsk) VALUES (?, ?, ?, ?, ?, ?)"
_PURGE = "DELETE FROM vector_tombstones WHERE tid=? AND iid=? AND part=? AND seq<=?"
_STATE = "SELECT version, seq FROM vector_partitions WHERE tid=? AND iid=? AND part=?"
_ROWS = "SELECT tpk, tsk, vec, filters FROM vector_entries WHERE tid=? AND iid=? AND part=?"
_WRITTEN = "SELECT tpk, tsk, vec, filters FROM vector_entries WHERE tid=? AND iid=? AND part=? AND seq>?"
_REMOVED = "SELECT tpk, tsk FROM vector_tombstones WHERE tid=? AND iid=? AND part=? AND seq>?"
_ITEM = "SELECT data FROM items WHERE tid=? AND h=? AND pk=? AND sk=?"


class SQLiteVectors:
    """Vector index storage, upkeep and search; mixed into SQLiteEngine."""

    _db: sqlite3.Connection
    reading: bool
    supports_vectors = True
    _vector_cache: PartitionCache | None = None

    if TYPE_CHECKING:  # provided by SQLiteEngine
        def _transaction(self, ddl: bool = False) -> AbstractContextManager[sqlite3.Connection]: ...

        def _read(self) -> sqlite3.Connection: ...

    def _maintain_vectors(self, live: TableMeta, key: StorageKey, old: Item | None, new: Item | None) -> None:
        """Replace `old`'s vector entries by `new`'s (inside write's transaction)."""
        db = self._db
        tid = live.table_id
        tpk, tsk = bytearray(key.pk), bytearray(key.sk)
        for index in live.vector_indexes:
            if unchanged(index, old, new):
                continue
            iid = index.index_id
            before, after = entry_of(index, old), entry_of(index, new)
            if before is not None and (after is None or before.part != after.part):
                db.execute(_DELETE, (tid, iid, before.part, tpk, tsk))
                seq = db.execute(_BUMP, (tid, iid, before.part)).fetchone()[0]
                db.execute(_TOMBSTONE, (tid, iid, before.part, seq, tpk, tsk))
                if seq > RETAIN:
                    db.execute(_PURGE, (tid, iid, before.part, seq - RETAIN))
                before = None
            if after is not None and (before is None or before.vector != after.vector
                                      or before.filters != after.filters):
                seq = db.execute(_BUMP, (tid, iid, after.part)).fetchone()[0]
                db.execute(_PUT, (tid, iid, after.part, tpk, tsk, after.vector, after.filters_blob, seq))

    def vector_search(self, meta: TableMeta, index: VectorIndexMeta, part: bytes, query: list[float], k: int,
                      conditions: list[tuple[int, str]]) -> list[VectorHit]:
        from openddb.vectors import exact  # numpy: loaded by the first search, not by every server start

        db = self._read()
        own = not db.in_transaction  # one snapshot for the state, the entries and the items
        final = own or self.reading  # (else a write transaction: what it sees may yet be rolled back)
        if own:
            db.execute("BEGIN")
        try:
            tid, iid = meta.table_id, index.index_id
            found = db.execute(_STATE, (tid, iid, part)).fetchone()
            if self._vector_cache is None:
                self._vector_cache = exact.PartitionCache()
            ranked = exact.find(self._vector_cache, (tid, iid, part), (0, 0) if found is None else found,
                                _Partition(db, (tid, iid, part)), (index.dimensions, len(index.filters)),
                                exact.Wanted(query, k, index.distance, conditions), final)
            hits = []
            for (tpk, tsk), score in ranked:
                data = db.execute(_ITEM, (tid, partition_hash(tpk), tpk, tsk)).fetchone()
                if data is not None:
                    hits.append(VectorHit(score, orjson.loads(data[0])))
            return hits
        finally:
            if own:
                db.execute("COMMIT")

    def vector_stats(self, meta: TableMeta, index: VectorIndexMeta) -> tuple[int, int]:
        count, size = self._read().execute(
            "SELECT count(*), coalesce(sum(length(vec) + length(filters)), 0) FROM vector_entries "
            "WHERE tid=? AND iid=?", (meta.table_id, index.index_id)).fetchone()
        return int(count), int(size)

    def backfill_vector_index(self, meta: TableMeta, index: VectorIndexMeta, after: StorageKey | None,
                              limit: int) -> StorageKey | None:
        with self._transaction() as db:
            live = committed(db, meta.table_id)
            current = None if live is None else next(
                (i for i in live.vector_indexes if i.index_id == index.index_id), None)
            if live is None or current is None:
                return None
            rows = items_after(db, live.table_id, after, limit)
            for _h, pk, sk, data in rows:
                self._maintain_vectors(_only(live, current), StorageKey(_h, pk, sk), None, orjson.loads(data))
            return StorageKey(rows[-1][0], rows[-1][1], rows[-1][2]) if len(rows) == limit else None

    def drop_vector_entries(self, db: sqlite3.Connection, tid: int, iids: Sequence[int] | None) -> None:
        """Remove the entries of the vector indexes `iids` of a table (all of them: None), in `db`'s transaction."""
        for table in ("vector_entries", "vector_partitions", "vector_tombstones"):
            if iids is None:
                db.execute(f"DELETE FROM {table} WHERE tid=?", (tid,))
            for iid in iids or ():
                db.execute(f"DELETE FROM {table} WHERE tid=? AND iid=?", (tid, iid))


class _Partition:
    """One partition's entries and tombstones, read in the search's snapshot (`exact.Source`)."""

    def __init__(self, db: sqlite3.Connection, where: tuple[int, int, bytes]) -> None:
        self._db, self._where = db, where

    def rows(self) -> Iterable[EntryRow]:
        return self._db.execute(_ROWS, self._where)

    def changes(self, after: int) -> Changes:
        removed = [(bytes(tpk), bytes(tsk)) for tpk, tsk in self._db.execute(_REMOVED, (*self._where, after))]
        return Changes(removed, self._db.execute(_WRITTEN, (*self._where, after)).fetchall())


def upgrade_vector_schema(db: sqlite3.Connection) -> None:
    """Inside the schema transaction, after VECTOR_SCHEMA: bring a store made before change sequences up to date."""
    for table in ("vector_entries", "vector_partitions"):
        add_columns(db, table, {"seq": "INTEGER NOT NULL DEFAULT 0"})
    db.execute(_SEQ_INDEX)


def _only(table: TableMeta, index: VectorIndexMeta) -> TableMeta:
    """A description holding only `index` of the table's vector indexes: what a backfill chunk maintains."""
    return dataclasses.replace(table, vector_indexes=[index])

