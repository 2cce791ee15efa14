"""Secondary indexes for the PostgreSQL engine (a mixin of `PostgresEngine`); same semantics as `sqlite_indexes.py`.

Layout: every entry of every index lives in `openddb_index_entries`, primary key `(tid, iid, h, pk, sk, tpk, tsk)`:
(h, pk, sk) is the index key as `model.indexes.entry_of` encodes it, (tpk, tsk) the item's table key, so a Query on
an index is a B-tree range read on one `(tid, iid, h, pk)` prefix. `h` is the hash of the *index* partition key
(the Citus distribution column): an LSI entry shares its item's `h` and shard, a GSI entry usually does not.

Maintenance runs inside `write`'s transaction with the table description as committed at that moment: each write
first takes a FOR SHARE lock on its tables' catalog rows (`_lock_tables`). UpdateTable's UPDATE of that row waits
for the writes in flight and every later write reads the new description, so once an index is in the catalog no
write can commit without maintaining it, and a backfill started after that commit misses nothing. The lock
returns the row's version, so the description is parsed again only when it changed.

A backfill chunk locks the rows it reads (FOR SHARE, one router statement per key, in key order like writers), so
a write cannot replace an item between the chunk reading it and storing its entry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
import psycopg

from openddb.errors import ItemCollectionSizeLimitExceededException
from openddb.model import Item
from openddb.model.indexes import ITEM_COLLECTION_LIMIT, IndexEntry, entry_of
from openddb.model.schema import IndexMeta, TableMeta
from openddb.storage.base import CatalogChanged, IndexKey, IndexRow, SortRange, StorageKey, add_sort_clauses
from openddb.storage.postgres_pipeline import BYTEA, INT8, Pipeline

T = TypeVar("T")

# PostgreSQL holds a B-tree row to 2,704 bytes, less than DynamoDB's keys may take (a 2,048-byte partition key with a
# 1,024-byte sort key; an index entry holds its index key and its item's key). So a key column holds a long key as
# its first bytes and its SHA-256 (`stored_key`), and the whole key, where the engine must give it back, in a column
# of its own (`pkx`, `tpkx`, `tskx`; NULL when the key is short). Only equality and paging see the stored form: no
# partition key is ever read in order, and the table key in an entry only orders entries of equal index keys. The
# sort key of an item or of an index entry (up to 1,024 bytes) is kept whole: queries read it in order.
# The limits leave room beside the stored partition keys for a whole sort key: 1,024 bytes, more once encoded
# (zero bytes are escaped), or a GSI sort key of several attributes up to about 2 KB in all.
ITEM_KEY_LIMIT = 512  # bytes of an item's partition key kept as they are
ENTRY_KEY_LIMIT = 128  # bytes of an entry's index partition key and of its item's partition and sort keys


def stored_key(key: bytes, limit: int) -> bytes:
    """A key as its column holds it: as it is up to `limit` bytes, else its first bytes and its SHA-256, `limit` + 1
    bytes in all, a length no key kept as it is has (so no short key can meet a long one's stored form). Never
    applied twice: every key the engine reads back and pages on comes whole (`pkx`...)."""
    if len(key) <= limit:
        return key
    return key[:limit - 31] + hashlib.sha256(key).digest()


def whole_key(key: bytes, limit: int) -> bytes | None:
    """What the key's whole-key column holds: the key, if its stored form is not the key itself."""
    return key if len(key) > limit else None


# A schema migration's step: a statement, or a function of the migrating transaction's cursor.
Migration = str | Callable[[psycopg.Cursor[Any]], None]

INDEX_MIGRATION: list[Migration] = [
    "CREATE TABLE IF NOT EXISTS openddb_index_entries (tid BIGINT NOT NULL, iid BIGINT NOT NULL, h BIGINT NOT NULL, "
    "pk BYTEA NOT NULL, sk BYTEA NOT NULL, tpk BYTEA NOT NULL, tsk BYTEA NOT NULL, size INTEGER NOT NULL, "
    "data BYTEA NOT NULL, PRIMARY KEY (tid, iid, h, pk, sk, tpk, tsk))",
]

_ENTRY_KEY = "tid=%s AND iid=%s AND h=%s AND pk=%s AND sk=%s AND tpk=%s AND tsk=%s"
_PUT = ("INSERT INTO openddb_index_entries (tid, iid, h, pk, sk, tpk, tsk, size, data, pkx, tpkx, tskx) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (tid, iid, h, pk, sk, tpk, tsk) "
        "DO UPDATE SET size = EXCLUDED.size, data = EXCLUDED.data")
_PUT_TYPES = (INT8, INT8, INT8, BYTEA, BYTEA, BYTEA, BYTEA, INT8, BYTEA, BYTEA, BYTEA, BYTEA)
_DELETE = f"DELETE FROM openddb_index_entries WHERE {_ENTRY_KEY}"
TABLE_VERSION = "SELECT version FROM openddb_tables WHERE tid=%s FOR SHARE"
TABLE_VERSION_NOWAIT = f"{TABLE_VERSION} NOWAIT"  # (inside a group: see PostgresEngine._group_write)
_TABLE_META = "SELECT version, meta FROM openddb_tables WHERE tid=%s"
_SHARE_ITEM = "SELECT data FROM openddb_items WHERE tid=%s AND h=%s AND pk=%s AND sk=%s FOR SHARE"

ItemKey = tuple[int, int, bytes, bytes]  # (tid, h, pk, sk), as PostgresEngine's write keys them


def read_key(stored: bytes, whole: bytes | None) -> bytes:
    """A key read back: its whole-key column if set, else the key column, which then holds it as it is."""
    return stored if whole is None else whole


def whole_keys(pk: bytes, tpk: bytes, tsk: bytes) -> tuple[bytes | None, bytes | None, bytes | None]:
    """An index entry's `pkx`, `tpkx` and `tskx`."""
    return whole_key(pk, ENTRY_KEY_LIMIT), whole_key(tpk, ENTRY_KEY_LIMIT), whole_key(tsk, ENTRY_KEY_LIMIT)


def entry_key(tid: int, iid: int, h: int, pk: bytes, sk: bytes, tpk: bytes, tsk: bytes) -> tuple[Any, ...]:
    """An index entry's primary key as its columns hold it (see `stored_key`)."""
    return (tid, iid, h, stored_key(pk, ENTRY_KEY_LIMIT), sk, stored_key(tpk, ENTRY_KEY_LIMIT),
            stored_key(tsk, ENTRY_KEY_LIMIT))


def _entry_row(tid: int, entry: IndexEntry, index_id: int, tpk: bytes, tsk: bytes) -> tuple[Any, ...]:
    """The parameters of `_PUT` for an entry (`model.indexes.entry_of`) of the item keyed (tpk, tsk)."""
    return (*entry_key(tid, index_id, entry.h, entry.pk, entry.sk, tpk, tsk), entry.size, orjson.dumps(entry.item),
            *whole_keys(entry.pk, tpk, tsk))


def one_row(cur: psycopg.Cursor[Any], sql: str, params: Sequence[Any] = ()) -> Any:
    """The row of a statement that always returns exactly one (an aggregate, a RETURNING of a seeded row).

    In pipeline mode it runs on a cursor of its own: on a shared cursor, the result of an earlier statement that
    arrives while this one is sent is left on the cursor and taken for this statement's answer (psycopg then reads
    an INSERT's status where it expects a row; seen under load about once in a hundred index writes)."""
    if cur.connection.pgconn.pipeline_status:
        cur = cur.connection.cursor(binary=bool(cur.format))
    row = cur.execute(sql, params).fetchone()
    if row is None:
        raise RuntimeError(f"no row returned by {sql!r}")
    return row


def index_query_statement(tid: int, iid: int, h: int, pk: bytes, sort: SortRange, forward: bool,
                          after: IndexKey | None, limit: int) -> tuple[str, list[Any]]:
    """One page of an index Query: a range read on the (tid, iid, h, pk) prefix in (sk, tpk, tsk) order."""
    clauses = ["tid=%s", "iid=%s", "h=%s", "pk=%s"]
    params: list[Any] = [tid, iid, h, stored_key(pk, ENTRY_KEY_LIMIT)]
    add_sort_clauses(sort, "%s", clauses, params)
    if after is not None:
        clauses.append("(sk, tpk, tsk) > (%s, %s, %s)" if forward else "(sk, tpk, tsk) < (%s, %s, %s)")
        params.extend((after.sk, stored_key(after.tpk, ENTRY_KEY_LIMIT), stored_key(after.tsk, ENTRY_KEY_LIMIT)))
    params.append(limit)
    order = "ASC" if forward else "DESC"
    return (f"SELECT sk, tpk, tsk, size, data, tpkx, tskx FROM openddb_index_entries WHERE {' AND '.join(clauses)} "
            f"ORDER BY sk {order}, tpk {order}, tsk {order} LIMIT %s"), params


def index_scan_statement(tid: int, iid: int, h_low: int, h_high: int, after: IndexKey | None,
                         limit: int) -> tuple[str, list[Any]]:
    """One page of an index Scan segment, in (h, pk, sk, tpk, tsk) order."""
    sql = ("SELECT h, pk, sk, tpk, tsk, size, data, tpkx, tskx, pkx FROM openddb_index_entries "
           "WHERE tid=%s AND iid=%s AND h>=%s AND h<%s")
    params: list[Any] = [tid, iid, h_low, h_high]
    if after is not None:
        sql += " AND (h, pk, sk, tpk, tsk) > (%s, %s, %s, %s, %s)"
        params.extend((after.h, stored_key(after.pk, ENTRY_KEY_LIMIT), after.sk, stored_key(after.tpk, ENTRY_KEY_LIMIT),
                       stored_key(after.tsk, ENTRY_KEY_LIMIT)))
    params.append(limit)
    return sql + " ORDER BY h, pk, sk, tpk, tsk LIMIT %s", params


class PostgresIndexes:
    """Index storage and maintenance; mixed into PostgresEngine, whose connection and transactions it uses."""

    supports_indexes = True
    # tid -> (catalog row version, description parsed from it): the committed descriptions writes maintain.
    _live: dict[int, tuple[int, TableMeta]]
    _tables: dict[str, TableMeta]  # PostgresEngine's cached descriptions, and whether to look at the catalog
    _stale: bool
    _conn: psycopg.Connection[Any]

    if TYPE_CHECKING:  # provided by PostgresEngine
        _pipe: Pipeline

        def _run(self) -> list[list[tuple[Any, ...]]]: ...
        def _bound_waits(self) -> None: ...
        def _cursor(self) -> psycopg.Cursor[Any]: ...
        def _transact(self, body: Callable[[psycopg.Cursor[Any]], T]) -> T: ...
        def _read_pages(self, build: Any) -> Iterator[Any]: ...

    # --- maintenance (inside write's transaction) ---------------------------------------------------
    def _lock_tables(self, cur: psycopg.Cursor[Any], tids: Sequence[int]) -> dict[int, TableMeta | None]:
        """Lock the catalog rows of `tids` (in order) against DDL until commit; their committed descriptions."""
        return {tid: self._described(tid, cur.execute(TABLE_VERSION, (tid,)).fetchone()) for tid in tids}

    def _described(self, tid: int, row: Sequence[Any] | None) -> TableMeta:
        """The committed description of table `tid`, whose catalog row `TABLE_VERSION` answered `row` (None: the
        table was deleted meanwhile, so write nothing and run the request again on the fresh catalog)."""
        if row is None:
            self._tables.clear()
            self._stale = True
            raise CatalogChanged()
        cached = self._live.get(tid)
        if cached is None or cached[0] != row[0]:
            version, meta = one_row(self._conn.cursor(binary=True), _TABLE_META, (tid,))
            cached = self._live[tid] = (version, TableMeta.from_json(meta))
        return cached[1]

    def _maintain_indexes(self, live: dict[int, TableMeta | None],
                          changes: list[tuple[ItemKey, Item | None, Item | None, int, int]]) -> bool:
        """Replace each changed item's old index entries by its new ones; `changes` holds
        (key, old, new, old_size, new_size) per item, queued after the item rows themselves. Queued on `_pipe`;
        whether anything was (an entry can fail to be stored, a key past PostgreSQL's B-tree row: so it is not
        left for a later round trip)."""
        deletes: list[tuple[Any, ...]] = []
        puts: list[tuple[Any, ...]] = []
        grown: list[tuple[TableMeta, ItemKey]] = []
        for key, old, new, old_size, new_size in changes:
            table = live[key[0]]
            if table is None or not table.indexes:
                continue
            tid, _h, tpk, tsk = key
            has_local = False
            for index in table.indexes:
                has_local = has_local or not index.is_global
                before, after = entry_of(table, index, old, old_size), entry_of(table, index, new, new_size)
                if before is not None and (after is None or (before.pk, before.sk) != (after.pk, after.sk)):
                    deletes.append(entry_key(tid, index.index_id, before.h, before.pk, before.sk, tpk, tsk))
                    before = None
                if after is not None and (before is None or before.item != after.item):
                    puts.append(_entry_row(tid, after, index.index_id, tpk, tsk))
            if has_local and new is not None and new_size > old_size:
                grown.append((table, key))
        if deletes or puts:  # (another node's write of the same index key may hold an entry's row)
            self._bound_waits()
        for params in deletes:
            self._pipe.add(_DELETE, params)
        for params in puts:
            self._pipe.add(_PUT, params, _PUT_TYPES)
        if grown:  # (measured once the entries and rows queued are written)
            self._run()
        for table, (tid, h, pk, _sk) in grown:
            if self.collection_size(table, h, pk) > ITEM_COLLECTION_LIMIT:
                raise ItemCollectionSizeLimitExceededException((tid, h))
        return bool(deletes or puts)

    # --- reads --------------------------------------------------------------------------------------
    def index_query(self, meta: TableMeta, index: IndexMeta, h: int, pk: bytes, sort: SortRange, forward: bool,
                    after: IndexKey | None) -> Iterator[IndexRow]:
        tid, iid = meta.table_id, index.index_id

        def build(last: Any, limit: int) -> tuple[str, list[Any]]:  # (paging on whole keys: see stored_key)
            start = after if last is None else IndexKey(h, pk, last[0], read_key(last[1], last[5]),
                                                        read_key(last[2], last[6]))
            return index_query_statement(tid, iid, h, pk, sort, forward, start, limit)

        for sk, tpk, tsk, size, data, whole_tpk, whole_tsk in self._read_pages(build):
            yield IndexRow(IndexKey(h, pk, sk, read_key(tpk, whole_tpk), read_key(tsk, whole_tsk)), size, data)

    def index_scan(self, meta: TableMeta, index: IndexMeta, h_low: int, h_high: int,
                   after: IndexKey | None) -> Iterator[IndexRow]:
        tid, iid = meta.table_id, index.index_id

        def build(last: Any, limit: int) -> tuple[str, list[Any]]:  # (paging on whole keys: see stored_key)
            start = after if last is None else IndexKey(last[0], read_key(last[1], last[9]), last[2],
                                                        read_key(last[3], last[7]), read_key(last[4], last[8]))
            return index_scan_statement(tid, iid, h_low, h_high, start, limit)

        for h, pk, sk, tpk, tsk, size, data, whole_tpk, whole_tsk, whole_pk in self._read_pages(build):
            yield IndexRow(IndexKey(h, read_key(pk, whole_pk), sk, read_key(tpk, whole_tpk), read_key(tsk, whole_tsk)),
                           size, data)

    def index_stats(self, meta: TableMeta, index: IndexMeta) -> tuple[int, int]:
        count, size = one_row(self._cursor(), "SELECT count(*), coalesce(sum(size), 0) FROM openddb_index_entries "
                              "WHERE tid=%s AND iid=%s", (meta.table_id, index.index_id))
        return int(count), int(size)

    def collection_size(self, meta: TableMeta, h: int, pk: bytes) -> int:
        cur = self._cursor()
        size = one_row(cur, "SELECT coalesce(sum(size), 0) FROM openddb_items WHERE tid=%s AND h=%s AND pk=%s",
                       (meta.table_id, h, stored_key(pk, ITEM_KEY_LIMIT)))[0]
        local = [index.index_id for index in meta.indexes if not index.is_global]
        if local:
            size += one_row(cur, "SELECT coalesce(sum(size), 0) FROM openddb_index_entries "
                            "WHERE tid=%s AND h=%s AND pk=%s AND iid = ANY(%s)",
                            (meta.table_id, h, stored_key(pk, ENTRY_KEY_LIMIT), local))[0]
        return int(size)

    # --- online creation and deletion ---------------------------------------------------------------
    def backfill_index(self, meta: TableMeta, index: IndexMeta, after: StorageKey | None,
                       limit: int) -> StorageKey | None:
        tid = meta.table_id

        def chunk(cur: psycopg.Cursor[Any]) -> StorageKey | None:
            live = self._lock_tables(cur, [tid])[tid]
            current = None if live is None else next(
                (i for i in live.indexes if i.index_id == index.index_id), None)
            if live is None or current is None:
                return None
            # The chunk's keys, unlocked (a multi-shard read on Citus, where FOR SHARE must be a router query);
            # then each row locked and re-read by key. A row inserted meanwhile was written by a write that
            # already maintains this index; one deleted meanwhile needs no entry.
            if after is None:
                keys = cur.execute("SELECT h, pk, sk, pkx FROM openddb_items WHERE tid=%s ORDER BY h, pk, sk "
                                   "LIMIT %s", (tid, limit)).fetchall()
            else:
                keys = cur.execute("SELECT h, pk, sk, pkx FROM openddb_items WHERE tid=%s AND (h, pk, sk) > "
                                   "(%s, %s, %s) ORDER BY h, pk, sk LIMIT %s",
                                   (tid, after.h, stored_key(after.pk, ITEM_KEY_LIMIT), after.sk, limit)).fetchall()
            if not keys:
                return None
            cur.executemany(_SHARE_ITEM, [(tid, h, pk, sk) for h, pk, sk, _ in keys], returning=True)
            puts = []
            for _h, pk, sk, whole_pk in keys:
                found = cur.fetchone()
                cur.nextset()
                if found is None:
                    continue
                entry = entry_of(live, current, orjson.loads(found[0]))
                if entry is not None:
                    puts.append(_entry_row(tid, entry, current.index_id, read_key(pk, whole_pk), sk))
            if puts:
                cur.executemany(_PUT, puts)
            if len(keys) < limit:
                return None
            h, pk, sk, whole_pk = keys[-1]
            return StorageKey(h, read_key(pk, whole_pk), sk)  # (the next chunk's start: a whole key)

        return self._transact(chunk)

    def drop_index(self, meta: TableMeta, index_id: int) -> None:
        def drop(cur: psycopg.Cursor[Any]) -> None:
            cur.execute("DELETE FROM openddb_index_entries WHERE tid=%s AND iid=%s", (meta.table_id, index_id))

        self._transact(drop)
