"""Transient statuses (`--delay-transient-statuses`, DynamoDB Local's -delayTransientStatuses): tables and indexes
stay CREATING, UPDATING or DELETING for a while after each change, and requests meanwhile get DynamoDB's answers.

Two servers: one with a short real delay, for boto3's waiters; one with `--dev` and an hour's delay, whose clock
the tests move ahead (no sleeping, no race with a slow machine). The statuses are derived from stored times, so a
server with several workers agrees with itself (the last test)."""

from __future__ import annotations

import json
import os
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

import openddb.testing
from openddb import clock
from tests.conftest import ServerProcess, make_client, unique_name

DELAY = 2.0  # (long enough for a loaded machine to see CREATING and DELETING before they pass)
HOUR = 3600


@pytest.fixture(scope="module")
def slow() -> Iterator[ServerProcess]:
    process = ServerProcess(None, "--delay-transient-statuses", str(DELAY))
    try:
        yield process
    finally:
        process.finish()


@pytest.fixture(scope="module")
def dev() -> Iterator[ServerProcess]:
    process = ServerProcess(None, "--dev", "--delay-transient-statuses", str(HOUR))
    try:
        yield process
    finally:
        process.finish()


def advance(process: ServerProcess, seconds: float) -> None:
    request = urllib.request.Request(f"{process.endpoint}/openddb/clock", method="POST",
                                     data=json.dumps({"advance": seconds}).encode())
    with urllib.request.urlopen(request, timeout=60) as answer:  # (the duties it runs read every table of a store)
        assert answer.status == 200


def new_table(ddb: Any, name: str | None = None, **extra: Any) -> str:
    name = name or unique_name("transient")
    request = {"AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}], **extra}
    answer = ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                              KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}], **request)
    assert answer["TableDescription"]["TableStatus"] == "CREATING"
    return name


def status(ddb: Any, name: str) -> str:
    return str(ddb.describe_table(TableName=name)["Table"]["TableStatus"])


def in_use(ddb: Any, call: Any, **kwargs: Any) -> str:
    with pytest.raises(ddb.exceptions.ResourceInUseException) as refused:
        call(**kwargs)
    return str(refused.value.response["Error"]["Message"])


def test_a_new_table_is_creating_until_the_waiter_sees_it_active(slow):
    ddb = make_client(slow.endpoint)
    started = time.monotonic()
    name = new_table(ddb)
    assert status(ddb, name) == "CREATING"
    # "You can perform read and write operations only on an ACTIVE table" (CreateTable).
    with pytest.raises(ddb.exceptions.ResourceNotFoundException, match="Requested resource not found"):
        ddb.put_item(TableName=name, Item={"pk": {"S": "a"}})
    ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.1, "MaxAttempts": 50})
    assert time.monotonic() - started >= DELAY - 0.05
    assert status(ddb, name) == "ACTIVE"
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}})


def test_a_deleted_table_is_deleting_until_the_waiter_sees_it_gone(slow):
    ddb = make_client(slow.endpoint)
    name = new_table(ddb)
    ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.1, "MaxAttempts": 50})
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}})
    assert ddb.delete_table(TableName=name)["TableDescription"]["TableStatus"] == "DELETING"
    assert status(ddb, name) == "DELETING"
    # "If table is already in the DELETING state, no error is returned" (DeleteTable) ...
    assert ddb.delete_table(TableName=name)["TableDescription"]["TableStatus"] == "DELETING"
    # ... and it "might continue to accept data read and write operations" meanwhile.
    assert ddb.get_item(TableName=name, Key={"pk": {"S": "a"}})["Item"] == {"pk": {"S": "a"}}
    assert in_use(ddb, lambda: new_table(ddb, name)) == (
        f"Attempt to change a resource which is still in use: Table is being deleted: {name}")
    ddb.get_waiter("table_not_exists").wait(TableName=name, WaiterConfig={"Delay": 0.1, "MaxAttempts": 50})
    with pytest.raises(ddb.exceptions.ResourceNotFoundException):
        ddb.get_item(TableName=name, Key={"pk": {"S": "a"}})
    with pytest.raises(ddb.exceptions.ResourceNotFoundException):  # (gone to every request, before the store
        ddb.tag_resource(ResourceArn=f"arn:aws:dynamodb:us-east-1:000000000000:table/{name}",  # removes it too)
                         Tags=[{"Key": "k", "Value": "v"}])
    assert name not in ddb.list_tables(ExclusiveStartTableName=name[:-1], Limit=100)["TableNames"]
    new_table(ddb, name)  # the name is free again, the old items gone with the table
    ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.1, "MaxAttempts": 50})
    assert "Item" not in ddb.get_item(TableName=name, Key={"pk": {"S": "a"}})


def test_a_creating_table_takes_no_change(dev):
    ddb = make_client(dev.endpoint)
    name = new_table(ddb)
    words = f"Attempt to change a resource which is still in use: Table is being created: {name}"
    assert in_use(ddb, ddb.delete_table, TableName=name) == words
    assert in_use(ddb, ddb.update_table, TableName=name, DeletionProtectionEnabled=True) == words
    assert in_use(ddb, lambda: new_table(ddb, name)) == words
    with pytest.raises(ddb.exceptions.ResourceNotFoundException):
        ddb.get_item(TableName=name, Key={"pk": {"S": "a"}})
    assert name in ddb.list_tables(ExclusiveStartTableName=name[:-1], Limit=100)["TableNames"]
    advance(dev, HOUR)
    assert status(ddb, name) == "ACTIVE"
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}})


def test_an_updating_table_serves_items_and_takes_no_other_change(dev):
    ddb = make_client(dev.endpoint)
    name = new_table(ddb)
    advance(dev, HOUR)
    answer = ddb.update_table(TableName=name, BillingMode="PROVISIONED",
                              ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 5})
    assert answer["TableDescription"]["TableStatus"] == "UPDATING"
    assert status(ddb, name) == "UPDATING"
    # "The table/index remains available for data operations when UPDATING" (TableStatus).
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}})
    words = f"Attempt to change a resource which is still in use: Table is being updated: {name}"
    assert in_use(ddb, ddb.update_table, TableName=name,
                  ProvisionedThroughput={"ReadCapacityUnits": 6, "WriteCapacityUnits": 6}) == words
    assert in_use(ddb, ddb.delete_table, TableName=name) == words
    advance(dev, HOUR)
    assert status(ddb, name) == "ACTIVE"
    ddb.update_table(TableName=name, ProvisionedThroughput={"ReadCapacityUnits": 6, "WriteCapacityUnits": 6})


def test_settings_that_need_no_work_leave_the_table_active(dev):
    ddb = make_client(dev.endpoint)
    name = new_table(ddb)
    advance(dev, HOUR)
    assert ddb.update_table(TableName=name, DeletionProtectionEnabled=True)["TableDescription"][
        "TableStatus"] == "ACTIVE"
    assert status(ddb, name) == "ACTIVE"


def _gsi(name: str) -> dict[str, Any]:
    return {"Create": {"IndexName": name, "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                       "Projection": {"ProjectionType": "ALL"}}}


def _index(ddb: Any, table: str, index: str) -> dict[str, Any] | None:
    described = ddb.describe_table(TableName=table)["Table"]
    return next((i for i in described.get("GlobalSecondaryIndexes", []) if i["IndexName"] == index), None)


def test_an_index_is_creating_then_deleting_for_the_delay(dev):
    ddb = make_client(dev.endpoint)
    name = new_table(ddb)
    advance(dev, HOUR)
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "g": {"S": "x"}})
    definitions = [{"AttributeName": "g", "AttributeType": "S"}]
    ddb.update_table(TableName=name, AttributeDefinitions=definitions, GlobalSecondaryIndexUpdates=[_gsi("by_g")])
    index = _index(ddb, name, "by_g")
    assert index is not None and (index["IndexStatus"], index["Backfilling"]) == ("CREATING", True)
    with pytest.raises(ddb.exceptions.ClientError, match="Cannot read from backfilling global secondary index"):
        ddb.query(TableName=name, IndexName="by_g", KeyConditionExpression="g = :g",
                  ExpressionAttributeValues={":g": {"S": "x"}})
    advance(dev, HOUR)
    index = _index(ddb, name, "by_g")
    assert index is not None and index["IndexStatus"] == "ACTIVE" and "Backfilling" not in index
    assert ddb.query(TableName=name, IndexName="by_g", KeyConditionExpression="g = :g",
                     ExpressionAttributeValues={":g": {"S": "x"}})["Count"] == 1
    ddb.update_table(TableName=name, GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "by_g"}}])
    index = _index(ddb, name, "by_g")
    assert index is not None and index["IndexStatus"] == "DELETING"
    # One online index creation or deletion at a time: the next waits for the deletion to finish.
    with pytest.raises(ddb.exceptions.LimitExceededException, match="Only 1 online index"):
        ddb.update_table(TableName=name, AttributeDefinitions=definitions, GlobalSecondaryIndexUpdates=[_gsi("by_g2")])
    advance(dev, HOUR)
    assert _index(ddb, name, "by_g") is None
    ddb.update_table(TableName=name, AttributeDefinitions=definitions, GlobalSecondaryIndexUpdates=[_gsi("by_g2")])


def test_warm_throughput_is_updating_for_the_delay(dev):
    ddb = make_client(dev.endpoint)
    name = new_table(ddb, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                {"AttributeName": "g", "AttributeType": "S"}],
                     GlobalSecondaryIndexes=[{"IndexName": "by_g", "KeySchema": [{"AttributeName": "g",
                                                                                 "KeyType": "HASH"}],
                                              "Projection": {"ProjectionType": "KEYS_ONLY"}}])
    advance(dev, HOUR)
    ddb.update_table(TableName=name, WarmThroughput={"ReadUnitsPerSecond": 13000})
    described = ddb.describe_table(TableName=name)["Table"]
    assert described["TableStatus"] == "ACTIVE"  # the table stays ACTIVE: only its warm throughput is UPDATING
    assert described["WarmThroughput"] == {"ReadUnitsPerSecond": 13000, "WriteUnitsPerSecond": 4000,
                                           "Status": "UPDATING"}
    advance(dev, HOUR)
    assert ddb.describe_table(TableName=name)["Table"]["WarmThroughput"]["Status"] == "ACTIVE"
    ddb.update_table(TableName=name, GlobalSecondaryIndexUpdates=[
        {"Update": {"IndexName": "by_g", "WarmThroughput": {"WriteUnitsPerSecond": 5000}}}])
    index = _index(ddb, name, "by_g")
    assert index is not None and index["IndexStatus"] == "ACTIVE"
    assert index["WarmThroughput"] == {"ReadUnitsPerSecond": 12000, "WriteUnitsPerSecond": 5000, "Status": "UPDATING"}
    advance(dev, HOUR)
    index = _index(ddb, name, "by_g")
    assert index is not None and index["WarmThroughput"]["Status"] == "ACTIVE"


def test_an_updating_index_takes_no_other_change(dev):
    ddb = make_client(dev.endpoint)
    name = unique_name("transient")
    ddb.create_table(TableName=name, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                           {"AttributeName": "g", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1},
                     GlobalSecondaryIndexes=[{"IndexName": "by_g",
                                              "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                              "Projection": {"ProjectionType": "KEYS_ONLY"},
                                              "ProvisionedThroughput": {"ReadCapacityUnits": 1,
                                                                        "WriteCapacityUnits": 1}}])
    advance(dev, HOUR)
    update = {"Update": {"IndexName": "by_g", "ProvisionedThroughput": {"ReadCapacityUnits": 2,
                                                                       "WriteCapacityUnits": 2}}}
    ddb.update_table(TableName=name, GlobalSecondaryIndexUpdates=[update])
    index = _index(ddb, name, "by_g")
    assert index is not None and index["IndexStatus"] == "UPDATING"
    update["Update"]["ProvisionedThroughput"] = {"ReadCapacityUnits": 3, "WriteCapacityUnits": 3}
    assert in_use(ddb, ddb.update_table, TableName=name, GlobalSecondaryIndexUpdates=[update]) == (
        f"Attempt to change a resource which is still in use: Index is being updated.  Table: {name} Index: by_g")
    advance(dev, HOUR)
    ddb.update_table(TableName=name, GlobalSecondaryIndexUpdates=[update])


def test_workers_agree_on_the_status() -> None:
    """Each worker derives the status from the stored times: every connection, whichever worker it reaches, sees
    CREATING until the delay after the table's creation time is over and ACTIVE after it. Each answer is checked
    against the time it was asked at, so a slow machine cannot make the test wrong."""
    delay = 5.0
    with tempfile.TemporaryDirectory() as data_dir:
        process = ServerProcess(data_dir, "--workers", "2", "--delay-transient-statuses", str(delay))
        try:
            clients = [make_client(process.endpoint) for _ in range(8)]  # each its own connection: both workers
            answer = clients[0].create_table(
                TableName=(name := unique_name("transient")), BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
            ends = answer["TableDescription"]["CreationDateTime"].timestamp() + delay
            seen: dict[str, set[str]] = {"before": set(), "after": set()}
            for round_ in range(2):
                if round_:
                    time.sleep(max(0.0, ends + 0.3 - time.time()))
                for client in clients:
                    asked = time.time()
                    got = status(client, name)
                    answered = time.time()
                    if answered < ends - 0.05:
                        seen["before"].add(got)
                    elif asked > ends + 0.05:
                        seen["after"].add(got)
            assert seen == {"before": {"CREATING"}, "after": {"ACTIVE"}}
        finally:
            process.finish()


@pytest.mark.skipif(not os.environ.get("OPENDDB_TEST_POSTGRES"), reason="set OPENDDB_TEST_POSTGRES to a URL")
def test_postgresql_nodes_agree_on_the_status() -> None:
    """Two nodes over one PostgreSQL database: the node that did not make the change, started without the option,
    shows the same transient status (from the stored times, by its own clock), and its waiter sees the table gone
    once the deletion is over. Both are --dev servers whose clocks the test moves together."""
    url = str(os.environ["OPENDDB_TEST_POSTGRES"])
    nodes = [ServerProcess(None, "--engine", url, "--dev", "--delay-transient-statuses", str(HOUR)),
             ServerProcess(None, "--engine", url, "--dev")]
    try:
        one, two = make_client(nodes[0].endpoint), make_client(nodes[1].endpoint)
        name = new_table(one)
        assert status(two, name) == "CREATING"
        for node in nodes:
            advance(node, HOUR)
        two.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.1, "MaxAttempts": 50})
        assert one.delete_table(TableName=name)["TableDescription"]["TableStatus"] == "DELETING"
        # Node two hears of the catalog change a moment after the commit (PostgreSQL notifies it): then DELETING.
        deadline = time.monotonic() + 5
        while status(two, name) == "ACTIVE" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert status(two, name) == "DELETING"
        for node in nodes:
            advance(node, HOUR)
        two.get_waiter("table_not_exists").wait(TableName=name, WaiterConfig={"Delay": 0.1, "MaxAttempts": 50})
        with pytest.raises(one.exceptions.ResourceNotFoundException):
            one.describe_table(TableName=name)
    finally:
        for node in nodes:
            node.finish()


def test_the_in_process_server_reads_the_delay_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/TESTING.md: the in-process server takes the delay from OPENDDB_TRANSIENT_SECONDS, and its clock, moved
    ahead, ends the status."""
    monkeypatch.setenv("OPENDDB_TRANSIENT_SECONDS", str(HOUR))
    server = openddb.testing.Server()
    server.start()
    try:
        ddb = make_client(server.endpoint)
        name = new_table(ddb)
        assert status(ddb, name) == "CREATING"
        server.advance_clock(HOUR)
        assert status(ddb, name) == "ACTIVE"
    finally:
        server.stop()
        clock.set_offset(0)  # (the clock is this test process's)


def test_a_change_of_encryption_is_updating_for_the_delay(dev):
    ddb = make_client(dev.endpoint)
    name = new_table(ddb)
    advance(dev, HOUR)
    ddb.update_table(TableName=name, SSESpecification={"Enabled": True, "SSEType": "KMS"})
    described = ddb.describe_table(TableName=name)["Table"]
    assert described["TableStatus"] == "ACTIVE"
    assert described["SSEDescription"]["Status"] == "UPDATING"
    advance(dev, HOUR)
    described = ddb.describe_table(TableName=name)["Table"]
    assert described["SSEDescription"]["Status"] == "DISABLED"  # (the key kept, the store not encrypted: see docs)
    assert described["SSEDescription"]["SSEType"] == "KMS"
