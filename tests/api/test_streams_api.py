"""The DynamoDB Streams API through boto3's `dynamodbstreams` client: ListStreams, DescribeStream,
GetShardIterator and GetRecords on the server's own port, with DynamoDB's record format and errors."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from openddb.streams import iterators
from tests.api.test_protocol import call
from tests.conftest import ServerProcess, make_client, unique_name

STREAMS_AUTH = ("AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, "
                "SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=00")


@pytest.fixture(scope="module")
def streams(server):  # type: ignore[no-untyped-def]
    return make_client(server.endpoint, "dynamodbstreams")


def streamed_table(ddb, view: str = "NEW_AND_OLD_IMAGES", *, sort: bool = False) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """A new table with a stream of `view`: (name, stream ARN)."""
    name = unique_name("st")
    definitions = [{"AttributeName": "pk", "AttributeType": "S"}]
    schema = [{"AttributeName": "pk", "KeyType": "HASH"}]
    if sort:
        definitions.append({"AttributeName": "sk", "AttributeType": "N"})
        schema.append({"AttributeName": "sk", "KeyType": "RANGE"})
    ddb.create_table(TableName=name, AttributeDefinitions=definitions, KeySchema=schema,
                     BillingMode="PAY_PER_REQUEST",
                     StreamSpecification={"StreamEnabled": True, "StreamViewType": view})
    return name, ddb.describe_table(TableName=name)["Table"]["LatestStreamArn"]


def error_of(excinfo: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


def shards_of(streams, arn: str) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """Every shard of a stream, following DescribeStream's pages."""
    shards: list[dict[str, Any]] = []
    request: dict[str, Any] = {"StreamArn": arn}
    while True:
        description = streams.describe_stream(**request)["StreamDescription"]
        shards += description["Shards"]
        if "LastEvaluatedShardId" not in description:
            return shards
        request["ExclusiveStartShardId"] = description["LastEvaluatedShardId"]


def drain(streams, iterator: str | None, limit: int = 1000) -> tuple[list[dict[str, Any]], str | None]:  # type: ignore[no-untyped-def]
    """Records from an iterator until a page comes back empty (or the shard ends): (records, last iterator)."""
    records: list[dict[str, Any]] = []
    while iterator is not None:
        page = streams.get_records(ShardIterator=iterator, Limit=limit)
        records += page["Records"]
        iterator = page.get("NextShardIterator")
        if not page["Records"]:
            break
    return records, iterator


def every_record(streams, arn: str) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """Every record of a stream from TRIM_HORIZON, shard by shard, parents before children."""
    records: list[dict[str, Any]] = []
    for shard in shards_of(streams, arn):
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records += drain(streams, iterator)[0]
    return records


def by_item(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    items: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        items.setdefault(record["dynamodb"]["Keys"]["pk"]["S"], []).append(record)
    return items


def shard_of_item(streams, arn: str, pk: str) -> str:  # type: ignore[no-untyped-def]
    """The shard holding an item's records (the item must have one)."""
    for shard in shards_of(streams, arn):
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        if any(r["dynamodb"]["Keys"]["pk"]["S"] == pk for r in drain(streams, iterator)[0]):
            return str(shard["ShardId"])
    raise AssertionError(f"no record of {pk}")


# --- ListStreams ------------------------------------------------------------------------------------------------

def test_list_streams_by_table_and_in_pages(ddb, streams):
    """Each stream is listed with its table and label; TableName filters; Limit pages with LastEvaluatedStreamArn
    and ExclusiveStartStreamArn."""
    first, first_arn = streamed_table(ddb)
    _, second_arn = streamed_table(ddb)
    listed = streams.list_streams(TableName=first)["Streams"]
    assert listed == [{"StreamArn": first_arn, "TableName": first, "StreamLabel": first_arn.split("/stream/")[1]}]
    every: list[str] = []
    request: dict[str, Any] = {"Limit": 1}
    while True:  # (boto3 has no paginator for ListStreams: a consumer follows LastEvaluatedStreamArn itself)
        page = streams.list_streams(**request)
        every += [s["StreamArn"] for s in page["Streams"]]
        if "LastEvaluatedStreamArn" not in page:
            break
        request["ExclusiveStartStreamArn"] = page["LastEvaluatedStreamArn"]
    assert first_arn in every and second_arn in every and len(every) == len(set(every))
    page = streams.list_streams(Limit=1)
    start = page["LastEvaluatedStreamArn"]
    assert [s["StreamArn"] for s in page["Streams"]] == [start]
    after = [s["StreamArn"] for s in streams.list_streams(Limit=100, ExclusiveStartStreamArn=start)["Streams"]]
    # The page after `start` begins with the stream listed after it (other tests may add streams meanwhile: at
    # the end, as streams are listed oldest first).
    assert after[0] == every[every.index(start) + 1] and start not in after


def test_list_streams_refusals(ddb, streams):
    """Out-of-range limits and a table with no stream ever are refused in DynamoDB's words."""
    with pytest.raises(ClientError) as excinfo:
        streams.list_streams(Limit=101)
    assert error_of(excinfo) == ("ValidationException", "1 validation error detected: Value '101' at 'limit' failed "
                                 "to satisfy constraint: Member must have value less than or equal to 100")
    with pytest.raises(ClientError) as excinfo:
        streams.list_streams(TableName=unique_name("none"))
    assert error_of(excinfo)[0] == "ResourceNotFoundException"
    plain = unique_name("plain")
    ddb.create_table(TableName=plain, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST")
    assert streams.list_streams(TableName=plain)["Streams"] == []


# --- DescribeStream ---------------------------------------------------------------------------------------------

def test_describe_stream(ddb, streams):
    """The description names the stream, its table, key schema, view type and open shards (no ending number)."""
    name, arn = streamed_table(ddb, "KEYS_ONLY", sort=True)
    description = streams.describe_stream(StreamArn=arn)["StreamDescription"]
    assert description["StreamArn"] == arn and description["TableName"] == name
    assert description["StreamLabel"] == arn.split("/stream/")[1]
    assert description["StreamStatus"] == "ENABLED" and description["StreamViewType"] == "KEYS_ONLY"
    assert description["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"},
                                        {"AttributeName": "sk", "KeyType": "RANGE"}]
    assert abs(description["CreationRequestDateTime"].timestamp() - time.time()) < 60
    assert description["Shards"] and "LastEvaluatedShardId" not in description
    for shard in description["Shards"]:
        assert re.fullmatch(r"shardId-\d{20}-[0-9a-f]{8}", shard["ShardId"])
        assert set(shard["SequenceNumberRange"]) == {"StartingSequenceNumber"}
        assert re.fullmatch(r"\d{21}", shard["SequenceNumberRange"]["StartingSequenceNumber"])
    # One shard a page: LastEvaluatedShardId leads on, and every shard comes once.
    paged: list[str] = []
    request: dict[str, Any] = {"StreamArn": arn, "Limit": 1}
    while True:
        page = streams.describe_stream(**request)["StreamDescription"]
        paged += [s["ShardId"] for s in page["Shards"]]
        if "LastEvaluatedShardId" not in page:
            break
        request["ExclusiveStartShardId"] = page["LastEvaluatedShardId"]
    assert paged == [s["ShardId"] for s in description["Shards"]]


def test_disabled_stream_is_described_disabled_with_closed_shards(ddb, streams):
    """Disabling the stream leaves it readable, DISABLED, every shard closed with an ending sequence number; a
    consumer drains each shard and then gets no NextShardIterator."""
    name, arn = streamed_table(ddb)
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}})
    ddb.update_table(TableName=name, StreamSpecification={"StreamEnabled": False})
    description = streams.describe_stream(StreamArn=arn)["StreamDescription"]
    assert description["StreamStatus"] == "DISABLED"
    assert all("EndingSequenceNumber" in s["SequenceNumberRange"] for s in description["Shards"])
    found = []
    for shard in description["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records, left = drain(streams, iterator)
        assert left is None  # drained: a closed shard hands out no further iterator
        found += records
    assert [r["eventName"] for r in found] == ["INSERT"]
    assert arn in [s["StreamArn"] for s in streams.list_streams(TableName=name)["Streams"]]


def test_describe_stream_refusals(server, streams):
    """A malformed ARN, an unknown stream and out-of-range limits are refused as DynamoDB refuses them."""
    with pytest.raises(ClientError) as excinfo:
        streams.describe_stream(StreamArn="arn:aws:dynamodb:us-east-1:000000000000:table/x/stream/nope")
    assert error_of(excinfo) == ("ValidationException", "Invalid StreamArn")
    missing = "arn:aws:dynamodb:us-east-1:000000000000:table/nothing-here/stream/2020-01-01T00:00:00.000"
    with pytest.raises(ClientError) as excinfo:
        streams.describe_stream(StreamArn=missing)
    assert error_of(excinfo) == ("ResourceNotFoundException",
                                 f"Requested resource not found: Stream: {missing} not found")
    # (boto3 checks the minimum itself: sent raw; the limit is checked before the stream is looked up)
    response, data = call(server, json.dumps({"StreamArn": missing, "Limit": 0}),
                          "DynamoDBStreams_20120810.DescribeStream", STREAMS_AUTH)
    assert response.status == 400 and json.loads(data) == {
        "__type": "com.amazon.coral.validate#ValidationException",
        "message": "1 validation error detected: Value '0' at 'limit' failed to satisfy constraint: Member must have "
                   "value greater than or equal to 1"}


# --- records ------------------------------------------------------------------------------------------------------

def test_records_of_every_write_path(ddb, streams):
    """Put, update, delete, batch writes and transactions each write one record per changed item, with DynamoDB's
    record fields; a write that changes nothing writes none."""
    name, arn = streamed_table(ddb)
    ddb.put_item(TableName=name, Item={"pk": {"S": "p"}, "n": {"N": "1"}})
    ddb.put_item(TableName=name, Item={"pk": {"S": "p"}, "n": {"N": "1"}})  # the same item again: no change
    ddb.put_item(TableName=name, Item={"n": {"N": "1"}, "pk": {"S": "p"}})  # ... in another order: no change
    ddb.update_item(TableName=name, Key={"pk": {"S": "p"}}, UpdateExpression="SET n = n + :one",
                    ExpressionAttributeValues={":one": {"N": "1"}})
    ddb.batch_write_item(RequestItems={name: [{"PutRequest": {"Item": {"pk": {"S": "b1"}}}},
                                              {"PutRequest": {"Item": {"pk": {"S": "b2"}}}}]})
    ddb.transact_write_items(TransactItems=[
        {"Put": {"TableName": name, "Item": {"pk": {"S": "t"}, "s": {"S": "x"}}}},
        {"Delete": {"TableName": name, "Key": {"pk": {"S": "b1"}}}}])
    ddb.delete_item(TableName=name, Key={"pk": {"S": "p"}})
    items = by_item(every_record(streams, arn))
    assert {pk: [r["eventName"] for r in records] for pk, records in items.items()} == {
        "p": ["INSERT", "MODIFY", "REMOVE"], "b1": ["INSERT", "REMOVE"], "b2": ["INSERT"], "t": ["INSERT"]}
    insert, modify, remove = items["p"]
    assert insert["dynamodb"]["NewImage"] == {"pk": {"S": "p"}, "n": {"N": "1"}}
    assert "OldImage" not in insert["dynamodb"]
    assert modify["dynamodb"]["OldImage"]["n"] == {"N": "1"} and modify["dynamodb"]["NewImage"]["n"] == {"N": "2"}
    assert remove["dynamodb"]["OldImage"]["n"] == {"N": "2"} and "NewImage" not in remove["dynamodb"]
    for record in (insert, modify, remove):
        assert record["eventSource"] == "aws:dynamodb" and record["eventVersion"] == "1.1"
        assert record["awsRegion"] == "us-east-1" and re.fullmatch(r"[0-9a-f]{32}", record["eventID"])
        assert record["dynamodb"]["Keys"] == {"pk": {"S": "p"}}
        assert record["dynamodb"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
        assert re.fullmatch(r"\d{21}", record["dynamodb"]["SequenceNumber"])
        assert abs(record["dynamodb"]["ApproximateCreationDateTime"].timestamp() - time.time()) < 60
        assert "userIdentity" not in record
    sequence = [int(r["dynamodb"]["SequenceNumber"]) for r in items["p"]]
    assert sequence == sorted(sequence) and len(set(sequence)) == 3
    # SizeBytes: the keys and the images the record carries, sized as DynamoDB sizes items (pk "p": 3 bytes, n 1:
    # 1 + 2 bytes), the API Reference's own example being its keys' size alone.
    assert [r["dynamodb"]["SizeBytes"] for r in items["p"]] == [3 + 6, 3 + 6 + 6, 3 + 6]
    # The event ids are stable: the same record read again has the same one.
    assert [r["eventID"] for r in by_item(every_record(streams, arn))["p"]] == [r["eventID"] for r in items["p"]]


@pytest.mark.parametrize(("view", "old", "new"), [
    ("KEYS_ONLY", False, False), ("NEW_IMAGE", False, True), ("OLD_IMAGE", True, False),
    ("NEW_AND_OLD_IMAGES", True, True)])
def test_images_follow_the_view_type(ddb, streams, view, old, new):
    """Each view type carries its images: a MODIFY record has OldImage and NewImage only as the type says."""
    name, arn = streamed_table(ddb, view)
    ddb.put_item(TableName=name, Item={"pk": {"S": "k"}, "v": {"S": "one"}})
    ddb.put_item(TableName=name, Item={"pk": {"S": "k"}, "v": {"S": "two"}})
    modify = every_record(streams, arn)[1]["dynamodb"]
    assert modify["StreamViewType"] == view and modify["Keys"] == {"pk": {"S": "k"}}
    assert ("OldImage" in modify) == old and ("NewImage" in modify) == new
    if old:
        assert modify["OldImage"]["v"] == {"S": "one"}
    if new:
        assert modify["NewImage"]["v"] == {"S": "two"}


def test_record_wire_form(server, ddb, streams):
    """On the wire ApproximateCreationDateTime is whole epoch seconds (a JSON number, as botocore's timestamp
    parses it) and SequenceNumber a string."""
    name, arn = streamed_table(ddb, "KEYS_ONLY")
    ddb.put_item(TableName=name, Item={"pk": {"S": "w"}})
    shard = shard_of_item(streams, arn, "w")
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    response, data = call(server, json.dumps({"ShardIterator": iterator["ShardIterator"]}),
                          "DynamoDBStreams_20120810.GetRecords", STREAMS_AUTH)
    assert response.status == 200
    record = json.loads(data)["Records"][0]
    assert isinstance(record["dynamodb"]["ApproximateCreationDateTime"], int)
    assert isinstance(record["dynamodb"]["SequenceNumber"], str)
    assert set(record) == {"eventID", "eventName", "eventVersion", "eventSource", "awsRegion", "dynamodb"}


# --- iterators ----------------------------------------------------------------------------------------------------

def test_iterator_types(ddb, streams):
    """TRIM_HORIZON reads from the oldest record, LATEST only what comes after it, AT_SEQUENCE_NUMBER from a record
    and AFTER_SEQUENCE_NUMBER from the one after it."""
    name, arn = streamed_table(ddb)
    for n in range(3):
        ddb.put_item(TableName=name, Item={"pk": {"S": "i"}, "n": {"N": str(n)}})
    shard = shard_of_item(streams, arn, "i")

    def read(kind: str, number: str | None = None) -> tuple[list[str], str | None]:
        extra = {} if number is None else {"SequenceNumber": number}
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType=kind,
                                              **extra)["ShardIterator"]
        records, after = drain(streams, iterator)
        return [r["dynamodb"]["NewImage"]["n"]["N"] for r in records], after

    everything, _ = read("TRIM_HORIZON")
    assert everything == ["0", "1", "2"]
    records = drain(streams, streams.get_shard_iterator(StreamArn=arn, ShardId=shard,
                                                        ShardIteratorType="TRIM_HORIZON")["ShardIterator"])[0]
    second = records[1]["dynamodb"]["SequenceNumber"]
    assert read("AT_SEQUENCE_NUMBER", second)[0] == ["1", "2"]
    assert read("AFTER_SEQUENCE_NUMBER", second)[0] == ["2"]
    nothing, latest = read("LATEST")
    assert nothing == [] and latest is not None
    ddb.put_item(TableName=name, Item={"pk": {"S": "i"}, "n": {"N": "3"}})
    assert [r["dynamodb"]["NewImage"]["n"]["N"] for r in drain(streams, latest)[0]] == ["3"]


def test_get_records_pages_by_limit(ddb, streams):
    """Limit caps a page; NextShardIterator goes on from the record after the page's last."""
    name, arn = streamed_table(ddb, "KEYS_ONLY", sort=True)
    for n in range(5):
        ddb.put_item(TableName=name, Item={"pk": {"S": "l"}, "sk": {"N": str(n)}})
    shard = shard_of_item(streams, arn, "l")
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard,
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    pages = []
    for _ in range(3):
        page = streams.get_records(ShardIterator=iterator, Limit=2)
        pages.append([r["dynamodb"]["Keys"]["sk"]["N"] for r in page["Records"]])
        iterator = page["NextShardIterator"]
    assert pages == [["0", "1"], ["2", "3"], ["4"]]
    assert streams.get_records(ShardIterator=iterator)["Records"] == []  # an open shard: more may come


def test_get_records_stops_at_one_megabyte(ddb, streams):
    """A page holds at most 1 MB of records (by SizeBytes): three records of ~390 KB come as two, then one."""
    name, arn = streamed_table(ddb, "NEW_IMAGE", sort=True)
    for n in range(3):
        ddb.put_item(TableName=name, Item={"pk": {"S": "big"}, "sk": {"N": str(n)}, "blob": {"S": "x" * 390_000}})
    shard = shard_of_item(streams, arn, "big")
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard,
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    first = streams.get_records(ShardIterator=iterator)
    assert [r["dynamodb"]["Keys"]["sk"]["N"] for r in first["Records"]] == ["0", "1"]
    assert sum(r["dynamodb"]["SizeBytes"] for r in first["Records"]) <= 1024 * 1024
    second = streams.get_records(ShardIterator=first["NextShardIterator"])
    assert [r["dynamodb"]["Keys"]["sk"]["N"] for r in second["Records"]] == ["2"]


def test_iterator_refusals(ddb, streams):
    """Sequence numbers are required by the AT/AFTER types and refused by the others; unknown shards, malformed
    and expired iterators and out-of-range limits are refused with DynamoDB's error types."""
    _, arn = streamed_table(ddb)
    shard = shards_of(streams, arn)[0]["ShardId"]
    number = "0" * 21
    for kind, extra in (("AT_SEQUENCE_NUMBER", {}), ("TRIM_HORIZON", {"SequenceNumber": number})):
        with pytest.raises(ClientError) as excinfo:
            streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType=kind, **extra)
        assert error_of(excinfo)[0] == "ValidationException"
    with pytest.raises(ClientError) as excinfo:
        streams.get_shard_iterator(StreamArn=arn, ShardId="shardId-00000000000000000000-00000000",
                                   ShardIteratorType="LATEST")
    assert error_of(excinfo) == ("ResourceNotFoundException", "Requested resource not found: Shard does not exist")
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="LATEST")["ShardIterator"]
    with pytest.raises(ClientError) as excinfo:
        streams.get_records(ShardIterator=iterator[:-6] + "AAAAAA")
    assert error_of(excinfo) == ("ValidationException", "Invalid ShardIterator")
    with pytest.raises(ClientError) as excinfo:
        streams.get_records(ShardIterator=iterator, Limit=1001)
    # (the service model documents LimitExceededException for "a value of more than 1000 for the limit")
    assert error_of(excinfo)[0] == "LimitExceededException"
    assert len(streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]) <= 1000
    # An iterator issued more than 15 minutes ago (made here as the server makes them, with an older issue time).
    stream_arn, position = iterators.decode(iterator)
    old = iterators.encode(stream_arn, dataclasses.replace(position, issued_at=time.time() - 901))
    with pytest.raises(ClientError) as excinfo:
        streams.get_records(ShardIterator=old)
    assert error_of(excinfo) == ("ExpiredIteratorException", "Shard iterator has expired")
    fresh = iterators.encode(stream_arn, dataclasses.replace(position, issued_at=time.time() - 600))
    assert streams.get_records(ShardIterator=fresh)["Records"] == []


def test_unknown_streams_operation(server):
    """An operation the Streams API does not have is unknown, as any other."""
    response, data = call(server, "{}", "DynamoDBStreams_20120810.PutRecords", STREAMS_AUTH)
    assert response.status == 400 and b"UnknownOperationException" in data


# --- TTL deletions ------------------------------------------------------------------------------------------------

def test_ttl_deletion_names_the_service(ddb, streams):
    """An item removed by TTL expiry has a REMOVE record with userIdentity {Type: Service, PrincipalId:
    dynamodb.amazonaws.com}; a user's deletion has none."""
    name, arn = streamed_table(ddb)
    ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "exp"})
    ddb.put_item(TableName=name, Item={"pk": {"S": "gone"}, "exp": {"N": str(int(time.time()) - 10)}})
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if "Item" not in ddb.get_item(TableName=name, Key={"pk": {"S": "gone"}}, ConsistentRead=True):
            break
        time.sleep(0.2)
    remove = by_item(every_record(streams, arn))["gone"][-1]
    assert remove["eventName"] == "REMOVE"
    assert remove["userIdentity"] == {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"}


# --- shard lineage across rollovers ---------------------------------------------------------------------------

def own_store(*options: str) -> ServerProcess:
    """A server on a store of its own (embedded, in memory), since stream settings apply to every stream of a
    store: on an engine the test run shares (OPENDDB_TEST_ENGINE) they would roll and trim other tests' streams."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("OPENDDB_TEST_ENGINE", raising=False)
        return ServerProcess(None, *options)


@pytest.fixture(scope="module")
def rolling() -> Iterator[ServerProcess]:
    """A server whose streams have two shards that roll over to children every 2 seconds."""
    process = own_store("--stream-shards", "2", "--stream-shard-seconds", "2")
    try:
        yield process
    finally:
        process.finish()


def test_lineage_across_rollovers(rolling):
    """Written across several rollovers, each item's records come in order to a consumer that reads each shard
    to its end before its children (found by ParentShardId and by ShardFilter CHILD_SHARDS)."""
    ddb, streams = make_client(rolling.endpoint), make_client(rolling.endpoint, "dynamodbstreams")
    name, arn = streamed_table(ddb, "NEW_IMAGE")
    deadline = time.monotonic() + 5.5
    version = 0
    while time.monotonic() < deadline:
        for pk in ("a", "b", "c", "d"):
            ddb.put_item(TableName=name, Item={"pk": {"S": pk}, "v": {"N": str(version)}})
        version += 1
        time.sleep(0.05)
    ddb.update_table(TableName=name, StreamSpecification={"StreamEnabled": False})  # closes the last shards
    shards = shards_of(streams, arn)
    assert len(shards) > 2  # rolled over at least once
    ids = {s["ShardId"] for s in shards}
    children: dict[str | None, list[str]] = {}
    for shard in shards:
        parent = shard.get("ParentShardId")
        children.setdefault(parent if parent in ids else None, []).append(shard["ShardId"])
    for parent, kids in children.items():
        if parent is not None:
            filtered = streams.describe_stream(StreamArn=arn, ShardFilter={"Type": "CHILD_SHARDS",
                                                                           "ShardId": parent})
            assert [s["ShardId"] for s in filtered["StreamDescription"]["Shards"]] == kids
    seen: dict[str, list[int]] = {}
    pending = list(children[None])
    while pending:  # parents before their children, as KCL-style consumers read
        shard_id = pending.pop(0)
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard_id,
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records, left = drain(streams, iterator)
        assert left is None
        for record in records:
            image = record["dynamodb"]["NewImage"]
            seen.setdefault(image["pk"]["S"], []).append(int(image["v"]["N"]))
        pending += children.get(shard_id, [])
    assert seen == {pk: list(range(version)) for pk in ("a", "b", "c", "d")}


# --- retention ------------------------------------------------------------------------------------------------

def test_trimmed_records_and_streams():
    """Past retention, records are gone: an iterator or sequence number pointing at them is refused with
    TrimmedDataAccessException; a disabled stream past retention is gone too (ResourceNotFoundException)."""
    process = own_store("--stream-retention-seconds", "2")
    try:
        ddb, streams = make_client(process.endpoint), make_client(process.endpoint, "dynamodbstreams")
        name, arn = streamed_table(ddb)
        ddb.put_item(TableName=name, Item={"pk": {"S": "old"}})
        shard = shard_of_item(streams, arn, "old")
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard,
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        number = drain(streams, iterator)[0][0]["dynamodb"]["SequenceNumber"]
        time.sleep(3.5)  # past retention, and a round of the server's upkeep (about once a second)
        with pytest.raises(ClientError) as excinfo:
            streams.get_records(ShardIterator=iterator)
        assert error_of(excinfo) == ("TrimmedDataAccessException", "The data you are trying to access has been "
                                     "trimmed")
        with pytest.raises(ClientError) as excinfo:
            streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="AT_SEQUENCE_NUMBER",
                                       SequenceNumber=number)
        assert error_of(excinfo)[0] == "TrimmedDataAccessException"
        horizon = streams.get_shard_iterator(StreamArn=arn, ShardId=shard,
                                             ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        assert streams.get_records(ShardIterator=horizon)["Records"] == []
        ddb.update_table(TableName=name, StreamSpecification={"StreamEnabled": False})
        time.sleep(3.5)
        with pytest.raises(ClientError) as excinfo:
            streams.describe_stream(StreamArn=arn)
        assert error_of(excinfo)[0] == "ResourceNotFoundException"
        with pytest.raises(ClientError) as excinfo:
            streams.get_records(ShardIterator=horizon)
        assert error_of(excinfo)[0] == "ResourceNotFoundException"
        assert streams.list_streams(TableName=name)["Streams"] == []
    finally:
        process.finish()
