"""Test control over HTTP (`openddb serve --dev`): empty the store, move the clock, sweep TTL now; off without --dev."""

from __future__ import annotations

import http.client
import json
import os
import tempfile
import time
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from tests.conftest import ServerProcess, make_client, table_exists, unique_name


def control(server: ServerProcess, method: str, path: str, body: object = None) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request(method, path, body=None if body is None else json.dumps(body))
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, json.loads(data) if data else {}


@pytest.fixture(scope="module")
def dev() -> Iterator[ServerProcess]:
    process = ServerProcess(None, "--dev")
    try:
        yield process
    finally:
        process.finish()


def streamed_ttl_table(ddb) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    name = unique_name("ttl")
    answer = ddb.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
    ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires"})
    return name, answer["TableDescription"]["LatestStreamArn"]


def records(streams, arn: str) -> list[dict]:  # type: ignore[no-untyped-def]
    found = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        found += streams.get_records(ShardIterator=iterator)["Records"]
    return found


def test_an_item_expires_when_the_clock_passes_its_ttl(dev):
    """The user's case: an item with a TTL an hour ahead, the clock moved past it, the sweep run: the item is
    gone, and its REMOVE stream record names DynamoDB's TTL service as the one who deleted it."""
    ddb, streams = make_client(dev.endpoint), make_client(dev.endpoint, "dynamodbstreams")
    table, arn = streamed_ttl_table(ddb)
    ddb.put_item(TableName=table, Item={"pk": {"S": "a"}, "expires": {"N": str(int(time.time()) + 3600)}})
    # (The count is of the whole store, which other tests share on PostgreSQL: the item itself must stay.)
    status, swept = control(dev, "POST", "/openddb/ttl/sweep")
    assert status == 200 and isinstance(swept["deleted"], int)
    assert "Item" in ddb.get_item(TableName=table, Key={"pk": {"S": "a"}})

    before = time.time()  # (the server reads its clock after this, however slowly it answers)
    status, moved = control(dev, "POST", "/openddb/clock", {"advance": 3601})
    assert status == 200 and moved["offset"] >= 3601 and moved["now"] > before + 3600
    status, swept = control(dev, "POST", "/openddb/ttl/sweep")
    assert status == 200 and isinstance(swept["deleted"], int)  # (the server's own sweep may have been first)
    assert "Item" not in ddb.get_item(TableName=table, Key={"pk": {"S": "a"}})
    removed = [record for record in records(streams, arn) if record["eventName"] == "REMOVE"]
    assert len(removed) == 1
    assert removed[0]["userIdentity"] == {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"}
    assert control(dev, "GET", "/openddb/clock")[1]["offset"] == moved["offset"]


def test_an_iterator_expires_when_the_clock_moves_15_minutes(dev):
    """Shard iterators last 15 minutes by the server's clock, moved or not."""
    ddb, streams = make_client(dev.endpoint), make_client(dev.endpoint, "dynamodbstreams")
    _, arn = streamed_ttl_table(ddb)
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard,
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    assert control(dev, "POST", "/openddb/clock", {"advance": 16 * 60})[0] == 200
    with pytest.raises(ClientError) as excinfo:
        streams.get_records(ShardIterator=iterator)
    assert excinfo.value.response["Error"]["Code"] == "ExpiredIteratorException"


@pytest.mark.parametrize("body", [None, {"advance": -1}, {"advance": "1"}, {"advance": True}, [1]])
def test_a_bad_advance_is_refused(dev, body):
    status, answer = control(dev, "POST", "/openddb/clock", body)
    assert status == 400 and "advance" in answer["message"]


def test_an_unknown_control_path(dev):
    assert control(dev, "POST", "/openddb/nothing")[0] == 404


def test_control_is_off_without_dev(server):
    """A server that is not a test fixture cannot be emptied, nor its clock moved, by a request."""
    ddb = make_client(server.endpoint)
    name = unique_name("kept")
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    for method, path in (("POST", "/openddb/reset"), ("POST", "/openddb/clock"), ("GET", "/openddb/clock")):
        connection.request(method, path, body=b"{}")
        response = connection.getresponse()
        response.read()
        assert response.status == 404
    connection.close()
    assert table_exists(ddb, name)


def test_reset_empties_a_durable_store_and_puts_the_clock_back():
    """A reset leaves nothing of the store (the data dir's database is replaced), keeps serving on the same
    connections' endpoint, and the clock is real time again."""
    with tempfile.TemporaryDirectory() as data_dir:
        process = ServerProcess(data_dir, "--dev")
        try:
            ddb = make_client(process.endpoint)
            name, _ = streamed_ttl_table(ddb)
            ddb.put_item(TableName=name, Item={"pk": {"S": "a"}})
            control(process, "POST", "/openddb/clock", {"advance": 60})
            status, answer = control(process, "POST", "/openddb/reset")
            if os.environ.get("OPENDDB_TEST_ENGINE"):  # a shared PostgreSQL is not emptied by one node
                assert status == 409 and "PostgreSQL" in answer["message"]
                return
            assert (status, answer) == (200, {"reset": True})
            assert ddb.list_tables()["TableNames"] == []
            assert make_client(process.endpoint, "dynamodbstreams").list_streams()["Streams"] == []
            assert control(process, "GET", "/openddb/clock")[1]["offset"] == 0
            ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                             AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                             KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
            assert "Item" not in ddb.get_item(TableName=name, Key={"pk": {"S": "a"}})
        finally:
            process.finish()
        # Still empty when the server opens the data dir again.
        again = ServerProcess(data_dir)
        try:
            assert make_client(again.endpoint).list_tables()["TableNames"] == [name]
        finally:
            again.finish()
