"""Backups and point-in-time recovery on SQLite.

On-demand backups live in a file of their own beside the store (`openddb-backups.sqlite3`, WAL), written by a
connection of their own that attaches the store. A backup is made in chunks while writes go on (docs/
ARCHITECTURE.md, "On-demand backups"): `begin_backup` records it CREATING and fixes its instant with a hold on the
snapshot log (triggers that keep the old image of each change of the table from then on); each `continue_backup`
copies the next items as they are then, in one transaction of the backups file with its progress (the store's
writer lock is never taken); the last one sets each key changed since the instant back to its image then and
stores the backup AVAILABLE. A store in memory keeps them in its own database instead. An encrypted store's
backups file is encrypted with the store's key (see sqlite_cipher).

Point-in-time recovery keeps, for each table that has it on, a log of the old image of every item change
(`recovery_log`), appended by the write path's persist step with the stream records (`SQLiteWrites._log_changes`),
from the item before the change that the write holds (a blind write's record reads the row as it stands, in its
own statement: `_LOG_UNREAD`), before the row is written: so a change and its log record commit together,
whatever path wrote it (a client's write, a batch, a transaction, the TTL sweep), and two changes of one key in
one group are two records, in order. Which tables have it on is
read under the writer lock when the catalog counter moved (`_recovering`; turning it on or off is a catalog
change): other tables' writes pay a set lookup. (A store made when triggers on `items` wrote the log has them
dropped when it is opened.) A restore to time T copies the table's current items and undoes,
for each key changed after T, its first change after T (the row is set back to that change's old image, or
removed if it had none): the table as it stood at T. Records older than the recovery period are trimmed.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import chain
from typing import TYPE_CHECKING, Any

from openddb import clock
from openddb.model.schema import TableMeta
from openddb.storage.base import (
    BackupProgress,
    BackupRecord,
    Change,
    RecoveryWindow,
    RestoreProgress,
    RestoreSource,
    StorageKey,
    restore_ending,
)
from openddb.storage.sqlite_cipher import Driver
from openddb.storage.sqlite_streams import statements

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

BACKUP_SCHEMA = """
CREATE TABLE IF NOT EXISTS backups (
    arn TEXT PRIMARY KEY, name TEXT NOT NULL, table_name TEXT NOT NULL, table_uuid TEXT NOT NULL,
    created_at REAL NOT NULL, status TEXT NOT NULL, backup_type TEXT NOT NULL, size INTEGER NOT NULL,
    item_count INTEGER NOT NULL, meta BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS backup_items (
    arn TEXT NOT NULL, h INTEGER NOT NULL, pk BLOB NOT NULL, sk BLOB NOT NULL, size INTEGER NOT NULL,
    data BLOB NOT NULL, PRIMARY KEY (arn, h, pk, sk)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS backup_progress (arn TEXT PRIMARY KEY, h INTEGER, pk BLOB, sk BLOB);
"""

RECOVERY_SCHEMA = """
CREATE TABLE IF NOT EXISTS recovery (tid INTEGER PRIMARY KEY, enabled_at REAL NOT NULL, days INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS recovery_log (
    seq INTEGER PRIMARY KEY, tid INTEGER NOT NULL, created_at REAL NOT NULL, h INTEGER NOT NULL, pk BLOB NOT NULL,
    sk BLOB NOT NULL, old_size INTEGER, old BLOB
);
CREATE TABLE IF NOT EXISTS snapshot_holds (arn TEXT PRIMARY KEY, tid INTEGER NOT NULL, since INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS snapshot_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, tid INTEGER NOT NULL, h INTEGER NOT NULL, pk BLOB NOT NULL,
    sk BLOB NOT NULL, old_size INTEGER, old BLOB
);
CREATE TABLE IF NOT EXISTS restore_progress (
    tid INTEGER PRIMARY KEY, backup_arn TEXT, src INTEGER, at REAL NOT NULL, h INTEGER, pk BLOB, sk BLOB
);
"""

# While a backup of table {tid} is being made: the old image of each of its row changes, as the recovery log
# keeps them (AUTOINCREMENT: a sequence number is never given twice, so a hold's `since` stays a true boundary).
SNAPSHOT_TRIGGERS = """
CREATE TRIGGER IF NOT EXISTS snapshot_on_insert_{tid} AFTER INSERT ON items WHEN NEW.tid = {tid} BEGIN
    INSERT INTO snapshot_log (tid, h, pk, sk, old_size, old) VALUES ({tid}, NEW.h, NEW.pk, NEW.sk, NULL, NULL);
END;
CREATE TRIGGER IF NOT EXISTS snapshot_on_update_{tid} AFTER UPDATE ON items
WHEN NEW.tid = {tid} AND OLD.data IS NOT NEW.data BEGIN
    INSERT INTO snapshot_log (tid, h, pk, sk, old_size, old) VALUES ({tid}, OLD.h, OLD.pk, OLD.sk, OLD.size, OLD.data);
END;
CREATE TRIGGER IF NOT EXISTS snapshot_on_delete_{tid} AFTER DELETE ON items WHEN OLD.tid = {tid} BEGIN
    INSERT INTO snapshot_log (tid, h, pk, sk, old_size, old) VALUES ({tid}, OLD.h, OLD.pk, OLD.sk, OLD.size, OLD.data);
END;
"""
_SNAPSHOT_TRIGGER_KINDS = ("snapshot_on_insert", "snapshot_on_update", "snapshot_on_delete")
# For each key of the backup's table changed since its instant, its first change since (as _FIRST_CHANGES).
_SNAPSHOT_FIRST = ("WITH first AS (SELECT h, pk, sk, old_size, old, min(seq) FROM {store}.snapshot_log "
                   "WHERE seq > :since AND tid=:tid GROUP BY h, pk, sk) ")

# An absent image (an insertion's old item, a deletion's new bytes) is bound as an empty blob and an absent size as
# -1, which the statements turn to NULL (NULLIF; no stored item is empty): sqlite3 binds None, as it binds `bytes`,
# through its adapter lookup, about a microsecond a value.
_NO_IMAGE = bytearray()
_NO_SIZE = -1
_LOG_ROW = "(?, ?, ?, ?, ?, NULLIF(?, -1), NULLIF(?, x''))"
# A change's record: its table, the engine's clock, its key, the item before it (none for an insertion).
_LOG = "INSERT INTO recovery_log (tid, created_at, h, pk, sk, old_size, old) VALUES " + _LOG_ROW
# The record of a change that did not read the item before it (a blind write): the row as it stands, read by the
# record's own statement (one search of the row's page, which its write then finds cached, and no point read from
# Python first); none if the change leaves the stored bytes as they were (?6: its new bytes, _NO_IMAGE for a deletion).
_LOG_UNREAD = ("INSERT INTO recovery_log (tid, created_at, h, pk, sk, old_size, old) "
               "SELECT ?1, ?2, ?3, ?4, ?5, items.size, items.data FROM (SELECT 1) LEFT JOIN items "
               "ON items.tid=?1 AND items.h=?3 AND items.pk=?4 AND items.sk=?5 "
               "WHERE items.data IS NOT NULLIF(?6, x'')")
# The records of up to _UNREAD_ROWS blind changes to distinct keys in one statement, each reading its row as
# `_LOG_UNREAD` does, in the order given (the join's outer loop walks the VALUES in order): the per-statement work
# of one record each (binding the time, a step, a cursor opened on each table, a reset) is paid once for them all.
# `_LOG_UNREADS[n - 1]` takes n rows of (table, h, pk, sk, new bytes or _NO_IMAGE), then the time.
_UNREAD_ROWS = 16
_LOG_UNREADS = tuple(
    "WITH w(tid, h, pk, sk, data) AS (VALUES " + ", ".join(["(?, ?, ?, ?, ?)"] * rows) + ") "
    "INSERT INTO recovery_log (tid, created_at, h, pk, sk, old_size, old) "
    "SELECT w.tid, ?, w.h, w.pk, w.sk, items.size, items.data FROM w LEFT JOIN items "
    "ON items.tid=w.tid AND items.h=w.h AND items.pk=w.pk AND items.sk=w.sk "
    "WHERE items.data IS NOT NULLIF(w.data, x'')"
    for rows in range(1, _UNREAD_ROWS + 1))
# The records of up to _UNREAD_ROWS changes that read their items, as _LOG's, in one statement, in the order given
# (one step and one statement's set-up for them all, rather than executemany's per record): `_LOGS[n - 1]` takes
# n rows of _LOG's parameters.
_LOGS = tuple("INSERT INTO recovery_log (tid, created_at, h, pk, sk, old_size, old) VALUES "
              + ", ".join([_LOG_ROW] * rows) for rows in range(1, _UNREAD_ROWS + 1))

_RECORD = "arn, name, table_name, table_uuid, created_at, status, backup_type, size, item_count"
# For each key changed after the restore time (from the log's first record after it, `:since`), its first change
# after it (SQLite takes the bare columns of a min() aggregate from the row holding the minimum).
_FIRST_CHANGES = ("WITH first AS (SELECT h, pk, sk, old_size, old, min(seq) FROM recovery_log "
                  "WHERE seq >= :since AND tid=:src GROUP BY h, pk, sk) ")
_UNDO_INSERTS = (_FIRST_CHANGES + "DELETE FROM items WHERE tid=:tid AND (h, pk, sk) IN "
                 "(SELECT h, pk, sk FROM first WHERE old IS NULL)")
_UNDO_CHANGES = (_FIRST_CHANGES + "INSERT INTO items (tid, h, pk, sk, size, data) "
                 "SELECT :tid, h, pk, sk, old_size, old FROM first WHERE old IS NOT NULL "
                 "ON CONFLICT (tid, h, pk, sk) DO UPDATE SET size=excluded.size, "
                 "data=excluded.data")
_DAY = 86400.0


def _span(after: tuple[object, ...], end: tuple[object, ...] | None) -> tuple[str, tuple[object, ...]]:
    """The WHERE clause (and its parameters) of the keys after `after` (none: from the first) up to `end` (none:
    to the last)."""
    clause = ""
    bounds: tuple[object, ...] = ()
    if after[0] is not None:
        clause, bounds = " AND (h, pk, sk) > (?, ?, ?)", tuple(after)
    if end is not None:
        clause, bounds = clause + " AND (h, pk, sk) <= (?, ?, ?)", bounds + tuple(end)
    return clause, bounds


def _chunk_end(db: sqlite3.Connection, items: str, tid: int, after: tuple[object, ...],
               limit: int) -> tuple[object, ...] | None:
    """The key of the `limit`-th row of table `tid` after `after`, or None if fewer are left."""
    clause, bounds = _span(after, None)
    found = db.execute(f"SELECT h, pk, sk FROM {items} WHERE tid=?{clause} ORDER BY h, pk, sk LIMIT 1 "
                       "OFFSET ?", (tid, *bounds, limit - 1)).fetchone()
    return None if found is None else tuple(found)


def _record(row: tuple[object, ...], meta: bytes = b"") -> BackupRecord:
    arn, name, table_name, uuid, created_at, status, backup_type, size, count = row
    return BackupRecord(str(arn), str(name), str(table_name), str(uuid), float(str(created_at)),
                        status, str(backup_type), int(str(size)), int(str(count)), meta)  # type: ignore[arg-type]


def _switch_to_wal(db: sqlite3.Connection) -> None:
    """Put a newly made file in WAL mode. Two workers making it at once meet here, and the switch answers
    "database is locked" at once instead of waiting for the busy timeout: retried for up to about 5 s."""
    for attempt in range(500):
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == 499:
                raise
            time.sleep(0.01)


class RecoveryRows:
    """The recovery log records of a group of changes, in order, as runs of rows of either kind: records that read
    their rows (`_LOG_UNREADS`' rows) and records of the item their change read (`_LOG`'s); `now`, their time."""

    __slots__ = ("now", "runs")

    def __init__(self, now: float) -> None:
        self.now = now
        self.runs: list[tuple[bool, list[tuple[object, ...]]]] = []  # (whether its records read their rows, them)

    def _add(self, unread: bool, row: tuple[object, ...]) -> None:
        runs = self.runs
        if runs and runs[-1][0] is unread:
            runs[-1][1].append(row)
        else:
            runs.append((unread, [row]))

    def unread(self, tid: int, h: int, pk: bytearray, sk: bytearray, new: bytearray | None) -> None:
        """The record of a blind change, reading the row as it stands (none if it holds `new`, its new bytes)."""
        self._add(True, (tid, h, pk, sk, _NO_IMAGE if new is None else new))

    def read(self, tid: int, h: int, pk: bytearray, sk: bytearray, old_size: int, old: bytes | None) -> None:
        """The record of a change that read the item before it: its size and stored bytes (None: there was none).
        (The bytes are bound as a bytearray: sqlite3 binds `bytes` through its adapters, a good deal slower.)"""
        self._add(False, (tid, self.now, h, pk, sk, _NO_SIZE if old is None else old_size,
                          _NO_IMAGE if old is None else bytearray(old)))


class SQLiteBackups:
    """Backup and recovery storage; mixed into SQLiteEngine, whose connection and writer lock it uses."""

    _db: sqlite3.Connection
    _driver: Driver
    location: str
    _backups: sqlite3.Connection | None = None
    _signal: Any  # SQLiteEngine's _CatalogSignal
    _recovery_version: bytes  # the catalog counter `_recovery_tids` was read at
    _recovery_tids: frozenset[int]

    if TYPE_CHECKING:
        def _transaction(self, ddl: bool = False) -> AbstractContextManager[sqlite3.Connection]: ...

        def _insert_table(self, db: sqlite3.Connection, meta: TableMeta) -> None: ...

        def _bump_catalog(self) -> None: ...

        def _read(self) -> sqlite3.Connection: ...

        def _end_group(self, wait: bool = True) -> None: ...

        def end_reads(self) -> None: ...

    # --- on-demand backups ------------------------------------------------------------------------------------
    def _backup_db(self) -> tuple[sqlite3.Connection, str]:
        """The connection backups are written through, and the schema name the store's tables go by on it."""
        if self.location == ":memory:":
            if self._backups is None:
                with self._transaction() as db:
                    for statement in statements(BACKUP_SCHEMA):
                        db.execute(statement)
                self._backups = self._db
            return self._db, "main"
        if self._backups is None:
            path = os.path.join(os.path.dirname(self.location), "openddb-backups.sqlite3")
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
            db = self._driver.open(path, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA busy_timeout = 30000")
            _switch_to_wal(db)
            for statement in statements(BACKUP_SCHEMA):
                db.execute(statement)
            self._driver.attach(db, self.location, "store")
            self._backups = db
        return self._backups, "store"

    @contextmanager
    def _backup_transaction(self, first: str,
                            arguments: tuple[object, ...]) -> Iterator[tuple[sqlite3.Connection, str]]:
        """A transaction on the backups file, begun by the write `first` (so no read-to-write upgrade can fail;
        BEGIN IMMEDIATE would take the store's write lock too), whose reads of the store (`store.`) share one
        snapshot of it; committed when the body returns. A store in memory: a transaction of the store's own."""
        db, store = self._backup_db()
        if store == "main":
            with self._transaction():
                db.execute(first, arguments)
                yield db, store
            return
        db.execute("BEGIN")
        try:
            db.execute(first, arguments)
            yield db, store
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def begin_backup(self, record: BackupRecord, table: TableMeta) -> BackupRecord | None:
        record.status, record.meta = "CREATING", table.to_json()
        with self._backup_transaction(f"INSERT INTO backups ({_RECORD}, meta) VALUES (?, ?, ?, ?, ?, 'CREATING', ?, "
                                      "0, 0, ?)", (record.arn, record.name, record.table_name, record.table_uuid,
                                                   record.created_at, record.backup_type, record.meta)) as (db, _):
            db.execute("INSERT INTO backup_progress (arn) VALUES (?)", (record.arn,))
        # (a crash here leaves a backup with no hold: `continue_backup` finds it lost)
        with self._transaction() as db:
            found = db.execute("SELECT tid, meta FROM tables WHERE name=?", (table.stored_name,)).fetchone()
            if found is not None and TableMeta.from_json(found[1]).uuid == table.uuid:
                tid = int(found[0])
                since = db.execute("SELECT seq FROM sqlite_sequence WHERE name='snapshot_log'").fetchone()
                db.execute("INSERT INTO snapshot_holds (arn, tid, since) VALUES (?, ?, ?)",
                           (record.arn, tid, 0 if since is None else int(since[0])))
                for statement in statements(SNAPSHOT_TRIGGERS.format(tid=tid)):
                    db.execute(statement)
                return record
        self.delete_backup(record.arn)
        return None

    def continue_backup(self, arn: str, limit: int) -> BackupProgress:
        """A chunk: the items after the last one copied, as they are now, into the backup; once none is left, each
        key the snapshot log shows changed since the backup's instant set back to its image then (the old image of
        its first change since; none if that was its insertion): the table as it stood at that instant."""
        with self._backup_transaction("UPDATE backup_progress SET h = h WHERE arn=?", (arn,)) as (db, store):
            progress = db.execute("SELECT h, pk, sk FROM backup_progress WHERE arn=?", (arn,)).fetchone()
            hold = db.execute(f"SELECT tid, since FROM {store}.snapshot_holds WHERE arn=?", (arn,)).fetchone()
            if progress is None or hold is None:
                return "lost"
            tid, since = int(hold[0]), int(hold[1])
            end = _chunk_end(db, f"{store}.items", tid, progress, limit)
            clause, bounds = _span(progress, end)
            db.execute(f"INSERT OR REPLACE INTO backup_items (arn, h, pk, sk, size, data) SELECT ?, h, pk, sk, size, "
                       f"data FROM {store}.items WHERE tid=?{clause}", (arn, tid, *bounds))
            if end is not None:
                db.execute("UPDATE backup_progress SET h=?, pk=?, sk=? WHERE arn=?", (*end, arn))
                return "more"
            names = {"arn": arn, "tid": tid, "since": since}
            db.execute(_SNAPSHOT_FIRST.format(store=store) + "DELETE FROM backup_items WHERE arn=:arn AND (h, pk, sk) "
                       "IN (SELECT h, pk, sk FROM first WHERE old IS NULL)", names)
            db.execute(_SNAPSHOT_FIRST.format(store=store) + "INSERT OR REPLACE INTO backup_items (arn, h, pk, sk, "
                       "size, data) SELECT :arn, h, pk, sk, old_size, old FROM first WHERE old IS NOT NULL", names)
            count, size = db.execute("SELECT count(*), coalesce(sum(size), 0) FROM backup_items WHERE arn=?",
                                     (arn,)).fetchone()
            db.execute("UPDATE backups SET status='AVAILABLE', size=?, item_count=? WHERE arn=?",
                       (int(size), int(count), arn))
            db.execute("DELETE FROM backup_progress WHERE arn=?", (arn,))
        self._release_hold(arn)
        return "done"

    def _release_hold(self, arn: str) -> None:
        """The backup's hold on the snapshot log gone; the log of its table trimmed to the holds left (none: the
        triggers dropped and the log emptied)."""
        with self._transaction() as db:
            found = db.execute("SELECT tid FROM snapshot_holds WHERE arn=?", (arn,)).fetchone()
            if found is None:
                return
            tid = int(found[0])
            db.execute("DELETE FROM snapshot_holds WHERE arn=?", (arn,))
            oldest = db.execute("SELECT min(since) FROM snapshot_holds WHERE tid=?", (tid,)).fetchone()[0]
            if oldest is None:
                for kind in _SNAPSHOT_TRIGGER_KINDS:
                    db.execute(f"DROP TRIGGER IF EXISTS {kind}_{tid}")
                db.execute("DELETE FROM snapshot_log WHERE tid=?", (tid,))
            else:
                db.execute("DELETE FROM snapshot_log WHERE tid=? AND seq <= ?", (tid, int(oldest)))

    def list_backups(self) -> list[BackupRecord]:
        db, _ = self._backup_db()
        return [_record(row) for row in db.execute(f"SELECT {_RECORD} FROM backups ORDER BY created_at, arn")]

    def get_backup(self, arn: str) -> BackupRecord | None:
        db, _ = self._backup_db()
        row = db.execute(f"SELECT {_RECORD}, meta FROM backups WHERE arn=?", (arn,)).fetchone()
        return None if row is None else _record(row[:-1], bytes(row[-1]))

    def delete_backup(self, arn: str) -> bool:
        with self._backup_transaction("DELETE FROM backup_items WHERE arn=?", (arn,)) as (db, _):
            db.execute("DELETE FROM backup_progress WHERE arn=?", (arn,))
            dropped = db.execute("DELETE FROM backups WHERE arn=?", (arn,)).rowcount > 0
        self._release_hold(arn)
        return dropped

    # --- restores ---------------------------------------------------------------------------------------------
    def begin_restore(self, meta: TableMeta, source: RestoreSource) -> TableMeta:
        with self._transaction(ddl=True) as db:
            self._insert_table(db, meta)
            db.execute("INSERT INTO restore_progress (tid, backup_arn, src, at) VALUES (?, ?, ?, ?)",
                       (meta.table_id, source.backup_arn, None if source.table is None else source.table.table_id,
                        source.at))
        return meta

    def continue_restore(self, meta: TableMeta, limit: int) -> RestoreProgress:
        """A chunk in one transaction: the next items of the backup, or of the source table as they are now; once
        none is left, for a point-in-time restore each key changed after its time set back to its image then."""
        with self._transaction() as db:
            found = db.execute("SELECT backup_arn, src, at, h, pk, sk FROM restore_progress WHERE tid=?",
                               (meta.table_id,)).fetchone()
            if found is None:
                return "done"
            backup_arn, src, at, progress = found[0], found[1], float(found[2]), found[3:]
            if not db.execute("SELECT 1 FROM tables WHERE tid=?", (meta.table_id,)).fetchone():
                db.execute("DELETE FROM restore_progress WHERE tid=?", (meta.table_id,))
                return "lost"  # (the table was deleted meanwhile)
            if backup_arn is not None:
                end = self._restore_from_backup(db, meta.table_id, str(backup_arn), progress, limit)
            else:
                end = _chunk_end(db, "items", int(src), progress, limit)
                clause, bounds = _span(progress, end)
                db.execute(f"INSERT OR REPLACE INTO items (tid, h, pk, sk, size, data) SELECT ?, h, pk, sk, size, "
                           f"data FROM items WHERE tid=?{clause}", (meta.table_id, int(src), *bounds))
            if end is not None:
                db.execute("UPDATE restore_progress SET h=?, pk=?, sk=? WHERE tid=?", (*end, meta.table_id))
                return "more"
            db.execute("DELETE FROM restore_progress WHERE tid=?", (meta.table_id,))
            recovery = db.execute("SELECT enabled_at FROM recovery WHERE tid=?", (src,)).fetchone()
            ending = restore_ending(backup_arn is not None, None if recovery is None else float(recovery[0]), at)
            if ending is not None:
                return ending
            names = {"src": int(src), "since": self._first_after(at), "tid": meta.table_id}
            db.execute(_UNDO_INSERTS, names)
            db.execute(_UNDO_CHANGES, names)
            return "done"

    def _restore_from_backup(self, db: sqlite3.Connection, tid: int, arn: str, progress: tuple[object, ...],
                             limit: int) -> tuple[object, ...] | None:
        """Inside the store's transaction: the next `limit` items of the backup copied into the table `tid`; the
        last one's key, None once none is left."""
        backups, _ = self._backup_db()
        clause, bounds = _span(progress, None)
        rows = backups.execute(f"SELECT h, pk, sk, size, data FROM backup_items WHERE arn=?{clause} "
                               "ORDER BY h, pk, sk LIMIT ?", (arn, *bounds, limit)).fetchall()
        db.executemany("INSERT OR REPLACE INTO items (tid, h, pk, sk, size, data) VALUES (?, ?, ?, ?, ?, ?)",
                       [(tid, *row) for row in rows])
        return tuple(rows[-1][:3]) if len(rows) == limit else None

    # --- point-in-time recovery -------------------------------------------------------------------------------
    def recovery_window(self, meta: TableMeta) -> RecoveryWindow | None:
        row = self._read().execute("SELECT enabled_at, days FROM recovery WHERE tid=?", (meta.table_id,)).fetchone()
        return None if row is None else RecoveryWindow(float(row[0]), int(row[1]))

    def set_recovery(self, meta: TableMeta, days: int | None, now: float) -> RecoveryWindow | None:
        # A catalog change: every process's write path looks again which tables log (`_recovering`).
        with self._transaction(ddl=True) as db:
            tid = meta.table_id
            current = db.execute("SELECT enabled_at FROM recovery WHERE tid=?", (tid,)).fetchone()
            self._bump_catalog()
            if days is None:
                self._drop_recovery(tid)
                return None
            enabled_at = now if current is None else float(current[0])
            db.execute("INSERT OR REPLACE INTO recovery (tid, enabled_at, days) VALUES (?, ?, ?)",
                       (tid, enabled_at, days))
            return RecoveryWindow(enabled_at, days)

    def _drop_recovery(self, tid: int) -> None:
        """Inside a DDL transaction: the table's recovery off, its log gone (before a DeleteTable deletes its rows,
        which must not be logged)."""
        db = self._db
        db.execute("DELETE FROM recovery WHERE tid=?", (tid,))
        db.execute("DELETE FROM recovery_log WHERE tid=?", (tid,))

    def _recovering(self) -> frozenset[int]:
        """Under the writer lock: the ids of the tables whose recovery is on, as committed (read again whenever the
        catalog counter moved: `set_recovery` and DeleteTable are catalog changes)."""
        version = self._signal.current()
        if version != self._recovery_version:
            self._recovery_tids = frozenset(int(tid) for (tid,) in self._db.execute("SELECT tid FROM recovery"))
            self._recovery_version = version
        return self._recovery_tids

    def _log_recovery(self, records: Sequence[tuple[Change, tuple[int, bytes | None] | None]]) -> None:
        """Under the writer lock, before the rows of their changes (of tables with recovery on) are written: the
        records of `records`, in order, each of a change and the item before it (its size and stored JSON, None if
        it did not exist), or None where the change did not read it: then its record reads the row as it stands
        (`_LOG_UNREAD`). One time for them all (they commit together): see `_log_rows`."""
        rows = RecoveryRows(clock.now())
        for change, before in records:
            key = change.key
            new = change.new_data
            if before is None:
                rows.unread(change.table.table_id, key.h, bytearray(key.pk), bytearray(key.sk),
                            None if new is None else bytearray(new))
            else:
                rows.read(change.table.table_id, key.h, bytearray(key.pk), bytearray(key.sk), *before)
        self._log_rows(rows)

    def _log_rows(self, rows: RecoveryRows) -> None:
        """Under the writer lock, before the rows of their changes are written: the records of `rows`, in order; one
        statement per run of either kind (per _UNREAD_ROWS records: `_log_unread`, `_LOGS`)."""
        db = self._db
        now = rows.now
        for unread, run in rows.runs:
            if unread:
                self._log_unread(now, run)
            elif len(run) == 1:
                db.execute(_LOG, run[0])
            else:
                for start in range(0, len(run), _UNREAD_ROWS):
                    chunk = run[start:start + _UNREAD_ROWS]
                    db.execute(_LOGS[len(chunk) - 1], tuple(chain.from_iterable(chunk)))

    def _log_unread(self, now: float, records: Sequence[tuple[object, ...]]) -> None:
        """Under the writer lock, before their rows are written: the records, at time `now`, of blind changes to
        distinct keys, each given as its table, key and new bytes (None for a deletion), each reading its row as it
        stands (`_LOG_UNREAD`), in order; one statement per _UNREAD_ROWS of them."""
        db = self._db
        if len(records) == 1:
            tid, h, pk, sk, new = records[0]
            db.execute(_LOG_UNREAD, (tid, now, h, pk, sk, new))
            return
        for start in range(0, len(records), _UNREAD_ROWS):
            chunk = records[start:start + _UNREAD_ROWS]
            db.execute(_LOG_UNREADS[len(chunk) - 1], (*chain.from_iterable(chunk), now))

    def _first_after(self, at: float) -> int:
        """The sequence number of the log's first record later than `at`, found by bisection: records are appended
        under the writer lock in time order, so their times grow with their sequence numbers. (The log has no index
        on time: each one a write adds costs it, see docs/ARCHITECTURE.md.)"""
        db = self._db
        low, high = db.execute("SELECT min(seq), max(seq) FROM recovery_log").fetchone()
        if low is None:
            return 1
        high += 1
        while low < high:
            middle = (low + high) // 2
            seq, created_at = db.execute("SELECT seq, created_at FROM recovery_log WHERE seq >= ? ORDER BY seq "
                                         "LIMIT 1", (middle,)).fetchone()
            if created_at > at:
                high = middle  # (no record between middle and seq)
            else:
                low = seq + 1
        return int(low)

    def trim_recovery(self, now: float) -> None:
        with self._transaction() as db:
            for tid, days in db.execute("SELECT tid, days FROM recovery").fetchall():
                db.execute("DELETE FROM recovery_log WHERE seq < ? AND tid=?", (self._first_after(now - days * _DAY),
                                                                               tid))

    def recovery_changes(self, meta: TableMeta, since: float, until: float) -> list[tuple[StorageKey, float]]:
        db = self._read()
        rows = db.execute("SELECT h, pk, sk, max(created_at) FROM recovery_log WHERE seq >= ? AND tid=? "
                          "AND created_at <= ? GROUP BY h, pk, sk ORDER BY h, pk, sk",
                          (self._first_after(since), meta.table_id, until)).fetchall()
        return [(StorageKey(int(h), bytes(pk), bytes(sk)), float(at)) for h, pk, sk, at in rows]

    def _close_backups(self) -> None:
        if self._backups is not None and self._backups is not self._db:
            self._backups.close()
        self._backups = None
