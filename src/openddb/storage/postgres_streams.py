"""DynamoDB Streams for the PostgreSQL engine (a mixin of `PostgresEngine`); the contract is `Engine`'s (base.py).

Layout (schema version 6):
- `openddb_streams`: one row per stream (`sid`), with what DescribeStream needs once its table is gone, the
  number of shards open at once (`shards`, fixed at creation, so nodes started with other settings agree on
  which shard a key's records go to) and `disabled_at` (the stream was disabled or its table deleted).
- `openddb_stream_shards`: one row per shard (`shard_no`, in creation order); a slot (a range of the partition
  hash) has one open shard at a time (a partial unique index says so); a closed one has `ending_seq`, `closed_at`.
- `openddb_stream_records`: primary key (shard_no, seq), so reading a shard from a sequence number is a range read.
- `openddb_stream_seq`: every sequence number (records, and each shard's `starting_seq`) is taken from it.

Order: a writer locks the open shard of a record's slot (FOR UPDATE) and only then takes `nextval`, in the same
statement, and keeps the lock until it commits. Writers of one shard therefore take their numbers one after the
other, each after the previous one committed: sequence order is commit order within a shard, and a reader never
sees a number before a lower one of the same shard that would commit later (so an iterator "after n" skips
nothing). A writer takes its shard locks last (after its items, before its commit), in (sid, slot) order, so
writers cannot deadlock over shards. Rollover (closing a shard, opening its child) takes the same lock, so no
record lands in a shard after it closed, and `ending_seq` is the highest number the shard will ever hold.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import orjson
import psycopg

from openddb import clock
from openddb.model import Item
from openddb.model.schema import TableMeta
from openddb.storage.base import (
    ChangeKind,
    Origin,
    ShardInfo,
    StreamInfo,
    StreamRecord,
    StreamSettings,
    change_kind,
    shard_slot,
)
from openddb.storage.postgres_indexes import Migration, one_row

T = TypeVar("T")

STREAM_MIGRATION: list[Migration] = [
    "CREATE SEQUENCE IF NOT EXISTS openddb_stream_seq",
    "CREATE TABLE IF NOT EXISTS openddb_streams (sid BIGSERIAL PRIMARY KEY, arn TEXT NOT NULL UNIQUE, "
    "tid BIGINT NOT NULL, table_name TEXT NOT NULL, label TEXT NOT NULL, view_type TEXT NOT NULL, "
    "key_schema BYTEA NOT NULL, created_at DOUBLE PRECISION NOT NULL, disabled_at DOUBLE PRECISION, "
    "shards INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS openddb_streams_by_table ON openddb_streams (tid)",
    "CREATE TABLE IF NOT EXISTS openddb_stream_shards (shard_no BIGSERIAL PRIMARY KEY, sid BIGINT NOT NULL, "
    "slot INTEGER NOT NULL, shard_id TEXT NOT NULL UNIQUE, parent_id TEXT, starting_seq BIGINT NOT NULL, "
    "ending_seq BIGINT, created_at DOUBLE PRECISION NOT NULL, closed_at DOUBLE PRECISION, "
    "trimmed_seq BIGINT NOT NULL DEFAULT 0)",
    "CREATE UNIQUE INDEX IF NOT EXISTS openddb_stream_shards_open ON openddb_stream_shards (sid, slot) "
    "WHERE ending_seq IS NULL",
    "CREATE INDEX IF NOT EXISTS openddb_stream_shards_by_stream ON openddb_stream_shards (sid, shard_no)",
    "CREATE TABLE IF NOT EXISTS openddb_stream_records (shard_no BIGINT NOT NULL, seq BIGINT NOT NULL, "
    "created_at DOUBLE PRECISION NOT NULL, kind SMALLINT NOT NULL, origin TEXT NOT NULL, keys BYTEA NOT NULL, "
    "old BYTEA, new BYTEA, PRIMARY KEY (shard_no, seq))",
]

_KINDS: tuple[ChangeKind, ...] = ("INSERT", "MODIFY", "REMOVE")  # as the `kind` column numbers them
_KIND_CODES = {kind: code for code, kind in enumerate(_KINDS)}

# One record: lock the slot's open shard if it is not due for rollover, then take the next sequence number (in the
# projection above the lock, so after it). No such shard leaves `shard_no` NULL, which the primary key refuses:
# the write fails with a NotNullViolation on this table (see `is_shard_due`), the engine rolls the due shards
# over in a transaction of their own and runs the write again. So the common case costs one pipelined statement
# and no round trip of its own; the shard lock is held from this statement to the commit that follows it.
_APPEND = ("INSERT INTO openddb_stream_records (shard_no, seq, created_at, kind, origin, keys, old, new) "
           "SELECT s.shard_no, nextval('openddb_stream_seq'), %s::float8, %s::int2, %s::text, %s::bytea, "
           "%s::bytea, %s::bytea FROM (SELECT 1) AS one LEFT JOIN (SELECT shard_no FROM openddb_stream_shards "
           "WHERE sid=%s AND slot=%s AND ending_seq IS NULL AND created_at > %s FOR UPDATE) AS s ON true")
_OPEN_SHARD = ("INSERT INTO openddb_stream_shards (sid, slot, shard_id, parent_id, starting_seq, created_at) "
               "VALUES (%s, %s, %s, %s, nextval('openddb_stream_seq'), %s)")
# Run right after the shard's lock was taken, so its snapshot holds every record the shard will ever have. An
# empty shard closes with ending_seq = starting_seq (no record has that number: starting_seq was taken from the
# sequence when the shard opened), so every closed shard has a range with ending_seq >= starting_seq.
_CLOSE_SHARD = ("UPDATE openddb_stream_shards SET closed_at=%s, ending_seq = coalesce((SELECT max(seq) FROM "
                "openddb_stream_records WHERE shard_no=%s), starting_seq) WHERE shard_no=%s")
_STREAM_COLUMNS = "sid, arn, table_name, label, view_type, key_schema, created_at, disabled_at"
_SHARD_COLUMNS = "shard_id, parent_id, slot, starting_seq, ending_seq, created_at, trimmed_seq"


class PendingRecord(NamedTuple):
    """A stream record made by a write, before it has a shard and a sequence number."""

    sid: int
    h: int
    created_at: float
    kind: ChangeKind
    origin: Origin
    keys: bytes
    old: bytes | None
    new: bytes | None


def change_record(table: TableMeta, h: int, origin: Origin, old: Item | None, new: Item | None,
                  now: float) -> PendingRecord | None:
    """The record of one op on a table with an enabled stream, or None if the op left the item as it was (an
    identical put, a delete of an absent item): DynamoDB writes no record for those."""
    changed = new if new is not None else old
    if new is old or new == old or changed is None or table.stream is None:
        return None
    view = table.streaming
    keys = orjson.dumps(table.key_of(changed))
    return PendingRecord(table.stream.stream_id, h, now, change_kind(old, new), origin, keys,
                         orjson.dumps(old) if old is not None and view in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES") else None,
                         orjson.dumps(new) if new is not None and view in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES") else None)


def is_shard_due(error: psycopg.errors.NotNullViolation) -> bool:
    """Whether a write failed because a record found no open shard young enough (see `_APPEND`)."""
    return error.diag.table_name == "openddb_stream_records" and error.diag.column_name == "shard_no"


def _shard_id(now: float) -> str:
    """A shard id as DynamoDB writes them: creation time in milliseconds, 20 digits, then 8 random hex digits."""
    return f"shardId-{int(now * 1000):020d}-{secrets.token_hex(4)}"


def _stream(row: Sequence[Any]) -> StreamInfo:
    sid, arn, table_name, label, view_type, key_schema, created_at, disabled_at = row
    return StreamInfo(sid, arn, table_name, label, view_type, orjson.loads(key_schema), created_at, disabled_at)


class PostgresStreams:
    """Stream storage, the records of writes, rollover and retention; mixed into PostgresEngine."""

    stream_settings: StreamSettings
    _stream_shards: dict[int, int]  # sid -> its number of slots (fixed at creation, so cached for good)
    _roll_due: bool  # whether a record refuses a shard past its period (see PostgresEngine.write)
    _appending: list[tuple[int, int]]  # the (sid, slot) pairs the last write appended records to

    if TYPE_CHECKING:  # provided by PostgresEngine
        def _cursor(self) -> psycopg.Cursor[Any]: ...
        def _transact(self, body: Callable[[psycopg.Cursor[Any]], T]) -> T: ...

    # --- catalog changes (inside the DDL transaction that stores `meta`) ------------------------------
    def _store_stream(self, cur: psycopg.Cursor[Any], meta: TableMeta, now: float) -> None:
        """Before `meta` is stored: create its new stream (assigning `meta.stream.stream_id`), and disable every
        other stream of the table still enabled (the one `meta` disables, or all once the table is deleted)."""
        stream = meta.stream
        if stream is not None and stream.enabled and stream.stream_id == 0:
            shards = self.stream_settings.shards
            created_at = stream.created_at or now
            sid = one_row(cur, "INSERT INTO openddb_streams (arn, tid, table_name, label, view_type, key_schema, "
                          "created_at, shards) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING sid",
                          (meta.stream_arn, meta.table_id, meta.name, stream.label, stream.view_type,
                           orjson.dumps(meta.key_schema_wire()), created_at, shards))[0]
            stream.stream_id = int(sid)
            self._stream_shards[stream.stream_id] = shards
            cur.executemany(_OPEN_SHARD, [(sid, slot, _shard_id(now), None, now) for slot in range(shards)])
        keep = stream.stream_id if stream is not None and stream.enabled else None
        self._disable_streams(cur, meta.table_id, keep, now)

    def _disable_streams(self, cur: psycopg.Cursor[Any], tid: int, keep: int | None, now: float) -> None:
        """Mark the table's enabled streams other than `keep` disabled and close their open shards. Their writers
        are held back by the DDL's lock on the catalog row; a rollover in flight by the stream row's lock."""
        rows = cur.execute("SELECT sid FROM openddb_streams WHERE tid=%s AND disabled_at IS NULL FOR UPDATE",
                           (tid,)).fetchall()
        for (sid,) in rows:
            if sid == keep:
                continue
            cur.execute("UPDATE openddb_streams SET disabled_at=%s WHERE sid=%s", (now, sid))
            shards = cur.execute("SELECT shard_no FROM openddb_stream_shards WHERE sid=%s AND ending_seq IS NULL "
                                 "ORDER BY slot FOR UPDATE", (sid,)).fetchall()
            for (shard_no,) in shards:
                cur.execute(_CLOSE_SHARD, (now, shard_no, shard_no))

    # --- records (inside write's transaction) --------------------------------------------------------
    def _append_records(self, cur: psycopg.Cursor[Any], records: list[PendingRecord], now: float) -> None:
        """Append the records of one write, each to the open shard of its slot. Ordered by (stream, slot), stably
        (so in request order within a shard, which is all that sequence numbers order), which is also the order
        writers lock shards in: two writers cannot deadlock over them."""
        # (0: any open shard, when the write runs again after rolling over the shards that were due)
        cutoff = now - self.stream_settings.shard_seconds if self._roll_due else 0.0
        rows = []
        for record in records:
            slot = shard_slot(record.h, self._slots(cur, record.sid))
            rows.append((record.sid, slot, record.created_at, _KIND_CODES[record.kind], record.origin, record.keys,
                         record.old, record.new, record.sid, slot, cutoff))
        rows.sort(key=lambda row: (row[0], row[1]))
        self._appending = sorted({(row[0], row[1]) for row in rows})
        if len(rows) == 1:
            cur.execute(_APPEND, rows[0][2:])
        else:
            cur.executemany(_APPEND, [row[2:] for row in rows])

    def _slots(self, cur: psycopg.Cursor[Any], sid: int) -> int:
        shards = self._stream_shards.get(sid)
        if shards is None:  # a stream another node created: one look-up per stream and process
            shards = self._stream_shards[sid] = int(one_row(cur, "SELECT shards FROM openddb_streams WHERE sid=%s",
                                                            (sid,))[0])
        return shards

    # --- rollover -------------------------------------------------------------------------------------
    def _roll_over(self, now: float, slots: Sequence[tuple[int, int]] | None = None) -> None:
        """Close every open shard of an enabled stream older than `shard_seconds` and open its child, one shard
        per transaction (a writer waits for one shard's rollover, not for all of them); only those of `slots`
        ((sid, slot) pairs) if given."""
        cutoff = now - self.stream_settings.shard_seconds
        if slots is None:
            slots = self._cursor().execute(
                "SELECT sh.sid, sh.slot FROM openddb_stream_shards sh JOIN openddb_streams st ON st.sid = sh.sid "
                "WHERE sh.ending_seq IS NULL AND sh.created_at <= %s AND st.disabled_at IS NULL "
                "ORDER BY sh.sid, sh.slot", (cutoff,)).fetchall()
        for sid, slot in slots:
            self._transact(partial(self._roll_shard, sid=sid, slot=slot, cutoff=cutoff, now=now))

    def _roll_shard(self, cur: psycopg.Cursor[Any], sid: int, slot: int, cutoff: float, now: float) -> None:
        # The stream row first (FOR SHARE): a DDL disabling the stream updates it before closing the shards, so
        # either it waits for this rollover and then closes the child too, or this one finds the stream disabled.
        if cur.execute("SELECT 1 FROM openddb_streams WHERE sid=%s AND disabled_at IS NULL FOR SHARE",
                       (sid,)).fetchone() is None:
            return
        # Re-checked under the lock: a writer or another node may have rolled this slot over meanwhile.
        row = cur.execute("SELECT shard_no, shard_id FROM openddb_stream_shards WHERE sid=%s AND slot=%s AND "
                          "ending_seq IS NULL AND created_at <= %s FOR UPDATE", (sid, slot, cutoff)).fetchone()
        if row is None:
            return
        shard_no, shard_id = row
        cur.execute(_CLOSE_SHARD, (now, shard_no, shard_no))
        cur.execute(_OPEN_SHARD, (sid, slot, _shard_id(now), shard_id, now))

    # --- reads ----------------------------------------------------------------------------------------
    def list_streams(self, table_name: str | None = None) -> list[StreamInfo]:
        sql = f"SELECT {_STREAM_COLUMNS} FROM openddb_streams WHERE (disabled_at IS NULL OR disabled_at > %s)"
        params: list[Any] = [clock.now() - self.stream_settings.retention_seconds]
        if table_name is not None:
            if "\x00" in table_name:  # text cannot hold NUL, and no table name can
                return []
            sql += " AND table_name=%s"
            params.append(table_name)
        return [_stream(row) for row in self._cursor().execute(sql + " ORDER BY sid", params)]

    def get_stream(self, arn: str) -> StreamInfo | None:
        if "\x00" in arn:
            return None
        row = self._cursor().execute(
            f"SELECT {_STREAM_COLUMNS} FROM openddb_streams WHERE arn=%s AND (disabled_at IS NULL OR disabled_at > %s)",
            (arn, clock.now() - self.stream_settings.retention_seconds)).fetchone()
        return None if row is None else _stream(row)

    def list_shards(self, stream_id: int) -> list[ShardInfo]:
        cutoff = clock.now() - self.stream_settings.retention_seconds
        rows = self._cursor().execute(
            f"SELECT {_SHARD_COLUMNS} FROM openddb_stream_shards WHERE sid=%s AND "
            "(closed_at IS NULL OR closed_at > %s) ORDER BY shard_no", (stream_id, cutoff)).fetchall()
        return [ShardInfo(*row) for row in rows]

    def read_stream(self, stream_id: int, shard_id: str, start: int, limit: int) -> list[StreamRecord]:
        if "\x00" in shard_id:
            return []
        rows = self._cursor().execute(
            "SELECT seq, created_at, kind, origin, keys, old, new FROM openddb_stream_records WHERE shard_no = "
            "(SELECT shard_no FROM openddb_stream_shards WHERE sid=%s AND shard_id=%s) AND seq >= %s "
            "ORDER BY seq LIMIT %s", (stream_id, shard_id, start, limit)).fetchall()
        return [StreamRecord(seq, created_at, _KINDS[kind], origin, keys, old, new)
                for seq, created_at, kind, origin, keys, old, new in rows]

    def shard_end(self, stream_id: int, shard_id: str) -> int:
        # (A record still uncommitted has a higher number than every committed one of its shard: see the module's
        # docstring. So a LATEST iterator starting here misses none that commit after it was made.)
        if "\x00" in shard_id:
            return 0
        row = self._cursor().execute(
            "SELECT coalesce((SELECT max(seq) + 1 FROM openddb_stream_records r WHERE r.shard_no = s.shard_no), "
            "s.starting_seq) FROM openddb_stream_shards s WHERE s.sid=%s AND s.shard_id=%s",
            (stream_id, shard_id)).fetchone()
        return 0 if row is None else int(row[0])

    # --- upkeep ---------------------------------------------------------------------------------------
    def maintain_streams(self, now: float) -> None:
        self._roll_over(now)
        cutoff = now - self.stream_settings.retention_seconds
        cur = self._cursor()
        # The oldest record of each shard, one index probe each: only shards with records past retention are
        # trimmed, so a round with nothing to do reads a handful of rows.
        stale = cur.execute("SELECT sh.shard_no FROM openddb_stream_shards sh WHERE (SELECT r.created_at FROM "
                            "openddb_stream_records r WHERE r.shard_no = sh.shard_no ORDER BY r.seq LIMIT 1) < %s",
                            (cutoff,)).fetchall()
        for (shard_no,) in stale:
            self._transact(partial(self._trim, shard_no=shard_no, cutoff=cutoff))
        self._transact(partial(self._drop_expired, cutoff=cutoff))

    def _trim(self, cur: psycopg.Cursor[Any], shard_no: int, cutoff: float) -> None:
        """Delete a shard's records past retention: those before its first record still young, in sequence order
        (so what is left is a suffix of the shard, and `trimmed_seq` tells a reader where it starts)."""
        gone = one_row(cur, "WITH gone AS (DELETE FROM openddb_stream_records WHERE shard_no=%s AND seq < coalesce("
                            "(SELECT seq FROM openddb_stream_records WHERE shard_no=%s AND created_at >= %s "
                            "ORDER BY seq LIMIT 1), 9223372036854775807) RETURNING seq) SELECT max(seq) FROM gone",
                       (shard_no, shard_no, cutoff))[0]
        if gone is not None:
            cur.execute("UPDATE openddb_stream_shards SET trimmed_seq = greatest(trimmed_seq, %s) WHERE shard_no=%s",
                        (gone + 1, shard_no))

    def _drop_expired(self, cur: psycopg.Cursor[Any], cutoff: float) -> None:
        """Drop shards closed, and streams disabled (or of deleted tables), more than the retention period ago:
        every record of theirs is older than that."""
        sids = [row[0] for row in cur.execute("DELETE FROM openddb_streams WHERE disabled_at < %s RETURNING sid",
                                              (cutoff,)).fetchall()]
        shards = [row[0] for row in cur.execute(
            "DELETE FROM openddb_stream_shards WHERE (ending_seq IS NOT NULL AND closed_at < %s) "
            "OR sid = ANY(%s::bigint[]) RETURNING shard_no", (cutoff, sids)).fetchall()]
        if shards:
            cur.execute("DELETE FROM openddb_stream_records WHERE shard_no = ANY(%s::bigint[])", (shards,))
        for sid in sids:
            self._stream_shards.pop(sid, None)

