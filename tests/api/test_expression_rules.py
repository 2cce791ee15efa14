"""Rules of the expression language that DynamoDB checks before reading any item: each function's operands, the
4 KB size limit of every expression kind, the 64 KB limit of attribute names wherever one can appear; and REMOVE
of a nested path, whose answer depends on whether the item and the path's parent exist."""

from __future__ import annotations

import uuid

import pytest
from botocore.exceptions import ClientError

ANY_TYPE = "{S,SS,N,NS,B,BS,BOOL,NULL,L,M,HD,DOUBLE,FLOAT,HDS,FS,DOUBLESET,DICT,DECIMAL,INT,DECIMALSET,INTSET}"
NOT_THIS_WAY = "The function is not allowed to be used this way in an expression; function: "
BAD_PATH = "The document path provided in the update expression is invalid for update"
LONG_NAME = "Attribute name is too large, must be less than 65536 bytes"


def refusal(call, **request) -> str:  # type: ignore[no-untyped-def]
    """The message of the ValidationException `call(**request)` must raise."""
    with pytest.raises(ClientError) as excinfo:
        call(**request)
    error = excinfo.value.response["Error"]
    assert error["Code"] == "ValidationException", error
    return str(error["Message"])


def fresh_key() -> dict:
    return {"pk": {"S": uuid.uuid4().hex}}


# --- attribute_type ------------------------------------------------------------------------------------------


def test_attribute_type_with_a_path_for_its_type_is_refused_before_any_item_is_read(ddb, range_table):
    """The type operand must be a value: a Query that matches no item still refuses a path there."""
    message = refusal(ddb.query, TableName=range_table, KeyConditionExpression="pk = :p",
                      FilterExpression="attribute_type(a, b)", ExpressionAttributeValues={":p": {"S": "none"}})
    assert message == ("Invalid FilterExpression: Incorrect operand type for operator or function; "
                       f"operator or function: attribute_type, operand type: {ANY_TYPE}")
    message = refusal(ddb.delete_item, TableName=range_table, Key={"pk": {"S": "x"}, "sk": {"S": "y"}},
                      ConditionExpression="attribute_type(a, #t)", ExpressionAttributeNames={"#t": "t"})
    assert message.endswith(f"operator or function: attribute_type, operand type: {ANY_TYPE}")


def test_attribute_type_may_test_a_value(ddb, hash_table):
    """The first operand may be a value placeholder as well as a path: the test is then on the value itself."""
    key = fresh_key()
    ddb.put_item(TableName=hash_table, Item=key)
    ddb.delete_item(TableName=hash_table, Key=key, ConditionExpression="attribute_type(:v, :t)",
                    ExpressionAttributeValues={":v": {"N": "1"}, ":t": {"S": "N"}})
    assert "Item" not in ddb.get_item(TableName=hash_table, Key=key)
    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException):
        ddb.put_item(TableName=hash_table, Item=key, ConditionExpression="attribute_type(:v, :t)",
                     ExpressionAttributeValues={":v": {"N": "1"}, ":t": {"S": "S"}})


# --- list_append ---------------------------------------------------------------------------------------------


def test_list_append_inside_list_append_is_refused(ddb, hash_table):
    """Appending three lists takes two updates: a list_append may not take another list_append."""
    values = {":a": {"L": [{"S": "a"}]}, ":b": {"L": [{"S": "b"}]}}
    for expression in ("SET l = list_append(list_append(:a, :b), :a)", "SET l = list_append(:a, list_append(l, :b))"):
        message = refusal(ddb.update_item, TableName=hash_table, Key=fresh_key(), UpdateExpression=expression,
                          ExpressionAttributeValues=values)
        assert message.endswith(f"Invalid UpdateExpression: {NOT_THIS_WAY}list_append")


def test_list_append_of_if_not_exists_is_allowed(ddb, hash_table):
    """The usual append to a list that may be missing stays allowed."""
    key = fresh_key()
    for _ in range(2):
        ddb.update_item(TableName=hash_table, Key=key, UpdateExpression="SET l = list_append(if_not_exists(l, :e), :a)",
                        ExpressionAttributeValues={":e": {"L": []}, ":a": {"L": [{"S": "a"}]}})
    assert ddb.get_item(TableName=hash_table, Key=key)["Item"]["l"] == {"L": [{"S": "a"}, {"S": "a"}]}


# --- attribute names over 64 KB ------------------------------------------------------------------------------


def test_long_attribute_names_are_refused_in_projections_and_conditions(ddb, hash_table):
    """A name an item could not hold is refused wherever it is named, not only in an item or an update's target."""
    long_name = {"#n": "x" * 65536}
    assert refusal(ddb.get_item, TableName=hash_table, Key=fresh_key(), ProjectionExpression="#n",
                   ExpressionAttributeNames=long_name).endswith(LONG_NAME)
    assert refusal(ddb.scan, TableName=hash_table, FilterExpression="attribute_exists(#n)",
                   ExpressionAttributeNames=long_name).endswith(LONG_NAME)
    assert refusal(ddb.delete_item, TableName=hash_table, Key=fresh_key(), ConditionExpression="attribute_exists(#n)",
                   ExpressionAttributeNames=long_name).endswith(LONG_NAME)
    # 65535 bytes is the limit itself, allowed (two-byte characters: counted in bytes, not characters).
    ddb.get_item(TableName=hash_table, Key=fresh_key(), ProjectionExpression="#n",
                 ExpressionAttributeNames={"#n": "x" + "é" * 32767})
    assert refusal(ddb.get_item, TableName=hash_table, Key=fresh_key(), ProjectionExpression="#n",
                   ExpressionAttributeNames={"#n": "xx" + "é" * 32767}).endswith(LONG_NAME)


def test_long_attribute_names_are_refused_in_legacy_parameters(ddb, hash_table):
    """AttributesToGet and the legacy condition maps allow 65,535 characters, but a name is limited in bytes: one of
    65,536 bytes in fewer characters is refused as in an item."""
    name = "xx" + "é" * 32767  # 32,769 characters, 65,536 bytes
    assert refusal(ddb.get_item, TableName=hash_table, Key=fresh_key(), AttributesToGet=[name]).endswith(LONG_NAME)
    assert refusal(ddb.scan, TableName=hash_table, AttributesToGet=[name]).endswith(LONG_NAME)
    assert refusal(ddb.scan, TableName=hash_table,
                   ScanFilter={name: {"ComparisonOperator": "NOT_NULL"}}).endswith(LONG_NAME)
    assert refusal(ddb.delete_item, TableName=hash_table, Key=fresh_key(),
                   Expected={name: {"Exists": False}}).endswith(LONG_NAME)


# --- REMOVE of nested paths ----------------------------------------------------------------------------------


def test_remove_of_a_nested_path_with_a_missing_parent_is_refused_on_an_item(ddb, hash_table):
    """On an item that exists, REMOVE a.b needs `a` to be a map (as SET does); a missing `b` is no error."""
    key = fresh_key()
    ddb.put_item(TableName=hash_table, Item={**key, "m": {"M": {}}, "s": {"S": "x"}})
    ddb.update_item(TableName=hash_table, Key=key, UpdateExpression="REMOVE m.gone")
    for expression in ("REMOVE nope.a", "REMOVE s.a", "REMOVE nope[0]", "SET nope.a = :v"):
        extra = {"ExpressionAttributeValues": {":v": {"S": "v"}}} if ":v" in expression else {}
        assert refusal(ddb.update_item, TableName=hash_table, Key=key, UpdateExpression=expression,
                       **extra) == BAD_PATH


def test_remove_of_a_nested_path_on_a_missing_item_is_a_no_op(ddb, hash_table):
    """With no item at all, REMOVE a.b removes nothing and creates nothing (issue 30's statement of DynamoDB's
    behaviour); beside a SET, the item is created with what the SET writes."""
    key = fresh_key()
    response = ddb.update_item(TableName=hash_table, Key=key, UpdateExpression="REMOVE a.b, c[1]",
                               ReturnValues="ALL_NEW")
    assert "Attributes" not in response
    assert "Item" not in ddb.get_item(TableName=hash_table, Key=key)
    ddb.update_item(TableName=hash_table, Key=key, UpdateExpression="SET d = :v REMOVE a.b",
                    ExpressionAttributeValues={":v": {"S": "v"}})
    assert ddb.get_item(TableName=hash_table, Key=key)["Item"] == {**key, "d": {"S": "v"}}
    ddb.transact_write_items(TransactItems=[{"Update": {"TableName": hash_table, "Key": fresh_key(),
                                                        "UpdateExpression": "REMOVE a.b"}}])


def test_set_of_a_nested_path_on_a_missing_item_is_refused(ddb, hash_table):
    """SET a.b has no map `a` to write into when there is no item: the path is invalid."""
    key = fresh_key()
    assert refusal(ddb.update_item, TableName=hash_table, Key=key, UpdateExpression="SET a.b = :v",
                   ExpressionAttributeValues={":v": {"S": "v"}}) == BAD_PATH
    assert "Item" not in ddb.get_item(TableName=hash_table, Key=key)


# --- the 4 KB expression limit -------------------------------------------------------------------------------


def _long(prefix: str) -> str:
    """An expression of 4,100 bytes, over the 4 KB limit."""
    return prefix + " " * (4100 - len(prefix))


def _size_tail(member: str) -> str:
    return f"Invalid {member}: Expression size has exceeded the maximum allowed size; expression size: 4100"


def test_every_expression_kind_over_4_kb_gives_its_size(ddb, range_table):
    """Every kind's refusal ends with the expression's size, not only a filter's."""
    key = {"pk": {"S": "x"}, "sk": {"S": "y"}}
    cases = [
        ("ConditionExpression", ddb.delete_item, {"Key": key, "ConditionExpression": _long("attribute_exists(a)")}),
        ("UpdateExpression", ddb.update_item, {"Key": key, "UpdateExpression": _long("REMOVE a")}),
        ("ProjectionExpression", ddb.get_item, {"Key": key, "ProjectionExpression": _long("a")}),
        ("KeyConditionExpression", ddb.query, {"KeyConditionExpression": _long("pk = :p"),
                                               "ExpressionAttributeValues": {":p": {"S": "x"}}}),
        ("FilterExpression", ddb.scan, {"FilterExpression": _long("attribute_exists(a)")}),
    ]
    for member, call, request in cases:
        assert refusal(call, TableName=range_table, **request).endswith(_size_tail(member)), member
