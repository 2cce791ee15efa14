"""PutItem, GetItem, UpdateItem and DeleteItem through boto3: round trips, ReturnValues, return values on a failed
condition, ConsumedCapacity arithmetic, ProjectionExpression and ConsistentRead."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest
from boto3.dynamodb.conditions import Attr
from botocore.exceptions import ClientError

from tests.api.test_query import raw_error
from tests.conftest import create_table, unique_name


def error_of(excinfo) -> tuple[str, str]:
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


def key() -> str:
    return uuid.uuid4().hex


def item_of(ddb, table: str, pk: str) -> dict | None:
    return ddb.get_item(TableName=table, Key={"pk": {"S": pk}}, ConsistentRead=True).get("Item")


def padded(pk: str, size: int) -> dict:
    """An item {pk, d} of exactly `size` bytes by DynamoDB's formula (names + UTF-8 values)."""
    filler = size - len("pk") - len(pk.encode()) - len("d")
    assert filler >= 0
    return {"pk": {"S": pk}, "d": {"S": "x" * filler}}




# --- round trips ----------------------------------------------------------------------------------------


def test_put_get_delete_round_trip(ddb, hash_table):
    """The basic life cycle: what is put is got back, a deleted item is gone."""
    pk = key()
    item = {"pk": {"S": pk}, "a": {"S": "x"}, "n": {"N": "5"}}
    assert "Attributes" not in ddb.put_item(TableName=hash_table, Item=item)
    assert ddb.get_item(TableName=hash_table, Key={"pk": {"S": pk}})["Item"] == item
    response = ddb.delete_item(TableName=hash_table, Key={"pk": {"S": pk}})
    assert "Attributes" not in response
    assert "Item" not in ddb.get_item(TableName=hash_table, Key={"pk": {"S": pk}})


def test_get_missing_item_has_no_item_member(ddb, hash_table):
    """A GetItem of a missing key answers {} (no Item member), not an error."""
    response = ddb.get_item(TableName=hash_table, Key={"pk": {"S": key()}})
    assert "Item" not in response


def test_put_replaces_the_whole_item(ddb, hash_table):
    """PutItem replaces every attribute; attributes absent from the new item are gone."""
    pk = key()
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "a": {"S": "1"}, "b": {"S": "2"}})
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "c": {"S": "3"}})
    assert item_of(ddb, hash_table, pk) == {"pk": {"S": pk}, "c": {"S": "3"}}


def test_delete_missing_item_succeeds(ddb, hash_table):
    """Deleting a key that does not exist is not an error."""
    response = ddb.delete_item(TableName=hash_table, Key={"pk": {"S": key()}}, ReturnValues="ALL_OLD")
    assert "Attributes" not in response


def test_composite_key_items_are_distinct(ddb, range_table):
    """Items differing only in the sort key are separate items."""
    pk = key()
    for sk in ("a", "b"):
        ddb.put_item(TableName=range_table, Item={"pk": {"S": pk}, "sk": {"S": sk}, "v": {"S": sk * 2}})
    got = ddb.get_item(TableName=range_table, Key={"pk": {"S": pk}, "sk": {"S": "b"}})["Item"]
    assert got["v"] == {"S": "bb"}
    ddb.delete_item(TableName=range_table, Key={"pk": {"S": pk}, "sk": {"S": "a"}})
    assert "Item" in ddb.get_item(TableName=range_table, Key={"pk": {"S": pk}, "sk": {"S": "b"}})


def test_resource_api_round_trip(resource, hash_table):
    """The boto3 resource layer (Table.put_item/get_item/update_item/delete_item) works end to end."""
    table = resource.Table(hash_table)
    pk = key()
    table.put_item(Item={"pk": pk, "n": 1, "tags": {"a", "b"}, "doc": {"x": [1, "two", None, True]}})
    got = table.get_item(Key={"pk": pk})["Item"]
    assert got == {"pk": pk, "n": Decimal(1), "tags": {"a", "b"}, "doc": {"x": [Decimal(1), "two", None, True]}}
    updated = table.update_item(Key={"pk": pk}, UpdateExpression="SET n = n + :one",
                                ExpressionAttributeValues={":one": 1}, ReturnValues="UPDATED_NEW")
    assert updated["Attributes"] == {"n": Decimal(2)}
    with pytest.raises(ClientError) as excinfo:
        table.put_item(Item={"pk": pk}, ConditionExpression=Attr("pk").not_exists())
    assert error_of(excinfo) == ("ConditionalCheckFailedException", "The conditional request failed")
    table.delete_item(Key={"pk": pk}, ConditionExpression=Attr("n").eq(2))
    assert "Item" not in table.get_item(Key={"pk": pk})


def test_table_by_arn(ddb, hash_table):
    """Item operations accept the table's ARN in TableName."""
    arn = ddb.describe_table(TableName=hash_table)["Table"]["TableArn"]
    pk = key()
    ddb.put_item(TableName=arn, Item={"pk": {"S": pk}})
    assert ddb.get_item(TableName=arn, Key={"pk": {"S": pk}})["Item"] == {"pk": {"S": pk}}


@pytest.mark.parametrize("operation", ["put_item", "get_item", "update_item", "delete_item"])
def test_missing_table(ddb, operation):
    """Every item operation on a missing table is ResourceNotFoundException with DynamoDB's short wording."""
    args = {"Item": {"pk": {"S": "a"}}} if operation == "put_item" else {"Key": {"pk": {"S": "a"}}}
    with pytest.raises(ClientError) as excinfo:
        getattr(ddb, operation)(TableName=unique_name("missing"), **args)
    assert error_of(excinfo) == ("ResourceNotFoundException", "Requested resource not found")


# --- ReturnValues ---------------------------------------------------------------------------------------


def test_put_return_values_all_old(ddb, hash_table):
    """PutItem ALL_OLD returns the replaced item, and nothing when there was none."""
    pk = key()
    first = ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "v": {"N": "1"}}, ReturnValues="ALL_OLD")
    assert "Attributes" not in first
    second = ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "v": {"N": "2"}}, ReturnValues="ALL_OLD")
    assert second["Attributes"] == {"pk": {"S": pk}, "v": {"N": "1"}}
    none = ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}}, ReturnValues="NONE")
    assert "Attributes" not in none


def test_delete_return_values_all_old(ddb, hash_table):
    """DeleteItem ALL_OLD returns the deleted item."""
    pk = key()
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "v": {"S": "x"}})
    response = ddb.delete_item(TableName=hash_table, Key={"pk": {"S": pk}}, ReturnValues="ALL_OLD")
    assert response["Attributes"] == {"pk": {"S": pk}, "v": {"S": "x"}}


@pytest.mark.parametrize("operation", ["put_item", "delete_item"])
@pytest.mark.parametrize("value", ["ALL_NEW", "UPDATED_OLD", "UPDATED_NEW"])
def test_put_delete_reject_update_only_return_values(ddb, hash_table, operation, value):
    """PutItem and DeleteItem recognise only NONE and ALL_OLD, and word the refusal alike (DeleteItem: boto3 issue
    4339, 2024; PutItem: verified in us-east-1, ExtendDB PR 211, 2026)."""
    pk = key()
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "v": {"S": "old"}})
    args = {"Item": {"pk": {"S": pk}, "v": {"S": "new"}}} if operation == "put_item" else \
        {"Key": {"pk": {"S": pk}}}
    with pytest.raises(ClientError) as excinfo:
        getattr(ddb, operation)(TableName=hash_table, ReturnValues=value, **args)
    assert error_of(excinfo) == ("ValidationException", "ReturnValues can only be ALL_OLD or NONE")
    assert item_of(ddb, hash_table, pk) == {"pk": {"S": pk}, "v": {"S": "old"}}


@pytest.mark.parametrize("operation", ["put_item", "delete_item", "update_item"])
def test_return_values_outside_the_enum(ddb, hash_table, operation):
    """A ReturnValues outside the enum fails the request's shape validation."""
    args = {"Item": {"pk": {"S": "a"}}} if operation == "put_item" else {"Key": {"pk": {"S": "a"}}}
    with pytest.raises(ClientError) as excinfo:
        getattr(ddb, operation)(TableName=hash_table, ReturnValues="EVERYTHING", **args)
    # DynamoDB's wording since 2026, without the value or the member (recorded in every region, 2026-09-20).
    assert error_of(excinfo) == (
        "ValidationException", "1 validation error detected: Failed to satisfy constraint: Member must satisfy "
                               "enum value set: [ALL_OLD, UPDATED_OLD, ALL_NEW, UPDATE_NEW, NONE]")


@pytest.mark.parametrize("target", ["PutItem", "DeleteItem"])
def test_several_bad_enums_are_listed_in_dynamodbs_order(server, target):
    """PutItem and DeleteItem list every bad enum, ReturnConsumedCapacity before ReturnValues (recorded in every
    region, 2026-09-20); UpdateItem reports ReturnValues alone (see test_empty_table_name_is_reported_alone)."""
    body: dict = {"TableName": "any-table", "ReturnValues": "INVALID", "ReturnConsumedCapacity": "INVALID",
                  "ReturnItemCollectionMetrics": "INVALID"}
    body.update({"Item": {"pk": {"S": "a"}}} if target == "PutItem" else {"Key": {"pk": {"S": "a"}}})
    assert raw_error(server, target, body) == (
        "ValidationException",
        "3 validation errors detected: Value 'INVALID' at 'returnConsumedCapacity' failed to satisfy constraint: "
        "Member must satisfy enum value set: [INDEXES, TOTAL, NONE]; Failed to satisfy constraint: Member must "
        "satisfy enum value set: [ALL_OLD, UPDATED_OLD, ALL_NEW, UPDATE_NEW, NONE]; Value 'INVALID' at "
        "'returnItemCollectionMetrics' failed to satisfy constraint: Member must satisfy enum value set: [SIZE, NONE]")


COUNT = "1 validation error detected: "


def test_counted_refusals_as_recorded(server, hash_table):
    """The refusals PutItem and UpdateItem count, spelled out as recorded in every region of paritysuite's
    2026-09-20 cross-region run; and refusals that stay bare."""
    def put(**extra: object) -> str:
        return raw_error(server, "PutItem", {"TableName": hash_table, "Item": {"pk": {"S": "a"}}, **extra})[1]

    def update(**extra: object) -> str:
        return raw_error(server, "UpdateItem", {"TableName": hash_table, "Key": {"pk": {"S": "a"}}, **extra})[1]

    invalid = "One or more parameter values were invalid: "
    assert put(Item={"pk": {"S": "a"}, "s": {"SS": []}}) == COUNT + invalid + "An string set  may not be empty"
    assert put(Item={"pk": {"S": "a"}, "s": {"BS": []}}) == COUNT + invalid + "Binary sets should not be empty"
    assert put(Item={"pk": {"S": "a"}, "s": {"SS": ["a", "a"]}}) == \
        COUNT + invalid + 'Input collection ["a", "a"] contains duplicates.'
    assert put(Item={"pk": {"S": "a"}, "s": {"NS": [""]}}) == \
        COUNT + "The parameter cannot be converted to a numeric value: "
    assert put(Item={"pk": {"S": "a"}, "n": {"NULL": False}}) == \
        COUNT + invalid + "Null attribute value types must have the value of true"
    assert put(ConditionExpression="((attribute_not_exists(pk)))") == \
        COUNT + "Invalid ConditionExpression: The expression has redundant parentheses;"
    assert put(ConditionExpression="contains(#d, #d)", ExpressionAttributeNames={"#d": "data"}) == \
        COUNT + ("Invalid ConditionExpression: The first operand must be distinct from the remaining operands for "
                 "this operator or function; operator: contains, first operand: [data]")
    assert put(ExpressionAttributeValues={":v": {"S": "x"}}) == \
        COUNT + "ExpressionAttributeValues can only be specified when using expressions"
    assert put(Expected={"a": {"Exists": False}}, ConditionExpression="attribute_exists(a)") == \
        COUNT + ("Can not use both expression and non-expression parameters in the same request: Non-expression "
                 "parameters: {Expected} Expression parameters: {ConditionExpression}")
    assert update(UpdateExpression="INVALID SYNTAX") == \
        COUNT + 'Invalid UpdateExpression: Syntax error; token: "INVALID", near: "INVALID SYNTAX"'
    assert update(UpdateExpression="SET a = :v", ExpressionAttributeValues={":v": {"S": "x"}},
                  ExpressionAttributeNames={"#unused": "u"}) == \
        COUNT + "Value provided in ExpressionAttributeNames unused in expressions: keys: {#unused}"
    assert update(UpdateExpression="SET a = :v") == COUNT + (
        "Invalid UpdateExpression: An expression attribute value used in expression is not defined; attribute "
        "value: :v")
    assert update(UpdateExpression="") == COUNT + "Invalid UpdateExpression: The expression can not be empty;"
    # Bare: an empty attribute name, a number out of range, a key, another operation's expression.
    assert put(Item={"pk": {"S": "a"}, "": {"S": "x"}}) == invalid + "An attribute name cannot be empty"
    assert update(UpdateExpression="SET a = :v", ExpressionAttributeValues={":v": {"N": "1E200"}}) == (
        "ExpressionAttributeValues contains invalid value: Number overflow. Attempting to store a number with "
        "magnitude larger than supported range for key :v")
    assert raw_error(server, "UpdateItem", {"TableName": hash_table, "Key": {"pk": {"N": "x"}},
                                            "UpdateExpression": "REMOVE a"})[1] == \
        "The parameter cannot be converted to a numeric value: x"
    assert raw_error(server, "DeleteItem", {"TableName": hash_table, "Key": {"pk": {"S": "a"}},
                                            "ConditionExpression": "a ="})[1].startswith("Invalid ConditionExpression")


@pytest.mark.parametrize(("name", "constraint"), [
    ("a" * 256, "Member must have length less than or equal to 255"),
    ("bad table!@#", "Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+"),
    ("ab", "Member must have length greater than or equal to 3"),
])
def test_item_operation_table_names_are_checked_as_names(server, name, constraint):
    """A TableName that is not an ARN is held to a table name's constraints (recorded for PutItem in every
    region, 2026-09-20), not looked up."""
    for target, body in (("PutItem", {"Item": {"pk": {"S": "a"}}}), ("GetItem", {"Key": {"pk": {"S": "a"}}}),
                         ("UpdateItem", {"Key": {"pk": {"S": "a"}}}), ("DeleteItem", {"Key": {"pk": {"S": "a"}}})):
        assert raw_error(server, target, {"TableName": name, **body}) == (
            "ValidationException",
            f"1 validation error detected: Value '{name}' at 'tableName' failed to satisfy constraint: {constraint}")


@pytest.mark.parametrize("target", ["PutItem", "GetItem", "UpdateItem", "DeleteItem"])
def test_empty_table_name_is_reported_alone(server, target):
    """An empty TableName is reported on its own, in the item operations' 2026 wording (captured for PutItem in
    31 of 33 regions); an invalid ReturnValues beside it is not reported. UpdateItem's invalid ReturnValues
    alone is reported alone too, beside an invalid ReturnConsumedCapacity."""
    body = {"TableName": "", "Key": {"pk": {"S": "a"}}, "ReturnValues": "INVALID"}
    if target == "PutItem":
        body = {"TableName": "", "Item": {"pk": {"S": "a"}}, "ReturnValues": "INVALID"}
    if target == "GetItem":
        body = {"TableName": "", "Key": {"pk": {"S": "a"}}, "ReturnConsumedCapacity": "INVALID"}
    assert raw_error(server, target, body) == (
        "ValidationException", "1 validation error detected: Value at 'TableName' failed to satisfy constraint: "
                               "Member must have length greater than or equal to 1")
    if target == "UpdateItem":
        body = {"TableName": "any-table", "Key": {"pk": {"S": "a"}}, "ReturnValues": "INVALID",
                "ReturnConsumedCapacity": "INVALID"}
        assert raw_error(server, target, body) == (
            "ValidationException", "1 validation error detected: Failed to satisfy constraint: Member must satisfy "
                                   "enum value set: [ALL_OLD, UPDATED_OLD, ALL_NEW, UPDATE_NEW, NONE]")
        # With legacy members too; but a member wrong beside it keeps every violation in the usual message.
        legacy = {**body, "AttributeUpdates": {"a": {"Action": "PUT", "Value": {"S": "x"}}}}
        assert raw_error(server, target, legacy)[1].startswith("1 validation error detected: Failed to satisfy")
        _, message = raw_error(server, target, {**body, "TableName": "t" * 1025})
        assert message.startswith("3 validation errors detected: Value 'ttt") and "[ALL_OLD, UPDATED_OLD" in message
    # An empty TableName beside legacy members gets the same answer.
    legacy_member = {"PutItem": {"Expected": {"a": {"Exists": False}}},
                     "GetItem": {"AttributesToGet": ["a"]},
                     "UpdateItem": {"AttributeUpdates": {"a": {"Action": "DELETE"}}},
                     "DeleteItem": {"Expected": {"a": {"Exists": False}}}}[target]
    assert raw_error(server, target, {**body, "TableName": "", **legacy_member}) == (
        "ValidationException", "1 validation error detected: Value at 'TableName' failed to satisfy constraint: "
                               "Member must have length greater than or equal to 1")


# --- ReturnValuesOnConditionCheckFailure --------------------------------------------------------------


@pytest.mark.parametrize("operation", ["put_item", "update_item", "delete_item"])
def test_condition_failure_returns_old_item(ddb, hash_table, operation):
    """ALL_OLD on a failed condition puts the current item on the ConditionalCheckFailedException as Item."""
    pk = key()
    old = {"pk": {"S": pk}, "v": {"N": "1"}}
    ddb.put_item(TableName=hash_table, Item=old)
    args: dict = {"Item": {"pk": {"S": pk}, "v": {"N": "2"}}} if operation == "put_item" else \
        {"Key": {"pk": {"S": pk}}}
    if operation == "update_item":
        args["UpdateExpression"] = "SET v = :two"
        args["ExpressionAttributeValues"] = {":two": {"N": "2"}, ":zero": {"N": "0"}}
    else:
        args["ExpressionAttributeValues"] = {":zero": {"N": "0"}}
    with pytest.raises(ClientError) as excinfo:
        getattr(ddb, operation)(TableName=hash_table, ConditionExpression="v = :zero",
                                ReturnValuesOnConditionCheckFailure="ALL_OLD", **args)
    assert error_of(excinfo) == ("ConditionalCheckFailedException", "The conditional request failed")
    assert excinfo.value.response["Item"] == old
    assert item_of(ddb, hash_table, pk) == old


def test_condition_failure_without_all_old_has_no_item(ddb, hash_table):
    """Without ALL_OLD (absent or NONE) the exception carries no Item."""
    pk = key()
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}})
    for extra in ({}, {"ReturnValuesOnConditionCheckFailure": "NONE"}):
        with pytest.raises(ClientError) as excinfo:
            ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}}, ConditionExpression="attribute_not_exists(pk)",
                         **extra)
        assert "Item" not in excinfo.value.response


def test_condition_failure_on_missing_item_has_no_item(ddb, hash_table):
    """ALL_OLD on a failed condition against a missing item returns no Item (there is none)."""
    with pytest.raises(ClientError) as excinfo:
        ddb.delete_item(TableName=hash_table, Key={"pk": {"S": key()}}, ConditionExpression="attribute_exists(pk)",
                        ReturnValuesOnConditionCheckFailure="ALL_OLD")
    assert error_of(excinfo)[0] == "ConditionalCheckFailedException"
    assert "Item" not in excinfo.value.response


def test_return_values_on_condition_check_failure_enum(ddb, hash_table):
    """ReturnValuesOnConditionCheckFailure accepts only ALL_OLD and NONE."""
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=hash_table, Item={"pk": {"S": "a"}}, ReturnValuesOnConditionCheckFailure="ALL_NEW")
    assert error_of(excinfo) == (
        "ValidationException",
        "1 validation error detected: Value 'ALL_NEW' at 'returnValuesOnConditionCheckFailure' failed to satisfy "
        "constraint: Member must satisfy enum value set: [ALL_OLD, NONE]")


# --- ConsumedCapacity -----------------------------------------------------------------------------------


def consumed(response) -> float:
    return response["ConsumedCapacity"]["CapacityUnits"]


@pytest.mark.parametrize(("size", "units"), [(40, 1.0), (1024, 1.0), (1025, 2.0), (3000, 3.0), (4096, 4.0)])
def test_put_capacity_in_1kb_units(ddb, hash_table, size, units):
    """A write costs one unit per started KB of the item."""
    response = ddb.put_item(TableName=hash_table, Item=padded(key(), size), ReturnConsumedCapacity="TOTAL")
    assert response["ConsumedCapacity"] == {"TableName": hash_table, "CapacityUnits": units}


def test_put_capacity_counts_the_larger_of_old_and_new(ddb, hash_table):
    """Overwriting a 3 KB item with a tiny one still costs 3 units: the larger of the two items counts."""
    pk = key()
    ddb.put_item(TableName=hash_table, Item=padded(pk, 3000))
    response = ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}}, ReturnConsumedCapacity="TOTAL")
    assert consumed(response) == 3.0
    response = ddb.put_item(TableName=hash_table, Item=padded(pk, 2000), ReturnConsumedCapacity="TOTAL")
    assert consumed(response) == 2.0


def test_delete_capacity(ddb, hash_table):
    """A delete costs the deleted item's size in KB units; deleting nothing costs 1."""
    pk = key()
    ddb.put_item(TableName=hash_table, Item=padded(pk, 2500))
    assert consumed(ddb.delete_item(TableName=hash_table, Key={"pk": {"S": pk}},
                                    ReturnConsumedCapacity="TOTAL")) == 3.0
    assert consumed(ddb.delete_item(TableName=hash_table, Key={"pk": {"S": pk}},
                                    ReturnConsumedCapacity="TOTAL")) == 1.0


def test_update_capacity_counts_the_larger_of_old_and_new(ddb, hash_table):
    """UpdateItem costs the larger of the item before and after the update."""
    pk = key()
    ddb.put_item(TableName=hash_table, Item=padded(pk, 1500))
    grow = ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}}, UpdateExpression="SET e = :e",
                           ExpressionAttributeValues={":e": {"S": "y" * 2000}}, ReturnConsumedCapacity="TOTAL")
    assert consumed(grow) == 4.0  # 1500 + 1 + 2000 bytes
    shrink = ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}}, UpdateExpression="REMOVE e, d",
                             ReturnConsumedCapacity="TOTAL")
    assert consumed(shrink) == 4.0
    create = ddb.update_item(TableName=hash_table, Key={"pk": {"S": key()}}, UpdateExpression="SET a = :a",
                             ExpressionAttributeValues={":a": {"S": "a"}}, ReturnConsumedCapacity="TOTAL")
    assert consumed(create) == 1.0


@pytest.mark.parametrize(("size", "consistent", "units"), [
    (100, False, 0.5), (100, True, 1.0), (4096, True, 1.0), (4097, True, 2.0), (4097, False, 1.0),
    (9000, False, 1.5), (9000, True, 3.0),
])
def test_get_capacity_in_4kb_units(ddb, hash_table, size, consistent, units):
    """A read costs one unit per started 4 KB, half for an eventually consistent read."""
    pk = key()
    ddb.put_item(TableName=hash_table, Item=padded(pk, size))
    response = ddb.get_item(TableName=hash_table, Key={"pk": {"S": pk}}, ConsistentRead=consistent,
                            ReturnConsumedCapacity="TOTAL")
    assert response["ConsumedCapacity"] == {"TableName": hash_table, "CapacityUnits": units}


def test_get_capacity_counts_the_whole_item_not_the_projection(ddb, hash_table):
    """A projection does not make a read cheaper: the stored item's size counts."""
    pk = key()
    ddb.put_item(TableName=hash_table, Item=padded(pk, 9000))
    response = ddb.get_item(TableName=hash_table, Key={"pk": {"S": pk}}, ProjectionExpression="pk",
                            ConsistentRead=True, ReturnConsumedCapacity="TOTAL")
    assert response["Item"] == {"pk": {"S": pk}}
    assert consumed(response) == 3.0


@pytest.mark.parametrize(("consistent", "units"), [(False, 0.5), (True, 1.0)])
def test_get_missing_item_still_costs(ddb, hash_table, consistent, units):
    """Reading a key that does not exist still costs the minimum read."""
    response = ddb.get_item(TableName=hash_table, Key={"pk": {"S": key()}}, ConsistentRead=consistent,
                            ReturnConsumedCapacity="TOTAL")
    assert "Item" not in response
    assert consumed(response) == units


def test_capacity_indexes_adds_the_table_breakdown(ddb, hash_table):
    """INDEXES adds the per-table figure (Table.CapacityUnits) to the total."""
    pk = key()
    response = ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}}, ReturnConsumedCapacity="INDEXES")
    assert response["ConsumedCapacity"] == {"TableName": hash_table, "CapacityUnits": 1.0,
                                            "Table": {"CapacityUnits": 1.0}}
    response = ddb.get_item(TableName=hash_table, Key={"pk": {"S": pk}}, ReturnConsumedCapacity="INDEXES")
    assert response["ConsumedCapacity"] == {"TableName": hash_table, "CapacityUnits": 0.5,
                                            "Table": {"CapacityUnits": 0.5}}
    for operation, args in (("update_item", {"Key": {"pk": {"S": pk}}}), ("delete_item", {"Key": {"pk": {"S": pk}}})):
        response = getattr(ddb, operation)(TableName=hash_table, ReturnConsumedCapacity="INDEXES", **args)
        assert response["ConsumedCapacity"]["Table"] == {"CapacityUnits": 1.0}


@pytest.mark.parametrize("mode", [None, "NONE"])
def test_no_capacity_unless_asked(ddb, hash_table, mode):
    """ConsumedCapacity is only returned for TOTAL or INDEXES."""
    extra = {} if mode is None else {"ReturnConsumedCapacity": mode}
    pk = key()
    assert "ConsumedCapacity" not in ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}}, **extra)
    assert "ConsumedCapacity" not in ddb.get_item(TableName=hash_table, Key={"pk": {"S": pk}}, **extra)
    assert "ConsumedCapacity" not in ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}}, **extra)
    assert "ConsumedCapacity" not in ddb.delete_item(TableName=hash_table, Key={"pk": {"S": pk}}, **extra)


def test_return_consumed_capacity_enum(ddb, hash_table):
    """ReturnConsumedCapacity outside INDEXES/TOTAL/NONE is a validation error."""
    with pytest.raises(ClientError) as excinfo:
        ddb.get_item(TableName=hash_table, Key={"pk": {"S": "a"}}, ReturnConsumedCapacity="ALL")
    assert error_of(excinfo) == (
        "ValidationException",
        "1 validation error detected: Value 'ALL' at 'returnConsumedCapacity' failed to satisfy constraint: "
        "Member must satisfy enum value set: [INDEXES, TOTAL, NONE]")


# --- GetItem: projection and consistency ----------------------------------------------------------------


DOC = {"a": {"S": "1"}, "b": {"M": {"c": {"N": "2"}, "d": {"L": [{"S": "x"}, {"S": "y"}, {"S": "z"}]}}},
       "name": {"S": "reserved"}}


@pytest.fixture(scope="module")
def doc_key(ddb, hash_table) -> str:
    pk = key()
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, **DOC})
    return pk


@pytest.mark.parametrize(("projection", "names", "expected"), [
    ("a", None, {"a": {"S": "1"}}),
    ("a, pk", None, "a+pk"),
    ("b.c", None, {"b": {"M": {"c": {"N": "2"}}}}),
    ("b.d[2], b.d[0]", None, {"b": {"M": {"d": {"L": [{"S": "x"}, {"S": "z"}]}}}}),
    ("#n", {"#n": "name"}, {"name": {"S": "reserved"}}),
    ("nope, b.nothing, b.d[9]", None, {}),
])
def test_projection_expression(ddb, hash_table, doc_key, projection, names, expected):
    """ProjectionExpression keeps only the selected paths, nested structure preserved; missing paths vanish."""
    extra = {} if names is None else {"ExpressionAttributeNames": names}
    response = ddb.get_item(TableName=hash_table, Key={"pk": {"S": doc_key}}, ProjectionExpression=projection,
                            **extra)
    if expected == "a+pk":
        expected = {"a": {"S": "1"}, "pk": {"S": doc_key}}
    if expected:
        assert response["Item"] == expected
    else:
        assert response.get("Item", {}) == {}


def test_projection_reserved_word(ddb, hash_table, doc_key):
    """A reserved word in a ProjectionExpression must be aliased."""
    with pytest.raises(ClientError) as excinfo:
        ddb.get_item(TableName=hash_table, Key={"pk": {"S": doc_key}}, ProjectionExpression="name")
    assert error_of(excinfo) == ("ValidationException", "Invalid ProjectionExpression: Attribute name is a reserved "
                                                        "keyword; reserved keyword: name")


def test_projection_unused_and_undefined_names(ddb, hash_table, doc_key):
    """Names must be defined when used and used when defined."""
    with pytest.raises(ClientError) as excinfo:
        ddb.get_item(TableName=hash_table, Key={"pk": {"S": doc_key}}, ProjectionExpression="a",
                     ExpressionAttributeNames={"#x": "x"})
    assert error_of(excinfo) == ("ValidationException",
                                 "Value provided in ExpressionAttributeNames unused in expressions: keys: {#x}")
    with pytest.raises(ClientError) as excinfo:
        ddb.get_item(TableName=hash_table, Key={"pk": {"S": doc_key}}, ProjectionExpression="#y")
    assert error_of(excinfo) == ("ValidationException",
                                 "Invalid ProjectionExpression: An expression attribute name used in the document "
                                 "path is not defined; attribute name: #y")
    with pytest.raises(ClientError) as excinfo:
        ddb.get_item(TableName=hash_table, Key={"pk": {"S": doc_key}}, ExpressionAttributeNames={"#x": "x"})
    assert error_of(excinfo) == ("ValidationException",
                                 "ExpressionAttributeNames can only be specified when using expressions")


def test_projection_overlapping_paths(ddb, hash_table, doc_key):
    """Two projected paths where one contains the other are rejected."""
    with pytest.raises(ClientError) as excinfo:
        ddb.get_item(TableName=hash_table, Key={"pk": {"S": doc_key}}, ProjectionExpression="b, b.c")
    assert error_of(excinfo) == ("ValidationException",
                                 "Invalid ProjectionExpression: Two document paths overlap with each other; must "
                                 "remove or rewrite one of these paths; path one: [b], path two: [b, c]")


def test_empty_projection_expression(ddb, hash_table, doc_key):
    """An empty ProjectionExpression is rejected."""
    with pytest.raises(ClientError) as excinfo:
        ddb.get_item(TableName=hash_table, Key={"pk": {"S": doc_key}}, ProjectionExpression="")
    assert error_of(excinfo) == ("ValidationException",
                                 "Invalid ProjectionExpression: The expression can not be empty;")


@pytest.mark.parametrize("consistent", [True, False])
def test_consistent_read_sees_the_latest_write(ddb, hash_table, consistent):
    """Both read modes return the item just written (a single node is always up to date)."""
    pk = key()
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "v": {"N": "1"}})
    got = ddb.get_item(TableName=hash_table, Key={"pk": {"S": pk}}, ConsistentRead=consistent)
    assert got["Item"]["v"] == {"N": "1"}


# --- rejected requests change nothing -------------------------------------------------------------------


def test_rejected_requests_leave_the_item_unchanged(ddb, hash_table):
    """Validation and condition failures of every write operation leave the stored item as it was."""
    pk = key()
    original = {"pk": {"S": pk}, "v": {"N": "1"}, "s": {"SS": ["a"]}}
    ddb.put_item(TableName=hash_table, Item=original)
    attempts = [
        lambda: ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "v": {"N": "1e200"}}),
        lambda: ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}}, ConditionExpression="v = :v",
                             ExpressionAttributeValues={":v": {"N": "2"}}),
        lambda: ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}}, UpdateExpression="SET v = :v, w = v.x",
                                ExpressionAttributeValues={":v": {"N": "3"}}),
        lambda: ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}}, UpdateExpression="SET v = :v",
                                ConditionExpression="attribute_not_exists(v)",
                                ExpressionAttributeValues={":v": {"N": "3"}}),
        lambda: ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}}, UpdateExpression="ADD s :n, v :one",
                                ExpressionAttributeValues={":n": {"NS": ["1"]}, ":one": {"N": "1"}}),
        lambda: ddb.delete_item(TableName=hash_table, Key={"pk": {"S": pk}}, ConditionExpression="v > :v",
                                ExpressionAttributeValues={":v": {"N": "5"}}),
        lambda: ddb.delete_item(TableName=hash_table, Key={"pk": {"S": pk}}, ConditionExpression="v >",
                                ExpressionAttributeValues={":v": {"N": "5"}}),
    ]
    for attempt in attempts:
        with pytest.raises(ClientError):
            attempt()
        assert item_of(ddb, hash_table, pk) == original


def test_number_keyed_table(ddb):
    """Number keys are matched numerically: 1.0 and 1 name the same item."""
    table = create_table(ddb, hash_type="N", range_type="B")
    ddb.put_item(TableName=table, Item={"pk": {"N": "1.0"}, "sk": {"B": b"\x00\x01"}, "v": {"S": "x"}})
    got = ddb.get_item(TableName=table, Key={"pk": {"N": "1"}, "sk": {"B": b"\x00\x01"}})["Item"]
    assert got == {"pk": {"N": "1"}, "sk": {"B": b"\x00\x01"}, "v": {"S": "x"}}
