"""DynamoDB's legacy conditional parameters through boto3: Expected, ConditionalOperator, AttributeUpdates,
AttributesToGet, KeyConditions, QueryFilter and ScanFilter, their validation messages, and the refusal to mix
them with expression parameters."""

from __future__ import annotations

import json
import uuid

import pytest
from botocore.exceptions import ClientError

from tests.api.counted import counted
from tests.api.test_indexes import defs, gsi, schema
from tests.api.test_protocol import call
from tests.conftest import create_table, unique_name

INVALID = "One or more parameter values were invalid: "


def error_of(excinfo) -> tuple[str, str]:
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


def new_key() -> str:
    return uuid.uuid4().hex


def item_of(ddb, table: str, pk: str) -> dict | None:
    return ddb.get_item(TableName=table, Key={"pk": {"S": pk}}, ConsistentRead=True).get("Item")


def mixing(legacy: str, expressions: str) -> str:
    return ("Can not use both expression and non-expression parameters in the same request: "
            f"Non-expression parameters: {{{legacy}}} Expression parameters: {{{expressions}}}")


def cond(operator: str, *values: dict) -> dict:
    condition: dict = {"ComparisonOperator": operator}
    if values:
        condition["AttributeValueList"] = list(values)
    return condition


SAMPLE = {
    "n": {"N": "5"},
    "s": {"S": "hello"},
    "b": {"B": b"\x01\x02\x03"},
    "ss": {"SS": ["a", "b"]},
    "ns": {"NS": ["1", "2"]},
    "l": {"L": [{"S": "x"}, {"N": "1"}]},
    "m": {"M": {"k": {"S": "v"}}},
    "t": {"BOOL": True},
    "z": {"NULL": True},
}


@pytest.fixture(scope="module")
def sample(ddb, hash_table) -> str:
    """An item holding one attribute of each type, never modified by the tests that read it."""
    pk = new_key()
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, **SAMPLE})
    return pk


def check_expected(ddb, table: str, pk: str, expected: dict, operator: str | None = None) -> bool:
    """Whether `expected` holds on the item: an UpdateItem with only a condition changes nothing either way."""
    params: dict = {"TableName": table, "Key": {"pk": {"S": pk}}, "Expected": expected}
    if operator is not None:
        params["ConditionalOperator"] = operator
    try:
        ddb.update_item(**params)
    except ClientError as error:
        if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return False
        raise
    return True


# --- Expected: semantics --------------------------------------------------------------------------------


@pytest.mark.parametrize(("attribute", "condition", "holds"), [
    ("n", cond("EQ", {"N": "5.0"}), True),
    ("n", cond("EQ", {"S": "5"}), False),
    ("ss", cond("EQ", {"SS": ["b", "a"]}), True),
    ("m", cond("EQ", {"M": {"k": {"S": "v"}}}), True),
    ("t", cond("EQ", {"BOOL": True}), True),
    ("n", cond("NE", {"N": "5"}), False),
    ("n", cond("NE", {"N": "6"}), True),
    ("n", cond("NE", {"S": "5"}), True),
    ("missing", cond("NE", {"N": "5"}), True),
    ("n", cond("LT", {"N": "6"}), True),
    ("n", cond("LT", {"N": "5"}), False),
    ("n", cond("LE", {"N": "5"}), True),
    ("n", cond("GT", {"N": "4"}), True),
    ("n", cond("GT", {"N": "5"}), False),
    ("n", cond("GE", {"N": "5"}), True),
    ("s", cond("LT", {"S": "help"}), True),
    ("b", cond("GT", {"B": b"\x01\x02"}), True),
    ("n", cond("GT", {"S": "1"}), False),
    ("missing", cond("LT", {"N": "6"}), False),
    ("n", cond("NOT_NULL"), True),
    ("z", cond("NOT_NULL"), True),
    ("missing", cond("NOT_NULL"), False),
    ("missing", cond("NULL"), True),
    ("z", cond("NULL"), False),
    ("s", cond("CONTAINS", {"S": "ell"}), True),
    ("s", cond("CONTAINS", {"S": "xyz"}), False),
    ("ss", cond("CONTAINS", {"S": "a"}), True),
    ("ns", cond("CONTAINS", {"N": "2"}), True),
    ("ns", cond("CONTAINS", {"S": "2"}), False),
    ("l", cond("CONTAINS", {"S": "x"}), True),
    ("b", cond("CONTAINS", {"B": b"\x02\x03"}), True),
    ("missing", cond("CONTAINS", {"S": "a"}), False),
    ("ss", cond("NOT_CONTAINS", {"S": "z"}), True),
    ("ss", cond("NOT_CONTAINS", {"S": "a"}), False),
    ("s", cond("NOT_CONTAINS", {"S": "ell"}), False),
    ("missing", cond("NOT_CONTAINS", {"S": "a"}), True),
    ("s", cond("BEGINS_WITH", {"S": "he"}), True),
    ("s", cond("BEGINS_WITH", {"S": "lo"}), False),
    ("b", cond("BEGINS_WITH", {"B": b"\x01"}), True),
    ("n", cond("IN", {"N": "1"}, {"N": "5"}), True),
    ("n", cond("IN", {"N": "1"}, {"N": "2"}), False),
    ("s", cond("IN", {"S": "hello"}), True),
    ("n", cond("BETWEEN", {"N": "1"}, {"N": "5"}), True),
    ("n", cond("BETWEEN", {"N": "6"}, {"N": "9"}), False),
    ("s", cond("BETWEEN", {"S": "a"}, {"S": "z"}), True),
])
def test_expected_comparison_operators(ddb, hash_table, sample, attribute, condition, holds):
    """Each ComparisonOperator evaluates as DynamoDB documents, including on missing attributes."""
    assert check_expected(ddb, hash_table, sample, {attribute: condition}) is holds
    assert item_of(ddb, hash_table, sample) == {"pk": {"S": sample}, **SAMPLE}


def test_expected_comparison_with_value_instead_of_list(ddb, hash_table, sample):
    """With a ComparisonOperator, a single `Value` stands for a one-element AttributeValueList."""
    assert check_expected(ddb, hash_table, sample, {"n": {"ComparisonOperator": "GT", "Value": {"N": "1"}}})
    assert not check_expected(ddb, hash_table, sample, {"n": {"ComparisonOperator": "LT", "Value": {"N": "1"}}})


def test_in_with_more_than_a_hundred_values(ddb, hash_table, sample):
    """Legacy IN has no 100-operand limit of its own."""
    values = [{"N": str(i)} for i in range(100, 350)] + [{"N": "5"}]
    assert check_expected(ddb, hash_table, sample, {"n": cond("IN", *values)})


def test_expected_value_means_exists_and_equals(ddb, hash_table):
    """`Value` alone checks existence and equality; a missing item fails the check."""
    pk = new_key()
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "v": {"N": "2"}},
                     Expected={"v": {"Value": {"N": "1"}}})
    assert error_of(excinfo) == ("ConditionalCheckFailedException", "The conditional request failed")
    assert item_of(ddb, hash_table, pk) is None
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "v": {"N": "1"}})
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "v": {"N": "2"}},
                 Expected={"v": {"Value": {"N": "1"}, "Exists": True}})
    assert item_of(ddb, hash_table, pk)["v"] == {"N": "2"}


def test_expected_exists_false_guards_an_insert(ddb, hash_table):
    """`Exists: false` is the legacy create-only guard; the second put fails and changes nothing."""
    pk = new_key()
    guard = {"pk": {"Exists": False}}
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "v": {"S": "first"}}, Expected=guard)
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "v": {"S": "second"}}, Expected=guard)
    assert error_of(excinfo)[0] == "ConditionalCheckFailedException"
    assert item_of(ddb, hash_table, pk) == {"pk": {"S": pk}, "v": {"S": "first"}}


def test_expected_on_delete(ddb, hash_table):
    """DeleteItem honours Expected: a failed check keeps the item, a passing one deletes it."""
    pk = new_key()
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "v": {"N": "1"}})
    with pytest.raises(ClientError) as excinfo:
        ddb.delete_item(TableName=hash_table, Key={"pk": {"S": pk}}, Expected={"v": {"Value": {"N": "2"}}},
                        ReturnValuesOnConditionCheckFailure="ALL_OLD")
    assert error_of(excinfo)[0] == "ConditionalCheckFailedException"
    assert excinfo.value.response["Item"] == {"pk": {"S": pk}, "v": {"N": "1"}}
    assert item_of(ddb, hash_table, pk) is not None
    ddb.delete_item(TableName=hash_table, Key={"pk": {"S": pk}}, Expected={"v": cond("GE", {"N": "1"})})
    assert item_of(ddb, hash_table, pk) is None


def test_conditional_operator(ddb, hash_table, sample):
    """Conditions are ANDed by default; ConditionalOperator OR needs only one to hold."""
    conditions = {"n": cond("EQ", {"N": "5"}), "s": cond("EQ", {"S": "nope"})}
    assert not check_expected(ddb, hash_table, sample, conditions)
    assert not check_expected(ddb, hash_table, sample, conditions, "AND")
    assert check_expected(ddb, hash_table, sample, conditions, "OR")
    assert not check_expected(ddb, hash_table, sample, {"s": cond("NULL"), "n": cond("NULL")}, "OR")


def test_names_needing_placeholders(ddb, hash_table):
    """Legacy attribute names are literal: reserved words, dots, brackets and spaces need no aliasing."""
    pk = new_key()
    item = {"pk": {"S": pk}, "Size": {"N": "1"}, "a.b": {"S": "dot"}, "c[0]": {"S": "br"}, "has space": {"S": "sp"}}
    ddb.put_item(TableName=hash_table, Item=item)
    expected = {"Size": {"Value": {"N": "1"}}, "a.b": {"Value": {"S": "dot"}}, "c[0]": cond("NOT_NULL"),
                "has space": cond("BEGINS_WITH", {"S": "s"})}
    ddb.put_item(TableName=hash_table, Item=item, Expected=expected)
    got = ddb.get_item(TableName=hash_table, Key={"pk": {"S": pk}}, AttributesToGet=["a.b", "Size", "c[0]"])
    assert got["Item"] == {"Size": {"N": "1"}, "a.b": {"S": "dot"}, "c[0]": {"S": "br"}}


# --- Expected: validation -------------------------------------------------------------------------------

# Members of one entry that do not go together are a validation error of the request (verified against DynamoDB in
# floci-io/floci PR 2125); a bad operand list is not (quoted without the prefix).
ENTRY = "1 validation error detected: " + INVALID


@pytest.mark.parametrize(("expected", "message"), [
    ({"a": {}}, ENTRY + "Value must be provided when Exists is null for Attribute: a"),
    ({"a": {"Exists": True}}, ENTRY + "Value must be provided when Exists is true for Attribute: a"),
    ({"a": {"Exists": False, "Value": {"S": "x"}}},
     ENTRY + "Value cannot be used when Exists is false for Attribute: a"),
    ({"a": {"Value": {"S": "x"}, "AttributeValueList": [{"S": "x"}], "ComparisonOperator": "EQ"}},
     ENTRY + "Value and AttributeValueList cannot be used together for Attribute: a"),
    ({"a": {"Exists": True, "ComparisonOperator": "LT"}},
     ENTRY + "Exists and ComparisonOperator cannot be used together for Attribute: a"),
    ({"a": {"AttributeValueList": []}},
     ENTRY + "AttributeValueList can only be used with a ComparisonOperator for Attribute: a"),
    ({"a": {"ComparisonOperator": "LT"}},
     ENTRY + "Value or AttributeValueList must be used with ComparisonOperator: LT for Attribute: a"),
    ({"a": cond("EQ", {"S": "x"}, {"S": "y"})},
     INVALID + "Invalid number of argument(s) for the EQ ComparisonOperator"),
    ({"a": {"ComparisonOperator": "EQ", "AttributeValueList": []}},
     INVALID + "Invalid number of argument(s) for the EQ ComparisonOperator"),
    ({"a": cond("NULL", {"S": "x"})}, INVALID + "Invalid number of argument(s) for the NULL ComparisonOperator"),
    ({"a": cond("BETWEEN", {"N": "1"})},
     INVALID + "Invalid number of argument(s) for the BETWEEN ComparisonOperator"),
    ({"a": {"ComparisonOperator": "IN", "AttributeValueList": []}},
     INVALID + "Invalid number of argument(s) for the IN ComparisonOperator"),
    ({"a": cond("BEGINS_WITH", {"N": "1"})},
     INVALID + "ComparisonOperator BEGINS_WITH is not valid for N AttributeValue type"),
    ({"a": cond("LT", {"SS": ["x"]})}, INVALID + "ComparisonOperator LT is not valid for SS AttributeValue type"),
    ({"a": cond("GE", {"BOOL": True})}, INVALID + "ComparisonOperator GE is not valid for BOOL AttributeValue type"),
    ({"a": cond("CONTAINS", {"NS": ["1"]})},
     INVALID + "ComparisonOperator CONTAINS is not valid for NS AttributeValue type"),
    ({"a": cond("IN", {"L": []})}, INVALID + "ComparisonOperator IN is not valid for L AttributeValue type"),
    ({"a": cond("BETWEEN", {"N": "5"}, {"NULL": True})},
     INVALID + "ComparisonOperator BETWEEN is not valid for NULL AttributeValue type"),
    ({"a": cond("BETWEEN", {"N": "1"}, {"S": "5"})},
     INVALID + "AttributeValues inside AttributeValueList must be of same type"),
    ({"a": cond("IN", {"N": "1"}, {"S": "5"})},
     INVALID + "AttributeValues inside AttributeValueList must be of same type"),
    ({"a": cond("BETWEEN", {"S": "b"}, {"S": "a"})},
     "The BETWEEN condition was provided a range where the lower bound is bigger than the upper bound"),
    ({"a": {"Value": {"S": "x", "N": "1"}}},
     "Supplied AttributeValue has more than one datatypes set, must contain exactly one of the supported datatypes"),
])
def test_expected_validation(ddb, hash_table, expected, message):
    """Invalid Expected entries get DynamoDB's messages and write nothing."""
    pk = new_key()
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}}, Expected=expected)
    assert error_of(excinfo) == ("ValidationException", message)
    assert item_of(ddb, hash_table, pk) is None


def test_comparison_operator_enum(ddb, hash_table):
    """An unknown ComparisonOperator is a shape error naming the member's path."""
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=hash_table, Item={"pk": {"S": new_key()}},
                     Expected={"a": {"ComparisonOperator": "XX", "AttributeValueList": [{"S": "x"}]}})
    assert error_of(excinfo) == ("ValidationException",
                                 "1 validation error detected: Value 'XX' at 'expected.a.member.comparisonOperator' "
                                 "failed to satisfy constraint: Member must satisfy enum value set: [IN, NULL, "
                                 "BETWEEN, LT, NOT_CONTAINS, EQ, GT, NOT_NULL, NE, LE, BEGINS_WITH, GE, CONTAINS]")


@pytest.mark.parametrize(("params", "message"), [
    ({"ConditionalOperator": "OR"}, "ConditionalOperator cannot be used without Filter or Expected"),
    ({"ConditionalOperator": "AND", "Expected": {"a": cond("NULL")}},
     "ConditionalOperator can only be used when Filter or Expected has two or more elements"),
    ({"Expected": {"a": cond("NULL")}, "ConditionExpression": "attribute_exists(b)"},
     mixing("Expected", "ConditionExpression")),
    ({"ConditionalOperator": "OR", "ConditionExpression": "attribute_exists(b)"},
     mixing("ConditionalOperator", "ConditionExpression")),
    ({"Expected": {"a": cond("NULL")}, "ExpressionAttributeNames": {"#a": "a"}},
     "ExpressionAttributeNames can only be specified when using expressions"),
    ({"Expected": {"a": cond("NULL")}, "ExpressionAttributeValues": {":a": {"S": "a"}}},
     "ExpressionAttributeValues can only be specified when using expressions"),
])
def test_put_item_legacy_request_errors(ddb, hash_table, params, message):
    """ConditionalOperator rules, mixing with expressions, and placeholders without expressions (PutItem counts
    the last three)."""
    pk = new_key()
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}}, **params)
    assert error_of(excinfo) == ("ValidationException", counted(message))
    assert item_of(ddb, hash_table, pk) is None


def test_update_item_mixing_lists_every_member(ddb, hash_table):
    """The mixing message lists every legacy and every expression member present, in DynamoDB's order."""
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=hash_table, Key={"pk": {"S": new_key()}},
                        AttributeUpdates={"a": {"Value": {"S": "x"}}}, Expected={"a": cond("NULL")},
                        UpdateExpression="SET b = :b", ConditionExpression="attribute_exists(b)",
                        ExpressionAttributeValues={":b": {"S": "b"}})
    assert error_of(excinfo) == ("ValidationException", counted(mixing("AttributeUpdates, Expected",
                                                                       "UpdateExpression, ConditionExpression")))


def test_update_item_placeholders_without_expressions(ddb, hash_table):
    """ExpressionAttributeValues beside AttributeUpdates names both UpdateItem expressions."""
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=hash_table, Key={"pk": {"S": new_key()}},
                        AttributeUpdates={"a": {"Value": {"S": "x"}}}, ExpressionAttributeValues={":a": {"S": "a"}})
    assert error_of(excinfo) == ("ValidationException", "1 validation error detected: ExpressionAttributeValues can "
                                 "only be specified when using expressions: UpdateExpression and ConditionExpression "
                                 "are null")


# --- AttributeUpdates ------------------------------------------------------------------------------------


def test_attribute_updates_actions(ddb, hash_table):
    """PUT replaces, ADD adds numbers, sets and lists, DELETE removes attributes or set members."""
    pk = new_key()
    ddb.put_item(TableName=hash_table, Item={
        "pk": {"S": pk}, "n": {"N": "1"}, "ss": {"SS": ["a", "b", "c"]}, "l": {"L": [{"S": "x"}]},
        "gone": {"S": "bye"}, "p": {"S": "old"}})
    response = ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}}, ReturnValues="ALL_NEW", AttributeUpdates={
        "p": {"Value": {"S": "new"}},
        "n": {"Action": "ADD", "Value": {"N": "-3"}},
        "fresh": {"Action": "ADD", "Value": {"N": "7"}},
        "ss": {"Action": "DELETE", "Value": {"SS": ["a", "c", "z"]}},
        "ns": {"Action": "ADD", "Value": {"NS": ["1", "2"]}},
        "l": {"Action": "ADD", "Value": {"L": [{"S": "y"}]}},
        "l2": {"Action": "ADD", "Value": {"L": [{"N": "1"}]}},
        "gone": {"Action": "DELETE"},
        "never": {"Action": "DELETE"},
    })
    attributes = response["Attributes"]
    assert attributes["p"] == {"S": "new"}
    assert attributes["n"] == {"N": "-2"}
    assert attributes["fresh"] == {"N": "7"}
    assert attributes["ss"] == {"SS": ["b"]}
    assert sorted(attributes["ns"]["NS"]) == ["1", "2"]
    assert attributes["l"] == {"L": [{"S": "x"}, {"S": "y"}]}
    assert attributes["l2"] == {"L": [{"N": "1"}]}
    assert "gone" not in attributes and "never" not in attributes
    assert item_of(ddb, hash_table, pk) == attributes


def test_attribute_updates_create_item_and_updated_values(ddb, hash_table):
    """An update of a missing item creates it; UPDATED_OLD/UPDATED_NEW cover the updated attributes."""
    pk = new_key()
    response = ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}}, ReturnValues="UPDATED_NEW",
                               AttributeUpdates={"c": {"Action": "ADD", "Value": {"N": "1"}}})
    assert response["Attributes"] == {"c": {"N": "1"}}
    updates = {"c": {"Action": "ADD", "Value": {"N": "1"}}, "d": {"Value": {"S": "x"}}}
    response = ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}}, ReturnValues="UPDATED_OLD",
                               AttributeUpdates=updates)
    assert response["Attributes"] == {"c": {"N": "1"}}
    assert item_of(ddb, hash_table, pk) == {"pk": {"S": pk}, "c": {"N": "2"}, "d": {"S": "x"}}


def test_attribute_updates_with_expected(ddb, hash_table):
    """Expected guards AttributeUpdates: a failed check leaves the item exactly as it was."""
    pk = new_key()
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "version": {"N": "1"}})
    update = {"version": {"Action": "ADD", "Value": {"N": "1"}}, "data": {"Value": {"S": "x"}}}
    ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}}, AttributeUpdates=update,
                    Expected={"version": {"Value": {"N": "1"}}})
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}}, AttributeUpdates=update,
                        Expected={"version": {"Value": {"N": "1"}}})
    assert error_of(excinfo)[0] == "ConditionalCheckFailedException"
    assert item_of(ddb, hash_table, pk) == {"pk": {"S": pk}, "version": {"N": "2"}, "data": {"S": "x"}}


def test_empty_attribute_updates_creates_the_key_only_item(ddb, hash_table):
    """An empty AttributeUpdates map is an update with no actions."""
    pk = new_key()
    ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}}, AttributeUpdates={})
    assert item_of(ddb, hash_table, pk) == {"pk": {"S": pk}}


@pytest.mark.parametrize(("updates", "message"), [
    ({"a": {"Action": "PUT"}}, INVALID + "Only DELETE action is allowed when no attribute value is specified"),
    ({"a": {"Action": "ADD"}}, INVALID + "Only DELETE action is allowed when no attribute value is specified"),
    ({"a": {"Action": "DELETE", "Value": {"S": "x"}}},
     INVALID + "DELETE action with value is not supported for the type S"),
    ({"a": {"Action": "DELETE", "Value": {"L": []}}},
     INVALID + "DELETE action with value is not supported for the type L"),
    ({"a": {"Action": "ADD", "Value": {"S": "x"}}}, INVALID + "ADD action is not supported for the type S"),
    ({"a": {"Action": "ADD", "Value": {"B": b"x"}}}, INVALID + "ADD action is not supported for the type B"),
    ({"a": {"Action": "ADD", "Value": {"M": {}}}}, INVALID + "ADD action is not supported for the type M"),
    ({"a": {"Action": "ADD", "Value": {"BOOL": True}}}, INVALID + "ADD action is not supported for the type BOOL"),
    ({"a": {"Action": "DELETE", "Value": {"SS": []}}}, INVALID + "An string set  may not be empty"),
    ({"pk": {"Value": {"S": "other"}}}, INVALID + "Cannot update attribute pk. This attribute is part of the key"),
    ({"pk": {"Action": "DELETE"}}, INVALID + "Cannot update attribute pk. This attribute is part of the key"),
    ({"a": {"Action": "XX", "Value": {"S": "x"}}},
     "1 validation error detected: Value 'XX' at 'attributeUpdates.a.member.action' failed to satisfy constraint: "
     "Member must satisfy enum value set: [ADD, DELETE, PUT]"),
])
def test_attribute_updates_validation(ddb, hash_table, updates, message):
    """Invalid AttributeUpdates get DynamoDB's messages and write nothing."""
    pk = new_key()
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}}, AttributeUpdates=updates)
    assert error_of(excinfo) == ("ValidationException", counted(message))
    assert item_of(ddb, hash_table, pk) is None


def test_attribute_updates_type_mismatch_changes_nothing(ddb, hash_table):
    """ADD of a number to a string attribute fails at write time and leaves the item unchanged."""
    pk = new_key()
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "a": {"S": "x"}})
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}},
                        AttributeUpdates={"a": {"Action": "ADD", "Value": {"N": "1"}}, "b": {"Value": {"S": "y"}}})
    assert error_of(excinfo)[0] == "ValidationException"
    assert item_of(ddb, hash_table, pk) == {"pk": {"S": pk}, "a": {"S": "x"}}


def test_attribute_updates_type_mismatch_wording(ddb, hash_table):
    """A legacy update meeting an attribute of another type gets the legacy wording."""
    pk = new_key()
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "a": {"SS": ["x"]}})
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}},
                        AttributeUpdates={"a": {"Action": "DELETE", "Value": {"NS": ["1"]}}})
    assert error_of(excinfo) == ("ValidationException", "Type mismatch for attribute to update")


# --- AttributesToGet -------------------------------------------------------------------------------------


def test_get_item_attributes_to_get(ddb, hash_table, sample):
    """AttributesToGet returns only the named top-level attributes; missing names are simply absent."""
    got = ddb.get_item(TableName=hash_table, Key={"pk": {"S": sample}}, AttributesToGet=["n", "m", "missing"])
    assert got["Item"] == {"n": SAMPLE["n"], "m": SAMPLE["m"]}


def test_large_legacy_requests_are_not_held_to_expression_limits(ddb, hash_table):
    """The 4 KB and 300-operator limits are limits on expression parameters; legacy requests that would need
    bigger expressions are served (they were refused naming expressions the client never sent)."""
    pk = new_key()
    ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}},
                    AttributeUpdates={f"a{i}": {"Value": {"N": str(i)}, "Action": "PUT"} for i in range(400)})
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "a1": {"N": "1"}},
                 Expected={f"a{i}": cond("NE", {"N": "-1"}) for i in range(320)})
    # (every page: the table is shared with other tests, so the item may lie past the first 1 MB)
    pages = ddb.get_paginator("scan").paginate(TableName=hash_table, ScanFilter={
        f"z{i}": cond("NULL") for i in range(320)} | {"pk": cond("EQ", {"S": pk})})
    assert [item for page in pages for item in page["Items"]] == [{"pk": {"S": pk}, "a1": {"N": "1"}}]
    with pytest.raises(ClientError) as excinfo:  # the same condition written as an expression is refused
        ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}},
                     ConditionExpression=" AND ".join(f"a{i}<>:m" for i in range(320)),
                     ExpressionAttributeValues={":m": {"N": "-1"}})
    assert error_of(excinfo)[1].startswith("1 validation error detected: Invalid ConditionExpression: The expression "
                                           "contains too many operators")


def test_a_client_cannot_send_the_internal_legacy_mark(server, hash_table):
    """A member named as the rewriter's former in-request mark ("@legacy") is an unknown member: ignored."""
    pk = new_key()
    body = {"TableName": hash_table, "Key": {"pk": {"S": pk}}, "UpdateExpression": "ADD a :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}}}
    call(server, json.dumps({"TableName": hash_table, "Item": {"pk": {"S": pk}, "a": {"S": "x"}}}),
         target="DynamoDB_20120810.PutItem")
    answers = [call(server, json.dumps(request), target="DynamoDB_20120810.UpdateItem")
               for request in (body, {**body, "@legacy": {"AttributeUpdates": True}})]
    assert answers[0][0].status == answers[1][0].status == 400
    assert json.loads(answers[0][1]) == json.loads(answers[1][1])


def test_get_item_ignores_expression_attribute_values(server, hash_table, sample):
    """GetItem has no ExpressionAttributeValues member: one sent along is ignored, with AttributesToGet too."""
    body = {"TableName": hash_table, "Key": {"pk": {"S": sample}}, "AttributesToGet": ["n"],
            "ExpressionAttributeValues": {":x": {"S": "y"}}}
    response, data = call(server, json.dumps(body), target="DynamoDB_20120810.GetItem")
    assert (response.status, json.loads(data)) == (200, {"Item": {"n": SAMPLE["n"]}})


@pytest.mark.parametrize(("params", "message"), [
    ({"AttributesToGet": ["a", "b", "a"]}, INVALID + "Duplicate value in attribute name: a"),
    ({"AttributesToGet": ["a"], "ProjectionExpression": "b"}, mixing("AttributesToGet", "ProjectionExpression")),
    ({"AttributesToGet": ["a"], "ExpressionAttributeNames": {"#a": "a"}},
     "ExpressionAttributeNames can only be specified when using expressions"),
])
def test_get_item_attributes_to_get_errors(ddb, hash_table, params, message):
    """GetItem's AttributesToGet validation."""
    with pytest.raises(ClientError) as excinfo:
        ddb.get_item(TableName=hash_table, Key={"pk": {"S": new_key()}}, **params)
    assert error_of(excinfo) == ("ValidationException", message)


# --- Query, Scan and BatchGetItem --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def numbers(ddb) -> str:
    """A table with hash key pk (S) and range key sk (N): items p/1..p/5 with v = sk * 10, odd ones tagged."""
    table = create_table(ddb, range_type="N")
    for i in range(1, 6):
        item = {"pk": {"S": "p"}, "sk": {"N": str(i)}, "v": {"N": str(i * 10)}}
        if i % 2:
            item["tag"] = {"S": "odd"}
        ddb.put_item(TableName=table, Item=item)
    ddb.put_item(TableName=table, Item={"pk": {"S": "q"}, "sk": {"N": "1"}, "v": {"N": "0"}})
    return table


def hash_eq(value: str = "p") -> dict:
    return {"pk": cond("EQ", {"S": value})}


def sort_keys(response: dict) -> list[int]:
    return [int(item["sk"]["N"]) for item in response["Items"]]


@pytest.mark.parametrize(("range_condition", "expected"), [
    (None, [1, 2, 3, 4, 5]),
    (cond("EQ", {"N": "3"}), [3]),
    (cond("LT", {"N": "3"}), [1, 2]),
    (cond("LE", {"N": "3"}), [1, 2, 3]),
    (cond("GT", {"N": "3"}), [4, 5]),
    (cond("GE", {"N": "3"}), [3, 4, 5]),
    (cond("BETWEEN", {"N": "2"}, {"N": "4"}), [2, 3, 4]),
])
def test_query_key_conditions(ddb, numbers, range_condition, expected):
    """KeyConditions select the partition and a sort-key range."""
    key_conditions = hash_eq()
    if range_condition is not None:
        key_conditions["sk"] = range_condition
    assert sort_keys(ddb.query(TableName=numbers, KeyConditions=key_conditions)) == expected


def test_query_key_condition_begins_with(ddb, range_table):
    """BEGINS_WITH on a string sort key."""
    for sk in ("apple", "apricot", "banana"):
        ddb.put_item(TableName=range_table, Item={"pk": {"S": "legacy-bw"}, "sk": {"S": sk}})
    response = ddb.query(TableName=range_table, KeyConditions={
        "pk": cond("EQ", {"S": "legacy-bw"}), "sk": cond("BEGINS_WITH", {"S": "ap"})})
    assert [item["sk"]["S"] for item in response["Items"]] == ["apple", "apricot"]


def test_query_filter_and_attributes_to_get(ddb, numbers):
    """QueryFilter filters after the key range (ScannedCount counts before); AttributesToGet projects."""
    response = ddb.query(TableName=numbers, KeyConditions=hash_eq(), QueryFilter={"tag": cond("NOT_NULL")},
                         AttributesToGet=["sk"])
    assert response["Items"] == [{"sk": {"N": "1"}}, {"sk": {"N": "3"}}, {"sk": {"N": "5"}}]
    assert (response["Count"], response["ScannedCount"]) == (3, 5)
    response = ddb.query(TableName=numbers, KeyConditions=hash_eq(), ConditionalOperator="OR",
                         QueryFilter={"tag": cond("NULL"), "v": cond("GE", {"N": "50"})}, Select="SPECIFIC_ATTRIBUTES",
                         AttributesToGet=["sk"])
    assert sort_keys(response) == [2, 4, 5]


def test_query_key_conditions_with_filter_expression(ddb, numbers):
    """KeyConditions may be combined with FilterExpression and ProjectionExpression."""
    response = ddb.query(TableName=numbers, KeyConditions=hash_eq(), FilterExpression="#v > :v",
                         ProjectionExpression="sk", ExpressionAttributeNames={"#v": "v"},
                         ExpressionAttributeValues={":v": {"N": "30"}})
    assert response["Items"] == [{"sk": {"N": "4"}}, {"sk": {"N": "5"}}]


@pytest.mark.parametrize(("params", "message"), [
    ({"KeyConditions": {"pk": cond("NULL")}}, "Attempted conditional constraint is not an indexable operation"),
    ({"KeyConditions": {"pk": cond("EQ", {"S": "p"}), "sk": cond("IN", {"N": "1"})}},
     "Attempted conditional constraint is not an indexable operation"),
    ({"KeyConditions": {"pk": cond("NE", {"S": "p"})}},
     "Attempted conditional constraint is not an indexable operation"),
    ({"KeyConditions": {"pk": cond("GT", {"S": "p"})}}, "Query key condition not supported"),
    ({"KeyConditions": {"sk": cond("EQ", {"N": "1"})}}, "Query condition missed key schema element: pk"),
    ({"KeyConditions": {"pk": cond("EQ", {"S": "p"}, {"S": "q"})}},
     INVALID + "Invalid number of argument(s) for the EQ ComparisonOperator"),
    ({"KeyConditions": {"pk": cond("EQ", {"S": "p"}), "sk": cond("BETWEEN", {"N": "5"}, {"N": "1"})}},
     "The BETWEEN condition was provided a range where the lower bound is bigger than the upper bound"),
    ({"KeyConditions": hash_eq(), "KeyConditionExpression": "pk = :p",
      "ExpressionAttributeValues": {":p": {"S": "p"}}},
     mixing("KeyConditions", "KeyConditionExpression")),
    ({"KeyConditions": hash_eq(), "QueryFilter": {"v": cond("NULL")}, "AttributesToGet": ["v"],
      "ConditionalOperator": "OR", "KeyConditionExpression": "pk = :p", "FilterExpression": "v = :p",
      "ProjectionExpression": "v", "ExpressionAttributeValues": {":p": {"S": "p"}}},
     mixing("AttributesToGet, QueryFilter, ConditionalOperator, KeyConditions",
            "ProjectionExpression, FilterExpression, KeyConditionExpression")),
    ({"KeyConditions": hash_eq(), "QueryFilter": {"v": cond("NULL")}, "FilterExpression": "attribute_exists(v)"},
     mixing("QueryFilter", "FilterExpression")),
    ({"KeyConditions": hash_eq(), "ExpressionAttributeValues": {":p": {"S": "p"}}},
     "ExpressionAttributeValues can only be specified when using expressions: FilterExpression and "
     "KeyConditionExpression are null"),
    ({"KeyConditions": hash_eq(), "QueryFilter": {"v": cond("NULL")}, "ConditionalOperator": "OR"},
     "ConditionalOperator can only be used when Filter or Expected has two or more elements"),
    ({"KeyConditions": hash_eq(), "ConditionalOperator": "OR"},
     "ConditionalOperator cannot be used without Filter or Expected"),
    ({"KeyConditions": hash_eq(), "AttributesToGet": ["v"], "Select": "ALL_ATTRIBUTES"},
     "Cannot specify the AttributesToGet when choosing to get ALL_ATTRIBUTES"),
    ({"KeyConditions": hash_eq(), "AttributesToGet": ["v"], "Select": "COUNT"},
     "Cannot specify the AttributesToGet when choosing to get only the Count"),
    ({"KeyConditions": hash_eq(), "QueryFilter": {"v": cond("LE", {"SS": ["a"]})}},
     INVALID + "ComparisonOperator LE is not valid for SS AttributeValue type"),
])
def test_query_legacy_errors(ddb, numbers, params, message):
    """Query's legacy validation messages."""
    with pytest.raises(ClientError) as excinfo:
        ddb.query(TableName=numbers, **params)
    assert error_of(excinfo) == ("ValidationException", message)


def test_query_filter_on_key_attribute(ddb, numbers):
    """QueryFilter may not filter on a key attribute; DynamoDB names the member QueryFilter."""
    with pytest.raises(ClientError) as excinfo:
        ddb.query(TableName=numbers, KeyConditions=hash_eq(), QueryFilter={"sk": cond("GT", {"N": "1"})})
    assert error_of(excinfo) == ("ValidationException", "QueryFilter can only contain non-primary key attributes: "
                                                        "Primary key attribute: sk")


def test_query_filter_on_an_index_key_attribute(ddb):
    """The same on an index: the member is named QueryFilter there too."""
    name = unique_name()
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=defs(pk="S", g="S", gs="N"),
                     KeySchema=schema("pk", ranges=0), GlobalSecondaryIndexes=[gsi("byG", "g", "gs")])
    with pytest.raises(ClientError) as excinfo:
        ddb.query(TableName=name, IndexName="byG", KeyConditions={"g": cond("EQ", {"S": "x"})},
                  QueryFilter={"gs": cond("GT", {"N": "1"})})
    assert error_of(excinfo) == ("ValidationException", "QueryFilter can only contain non-primary key attributes: "
                                                        "Primary key attribute: gs")


def test_scan_filter(ddb, numbers):
    """ScanFilter with AND (default) and OR, and AttributesToGet."""
    response = ddb.scan(TableName=numbers, ScanFilter={"v": cond("GE", {"N": "20"}), "tag": cond("NOT_NULL")},
                        AttributesToGet=["sk"])
    assert sorted(sort_keys(response)) == [3, 5]
    assert response["ScannedCount"] == 6
    response = ddb.scan(TableName=numbers, ConditionalOperator="OR",
                        ScanFilter={"v": cond("EQ", {"N": "0"}), "sk": cond("IN", {"N": "4"}, {"N": "9"})})
    assert sorted((item["pk"]["S"], int(item["sk"]["N"])) for item in response["Items"]) == [("p", 4), ("q", 1)]


@pytest.mark.parametrize(("params", "message"), [
    ({"ScanFilter": {"v": cond("NULL")}, "AttributesToGet": ["v"], "ConditionalOperator": "OR",
      "FilterExpression": "attribute_exists(v)", "ProjectionExpression": "v"},
     mixing("AttributesToGet, ScanFilter, ConditionalOperator", "ProjectionExpression, FilterExpression")),
    ({"ScanFilter": {"v": cond("NULL")}, "ExpressionAttributeValues": {":p": {"S": "p"}}},
     "ExpressionAttributeValues can only be specified when using expressions: FilterExpression is null"),
    ({"ScanFilter": {"v": cond("CONTAINS")}},
     INVALID + "Invalid number of argument(s) for the CONTAINS ComparisonOperator"),
    ({"AttributesToGet": ["v"], "Select": "ALL_ATTRIBUTES"},
     "Cannot specify the AttributesToGet when choosing to get ALL_ATTRIBUTES"),
    ({"ScanFilter": {"v": {"ComparisonOperator": "XX"}}},
     "1 validation error detected: Value 'XX' at 'scanFilter.v.member.comparisonOperator' failed to satisfy "
     "constraint: Member must satisfy enum value set: [IN, NULL, BETWEEN, LT, NOT_CONTAINS, EQ, GT, NOT_NULL, NE, LE, "
     "BEGINS_WITH, GE, CONTAINS]"),
])
def test_scan_legacy_errors(ddb, numbers, params, message):
    """Scan's legacy validation messages."""
    with pytest.raises(ClientError) as excinfo:
        ddb.scan(TableName=numbers, **params)
    assert error_of(excinfo) == ("ValidationException", message)


def test_batch_get_item_attributes_to_get(ddb, numbers, hash_table, sample):
    """BatchGetItem accepts AttributesToGet per table; one table's AttributesToGet beside another's
    ProjectionExpression mixes the two forms in one request (captured against DynamoDB, ExtendDB PR 178)."""
    response = ddb.batch_get_item(RequestItems={
        numbers: {"Keys": [{"pk": {"S": "p"}, "sk": {"N": "2"}}], "AttributesToGet": ["v", "sk"]},
        hash_table: {"Keys": [{"pk": {"S": sample}}], "AttributesToGet": ["s"]},
    })
    assert response["Responses"][numbers] == [{"sk": {"N": "2"}, "v": {"N": "20"}}]
    assert response["Responses"][hash_table] == [{"s": SAMPLE["s"]}]
    with pytest.raises(ClientError) as excinfo:
        ddb.batch_get_item(RequestItems={
            numbers: {"Keys": [{"pk": {"S": "p"}, "sk": {"N": "2"}}], "AttributesToGet": ["v", "sk"]},
            hash_table: {"Keys": [{"pk": {"S": sample}}], "ProjectionExpression": "s"}})
    assert error_of(excinfo) == ("ValidationException", mixing("AttributesToGet", "ProjectionExpression"))


def test_batch_get_item_mixing(ddb, numbers):
    """AttributesToGet and ProjectionExpression in one table's request are refused."""
    with pytest.raises(ClientError) as excinfo:
        ddb.batch_get_item(RequestItems={numbers: {"Keys": [{"pk": {"S": "p"}, "sk": {"N": "2"}}],
                                                   "AttributesToGet": ["v"], "ProjectionExpression": "sk"}})
    assert error_of(excinfo) == ("ValidationException", mixing("AttributesToGet", "ProjectionExpression"))


# --- requests boto3 would not send -------------------------------------------------------------------------


def raw(server, operation: str, body: dict) -> tuple[int, dict]:
    response, data = call(server, json.dumps(body), target=f"DynamoDB_20120810.{operation}")
    return response.status, json.loads(data)


def test_empty_attributes_to_get_is_a_shape_error(server, hash_table):
    """An empty AttributesToGet list fails the member's length constraint."""
    status, body = raw(server, "GetItem", {"TableName": hash_table, "Key": {"pk": {"S": "x"}}, "AttributesToGet": []})
    assert status == 400
    assert body["message"] == ("1 validation error detected: Value '[]' at 'attributesToGet' failed to satisfy "
                               "constraint: Member must have length greater than or equal to 1")


@pytest.mark.parametrize(("operation", "body"), [
    ("PutItem", {"Item": {"pk": {"S": "x"}}, "Expected": {"a": None}}),
    ("UpdateItem", {"Key": {"pk": {"S": "x"}}, "AttributeUpdates": {"a": None}}),
    ("Scan", {"ScanFilter": {"a": None}}),
    ("Scan", {"ScanFilter": {"a": {"ComparisonOperator": "EQ", "AttributeValueList": [None]}}}),
    ("PutItem", {"Item": {"pk": {"S": "x"}}, "Expected": {"a": {"Value": {"S": "x"}}},
                 "ExpressionAttributeNames": ["x"]}),
    ("GetItem", {"Key": {"pk": {"S": "x"}}, "AttributesToGet": [None]}),
    ("PutItem", {"Item": {"pk": {"S": "x"}}, "Expected": []}),
])
def test_malformed_legacy_members_are_client_errors(server, hash_table, operation, body):
    """Nulls and wrong JSON types inside legacy members give a 400, never a server error."""
    status, _ = raw(server, operation, {"TableName": hash_table, **body})
    assert status == 400


@pytest.mark.parametrize(("operation", "member"), [
    ("Scan", "ScanFilter"), ("Query", "QueryFilter"), ("Query", "KeyConditions"), ("PutItem", "Expected"),
    ("UpdateItem", "AttributeUpdates")])
def test_attribute_name_keys_past_65535_characters_are_refused(server, hash_table, operation, member):
    """The legacy maps are keyed by attribute names of at most 65535 characters (the API's AttributeName)."""
    long_name = "x" * 65536
    entry = {"Action": "DELETE"} if member == "AttributeUpdates" else {"ComparisonOperator": "NULL"}
    body: dict = {"TableName": hash_table, member: {long_name: entry}}
    if operation == "Query" and member == "QueryFilter":
        body["KeyConditions"] = {"pk": {"ComparisonOperator": "EQ", "AttributeValueList": [{"S": "p"}]}}
    if operation == "PutItem":
        body["Item"] = {"pk": {"S": "p"}}
    if operation == "UpdateItem":
        body["Key"] = {"pk": {"S": "p"}}
    response, data = call(server, json.dumps(body), target=f"DynamoDB_20120810.{operation}")
    error = json.loads(data)
    assert response.status == 400 and error["__type"].endswith("#ValidationException")
    assert error["message"].startswith("1 validation error detected: Value '{" + long_name[:100])
    assert error["message"].endswith(f"at '{member[0].lower() + member[1:]}' failed to satisfy constraint: Map keys "
                                     "must satisfy constraint: [Member must have length less than or equal to 65535]")
