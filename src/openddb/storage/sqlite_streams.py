"""DynamoDB Streams on SQLite: streams, shards and change records, written in the item write's transaction.

The records are made by the write path itself (`sqlite_writes`), in the step that persists changes: for each
change of a table with an enabled stream, `_append_record` builds the record from the item's stored JSON before
and after, which the write already holds (a blind write, which did not read the row, has it read there, under
the writer lock, before the row is written), with the change's origin (user, ttl, restore) and the engine's
clock, and queues it; the transaction's queued records are written in one statement (`_write_records`) just
before it commits. So a record commits with its change or not at all, and a table without a stream does no
stream work at all: no trigger on `items`, no lookup. Every change is a record, so two changes of one key
in one group are two records, in order; a rewrite with the very same bytes is no change and writes none. The
shard is picked as `shard_slot` does: `(h * shards) >> 32`. (A store made when triggers wrote the records has
them dropped when it is opened.)

Every record is appended while the writer lock is held, so the sequence number (the log's rowid, one past the
highest) is the commit order across every worker sharing the store; trimming never deletes the highest record,
so it never goes back. The log is indexed by stream, not by shard: each record keeps its stream and shard, and a
shard is read along its stream's records, passing over the other shards' (see `read_stream_on`). A commit so
changes one page of the index whatever the shards it wrote to, and no page but the log's: an open shard's newest
record is looked up in the index where it is asked for (LATEST, the shard's closing), not kept at each commit; a
closed shard keeps it (`last_seq`, set as it closes). A stream's shards each cover a range of the partition hash
(`shard_slot`), so one item's records always land in the shards of one slot: its open shard, then that shard's
children after each rollover.
Rollover and closing happen under the writer lock too (a write rolls over the shard it appends to once it is
`shard_seconds` old, the background upkeep the others), so no record can land in a shard after its ending
sequence number was set.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from openddb import clock
from openddb.model.schema import StreamMeta, StreamViewType, TableMeta
from openddb.storage.base import (
    Change,
    Origin,
    ShardInfo,
    StreamInfo,
    StreamRecord,
    StreamSettings,
    shard_slot,
)
from openddb.storage.sqlite_indexes import blob
from openddb.storage.sqlite_schema import add_columns

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

STREAM_SCHEMA = """
CREATE TABLE IF NOT EXISTS streams (
    sid INTEGER PRIMARY KEY AUTOINCREMENT, arn TEXT NOT NULL UNIQUE, tid INTEGER NOT NULL, table_name TEXT NOT NULL,
    label TEXT NOT NULL, view_type TEXT NOT NULL, key_schema BLOB NOT NULL, created_at REAL NOT NULL,
    disabled_at REAL, shards INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS stream_shards (
    shard_no INTEGER PRIMARY KEY AUTOINCREMENT, sid INTEGER NOT NULL, slot INTEGER NOT NULL,
    shard_id TEXT NOT NULL UNIQUE, parent_id TEXT, starting_seq INTEGER NOT NULL, ending_seq INTEGER,
    created_at REAL NOT NULL, trimmed_seq INTEGER NOT NULL DEFAULT 0, last_seq INTEGER
);
CREATE INDEX IF NOT EXISTS stream_shards_by_stream ON stream_shards (sid, shard_no);
CREATE TABLE IF NOT EXISTS stream_log (
    seq INTEGER PRIMARY KEY, shard_no INTEGER NOT NULL, created_at REAL NOT NULL, kind TEXT NOT NULL,
    origin TEXT NOT NULL, keys BLOB, old BLOB, new BLOB, old_size INTEGER, new_size INTEGER, sid INTEGER
);
CREATE INDEX IF NOT EXISTS streams_enabled ON streams (tid) WHERE disabled_at IS NULL;
CREATE INDEX IF NOT EXISTS stream_shards_open ON stream_shards (sid, slot) WHERE ending_seq IS NULL;
"""

# A record's parameters are bound as int, float, str or bytearray only: Python's sqlite3 (3.11) sends any other
# type (None, bool, bytes) through its adaptation protocol first, which raises and clears an AttributeError on the
# way (~0.5 µs a value, several per record). So an image is bound as a bytearray, an absent one as b"" and an absent
# size as -1, both made NULL by the statement; a view's flags are constants of its own statement.
_ABSENT_IMAGE = bytearray()
_ABSENT_SIZE = -1
# The statement a transaction's queued records are written by: each record with its stream and shard, numbered one
# past the highest before it (the rowid SQLite gives a row of a table whose highest row is never deleted).
_APPEND = ("INSERT INTO stream_log (sid, shard_no, created_at, kind, origin, keys, old, new, old_size, new_size) "
           "VALUES (?, ?, ?, ?, ?, nullif(?, x''), nullif(?, x''), nullif(?, x''), nullif(?, -1), nullif(?, -1))")
# A shard's newest record (?1: its shard_no), read backwards along its stream's index from the end down to the
# shard's first number; if none is left, the newest one trimmed (`trimmed_seq` is one past it); else NULL.
_NEWEST = ("SELECT coalesce((SELECT r.seq FROM stream_log r WHERE r.sid = s.sid AND r.seq >= s.starting_seq AND "
           "r.shard_no = s.shard_no ORDER BY r.seq DESC LIMIT 1), nullif(s.trimmed_seq, 0) - 1) "
           "FROM stream_shards s WHERE s.shard_no=?")
# A blind write's record, written at once with the old image read in the same statement (the row as it stands,
# just before the write's own statement changes it; see `_append_blind_record`), as `_record` makes one; nothing if
# the write leaves the stored bytes as they were. ?5 the new image; {old}/{new} (1 or 0, one statement per view
# type, `_BLIND_BY_VIEW`) whether the view keeps the old/new image.
_APPEND_BLIND = (
    "INSERT INTO stream_log (sid, shard_no, created_at, kind, origin, keys, old, new, old_size, new_size) "
    "SELECT ?1, ?2, ?3, CASE WHEN i.data IS NULL THEN 'INSERT' WHEN ?5 IS NULL THEN 'REMOVE' ELSE 'MODIFY' END, ?4, "
    "CASE WHEN ({old} AND i.data IS NOT NULL) OR ({new} AND ?5 IS NOT NULL) THEN NULL ELSE coalesce(?5, i.data) END, "
    "CASE WHEN {old} THEN i.data END, CASE WHEN {new} THEN ?5 END, CASE WHEN {old} AND i.data IS NOT NULL THEN i.size "
    "END, CASE WHEN {new} AND ?5 IS NOT NULL THEN ?6 END "
    "FROM (SELECT 1) LEFT JOIN items i ON i.tid=?7 AND i.h=?8 AND i.pk=?9 AND i.sk=?10 WHERE i.data IS NOT ?5")
# The log's one index: a stream's records in commit order, with their shard (a shard is read along it, see
# `read_stream`). Every record of a stream appends to its end, so a commit changes one page of it, where an index
# by shard changed one page for each shard written to.
_BY_STREAM = "CREATE INDEX IF NOT EXISTS stream_log_by_stream ON stream_log (sid, seq, shard_no)"
_WITH_OLD = ("OLD_IMAGE", "NEW_AND_OLD_IMAGES")
_WITH_NEW = ("NEW_IMAGE", "NEW_AND_OLD_IMAGES")
_BLIND_BY_VIEW: dict[str, str] = {
    view: _APPEND_BLIND.format(old=int(view in _WITH_OLD), new=int(view in _WITH_NEW))
    for view in ("KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES")}
_STREAM_COLUMNS = "sid, arn, table_name, label, view_type, key_schema, created_at, disabled_at"
_SHARD_COLUMNS = "shard_id, parent_id, slot, starting_seq, ending_seq, created_at, trimmed_seq"
# Records are deleted (trimmed, or gone with their stream) only below the highest one, which keeps the next
# sequence number (the log's next rowid) from ever going back. The one kept past its time is never read: its shard's
# `trimmed_seq` is past it, or its shard is gone.
_BELOW_TOP = "seq < (SELECT max(seq) FROM stream_log)"
_OPEN_SHARD = "SELECT shard_no, shard_id, created_at FROM stream_shards WHERE sid=? AND slot=? AND ending_seq IS NULL"


def statements(script: str) -> Iterator[str]:
    """The SQL statements of `script`, one by one (a trigger's body holds `;`s of its own)."""
    pending = ""
    for part in script.split(";"):
        pending += part + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                yield pending
            pending = ""


def _record(view: StreamViewType, now: float, origin: Origin, before: tuple[int, bytes | None], new: bytes | None,
            new_size: int, sid: int, shard_no: int) -> tuple[Any, ...]:
    """The parameters of `_APPEND` but the sequence number, for a change from the item `before` (its size and
    stored JSON, None if it did not exist) to `new` (None once deleted). The record keeps the images its view
    type keeps; Keys come from an image the record holds, else from `keys` (the whole item, as it was stored:
    the reader takes the key attributes out of it). An absent image or size goes as `_ABSENT_IMAGE`/`_ABSENT_SIZE`."""
    old_size, old = before
    kept_old = old if view in _WITH_OLD else None
    kept_new = new if view in _WITH_NEW else None
    keys = None if kept_old is not None or kept_new is not None else (new if new is not None else old)
    kind = "INSERT" if old is None else "REMOVE" if new is None else "MODIFY"
    return (sid, shard_no, now, kind, origin, _image(keys), _image(kept_old), _image(kept_new),
            _ABSENT_SIZE if kept_old is None else old_size, _ABSENT_SIZE if kept_new is None else new_size)


def _image(data: bytes | None) -> bytearray:
    return _ABSENT_IMAGE if data is None else blob(data)


def _stream_info(row: Any) -> StreamInfo:
    return StreamInfo(row[0], row[1], row[2], row[3], row[4], orjson.loads(row[5]), row[6], row[7])


def new_shard_id(now: float) -> str:
    """A shard id in DynamoDB's form: "shardId-" + 20 digits of creation time (ms) + "-" + 8 random hex digits."""
    return f"shardId-{int(now * 1000):020d}-{os.urandom(4).hex()}"


class SQLiteStreams:
    """Stream storage; mixed into SQLiteEngine, whose connection and writer lock it uses."""

    _db: sqlite3.Connection
    stream_settings: StreamSettings
    # (stream id, slot) -> (shard_no, created_at) of the slot's open shard, as this process last saw it, committed
    # or made in the open transaction (a rollback empties it: a rollover it undid is forgotten). Only a rollover
    # closes a shard before its stream is disabled (a catalog change, after which the stream's records are no
    # longer written), and a rollover happens only once the shard is `shard_seconds` old by the clock every
    # process reads, under the writer lock: a cached shard younger than that is still open, and the records go to
    # it without a look-up.
    _open_shards: dict[tuple[int, int], tuple[int, float]]
    _stream_shards: dict[int, int]  # stream id -> its number of shard slots (as `_shard_count` read it)
    _records: list[tuple[Any, ...]]  # the `_APPEND` parameters of the records queued in this transaction
    _locked: bool  # (SQLiteEngine's: a group transaction holding the writer lock is open)

    if TYPE_CHECKING:
        def _transaction(self, ddl: bool = False) -> AbstractContextManager[sqlite3.Connection]: ...

        def _read(self) -> sqlite3.Connection: ...

        def _live_table(self, table: TableMeta) -> TableMeta | None: ...

    # --- catalog (inside a DDL transaction) -----------------------------------------------------------
    def _sync_stream(self, meta: TableMeta | None, stored: TableMeta | None, now: float) -> None:
        """Bring the stored streams in line with the description about to be stored: create the stream that
        `meta` enables anew (assigning its id), disable the one it (or the table's deletion, `meta` None with
        `stored`) turns off."""
        before = stored.stream if stored is not None else None
        after = meta.stream if meta is not None else None
        if before is not None and before.enabled and before.stream_id and \
                (after is None or not after.enabled or after.stream_id != before.stream_id):
            self._disable_stream(before.stream_id, now)
        if meta is not None and after is not None and after.enabled and not after.stream_id:
            self._create_stream(meta, now)

    def _create_stream(self, meta: TableMeta, now: float) -> None:
        assert meta.stream is not None and meta.stream_arn is not None
        db = self._db
        shards = self.stream_settings.shards
        sid = db.execute(
            "INSERT INTO streams (arn, tid, table_name, label, view_type, key_schema, created_at, shards) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING sid",
            (meta.stream_arn, meta.table_id, meta.name, meta.stream.label, meta.stream.view_type,
             orjson.dumps(meta.key_schema_wire()), meta.stream.created_at or now, shards)).fetchone()[0]
        meta.stream.stream_id = sid
        start = self._next_seq()
        for slot in range(shards):
            self._open_shard(sid, slot, None, start, now)

    def _disable_stream(self, sid: int, now: float) -> None:
        db = self._db
        self._write_records()  # (the records queued for its shards go in before they end)
        db.execute("UPDATE streams SET disabled_at=? WHERE sid=? AND disabled_at IS NULL", (now, sid))
        for (shard_no,) in db.execute("SELECT shard_no FROM stream_shards WHERE sid=? AND ending_seq IS NULL",
                                      (sid,)).fetchall():
            self._close_shard(shard_no)
        for key in [key for key in self._open_shards if key[0] == sid]:
            del self._open_shards[key]

    def _upgrade_stream_log(self) -> None:
        """Under the writer lock, when a store is opened: bring a log an earlier version made to this layout. The
        images' sizes beside them (a log made before they were kept has its records' sizes counted when read);
        each record's stream and each shard's newest record, where the log was indexed by shard (its index is
        used to fill them, then dropped for the index by stream)."""
        db = self._db
        add_columns(db, "stream_log", {"old_size": "INTEGER", "new_size": "INTEGER", "sid": "INTEGER"})
        add_columns(db, "stream_shards", {"last_seq": "INTEGER"})
        if db.execute("SELECT 1 FROM sqlite_master WHERE type='index' AND name='stream_log_by_shard'").fetchone():
            db.execute("UPDATE stream_shards SET last_seq = (SELECT max(seq) FROM stream_log r "
                       "WHERE r.shard_no = stream_shards.shard_no)")
            db.execute("UPDATE stream_log SET sid = (SELECT s.sid FROM stream_shards s "
                       "WHERE s.shard_no = stream_log.shard_no)")
            db.execute("DROP INDEX stream_log_by_shard")
        db.execute(_BY_STREAM)

    def _next_seq(self) -> int:
        """Under the writer lock: the sequence number the next record will get (one past the highest ever given:
        the highest record is never deleted, see `_trim`)."""
        return int(self._db.execute("SELECT coalesce(max(seq), 0) + 1 FROM stream_log").fetchone()[0])

    def _open_shard(self, sid: int, slot: int, parent: str | None, start: int, now: float) -> int:
        shard_no: int = self._db.execute(
            "INSERT INTO stream_shards (sid, slot, shard_id, parent_id, starting_seq, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?) RETURNING shard_no",
            (sid, slot, new_shard_id(now), parent, start, now)).fetchone()[0]
        self._open_shards[(sid, slot)] = (shard_no, now)
        return shard_no

    def _close_shard(self, shard_no: int) -> None:
        """End a shard at its last record, kept as its `last_seq` (an empty shard ends at its starting sequence
        number, with no `last_seq`)."""
        db = self._db
        last = db.execute(_NEWEST, (shard_no,)).fetchone()[0]
        db.execute("UPDATE stream_shards SET last_seq=?, ending_seq = coalesce(?, starting_seq) WHERE shard_no=?",
                   (last, last, shard_no))

    def _shard_count(self, sid: int) -> int:
        """How many shards the stream keeps open: fixed when it was created, so a server restarted with another
        --stream-shards still sends each key's records to the shards of the same slot."""
        count = self._stream_shards.get(sid)
        if count is None:
            row = self._db.execute("SELECT shards FROM streams WHERE sid=?", (sid,)).fetchone()
            count = self._stream_shards[sid] = self.stream_settings.shards if row is None else int(row[0])
        return count

    def _current_shard(self, sid: int, slot: int, now: float) -> int:
        """Under the writer lock: the slot's open shard, rolled over first if it is `shard_seconds` old."""
        cached = self._open_shards.get((sid, slot))
        period = self.stream_settings.shard_seconds
        if cached is not None and now - cached[1] < period:
            return cached[0]
        row = self._db.execute(_OPEN_SHARD, (sid, slot)).fetchone()
        if row is None:  # (not expected: an enabled stream always has one open shard per slot)
            return self._open_shard(sid, slot, None, self._next_seq(), now)
        if now - row[2] < period:
            self._open_shards[(sid, slot)] = (row[0], row[2])
            return int(row[0])
        self._write_records()  # (the records queued for the shard go in before it ends)
        self._close_shard(row[0])
        return self._open_shard(sid, slot, row[1], self._next_seq(), now)

    # --- records (inside the write's transaction) -------------------------------------------------------
    def _record_target(self, change: Change) -> tuple[StreamMeta, int, float] | None:
        """Where the record of `change` goes: its table's stream, as committed (None if it is not enabled), the
        open shard of its slot, rolled over first if it is `shard_seconds` old, so none lands in a shard past its
        period (the background upkeep rolls over the shards nobody writes to), and the record's time."""
        live = self._live_table(change.table)
        stream = live.stream if live is not None else None
        if stream is None or not stream.enabled:
            return None
        sid = stream.stream_id
        now = clock.now()
        return stream, self._current_shard(sid, shard_slot(change.key.h, self._shard_count(sid)), now), now

    def _append_record(self, change: Change, before: tuple[int, bytes | None]) -> None:
        """Under the writer lock, before the row of `change` is written: its record, if its table's stream (as
        committed) is enabled, built from the stored JSON of the item `before` it (its size and JSON, None if it
        did not exist; see `SQLiteWrites._log_changes`) and after it, queued for `_write_records` (see
        `_record_target` for its shard)."""
        target = self._record_target(change)
        if target is None:
            return
        stream, shard_no, now = target
        self._records.append(_record(stream.view_type, now, change.origin, before, change.new_data,
                                     change.new_size, stream.stream_id, shard_no))

    def _append_blind_record(self, change: Change) -> None:
        """Under the writer lock, just before the row of `change`, a blind write, is written: its record (if its
        table's stream is enabled), with the row as it stands read in the same statement, written at once after
        the records queued before it (so in order)."""
        target = self._record_target(change)
        if target is None:
            return
        stream, shard_no, now = target
        if self._records:
            self._write_records()
        self._db.execute(_BLIND_BY_VIEW[stream.view_type], _blind_params(stream.stream_id, shard_no, now, change))

    def _append_blind_records(self, changes: Sequence[Change]) -> None:
        """`_append_blind_record` of each of `changes` (blind writes whose rows are not written yet, each to a key
        of its own), in order, in one statement call per run of one view type: each record's target is found
        first (a rollover happens then, before any of them is written, and with one time for all, so at most once
        a slot), then they go in one `executemany`, numbered from one past the highest sequence number."""
        now = clock.now()
        targets: dict[int, tuple[int, int, str] | None] = {}  # table id -> (stream id, its shards, statement)
        runs: list[tuple[str, list[tuple[Any, ...]]]] = []
        for change in changes:
            table = change.table
            if table.table_id in targets:
                target = targets[table.table_id]
            else:
                target = targets[table.table_id] = self._blind_target(table)
            if target is None:
                continue
            sid, shards, sql = target
            record = _blind_params(sid, self._current_shard(sid, shard_slot(change.key.h, shards), now), now, change)
            if runs and runs[-1][0] == sql:
                runs[-1][1].append(record)
            else:
                runs.append((sql, [record]))
        if self._records:
            self._write_records()
        for sql, run in runs:
            self._db.executemany(sql, run)

    def _blind_target(self, table: TableMeta) -> tuple[int, int, str] | None:
        """The stream `table`'s blind writes append records to, as committed (None if it is not enabled): its id,
        its number of shard slots, and the statement of its view type."""
        live = self._live_table(table)
        stream = live.stream if live is not None else None
        if stream is None or not stream.enabled:
            return None
        sid = stream.stream_id
        return sid, self._shard_count(sid), _BLIND_BY_VIEW[stream.view_type]

    def _forget_records(self) -> None:
        """After a rollback (of the transaction or of a request's savepoint): the records it queued, and the open
        shards this process knows, as a rollover it undid may have changed them."""
        self._records = []
        self._open_shards.clear()

    def _write_records(self) -> None:
        """Under the writer lock, just before the transaction commits (and before a shard it wrote to closes):
        the queued records, in the order queued, numbered from one past the highest sequence number, in one
        statement. A rollback drops them with the rest."""
        records, self._records = self._records, []
        if len(records) == 1:
            self._db.execute(_APPEND, records[0])
        elif records:
            self._db.executemany(_APPEND, records)

    # --- reads -----------------------------------------------------------------------------------------
    def _horizon(self, now: float) -> float:
        return now - self.stream_settings.retention_seconds

    def list_streams(self, table_name: str | None = None) -> list[StreamInfo]:
        sql = f"SELECT {_STREAM_COLUMNS} FROM streams WHERE (disabled_at IS NULL OR disabled_at > ?)"
        params: list[Any] = [self._horizon(clock.now())]
        if table_name is not None:
            sql += " AND table_name=?"
            params.append(table_name)
        return [_stream_info(row) for row in self._read().execute(sql + " ORDER BY sid", params)]

    def get_stream(self, arn: str) -> StreamInfo | None:
        row = self._read().execute(
            f"SELECT {_STREAM_COLUMNS} FROM streams WHERE arn=? AND (disabled_at IS NULL OR disabled_at > ?)",
            (arn, self._horizon(clock.now()))).fetchone()
        return None if row is None else _stream_info(row)

    def list_shards(self, stream_id: int) -> list[ShardInfo]:
        rows = self._read().execute(f"SELECT {_SHARD_COLUMNS} FROM stream_shards WHERE sid=? ORDER BY shard_no",
                                    (stream_id,))
        return [ShardInfo(*row) for row in rows]

    def read_stream(self, stream_id: int, shard_id: str, start: int, limit: int) -> list[StreamRecord]:
        return self.read_stream_on(stream_id, shard_id, start, limit)[0]

    def read_stream_on(self, stream_id: int, shard_id: str, start: int,
                       limit: int) -> tuple[list[StreamRecord], int]:
        """Along the stream's records from `start`, those of the shard (the others' are passed over in the index),
        up to a closed shard's last record or to the newest record of the log; and where a reader that took them
        all goes on from: past the newest record passed over (committed, so no record of the shard will ever come
        before it), or a reader that is caught up would pass over the other shards' records again each time."""
        db = self._read()
        shard = db.execute("SELECT shard_no, ending_seq, last_seq FROM stream_shards WHERE shard_id=? AND sid=?",
                           (shard_id, stream_id)).fetchone()
        if shard is None:
            return [], start
        shard_no, ending, end = shard
        if ending is None:  # (open: the log's newest record, as this snapshot has it)
            end = db.execute("SELECT max(seq) FROM stream_log").fetchone()[0]
        if end is None or end < start:
            return [], start
        rows = db.execute(
            "SELECT seq, created_at, kind, origin, keys, old, new, old_size, new_size FROM stream_log "
            "WHERE sid=? AND seq >= ? AND seq <= ? AND shard_no=? ORDER BY seq LIMIT ?",
            (stream_id, start, end, shard_no, limit))
        records = [StreamRecord(seq, created, kind, origin, b"" if keys is None else bytes(keys),
                                None if old is None else bytes(old), None if new is None else bytes(new), old_size,
                                new_size)
                   for seq, created, kind, origin, keys, old, new, old_size, new_size in rows]
        # (Inside this process's own write transaction, the newest record may not be committed yet: if it rolled
        # back, its number would be given again; so only past the records read, then.)
        passed = end if len(records) < limit and not self._locked else records[-1].seq if records else start - 1
        return records, passed + 1

    def shard_end(self, stream_id: int, shard_id: str) -> int:
        db = self._read()
        row = db.execute(
            "SELECT shard_no, ending_seq, last_seq, starting_seq FROM stream_shards WHERE sid=? AND shard_id=?",
            (stream_id, shard_id)).fetchone()
        if row is None:
            return 0
        shard_no, ending, last, starting = row
        if ending is None:  # (open: its newest record, looked up)
            last = db.execute(_NEWEST, (shard_no,)).fetchone()[0]
        return starting if last is None else int(last) + 1

    # --- upkeep --------------------------------------------------------------------------------------------
    def maintain_streams(self, now: float) -> None:
        horizon = self._horizon(now)
        period = self.stream_settings.shard_seconds
        with self._transaction() as db:
            expired = db.execute(
                "SELECT s.sid, s.slot FROM stream_shards s JOIN streams t ON t.sid = s.sid "
                "WHERE s.ending_seq IS NULL AND t.disabled_at IS NULL AND s.created_at <= ?",
                (now - period,)).fetchall()
            for sid, slot in expired:
                self._current_shard(sid, slot, now)  # (rolls it over)
            for (sid,) in db.execute("SELECT sid FROM streams").fetchall():
                self._trim(sid, horizon)
            # A closed shard whose records are all past retention is gone with them (its last record's time, or
            # its creation if it never had one).
            db.execute("DELETE FROM stream_shards WHERE ending_seq IS NOT NULL AND created_at < ? AND "
                       "(last_seq IS NULL OR last_seq < trimmed_seq)", (horizon,))
            gone = [sid for (sid,) in db.execute("SELECT sid FROM streams WHERE disabled_at < ?", (horizon,))]
            for sid in gone:
                db.execute(f"DELETE FROM stream_log WHERE sid=? AND {_BELOW_TOP}", (sid,))
                db.execute("DELETE FROM stream_shards WHERE sid=?", (sid,))
                db.execute("DELETE FROM streams WHERE sid=?", (sid,))

    def _trim(self, sid: int, horizon: float) -> None:
        """Delete a stream's records older than `horizon`: a prefix of the stream, as its records are in commit
        order (read along the stream's index, no index on age needed); each shard's `trimmed_seq` says where the
        rest of it starts."""
        db = self._db
        oldest = db.execute("SELECT created_at FROM stream_log WHERE sid=? ORDER BY seq LIMIT 1", (sid,)).fetchone()
        if oldest is None or oldest[0] >= horizon:
            return
        kept = db.execute("SELECT seq FROM stream_log WHERE sid=? AND created_at >= ? ORDER BY seq LIMIT 1",
                          (sid, horizon)).fetchone()
        end = (1 << 62) if kept is None else kept[0]
        for shard_no, last in db.execute("SELECT shard_no, max(seq) FROM stream_log WHERE sid=? AND seq < ? "
                                         "GROUP BY shard_no", (sid, end)).fetchall():
            db.execute("UPDATE stream_shards SET trimmed_seq=? WHERE shard_no=?", (last + 1, shard_no))
        db.execute(f"DELETE FROM stream_log WHERE sid=? AND seq < ? AND {_BELOW_TOP}", (sid, end))


def _blind_params(sid: int, shard_no: int, now: float, change: Change) -> tuple[Any, ...]:
    """A blind write's record's parameters for its `_BLIND_BY_VIEW` statement."""
    key = change.key
    new = change.new_data
    return (sid, shard_no, now, change.origin, None if new is None else blob(new), change.new_size,
            change.table.table_id, key.h, blob(key.pk), blob(key.sk))
