"""ConditionExpression through PutItem, UpdateItem and DeleteItem: every comparator and function, put-if-absent,
placeholders and reserved words, and the errors of malformed conditions — a failed or rejected condition changes
nothing."""

from __future__ import annotations

import json
import uuid

import pytest
from botocore.exceptions import ClientError

from tests.api.counted import counted
from tests.api.test_protocol import call

BASE = {
    "n": {"N": "5"}, "s": {"S": "hello"}, "l": {"L": [{"S": "0"}, {"N": "1"}]}, "m": {"M": {"x": {"N": "1"}}},
    "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2"]}, "b": {"B": b"\x01\x02"}, "t": {"BOOL": True},
    "z": {"NULL": True},
}
FAILED = ("ConditionalCheckFailedException", "The conditional request failed")


def error_of(excinfo) -> tuple[str, str]:
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


def v(**values: dict) -> dict:
    return {f":{name}": value for name, value in values.items()}


def N(value: str) -> dict:
    return {"N": value}


def S(value: str) -> dict:
    return {"S": value}


@pytest.fixture
def stored(ddb, hash_table) -> dict:
    item = {"pk": {"S": uuid.uuid4().hex}, **BASE}
    ddb.put_item(TableName=hash_table, Item=item)
    return item


def holds(ddb, table: str, item: dict, condition: str, values: dict | None = None,
          names: dict | None = None) -> bool:
    """Whether `condition` holds for `item`, checked with a conditional PutItem that rewrites the same item."""
    extra: dict = {}
    if values is not None:
        extra["ExpressionAttributeValues"] = values
    if names is not None:
        extra["ExpressionAttributeNames"] = names
    try:
        ddb.put_item(TableName=table, Item=item, ConditionExpression=condition, **extra)
    except ClientError as error:
        assert error_of_response(error) == FAILED
        return False
    return True


def error_of_response(error: ClientError) -> tuple[str, str]:
    return error.response["Error"]["Code"], error.response["Error"]["Message"]


CASES = [
    # comparators, numbers compared numerically
    ("n = :v", v(v=N("5.0")), True), ("n = :v", v(v=N("6")), False),
    ("n <> :v", v(v=N("5")), False), ("n <> :v", v(v=N("4")), True),
    ("n < :v", v(v=N("6")), True), ("n < :v", v(v=N("5")), False),
    ("n <= :v", v(v=N("5")), True), ("n > :v", v(v=N("5")), False), ("n > :v", v(v=N("-10")), True),
    ("n >= :v", v(v=N("5")), True), ("n >= :v", v(v=N("5.0001")), False),
    # strings by code point, binaries by unsigned bytes
    ("s < :v", v(v=S("hellp")), True), ("s > :v", v(v=S("Hello")), True), ("s = :v", v(v=S("hello")), True),
    ("b > :v", v(v={"B": b"\x01"}), True), ("b < :v", v(v={"B": b"\xff"}), True),
    # different types: comparisons are false, never errors
    ("n = :v", v(v=S("5")), False), ("n < :v", v(v=S("6")), False), ("n <> :v", v(v=S("5")), True),
    # other types compared for equality
    ("t = :v", v(v={"BOOL": True}), True), ("z = :v", v(v={"NULL": True}), True),
    ("m = :v", v(v={"M": {"x": N("1")}}), True), ("ss = :v", v(v={"SS": ["b", "a"]}), True),
    ("l = :v", v(v={"L": [S("0"), N("1")]}), True), ("l = :v", v(v={"L": [N("1"), S("0")]}), False),
    # missing attributes
    ("nothing = :v", v(v=N("1")), False), ("nothing < :v", v(v=N("1")), False),
    ("nothing <> :v", v(v=N("1")), True), ("nothing <> absent2", None, True), ("nothing = absent2", None, False),
    # BETWEEN and IN
    ("n BETWEEN :a AND :b", v(a=N("1"), b=N("5")), True), ("n BETWEEN :a AND :b", v(a=N("6"), b=N("9")), False),
    ("s BETWEEN :a AND :b", v(a=S("a"), b=S("z")), True), ("n between :a and :b", v(a=N("5"), b=N("5")), True),
    ("n IN (:a, :b)", v(a=N("1"), b=N("5")), True), ("n IN (:a)", v(a=N("1")), False),
    ("s in (:a, :b)", v(a=N("1"), b=S("hello")), True),
    # logic and precedence: NOT > AND > OR
    ("NOT n = :v", v(v=N("5")), False), ("n = :v OR s = :v", v(v=N("5")), True),
    ("n = :v AND s = :v", v(v=N("5")), False), ("(n = :a OR s = :b) AND t = :c", v(a=N("0"), b=S("hello"),
                                                                                   c={"BOOL": True}), True),
    ("n = :a OR n = :b AND n = :c", v(a=N("5"), b=N("0"), c=N("0")), True),
    ("(n = :a OR n = :b) AND n = :c", v(a=N("5"), b=N("0"), c=N("0")), False),
    ("NOT (n = :a AND n = :b)", v(a=N("5"), b=N("0")), True),
    # functions
    ("attribute_exists(n)", None, True), ("attribute_exists(nothing)", None, False),
    ("attribute_not_exists(nothing)", None, True), ("attribute_not_exists(pk)", None, False),
    ("attribute_exists(m.x)", None, True), ("attribute_not_exists(m.y)", None, True),
    ("attribute_exists(l[1])", None, True), ("attribute_exists(l[2])", None, False),
    ("attribute_type(n, :t)", v(t=S("N")), True), ("attribute_type(n, :t)", v(t=S("S")), False),
    ("attribute_type(z, :t)", v(t=S("NULL")), True), ("attribute_type(ss, :t)", v(t=S("SS")), True),
    ("attribute_type(m, :t)", v(t=S("M")), True), ("attribute_type(l, :t)", v(t=S("L")), True),
    ("begins_with(s, :p)", v(p=S("he")), True), ("begins_with(s, :p)", v(p=S("lo")), False),
    ("begins_with(b, :p)", v(p={"B": b"\x01"}), True), ("begins_with(n, :p)", v(p=S("5")), False),
    ("contains(s, :p)", v(p=S("ll")), True), ("contains(s, :p)", v(p=S("x")), False),
    ("contains(ss, :p)", v(p=S("a")), True), ("contains(ns, :p)", v(p=N("2")), True),
    ("contains(ns, :p)", v(p=S("2")), False), ("contains(l, :p)", v(p=N("1")), True),
    ("size(s) = :n", v(n=N("5")), True), ("size(l) = :n", v(n=N("2")), True), ("size(b) = :n", v(n=N("2")), True),
    ("size(m) = :n", v(n=N("1")), True), ("size(ss) > :n", v(n=N("1")), True), ("size(nothing) = :n", v(n=N("0")),
                                                                               False),
    # paths and names
    ("m.x = :v", v(v=N("1")), True), ("l[0] = :v", v(v=S("0")), True), ("#n = :v", v(v=N("5")), True),
]


@pytest.mark.parametrize(("condition", "values", "expected"), CASES)
def test_condition_evaluation(ddb, hash_table, stored, condition, values, expected):
    """Each comparator and function evaluates as DynamoDB documents; a false condition changes nothing."""
    names = {"#n": "n"} if "#n" in condition else None
    changed = {**stored, "marker": {"S": "written"}}
    assert holds(ddb, hash_table, changed, condition, values, names) is expected
    got = ddb.get_item(TableName=hash_table, Key={"pk": stored["pk"]}, ConsistentRead=True)["Item"]
    assert got == (changed if expected else stored)


def test_put_if_absent(ddb, hash_table):
    """attribute_not_exists(pk) makes PutItem create-only: the second put fails and keeps the first item."""
    key = {"pk": {"S": uuid.uuid4().hex}}
    ddb.put_item(TableName=hash_table, Item={**key, "v": S("first")}, ConditionExpression="attribute_not_exists(pk)")
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=hash_table, Item={**key, "v": S("second")},
                     ConditionExpression="attribute_not_exists(pk)")
    assert error_of(excinfo) == FAILED
    assert ddb.get_item(TableName=hash_table, Key=key)["Item"]["v"] == S("first")


def test_conditions_on_a_missing_item(ddb, hash_table):
    """Against a missing item every attribute is absent: exists fails, not_exists holds."""
    key = {"pk": {"S": uuid.uuid4().hex}}
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=hash_table, Key=key, UpdateExpression="SET a = :v",
                        ConditionExpression="attribute_exists(pk)", ExpressionAttributeValues=v(v=N("1")))
    assert error_of(excinfo) == FAILED
    assert "Item" not in ddb.get_item(TableName=hash_table, Key=key)
    ddb.delete_item(TableName=hash_table, Key=key, ConditionExpression="attribute_not_exists(a)")


def test_conditional_update_and_delete(ddb, hash_table, stored):
    """UpdateItem and DeleteItem apply only when their condition holds."""
    key = {"pk": stored["pk"]}
    ddb.update_item(TableName=hash_table, Key=key, UpdateExpression="SET n = n + :one",
                    ConditionExpression="n = :five", ExpressionAttributeValues=v(one=N("1"), five=N("5")))
    with pytest.raises(ClientError) as excinfo:
        ddb.delete_item(TableName=hash_table, Key=key, ConditionExpression="n = :five",
                        ExpressionAttributeValues=v(five=N("5")))
    assert error_of(excinfo) == FAILED
    ddb.delete_item(TableName=hash_table, Key=key, ConditionExpression="n = :six",
                    ExpressionAttributeValues=v(six=N("6")))
    assert "Item" not in ddb.get_item(TableName=hash_table, Key=key)


def invalid(message: str) -> str:
    return f"Invalid ConditionExpression: {message}"


ERRORS = [
    ("n = ", None, None, invalid('Syntax error; token: "<EOF>", near: "= "')),
    ("n == :v", v(v=N("5")), None, invalid('Syntax error; token: "=", near: "== :v"')),
    ("n > :a AND", v(a=N("1")), None, invalid('Syntax error; token: "<EOF>", near: "AND"')),
    ("n IN ()", None, None, invalid('Syntax error; token: ")", near: "()"')),
    ("foo(n)", None, None, invalid("Invalid function name; function: foo")),
    ("attribute_exists(n, s)", None, None, invalid(
        "Incorrect number of operands for operator or function; operator or function: attribute_exists, "
        "number of operands: 2")),
    ("begins_with(n)", None, None, invalid(
        "Incorrect number of operands for operator or function; operator or function: begins_with, "
        "number of operands: 1")),
    ("attribute_exists(:a)", v(a=S("x")), None, invalid(
        "Operator or function requires a document path; operator or function: attribute_exists")),
    ("size(s)", None, None, invalid(
        "The function is not allowed to be used this way in an expression; function: size")),
    # size() of a value it cannot measure is refused up front (of an attribute, it is merely false).
    ("size(:v) = :one", v(v=N("123"), one=N("1")), None, invalid(
        "Incorrect operand type for operator or function; operator or function: size, operand type: N")),
    ("size(:v) = :one", v(v={"BOOL": True}, one=N("1")), None, invalid(
        "Incorrect operand type for operator or function; operator or function: size, operand type: BOOL")),
    ("size(size(s)) = :one", v(one=N("1")), None, invalid(
        "Incorrect operand type for operator or function; operator or function: size, operand type: N")),
    ("n = n", None, None, invalid(
        "The first operand must be distinct from the remaining operands for this operator or function; "
        "operator: =, first operand: [n]")),
    ("n < :v", v(v={"BOOL": True}), None, invalid(
        "Incorrect operand type for operator or function; operator or function: <, operand type: BOOL")),
    ("begins_with(s, :p)", v(p=N("1")), None, invalid(
        "Incorrect operand type for operator or function; operator or function: begins_with, operand type: N")),
    ("attribute_type(n, :t)", v(t=S("X")), None, invalid(
        "Invalid attribute type name found; type: X, valid types: { B,NULL,SS,BOOL,L,BS,N,NS,S,M }")),
    ("n BETWEEN :a AND :b", v(a=N("6"), b=N("1")), None, invalid(
        "The BETWEEN operator requires upper bound to be greater than or equal to lower bound; "
        "lower bound operand: AttributeValue: {N:6}, upper bound operand: AttributeValue: {N:1}")),
    ("n BETWEEN :a AND :b", v(a=N("1"), b=S("5")), None, invalid(
        "The BETWEEN operator requires same data type for lower and upper bounds; "
        "lower bound operand: AttributeValue: {N:1}, upper bound operand: AttributeValue: {S:5}")),
    ("name = :v", v(v=N("5")), None, invalid("Attribute name is a reserved keyword; reserved keyword: name")),
    ("size = :v", v(v=N("5")), None, invalid("Attribute name is a reserved keyword; reserved keyword: size")),
    ("#x = :v", v(v=N("5")), None, invalid(
        "An expression attribute name used in the document path is not defined; attribute name: #x")),
    ("n = :nope", v(v=N("5")), None, invalid(
        "An expression attribute value used in expression is not defined; attribute value: :nope")),
    ("n = :v", v(v=N("5"), w=N("1")), None, "Value provided in ExpressionAttributeValues unused in expressions: "
                                            "keys: {:w}"),
    ("n = :v", v(v=N("5")), {"#u": "u"}, "Value provided in ExpressionAttributeNames unused in expressions: "
                                         "keys: {#u}"),
    ("n IN (" + ", ".join(f":v{i}" for i in range(101)) + ")", {f":v{i}": N(str(i)) for i in range(101)}, None,
     invalid("The IN operator is provided with too many operands; number of operands: 101")),
    ("", None, None, invalid("The expression can not be empty;")),
    ("n = :v", v(v=N("5")), {"n": "n"}, 'ExpressionAttributeNames contains invalid key: Syntax error; key: "n"'),
    ("n = :v", {"v": N("5")}, None, 'ExpressionAttributeValues contains invalid key: Syntax error; key: "v"'),
    ("n = :v", {}, None, "ExpressionAttributeValues must not be empty"),
    ("n = :v", v(v=N("5")), {}, "ExpressionAttributeNames must not be empty"),
]


@pytest.mark.parametrize(("condition", "values", "names", "message"), ERRORS)
def test_condition_errors(ddb, hash_table, stored, condition, values, names, message):
    """Malformed conditions are ValidationExceptions with DynamoDB's wording, and nothing is written."""
    extra: dict = {}
    if values is not None:
        extra["ExpressionAttributeValues"] = values
    if names is not None:
        extra["ExpressionAttributeNames"] = names
    for operation, args in (("put_item", {"Item": {**stored, "marker": S("x")}}),
                            ("delete_item", {"Key": {"pk": stored["pk"]}})):
        with pytest.raises(ClientError) as excinfo:
            getattr(ddb, operation)(TableName=hash_table, ConditionExpression=condition, **args, **extra)
        # PutItem counts its request checks' refusals; DeleteItem's are bare.
        assert error_of(excinfo) == ("ValidationException", counted(message) if operation == "put_item" else message)
    assert ddb.get_item(TableName=hash_table, Key={"pk": stored["pk"]}, ConsistentRead=True)["Item"] == stored


def test_names_and_values_without_condition(ddb, hash_table):
    """Placeholders without any expression to use them are rejected."""
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=hash_table, Item={"pk": S("a")}, ExpressionAttributeValues=v(v=N("1")))
    # PutItem no longer names the missing expression (recorded in every region, 2026-09-20).
    assert error_of(excinfo) == ("ValidationException", "1 validation error detected: ExpressionAttributeValues can "
                                                        "only be specified when using expressions")
    with pytest.raises(ClientError) as excinfo:
        ddb.delete_item(TableName=hash_table, Key={"pk": S("a")}, ExpressionAttributeNames={"#a": "a"})
    assert error_of(excinfo) == ("ValidationException",
                                 "ExpressionAttributeNames can only be specified when using expressions")


def test_reserved_words_through_names(ddb, hash_table):
    """Reserved words (here: name, size, status) work as attribute names through ExpressionAttributeNames."""
    key = {"pk": S(uuid.uuid4().hex)}
    ddb.put_item(TableName=hash_table, Item={**key, "name": S("x"), "size": N("1"), "status": S("on")})
    ddb.delete_item(TableName=hash_table, Key=key, ConditionExpression="#a = :a AND #b = :b AND #c = :c",
                    ExpressionAttributeNames={"#a": "name", "#b": "size", "#c": "status"},
                    ExpressionAttributeValues=v(a=S("x"), b=N("1"), c=S("on")))
    assert "Item" not in ddb.get_item(TableName=hash_table, Key=key)


def test_expression_size_limit(ddb, hash_table, stored):
    """An expression may be at most 4 KB (UTF-8 bytes); every kind's refusal ends with the size (issue 30)."""
    ok = "n = :v" + " " * (4096 - 6)
    ddb.put_item(TableName=hash_table, Item=stored, ConditionExpression=ok, ExpressionAttributeValues=v(v=N("5")))
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=hash_table, Item=stored, ConditionExpression=ok + " ",
                     ExpressionAttributeValues=v(v=N("5")))
    assert error_of(excinfo) == ("ValidationException", "1 validation error detected: Invalid ConditionExpression: "
                                                        "Expression size has exceeded the maximum allowed size; "
                                                        "expression size: 4097")
    with pytest.raises(ClientError) as excinfo:
        ddb.scan(TableName=hash_table, FilterExpression=ok + " ", ExpressionAttributeValues=v(v=N("5")))
    assert error_of(excinfo)[1] == ("Invalid FilterExpression: Expression size has exceeded the maximum allowed "
                                    "size; expression size: 4097")
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=hash_table, Key={"pk": stored["pk"]}, UpdateExpression="SET n = :v" + " " * 4090,
                        ExpressionAttributeValues=v(v=N("5")))
    assert error_of(excinfo)[1] == ("1 validation error detected: Invalid UpdateExpression: Expression size has "
                                    "exceeded the maximum allowed size; expression size: 4100")
    with pytest.raises(ClientError) as excinfo:
        ddb.get_item(TableName=hash_table, Key={"pk": stored["pk"]}, ProjectionExpression="n," * 2048 + "n")
    assert error_of(excinfo) == ("ValidationException", "Invalid ProjectionExpression: Expression size has exceeded "
                                                        "the maximum allowed size; expression size: 4097")


def test_substitution_variables_limit(ddb, hash_table, stored):
    """All ExpressionAttributeNames and ExpressionAttributeValues of a request add up to at most 2 MB (the quotas
    page: "the sum of the lengths of all ExpressionAttributeNames and ExpressionAttributeValues"); a request past
    it is refused and changes nothing."""
    limit = 2 * 1024 * 1024
    filter_of = " or ".join(f"n = :v{i}" for i in range(4))
    # Four values, each its placeholder's 3 bytes and its string: exactly 2 MB passes, one byte more does not.
    sizes = [limit // 4 - 3] * 3 + [limit - 3 * (limit // 4) - 3]
    values = {f":v{i}": S("x" * size) for i, size in enumerate(sizes)}
    assert ddb.scan(TableName=hash_table, FilterExpression=filter_of, ExpressionAttributeValues=values,
                    Select="COUNT")["Count"] == 0
    values[":v3"] = S("x" * (sizes[3] + 1))
    with pytest.raises(ClientError) as excinfo:
        ddb.scan(TableName=hash_table, FilterExpression=filter_of, ExpressionAttributeValues=values)
    assert error_of(excinfo)[0] == "ValidationException"
    assert "exceeded the maximum allowed size" in error_of(excinfo)[1]
    # Names count too (placeholder and name), and an UpdateItem past the limit writes nothing.
    names = {f"#n{i}": "a" * 60_000 for i in range(35)}
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=hash_table, Key={"pk": stored["pk"]}, UpdateExpression="SET #n0 = :v",
                        ConditionExpression=" and ".join(f"attribute_not_exists(#n{i})" for i in range(1, 35)),
                        ExpressionAttributeNames=names, ExpressionAttributeValues=v(v=S("new")))
    assert error_of(excinfo)[0] == "ValidationException"
    assert "a" * 60_000 not in ddb.get_item(TableName=hash_table, Key={"pk": stored["pk"]}).get("Item", {})


def test_size_of_strings_counts_utf16_code_units(ddb, hash_table):
    """size() counts a string as DynamoDB's Java strings do: a character outside the Basic Multilingual Plane
    counts twice (not UTF-8 bytes, not code points); a value's size is known without an item."""
    item = {"pk": S(uuid.uuid4().hex), "s": S("é\U0001d11e"), "e": S("a\U0001f600b")}
    ddb.put_item(TableName=hash_table, Item=item)
    assert holds(ddb, hash_table, item, "size(s) = :three", v(three=N("3")))
    assert not holds(ddb, hash_table, item, "size(s) = :two", v(two=N("2")))
    assert holds(ddb, hash_table, item, "size(e) = :four", v(four=N("4")))
    assert holds(ddb, hash_table, item, "size(:v) = :four", v(v=S("\U0001f600\U0001f600"), four=N("4")))


def test_values_are_not_a_member_of_reads_by_key(server, hash_table, stored):
    """GetItem, BatchGetItem and TransactGetItems have no ExpressionAttributeValues member: one sent anyway is
    ignored, as any member an operation does not have (boto3 would not send it; raw JSON can)."""
    key = {"pk": stored["pk"]}
    values = v(v=N("1"))
    requests = [
        ("GetItem", {"TableName": hash_table, "Key": key, "ExpressionAttributeValues": values}),
        ("GetItem", {"TableName": hash_table, "Key": key, "ProjectionExpression": "n",
                     "ExpressionAttributeValues": values}),
        ("BatchGetItem", {"RequestItems": {hash_table: {"Keys": [key], "ExpressionAttributeValues": values}}}),
        ("TransactGetItems", {"TransactItems": [{"Get": {"TableName": hash_table, "Key": key,
                                                         "ExpressionAttributeValues": values}}]}),
    ]
    for operation, body in requests:
        response, data = call(server, json.dumps(body), f"DynamoDB_20120810.{operation}")
        assert response.status == 200, data
    assert json.loads(data)["Responses"][0]["Item"]["pk"] == stored["pk"]
