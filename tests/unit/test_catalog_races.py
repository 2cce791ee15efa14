"""Two workers (two dispatchers over one store, as two processes have) changing or using one table at once.

The race is made deterministic by running the other worker's change at the worst moment: after this worker has
read the table's description, before it stores its change or takes the writer lock for its write. A change
derived from the replaced description is made again on the fresh one, never written over it; a write never
lands under a table that was deleted meanwhile."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from openddb.api.dispatch import Dispatcher
from openddb.api.incoming import Frame
from openddb.storage.base import HASH_SPACE
from openddb.storage.sqlite import SQLiteEngine
from tests.api.test_protocol import AUTH
from tests.unit.serving import dispatcher_with_table

ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/tbl"


def call(dispatcher: Dispatcher, operation: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    status, payload = dispatcher.handle(Frame(f"DynamoDB_20120810.{operation}".encode(), AUTH.encode(),
                                        json.dumps(body).encode(), False, b"r"))
    dispatcher.engine.end_reads()
    return status, json.loads(payload) if payload else {}


def before_first(monkeypatch: pytest.MonkeyPatch, engine: SQLiteEngine, method: str,
                 meanwhile: Callable[[], None]) -> None:
    """Run `meanwhile` (the other worker's doing) just before the first call of `engine.<method>`."""
    original = getattr(engine, method)
    done = []

    def hooked(*args: Any, **kwargs: Any) -> Any:
        if not done:
            done.append(True)
            meanwhile()
        return original(*args, **kwargs)

    monkeypatch.setattr(engine, method, hooked)


@pytest.mark.parametrize("operation", ["TagResource", "UpdateTimeToLive", "UpdateTable"])
def test_concurrent_table_changes_keep_both(tmp_path, monkeypatch, operation) -> None:  # type: ignore[no-untyped-def]
    first = dispatcher_with_table(SQLiteEngine(str(tmp_path)))
    second = Dispatcher(SQLiteEngine(str(tmp_path)))
    request = {
        "TagResource": {"ResourceArn": ARN, "Tags": [{"Key": "b", "Value": "2"}]},
        "UpdateTimeToLive": {"TableName": "tbl", "TimeToLiveSpecification": {"Enabled": True, "AttributeName": "e"}},
        "UpdateTable": {"TableName": "tbl", "DeletionProtectionEnabled": True},
    }[operation]
    try:
        before_first(monkeypatch, second.engine, "update_table", lambda: call(
            first, "TagResource", {"ResourceArn": ARN, "Tags": [{"Key": "a", "Value": "1"}]}))
        assert call(second, operation, request)[0] == 200
        for worker in (first, second):
            tags = call(worker, "ListTagsOfResource", {"ResourceArn": ARN})[1]["Tags"]
            assert [tag["Key"] for tag in tags] == (["a", "b"] if operation == "TagResource" else ["a"])
        table = call(first, "DescribeTable", {"TableName": "tbl"})[1]["Table"]
        assert table["DeletionProtectionEnabled"] is (operation == "UpdateTable")
        ttl = call(first, "DescribeTimeToLive", {"TableName": "tbl"})[1]["TimeToLiveDescription"]
        assert ttl["TimeToLiveStatus"] == ("ENABLED" if operation == "UpdateTimeToLive" else "DISABLED")
    finally:
        first.engine.close()
        second.engine.close()


def test_write_after_the_table_was_replaced(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The table is deleted and created again between this worker's look-up and its write: the write goes to
    the new table, and nothing is left under the old table's id."""
    first = dispatcher_with_table(SQLiteEngine(str(tmp_path)))
    second = Dispatcher(SQLiteEngine(str(tmp_path)))
    old = first.engine.get_table("tbl")
    first.engine.end_reads()
    assert old is not None

    def replace_table() -> None:
        assert call(first, "DeleteTable", {"TableName": "tbl"})[0] == 200
        assert dispatcher_with_table(first.engine) is not None

    try:
        before_first(monkeypatch, second.engine, "write", replace_table)
        # A token-guarded transaction runs under the writer lock with the description it was handed.
        status, _ = call(second, "TransactWriteItems", {"ClientRequestToken": "t1", "TransactItems": [
            {"Put": {"TableName": "tbl", "Item": {"pk": {"S": "x"}}}}]})
        assert status == 200
        assert call(first, "GetItem", {"TableName": "tbl", "Key": {"pk": {"S": "x"}}})[1] == {
            "Item": {"pk": {"S": "x"}}}
        leftovers = list(first.engine.scan(old, 0, HASH_SPACE, None))
        first.engine.end_reads()
        assert leftovers == []
    finally:
        first.engine.close()
        second.engine.close()


def test_a_new_worker_tells_the_others_to_look_again(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A worker killed after committing a table change but before telling the others leaves their cached
    descriptions stale; the worker started in its place makes them look again."""
    import sqlite3

    survivor = dispatcher_with_table(SQLiteEngine(str(tmp_path)))
    try:
        assert call(survivor, "DescribeTable", {"TableName": "tbl"})[1]["Table"]["DeletionProtectionEnabled"] is False
        # The dead worker's commit: in the store, never signalled.
        raw = sqlite3.connect(tmp_path / "openddb.sqlite3")
        meta = json.loads(raw.execute("SELECT meta FROM tables WHERE name='tbl'").fetchone()[0])
        meta["deletion_protection"] = True
        raw.execute("UPDATE tables SET meta=? WHERE name='tbl'", (json.dumps(meta).encode(),))
        raw.commit()
        raw.close()
        SQLiteEngine(str(tmp_path)).close()  # the replacement worker opens the store
        assert call(survivor, "DescribeTable", {"TableName": "tbl"})[1]["Table"]["DeletionProtectionEnabled"] is True
    finally:
        survivor.engine.close()


def test_delete_racing_protection_or_another_delete(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Deletion protection set by another worker after this one checked the table refuses the delete; a table
    another worker deleted first is not found (only one DeleteTable succeeds)."""
    first = dispatcher_with_table(SQLiteEngine(str(tmp_path)))
    second = Dispatcher(SQLiteEngine(str(tmp_path)))
    try:
        before_first(monkeypatch, second.engine, "delete_table", lambda: call(
            first, "UpdateTable", {"TableName": "tbl", "DeletionProtectionEnabled": True}))
        status, answer = call(second, "DeleteTable", {"TableName": "tbl"})
        assert (status, answer["message"]) == (400, "Resource cannot be deleted as it is currently protected "
                                                    "against deletion. Disable deletion protection first.")
        assert call(first, "UpdateTable", {"TableName": "tbl", "DeletionProtectionEnabled": False})[0] == 200
        monkeypatch.undo()
        before_first(monkeypatch, second.engine, "delete_table", lambda: call(first, "DeleteTable",
                                                                              {"TableName": "tbl"}))
        status, answer = call(second, "DeleteTable", {"TableName": "tbl"})
        assert status == 400 and answer["__type"].endswith("#ResourceNotFoundException")
    finally:
        first.engine.close()
        second.engine.close()
