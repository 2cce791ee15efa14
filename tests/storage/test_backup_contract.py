"""The backup and recovery part of the engine contract, on every engine: a backup is the table as it was, a
restore from it or from the recovery log is the table at that moment (several tables' changes interleaved)."""

from __future__ import annotations

import time
import uuid

from openddb.model.schema import TableMeta
from openddb.storage.base import HASH_SPACE, BackupRecord, Engine, RestoreSource, StorageKey
from tests.storage.test_engine_contract import delete, item, key, new_meta, put


def rows(engine: Engine, meta: TableMeta) -> list[tuple[StorageKey, bytes]]:
    return [(row.key, bytes(row.data)) for row in engine.scan(meta, 0, HASH_SPACE, None)]


def target(source: TableMeta) -> TableMeta:
    meta = new_meta()
    meta.hash_key, meta.range_key = source.hash_key, source.range_key
    return meta


def test_a_backup_restores_the_table_as_it_was(engine: Engine) -> None:
    meta = engine.create_table(new_meta())
    engine.write([put(meta, key(b"s%d" % i), item(i)) for i in range(20)])
    record = BackupRecord(f"{meta.arn}/backup/{uuid.uuid4().hex}", "b", meta.name, meta.uuid, time.time())
    done = engine.create_backup(record, meta)
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
