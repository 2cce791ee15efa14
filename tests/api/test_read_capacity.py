"""ConsumedCapacity of Query and Scan: the sizes of all items read, summed, then rounded up to 4 KB once."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.api.test_query import put_all
from tests.conftest import create_table

PK = {":p": {"S": "c"}}


def item(index: int, size: int) -> dict[str, Any]:
    """An item of exactly `size` bytes in partition "c"."""
    sk = f"k{index}"
    overhead = len("pk") + len("c") + len("sk") + len(sk) + len("d")
    return {"pk": {"S": "c"}, "sk": {"S": sk}, "d": {"S": "x" * (size - overhead)}}


@pytest.fixture(scope="module")
def table(ddb: Any) -> str:
    """Partition "c" holds three items of 1,500 bytes (4,500 in all)."""
    name = create_table(ddb)
    put_all(ddb, name, [item(i, 1500) for i in range(3)])
    return name


def capacity(response: dict[str, Any]) -> float:
    return response["ConsumedCapacity"]["CapacityUnits"]


def query(ddb: Any, table: str, **kwargs: Any) -> dict[str, Any]:
    return ddb.query(TableName=table, KeyConditionExpression="pk = :p",
                     **{"ExpressionAttributeValues": PK, "ReturnConsumedCapacity": "TOTAL", **kwargs})


def test_query_sums_then_rounds(ddb, table):
    """3 x 1.5 KB = 4.5 KB rounds to 8 KB once: 2 units strongly consistent, 1 eventually (not 3 and 1.5)."""
    assert capacity(query(ddb, table, ConsistentRead=True)) == 2.0
    assert capacity(query(ddb, table)) == 1.0
    assert capacity(query(ddb, table, ConsistentRead=False)) == 1.0


def test_query_nothing_found_costs_minimum(ddb, table):
    """A Query that reads nothing still consumes one read (half when eventually consistent)."""
    assert capacity(query(ddb, table, ExpressionAttributeValues={":p": {"S": "none"}}, ConsistentRead=True)) == 1.0
    assert capacity(query(ddb, table, ExpressionAttributeValues={":p": {"S": "none"}})) == 0.5


def test_query_charges_items_read_not_returned(ddb, table):
    """Filters, projections and COUNT do not reduce the charge; Limit does, by reading less."""
    assert capacity(query(ddb, table, ConsistentRead=True, FilterExpression="attribute_not_exists(d)")) == 2.0
    assert capacity(query(ddb, table, ConsistentRead=True, ProjectionExpression="pk")) == 2.0
    assert capacity(query(ddb, table, ConsistentRead=True, Select="COUNT")) == 2.0
    assert capacity(query(ddb, table, ConsistentRead=True, Limit=1)) == 1.0
    assert capacity(query(ddb, table, Limit=2)) == 0.5


def test_indexes_and_none(ddb, table):
    """INDEXES adds the table's own figure; NONE (or nothing) returns no ConsumedCapacity."""
    response = query(ddb, table, ConsistentRead=True, ReturnConsumedCapacity="INDEXES")
    assert response["ConsumedCapacity"] == {"TableName": table, "CapacityUnits": 2.0,
                                            "Table": {"CapacityUnits": 2.0}}
    assert "ConsumedCapacity" not in query(ddb, table, ReturnConsumedCapacity="NONE")
    assert "ConsumedCapacity" not in ddb.query(TableName=table, KeyConditionExpression="pk = :p",
                                               ExpressionAttributeValues=PK)


@pytest.mark.parametrize(("size", "units"), [(4095, 1.0), (4096, 1.0), (4097, 2.0), (8192, 2.0), (8193, 3.0)])
def test_four_kilobyte_boundary(ddb, size, units):
    """Rounding is to the next multiple of 4,096 bytes of the item's DynamoDB size."""
    name = create_table(ddb)
    ddb.put_item(TableName=name, Item=item(0, size))
    assert capacity(query(ddb, name, ConsistentRead=True)) == units
    assert capacity(query(ddb, name)) == units / 2
    scanned = ddb.scan(TableName=name, ReturnConsumedCapacity="TOTAL", ConsistentRead=True)
    assert capacity(scanned) == units


def test_scan_capacity(ddb, table):
    """Scan charges like Query: every item read, summed, rounded once, halved when eventually consistent."""
    assert capacity(ddb.scan(TableName=table, ReturnConsumedCapacity="TOTAL", ConsistentRead=True)) == 2.0
    assert capacity(ddb.scan(TableName=table, ReturnConsumedCapacity="TOTAL")) == 1.0
    response = ddb.scan(TableName=table, ReturnConsumedCapacity="INDEXES", FilterExpression="attribute_not_exists(d)")
    assert response["ConsumedCapacity"] == {"TableName": table, "CapacityUnits": 1.0, "Table": {"CapacityUnits": 1.0}}
    empty = create_table(ddb)
    assert capacity(ddb.scan(TableName=empty, ReturnConsumedCapacity="TOTAL")) == 0.5


def test_full_page_capacity(ddb):
    """A page cut at 1 MB charges exactly what it read: 11 items of 100,000 bytes, then the last 3."""
    name = create_table(ddb)
    put_all(ddb, name, [item(i, 100_000) for i in range(14)])
    first = query(ddb, name, ConsistentRead=True)
    assert first["ScannedCount"] == 11
    assert capacity(first) == math.ceil(1_100_000 / 4096) == 269
    second = query(ddb, name, ExclusiveStartKey=first["LastEvaluatedKey"])
    assert second["ScannedCount"] == 3 and "LastEvaluatedKey" not in second
    assert capacity(second) == math.ceil(300_000 / 4096) / 2 == 37.0


def test_a_table_named_by_arn_is_named_by_arn_in_consumed_capacity(ddb, table):
    """The API reference: with a table's ARN in the input, ConsumedCapacity gives the ARN."""
    arn = ddb.describe_table(TableName=table)["Table"]["TableArn"]
    key = {"pk": {"S": "c"}, "sk": {"S": "k0"}}
    responses = [
        ddb.get_item(TableName=arn, Key=key, ReturnConsumedCapacity="TOTAL"),
        ddb.query(TableName=arn, KeyConditionExpression="pk = :p", ExpressionAttributeValues=PK,
                  ReturnConsumedCapacity="INDEXES"),
        ddb.update_item(TableName=arn, Key=key, UpdateExpression="SET n = :n",
                        ExpressionAttributeValues={":n": {"N": "1"}}, ReturnConsumedCapacity="TOTAL"),
    ]
    for response in responses:
        assert response["ConsumedCapacity"]["TableName"] == arn
    batch = ddb.batch_get_item(RequestItems={arn: {"Keys": [key]}}, ReturnConsumedCapacity="TOTAL")
    assert [c["TableName"] for c in batch["ConsumedCapacity"]] == [arn]
    assert list(batch["Responses"]) == [arn]
    by_name = ddb.get_item(TableName=table, Key=key, ReturnConsumedCapacity="TOTAL")
    assert by_name["ConsumedCapacity"]["TableName"] == table
