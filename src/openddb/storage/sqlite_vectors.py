"""Vector indexes for the SQLite engine (a mixin of `SQLiteEngine`).

Layout: `vector_entries` holds one row per item a vector index holds: (tid, iid, part) is the search partition
(`vectors.entries.part_of`), (tpk, tsk) the item's table key, `vec` its packed float32 vector and `filters` its
INLINE_FILTER values; a rowid table (rows of 1-16 KB read in bulk) with a unique index on its key.
`vector_partitions` holds each partition's version, a random stamp every write that changes one of its entries
replaces, in the same transaction: a search reads it in its snapshot and reuses the partition's loaded matrix only
if it is unchanged (`vectors.exact.PartitionCache`).

Upkeep runs in `SQLiteEngine.write`'s transaction beside the secondary indexes' (`_maintain_vectors`, called by
`_maintain_indexes` with the description the catalog holds inside that transaction), so a search never sees a
vector whose item is gone or misses one whose write was acknowledged. Results are read from `items` in the same
snapshot as the entries, and projected by the API.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import orjson

from openddb.model import Item
from openddb.model.keys import partition_hash
from openddb.model.schema import TableMeta, VectorIndexMeta
from openddb.storage.base import StorageKey, VectorHit
from openddb.storage.sqlite_indexes import committed, items_after
from openddb.vectors.entries import entry_of, unchanged

if TYPE_CHECKING:
    from openddb.vectors.exact import PartitionCache

VECTOR_SCHEMA = """;
CREATE TABLE IF NOT EXISTS vector_entries (
    tid INTEGER NOT NULL, iid INTEGER NOT NULL, part BLOB NOT NULL, tpk BLOB NOT NULL, tsk BLOB NOT NULL,
    vec BLOB NOT NULL, filters BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS vector_entries_key ON vector_entries (tid, iid, part, tpk, tsk);
CREATE TABLE IF NOT EXISTS vector_partitions (
    tid INTEGER NOT NULL, iid INTEGER NOT NULL, part BLOB NOT NULL, version INTEGER NOT NULL,
    PRIMARY KEY (tid, iid, part)
) WITHOUT ROWID
"""

_PUT = ("INSERT INTO vector_entries (tid, iid, part, tpk, tsk, vec, filters) VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (tid, iid, part, tpk, tsk) DO UPDATE SET vec=excluded.vec, filters=excluded.filters")
_DELETE = "DELETE FROM vector_entries WHERE tid=? AND iid=? AND part=? AND tpk=? AND tsk=?"
# A new random stamp, not version + 1: a version seen inside a write transaction that is then rolled back must
# never come back with other entries (a search may have cached the partition under it).
_BUMP = ("INSERT INTO vector_partitions (tid, iid, part, version) VALUES (?, ?, ?, random()) "
         "ON CONFLICT (tid, iid, part) DO UPDATE SET version=random()")
_VERSION = "SELECT version FROM vector_partitions WHERE tid=? AND iid=? AND part=?"
_ROWS = "SELECT tpk, tsk, vec, filters FROM vector_entries WHERE tid=? AND iid=? AND part=?"
_ITEM = "SELECT data FROM items WHERE tid=? AND h=? AND pk=? AND sk=?"


class SQLiteVectors:
    """Vector index storage, upkeep and search; mixed into SQLiteEngine."""

    _db: sqlite3.Connection
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
            before, after = entry_of(index, old), entry_of(index, new)
            if before is not None and (after is None or before.part != after.part):
                db.execute(_DELETE, (tid, index.index_id, before.part, tpk, tsk))
                db.execute(_BUMP, (tid, index.index_id, before.part))
                before = None
            if after is not None and (before is None or before.vector != after.vector
                                      or before.filters != after.filters):
                db.execute(_PUT, (tid, index.index_id, after.part, tpk, tsk, after.vector, after.filters_blob))
                db.execute(_BUMP, (tid, index.index_id, after.part))

    def vector_search(self, meta: TableMeta, index: VectorIndexMeta, part: bytes, query: list[float], k: int,
                      conditions: list[tuple[int, str]]) -> list[VectorHit]:
        from openddb.vectors import exact  # numpy: loaded by the first search, not by every server start

        db = self._read()
        own = not db.in_transaction  # one snapshot for the version, the entries and the items
        if own:
            db.execute("BEGIN")
        try:
            tid, iid = meta.table_id, index.index_id
            found = db.execute(_VERSION, (tid, iid, part)).fetchone()
            version = 0 if found is None else int(found[0])
            if self._vector_cache is None:
                self._vector_cache = exact.PartitionCache()
            loaded = self._vector_cache.get((tid, iid, part), version)
            if loaded is None:
                loaded = exact.load(version, db.execute(_ROWS, (tid, iid, part)), index.dimensions,
                                    len(index.filters))
                self._vector_cache.put((tid, iid, part), loaded)
            hits = []
            for row, score in exact.search(loaded, query, k, index.distance, conditions):
                tpk, tsk = loaded.keys[row]
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
        for table in ("vector_entries", "vector_partitions"):
            if iids is None:
                db.execute(f"DELETE FROM {table} WHERE tid=?", (tid,))
            for iid in iids or ():
                db.execute(f"DELETE FROM {table} WHERE tid=? AND iid=?", (tid, iid))


def _only(table: TableMeta, index: VectorIndexMeta) -> TableMeta:
    """A description holding only `index` of the table's vector indexes: what a backfill chunk maintains."""
    return dataclasses.replace(table, vector_indexes=[index])

