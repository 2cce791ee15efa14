"""Vector indexes for the PostgreSQL engine (a mixin of `PostgresEngine`), laid out as on SQLite (see
`sqlite_vectors.py`): `openddb_vector_entries` (a search partition's entries: the item's table key, packed float32
vector, INLINE_FILTER values) and `openddb_vector_partitions` (each partition's version, a random stamp replaced in
the writing transaction). Keys are held as the index entries' are (`postgres_indexes.stored_key`: a long one as a
prefix and a digest, whole beside it).

Search is exact, as on SQLite: the partition's vectors are loaded once into numpy and reused while its version is
unchanged (`vectors.exact`), the version, the entries and the result items read in one REPEATABLE READ snapshot.
pgvector is not used: CI's PostgreSQL (Debian's packages) lacks it, and only portable DDL is used by the
migrations; an exact search gives the same results (docs/ARCHITECTURE.md).

Every write to a partition updates its version row, so writes to one search partition serialize on that row
until they commit (across nodes too); writes to other partitions and tables do not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
import psycopg

from openddb.model import Item
from openddb.model.keys import partition_hash
from openddb.model.schema import TableMeta, VectorIndexMeta
from openddb.storage.base import StorageKey, VectorHit
from openddb.storage.postgres_indexes import (
    ENTRY_KEY_LIMIT,
    ITEM_KEY_LIMIT,
    ItemKey,
    Migration,
    one_row,
    read_key,
    stored_key,
    whole_key,
)
from openddb.vectors.entries import entry_of, unchanged

if TYPE_CHECKING:
    from openddb.storage.postgres_pipeline import Pipeline
    from openddb.vectors.exact import PartitionCache

T = TypeVar("T")

VECTOR_MIGRATION: list[Migration] = [
    "CREATE TABLE IF NOT EXISTS openddb_vector_entries (tid BIGINT NOT NULL, iid BIGINT NOT NULL, "
    "part BYTEA NOT NULL, tpk BYTEA NOT NULL, tsk BYTEA NOT NULL, tpkx BYTEA, tskx BYTEA, vec BYTEA NOT NULL, "
    "filters BYTEA NOT NULL, PRIMARY KEY (tid, iid, part, tpk, tsk))",
    "CREATE TABLE IF NOT EXISTS openddb_vector_partitions (tid BIGINT NOT NULL, iid BIGINT NOT NULL, "
    "part BYTEA NOT NULL, version BIGINT NOT NULL, PRIMARY KEY (tid, iid, part))",
]
_PUT = ("INSERT INTO openddb_vector_entries (tid, iid, part, tpk, tsk, tpkx, tskx, vec, filters) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (tid, iid, part, tpk, tsk) "
        "DO UPDATE SET vec = EXCLUDED.vec, filters = EXCLUDED.filters")
_DELETE = "DELETE FROM openddb_vector_entries WHERE tid=%s AND iid=%s AND part=%s AND tpk=%s AND tsk=%s"
# A new random stamp (see sqlite_vectors.py's _BUMP for why not version + 1).
_BUMP = ("INSERT INTO openddb_vector_partitions (tid, iid, part, version) VALUES (%s, %s, %s, "
         "(random() * 9.2e18)::bigint) ON CONFLICT (tid, iid, part) DO UPDATE SET version = "
         "(random() * 9.2e18)::bigint")
_VERSION = "SELECT version FROM openddb_vector_partitions WHERE tid=%s AND iid=%s AND part=%s"
_ROWS = ("SELECT tpk, tsk, vec, filters, tpkx, tskx FROM openddb_vector_entries WHERE tid=%s AND iid=%s "
         "AND part=%s")
_ITEM = "SELECT data FROM openddb_items WHERE tid=%s AND h=%s AND pk=%s AND sk=%s"
_SNAPSHOT = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


class PostgresVectors:
    """Vector index storage, upkeep and search; mixed into PostgresEngine."""

    supports_vectors = True
    _vector_cache: PartitionCache | None = None

    if TYPE_CHECKING:  # provided by PostgresEngine
        _pipe: Pipeline

        def _cursor(self) -> psycopg.Cursor[Any]: ...
        def _transact(self, body: Callable[[psycopg.Cursor[Any]], T]) -> T: ...
        def _transaction(self, begin: str = "BEGIN") -> Any: ...
        def _lock_tables(self, cur: psycopg.Cursor[Any], tids: Sequence[int]) -> dict[int, TableMeta | None]: ...

    def _maintain_vectors(self, live: dict[int, TableMeta | None],
                          changes: list[tuple[ItemKey, Item | None, Item | None, int, int]]) -> bool:
        """Replace each changed item's old vector entries by its new ones (queued on `_pipe`, like the secondary
        indexes' upkeep); whether anything was queued."""
        queued = False
        for key, old, new, _old_size, _new_size in changes:
            table = live[key[0]]
            if table is None or not table.vector_indexes:
                continue
            tid, _h, tpk, tsk = key
            for index in table.vector_indexes:
                queued = self._replace_entry(tid, index, tpk, tsk, old, new) or queued
        return queued

    def _replace_entry(self, tid: int, index: VectorIndexMeta, tpk: bytes, tsk: bytes, old: Item | None,
                       new: Item | None) -> bool:
        if unchanged(index, old, new):
            return False
        before, after = entry_of(index, old), entry_of(index, new)
        keys = (stored_key(tpk, ENTRY_KEY_LIMIT), stored_key(tsk, ENTRY_KEY_LIMIT))
        queued = False
        if before is not None and (after is None or before.part != after.part):
            part = stored_key(before.part, ENTRY_KEY_LIMIT)
            self._pipe.add(_DELETE, (tid, index.index_id, part, *keys))
            self._pipe.add(_BUMP, (tid, index.index_id, part))
            before, queued = None, True
        if after is not None and (before is None or before.vector != after.vector or before.filters != after.filters):
            part = stored_key(after.part, ENTRY_KEY_LIMIT)
            self._pipe.add(_PUT, (tid, index.index_id, part, *keys, whole_key(tpk, ENTRY_KEY_LIMIT),
                                  whole_key(tsk, ENTRY_KEY_LIMIT), after.vector, after.filters_blob))
            self._pipe.add(_BUMP, (tid, index.index_id, part))
            queued = True
        return queued

    def vector_search(self, meta: TableMeta, index: VectorIndexMeta, part: bytes, query: list[float], k: int,
                      conditions: list[tuple[int, str]]) -> list[VectorHit]:
        from openddb.vectors import exact  # numpy: loaded by the first search, not by every server start

        tid, iid, stored_part = meta.table_id, index.index_id, stored_key(part, ENTRY_KEY_LIMIT)
        with self._transaction(_SNAPSHOT) as cur:
            found = cur.execute(_VERSION, (tid, iid, stored_part)).fetchone()
            version = 0 if found is None else int(found[0])
            if self._vector_cache is None:
                self._vector_cache = exact.PartitionCache()
            loaded = self._vector_cache.get((tid, iid, part), version)
            if loaded is None:
                rows = ((read_key(bytes(tpk), tpkx), read_key(bytes(tsk), tskx), bytes(vec), bytes(filters))
                        for tpk, tsk, vec, filters, tpkx, tskx in cur.execute(_ROWS, (tid, iid, stored_part)))
                loaded = exact.load(version, rows, index.dimensions, len(index.filters))
                self._vector_cache.put((tid, iid, part), loaded)
            hits = []
            for row, score in exact.search(loaded, query, k, index.distance, conditions):
                tpk, tsk = loaded.keys[row]
                data = cur.execute(_ITEM, (tid, partition_hash(tpk), stored_key(tpk, ITEM_KEY_LIMIT),
                                           tsk)).fetchone()
                if data is not None:
                    hits.append(VectorHit(score, orjson.loads(bytes(data[0]))))
            return hits

    def vector_stats(self, meta: TableMeta, index: VectorIndexMeta) -> tuple[int, int]:
        count, size = one_row(self._cursor(), "SELECT count(*), coalesce(sum(length(vec) + length(filters)), 0) "
                              "FROM openddb_vector_entries WHERE tid=%s AND iid=%s", (meta.table_id, index.index_id))
        return int(count), int(size)

    def backfill_vector_index(self, meta: TableMeta, index: VectorIndexMeta, after: StorageKey | None,
                              limit: int) -> StorageKey | None:
        tid = meta.table_id

        def chunk(cur: psycopg.Cursor[Any]) -> StorageKey | None:
            live = self._lock_tables(cur, [tid])[tid]
            current = None if live is None else next(
                (i for i in live.vector_indexes if i.index_id == index.index_id), None)
            if live is None or current is None:
                return None
            # The chunk's rows locked FOR SHARE (a write racing it waits, then maintains the index itself).
            start = () if after is None else (after.h, stored_key(after.pk, ITEM_KEY_LIMIT), after.sk)
            rows = cur.execute("SELECT h, pk, sk, pkx, data FROM openddb_items WHERE tid=%s"
                               + (" AND (h, pk, sk) > (%s, %s, %s)" if start else "")
                               + " ORDER BY h, pk, sk LIMIT %s FOR SHARE", (tid, *start, limit)).fetchall()
            only = dataclasses.replace(live, vector_indexes=[current])
            changes: list[tuple[ItemKey, Item | None, Item | None, int, int]] = [
                ((tid, h, read_key(bytes(pk), whole_pk), bytes(sk)), None, orjson.loads(bytes(data)), 0, 0)
                for h, pk, sk, whole_pk, data in rows]
            self._maintain_vectors({tid: only}, changes)  # (queued: sent with the COMMIT)
            if len(rows) < limit:
                return None
            h, pk, sk, whole_pk, _data = rows[-1]
            return StorageKey(h, read_key(bytes(pk), whole_pk), bytes(sk))

        return self._transact(chunk)

    def drop_vector_entries(self, cur: psycopg.Cursor[Any], tid: int, iids: Sequence[int] | None) -> None:
        """Remove the entries of the vector indexes `iids` of a table (all of them: None), in `cur`'s transaction."""
        for table in ("openddb_vector_entries", "openddb_vector_partitions"):
            if iids is None:
                cur.execute(f"DELETE FROM {table} WHERE tid=%s", (tid,))
            for iid in iids or ():
                cur.execute(f"DELETE FROM {table} WHERE tid=%s AND iid=%s", (tid, iid))
