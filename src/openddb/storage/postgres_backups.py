"""Backups and point-in-time recovery on PostgreSQL: the same design as on SQLite (see sqlite_backups.py).

A backup is one transaction that inserts its record and copies the table's description and items with one
`INSERT ... SELECT` (one MVCC snapshot: writers are never blocked, and a backup cut short is rolled back whole).
The recovery log is appended by row triggers on `openddb_items`, three per table with recovery on, each guarded
by the table's id, so whichever node writes, the change and its record commit together. A write's uncommitted
placeholder row (size -1, see postgres.py) is no item: its insertion is not logged, and a placeholder made an
item is logged as an insertion. The records' time is the database server's clock (`clock_timestamp()`), one clock
for every node. The tables are made on first use (not by a schema migration), under an advisory lock.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import psycopg

from openddb.model.schema import TableMeta
from openddb.storage.base import BackupRecord, RecoveryWindow, RestoreSource, StorageKey

_SCHEMA_LOCK = 0x0DDB_BAC0  # the advisory lock that serialises nodes making the tables
_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS openddb_backups (arn TEXT PRIMARY KEY, name TEXT NOT NULL, table_name TEXT NOT NULL, "
    "table_uuid TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, status TEXT NOT NULL, backup_type TEXT NOT NULL, "
    "size BIGINT NOT NULL, item_count BIGINT NOT NULL, meta BYTEA NOT NULL)",
    "CREATE TABLE IF NOT EXISTS openddb_backup_items (arn TEXT NOT NULL, h BIGINT NOT NULL, pk BYTEA NOT NULL, "
    "sk BYTEA NOT NULL, pkx BYTEA, size INTEGER NOT NULL, data BYTEA NOT NULL, PRIMARY KEY (arn, h, pk, sk))",
    "CREATE TABLE IF NOT EXISTS openddb_recovery (tid BIGINT PRIMARY KEY, enabled_at DOUBLE PRECISION NOT NULL, "
    "days INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS openddb_recovery_log (seq BIGSERIAL PRIMARY KEY, tid BIGINT NOT NULL, "
    "created_at DOUBLE PRECISION NOT NULL, h BIGINT NOT NULL, pk BYTEA NOT NULL, sk BYTEA NOT NULL, pkx BYTEA, "
    "old_size INTEGER, old BYTEA)",
    "CREATE INDEX IF NOT EXISTS openddb_recovery_log_by_time ON openddb_recovery_log (tid, created_at)",
    """CREATE OR REPLACE FUNCTION openddb_recovery_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.size >= 0 THEN
            INSERT INTO openddb_recovery_log (tid, created_at, h, pk, sk, pkx, old_size, old)
            VALUES (NEW.tid, extract(epoch from clock_timestamp()), NEW.h, NEW.pk, NEW.sk, NEW.pkx, NULL, NULL);
        END IF;
    ELSIF TG_OP = 'UPDATE' THEN
        IF OLD.size <> NEW.size OR OLD.data IS DISTINCT FROM NEW.data THEN
            INSERT INTO openddb_recovery_log (tid, created_at, h, pk, sk, pkx, old_size, old)
            VALUES (NEW.tid, extract(epoch from clock_timestamp()), OLD.h, OLD.pk, OLD.sk, OLD.pkx,
                    CASE WHEN OLD.size >= 0 THEN OLD.size END, CASE WHEN OLD.size >= 0 THEN OLD.data END);
        END IF;
    ELSIF OLD.size >= 0 THEN
        INSERT INTO openddb_recovery_log (tid, created_at, h, pk, sk, pkx, old_size, old)
        VALUES (OLD.tid, extract(epoch from clock_timestamp()), OLD.h, OLD.pk, OLD.sk, OLD.pkx, OLD.size, OLD.data);
    END IF;
    RETURN NULL;
END $$""",
]
_TRIGGERS = (("insert", "INSERT", "NEW"), ("update", "UPDATE", "NEW"), ("delete", "DELETE", "OLD"))
_RECORD = "arn, name, table_name, table_uuid, created_at, status, backup_type, size, item_count"
# The table at a time, in one statement (so from one snapshot, in READ COMMITTED too): the rows no change after the
# time touched, as they are, and for each key changed after it, the old image of its first change after it (none
# for a key inserted after it).
_AS_IT_WAS = (
    "WITH first AS (SELECT DISTINCT ON (h, pk, sk) h, pk, sk, pkx, old_size, old FROM openddb_recovery_log "
    "WHERE tid=%(src)s AND created_at > %(at)s ORDER BY h, pk, sk, seq), "
    "kept AS (INSERT INTO openddb_items (tid, h, pk, sk, size, data, pkx) "
    "SELECT %(tid)s, i.h, i.pk, i.sk, i.size, i.data, i.pkx FROM openddb_items i WHERE i.tid=%(src)s AND i.size >= 0 "
    "AND NOT EXISTS (SELECT 1 FROM first f WHERE f.h=i.h AND f.pk=i.pk AND f.sk=i.sk) RETURNING 1), "
    "undone AS (INSERT INTO openddb_items (tid, h, pk, sk, size, data, pkx) "
    "SELECT %(tid)s, h, pk, sk, old_size, old, pkx FROM first WHERE old IS NOT NULL RETURNING 1) "
    "SELECT (SELECT count(*) FROM kept) + (SELECT count(*) FROM undone)")
_DAY = 86400.0


def _record(row: Any, meta: bytes = b"") -> BackupRecord:
    arn, name, table_name, uuid, created_at, status, backup_type, size, count = row
    return BackupRecord(arn, name, table_name, uuid, float(created_at), status, backup_type, int(size), int(count),
                        meta)


class PostgresBackups:
    """Backup and recovery storage; mixed into PostgresEngine, whose connection and transactions it uses."""

    _backup_schema_ready = False

    if TYPE_CHECKING:
        def _transaction(self, begin: str = "BEGIN") -> AbstractContextManager[psycopg.Cursor[Any]]: ...

        def _ddl_transaction(self) -> AbstractContextManager[psycopg.Cursor[Any]]: ...

        def _cursor(self) -> psycopg.Cursor[Any]: ...

        def _command(self, command: str) -> str: ...

        def _insert_table(self, cur: psycopg.Cursor[Any], meta: TableMeta) -> None: ...

    def _backup_schema(self) -> None:
        if self._backup_schema_ready:
            return
        with self._transaction() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for statement in _SCHEMA:
                cur.execute(statement)
        self._backup_schema_ready = True

    # --- on-demand backups ------------------------------------------------------------------------------------
    def create_backup(self, record: BackupRecord, table: TableMeta) -> BackupRecord | None:
        self._backup_schema()
        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ") as cur:
            found = cur.execute("SELECT tid, meta FROM openddb_tables WHERE name=%s", (table.stored_name,)).fetchone()
            if found is None or TableMeta.from_json(bytes(found[1])).uuid != table.uuid:
                return None
            cur.execute("INSERT INTO openddb_backup_items (arn, h, pk, sk, pkx, size, data) "
                        "SELECT %s, h, pk, sk, pkx, size, data FROM openddb_items WHERE tid=%s", (record.arn, found[0]))
            count, size = cur.execute("SELECT count(*), coalesce(sum(size), 0) FROM openddb_backup_items "
                                      "WHERE arn=%s", (record.arn,)).fetchone() or (0, 0)
            record.item_count, record.size, record.meta, record.status = int(count), int(size), bytes(found[1]), \
                "AVAILABLE"
            cur.execute(f"INSERT INTO openddb_backups ({_RECORD}, meta) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, "
                        "%s)", (record.arn, record.name, record.table_name, record.table_uuid, record.created_at,
                                record.status, record.backup_type, record.size, record.item_count, record.meta))
        return record

    def list_backups(self) -> list[BackupRecord]:
        self._backup_schema()
        rows = self._cursor().execute(f"SELECT {_RECORD} FROM openddb_backups ORDER BY created_at, arn").fetchall()
        return [_record(row) for row in rows]

    def get_backup(self, arn: str) -> BackupRecord | None:
        self._backup_schema()
        row = self._cursor().execute(f"SELECT {_RECORD}, meta FROM openddb_backups WHERE arn=%s", (arn,)).fetchone()
        return None if row is None else _record(row[:-1], bytes(row[-1]))

    def delete_backup(self, arn: str) -> bool:
        self._backup_schema()
        with self._transaction() as cur:
            cur.execute("DELETE FROM openddb_backup_items WHERE arn=%s", (arn,))
            return cur.execute("DELETE FROM openddb_backups WHERE arn=%s", (arn,)).rowcount > 0

    # --- restores ---------------------------------------------------------------------------------------------
    def restore_table(self, meta: TableMeta, source: RestoreSource) -> TableMeta:
        self._backup_schema()
        with self._ddl_transaction() as cur:
            self._insert_table(cur, meta)
            if source.backup_arn is not None:
                cur.execute("INSERT INTO openddb_items (tid, h, pk, sk, size, data, pkx) "
                            "SELECT %s, h, pk, sk, size, data, pkx FROM openddb_backup_items WHERE arn=%s",
                            (meta.table_id, source.backup_arn))
            elif source.table is not None:
                cur.execute(_AS_IT_WAS, {"src": source.table.table_id, "at": source.at, "tid": meta.table_id})
        return meta

    # --- point-in-time recovery -------------------------------------------------------------------------------
    def recovery_window(self, meta: TableMeta) -> RecoveryWindow | None:
        self._backup_schema()
        row = self._cursor().execute("SELECT enabled_at, days FROM openddb_recovery WHERE tid=%s",
                                     (meta.table_id,)).fetchone()
        return None if row is None else RecoveryWindow(float(row[0]), int(row[1]))

    def recovery_changes(self, meta: TableMeta, since: float, until: float) -> list[tuple[StorageKey, float]]:
        self._backup_schema()
        rows = self._cursor().execute(
            "SELECT h, pk, sk, max(created_at) FROM openddb_recovery_log WHERE tid=%s AND created_at > %s "
            "AND created_at <= %s GROUP BY h, pk, sk ORDER BY h, pk, sk", (meta.table_id, since, until)).fetchall()
        return [(StorageKey(int(h), bytes(pk), bytes(sk)), float(at)) for h, pk, sk, at in rows]

    def set_recovery(self, meta: TableMeta, days: int | None, now: float) -> RecoveryWindow | None:
        self._backup_schema()
        with self._ddl_transaction() as cur:
            tid = int(meta.table_id)
            if days is None:
                self._drop_recovery(cur, tid)
                return None
            current = cur.execute("SELECT enabled_at FROM openddb_recovery WHERE tid=%s", (tid,)).fetchone()
            enabled_at = now if current is None else float(current[0])
            cur.execute("INSERT INTO openddb_recovery (tid, enabled_at, days) VALUES (%s, %s, %s) ON CONFLICT (tid) "
                        "DO UPDATE SET days = EXCLUDED.days", (tid, enabled_at, days))
            if current is None:
                for kind, event, row in _TRIGGERS:
                    cur.execute(f"CREATE TRIGGER openddb_recovery_{kind}_{tid} AFTER {event} ON openddb_items "
                                f"FOR EACH ROW WHEN ({row}.tid = {tid}) EXECUTE FUNCTION openddb_recovery_record()")
            return RecoveryWindow(enabled_at, days)

    def _drop_recovery(self, cur: psycopg.Cursor[Any], tid: int) -> None:
        """Inside a table change's transaction: recovery off, the triggers and log gone (before a DeleteTable
        deletes the table's rows, which must not be logged)."""
        if not self._backup_schema_ready:
            self._backup_schema_ready = bool(cur.execute(
                "SELECT 1 FROM pg_tables WHERE tablename='openddb_recovery'").fetchone())
            if not self._backup_schema_ready:
                return  # (no table ever had recovery on)
        for kind, _, _ in _TRIGGERS:
            # (through the pipeline: psycopg, seeing a DROP tag, would deallocate the pipeline's prepared statements)
            self._command(f"DROP TRIGGER IF EXISTS openddb_recovery_{kind}_{int(tid)} ON openddb_items")
        cur.execute("DELETE FROM openddb_recovery WHERE tid=%s", (tid,))
        cur.execute("DELETE FROM openddb_recovery_log WHERE tid=%s", (tid,))

    def trim_recovery(self, now: float) -> None:
        self._backup_schema()
        with self._transaction() as cur:
            cur.execute("DELETE FROM openddb_recovery_log l USING openddb_recovery r WHERE l.tid = r.tid "
                        "AND l.created_at < %s - r.days * %s", (now, _DAY))
