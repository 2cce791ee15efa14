"""On-demand backups and restores, run in the background after CreateBackup and the restores have answered: chunks
on the server's loop (`background_runs`, as exports, imports and index backfills), each chunk one short transaction,
so requests (on any table) are served between them while a large table is copied. One process drives each run at
a time (the holder of its lease, renewed every chunk).

A backup is CREATING until its last chunk stores it AVAILABLE with every item as of its instant (the engine keeps
that instant: storage/sqlite_backups.py, storage/postgres_backups.py). A run a crash or kill -9 cut short is taken
up by a background duty (`resume_backups`) once its lease has expired: it goes on where it was (SQLite), or, if the
snapshot it copied from died with its process (PostgreSQL), the backup is deleted: never listed AVAILABLE unless
whole (BackupStatus has no FAILED member in the API Reference).

A restored table is CREATING, `restoring`, while its items are copied (the engine records how far each chunk got, so
a restart goes on from there: `resume_restores`); then its indexes' backfill starts, and `finish_restores`
(backups_restore.py) makes it ACTIVE once they are built. A restore whose source can no longer give its items (the
source table's recovery turned off or the table deleted meanwhile) removes the table."""

from __future__ import annotations

import copy
import logging
import time

from openddb import clock
from openddb.api import backups_records as records
from openddb.api.background_runs import Runs
from openddb.api.backups_shapes import stamped_id
from openddb.api.figures import epoch_millis
from openddb.api.indexes import schedule_backfill
from openddb.model.schema import TableMeta
from openddb.storage.base import BACKUP_CHUNK, RESTORE_CHUNK, BackupRecord, CatalogChanged, Engine, lease_holder
from openddb.vectors.updates import schedule_vector_backfill

log = logging.getLogger("openddb.backups")

_LEASE_SECONDS = 10.0  # renewed every chunk
SYSTEM_BACKUP_DAYS = 35
_BACKING_UP: Runs[str] = Runs()  # the backups this process makes (ARNs)
_RESTORING: Runs[str] = Runs()  # the restores this process drives (the restored tables' uuids)
BUILDING: set[str] = set()  # stored names of the tables this process restored whose indexes are still being built


def take_backup_lease(engine: Engine, arn: str) -> bool:
    return engine.try_lease(f"backup:{arn}", lease_holder(), _LEASE_SECONDS, time.time())


def backing_up(arn: str) -> bool:
    return arn in _BACKING_UP


def schedule_backup(engine: Engine, arn: str) -> None:
    """Copy the backup `arn` (begun, CREATING) chunk by chunk to its end; no-op if this process makes it already."""
    def chunk() -> bool:
        if not take_backup_lease(engine, arn):
            return False  # (another process makes it)
        progress = engine.continue_backup(arn, BACKUP_CHUNK)
        if progress == "lost":
            log.warning("backup %s was cut short by a restart and can no longer be finished: deleted", arn)
            engine.delete_backup(arn)
        return progress == "more"

    _BACKING_UP.start(arn, lambda: records.background_chunk(engine, chunk), f"backup {arn}")


def resume_backups(engine: Engine) -> None:
    """A background duty: take up every backup still CREATING that no process makes (its lease expired); delete
    the SYSTEM backups past their expiry."""
    now = clock.now()
    for record in engine.list_backups():
        if record.status == "CREATING" and record.arn not in _BACKING_UP and take_backup_lease(engine, record.arn):
            schedule_backup(engine, record.arn)
        elif record.status == "AVAILABLE" and (expiry(record) or now) < now:
            engine.delete_backup(record.arn)


def expiry(record: BackupRecord) -> float | None:
    """BackupExpiryDateTime: a SYSTEM backup "expires automatically 35 days after its creation" (API Reference,
    BackupDetails); the others never do."""
    return record.created_at + SYSTEM_BACKUP_DAYS * 86400.0 if record.backup_type == "SYSTEM" else None


def system_backup(engine: Engine, meta: TableMeta) -> None:
    """Before a table with point-in-time recovery on is deleted: "a SYSTEM backup is automatically created and is
    retained for 35 days ... System backups allow you to restore the deleted table to the state it was in just
    before the point of deletion" (API Reference, BackupDetails). Begun here, so its instant is before the
    deletion; made in the background like any backup."""
    now = clock.now()
    # best guess: DynamoDB's name of a system backup is not recorded in its documentation; the table's name
    record = BackupRecord(backup_arn(meta, now), meta.name, meta.name, meta.uuid, epoch_millis(now),
                          backup_type="SYSTEM")
    start_backup(engine, record, meta)


def backup_arn(meta: TableMeta, now: float) -> str:
    """A backup's ARN in DynamoDB's form: the table's ARN, "/backup/" and the stamped id."""
    return f"{meta.arn}/backup/{stamped_id(now)}"


def start_backup(engine: Engine, record: BackupRecord, meta: TableMeta) -> BackupRecord | None:
    """Begin the backup `record` of `meta` (CREATING, its lease taken before it is stored, so no duty takes it for
    abandoned) and schedule its run; None if the table was deleted or replaced meanwhile."""
    take_backup_lease(engine, record.arn)
    begun = engine.begin_backup(record, meta)
    if begun is not None:
        schedule_backup(engine, record.arn)
    return begun


def schedule_restore(engine: Engine, meta: TableMeta) -> None:
    """Fill the restored table `meta` (begun, `restoring`) chunk by chunk, then start its indexes' backfill; no-op
    if this process drives it already."""
    name, uuid = meta.stored_name, meta.uuid

    def chunk() -> bool:
        current = engine.get_table(name)
        if current is None or current.uuid != uuid or not current.restoring or not engine.try_lease(
                f"restore:{uuid}", lease_holder(), _LEASE_SECONDS, time.time()):
            return False
        progress = engine.continue_restore(current, RESTORE_CHUNK)
        if progress == "more":
            return True
        if progress == "lost":
            log.warning("restore into table %s lost its source: the table is removed", current.name)
            engine.delete_table(name)
        elif not _copied(engine, current):
            return True  # (the table changed meanwhile: the next chunk looks again)
        return False

    _RESTORING.start(uuid, lambda: records.background_chunk(engine, chunk), f"restore of {name}")


def _copied(engine: Engine, meta: TableMeta) -> bool:
    """Every item is in: the table no longer `restoring`, its indexes' backfill started; False if it changed
    meanwhile."""
    finished = copy.deepcopy(meta)
    finished.restoring = False
    try:
        engine.update_table(finished)
    except CatalogChanged:
        return False
    BUILDING.add(finished.stored_name)  # (made ACTIVE by `finish_restores` within a second once its indexes are)
    for index in finished.indexes:
        schedule_backfill(engine, finished, index)
    for vector_index in finished.vector_indexes:
        schedule_vector_backfill(engine, finished, vector_index)
    return True


def resume_restores(engine: Engine, restored: list[TableMeta]) -> None:
    """Take up the restores among `restored` (the tables made by a restore) still copying items that no process
    drives (a restart cut them short; the lease decides)."""
    for meta in restored:
        if meta.restoring and meta.uuid not in _RESTORING:
            schedule_restore(engine, meta)
