"""Embedded stores an earlier version made open with their stream records readable and their streams going on:
one whose records SQLite triggers on `items` wrote opens with them dropped (each change recorded once, by the
write path, with its origin, and no trigger left); one whose log was indexed by shard opens with it indexed by
stream."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.test_streams_api import every_record
from tests.conftest import ServerProcess, create_table, make_client, unique_name

pytestmark = pytest.mark.skipif(bool(os.environ.get("OPENDDB_TEST_ENGINE")), reason="the embedded store's files")

# The record triggers such a store holds for each streamed table (the layout as it was, trimmed to what makes them
# fire: one left behind would write a second record of every change, or fail on the function it calls).
OLD_TRIGGERS = """
CREATE TRIGGER stream_on_insert_{tid} AFTER INSERT ON items WHEN NEW.tid = {tid} BEGIN
    INSERT INTO stream_log (shard_no, created_at, kind, origin, keys, old, new, old_size, new_size)
    SELECT s.shard_no, openddb_now(), 'INSERT', openddb_origin(), NULL, NULL, NEW.data, NULL, NEW.size
    FROM streams t JOIN stream_shards s ON s.sid = t.sid AND s.slot = (NEW.h * t.shards) >> 32
    WHERE t.tid = NEW.tid AND t.disabled_at IS NULL AND s.ending_seq IS NULL;
END;
CREATE TRIGGER stream_on_update_{tid} AFTER UPDATE ON items WHEN NEW.tid = {tid} AND OLD.data IS NOT NEW.data BEGIN
    INSERT INTO stream_log (shard_no, created_at, kind, origin, keys, old, new, old_size, new_size)
    SELECT s.shard_no, openddb_now(), 'MODIFY', openddb_origin(), NULL, OLD.data, NEW.data, OLD.size, NEW.size
    FROM streams t JOIN stream_shards s ON s.sid = t.sid AND s.slot = (NEW.h * t.shards) >> 32
    WHERE t.tid = NEW.tid AND t.disabled_at IS NULL AND s.ending_seq IS NULL;
END;
CREATE TRIGGER stream_on_delete_{tid} AFTER DELETE ON items WHEN OLD.tid = {tid} BEGIN
    INSERT INTO stream_log (shard_no, created_at, kind, origin, keys, old, new, old_size, new_size)
    SELECT s.shard_no, openddb_now(), 'REMOVE', openddb_origin(), NULL, OLD.data, NULL, OLD.size, NULL
    FROM streams t JOIN stream_shards s ON s.sid = t.sid AND s.slot = (OLD.h * t.shards) >> 32
    WHERE t.tid = OLD.tid AND t.disabled_at IS NULL AND s.ending_seq IS NULL;
END;
"""


@pytest.fixture
def data_dir() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as directory:
        yield directory


def triggers(data_dir: str) -> list[str]:
    with sqlite3.connect(Path(data_dir) / "openddb.sqlite3") as db:
        return [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='trigger'")]


def streamed_table(ddb: Any) -> str:
    """A new table (key pk) with a NEW_AND_OLD_IMAGES stream; its name."""
    name = unique_name("up")
    ddb.create_table(TableName=name, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST",
                     StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
    return name


def change_a_and_b(ddb: Any, name: str) -> None:
    """Item "a" (n 1) updated to n 2, "b" put, "a" deleted: a change of each kind."""
    ddb.update_item(TableName=name, Key={"pk": {"S": "a"}}, UpdateExpression="SET n = n + :one",
                    ExpressionAttributeValues={":one": {"N": "1"}})
    ddb.put_item(TableName=name, Item={"pk": {"S": "b"}})
    ddb.delete_item(TableName=name, Key={"pk": {"S": "a"}})


def test_a_store_with_record_triggers_opens_without_them(data_dir: str) -> None:
    first = ServerProcess(data_dir)
    try:
        ddb = make_client(first.endpoint)
        name = streamed_table(ddb)
        plain = create_table(ddb, unique_name("plain"), range_type=None)
        ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "n": {"N": "1"}})
    finally:
        first.finish()
    with sqlite3.connect(Path(data_dir) / "openddb.sqlite3") as db:
        (tid,) = db.execute("SELECT tid FROM streams").fetchone()
        db.executescript(OLD_TRIGGERS.format(tid=int(tid)))
    assert len(triggers(data_dir)) == 3  # (the store as such a server left it)

    second = ServerProcess(data_dir)
    try:
        ddb = make_client(second.endpoint)
        change_a_and_b(ddb, name)
        ddb.put_item(TableName=plain, Item={"pk": {"S": "x"}})
        assert triggers(data_dir) == []
        arn = ddb.describe_table(TableName=name)["Table"]["LatestStreamArn"]
        records = sorted(every_record(make_client(second.endpoint, "dynamodbstreams"), arn),
                         key=lambda record: int(record["dynamodb"]["SequenceNumber"]))
        seen = [(r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"]) for r in records]
        assert seen == [("INSERT", "a"), ("MODIFY", "a"), ("INSERT", "b"), ("REMOVE", "a")]
        modify = records[1]["dynamodb"]
        assert (modify["OldImage"]["n"], modify["NewImage"]["n"]) == ({"N": "1"}, {"N": "2"})
        assert ddb.get_item(TableName=plain, Key={"pk": {"S": "x"}})["Item"] == {"pk": {"S": "x"}}
    finally:
        second.finish()  # (a clean log: no write failed on a trigger left behind)


# The stream log as it was indexed by shard (before each record kept its stream and each shard its newest record).
OLD_LOG_LAYOUT = """
DROP INDEX stream_log_by_stream;
ALTER TABLE stream_log DROP COLUMN sid;
ALTER TABLE stream_shards DROP COLUMN last_seq;
CREATE INDEX stream_log_by_shard ON stream_log (shard_no, seq);
"""


def indexes(data_dir: str) -> set[str]:
    with sqlite3.connect(Path(data_dir) / "openddb.sqlite3") as db:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='index' AND "
                                             "tbl_name='stream_log'")}


def test_a_store_with_its_log_indexed_by_shard_keeps_its_records(data_dir: str) -> None:
    first = ServerProcess(data_dir)
    try:
        ddb = make_client(first.endpoint)
        name = streamed_table(ddb)
        ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "n": {"N": "1"}})
        ddb.put_item(TableName=name, Item={"pk": {"S": "c"}})
    finally:
        first.finish()
    with sqlite3.connect(Path(data_dir) / "openddb.sqlite3") as db:
        db.executescript(OLD_LOG_LAYOUT)
    assert indexes(data_dir) == {"stream_log_by_shard"}  # (the store as such a server left it)

    second = ServerProcess(data_dir)
    try:
        ddb = make_client(second.endpoint)
        streams = make_client(second.endpoint, "dynamodbstreams")
        arn = ddb.describe_table(TableName=name)["Table"]["LatestStreamArn"]
        before = every_record(streams, arn)
        assert sorted((r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"]) for r in before) == \
            [("INSERT", "a"), ("INSERT", "c")]
        change_a_and_b(ddb, name)
        assert indexes(data_dir) == {"stream_log_by_stream"}
        records = sorted(every_record(streams, arn), key=lambda record: int(record["dynamodb"]["SequenceNumber"]))
        seen = [(r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"]) for r in records]
        assert seen[2:] == [("MODIFY", "a"), ("INSERT", "b"), ("REMOVE", "a")]
        assert sorted(seen[:2]) == [("INSERT", "a"), ("INSERT", "c")]
        modify = next(r["dynamodb"] for r in records if r["eventName"] == "MODIFY")
        assert (modify["OldImage"]["n"], modify["NewImage"]["n"]) == ({"N": "1"}, {"N": "2"})
        # Each shard's LATEST starts after its newest record, old or new: nothing is read from there.
        shards = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
        for shard in shards:
            iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                                  ShardIteratorType="LATEST")["ShardIterator"]
            assert streams.get_records(ShardIterator=iterator)["Records"] == []
    finally:
        second.finish()
