"""DynamoDB Streams through the AWS SDK for JavaScript v3 (@aws-sdk/client-dynamodb-streams), the other client
people point at a local DynamoDB: tests/node/streams.mjs makes the SDK calls against a real server and prints what
the SDK parsed as JSON; these tests check the values.

Needs `node` and the SDK installed with `npm ci --prefix tests/node`; skipped without them.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from openddb.streams import iterators
from tests.conftest import ServerProcess, make_client, unique_name
from tests.node_runner import needs_node, run_node

pytestmark = needs_node

SEQUENCE = re.compile(r"[0-9]{21,40}")


# --- servers and the script -----------------------------------------------------------------------------------

def own_server(*options: str) -> Iterator[ServerProcess]:
    """A server on the embedded engine with a data dir of its own: stream settings apply to every stream of a
    store, so on an engine other tests share (OPENDDB_TEST_ENGINE) they would roll over those tests' streams."""
    with tempfile.TemporaryDirectory() as data_dir:
        with pytest.MonkeyPatch.context() as patch:
            patch.delenv("OPENDDB_TEST_ENGINE", raising=False)
            process = ServerProcess(data_dir, *options)
        try:
            yield process
        finally:
            process.finish()


@pytest.fixture(scope="module")
def node_server() -> Iterator[ServerProcess]:
    """Default stream settings: shards roll over only after hours, so a test's shards stay open."""
    yield from own_server()


@pytest.fixture(scope="module")
def rolling_server() -> Iterator[ServerProcess]:
    """Two shards per stream, each rolling over to a child every 2 seconds."""
    yield from own_server("--stream-shards", "2", "--stream-shard-seconds", "2")


@pytest.fixture(scope="module")
def trimming_server() -> Iterator[ServerProcess]:
    """Stream records kept 2 seconds."""
    yield from own_server("--stream-retention-seconds", "2")


def run_case(endpoint: str, case: str, *args: str) -> dict[str, Any]:
    """What streams.mjs prints for `case`."""
    return run_node("streams.mjs", endpoint, case, *args)


def date_of(value: dict[str, str]) -> datetime:
    """A Date as streams.mjs prints it ({"$date": ISO 8601})."""
    return datetime.fromisoformat(value["$date"].replace("Z", "+00:00"))


def sets_sorted(image: dict[str, Any]) -> dict[str, Any]:
    """An item with its set members sorted: DynamoDB keeps no order in a set."""
    def value(attribute: dict[str, Any]) -> dict[str, Any]:
        (kind, inner), = attribute.items()
        if kind in ("SS", "NS"):
            return {kind: sorted(inner)}
        if kind == "BS":
            return {kind: sorted(inner, key=lambda member: member["$bytes"])}
        if kind == "M":
            return {kind: {name: value(member) for name, member in inner.items()}}
        if kind == "L":
            return {kind: [value(member) for member in inner]}
        return attribute
    return {name: value(attribute) for name, attribute in image.items()}


# --- tables, records and their types --------------------------------------------------------------------------

EVERY_TYPE = {  # the item streams.mjs puts first, as it prints it (bytes as base64)
    "pk": {"S": "one"}, "s": {"S": "text"}, "n": {"N": "1"}, "b": {"B": {"$bytes": "AAH+/w=="}},
    "ss": {"SS": ["x", "y"]}, "ns": {"NS": ["-2", "1.5"]}, "bs": {"BS": [{"$bytes": "Bw=="}]},
    "m": {"M": {"inner": {"L": [{"NULL": True}, {"BOOL": False}]}}},
}


@pytest.fixture(scope="module")
def records_case(node_server: ServerProcess) -> dict[str, Any]:
    started = datetime.now(UTC)
    result = run_case(node_server.endpoint, "records")
    result["window"] = (started, datetime.now(UTC))
    return result


def test_table_descriptions_name_the_stream(records_case: dict[str, Any]) -> None:
    """CreateTable's and DescribeTable's descriptions, as the SDK's DynamoDB client parses them, carry the
    stream's specification, label and ARN, and ListStreams (by TableName) lists that one stream."""
    name = records_case["tableName"]
    described = records_case["described"]
    arn, label = described["LatestStreamArn"], described["LatestStreamLabel"]
    assert re.fullmatch(rf"arn:aws:dynamodb:us-east-1:\d{{12}}:table/{re.escape(name)}/stream/"
                        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}", arn)
    assert arn.endswith(f"/stream/{label}")
    for description in (records_case["created"], described):
        assert description["StreamSpecification"] == {"StreamEnabled": True,
                                                      "StreamViewType": "NEW_AND_OLD_IMAGES"}
        assert (description["LatestStreamArn"], description["LatestStreamLabel"]) == (arn, label)
    assert records_case["listStreams"] == {"Streams": [{"StreamArn": arn, "TableName": name, "StreamLabel": label}]}


def test_describe_stream(records_case: dict[str, Any]) -> None:
    """DescribeStream: an enabled stream's settings, its creation time as a Date, and its open shards (a new
    stream's shards have no parent and no ending sequence number), all on one page."""
    described = records_case["described"]
    stream = records_case["describeStream"]["StreamDescription"]
    assert {key: stream[key] for key in ("StreamArn", "StreamLabel", "StreamStatus", "StreamViewType",
                                         "TableName", "KeySchema")} == {
        "StreamArn": described["LatestStreamArn"], "StreamLabel": described["LatestStreamLabel"],
        "StreamStatus": "ENABLED", "StreamViewType": "NEW_AND_OLD_IMAGES", "TableName": records_case["tableName"],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}]}
    started, ended = records_case["window"]
    assert started - timedelta(seconds=1) <= date_of(stream["CreationRequestDateTime"]) <= ended
    assert "LastEvaluatedShardId" not in stream
    assert stream["Shards"]
    for shard in stream["Shards"]:
        assert set(shard) == {"ShardId", "SequenceNumberRange"}
        assert re.fullmatch(r"shardId-[0-9a-zA-Z-]{20,57}", shard["ShardId"])
        assert set(shard["SequenceNumberRange"]) == {"StartingSequenceNumber"}
        assert SEQUENCE.fullmatch(shard["SequenceNumberRange"]["StartingSequenceNumber"])


def test_records_of_puts_updates_and_deletes(records_case: dict[str, Any]) -> None:
    """Put, update and delete of one item give INSERT, MODIFY and REMOVE with the images NEW_AND_OLD_IMAGES asks
    for (every attribute type intact through the SDK, binary as bytes); re-putting an item unchanged gives none."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for record in records_case["records"]:
        by_key.setdefault(record["dynamodb"]["Keys"]["pk"]["S"], []).append(record)
    assert sorted(by_key) == ["one", "two"]
    assert [r["eventName"] for r in by_key["one"]] == ["INSERT", "MODIFY", "REMOVE"]
    assert [r["eventName"] for r in by_key["two"]] == ["INSERT"]
    insert, modify, remove = (r["dynamodb"] for r in by_key["one"])
    updated = {**EVERY_TYPE, "n": {"N": "2"}}
    assert "OldImage" not in insert and sets_sorted(insert["NewImage"]) == EVERY_TYPE
    assert sets_sorted(modify["OldImage"]) == EVERY_TYPE and sets_sorted(modify["NewImage"]) == updated
    assert sets_sorted(remove["OldImage"]) == updated and "NewImage" not in remove
    assert by_key["two"][0]["dynamodb"]["NewImage"] == {"pk": {"S": "two"}, "s": {"S": "same"}}


def test_record_members_and_their_types(records_case: dict[str, Any]) -> None:
    """Every record has DynamoDB's members, of the types the SDK's model gives them: ApproximateCreationDateTime
    parses to a Date (of the write, to the second), SizeBytes to a number, SequenceNumber stays a string."""
    started, ended = records_case["window"]
    event_ids = set()
    for record, types in zip(records_case["records"], records_case["types"], strict=True):
        assert {key: record[key] for key in ("eventName", "eventVersion", "eventSource", "awsRegion")} == {
            "eventName": record["eventName"], "eventVersion": "1.1", "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1"}
        assert "userIdentity" not in record  # a user's write, not a TTL deletion
        event_ids.add(record["eventID"])
        body = record["dynamodb"]
        assert body["StreamViewType"] == "NEW_AND_OLD_IMAGES"
        assert SEQUENCE.fullmatch(body["SequenceNumber"])
        assert isinstance(body["SizeBytes"], int) and body["SizeBytes"] > 0
        created = date_of(body["ApproximateCreationDateTime"])
        assert started.replace(microsecond=0) - timedelta(seconds=1) <= created <= ended
        assert types["eventID"] == types["eventName"] == types["eventSource"] == "string"
        assert types["dynamodb"]["ApproximateCreationDateTime"] == "Date"
        assert types["dynamodb"]["SizeBytes"] == "number"
        assert types["dynamodb"]["SequenceNumber"] == types["dynamodb"]["StreamViewType"] == "string"
        assert types["dynamodb"]["Keys"] == "object"
    assert len(event_ids) == len(records_case["records"])


# --- iterators and paging -------------------------------------------------------------------------------------

def test_iterator_types_and_paging(node_server: ServerProcess) -> None:
    """Each iterator type starts where DynamoDB's does (the oldest record; at or just after a given sequence
    number; after the newest, so only later writes show); with Limit 2, NextShardIterator pages through five
    records 2, 2, 1 and an open shard's iterator goes on after its last record."""
    result = run_case(node_server.endpoint, "iterators")
    assert result["trimHorizon"] == [0, 1, 2]
    assert result["atSequenceNumber"] == [1, 2]
    assert result["afterSequenceNumber"] == [2]
    assert result["latestBeforeWrite"] == []
    assert result["latestAfterWrite"] == [3]
    assert result["paged"] == {"versions": [0, 1, 2, 3, 4], "pages": [2, 2, 1, 0], "iteratorLeft": True}
    numbers = [int(number) for number in result["sequenceNumbers"]]
    assert numbers == sorted(set(numbers))  # increasing within the shard
    assert numbers[0] >= int(result["shard"]["SequenceNumberRange"]["StartingSequenceNumber"])


# --- errors ---------------------------------------------------------------------------------------------------

def client_error(name: str, *, not_found: bool = False, expired: bool = False,
                 trimmed: bool = False) -> dict[str, Any]:
    """The members streams.mjs reports for an error the SDK raised from a 400 answer named `name` (and which of
    the Streams model's error classes it is an instance of)."""
    return {"name": name, "fault": "client", "status": 400, "isResourceNotFound": not_found,
            "isExpiredIterator": expired, "isTrimmedDataAccess": trimmed, "isServiceException": True}


def test_errors(node_server: ServerProcess) -> None:
    """The SDK raises its own ResourceNotFoundException class for an unknown stream, shard or table, and a
    ValidationException (a service exception the Streams model does not name) for a malformed or altered
    iterator and for invalid parameters, with the server's messages."""
    result = run_case(node_server.endpoint, "errors")

    def error(case: str) -> dict[str, Any]:
        return {key: value for key, value in result[case].items() if key != "message"}

    not_found = client_error("ResourceNotFoundException", not_found=True)
    for case in ("describeUnknownStream", "iteratorOfUnknownStream", "iteratorOfUnknownShard",
                 "listStreamsOfUnknownTable"):
        assert error(case) == not_found, case
    stream_gone = f"Requested resource not found: Stream: {result['unknownArn']} not found"
    assert result["describeUnknownStream"]["message"] == stream_gone
    assert result["iteratorOfUnknownStream"]["message"] == stream_gone
    assert result["iteratorOfUnknownShard"]["message"] == "Requested resource not found: Shard does not exist"
    for case in ("malformedIterator", "alteredIterator", "limitZero", "atSequenceNumberWithoutOne"):
        assert error(case) == client_error("ValidationException"), case
    assert result["malformedIterator"]["message"] == result["alteredIterator"]["message"] == "Invalid ShardIterator"
    assert result["limitZero"]["message"] == (
        "1 validation error detected: Value '0' at 'limit' failed to satisfy constraint: "
        "Member must have value greater than or equal to 1")
    assert "AT_SEQUENCE_NUMBER" in result["atSequenceNumberWithoutOne"]["message"]


def test_expired_iterator(node_server: ServerProcess) -> None:
    """An iterator issued more than 15 minutes ago is refused with the SDK's ExpiredIteratorException class.
    The iterator is made here as the server makes them, with an older issue time (it carries its issue time),
    from a real one, since waiting 15 minutes is not a test."""
    ddb, streams = make_client(node_server.endpoint), make_client(node_server.endpoint, "dynamodbstreams")
    name = unique_name("node")
    ddb.create_table(TableName=name, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST",
                     StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"})
    arn = ddb.describe_table(TableName=name)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    real = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="LATEST")["ShardIterator"]
    stream_arn, position = iterators.decode(real)
    old = iterators.encode(stream_arn, dataclasses.replace(position, issued_at=time.time() - 901))
    result = run_case(node_server.endpoint, "expired", old)["getRecords"]
    assert result == {**client_error("ExpiredIteratorException", expired=True),
                      "message": "Shard iterator has expired"}


def test_trimmed_records(trimming_server: ServerProcess) -> None:
    """Past retention, an iterator or a sequence number pointing at a trimmed record is refused with the SDK's
    TrimmedDataAccessException class, and TRIM_HORIZON starts after the trimmed records."""
    result = run_case(trimming_server.endpoint, "trimmed")
    trimmed = {**client_error("TrimmedDataAccessException", trimmed=True),
               "message": "The data you are trying to access has been trimmed"}
    assert result["atSequenceNumber"] == trimmed
    assert result["getRecords"] == trimmed
    assert result["trimHorizon"] == 0


# --- a consumer following shard lineage -----------------------------------------------------------------------

def test_consumer_follows_lineage_across_rollovers(rolling_server: ServerProcess) -> None:
    """A Lambda-style poller reading while six items are written over several 2-second rollovers, taking up a
    shard's children (DescribeStream's CHILD_SHARDS) once it has drained the shard, sees every version of every
    item exactly once and in order, and ends having drained every shard of the stream."""
    result = run_case(rolling_server.endpoint, "lineage")
    shards = {shard["ShardId"]: shard for shard in result["shards"]}
    roots = [shard_id for shard_id, shard in shards.items() if shard.get("ParentShardId") not in shards]
    assert len(roots) == 2  # --stream-shards 2
    assert len(shards) >= 4  # both shards rolled over (typically three times each in 6.5 s of writes)
    assert result["seen"] == {pk: list(range(result["versions"])) for pk in result["pks"]}
    assert result["records"] == result["versions"] * len(result["pks"])
    assert result["outOfOrder"] == []
    assert result["readWhileWriting"] > 0  # it read live, not only after the stream was disabled
    drained = result["drained"]
    assert sorted(drained) == sorted(shards)  # every shard, each once
    for shard_id, shard in shards.items():
        numbers = shard["SequenceNumberRange"]
        assert "EndingSequenceNumber" in numbers  # all closed: by rollover or by disabling the stream
        assert int(numbers["StartingSequenceNumber"]) <= int(numbers["EndingSequenceNumber"])
        parent = shard.get("ParentShardId")
        if parent in shards:
            assert drained.index(parent) < drained.index(shard_id)  # parents before children
            assert shard_id in result["children"][parent]
            assert int(numbers["StartingSequenceNumber"]) > int(
                shards[parent]["SequenceNumberRange"]["EndingSequenceNumber"])
    children = sorted(child for kids in result["children"].values() for child in kids)
    assert children == sorted(set(shards) - set(roots))
