"""Multi-table operations check every action and member before they look any table up (ResourceNotFoundException
only once every check passed; a key against its table's schema only after the table was found), and TagResource
and UntagResource answer with an empty body. Raw HTTP, so boto3's own checks stay out of the way."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.test_protocol import call
from tests.api.test_query import raw_error
from tests.conftest import create_table, unique_name

PATTERN = "Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+"
TOO_SHORT = "Member must have length greater than or equal to 3"
NAME_RULES = ("Map keys must satisfy constraint: [Member must have length less than or equal to 255, Member must "
              f"have length greater than or equal to 3, {PATTERN}]")


@pytest.fixture(scope="module")
def table(ddb: Any) -> str:
    return create_table(ddb, range_type=None)


def item(pk: str = "a") -> dict[str, Any]:
    return {"pk": {"S": pk}}


def missing() -> str:
    return unique_name("missing")


def name_error(path: str, value: str, constraint: str) -> tuple[str, str]:
    return ("ValidationException",
            f"1 validation error detected: Value '{value}' at '{path}' failed to satisfy constraint: {constraint}")


# --- TransactWriteItems ------------------------------------------------------------------------------


def _action(kind: str, table: str, pk: str = "a") -> dict[str, Any]:
    body: dict[str, Any] = {"TableName": table}
    if kind == "Put":
        body["Item"] = item(pk)
    else:
        body["Key"] = item(pk)
    if kind == "Update":
        body["UpdateExpression"] = "SET v = :v"
        body["ExpressionAttributeValues"] = {":v": {"S": "x"}}
    if kind == "ConditionCheck":
        body["ConditionExpression"] = "attribute_exists(pk)"
    return {kind: body}


@pytest.mark.parametrize(("kind", "member"), [("Put", "put"), ("Update", "update"), ("Delete", "delete"),
                                              ("ConditionCheck", "conditionCheck")])
def test_write_malformed_table_name_after_a_missing_table(server, kind, member):
    """A malformed table name in action 2 is refused, naming that member, though action 1's table does not exist."""
    body = {"TransactItems": [_action("Put", missing()), _action(kind, "bad!name")]}
    assert raw_error(server, "TransactWriteItems", body) == name_error(
        f"transactItems.2.member.{member}.tableName", "bad!name", PATTERN)


def test_write_malformed_table_name_before_a_missing_table(server):
    """The reverse order: the malformed name in action 1 is still what is reported."""
    body = {"TransactItems": [_action("Delete", "x"), _action("Put", missing())]}
    assert raw_error(server, "TransactWriteItems", body) == name_error(
        "transactItems.1.member.delete.tableName", "x", TOO_SHORT)


def test_write_table_arn_is_not_held_to_the_name_pattern(server, ddb, table):
    """A table ARN is accepted where a name is (its ':' and '/' are outside the name pattern)."""
    arn = ddb.describe_table(TableName=table)["Table"]["TableArn"]
    response, _ = call(server, json.dumps({"TransactItems": [_action("Put", arn, "arn-put")]}),
                       target="DynamoDB_20120810.TransactWriteItems")
    assert response.status == 200


@pytest.mark.parametrize("bad", [
    pytest.param({}, id="no-action"),
    pytest.param({"Put": {"TableName": "TABLE", "Item": {"pk": {"S": "b"}}},
                  "Delete": {"TableName": "TABLE", "Key": {"pk": {"S": "b"}}}}, id="two-actions"),
    pytest.param({"Put": {"TableName": "arn:aws:dynamodb:elsewhere-1:000000000000:table/TABLE",
                          "Item": {"pk": {"S": "b"}}}}, id="arn-of-another-region"),
    pytest.param({"Update": {"TableName": "TABLE", "Key": {"pk": {"S": "a"}}, "UpdateExpression": "SET"}},
                 id="update-syntax"),
    pytest.param({"ConditionCheck": {"TableName": "TABLE", "Key": {"pk": {"S": "a"}},
                                     "ConditionExpression": "a = :unknown"}}, id="unknown-placeholder"),
])
def test_write_action_checked_before_an_earlier_missing_table(server, table, bad):
    """Every action's own shape is checked before any table is looked up: a missing table in action 1 does not
    hide a malformed action 2 (the same refusal as with the missing table out of the request)."""
    bad = json.loads(json.dumps(bad).replace("TABLE", table))
    alone = raw_error(server, "TransactWriteItems", {"TransactItems": [_action("Put", table, "other"), bad]})
    assert alone[0] == "ValidationException"
    body = {"TransactItems": [_action("Put", missing()), bad]}
    assert raw_error(server, "TransactWriteItems", body) == alone


def test_write_key_schema_is_checked_after_existence(server, table):
    """A key that does not fit its table's schema (action 1) is looked at only once every table was found: a
    missing table in action 2 wins."""
    body = {"TransactItems": [{"Delete": {"TableName": table, "Key": {"pk": {"N": "1"}}}},
                              _action("Put", missing())]}
    assert raw_error(server, "TransactWriteItems", body) == ("ResourceNotFoundException",
                                                             "Requested resource not found")


def test_write_missing_table_once_every_check_passed(server, table):
    body = {"TransactItems": [_action("Put", table, "fine"), _action("Put", missing())]}
    assert raw_error(server, "TransactWriteItems", body) == ("ResourceNotFoundException",
                                                             "Requested resource not found")


# --- TransactGetItems --------------------------------------------------------------------------------


def _get(table: str, **extra: Any) -> dict[str, Any]:
    return {"Get": {"TableName": table, "Key": item(), **extra}}


def test_get_malformed_table_name_after_a_missing_table(server):
    body = {"TransactItems": [_get(missing()), _get("bad!name")]}
    assert raw_error(server, "TransactGetItems", body) == name_error(
        "transactItems.2.member.get.tableName", "bad!name", PATTERN)


def test_get_malformed_table_name_before_a_missing_table(server):
    body = {"TransactItems": [_get("ab"), _get(missing())]}
    assert raw_error(server, "TransactGetItems", body) == name_error(
        "transactItems.1.member.get.tableName", "ab", TOO_SHORT)


def test_get_projection_checked_before_an_earlier_missing_table(server, table):
    bad = _get(table, ProjectionExpression="#unknown")
    alone = raw_error(server, "TransactGetItems", {"TransactItems": [bad]})
    assert alone[0] == "ValidationException"
    assert raw_error(server, "TransactGetItems", {"TransactItems": [_get(missing()), bad]}) == alone


def test_get_key_schema_is_checked_after_existence(server, table):
    body = {"TransactItems": [{"Get": {"TableName": table, "Key": {"pk": {"N": "1"}}}}, _get(missing())]}
    assert raw_error(server, "TransactGetItems", body) == ("ResourceNotFoundException",
                                                           "Requested resource not found")


# --- BatchWriteItem and BatchGetItem -----------------------------------------------------------------


def _part(operation: str, key: dict[str, Any] | None = None) -> Any:
    key = key or item()
    return [{"PutRequest": {"Item": key}}] if operation == "BatchWriteItem" else {"Keys": [key]}


@pytest.mark.parametrize("operation", ["BatchWriteItem", "BatchGetItem"])
@pytest.mark.parametrize("order", ["missing-first", "malformed-first"])
def test_batch_malformed_table_name_beside_a_missing_table(server, operation, order):
    """A table name outside the name rules keys the map: the map's constraint is reported, with all three rules
    (as DynamoDB answered BatchGetItem for 'bad!name', in public conformance recordings of 2026), whichever comes
    first."""
    names = [missing(), "bad!name"] if order == "missing-first" else ["bad!name", missing()]
    body = {"RequestItems": {name: _part(operation) for name in names}}
    code, message = raw_error(server, operation, body)
    assert code == "ValidationException"
    assert message == (f"1 validation error detected: Value '{json.dumps(body['RequestItems'], separators=(',', ':'))}'"
                       f" at 'requestItems' failed to satisfy constraint: {NAME_RULES}")


@pytest.mark.parametrize("bad", [
    pytest.param([{}], id="no-request"),
    pytest.param([{"PutRequest": {"Item": {"pk": {"S": "b"}}}, "DeleteRequest": {"Key": {"pk": {"S": "b"}}}}],
                 id="both-requests"),
])
def test_batch_write_request_checked_before_a_missing_table(server, table, bad):
    """Each write request's own shape is checked before any table is looked up."""
    alone = raw_error(server, "BatchWriteItem", {"RequestItems": {table: bad}})
    assert alone[0] == "ValidationException"
    assert raw_error(server, "BatchWriteItem", {"RequestItems": {missing(): _part("BatchWriteItem"),
                                                                 table: bad}}) == alone


def test_batch_write_key_schema_is_checked_after_existence(server, table):
    body = {"RequestItems": {table: [{"DeleteRequest": {"Key": {"pk": {"N": "1"}}}}],
                             missing(): _part("BatchWriteItem")}}
    assert raw_error(server, "BatchWriteItem", body) == ("ResourceNotFoundException", "Requested resource not found")


def test_batch_get_key_schema_is_checked_after_existence(server, table):
    body = {"RequestItems": {table: {"Keys": [{"pk": {"N": "1"}}]}, missing(): _part("BatchGetItem")}}
    assert raw_error(server, "BatchGetItem", body) == ("ResourceNotFoundException", "Requested resource not found")


# --- empty bodies ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("operation", "member", "value"), [("TagResource", "Tags", [{"Key": "k", "Value": "v"}]),
                                                            ("UntagResource", "TagKeys", ["k"])])
def test_tagging_answers_with_an_empty_body(server, ddb, table, operation, member, value):
    """TagResource and UntagResource have no output shape: 'the service sends back an HTTP 200 response with an
    empty HTTP body' (API Reference, TagResource and UntagResource)."""
    arn = ddb.describe_table(TableName=table)["Table"]["TableArn"]
    response, data = call(server, json.dumps({"ResourceArn": arn, member: value}),
                          target=f"DynamoDB_20120810.{operation}")
    assert (response.status, data, response.getheader("Content-Length")) == (200, b"", "0")
    assert response.getheader("x-amz-crc32") == "0"  # the CRC32 of no bytes


def test_batch_get_malformed_table_name_listed_before_other_violations(server):
    """Several constraint violations are listed in member order, the table key's first (as recorded of
    BatchGetItem with 'bad!name' and an unknown ReturnConsumedCapacity, 2026)."""
    items = {"bad!name": {"Keys": [item()]}}
    body = {"RequestItems": items, "ReturnConsumedCapacity": "BOGUS"}
    assert raw_error(server, "BatchGetItem", body) == (
        "ValidationException",
        f"2 validation errors detected: Value '{json.dumps(items, separators=(',', ':'))}' at 'requestItems' failed "
        f"to satisfy constraint: {NAME_RULES}; Value 'BOGUS' at 'returnConsumedCapacity' failed to satisfy "
        "constraint: Member must satisfy enum value set: [INDEXES, TOTAL, NONE]")


# --- wording by operation family ---------------------------------------------------------------------

# Since 2026 PutItem and UpdateItem count these refusals ("1 validation error detected: ..."); batches and
# transactions still answer them bare, in the older form (issue 30's survey of DynamoDB's wording by family).
_BARE = [
    pytest.param({"pk": {"S": "a"}, "n": {"N": "x1"}}, "The parameter cannot be converted to a numeric value: x1",
                 id="number"),
    pytest.param({"pk": {"S": "a"}, "s": {"SS": []}},
                 "One or more parameter values were invalid: An string set  may not be empty", id="empty-set"),
]


@pytest.mark.parametrize(("value", "message"), _BARE)
def test_batch_and_transaction_writes_answer_value_errors_bare(server, table, value, message):
    """The same bad value is refused in the older, bare form by BatchWriteItem and TransactWriteItems."""
    bodies = {"BatchWriteItem": {"RequestItems": {table: [{"PutRequest": {"Item": value}}]}},
              "TransactWriteItems": {"TransactItems": [{"Put": {"TableName": table, "Item": value}}]}}
    for operation, body in bodies.items():
        assert raw_error(server, operation, body) == ("ValidationException", message), operation


# --- Query and Scan ----------------------------------------------------------------------------------


@pytest.mark.parametrize("operation", ["Query", "Scan"])
@pytest.mark.parametrize(("name", "constraint"), [("bad!name", PATTERN), ("ab", TOO_SHORT)])
def test_read_malformed_table_name_is_refused_not_looked_up(server, operation, name, constraint):
    """A read held to a table name's rules, as the item operations are: no table is looked up for it."""
    body: dict[str, Any] = {"TableName": name}
    if operation == "Query":
        body.update(KeyConditionExpression="pk = :v", ExpressionAttributeValues={":v": {"S": "a"}})
    assert raw_error(server, operation, body) == name_error("tableName", name, constraint)


@pytest.mark.parametrize("operation", ["Query", "Scan"])
def test_read_by_table_arn_is_not_held_to_name_rules(server, operation):
    body: dict[str, Any] = {"TableName": f"arn:aws:dynamodb:us-east-1:000000000000:table/{missing()}"}
    if operation == "Query":
        body.update(KeyConditionExpression="pk = :v", ExpressionAttributeValues={":v": {"S": "a"}})
    assert raw_error(server, operation, body) == ("ResourceNotFoundException", "Requested resource not found")
