"""The backup and recovery part of the engine contract, on every engine: a backup is the table as it was, a
restore from it or from the recovery log is the table at that moment (several tables' changes interleaved)."""

from __future__ import annotations

import time
import uuid

from openddb.model.schema import TableMeta
from openddb.storage.base import HASH_SPACE, BackupRecord, Engine, RestoreSource, StorageKey
from tests.storage.conftest import EngineFactory
from tests.storage.test_engine_contract import delete, item, key, new_meta, put


def rows(engine: Engine, meta: TableMeta) -> list[tuple[StorageKey, bytes]]:
    return [(row.key, bytes(row.data)) for row in engine.scan(meta, 0, HASH_SPACE, None)]


def leased(engine: Engine, record: BackupRecord) -> BackupRecord:
    """`record`, its lease held as the server holds it while it makes a backup: on a store shared with running
    servers (the suite on PostgreSQL), their duty would otherwise take up a CREATING backup no process makes."""
    assert engine.try_lease(f"backup:{record.arn}", "contract-test", 600.0, time.time())
    return record


def target(source: TableMeta) -> TableMeta:
    meta = new_meta()
    meta.hash_key, meta.range_key = source.hash_key, source.range_key
    return meta


def test_a_backup_restores_the_table_as_it_was(engine: Engine) -> None:
    meta = engine.create_table(new_meta())
    engine.write([put(meta, key(b"s%d" % i), item(i)) for i in range(20)])
    record = BackupRecord(f"{meta.arn}/backup/{uuid.uuid4().hex}", "b", meta.name, meta.uuid, time.time())
    done = engine.create_backup(leased(engine, record), meta)
    assert done is not None and (done.item_count, done.status) == (20, "AVAILABLE") and done.size > 0
    expected = rows(engine, meta)
    engine.write([delete(meta, key(b"s1")), put(meta, key(b"s2"), item(99)), put(meta, key(b"new"), item(1))])
    restored = engine.restore_table(target(meta), RestoreSource(backup_arn=record.arn))
    assert rows(engine, restored) == expected
    stored = engine.get_backup(record.arn)
    assert stored is not None and TableMeta.from_json(stored.meta).uuid == meta.uuid
    assert record.arn in [b.arn for b in engine.list_backups()]
    assert engine.delete_backup(record.arn) and engine.get_backup(record.arn) is None
    assert not engine.delete_backup(record.arn)
    gone = new_meta()  # (a table no longer stored is no backup)
    assert engine.create_backup(BackupRecord(f"{gone.arn}/backup/x", "b", gone.name, gone.uuid, 0.0), gone) is None


def test_a_point_in_time_restore_is_the_table_at_that_moment(engine: Engine) -> None:
    first, other = engine.create_table(new_meta()), engine.create_table(new_meta())
    engine.write([put(first, key(b"old"), item(0))])  # (before recovery: in the table, not the log)
    for meta in (first, other):
        assert engine.set_recovery(meta, 7, time.time()) is not None
    window = engine.recovery_window(first)
    assert window is not None and window.days == 7
    for i in range(10):
        engine.write([put(first, key(b"k%d" % i), item(i)), put(other, key(b"k%d" % i), item(i))])
    engine.write([delete(first, key(b"k1")), put(first, key(b"k2"), item(22))])
    time.sleep(0.01)
    at = time.time()
    expected = rows(engine, first)
    time.sleep(0.01)
    engine.write([delete(first, key(b"k3")), put(first, key(b"k4"), item(44)), put(first, key(b"k1"), item(11)),
                  delete(first, key(b"old"))])
    engine.write([put(other, key(b"k5"), item(55)), put(first, key(b"late"), item(5))])
    engine.write([put(first, key(b"k4"), item(444))])
    restored = engine.restore_table(target(first), RestoreSource(table=first, at=at))
    assert rows(engine, restored) == expected
    latest = engine.restore_table(target(first), RestoreSource(table=first, at=time.time()))
    assert rows(engine, latest) == rows(engine, first)
    engine.trim_recovery(time.time())  # (nothing is older than 7 days: the window keeps every record)
    again = engine.restore_table(target(first), RestoreSource(table=first, at=at))
    assert rows(engine, again) == expected
    assert engine.set_recovery(first, None, time.time()) is None and engine.recovery_window(first) is None
    engine.delete_table(other.name)
    assert engine.recovery_window(other) is None


def _churn(engine: Engine, meta: TableMeta, n: int) -> None:
    """Changes of every kind, in keys before and after any chunk boundary: updates, deletes, insertions."""
    fresh = engine.get_table(meta.stored_name)  # (as the server does: another engine made tables meanwhile)
    assert fresh is not None
    meta = fresh
    engine.write([put(meta, key(b"s%03d" % i), item(1000 + n)) for i in range(0, 60, 7)])
    engine.write([delete(meta, key(b"s%03d" % i)) for i in range(3 + n, 60, 11)])
    engine.write([put(meta, key(b"%s%d-%d" % (prefix, n, i)), item(i)) for i in range(3) for prefix in (b"a", b"z")])


def test_a_backup_in_chunks_is_the_table_at_its_instant(open_engine: EngineFactory) -> None:
    """A backup copied a few items a chunk, from two engines on one store (two workers), while the table keeps
    changing between chunks: restored, it equals the table as it stood when the backup began."""
    engine, other = open_engine(), open_engine()
    meta = engine.create_table(new_meta())
    engine.write([put(meta, key(b"s%03d" % i), item(i)) for i in range(60)])
    record = BackupRecord(f"{meta.arn}/backup/{uuid.uuid4().hex}", "b", meta.name, meta.uuid, time.time())
    leased(engine, record)
    begun = engine.begin_backup(record, meta)
    assert begun is not None and begun.status == "CREATING"
    expected = rows(engine, meta)
    assert [b.status for b in engine.list_backups() if b.arn == record.arn] == ["CREATING"]
    steps = 0
    while (progress := engine.continue_backup(record.arn, 7)) == "more":
        steps += 1
        _churn(other, meta, steps)
    assert progress == "done" and steps >= 5
    stored = engine.get_backup(record.arn)
    assert stored is not None and (stored.status, stored.item_count) == ("AVAILABLE", 60)
    assert rows(engine, meta) != expected
    restored = engine.restore_table(target(meta), RestoreSource(backup_arn=record.arn))
    assert rows(engine, restored) == expected
    engine.write([put(meta, key(b"after"), item(1))])  # (the table's writes are no longer logged for it)


def test_a_restore_in_chunks_goes_on_after_a_restart(open_engine: EngineFactory) -> None:
    """A point-in-time restore copied a few items a chunk while the source keeps changing, its engine replaced by
    another halfway (a worker restarted): the other one goes on from where the first got, and the table is the
    source at the restore's time; a restore from a backup likewise."""
    engine = open_engine()
    meta = engine.create_table(new_meta())
    engine.write([put(meta, key(b"s%03d" % i), item(i)) for i in range(60)])
    assert engine.set_recovery(meta, 1, time.time()) is not None
    _churn(engine, meta, 0)
    time.sleep(0.01)
    at = time.time()
    expected = rows(engine, meta)
    time.sleep(0.01)
    restored = engine.begin_restore(target(meta), RestoreSource(table=meta, at=at))
    assert engine.continue_restore(restored, 9) == "more"
    _churn(engine, meta, 1)
    again = open_engine()
    steps = 0
    while (progress := again.continue_restore(restored, 9)) == "more":
        steps += 1
        _churn(again, meta, steps + 1)
    assert progress == "done" and steps >= 3
    assert rows(again, restored) == expected
    record = BackupRecord(f"{meta.arn}/backup/{uuid.uuid4().hex}", "b", meta.name, meta.uuid, time.time())
    done = again.create_backup(leased(again, record), meta)
    assert done is not None
    from_backup = again.begin_restore(target(meta), RestoreSource(backup_arn=record.arn))
    assert again.continue_restore(from_backup, 10) == "more"
    while open_engine().continue_restore(from_backup, 10) == "more":
        pass
    assert rows(again, from_backup) == rows(again, meta)


def test_a_point_in_time_restore_whose_log_is_gone_is_lost(engine: Engine) -> None:
    """Recovery turned off while a restore copies: the log it needs is gone, the restore says so."""
    meta = engine.create_table(new_meta())
    engine.write([put(meta, key(b"s%03d" % i), item(i)) for i in range(20)])
    engine.set_recovery(meta, 1, time.time())
    restored = engine.begin_restore(target(meta), RestoreSource(table=meta, at=time.time()))
    assert engine.continue_restore(restored, 5) == "more"
    engine.set_recovery(meta, None, time.time())
    while (progress := engine.continue_restore(restored, 5)) == "more":
        pass
    assert progress == "lost"
