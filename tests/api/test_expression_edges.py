"""Expression corners: malformed text never reaches a 500, parenthesized SET values, placeholder key syntax,
empty names, the operator limit of conditions, list appends in index order, REMOVE under a missing parent."""

from __future__ import annotations

import json
import uuid

import pytest
from botocore.exceptions import ClientError

from tests.api.test_protocol import call

BAD_PATH = "The document path provided in the update expression is invalid for update"


def error_of(excinfo) -> tuple[str, str]:
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


def _item(ddb, table: str, **attributes) -> dict:
    key = {"pk": {"S": uuid.uuid4().hex}}
    ddb.put_item(TableName=table, Item={**key, **attributes})
    return key


@pytest.mark.parametrize(("member", "text"), [
    ("ConditionExpression", "a > ("),
    ("ConditionExpression", "a BETWEEN ("),
    ("ConditionExpression", "a = ("),
    ("ConditionExpression", "a = :v AND ("),
    ("UpdateExpression", "SET a = ("),
    ("UpdateExpression", "SET a = :v + ("),
])
def test_unfinished_parentheses_are_syntax_errors(server, hash_table, member, text):
    """An expression ending where an operand should start is a 400 syntax error, never a server error."""
    body = {"TableName": hash_table, "Key": {"pk": {"S": "x"}}, "ExpressionAttributeValues": {":v": {"N": "1"}}}
    if member == "ConditionExpression":
        body["UpdateExpression"] = "SET b = :v"
    body[member] = text
    response, data = call(server, json.dumps(body), target="DynamoDB_20120810.UpdateItem")
    error = json.loads(data)
    assert response.status == 400, data
    assert error["__type"].endswith("#ValidationException")
    assert error["message"].startswith(f"1 validation error detected: Invalid {member}: Syntax error; token: ")


def test_condition_operand_in_parentheses_is_a_syntax_error_not_a_function(ddb, hash_table):
    with pytest.raises(ClientError) as excinfo:
        ddb.delete_item(TableName=hash_table, Key={"pk": {"S": "x"}}, ConditionExpression="a = (b)")
    assert error_of(excinfo) == ("ValidationException",
                                 'Invalid ConditionExpression: Syntax error; token: "(", near: "= (b"')


@pytest.mark.parametrize(("expression", "expected"), [
    ("SET c = (c - :v)", "7"),
    ("SET c = (:v + :w)", "5"),
    ("SET c = c - (:v)", "7"),
    ("SET c = (c) + (:w)", "12"),
])
def test_set_values_may_be_parenthesized(ddb, hash_table, expression, expected):
    key = _item(ddb, hash_table, c={"N": "10"})
    values = {name: value for name, value in ((":v", {"N": "3"}), (":w", {"N": "2"})) if name in expression}
    ddb.update_item(TableName=hash_table, Key=key, UpdateExpression=expression, ExpressionAttributeValues=values)
    assert ddb.get_item(TableName=hash_table, Key=key)["Item"]["c"] == {"N": expected}


def test_names_start_with_a_letter(ddb, hash_table):
    """'_x' in an expression is a syntax error at '_' (quoted from DynamoDB's answers); a placeholder may start
    with an underscore, and a name may hold one after its first letter. Nothing is written."""
    key = {"pk": {"S": "underscore"}}
    for call_, member, text, near in (
            (ddb.update_item, "UpdateExpression", "set _something = :v", "set _something"),
            (ddb.put_item, "ConditionExpression", "_version = :v", "_version"),
            (ddb.scan, "FilterExpression", "_type = :v", "_type")):
        request = {"TableName": hash_table, member: text, "ExpressionAttributeValues": {":v": {"N": "1"}}}
        request.update({"Item": key} if call_ == ddb.put_item else {"Key": key} if call_ == ddb.update_item else {})
        with pytest.raises(ClientError) as excinfo:
            call_(**request)
        counted = "1 validation error detected: " if call_ != ddb.scan else ""  # (PutItem and UpdateItem count it)
        assert error_of(excinfo) == ("ValidationException",
                                     f'{counted}Invalid {member}: Syntax error; token: "_", near: "{near}"')
    assert "Item" not in ddb.get_item(TableName=hash_table, Key=key)
    with pytest.raises(ClientError) as excinfo:  # a number token ends after a leading 0 (captured in 2021)
        ddb.get_item(TableName=hash_table, Key=key, ProjectionExpression="#d-03", ExpressionAttributeNames={"#d": "d"})
    assert error_of(excinfo)[1] == 'Invalid ProjectionExpression: Syntax error; token: "-", near: "#d-0"'
    ddb.update_item(TableName=hash_table, Key=key, UpdateExpression="SET a_1 = :_v, #_n = :_v",
                    ExpressionAttributeNames={"#_n": "_n"}, ExpressionAttributeValues={":_v": {"N": "1"}})
    assert ddb.get_item(TableName=hash_table, Key=key)["Item"]["_n"] == {"N": "1"}


@pytest.mark.parametrize("key", ["#a.b", "#a-b", "#a b", "#"])
def test_name_placeholder_keys_must_be_word_characters(ddb, hash_table, key):
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=hash_table, Key={"pk": {"S": "x"}}, UpdateExpression="SET #a = :v",
                        ExpressionAttributeNames={"#a": "a", key: "b"}, ExpressionAttributeValues={":v": {"N": "1"}})
    assert error_of(excinfo) == ("ValidationException",
                                 f'ExpressionAttributeNames contains invalid key: Syntax error; key: "{key}"')


@pytest.mark.parametrize("key", [":a-b", ":a.b", ":"])
def test_value_placeholder_keys_must_be_word_characters(ddb, hash_table, key):
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=hash_table, Key={"pk": {"S": "x"}}, UpdateExpression="SET a = :v",
                        ExpressionAttributeValues={":v": {"N": "1"}, key: {"N": "2"}})
    assert error_of(excinfo) == ("ValidationException",
                                 f'ExpressionAttributeValues contains invalid key: Syntax error; key: "{key}"')


def test_placeholders_of_at_most_255_bytes(ddb, hash_table):
    """The Developer Guide's limit on a placeholder, its # or : included; checked before its syntax."""
    key = {"pk": {"S": "placeholders"}}
    name, value = "#" + "n" * 254, ":" + "v" * 254
    ddb.update_item(TableName=hash_table, Key=key, UpdateExpression=f"SET {name} = {value}",
                    ExpressionAttributeNames={name: "a"}, ExpressionAttributeValues={value: {"N": "1"}})
    for names, values, member in (({name + "n": "a"}, {value: {"N": "1"}}, "ExpressionAttributeNames"),
                                  ({name: "a"}, {value + "-": {"N": "1"}}, "ExpressionAttributeValues")):
        with pytest.raises(ClientError) as excinfo:
            ddb.update_item(TableName=hash_table, Key=key, UpdateExpression=f"SET {name} = {value}",
                            ExpressionAttributeNames=names, ExpressionAttributeValues=values)
        code, message = error_of(excinfo)
        assert code == "ValidationException" and message.startswith(f"{member} contains invalid key: The key is "
                                                                    "longer than 255 bytes")
    assert ddb.get_item(TableName=hash_table, Key=key)["Item"]["a"] == {"N": "1"}


def test_empty_attribute_name_is_refused_and_writes_nothing(ddb, hash_table):
    key = _item(ddb, hash_table, a={"N": "1"})
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=hash_table, Key=key, UpdateExpression="SET #a = :v",
                        ExpressionAttributeNames={"#a": ""}, ExpressionAttributeValues={":v": {"N": "2"}})
    assert error_of(excinfo) == ("ValidationException",
                                 "ExpressionAttributeNames contains invalid value: Empty attribute name for key #a")
    assert ddb.get_item(TableName=hash_table, Key=key)["Item"] == {**key, "a": {"N": "1"}}


def test_null_attribute_name_is_refused(server, hash_table):
    body = {"TableName": hash_table, "Item": {"pk": {"S": "null-name"}}, "ConditionExpression":
            "attribute_not_exists(#a)", "ExpressionAttributeNames": {"#a": None}}
    response, data = call(server, json.dumps(body), target="DynamoDB_20120810.PutItem")
    assert response.status == 400
    assert json.loads(data)["message"] == (
        "ExpressionAttributeNames contains invalid value: Empty attribute name for key #a")
    body = {"TableName": hash_table, "Key": {"pk": {"S": "null-name"}}}
    response, data = call(server, json.dumps(body), target="DynamoDB_20120810.GetItem")
    assert json.loads(data) == {}


@pytest.mark.parametrize("member", ["ConditionExpression", "FilterExpression"])
def test_conditions_allow_at_most_300_operators(ddb, hash_table, member):
    """300 comparisons joined by ORs are 300 operators (AND and OR do not count, as observed of DynamoDB); one more
    comparison passes the limit."""
    values = {":v": {"N": "1"}}
    fine = " OR ".join(["n=:v"] * 300)
    too_many = " OR ".join(["n=:v"] * 301)
    if member == "FilterExpression":
        ddb.scan(TableName=hash_table, FilterExpression=fine, ExpressionAttributeValues=values, Limit=1)
        with pytest.raises(ClientError) as excinfo:
            ddb.scan(TableName=hash_table, FilterExpression=too_many, ExpressionAttributeValues=values)
    else:
        key = _item(ddb, hash_table, n={"N": "1"})
        ddb.delete_item(TableName=hash_table, Key=key, ConditionExpression=fine, ExpressionAttributeValues=values)
        with pytest.raises(ClientError) as excinfo:
            ddb.delete_item(TableName=hash_table, Key=key, ConditionExpression=too_many,
                            ExpressionAttributeValues=values)
    assert error_of(excinfo) == (
        "ValidationException", f"Invalid {member}: The expression contains too many operators; operator count: 301")


def _nested(depth: int, inner: str, wrap: str) -> str:
    for _ in range(depth):
        inner = wrap.format(inner)
    return inner


@pytest.mark.parametrize(("expression", "message"), [
    # Deeper than Python's default recursion limit; each gets DynamoDB's answer, not a server error.
    ("(" * 2000 + "n = :v" + ")" * 2000, "The expression has redundant parentheses;"),
    ("NOT " * 1000 + "n = :v", "The expression contains too many operators; operator count: 1001"),
    (_nested(300, "n<:v", "(n<:v and {})"), "The expression contains too many operators; operator count: 301"),
])
def test_deeply_nested_conditions_are_refused(ddb, hash_table, expression, message):
    with pytest.raises(ClientError) as excinfo:
        ddb.scan(TableName=hash_table, FilterExpression=expression, ExpressionAttributeValues={":v": {"N": "1"}})
    assert error_of(excinfo) == ("ValidationException", "Invalid FilterExpression: " + message)


def test_deep_nesting_within_the_operator_limit(ddb, hash_table):
    """299 nested NOT (...) groups around one comparison: 300 operators, a valid (if odd) condition."""
    key = _item(ddb, hash_table, n={"N": "1"})
    ddb.delete_item(TableName=hash_table, Key=key, ConditionExpression=_nested(299, "n = :v", "NOT ({})"),
                    ExpressionAttributeValues={":v": {"N": "2"}})
    assert "Item" not in ddb.get_item(TableName=hash_table, Key=key)


def test_elements_set_past_the_end_are_appended_in_index_order(ddb, hash_table):
    key = _item(ddb, hash_table, l={"L": [{"S": "a"}, {"S": "b"}]})
    ddb.update_item(TableName=hash_table, Key=key, UpdateExpression="SET l[7] = :x, l[5] = :y, l[2] = :z",
                    ExpressionAttributeValues={":x": {"S": "i7"}, ":y": {"S": "i5"}, ":z": {"S": "i2"}})
    assert ddb.get_item(TableName=hash_table, Key=key)["Item"]["l"] == {
        "L": [{"S": "a"}, {"S": "b"}, {"S": "i2"}, {"S": "i5"}, {"S": "i7"}]}


@pytest.mark.parametrize("expression", ["REMOVE nope.a", "REMOVE m.x.y", "REMOVE nope[0]", "REMOVE l[5].a"])
def test_remove_under_a_missing_parent_is_an_invalid_path(ddb, hash_table, expression):
    key = _item(ddb, hash_table, m={"M": {"k": {"S": "v"}}}, l={"L": [{"S": "a"}]})
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=hash_table, Key=key, UpdateExpression=expression)
    assert error_of(excinfo) == ("ValidationException", BAD_PATH)


@pytest.mark.parametrize("expression", ["REMOVE gone", "REMOVE m.gone", "REMOVE l[5]"])
def test_remove_of_a_missing_attribute_is_no_error(ddb, hash_table, expression):
    key = _item(ddb, hash_table, m={"M": {"k": {"S": "v"}}}, l={"L": [{"S": "a"}]})
    ddb.update_item(TableName=hash_table, Key=key, UpdateExpression=expression)
    assert ddb.get_item(TableName=hash_table, Key=key)["Item"] == {
        **key, "m": {"M": {"k": {"S": "v"}}}, "l": {"L": [{"S": "a"}]}}


@pytest.mark.parametrize(("operation", "request_"), [
    ("update_item", {"Key": {"pk": {"S": "a"}}, "UpdateExpression": "SET a"}),
    ("update_item", {"Key": {"pk": {"S": "a"}}, "UpdateExpression": "SET a = :v",
                     "ExpressionAttributeValues": {":v": {"N": "1"}, ":w": {"N": "2"}}}),
    ("put_item", {"Item": {"pk": {"S": "a"}}, "ConditionExpression": "attribute_exists(#n)"}),
    ("delete_item", {"Key": {"pk": {"S": "a"}}, "ConditionExpression": "size(a)"}),
    ("get_item", {"Key": {"pk": {"S": "a"}}, "ProjectionExpression": "a, a"}),
])
def test_expression_errors_come_before_the_table_lookup(ddb, operation, request_):
    """An expression that is wrong in itself is reported even when the table does not exist; the key is
    checked against the table after it."""
    with pytest.raises(ClientError) as excinfo:
        getattr(ddb, operation)(TableName="no-such-table", **request_)
    assert excinfo.value.response["Error"]["Code"] == "ValidationException"
    with pytest.raises(ClientError) as excinfo:
        ddb.get_item(TableName="no-such-table", Key={"pk": {"S": "a"}}, ProjectionExpression="a")
    assert excinfo.value.response["Error"]["Code"] == "ResourceNotFoundException"


@pytest.mark.parametrize(("operation", "request_", "message"), [
    ("scan", {"ProjectionExpression": "a,,b"}, 'Invalid ProjectionExpression: Syntax error; token: ",", near: ",,b"'),
    ("scan", {"FilterExpression": "a = "}, 'Invalid FilterExpression: Syntax error; token: "<EOF>", near: "= "'),
    ("query", {"KeyConditionExpression": "pk = :v and", "ExpressionAttributeValues": {":v": {"S": "a"}}},
     'Invalid KeyConditionExpression: Syntax error; token: "<EOF>", near: "and"'),
    ("query", {"KeyConditionExpression": "pk = :v", "ExpressionAttributeValues": {":v": {"S": "a"}, ":w": {"S": "b"}}},
     "Value provided in ExpressionAttributeValues unused in expressions: keys: {:w}"),
])
def test_read_expression_errors_come_before_the_table_lookup(ddb, hash_table, operation, request_, message):
    """As for the item operations: a Query or Scan whose expressions are wrong in themselves says so before it
    says that the table (or the index) does not exist."""
    for table, index in (("no-such-table", None), (hash_table, "no-such-index")):
        with pytest.raises(ClientError) as excinfo:
            getattr(ddb, operation)(TableName=table, **({"IndexName": index} if index else {}), **request_)
        assert error_of(excinfo) == ("ValidationException", message)
