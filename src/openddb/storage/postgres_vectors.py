"""Vector indexes for the PostgreSQL engine (a mixin of `PostgresEngine`), laid out as on SQLite (see
`sqlite_vectors.py`): `openddb_vector_entries` (a search partition's entries: the item's table key, packed float32
vector, INLINE_FILTER values, and the partition's change sequence when last written), `openddb_vector_partitions`
(each partition's epoch, a random stamp, and change sequence, raised by one per change in the writing transaction)
and `openddb_vector_tombstones` (the key and sequence of each entry a change removed, kept for `RETAIN` changes).
Keys are held as the index entries' are (`postgres_indexes.stored_key`: a long one as a prefix and a digest, whole
beside it).

Search is exact, by one of two paths, in one REPEATABLE READ snapshot with the result items:
- with pgvector (when `CREATE EXTENSION vector` succeeds at start: `enable_pgvector`), every entry also holds its
  vector as a pgvector `vector` (column `emb`, written with the entry), and the server ranks the partition's entries
  (those the INLINE_FILTER conditions leave) by the index's operator (<=> cosine distance, <-> L2 distance, <#>
  negative inner product) with ORDER BY ... LIMIT 2*TopK, a scan of every entry (no approximate index, so nothing
  is missed); the candidates' exact scores are then recomputed as the numpy path computes them
  (`vectors.exact.rescored`: pgvector sums in float32), so both paths answer the same. A partition holding an entry
  without `emb` (written by a node of an older version) is searched by the numpy path instead;
- without it, as on SQLite: the partition's vectors are loaded once into numpy and brought up to date from the
  entries and tombstones stamped after it (`vectors.exact.find`).
The numbered migrations stay portable (no extension): the `emb` column is added by `enable_pgvector`, outside them.

Every write to a partition updates its state row, so writes to one search partition serialize on that row until
they commit (across nodes too), and their sequence numbers follow their commit order: a snapshot that holds a
change holds every change numbered before it. Writes to other partitions and tables do not serialize.
"""

from __future__ import annotations

import dataclasses
import logging
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
import psycopg
from psycopg import errors as pgerrors

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
from openddb.vectors.entries import RETAIN, Changes, EntryRow, entry_of, unchanged

if TYPE_CHECKING:
    from openddb.storage.postgres_pipeline import Pipeline
    from openddb.vectors.exact import PartitionCache, Wanted

T = TypeVar("T")
log = logging.getLogger("openddb.storage")

VECTOR_MIGRATION: list[Migration] = [
    "CREATE TABLE IF NOT EXISTS openddb_vector_entries (tid BIGINT NOT NULL, iid BIGINT NOT NULL, "
    "part BYTEA NOT NULL, tpk BYTEA NOT NULL, tsk BYTEA NOT NULL, tpkx BYTEA, tskx BYTEA, vec BYTEA NOT NULL, "
    "filters BYTEA NOT NULL, PRIMARY KEY (tid, iid, part, tpk, tsk))",
    "CREATE TABLE IF NOT EXISTS openddb_vector_partitions (tid BIGINT NOT NULL, iid BIGINT NOT NULL, "
    "part BYTEA NOT NULL, version BIGINT NOT NULL, PRIMARY KEY (tid, iid, part))",
]
# Change sequences: a partition's earlier entries and state keep seq 0 (its version stamp is its epoch).
VECTOR_SEQ_MIGRATION: list[Migration] = [
    "ALTER TABLE openddb_vector_entries ADD COLUMN seq BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE openddb_vector_partitions ADD COLUMN seq BIGINT NOT NULL DEFAULT 0",
    "CREATE INDEX IF NOT EXISTS openddb_vector_entries_seq ON openddb_vector_entries (tid, iid, part, seq)",
    "CREATE TABLE IF NOT EXISTS openddb_vector_tombstones (tid BIGINT NOT NULL, iid BIGINT NOT NULL, "
    "part BYTEA NOT NULL, seq BIGINT NOT NULL, tpk BYTEA NOT NULL, tsk BYTEA NOT NULL, tpkx BYTEA, tskx BYTEA, "
    "PRIMARY KEY (tid, iid, part, seq, tpk, tsk))",
]
# (Queued on the pipeline: a statement that needs the partition's new sequence reads it from its state row, which
# the same transaction has just raised and holds locked.)
_WHERE = "tid=%s AND iid=%s AND part=%s"
_SEQ = f"(SELECT seq FROM openddb_vector_partitions WHERE {_WHERE})"
_PUT = ("INSERT INTO openddb_vector_entries (tid, iid, part, tpk, tsk, tpkx, tskx, vec, filters, seq) "
        f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, {_SEQ}) ON CONFLICT (tid, iid, part, tpk, tsk) "
        "DO UPDATE SET vec = EXCLUDED.vec, filters = EXCLUDED.filters, seq = EXCLUDED.seq")
_DELETE = f"DELETE FROM openddb_vector_entries WHERE {_WHERE} AND tpk=%s AND tsk=%s"
# The partition's next change; a new partition's epoch is a random stamp (see sqlite_vectors.py's _BUMP).
_BUMP = ("INSERT INTO openddb_vector_partitions (tid, iid, part, version, seq) VALUES (%s, %s, %s, "
         "(random() * 9.2e18)::bigint, 1) ON CONFLICT (tid, iid, part) DO UPDATE SET seq = "
         "openddb_vector_partitions.seq + 1")
_TOMBSTONE = ("INSERT INTO openddb_vector_tombstones (tid, iid, part, seq, tpk, tsk, tpkx, tskx) SELECT tid, iid, "
              f"part, seq, %s, %s, %s, %s FROM openddb_vector_partitions WHERE {_WHERE}")
_PURGE = f"DELETE FROM openddb_vector_tombstones WHERE {_WHERE} AND seq <= {_SEQ} - %s"
_STATE = f"SELECT version, seq FROM openddb_vector_partitions WHERE {_WHERE}"
_ROWS = f"SELECT tpk, tsk, vec, filters, tpkx, tskx FROM openddb_vector_entries WHERE {_WHERE}"
_WRITTEN = f"{_ROWS} AND seq > %s"
_REMOVED = f"SELECT tpk, tsk, tpkx, tskx FROM openddb_vector_tombstones WHERE {_WHERE} AND seq > %s"
_ITEM = "SELECT data FROM openddb_items WHERE tid=%s AND h=%s AND pk=%s AND sk=%s"
_SNAPSHOT = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
# pgvector: the extension, each entry's vector as a `vector` (any dimensions: an index's entries all have its own),
# and the entries not holding one yet (none once filled: see `enable_pgvector`).
_PGVECTOR = [
    "CREATE EXTENSION IF NOT EXISTS vector",
    "ALTER TABLE openddb_vector_entries ADD COLUMN IF NOT EXISTS emb vector",
    "CREATE INDEX IF NOT EXISTS openddb_vector_entries_unfilled ON openddb_vector_entries (tid, iid, part) "
    "WHERE emb IS NULL",
    # A node of an older version, which knows nothing of `emb`, changing an entry's vector leaves it without one
    # (searched on numpy, filled at the next start) rather than with the vector it had.
    "CREATE OR REPLACE FUNCTION openddb_vector_unfill() RETURNS trigger LANGUAGE plpgsql AS "
    "'BEGIN NEW.emb := NULL; RETURN NEW; END'",
    "DROP TRIGGER IF EXISTS openddb_vector_entries_unfill ON openddb_vector_entries",
    "CREATE TRIGGER openddb_vector_entries_unfill BEFORE UPDATE ON openddb_vector_entries FOR EACH ROW WHEN "
    "(NEW.vec IS DISTINCT FROM OLD.vec AND NEW.emb IS NOT DISTINCT FROM OLD.emb) "
    "EXECUTE FUNCTION openddb_vector_unfill()",
]
_PUT_EMBEDDED = _PUT.replace("filters, seq)", "filters, seq, emb)").replace(f"{_SEQ})", f"{_SEQ}, %s::vector)") \
    .replace("seq = EXCLUDED.seq", "seq = EXCLUDED.seq, emb = EXCLUDED.emb")
_RACED = (pgerrors.UniqueViolation, pgerrors.DuplicateObject, pgerrors.DuplicateColumn)
# (the last of _PGVECTOR's objects: all are there)
_DONE = "SELECT 1 FROM pg_trigger WHERE tgname = 'openddb_vector_entries_unfill'"
_UNFILLED = "SELECT tid, iid, part, tpk, tsk, vec FROM openddb_vector_entries WHERE emb IS NULL LIMIT 1000"
_FILL = ("UPDATE openddb_vector_entries SET emb = %s::vector WHERE tid=%s AND iid=%s AND part=%s AND tpk=%s "
         "AND tsk=%s AND vec=%s AND emb IS NULL")
_ANY_UNFILLED = f"SELECT 1 FROM openddb_vector_entries WHERE {_WHERE} AND emb IS NULL LIMIT 1"
# The index's distance as pgvector's operator, smallest best; a zero vector's cosine distance (NaN) counts as 1,
# as the numpy path scores it.
_RANKS = {"COSINE": "coalesce(nullif(emb <=> %s::vector, 'NaN'::float8), 1)", "EUCLIDEAN": "emb <-> %s::vector",
          "DOT_PRODUCT": "emb <#> %s::vector"}
_FILTERED = " AND convert_from(filters, 'UTF8')::jsonb ->> %s::int = %s::text"


class PostgresVectors:
    """Vector index storage, upkeep and search; mixed into PostgresEngine."""

    supports_vectors = True
    _vector_cache: PartitionCache | None = None
    pgvector = False  # searches rank with pgvector (see enable_pgvector)

    if TYPE_CHECKING:  # provided by PostgresEngine
        _pipe: Pipeline
        _bounded_locks: bool

        def _bound_waits(self) -> None: ...
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
        self._bound_waits()  # (a vector partition's row is shared by every writer of the partition)
        before, after = entry_of(index, old), entry_of(index, new)
        keys = (stored_key(tpk, ENTRY_KEY_LIMIT), stored_key(tsk, ENTRY_KEY_LIMIT))
        queued = False
        wholes = (whole_key(tpk, ENTRY_KEY_LIMIT), whole_key(tsk, ENTRY_KEY_LIMIT))
        queued, iid = False, index.index_id
        if before is not None and (after is None or before.part != after.part):
            where = (tid, iid, stored_key(before.part, ENTRY_KEY_LIMIT))
            self._pipe.add(_DELETE, (*where, *keys))
            self._pipe.add(_BUMP, where)
            self._pipe.add(_TOMBSTONE, (*keys, *wholes, *where))
            self._pipe.add(_PURGE, (*where, *where, RETAIN))
            before, queued = None, True
        if after is not None and (before is None or before.vector != after.vector or before.filters != after.filters):
            where = (tid, iid, stored_key(after.part, ENTRY_KEY_LIMIT))
            self._pipe.add(_BUMP, where)
            entry = (*where, *keys, *wholes, after.vector, after.filters_blob, *where)
            if self.pgvector:
                self._pipe.add(_PUT_EMBEDDED, (*entry, _vector_text(after.vector)))
            else:
                self._pipe.add(_PUT, entry)
            queued = True
        return queued

    def vector_search(self, meta: TableMeta, index: VectorIndexMeta, part: bytes, query: list[float], k: int,
                      conditions: list[tuple[int, str]]) -> list[VectorHit]:
        from openddb.vectors import exact  # numpy: loaded by the first search, not by every server start

        tid, iid, stored_part = meta.table_id, index.index_id, stored_key(part, ENTRY_KEY_LIMIT)
        where = (tid, iid, stored_part)
        wanted = exact.Wanted(query, k, index.distance, conditions)
        with self._transaction(_SNAPSHOT) as cur:
            if self.pgvector and cur.execute(_ANY_UNFILLED, where).fetchone() is None:
                ranked = exact.rescored(((key, exact.unpacked(vec)) for key, vec in _nearest(cur, where, wanted)),
                                        wanted)
            else:
                found = cur.execute(_STATE, where).fetchone()
                if self._vector_cache is None:
                    self._vector_cache = exact.PartitionCache()
                ranked = exact.find(self._vector_cache, (tid, iid, part), (0, 0) if found is None else found,
                                    _Partition(cur, where), (index.dimensions, len(index.filters)), wanted, True)
            hits = []
            for (tpk, tsk), score in ranked:
                data = cur.execute(_ITEM, (tid, partition_hash(tpk), stored_key(tpk, ITEM_KEY_LIMIT),
                                           tsk)).fetchone()
                if data is not None:
                    hits.append(VectorHit(score, orjson.loads(bytes(data[0]))))
            return hits

    def enable_pgvector(self) -> None:
        """Search with pgvector from now on if the database has the extension or lets it be created here (else
        keep the numpy path, saying why in the log), after giving every entry lacking one its `vector` (entries
        written before; batches of 1,000, each its own transaction)."""
        for attempt in range(3):
            try:
                with self._transaction() as cur:
                    if cur.execute(_DONE).fetchone() is None:  # (else no DDL: it would take the table's lock)
                        if self._bounded_locks:  # (a node starting beside one doing this waits for it, as migrating)
                            cur.execute("SET LOCAL lock_timeout = 0")
                        for statement in _PGVECTOR:
                            cur.execute(statement)
                break
            except psycopg.Error as error:  # (not installed, not ours to create, not PostgreSQL: numpy serves)
                if isinstance(error, _RACED) and attempt < 2:  # (another node creating them: look again)
                    time.sleep(0.05 * (attempt + 1))
                    continue
                log.info("pgvector is not available (%s): vector searches run on numpy", str(error).strip())
                return
        self.pgvector = True
        while self._transact(_fill):
            pass
        log.info("vector searches run on pgvector")

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
        for table in ("openddb_vector_entries", "openddb_vector_partitions", "openddb_vector_tombstones"):
            if iids is None:
                cur.execute(f"DELETE FROM {table} WHERE tid=%s", (tid,))
            for iid in iids or ():
                cur.execute(f"DELETE FROM {table} WHERE tid=%s AND iid=%s", (tid, iid))


class _Partition:
    """One partition's entries and tombstones, read in the search's snapshot (`exact.Source`)."""

    def __init__(self, cur: psycopg.Cursor[Any], where: tuple[int, int, bytes]) -> None:
        self._cur, self._where = cur, where

    def rows(self) -> Iterator[EntryRow]:
        return _entries(self._cur.execute(_ROWS, self._where))

    def changes(self, after: int) -> Changes:
        removed = [(read_key(bytes(tpk), tpkx), read_key(bytes(tsk), tskx))
                   for tpk, tsk, tpkx, tskx in self._cur.execute(_REMOVED, (*self._where, after)).fetchall()]
        return Changes(removed, list(_entries(self._cur.execute(_WRITTEN, (*self._where, after)))))


def _entries(rows: Iterable[Any]) -> Iterator[EntryRow]:
    return ((read_key(bytes(tpk), tpkx), read_key(bytes(tsk), tskx), bytes(vec), bytes(filters))
            for tpk, tsk, vec, filters, tpkx, tskx in rows)


def _vector_text(vector: bytes) -> str:
    """A packed float32 vector as pgvector's text form (each value's shortest repr reads back as the same float32)."""
    return "[" + ",".join(map(repr, struct.unpack(f"<{len(vector) // 4}f", vector))) + "]"


def _nearest(cur: psycopg.Cursor[Any], where: tuple[int, int, bytes],
             wanted: Wanted) -> Iterator[tuple[tuple[bytes, bytes], bytes]]:
    """The partition's 2*TopK entries nearest the search vector by pgvector's float32 ranking (every entry the
    conditions leave is scanned: there is no approximate index), as (table key, vector) candidates."""
    filters = _FILTERED * len(wanted.conditions)
    sql = (f"SELECT tpk, tsk, tpkx, tskx, vec FROM openddb_vector_entries WHERE {_WHERE}{filters} "
           f"ORDER BY {_RANKS[wanted.distance]}, tpk, tsk LIMIT %s")
    flat = [part for condition in wanted.conditions for part in condition]
    params = (*where, *flat, "[" + ",".join(map(repr, wanted.query)) + "]", 2 * wanted.k)
    for tpk, tsk, tpkx, tskx, vec in cur.execute(sql, params).fetchall():
        yield (read_key(bytes(tpk), tpkx), read_key(bytes(tsk), tskx)), bytes(vec)


def _fill(cur: psycopg.Cursor[Any]) -> int:
    """Give up to 1,000 entries lacking one their `vector`; how many were found."""
    rows = cur.execute(_UNFILLED).fetchall()
    cur.executemany(_FILL, [(_vector_text(bytes(vec)), tid, iid, part, tpk, tsk, vec)
                            for tid, iid, part, tpk, tsk, vec in rows])
    return len(rows)
