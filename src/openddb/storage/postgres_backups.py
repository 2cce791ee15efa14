"""Backups and point-in-time recovery on PostgreSQL: the same design as on SQLite (see sqlite_backups.py).

A backup's instant is an MVCC snapshot that a connection of its own exports and holds open while the backup is
made; each chunk is a transaction that imports it and copies the next items (`INSERT ... SELECT`): writers are
never blocked. A backup whose holder died (kill -9) can no longer be finished as of its instant: it is deleted,
never made AVAILABLE. A restore copies in chunks as on SQLite, its progress in `openddb_restore_progress`.
The recovery log is appended by row triggers on `openddb_items`, three per table with recovery on, each guarded
by the table's id, so whichever node writes, the change and its record commit together. A write's uncommitted
placeholder row (size -1, see postgres.py) is no item: its insertion is not logged, and a placeholder made an
item is logged as an insertion. The records' time is the database server's clock (`clock_timestamp()`), one clock
for every node, plus the offset by which the writing server's clock was moved (`--dev`'s test control; 0
otherwise, and then nothing is sent: `recovery_clock`). The tables are made on first use (not by a schema
migration), under an advisory lock.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg

from openddb import clock
from openddb.model.schema import TableMeta
from openddb.storage.base import (
    BackupProgress,
    BackupRecord,
    RecoveryWindow,
    RestoreProgress,
    RestoreSource,
    StorageKey,
    restore_ending,
)

# The log's time: the database's clock, moved as the server's clock is (--dev's test control moves it; the writing
# transaction says by how much: `recovery_clock`), so the log and the server's window agree.
_NOW = ("(extract(epoch from clock_timestamp())::double precision "
        "+ coalesce(nullif(current_setting('openddb.clock_offset', true), '')::double precision, 0))")
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
    "CREATE TABLE IF NOT EXISTS openddb_restore_progress (tid BIGINT PRIMARY KEY, backup_arn TEXT, src BIGINT, "
    "at DOUBLE PRECISION NOT NULL, h BIGINT, pk BYTEA, sk BYTEA)",
    # The log's time (`_NOW`) is written out in the function's body: called as a function of its own (LANGUAGE
    # sql), it was not inlined there, and each record paid a SQL function call: about half the trigger's cost.
    f"""CREATE OR REPLACE FUNCTION openddb_recovery_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.size >= 0 THEN
            INSERT INTO openddb_recovery_log (tid, created_at, h, pk, sk, pkx, old_size, old)
            VALUES (NEW.tid, {_NOW}, NEW.h, NEW.pk, NEW.sk, NEW.pkx, NULL, NULL);
        END IF;
    ELSIF TG_OP = 'UPDATE' THEN
        IF OLD.size <> NEW.size OR OLD.data IS DISTINCT FROM NEW.data THEN
            INSERT INTO openddb_recovery_log (tid, created_at, h, pk, sk, pkx, old_size, old)
            VALUES (NEW.tid, {_NOW}, OLD.h, OLD.pk, OLD.sk, OLD.pkx,
                    CASE WHEN OLD.size >= 0 THEN OLD.size END, CASE WHEN OLD.size >= 0 THEN OLD.data END);
        END IF;
    ELSIF OLD.size >= 0 THEN
        INSERT INTO openddb_recovery_log (tid, created_at, h, pk, sk, pkx, old_size, old)
        VALUES (OLD.tid, {_NOW}, OLD.h, OLD.pk, OLD.sk, OLD.pkx, OLD.size, OLD.data);
    END IF;
    RETURN NULL;
END $$""",
]
_TRIGGERS = (("insert", "INSERT", "NEW"), ("update", "UPDATE", "NEW"), ("delete", "DELETE", "OLD"))
_RECORD = "arn, name, table_name, table_uuid, created_at, status, backup_type, size, item_count"
# A restore's chunk: the next `limit` items (after the key h, pk, sk; from the first while h is NULL) copied into
# the table; answers the last one's key and how many there were.
_AFTER = "(%(h)s::BIGINT IS NULL OR (h, pk, sk) > (%(h)s, %(pk)s, %(sk)s))"
_COPIED = ("ON CONFLICT (tid, h, pk, sk) DO UPDATE SET size=EXCLUDED.size, data=EXCLUDED.data, pkx=EXCLUDED.pkx "
           "RETURNING 1) SELECT h, pk, sk, (SELECT count(*) FROM chunk) FROM chunk ORDER BY h DESC, pk DESC, sk DESC "
           "LIMIT 1")
_RESTORE_FROM_BACKUP = (
    f"WITH chunk AS (SELECT h, pk, sk, pkx, size, data FROM openddb_backup_items WHERE arn=%(arn)s AND {_AFTER} "
    "ORDER BY h, pk, sk LIMIT %(limit)s), copied AS (INSERT INTO openddb_items (tid, h, pk, sk, size, data, pkx) "
    "SELECT %(tid)s, h, pk, sk, size, data, pkx FROM chunk " + _COPIED)
_RESTORE_FROM_TABLE = (
    f"WITH chunk AS (SELECT h, pk, sk, pkx, size, data FROM openddb_items WHERE tid=%(src)s AND size >= 0 AND {_AFTER} "
    "ORDER BY h, pk, sk LIMIT %(limit)s), copied AS (INSERT INTO openddb_items (tid, h, pk, sk, size, data, pkx) "
    "SELECT %(tid)s, h, pk, sk, size, data, pkx FROM chunk " + _COPIED)
# Once every item is copied (as it was then), the table set back to the restore's time: for each key changed after
# it, the old image of its first change after it (none: a key inserted after it), in one statement.
_UNDO = (
    "WITH first AS (SELECT DISTINCT ON (h, pk, sk) h, pk, sk, pkx, old_size, old FROM openddb_recovery_log "
    "WHERE tid=%(src)s AND created_at > %(at)s ORDER BY h, pk, sk, seq), "
    "gone AS (DELETE FROM openddb_items i USING first f WHERE i.tid=%(tid)s AND i.h=f.h AND i.pk=f.pk AND i.sk=f.sk "
    "AND f.old IS NULL RETURNING 1) "
    "INSERT INTO openddb_items (tid, h, pk, sk, size, data, pkx) SELECT %(tid)s, h, pk, sk, old_size, old, pkx "
    "FROM first WHERE old IS NOT NULL ON CONFLICT (tid, h, pk, sk) DO UPDATE SET size=EXCLUDED.size, "
    "data=EXCLUDED.data, pkx=EXCLUDED.pkx")
_DAY = 86400.0


def recovery_clock() -> str | None:
    """The statement that tells a write's transaction how far the server's clock was moved from the real one
    (`SET LOCAL`: for that transaction alone), so its recovery log records are stamped as the server sees time;
    None when it was not moved (the usual case: nothing to send)."""
    offset = clock.offset()
    return f"SET LOCAL openddb.clock_offset = '{offset!r}'" if offset else None


def _record(row: Any, meta: bytes = b"") -> BackupRecord:
    arn, name, table_name, uuid, created_at, status, backup_type, size, count = row
    return BackupRecord(arn, name, table_name, uuid, float(created_at), status, backup_type, int(size), int(count),
                        meta)


@dataclass(slots=True)
class _Snapshot:
    """A backup being made: the connection holding its instant's snapshot open, and how far its copy got."""

    holder: psycopg.Connection[Any]
    snapshot: str
    tid: int
    after: tuple[int, bytes, bytes] | None = None


class PostgresBackups:
    """Backup and recovery storage; mixed into PostgresEngine, whose connection and transactions it uses."""

    _backup_schema_ready = False
    url: str
    _backup_snapshots: dict[str, _Snapshot] | None = None

    def _held(self) -> dict[str, _Snapshot]:
        """The backups this process is making, by ARN (lost with the process: see `continue_backup`)."""
        if self._backup_snapshots is None:
            self._backup_snapshots = {}
        return self._backup_snapshots

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
    def begin_backup(self, record: BackupRecord, table: TableMeta) -> BackupRecord | None:
        """The backup's instant is a snapshot exported by a connection of its own that stays in its REPEATABLE
        READ transaction until the copy is done (`continue_backup` imports it); the record stored CREATING."""
        self._backup_schema()
        holder = psycopg.connect(self.url, autocommit=True)
        try:
            holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            exported = holder.execute("SELECT pg_export_snapshot()").fetchone()
            assert exported is not None
            snapshot = str(exported[0])
            found = holder.execute("SELECT tid, meta FROM openddb_tables WHERE name=%s",
                                   (table.stored_name,)).fetchone()
            if found is None or TableMeta.from_json(bytes(found[1])).uuid != table.uuid:
                holder.close()
                return None
            record.status, record.meta = "CREATING", bytes(found[1])
            with self._transaction() as cur:
                cur.execute(f"INSERT INTO openddb_backups ({_RECORD}, meta) VALUES (%s, %s, %s, %s, %s, 'CREATING', "
                            "%s, 0, 0, %s)", (record.arn, record.name, record.table_name, record.table_uuid,
                                              record.created_at, record.backup_type, record.meta))
        except BaseException:
            holder.close()
            raise
        self._held()[record.arn] = _Snapshot(holder, snapshot, int(found[0]))
        return record

    def continue_backup(self, arn: str, limit: int) -> BackupProgress:
        """A chunk: the next items as of the backup's instant, copied in a transaction that imports its snapshot.
        A backup whose snapshot this process does not hold (its maker died) is lost."""
        held = self._held().get(arn)
        if held is None or held.holder.closed:
            return "lost"
        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ") as cur:
            cur.execute(f"SET TRANSACTION SNAPSHOT '{held.snapshot}'")
            after = "" if held.after is None else " AND (h, pk, sk) > (%(h)s, %(pk)s, %(sk)s)"
            h, pk, sk = held.after or (0, b"", b"")
            found = cur.execute(
                "WITH chunk AS (SELECT h, pk, sk, pkx, size, data FROM openddb_items WHERE tid=%(tid)s AND size >= 0"
                f"{after} ORDER BY h, pk, sk LIMIT %(limit)s), copied AS (INSERT INTO openddb_backup_items (arn, h, "
                "pk, sk, pkx, size, data) SELECT %(arn)s, h, pk, sk, pkx, size, data FROM chunk ON CONFLICT DO NOTHING "
                "RETURNING 1) "
                "SELECT h, pk, sk, (SELECT count(*) FROM chunk) FROM chunk ORDER BY h DESC, pk DESC, sk DESC LIMIT 1",
                {"tid": held.tid, "h": h, "pk": pk, "sk": sk, "limit": limit, "arn": arn}).fetchone()
            if found is not None and int(found[3]) == limit:
                held.after = (int(found[0]), bytes(found[1]), bytes(found[2]))
                return "more"
        with self._transaction() as cur:  # (not in the snapshot, which predates the record)
            count, size = cur.execute("SELECT count(*), coalesce(sum(size), 0) FROM openddb_backup_items "
                                      "WHERE arn=%s", (arn,)).fetchone() or (0, 0)
            cur.execute("UPDATE openddb_backups SET status='AVAILABLE', size=%s, item_count=%s WHERE arn=%s",
                        (int(size), int(count), arn))
        self._let_go(arn)
        return "done"

    def _let_go(self, arn: str) -> None:
        held = self._held().pop(arn, None)
        if held is not None:
            held.holder.close()

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
        self._let_go(arn)
        with self._transaction() as cur:
            cur.execute("DELETE FROM openddb_backup_items WHERE arn=%s", (arn,))
            return cur.execute("DELETE FROM openddb_backups WHERE arn=%s", (arn,)).rowcount > 0

    # --- restores ---------------------------------------------------------------------------------------------
    def begin_restore(self, meta: TableMeta, source: RestoreSource) -> TableMeta:
        self._backup_schema()
        with self._ddl_transaction() as cur:
            self._insert_table(cur, meta)
            cur.execute("INSERT INTO openddb_restore_progress (tid, backup_arn, src, at) VALUES (%s, %s, %s, %s)",
                        (meta.table_id, source.backup_arn, None if source.table is None else source.table.table_id,
                         source.at))
        return meta

    def continue_restore(self, meta: TableMeta, limit: int) -> RestoreProgress:
        """A chunk in one transaction (see SQLiteBackups.continue_restore)."""
        self._backup_schema()
        with self._transaction() as cur:
            found = cur.execute("SELECT backup_arn, src, at, h, pk, sk FROM openddb_restore_progress WHERE tid=%s "
                                "FOR UPDATE", (meta.table_id,)).fetchone()
            if found is None:
                return "done"
            backup_arn, src, at = found[0], found[1], float(found[2])
            if not cur.execute("SELECT 1 FROM openddb_tables WHERE tid=%s", (meta.table_id,)).fetchone():
                cur.execute("DELETE FROM openddb_restore_progress WHERE tid=%s", (meta.table_id,))
                return "lost"  # (the table was deleted meanwhile)
            names = {"tid": meta.table_id, "src": src, "arn": backup_arn, "limit": limit, "h": found[3],
                     "pk": found[4], "sk": found[5], "at": at}
            end = cur.execute(_RESTORE_FROM_BACKUP if backup_arn is not None else _RESTORE_FROM_TABLE, names).fetchone()
            if end is not None and int(end[3]) == limit:
                cur.execute("UPDATE openddb_restore_progress SET h=%s, pk=%s, sk=%s WHERE tid=%s",
                            (end[0], end[1], end[2], meta.table_id))
                return "more"
            cur.execute("DELETE FROM openddb_restore_progress WHERE tid=%s", (meta.table_id,))
            recovery = cur.execute("SELECT enabled_at FROM openddb_recovery WHERE tid=%s", (src,)).fetchone()
            ending = restore_ending(backup_arn is not None, None if recovery is None else float(recovery[0]), at)
            if ending is not None:
                return ending
            cur.execute(_UNDO, names)
        return "done"

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
