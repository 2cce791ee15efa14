"""Online index creation, deletion and throughput updates (UpdateTable GlobalSecondaryIndexUpdates)."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.api.test_indexes import INVALID, defs, error_of, gsi, schema
from tests.conftest import ServerProcess, make_client, unique_name

CREATE_G = {"Create": gsi("byG", "g", ranges=0)}


def base_table(ddb, items: int = 0) -> str:  # type: ignore[no-untyped-def]
    name = unique_name("online")
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=defs(pk="S"),
                     KeySchema=schema("pk", ranges=0))
    for start in range(0, items, 25):
        ddb.batch_write_item(RequestItems={name: [
            {"PutRequest": {"Item": {"pk": {"S": f"k{n:05d}"}, "g": {"S": f"g{n % 7}"}}}}
            for n in range(start, min(start + 25, items))]})
    return name


def wait_active(ddb, name: str, index: str) -> dict:  # type: ignore[no-untyped-def, type-arg]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for description in ddb.describe_table(TableName=name)["Table"].get("GlobalSecondaryIndexes", []):
            if description["IndexName"] == index and description["IndexStatus"] == "ACTIVE":
                return description  # type: ignore[no-any-return]
        time.sleep(0.02)
    raise AssertionError("index never became ACTIVE")


def scan_index(ddb, name: str, index: str) -> list[dict]:  # type: ignore[no-untyped-def, type-arg]
    items, start = [], None
    while True:
        page = ddb.scan(TableName=name, IndexName=index, **({"ExclusiveStartKey": start} if start else {}))
        items.extend(page["Items"])
        start = page.get("LastEvaluatedKey")
        if start is None:
            return items


def _paused_backfill_server(monkeypatch, pause: str) -> Iterator[ServerProcess]:  # type: ignore[no-untyped-def]
    """A server whose backfill pauses `pause` seconds between chunks of BACKFILL_CHUNK items."""
    monkeypatch.setenv("OPENDDB_BACKFILL_PAUSE", pause)
    process = ServerProcess(None)
    try:
        yield process
    finally:
        process.finish()


@pytest.fixture
def slow_backfill(monkeypatch):  # type: ignore[no-untyped-def]
    """Backfill paused 100 ms between chunks (12 chunks of the test's 3,000 items: over a second), so writes surely
    race it, even from a client slowed down by a loaded machine."""
    yield from _paused_backfill_server(monkeypatch, "0.1")


def test_online_creation_under_concurrent_writes(slow_backfill):
    """Items written, moved and deleted while the index backfills are in it exactly once when it is ACTIVE."""
    server = slow_backfill
    ddb = make_client(server.endpoint)
    name = base_table(ddb, 3000)
    response = ddb.update_table(TableName=name, AttributeDefinitions=defs(g="S"),
                                GlobalSecondaryIndexUpdates=[CREATE_G])
    (created,) = response["TableDescription"]["GlobalSecondaryIndexes"]
    # The answer comes while the index is being allocated: Backfilling false; DescribeTable then shows true.
    assert created["IndexStatus"] == "CREATING" and created["Backfilling"] is False
    (backfilling,) = ddb.describe_table(TableName=name)["Table"]["GlobalSecondaryIndexes"]
    assert backfilling["IndexStatus"] == "CREATING" and backfilling["Backfilling"] is True
    with pytest.raises(ClientError) as excinfo:
        ddb.query(TableName=name, IndexName="byG", KeyConditionExpression="g = :g",
                  ExpressionAttributeValues={":g": {"S": "g1"}})
    assert error_of(excinfo) == ("ValidationException", "Cannot read from backfilling global secondary index")
    with pytest.raises(ClientError) as excinfo:  # nor may the table go while its index is being built
        ddb.delete_table(TableName=name)
    assert error_of(excinfo) == ("ResourceInUseException", "Attempt to change a resource which is still in use: "
                                 "Cannot delete table while indexes are being created, updated, or deleted.")

    writer = make_client(server.endpoint)
    stop = threading.Event()
    rounds = [0]

    def churn() -> None:
        n = 0
        while not stop.is_set():
            rounds[0] = n
            writer.put_item(TableName=name, Item={"pk": {"S": f"new{n:05d}"}, "g": {"S": "fresh"}})
            writer.update_item(TableName=name, Key={"pk": {"S": f"k{(n * 7) % 3000:05d}"}},
                               UpdateExpression="SET g = :m", ExpressionAttributeValues={":m": {"S": "moved"}})
            writer.delete_item(TableName=name, Key={"pk": {"S": f"k{(n * 13 + 5) % 3000:05d}"}})
            n += 1

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        wait_active(ddb, name, "byG")
    finally:
        stop.set()
        thread.join()
    assert rounds[0] > 0  # the writer really ran while the index was backfilling
    table = {i["pk"]["S"]: i["g"]["S"] for i in scan_index_or_table(ddb, name)}
    indexed = Counter(i["pk"]["S"] for i in scan_index(ddb, name, "byG"))
    assert set(indexed) == set(table) and max(indexed.values()) == 1
    assert {i["pk"]["S"]: i["g"]["S"] for i in scan_index(ddb, name, "byG")} == table


@pytest.fixture
def paced_backfill(monkeypatch):  # type: ignore[no-untyped-def]
    """Backfill paused 300 ms between chunks: an index of a few chunks stays CREATING for a second or so, however
    busy the machine is with other tests."""
    yield from _paused_backfill_server(monkeypatch, "0.3")


def test_an_index_may_be_deleted_while_it_backfills(paced_backfill):
    """The index being built may be deleted while it backfills (CREATING, Backfilling true: the API Reference);
    no other index may be created or deleted meanwhile. The deleted index is gone, its entries with it."""
    server = paced_backfill
    ddb = make_client(server.endpoint)
    name = base_table(ddb, 700)  # three chunks
    ddb.update_table(TableName=name, AttributeDefinitions=defs(g="S", h="S"), GlobalSecondaryIndexUpdates=[
        {"Create": gsi("byH", "h", ranges=0)}])
    wait_active(ddb, name, "byH")
    ddb.update_table(TableName=name, AttributeDefinitions=defs(g="S"), GlobalSecondaryIndexUpdates=[CREATE_G])
    building = {i["IndexName"]: i for i in ddb.describe_table(TableName=name)["Table"]["GlobalSecondaryIndexes"]}
    assert (building["byG"]["IndexStatus"], building["byG"]["Backfilling"]) == ("CREATING", True)
    once = boto3.client("dynamodb", endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id="t",
                        aws_secret_access_key="t", config=Config(retries={"total_max_attempts": 1}))
    with pytest.raises(ClientError) as excinfo:  # another index's deletion waits (asked once: no client retry)
        once.update_table(TableName=name, GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "byH"}}])
    assert error_of(excinfo)[0] == "LimitExceededException"
    answer = ddb.update_table(TableName=name, GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "byG"}}])
    statuses = {i["IndexName"]: i["IndexStatus"] for i in answer["TableDescription"]["GlobalSecondaryIndexes"]}
    assert statuses == {"byH": "ACTIVE", "byG": "DELETING"}
    deadline = time.monotonic() + 10  # (DELETING until a backfill chunk scheduled before it finds its index gone)
    while time.monotonic() < deadline:
        if len(ddb.describe_table(TableName=name)["Table"]["GlobalSecondaryIndexes"]) == 1:
            break
        time.sleep(0.05)
    assert [i["IndexName"] for i in ddb.describe_table(TableName=name)["Table"]["GlobalSecondaryIndexes"]] == ["byH"]
    with pytest.raises(ClientError) as excinfo:
        ddb.scan(TableName=name, IndexName="byG")
    assert error_of(excinfo) == ("ValidationException", "The table does not have the specified index: byG")
    ddb.update_table(TableName=name, AttributeDefinitions=defs(g="S"), GlobalSecondaryIndexUpdates=[CREATE_G])
    wait_active(ddb, name, "byG")  # built again from scratch, complete
    assert len(scan_index(ddb, name, "byG")) == len(scan_index_or_table(ddb, name))


def scan_index_or_table(ddb, name: str) -> list[dict]:  # type: ignore[no-untyped-def, type-arg]
    items, start = [], None
    while True:
        page = ddb.scan(TableName=name, **({"ExclusiveStartKey": start} if start else {}))
        items.extend(page["Items"])
        start = page.get("LastEvaluatedKey")
        if start is None:
            return items


def test_one_online_change_at_a_time(ddb):
    """Only one index may be created or deleted per UpdateTable, and none while another is building."""
    name = base_table(ddb)
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, AttributeDefinitions=defs(g="S", h="S"), GlobalSecondaryIndexUpdates=[
            CREATE_G, {"Create": gsi("byH", "h", ranges=0)}])
    assert error_of(excinfo) == ("LimitExceededException", "Subscriber limit exceeded: Only 1 online index can be "
                                 "created or deleted simultaneously per table")


def test_create_needs_definitions_and_unique_name(ddb):
    """A new index's key attributes must be defined; its name must be new."""
    name = base_table(ddb)
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, GlobalSecondaryIndexUpdates=[CREATE_G])
    code, message = error_of(excinfo)
    assert code == "ValidationException" and message.startswith(INVALID)
    with pytest.raises(ClientError) as excinfo:  # a key left out of AttributeDefinitions (captured in 2019)
        ddb.update_table(TableName=name, AttributeDefinitions=defs(g="S"), GlobalSecondaryIndexUpdates=[{"Create": {
            **CREATE_G["Create"], "KeySchema": schema("g", "pk")}}])
    assert error_of(excinfo) == ("ValidationException",
                                 "Invalid KeySchema: Some index key attribute have no definition")
    ddb.update_table(TableName=name, AttributeDefinitions=defs(g="S"), GlobalSecondaryIndexUpdates=[CREATE_G])
    wait_active(ddb, name, "byG")
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, AttributeDefinitions=defs(g="S"), GlobalSecondaryIndexUpdates=[CREATE_G])
    assert error_of(excinfo) == ("ValidationException", "Attempting to create an index which already exists")


def test_redeclared_attribute_keeps_its_type(ddb):
    """An attribute the table defines, sent again with another type beside a new index, keeps its type: DynamoDB
    ignores the conflicting type and creates the index (captured in paritysuite/dynamodb-conformance issue 78)."""
    name = base_table(ddb)
    ddb.update_table(TableName=name, AttributeDefinitions=defs(pk="N", g="S"), GlobalSecondaryIndexUpdates=[CREATE_G])
    wait_active(ddb, name, "byG")
    table = ddb.describe_table(TableName=name)["Table"]
    assert sorted((d["AttributeName"], d["AttributeType"]) for d in table["AttributeDefinitions"]) == [
        ("g", "S"), ("pk", "S")]
    ddb.put_item(TableName=name, Item={"pk": {"S": "k"}, "g": {"S": "x"}})
    assert ddb.query(TableName=name, IndexName="byG", KeyConditionExpression="g = :g",
                     ExpressionAttributeValues={":g": {"S": "x"}})["Count"] == 1


def test_delete_index(ddb):
    """Deleting an index removes it, its entries and its now unused attribute definition."""
    name = base_table(ddb, 30)
    ddb.update_table(TableName=name, AttributeDefinitions=defs(g="S"), GlobalSecondaryIndexUpdates=[CREATE_G])
    active = wait_active(ddb, name, "byG")
    assert active["ItemCount"] == 30
    assert "Backfilling" not in active  # shown only while an index UpdateTable added is CREATING
    assert active["WarmThroughput"] == {"ReadUnitsPerSecond": 12000, "WriteUnitsPerSecond": 4000, "Status": "ACTIVE"}
    answer = ddb.update_table(TableName=name, GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "byG"}}])
    (deleting,) = answer["TableDescription"]["GlobalSecondaryIndexes"]  # the answer still shows it, going
    assert (deleting["IndexName"], deleting["IndexStatus"], deleting["ItemCount"]) == ("byG", "DELETING", 30)
    table = ddb.describe_table(TableName=name)["Table"]
    assert "GlobalSecondaryIndexes" not in table
    assert table["AttributeDefinitions"] == defs(pk="S")
    with pytest.raises(ClientError) as excinfo:
        ddb.scan(TableName=name, IndexName="byG")
    assert error_of(excinfo) == ("ValidationException", "The table does not have the specified index: byG")
    # A new index of the same name starts from the table's items, not the old entries.
    ddb.put_item(TableName=name, Item={"pk": {"S": "late"}, "g": {"S": "x"}})
    ddb.update_table(TableName=name, AttributeDefinitions=defs(g="S"), GlobalSecondaryIndexUpdates=[CREATE_G])
    assert wait_active(ddb, name, "byG")["ItemCount"] == 31
    assert len(scan_index(ddb, name, "byG")) == 31


def test_update_index_throughput(ddb):
    """Update changes a provisioned GSI's throughput."""
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=defs(pk="S", g="S"), KeySchema=schema("pk", ranges=0),
                     ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1},
                     GlobalSecondaryIndexes=[{**gsi("byG", "g", ranges=0), "ProvisionedThroughput": {
                         "ReadCapacityUnits": 1, "WriteCapacityUnits": 1}}])
    ddb.update_table(TableName=name, GlobalSecondaryIndexUpdates=[{"Update": {
        "IndexName": "byG", "ProvisionedThroughput": {"ReadCapacityUnits": 5, "WriteCapacityUnits": 6}}}])
    (index,) = ddb.describe_table(TableName=name)["Table"]["GlobalSecondaryIndexes"]
    throughput = index["ProvisionedThroughput"]
    assert (throughput["ReadCapacityUnits"], throughput["WriteCapacityUnits"]) == (5, 6)
    assert "Backfilling" not in index
    assert index["WarmThroughput"] == {"ReadUnitsPerSecond": 5, "WriteUnitsPerSecond": 6, "Status": "ACTIVE"}
    assert "LastIncreaseDateTime" in throughput


def _status_in_store(data_dir: str, table: str) -> str:
    """The index status the store holds, read from its file: asking the server (DescribeTable, a Query on the
    index) would itself take the backfill up."""
    db = sqlite3.connect(f"file:{data_dir}/openddb.sqlite3?mode=ro", uri=True)
    try:
        (meta,) = db.execute("SELECT meta FROM tables WHERE name = ?", (table,)).fetchone()
    finally:
        db.close()
    return str(json.loads(meta)["indexes"][0]["status"])


@pytest.mark.skipif(bool(os.environ.get("OPENDDB_TEST_ENGINE")), reason="reads the embedded store's file")
def test_backfill_cut_short_by_a_crash_goes_on_by_itself(tmp_path, monkeypatch):
    """After a kill -9 in the middle of an index backfill, the restarted server finishes it without being
    asked (as DynamoDB goes on building an index whatever its clients do); the index then holds every item."""
    data_dir = str(tmp_path)
    monkeypatch.setenv("OPENDDB_BACKFILL_PAUSE", "0.5")  # 12 chunks: about 6 s of backfill
    first = ServerProcess(data_dir, "--workers", "1")  # one process: the kill leaves no worker behind
    try:
        ddb = make_client(first.endpoint)
        name = base_table(ddb, 3000)
        ddb.update_table(TableName=name, AttributeDefinitions=defs(g="S"), GlobalSecondaryIndexUpdates=[CREATE_G])
        time.sleep(0.3)
        first.stop(kill=True)
    finally:
        first.log.close()
    assert _status_in_store(data_dir, name) == "CREATING"
    monkeypatch.delenv("OPENDDB_BACKFILL_PAUSE")
    server = ServerProcess(data_dir)
    try:
        deadline = time.monotonic() + 20
        while _status_in_store(data_dir, name) != "ACTIVE":
            assert time.monotonic() < deadline, "the backfill was not taken up"
            time.sleep(0.1)
        ddb = make_client(server.endpoint)
        assert len(scan_index(ddb, name, "byG")) == 3000
    finally:
        server.finish()
