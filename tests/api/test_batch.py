"""BatchGetItem and BatchWriteItem through boto3: limits, duplicates, validation before writing, 16 MB."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.test_protocol import call
from tests.api.test_query import fails, raw_error
from tests.conftest import create_table, unique_name


def key(pk: str, sk: str = "a") -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def put(pk: str, sk: str = "a", **extra: Any) -> dict[str, Any]:
    return {"PutRequest": {"Item": {**key(pk, sk), **extra}}}


def delete(pk: str, sk: str = "a") -> dict[str, Any]:
    return {"DeleteRequest": {"Key": key(pk, sk)}}


@pytest.fixture
def tables(ddb: Any) -> tuple[str, str]:
    return create_table(ddb), create_table(ddb, range_type=None)


def scan_keys(ddb: Any, table: str) -> list[str]:
    return sorted(item["pk"]["S"] for item in ddb.scan(TableName=table)["Items"])


# --- BatchWriteItem --------------------------------------------------------------------------------------


def test_write_across_tables(ddb, tables):
    """Puts and deletes on several tables land; UnprocessedItems is empty; capacity is per table."""
    one, two = tables
    ddb.put_item(TableName=one, Item=key("gone"))
    response = ddb.batch_write_item(RequestItems={
        one: [put("a", v={"S": "x"}), put("b"), delete("gone")],
        two: [{"PutRequest": {"Item": {"pk": {"S": "c"}, "big": {"S": "y" * 2000}}}}],
    }, ReturnConsumedCapacity="TOTAL", ReturnItemCollectionMetrics="SIZE")
    assert response["UnprocessedItems"] == {}
    assert response["ConsumedCapacity"] == [{"TableName": one, "CapacityUnits": 3.0},
                                            {"TableName": two, "CapacityUnits": 2.0}]
    assert response["ItemCollectionMetrics"] == {}
    assert scan_keys(ddb, one) == ["a", "b"] and scan_keys(ddb, two) == ["c"]


def test_write_capacity_indexes(ddb, tables):
    """INDEXES adds the per-table breakdown; deleting a missing item still costs one unit."""
    one, _ = tables
    response = ddb.batch_write_item(RequestItems={one: [delete("nothing"), put("x")]},
                                    ReturnConsumedCapacity="INDEXES")
    assert response["ConsumedCapacity"] == [{"TableName": one, "CapacityUnits": 2.0,
                                             "Table": {"CapacityUnits": 2.0}}]
    assert "ConsumedCapacity" not in ddb.batch_write_item(RequestItems={one: [put("y")]})


@pytest.mark.parametrize("requests", [
    [put("a"), put("a")],
    [put("a"), delete("a")],
    [delete("a"), delete("a")],
])
def test_write_duplicates(ddb, tables, requests):
    """Two requests for one item in one batch are rejected, and nothing is written."""
    one, _ = tables
    assert fails(ddb.batch_write_item, RequestItems={one: [put("other"), *requests]}) == (
        "ValidationException", "Provided list of item keys contains duplicates")
    assert scan_keys(ddb, one) == []


def test_one_table_by_name_and_by_arn_is_one_table(ddb, tables):
    """A table named once by name and once by ARN is still one table: one item twice is a duplicate."""
    one, _ = tables
    arn = ddb.describe_table(TableName=one)["Table"]["TableArn"]
    assert fails(ddb.batch_write_item, RequestItems={one: [put("dup")], arn: [delete("dup")]}) == (
        "ValidationException", "Provided list of item keys contains duplicates")
    assert "dup" not in scan_keys(ddb, one)


def test_same_key_in_two_tables_is_fine(ddb):
    """Duplicates are per table: the same key in two tables is two items."""
    one, two = create_table(ddb), create_table(ddb)
    ddb.batch_write_item(RequestItems={one: [put("a")], two: [put("a")]})
    assert scan_keys(ddb, one) == scan_keys(ddb, two) == ["a"]


@pytest.mark.parametrize(("bad", "message"), [
    # A key missing, wrong-typed or non-scalar in a PutRequest gets the key-only wording (captured against DynamoDB).
    ({"PutRequest": {"Item": {"pk": {"S": "x"}}}}, "The provided key element does not match the schema"),
    ({"PutRequest": {"Item": {"pk": {"S": "x"}, "sk": {"N": "1"}}}},
     "The provided key element does not match the schema"),
    ({"PutRequest": {"Item": {"pk": {"S": "x"}, "sk": {"M": {}}}}},
     "The provided key element does not match the schema"),
    ({"PutRequest": {"Item": {**key("x"), "d": {"S": "z" * 410_000}}}},
     "Item size has exceeded the maximum allowed size"),
    ({"DeleteRequest": {"Key": {"pk": {"S": "x"}}}}, "The provided key element does not match the schema"),
    ({"DeleteRequest": {"Key": {**key("x"), "extra": {"S": "e"}}}},
     "The provided key element does not match the schema"),
    ({"PutRequest": {"Item": {"pk": {"S": ""}, "sk": {"S": "a"}}}},
     "One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty "
     "string value. Key: pk"),
])
def test_write_validation_writes_nothing(ddb, tables, bad, message):
    """Each request is validated like its single-item twin, before anything of the batch is written."""
    one, two = tables
    assert fails(ddb.batch_write_item, RequestItems={two: [{"PutRequest": {"Item": {"pk": {"S": "ok"}}}}],
                                                     one: [put("fine"), bad]}) == ("ValidationException", message)
    assert scan_keys(ddb, one) == [] and scan_keys(ddb, two) == []


def test_write_limits(server, ddb, tables):
    """At most 25 requests per table and per call; empty lists and maps are rejected."""
    one, two = tables
    code, message = fails(ddb.batch_write_item, RequestItems={one: [put(f"k{i}") for i in range(26)]})
    assert code == "ValidationException"
    assert message.startswith("1 validation error detected: Value '{")
    assert message.endswith("' at 'requestItems' failed to satisfy constraint: Map value must satisfy constraint: "
                            "[Member must have length less than or equal to 25, Member must have length greater "
                            "than or equal to 1]")
    assert raw_error(server, "BatchWriteItem", {"RequestItems": {one: []}}) == (
        "ValidationException", f"1 validation error detected: Value '{{{one}=[]}}' at 'requestItems' failed to "
                               "satisfy constraint: Map value must satisfy constraint: [Member must have length less "
                               "than or equal to 25, Member must have length greater than or equal to 1]")
    assert fails(ddb.batch_write_item, RequestItems={one: [put(f"k{i}") for i in range(13)],
                                                     two: [put(f"k{i}") for i in range(13)]}) == (
        "ValidationException", "Too many items requested for the BatchWriteItem call")
    assert scan_keys(ddb, one) == []
    response = ddb.batch_write_item(RequestItems={one: [put(f"k{i:02d}") for i in range(25)]})
    assert response["UnprocessedItems"] == {} and len(scan_keys(ddb, one)) == 25


def test_write_more_than_25_tables_breaks_the_map_constraint(server, tables):
    """RequestItems is a map of at most 25 tables: 26 of one request each break that before the count of requests."""
    one, _ = tables
    body = {"RequestItems": {f"{one}-{i:02d}": [{"DeleteRequest": {"Key": key("a")}}] for i in range(26)}}
    code, message = raw_error(server, "BatchWriteItem", body)
    assert code == "ValidationException"
    assert message.startswith("1 validation error detected: Value '{")
    assert message.endswith("' at 'requestItems' failed to satisfy constraint: Member must have length less than or "
                            "equal to 25")
    # Every violation comes in one message: a 27th table whose list is empty breaks the map's value rule too.
    body["RequestItems"][f"{one}-26"] = []
    code, message = raw_error(server, "BatchWriteItem", body)
    assert message.startswith("2 validation errors detected: ")
    assert "Member must have length less than or equal to 25; Value '{" in message
    assert message.endswith("Map value must satisfy constraint: [Member must have length less than or equal to 25, "
                            "Member must have length greater than or equal to 1]")


@pytest.mark.parametrize("operation", ["BatchWriteItem", "BatchGetItem"])
@pytest.mark.parametrize("name", ["", "t" * 1025], ids=["empty", "1025-chars"])
def test_table_key_outside_its_length_is_a_constraint_error(server, tables, operation, name):
    """A table name or ARN keying the batch map is 1-1024 characters, checked before any table is looked up."""
    one, _ = tables
    part = ([put("a")] if operation == "BatchWriteItem"
            else {"Keys": [key("a")]})
    code, message = raw_error(server, operation, {"RequestItems": {one: part, name: part}})
    assert code == "ValidationException"
    assert message.startswith("1 validation error detected: Value '{")
    assert message.endswith("' at 'requestItems' failed to satisfy constraint: Map keys must satisfy constraint: "
                            "[Member must have length less than or equal to 1024, Member must have length greater "
                            "than or equal to 1]")


def test_write_empty_request_items(server):
    """An empty RequestItems map gets DynamoDB's required-parameter message."""
    assert raw_error(server, "BatchWriteItem", {"RequestItems": {}}) == (
        "ValidationException", "The requestItems parameter is required for BatchWriteItem")


def test_write_unknown_table(ddb, tables):
    """A batch naming a missing table fails whole."""
    one, _ = tables
    assert fails(ddb.batch_write_item, RequestItems={one: [put("a")], "missing-table": [put("a")]}) == (
        "ResourceNotFoundException", "Requested resource not found")
    assert scan_keys(ddb, one) == []


# --- BatchGetItem ----------------------------------------------------------------------------------------


def test_get_across_tables(ddb, tables):
    """Items from several tables come back per table; missing keys are simply absent."""
    one, two = tables
    ddb.batch_write_item(RequestItems={one: [put("a", v={"N": "1"}), put("b")],
                                       two: [{"PutRequest": {"Item": {"pk": {"S": "c"}, "w": {"S": "z"}}}}]})
    response = ddb.batch_get_item(RequestItems={
        one: {"Keys": [key("a"), key("b"), key("missing")], "ConsistentRead": True},
        two: {"Keys": [{"pk": {"S": "c"}}], "ProjectionExpression": "#w", "ExpressionAttributeNames": {"#w": "w"}},
    })
    assert sorted(i["pk"]["S"] for i in response["Responses"][one]) == ["a", "b"]
    assert response["Responses"][two] == [{"w": {"S": "z"}}]
    assert response["UnprocessedKeys"] == {}
    response = ddb.batch_get_item(RequestItems={one: {"Keys": [key("nope")]}})
    assert response["Responses"] == {one: []}


def test_get_validation(server, ddb, tables):
    """Duplicates, too many keys, bad keys, unused names and missing tables are rejected."""
    one, two = tables
    assert fails(ddb.batch_get_item, RequestItems={one: {"Keys": [key("a"), key("a")]}}) == (
        "ValidationException", "Provided list of item keys contains duplicates")
    assert fails(ddb.batch_get_item, RequestItems={one: {"Keys": [key(f"k{i}") for i in range(60)]},
                                                   two: {"Keys": [{"pk": {"S": f"k{i}"}} for i in range(41)]}}) == (
        "ValidationException", "Too many items requested for the BatchGetItem call")
    for request in ({}, {"RequestItems": None}, {"TableName": "t", "Item": {"p": {"S": "x"}}}):  # no map at all
        response, data = call(server, json.dumps(request), "DynamoDB_20120810.BatchGetItem")
        assert (response.status, json.loads(data)["message"]) == (
            400, "1 validation error detected: Value null at 'requestItems' failed to satisfy constraint: Member "
                 "must not be null"), data
    # One table's 101 keys: DynamoDB's 2026 form, without the value, under the members' own names (dynoxide
    # issue 18), as for an empty RequestItems.
    assert fails(ddb.batch_get_item, RequestItems={one: {"Keys": [key(f"k{i}") for i in range(101)]}}) == (
        "ValidationException", f"1 validation error detected: Value at 'RequestItems.{one}.member.Keys' failed to "
                               "satisfy constraint: Member must have length less than or equal to 100")
    # Beside other violations, the usual message lists them all (the 2026 form is recorded for this one alone).
    response, data = call(server, json.dumps({"RequestItems": {one: {"Keys": [key(f"k{i}") for i in range(101)]},
                                                               two: {"Keys": []}}}), "DynamoDB_20120810.BatchGetItem")
    assert response.status == 400 and json.loads(data)["message"].startswith("2 validation errors detected: ")
    assert fails(ddb.batch_get_item, RequestItems={one: {"Keys": [{"pk": {"S": "a"}}]}}) == (
        "ValidationException", "The provided key element does not match the schema")
    assert fails(ddb.batch_get_item, RequestItems={one: {"Keys": [key("a")], "ExpressionAttributeNames": {"#a": "a"},
                                                         "ProjectionExpression": "pk"}}) == (
        "ValidationException", "Value provided in ExpressionAttributeNames unused in expressions: keys: {#a}")
    assert fails(ddb.batch_get_item, RequestItems={"missing-table": {"Keys": [key("a")]}}) == (
        "ResourceNotFoundException", "Requested resource not found")


def test_get_number_key_written_two_ways_is_read_twice(ddb):
    """Keys are duplicates only as sent: "1" and "1.0" name one item, which DynamoDB reads twice (observed against
    it, scylladb PR 29501); BatchWriteItem still counts them as one item."""
    name = unique_name()
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     KeySchema=[{"AttributeName": "p", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "p", "AttributeType": "N"}])
    ddb.put_item(TableName=name, Item={"p": {"N": "1"}, "v": {"S": "x"}})
    got = ddb.batch_get_item(RequestItems={name: {"Keys": [{"p": {"N": "1"}}, {"p": {"N": "1.0"}}]}})
    assert got["Responses"][name] == [{"p": {"N": "1"}, "v": {"S": "x"}}] * 2
    assert fails(ddb.batch_write_item, RequestItems={name: [{"DeleteRequest": {"Key": {"p": {"N": "1"}}}},
                                                            {"DeleteRequest": {"Key": {"p": {"N": "1.0"}}}}]}) == (
        "ValidationException", "Provided list of item keys contains duplicates")


def test_get_key_nested_past_the_json_writer_is_refused_not_a_500(server, tables):
    """A key value nested deeper than orjson writes (the duplicate check compares keys as sent) is refused as any
    invalid key is, not answered with an internal error."""
    one, _ = tables
    deep: dict = {"S": "x"}
    for _ in range(300):
        deep = {"M": {"m": deep}}
    code, _message = raw_error(server, "BatchGetItem", {"RequestItems": {one: {"Keys": [{"pk": deep, "sk": deep}]}}})
    assert code == "ValidationException"


def test_get_empty_request_items(server):
    """An empty RequestItems map is a constraint violation, worded as DynamoDB words it now."""
    assert raw_error(server, "BatchGetItem", {"RequestItems": {}}) == (
        "ValidationException", "1 validation error detected: Value at 'RequestItems' failed to satisfy constraint: "
                               "Member must have length greater than or equal to 1")


def test_get_hundred_keys(ddb, tables):
    """Exactly 100 keys across tables is allowed."""
    one, two = tables
    response = ddb.batch_get_item(RequestItems={one: {"Keys": [key(f"k{i}") for i in range(50)]},
                                                two: {"Keys": [{"pk": {"S": f"k{i}"}} for i in range(50)]}})
    assert response["Responses"] == {one: [], two: []}


def test_get_capacity_per_item(ddb, tables):
    """BatchGetItem rounds each item up to 4 KB before summing (1.5 KB + 6.5 KB = 3 units); a missing key costs
    one read; eventually consistent halves it."""
    one, two = tables
    ddb.batch_write_item(RequestItems={one: [put("a", d={"S": "x" * 1500}), put("b", d={"S": "x" * 6500})]})
    keys = [key("a"), key("b"), key("missing")]
    response = ddb.batch_get_item(RequestItems={one: {"Keys": keys, "ConsistentRead": True},
                                                two: {"Keys": [{"pk": {"S": "none"}}]}},
                                  ReturnConsumedCapacity="TOTAL")
    assert response["ConsumedCapacity"] == [{"TableName": one, "CapacityUnits": 4.0},
                                            {"TableName": two, "CapacityUnits": 0.5}]
    response = ddb.batch_get_item(RequestItems={one: {"Keys": keys}}, ReturnConsumedCapacity="INDEXES")
    assert response["ConsumedCapacity"] == [{"TableName": one, "CapacityUnits": 2.0, "Table": {"CapacityUnits": 2.0}}]


def test_get_sixteen_megabytes(ddb):
    """Past 16 MB of response the remaining keys come back as UnprocessedKeys, ready to be sent again."""
    name = create_table(ddb)
    blob = "x" * 399_000
    for start in range(0, 44, 11):
        ddb.batch_write_item(RequestItems={name: [put(f"k{i:02d}", d={"S": blob}) for i in range(start, start + 11)]})
    keys = [key(f"k{i:02d}") for i in range(44)]
    request = {name: {"Keys": keys, "ConsistentRead": True}}
    response = ddb.batch_get_item(RequestItems=request, ReturnConsumedCapacity="TOTAL")
    got = response["Responses"][name]
    unprocessed = response["UnprocessedKeys"][name]
    size = len(blob) + len("pk") + len("k00") + len("sk") + len("a") + len("d")
    assert len(got) == 16 * 1024 * 1024 // size == 42
    assert unprocessed["ConsistentRead"] is True
    assert len(got) + len(unprocessed["Keys"]) == 44
    assert response["ConsumedCapacity"] == [{"TableName": name, "CapacityUnits": 98.0 * len(got)}]
    rest = ddb.batch_get_item(RequestItems=response["UnprocessedKeys"])
    assert rest["UnprocessedKeys"] == {}
    assert sorted(i["pk"]["S"] for i in got + rest["Responses"][name]) == [f"k{i:02d}" for i in range(44)]


def test_get_checks_every_table_part_before_looking_tables_up(ddb):
    """Duplicate keys and a wrong projection are reported even beside (or in) a missing table, whatever the order
    of the tables (DynamoDB checks them first, captured in ExtendDB PR 192)."""
    table = create_table(ddb, range_type=None)
    duplicated = {"Keys": [{"pk": {"S": "a"}}, {"pk": {"S": "a"}}]}
    for request_items in ({"no-such-table": duplicated},
                          {"no-such-table": {"Keys": [{"pk": {"S": "a"}}]}, table: duplicated}):
        assert fails(ddb.batch_get_item, RequestItems=request_items) == (
            "ValidationException", "Provided list of item keys contains duplicates")
    code, message = fails(ddb.batch_get_item, RequestItems={
        "no-such-table": {"Keys": [{"pk": {"S": "a"}}], "ProjectionExpression": "a, a"}})
    assert code == "ValidationException" and message.startswith("Invalid ProjectionExpression: Two document paths")
