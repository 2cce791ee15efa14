"""An embedded store made when SQLite triggers on `items` wrote the point-in-time recovery log opens with them
dropped: its tables' recovery goes on, each change logged once (by the write path) with the item before it, and no
trigger is left."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import orjson
import pytest

from tests.api.test_stream_store_upgrade import change_a_and_b, triggers
from tests.conftest import ServerProcess, create_table, make_client, unique_name

pytestmark = pytest.mark.skipif(bool(os.environ.get("OPENDDB_TEST_ENGINE")), reason="the embedded store's files")

# The log triggers such a store holds for each table with recovery on (the layout as it was: one left behind would
# log every change a second time).
OLD_TRIGGERS = """
CREATE TRIGGER recovery_on_insert_{tid} AFTER INSERT ON items WHEN NEW.tid = {tid} BEGIN
    INSERT INTO recovery_log (tid, created_at, h, pk, sk, old_size, old)
    VALUES ({tid}, openddb_now(), NEW.h, NEW.pk, NEW.sk, NULL, NULL);
END;
CREATE TRIGGER recovery_on_update_{tid} AFTER UPDATE ON items
WHEN NEW.tid = {tid} AND OLD.data IS NOT NEW.data BEGIN
    INSERT INTO recovery_log (tid, created_at, h, pk, sk, old_size, old)
    VALUES ({tid}, openddb_now(), OLD.h, OLD.pk, OLD.sk, OLD.size, OLD.data);
END;
CREATE TRIGGER recovery_on_delete_{tid} AFTER DELETE ON items WHEN OLD.tid = {tid} BEGIN
    INSERT INTO recovery_log (tid, created_at, h, pk, sk, old_size, old)
    VALUES ({tid}, openddb_now(), OLD.h, OLD.pk, OLD.sk, OLD.size, OLD.data);
END;
"""


def store(data_dir: str) -> sqlite3.Connection:
    return sqlite3.connect(Path(data_dir) / "openddb.sqlite3")


def logged(data_dir: str, tid: int) -> list[tuple[str, str | None]]:
    """The table's log in order: each record's key (a string key is stored as its UTF-8 bytes) and its old item's
    `n` (None: the item was inserted)."""
    with store(data_dir) as db:
        rows = db.execute("SELECT pk, old FROM recovery_log WHERE tid=? ORDER BY seq", (tid,)).fetchall()
    return [(bytes(pk).decode(), None if old is None else orjson.loads(old).get("n", {}).get("N")) for pk, old in rows]


def test_a_store_with_recovery_triggers_opens_without_them(tmp_path: Path) -> None:
    data_dir = str(tmp_path)
    first = ServerProcess(data_dir)
    try:
        ddb = make_client(first.endpoint)
        name = create_table(ddb, unique_name("up"), range_type=None)
        ddb.update_continuous_backups(TableName=name, PointInTimeRecoverySpecification={
            "PointInTimeRecoveryEnabled": True})
        ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "n": {"N": "1"}})
    finally:
        first.finish()
    with store(data_dir) as db:
        (tid,) = db.execute("SELECT tid FROM recovery").fetchone()
        db.executescript(OLD_TRIGGERS.format(tid=int(tid)))
    assert len(triggers(data_dir)) == 3  # (the store as such a server left it)
    before = logged(data_dir, tid)
    assert before == [("a", None)]

    second = ServerProcess(data_dir)
    try:
        ddb = make_client(second.endpoint)
        change_a_and_b(ddb, name)
        assert triggers(data_dir) == []
        assert logged(data_dir, tid) == [*before, ("a", "1"), ("b", None), ("a", "2")]
        status = ddb.describe_continuous_backups(TableName=name)["ContinuousBackupsDescription"]
        assert status["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"
    finally:
        second.finish()  # (a clean log: no write failed on a trigger left behind)
