"""boto3 as applications use it: the resource (Table, batch_writer, conditions, native Python values), the
client's paginators and waiters, transactions with their cancellation reasons, and TTL, in one scenario."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import boto3
import pytest
from boto3.dynamodb.conditions import Attr, Key
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.compat.conftest import ITEMS, KEYS, PAGE
from tests.conftest import ServerProcess, unique_name


def session_of(server: ServerProcess) -> dict[str, Any]:
    return {"endpoint_url": server.endpoint, "region_name": "us-east-1", "aws_access_key_id": "test",
            "aws_secret_access_key": "test", "config": Config(retries={"max_attempts": 1})}


@pytest.fixture
def table(server: ServerProcess):  # type: ignore[no-untyped-def]
    """A new table with the global index `by_status`, made by the resource and its waiter; deleted after."""
    resource = boto3.resource("dynamodb", **session_of(server))
    table = resource.create_table(TableName=unique_name("boto3"), **KEYS)
    table.wait_until_exists()
    yield table
    table.delete()
    table.wait_until_not_exists()


def order(n: int, **extra: Any) -> dict[str, Any]:
    return {"pk": "customer", "sk": f"o{n}", "status": "open", "amount": Decimal(n), **extra}


def test_resource_batches_conditions_and_values(table) -> None:  # type: ignore[no-untyped-def]
    """batch_writer buffers puts and deletes (overwrite_by_pkeys keeps the last of one key); Python values come
    back as the resource's types (Decimal, set, Binary, nested list and dict); a condition built with Attr
    refuses a write with ConditionalCheckFailedException and the item found; update_item returns UPDATED_NEW."""
    with table.batch_writer(overwrite_by_pkeys=["pk", "sk"]) as batch:
        for n in range(ITEMS):
            batch.put_item(Item=order(n))
        batch.put_item(Item=order(0, note="second put of o0 wins"))
        batch.put_item(Item=order(99))
        batch.delete_item(Key={"pk": "customer", "sk": "o99"})
    assert table.get_item(Key={"pk": "customer", "sk": "o0"})["Item"]["note"] == "second put of o0 wins"
    assert "Item" not in table.get_item(Key={"pk": "customer", "sk": "o99"})

    rich = {"pk": "customer", "sk": "rich", "status": "draft", "amount": Decimal("12.5"), "tags": {"a", "b"},
            "sizes": {Decimal(1), Decimal(2)}, "blob": b"\x00\x01\xfe", "lines": [{"sku": "x", "qty": 2}, None, True]}
    table.put_item(Item=rich, ConditionExpression=Attr("pk").not_exists())
    read = table.get_item(Key={"pk": "customer", "sk": "rich"}, ConsistentRead=True)["Item"]
    assert {**read, "blob": bytes(read["blob"].value)} == rich
    with pytest.raises(table.meta.client.exceptions.ConditionalCheckFailedException) as refused:
        table.put_item(Item=rich, ConditionExpression=Attr("pk").not_exists(),
                       ReturnValuesOnConditionCheckFailure="ALL_OLD")
    assert refused.value.response["Item"]["amount"] == {"N": "12.5"}  # the client's error keeps DynamoDB JSON
    updated = table.update_item(Key={"pk": "customer", "sk": "o1"}, UpdateExpression="ADD amount :ten",
                                ConditionExpression=Attr("status").eq("open") & Attr("amount").lt(5),
                                ExpressionAttributeValues={":ten": Decimal(10)}, ReturnValues="UPDATED_NEW")
    assert updated["Attributes"] == {"amount": Decimal(11)}

    shipped = table.query(IndexName="by_status", KeyConditionExpression=Key("status").eq("draft"))
    assert [item["sk"] for item in shipped["Items"]] == ["rich"]


def test_transactions_and_cancellation_reasons(server: ServerProcess, table) -> None:  # type: ignore[no-untyped-def]
    """A transaction through the client applies whole; a cancelled one raises TransactionCanceledException whose
    CancellationReasons name the failed condition per action, and changes nothing."""
    client = boto3.client("dynamodb", **session_of(server))  # (the resource's client takes Python values)
    with table.batch_writer() as batch:
        for n in range(3):
            batch.put_item(Item=order(n))
    key = {"pk": {"S": "customer"}, "sk": {"S": "o1"}}
    ship = {"TableName": table.name, "Key": key, "UpdateExpression": "SET #s = :shipped",
            "ConditionExpression": "#s = :open", "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": {":shipped": {"S": "shipped"}, ":open": {"S": "open"}}}
    check = {"TableName": table.name, "Key": {"pk": {"S": "customer"}, "sk": {"S": "o2"}},
             "ConditionExpression": "attribute_exists(pk)"}
    client.transact_write_items(TransactItems=[{"Update": ship}, {"ConditionCheck": check}])
    with pytest.raises(client.exceptions.TransactionCanceledException) as cancelled:
        client.transact_write_items(TransactItems=[
            {"Delete": {"TableName": table.name, "Key": {"pk": {"S": "customer"}, "sk": {"S": "o0"}}}},
            {"Update": ship}])
    assert cancelled.value.response["CancellationReasons"] == [
        {"Code": "None"}, {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}]
    got = client.transact_get_items(TransactItems=[
        {"Get": {"TableName": table.name, "Key": {"pk": {"S": "customer"}, "sk": {"S": sk}}}} for sk in ("o0", "o1")])
    assert [response["Item"]["status"]["S"] for response in got["Responses"]] == ["open", "shipped"]


def test_paginators(server: ServerProcess, table) -> None:  # type: ignore[no-untyped-def]
    """The client's query and scan paginators page by PageSize and follow LastEvaluatedKey to the end;
    MaxItems stops early with a NextToken that resumes where it stopped; list_tables pages too."""
    client = boto3.client("dynamodb", **session_of(server))
    with table.batch_writer() as batch:
        for n in range(ITEMS):
            batch.put_item(Item=order(n))
    query = client.get_paginator("query").paginate(
        TableName=table.name, KeyConditionExpression="pk = :c", ExpressionAttributeValues={":c": {"S": "customer"}},
        PaginationConfig={"PageSize": PAGE})
    pages = [[item["sk"]["S"] for item in page["Items"]] for page in query]
    assert pages == [["o0", "o1", "o2"], ["o3", "o4", "o5"], ["o6"]]

    scan = client.get_paginator("scan")
    first = scan.paginate(TableName=table.name, PaginationConfig={"PageSize": 2, "MaxItems": 4}).build_full_result()
    assert [item["sk"]["S"] for item in first["Items"]] == ["o0", "o1", "o2", "o3"]
    rest = scan.paginate(TableName=table.name, PaginationConfig={"PageSize": 2, "StartingToken": first["NextToken"]})
    assert [item["sk"]["S"] for page in rest for item in page["Items"]] == ["o4", "o5", "o6"]

    names = [name for page in client.get_paginator("list_tables").paginate(PaginationConfig={"PageSize": 100})
             for name in page["TableNames"]]
    assert table.name in names and len(names) == len(set(names))


def test_waiters_and_time_to_live(server: ServerProcess) -> None:
    """The client's table_exists and table_not_exists waiters; UpdateTimeToLive enables TTL, DescribeTimeToLive
    says so, and enabling it twice is a ValidationException."""
    client = boto3.client("dynamodb", **session_of(server))
    name = unique_name("boto3")
    client.create_table(TableName=name, **KEYS)
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 20})
    assert client.describe_table(TableName=name)["Table"]["TableStatus"] == "ACTIVE"
    ttl = {"AttributeName": "expires", "Enabled": True}
    assert client.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)["TimeToLiveSpecification"] == ttl
    assert client.describe_time_to_live(TableName=name)["TimeToLiveDescription"] == {
        "TimeToLiveStatus": "ENABLED", "AttributeName": "expires"}
    with pytest.raises(ClientError) as again:
        client.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)
    assert again.value.response["Error"] == {"Code": "ValidationException",
                                             "Message": "TimeToLive is already enabled"}
    client.delete_table(TableName=name)
    client.get_waiter("table_not_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 20})
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.describe_table(TableName=name)
