"""A null where a list or map expects a structure reads as an empty structure (so its required members are
reported missing), never as a server error; nothing is written."""

from __future__ import annotations

import json

import pytest

from tests.api.test_protocol import call
from tests.conftest import create_table, table_exists, unique_name


@pytest.fixture(scope="module")
def table(ddb) -> str:
    name = create_table(ddb, unique_name("nulls"), range_type=None)
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}})
    return name


def _error(server, operation: str, body: dict) -> tuple[int, str, str]:
    response, data = call(server, json.dumps(body), target=f"DynamoDB_20120810.{operation}")
    error = json.loads(data)
    return response.status, error.get("__type", "").rpartition("#")[2], error.get("message", "")


def _missing(path: str) -> str:
    return f"1 validation error detected: Value null at '{path}' failed to satisfy constraint: Member must not be null"


def test_batch_get_table_entry_null(server, table):
    for request_items in ({table: None}, {table: {"Keys": [{"pk": {"S": "a"}}]}, "other": None}):
        missing = next(name for name, entry in request_items.items() if entry is None)
        assert _error(server, "BatchGetItem", {"RequestItems": request_items}) == (
            400, "ValidationException", _missing(f"requestItems.{missing}.member.keys"))


def test_batch_write_request_null(server, table):
    status, code, message = _error(server, "BatchWriteItem", {"RequestItems": {table: [None]}})
    assert (status, code) == (400, "ValidationException")
    assert message == ("One or more parameter values were invalid: A WriteRequest must contain exactly one of "
                       "PutRequest or DeleteRequest")


def test_transact_get_item_null(server):
    assert _error(server, "TransactGetItems", {"TransactItems": [None]}) == (
        400, "ValidationException", _missing("transactItems.1.member.get"))


def test_create_table_members_null(server, ddb):
    name = unique_name("nulls")
    base = {"TableName": name, "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}]}
    for member, path in (("AttributeDefinitions", "attributeDefinitions.1.member.attributeName"),
                         ("KeySchema", "keySchema.1.member.attributeName"),
                         ("GlobalSecondaryIndexes", "globalSecondaryIndexes.1.member.indexName")):
        status, code, message = _error(server, "CreateTable", {**base, member: [None]})
        assert (status, code) == (400, "ValidationException"), member
        assert f"Value null at '{path}' failed to satisfy constraint: Member must not be null" in message
    # A null tag reads as an empty one, whose Key and Value are both missing.
    assert _error(server, "CreateTable", {**base, "Tags": [None]}) == (
        400, "ValidationException", NULL_TAG)
    assert not table_exists(ddb, name)


def test_update_table_index_update_null(server, table):
    status, code, message = _error(server, "UpdateTable", {"TableName": table, "GlobalSecondaryIndexUpdates": [None]})
    assert (status, code) == (400, "ValidationException")
    assert message.startswith("One or more parameter values were invalid: One of GlobalSecondaryIndexUpdate")


NULL_TAG = "The Tag Key provided is invalid, Key: null"  # (a null tag reads as {}: DDB-TABLE-457, see tags.py)


def test_tag_resource_tag_null(server, table):
    arn = f"arn:aws:dynamodb:us-east-1:000000000000:table/{table}"
    assert _error(server, "TagResource", {"ResourceArn": arn, "Tags": [None]}) == (
        400, "ValidationException", NULL_TAG)


def test_null_in_a_list_of_names(server, ddb, table):
    """A null among NonKeyAttributes is refused (it was once stored, and the table could no longer be described
    or deleted); nothing is created."""
    name = unique_name("nulls")
    index = {"IndexName": "gix", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
             "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["a", None]}}
    definitions = [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "g", "AttributeType": "S"}]
    assert _error(server, "CreateTable", {
        "TableName": name, "BillingMode": "PAY_PER_REQUEST", "AttributeDefinitions": definitions,
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}], "GlobalSecondaryIndexes": [index]}) == (
        400, "ValidationException",
        _missing("globalSecondaryIndexes.1.member.projection.nonKeyAttributes.2.member"))
    assert not table_exists(ddb, name)
    status, code, message = _error(server, "UpdateTable", {
        "TableName": table, "AttributeDefinitions": definitions,
        "GlobalSecondaryIndexUpdates": [{"Create": index}]})
    assert (status, code) == (400, "ValidationException")
    assert "nonKeyAttributes.2.member' failed to satisfy constraint: Member must not be null" in message
    assert "GlobalSecondaryIndexes" not in ddb.describe_table(TableName=table)["Table"]
