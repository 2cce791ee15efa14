"""Backups and point-in-time recovery on SQLite.

On-demand backups live in a file of their own beside the store (`openddb-backups.sqlite3`, WAL), written by a
connection of their own that attaches the store read-only as `store`: one transaction inserts the backup's
record and copies the table's description and items from one read snapshot of the store (`INSERT ... SELECT`,
in SQLite's C code). The store's writer lock is never taken, so every worker's writes go on during the copy; the
backup commits whole or not at all (a kill -9 mid-copy leaves no trace of it). A store in memory keeps them in
its own database instead. An encrypted store's backups file is encrypted with the store's key (see sqlite_cipher).

Point-in-time recovery keeps, for each table that has it on, a log of the old image of every row change
(`recovery_log`), appended by triggers on `items` (the stream records are not: see sqlite_streams): in the
statement that writes the row, so a change and its log record commit together, whatever path wrote it (a
client's write, a batch, a transaction, the TTL sweep). Three triggers per such table, each guarded by its id:
other tables' writes pay an integer compare. A restore to time T copies the table's current items and undoes,
for each key changed after T, its first change after T (the row is set back to that change's old image, or
removed if it had none): the table as it stood at T. Records older than the recovery period are trimmed.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from openddb.model.schema import TableMeta
from openddb.storage.base import BackupRecord, RecoveryWindow, RestoreSource, StorageKey
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
"""

RECOVERY_SCHEMA = """
CREATE TABLE IF NOT EXISTS recovery (tid INTEGER PRIMARY KEY, enabled_at REAL NOT NULL, days INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS recovery_log (
    seq INTEGER PRIMARY KEY, tid INTEGER NOT NULL, created_at REAL NOT NULL, h INTEGER NOT NULL, pk BLOB NOT NULL,
    sk BLOB NOT NULL, old_size INTEGER, old BLOB
);
"""

# The old image of each row change of table {tid} (None for a row inserted); a row rewritten with the same bytes
# is no change. The time is the engine's clock, as the stream records'.
RECOVERY_TRIGGERS = """
CREATE TRIGGER IF NOT EXISTS recovery_on_insert_{tid} AFTER INSERT ON items WHEN NEW.tid = {tid} BEGIN
    INSERT INTO recovery_log (tid, created_at, h, pk, sk, old_size, old)
    VALUES ({tid}, openddb_now(), NEW.h, NEW.pk, NEW.sk, NULL, NULL);
END;
CREATE TRIGGER IF NOT EXISTS recovery_on_update_{tid} AFTER UPDATE ON items
WHEN NEW.tid = {tid} AND OLD.data IS NOT NEW.data BEGIN
    INSERT INTO recovery_log (tid, created_at, h, pk, sk, old_size, old)
    VALUES ({tid}, openddb_now(), OLD.h, OLD.pk, OLD.sk, OLD.size, OLD.data);
END;
CREATE TRIGGER IF NOT EXISTS recovery_on_delete_{tid} AFTER DELETE ON items WHEN OLD.tid = {tid} BEGIN
    INSERT INTO recovery_log (tid, created_at, h, pk, sk, old_size, old)
    VALUES ({tid}, openddb_now(), OLD.h, OLD.pk, OLD.sk, OLD.size, OLD.data);
END;
"""
_TRIGGER_KINDS = ("recovery_on_insert", "recovery_on_update", "recovery_on_delete")

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


def _record(row: tuple[object, ...], meta: bytes = b"") -> BackupRecord:
    arn, name, table_name, uuid, created_at, status, backup_type, size, count = row
    return BackupRecord(str(arn), str(name), str(table_name), str(uuid), float(str(created_at)),
                        status, str(backup_type), int(str(size)), int(str(count)), meta)  # type: ignore[arg-type]


class SQLiteBackups:
    """Backup and recovery storage; mixed into SQLiteEngine, whose connection and writer lock it uses."""

    _db: sqlite3.Connection
    _driver: Driver
    location: str
    _backups: sqlite3.Connection | None = None

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
            db.execute("PRAGMA journal_mode = WAL")
            for statement in statements(BACKUP_SCHEMA):
                db.execute(statement)
            self._driver.attach(db, self.location, "store")
            self._backups = db
        return self._backups, "store"

    def create_backup(self, record: BackupRecord, table: TableMeta) -> BackupRecord | None:
        db, store = self._backup_db()
        if store == "main":
            with self._transaction():
                return self._copy_backup(db, store, record, table)
        db.execute("BEGIN")  # (its first statement writes the backups file: no read-to-write upgrade can fail)
        try:
            done = self._copy_backup(db, store, record, table)
            db.execute("COMMIT" if done is not None else "ROLLBACK")
            return done
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    @staticmethod
    def _copy_backup(db: sqlite3.Connection, store: str, record: BackupRecord,
                     table: TableMeta) -> BackupRecord | None:
        """Inside the backup's transaction: its record, then the table's description and items from one read
        snapshot of the store (the first read of `store` in the transaction starts it)."""
        db.execute(f"INSERT INTO backups ({_RECORD}, meta) VALUES (?, ?, ?, ?, ?, 'CREATING', ?, 0, 0, x'')",
                   (record.arn, record.name, record.table_name, record.table_uuid, record.created_at,
                    record.backup_type))
        found = db.execute(f"SELECT tid, meta FROM {store}.tables WHERE name=?", (table.stored_name,)).fetchone()
        if found is None or TableMeta.from_json(found[1]).uuid != table.uuid:
            return None
        db.execute(f"INSERT INTO backup_items (arn, h, pk, sk, size, data) SELECT ?, h, pk, sk, size, data "
                   f"FROM {store}.items WHERE tid=?", (record.arn, found[0]))
        count, size = db.execute("SELECT count(*), coalesce(sum(size), 0) FROM backup_items WHERE arn=?",
                                 (record.arn,)).fetchone()
        record.item_count, record.size, record.meta, record.status = int(count), int(size), bytes(found[1]), \
            "AVAILABLE"
        db.execute("UPDATE backups SET status='AVAILABLE', size=?, item_count=?, meta=? WHERE arn=?",
                   (record.size, record.item_count, record.meta, record.arn))
        return record

    def list_backups(self) -> list[BackupRecord]:
        db, _ = self._backup_db()
        return [_record(row) for row in db.execute(
            f"SELECT {_RECORD} FROM backups WHERE status='AVAILABLE' ORDER BY created_at, arn")]

    def get_backup(self, arn: str) -> BackupRecord | None:
        db, _ = self._backup_db()
        row = db.execute(f"SELECT {_RECORD}, meta FROM backups WHERE arn=? AND status='AVAILABLE'",
                         (arn,)).fetchone()
        return None if row is None else _record(row[:-1], bytes(row[-1]))

    def delete_backup(self, arn: str) -> bool:
        db, store = self._backup_db()
        if store == "main":
            with self._transaction():
                return self._drop_backup(db, arn)
        db.execute("BEGIN IMMEDIATE")
        try:
            dropped = self._drop_backup(db, arn)
            db.execute("COMMIT")
            return dropped
        except BaseException:
            db.execute("ROLLBACK")
            raise

    @staticmethod
    def _drop_backup(db: sqlite3.Connection, arn: str) -> bool:
        db.execute("DELETE FROM backup_items WHERE arn=?", (arn,))
        return db.execute("DELETE FROM backups WHERE arn=?", (arn,)).rowcount > 0

    # --- restores ---------------------------------------------------------------------------------------------
    def restore_table(self, meta: TableMeta, source: RestoreSource) -> TableMeta:
        if source.backup_arn is not None:
            with self._backups_attached() as backups, self._transaction(ddl=True) as db:
                self._insert_table(db, meta)
                db.execute(f"INSERT INTO items (tid, h, pk, sk, size, data) SELECT ?, h, pk, sk, size, data "
                           f"FROM {backups}.backup_items WHERE arn=?", (meta.table_id, source.backup_arn))
            return meta
        with self._transaction(ddl=True) as db:
            self._insert_table(db, meta)
            if source.table is not None:
                src = source.table.table_id
                db.execute("INSERT INTO items (tid, h, pk, sk, size, data) SELECT ?, h, pk, sk, size, data "
                           "FROM items WHERE tid=?", (meta.table_id, src))
                names = {"src": src, "since": self._first_after(source.at), "tid": meta.table_id}
                db.execute(_UNDO_INSERTS, names)
                db.execute(_UNDO_CHANGES, names)
        return meta

    @contextmanager
    def _backups_attached(self) -> Iterator[str]:
        """The backups file attached to the store's connection (its schema name) for one restore, so the copy is
        one `INSERT ... SELECT` in SQLite's C code. ATTACH and DETACH need no transaction open: any group is
        committed and any read snapshot ended first."""
        if self._backup_db()[1] == "main":  # (a store in memory keeps its backups in its own database)
            yield "main"
            return
        self._end_group()
        self.end_reads()
        self._driver.attach(self._db, os.path.join(os.path.dirname(self.location), "openddb-backups.sqlite3"),
                            "backups")
        try:
            yield "backups"
        finally:
            self._db.execute("DETACH DATABASE backups")

    # --- point-in-time recovery -------------------------------------------------------------------------------
    def recovery_window(self, meta: TableMeta) -> RecoveryWindow | None:
        row = self._read().execute("SELECT enabled_at, days FROM recovery WHERE tid=?", (meta.table_id,)).fetchone()
        return None if row is None else RecoveryWindow(float(row[0]), int(row[1]))

    def set_recovery(self, meta: TableMeta, days: int | None, now: float) -> RecoveryWindow | None:
        with self._transaction() as db:
            tid = meta.table_id
            current = db.execute("SELECT enabled_at FROM recovery WHERE tid=?", (tid,)).fetchone()
            if days is None:
                self._drop_recovery(tid)
                return None
            enabled_at = now if current is None else float(current[0])
            db.execute("INSERT OR REPLACE INTO recovery (tid, enabled_at, days) VALUES (?, ?, ?)",
                       (tid, enabled_at, days))
            for statement in statements(RECOVERY_TRIGGERS.format(tid=int(tid))):
                db.execute(statement)
            return RecoveryWindow(enabled_at, days)

    def _drop_recovery(self, tid: int) -> None:
        """Inside a write transaction: the table's recovery off, its triggers and log gone (before a DeleteTable
        deletes its rows, which must not be logged)."""
        db = self._db
        for kind in _TRIGGER_KINDS:
            db.execute(f"DROP TRIGGER IF EXISTS {kind}_{int(tid)}")
        db.execute("DELETE FROM recovery WHERE tid=?", (tid,))
        db.execute("DELETE FROM recovery_log WHERE tid=?", (tid,))

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
