"""The value model through the API: the ten types, number normalization and limits, sets, binaries, empty values,
key validation, key and item size limits, nesting depth — each with DynamoDB's exact error."""

from __future__ import annotations

import json
import uuid

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.api.counted import counted
from tests.api.item_sizes import item_size
from tests.api.test_protocol import call
from tests.conftest import create_table

INVALID = "One or more parameter values were invalid: "
KEY_MISMATCH = "The provided key element does not match the schema"
ITEM_TOO_BIG = "Item size has exceeded the maximum allowed size"
NESTING = ("Nesting Levels have exceeded supported limits: Attributes in the item have nested levels beyond "
           "supported limit")
OVERFLOW = "Number overflow. Attempting to store a number with magnitude larger than supported range"
UNDERFLOW = "Number underflow. Attempting to store a number with magnitude smaller than supported range"
PRECISION = "Attempting to store more than 38 significant digits in a Number"


def error_of(excinfo) -> tuple[str, str]:
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


def key() -> str:
    return uuid.uuid4().hex


@pytest.fixture(scope="module")
def raw(server):
    """A client that skips botocore's parameter validation, to send what DynamoDB must reject itself."""
    return boto3.client("dynamodb", endpoint_url=server.endpoint, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test",
                        config=Config(retries={"max_attempts": 1}, parameter_validation=False))


@pytest.fixture(scope="module")
def binary_table(ddb) -> str:
    return create_table(ddb, hash_type="B", range_type="B")


def put_error(ddb, table: str, item: dict) -> tuple[str, str]:
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=table, Item=item)
    return error_of(excinfo)


# --- the ten types --------------------------------------------------------------------------------------


def test_all_ten_types_round_trip(ddb, hash_table):
    """Every attribute type comes back exactly as written (sets compared as sets)."""
    pk = key()
    item = {
        "pk": {"S": pk}, "s": {"S": "héllo ☃"}, "n": {"N": "-12.5"}, "b": {"B": b"\x00\xff\x10"},
        "t": {"BOOL": True}, "f": {"BOOL": False}, "z": {"NULL": True},
        "m": {"M": {"inner": {"S": "v"}, "deep": {"M": {"x": {"N": "1"}}}, "empty": {"M": {}}}},
        "l": {"L": [{"S": "a"}, {"N": "2"}, {"L": []}, {"NULL": True}, {"B": b"\x01"}]},
        "ss": {"SS": ["b", "a", "c"]}, "ns": {"NS": ["3", "1.5", "-2"]}, "bs": {"BS": [b"\x02", b"\x01"]},
    }
    ddb.put_item(TableName=hash_table, Item=item)
    got = ddb.get_item(TableName=hash_table, Key={"pk": {"S": pk}})["Item"]
    for name in ("ss", "ns", "bs"):
        kind = next(iter(item[name]))
        assert sorted(got.pop(name)[kind]) == sorted(item.pop(name)[kind])
    assert got == item


def test_resource_types_round_trip(resource, hash_table):
    """The resource layer's Python types map onto the ten types and back."""
    from decimal import Decimal

    from boto3.dynamodb.types import Binary

    table = resource.Table(hash_table)
    pk = key()
    item = {"pk": pk, "n": Decimal("3.14"), "b": Binary(b"\x00"), "t": True, "z": None, "l": [1, "x"],
            "m": {"k": {"j": False}}, "ss": {"x", "y"}, "ns": {Decimal(1), Decimal(2)}, "bs": {Binary(b"1")},
            "empty_s": "", "empty_b": Binary(b"")}
    table.put_item(Item=item)
    assert table.get_item(Key={"pk": pk})["Item"] == item


@pytest.mark.parametrize(("sent", "stored"), [
    ("1e3", "1000"), ("-0.50", "-0.5"), ("0.0", "0"), ("-0", "0"), ("+5", "5"), ("007", "7"),
    ("1.2300E2", "123"), ("1E-3", "0.001"), (".5", "0.5"), ("5.", "5"),
    ("12345678901234567890123456789012345678", "12345678901234567890123456789012345678"),
    ("1234567890123456789012345678901234567800000", "1234567890123456789012345678901234567800000"),
    ("9.9999999999999999999999999999999999999E+125", "99999999999999999999999999999999999999" + "0" * 88),
    ("1E-130", "0." + "0" * 129 + "1"),
    ("-1E-130", "-0." + "0" * 129 + "1"),
])
def test_numbers_come_back_normalized(ddb, hash_table, sent, stored):
    """Numbers are stored in DynamoDB's normalized form, top-level, in sets and nested."""
    pk = key()
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "n": {"N": sent}, "ns": {"NS": [sent]},
                                             "l": {"L": [{"N": sent}]}})
    got = ddb.get_item(TableName=hash_table, Key={"pk": {"S": pk}})["Item"]
    assert got["n"] == {"N": stored}
    assert got["ns"] == {"NS": [stored]}
    assert got["l"] == {"L": [{"N": stored}]}


@pytest.mark.parametrize(("number", "message"), [
    ("1E126", OVERFLOW), ("-1E+126", OVERFLOW), ("1" * 127, OVERFLOW),
    ("1E-131", UNDERFLOW), ("-0.1E-130", UNDERFLOW),
    ("1" * 39, PRECISION), ("1.00000000000000000000000000000000000001", PRECISION),
    ("abc", "The parameter cannot be converted to a numeric value: abc"),
    ("NaN", "The parameter cannot be converted to a numeric value: NaN"),
    ("Infinity", "The parameter cannot be converted to a numeric value: Infinity"),
    (" 1", "The parameter cannot be converted to a numeric value:  1"),
    ("1e", "The parameter cannot be converted to a numeric value: 1e"),
    ("0x10", "The parameter cannot be converted to a numeric value: 0x10"),
    ("1_000", "The parameter cannot be converted to a numeric value: 1_000"),
    ("", "The parameter cannot be converted to a numeric value: "),
])
def test_invalid_numbers(ddb, hash_table, number, message):
    """Out-of-range, over-precise and malformed numbers are rejected wherever they appear."""
    for value in ({"N": number}, {"NS": ["1", number]}, {"M": {"x": {"L": [{"N": number}]}}}):
        # (PutItem counts a number that does not parse; a range or precision refusal is bare)
        assert put_error(ddb, hash_table, {"pk": {"S": key()}, "v": value}) == ("ValidationException", counted(message))


def test_invalid_number_in_expression_value(ddb, hash_table):
    """A bad number among ExpressionAttributeValues names the placeholder."""
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=hash_table, Key={"pk": {"S": key()}}, UpdateExpression="SET v = :v",
                        ExpressionAttributeValues={":v": {"N": "NaN"}})
    # UpdateItem words it as a counted request error, without the placeholder (see test_empty_set_in_expression_value).
    assert error_of(excinfo) == ("ValidationException", "1 validation error detected: "
                                 "The parameter cannot be converted to a numeric value: NaN")


def test_number_sent_as_json_number(server, hash_table):
    """N must be a JSON string; a JSON number fails deserialization."""
    body = json.dumps({"TableName": hash_table, "Item": {"pk": {"S": "a"}, "n": {"N": 5}}})
    response, data = call(server, body, target="DynamoDB_20120810.PutItem")
    assert response.status == 400
    assert json.loads(data) == {"__type": "com.amazon.coral.service#SerializationException",
                                "Message": "NUMBER_VALUE cannot be converted to String"}


@pytest.mark.parametrize(("operation", "body", "message"), [
    ("PutItem", {"TableName": "no-such-table", "Item": {"pk": {"S": 5}}}, "NUMBER_VALUE cannot be converted to String"),
    ("PutItem", {"TableName": "no-such-table", "Item": {"pk": "x"}}, "Unexpected field type"),
    ("GetItem", {"TableName": "no-such-table", "Key": {"pk": {"B": "abc"}}},
     "Base64 encoded length is expected a multiple of 4 bytes but found: 3"),
    ("PutItem", {"TableName": "{table}", "Item": {"pk": {"S": "a"}, "x": {"S": 5}}, "ReturnValues": "BAD"},
     "NUMBER_VALUE cannot be converted to String"),
    ("PutItem", {"TableName": "{table}", "Item": {"pk": {"S": "a"}, "e": {"SS": []}, "x": {"BS": ["abc"]}}},
     "Base64 encoded length is expected a multiple of 4 bytes but found: 3"),
    ("BatchWriteItem", {"RequestItems": {"no-such-table": [{"PutRequest": {"Item": {"pk": {"B": "abc"}}}}]}},
     "Base64 encoded length is expected a multiple of 4 bytes but found: 3"),
    ("BatchGetItem", {"RequestItems": {"Item": {"Keys": [{"pk": {"S": 1}}]}}},
     "NUMBER_VALUE cannot be converted to String"),
    ("TransactWriteItems", {"TransactItems": [{"Put": {"TableName": "no-such-table", "Item": {"pk": {"N": 1}}}}]},
     "NUMBER_VALUE cannot be converted to String"),
    ("Query", {"TableName": "no-such-table", "KeyConditions": {
        "pk": {"ComparisonOperator": "EQ", "AttributeValueList": [{"S": 1}]}}},
     "NUMBER_VALUE cannot be converted to String"),
])
def test_a_mis_shaped_value_anywhere_wins(server, hash_table, operation, body, message):
    """DynamoDB deserializes the whole request first: a mis-shaped attribute value (or bad base64) anywhere is a
    SerializationException, before a missing table or any validation error, and nothing is written."""
    text = json.dumps(body).replace("{table}", hash_table)
    response, data = call(server, text, target=f"DynamoDB_20120810.{operation}")
    assert (response.status, json.loads(data)) == (400, {"__type": "com.amazon.coral.service#SerializationException",
                                                         "Message": message})
    response, data = call(server, json.dumps({"TableName": hash_table, "Key": {"pk": {"S": "a"}}}),
                          target="DynamoDB_20120810.GetItem")
    assert "Item" not in json.loads(data)


# --- sets -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "words"), [("SS", "An string set  may not be empty"),
                                             ("NS", "An number set  may not be empty"),
                                             ("BS", "Binary sets should not be empty")])
def test_empty_sets_rejected(ddb, hash_table, kind, words):
    """Sets may not be empty (DynamoDB's own grammar and double space; a binary set's worded apart, as recorded in
    every region in 2026)."""
    error = put_error(ddb, hash_table, {"pk": {"S": key()}, "s": {kind: []}})
    assert error == ("ValidationException", f"1 validation error detected: {INVALID}{words}")


def test_empty_set_in_expression_value(ddb, hash_table):
    """An empty set among UpdateItem's ExpressionAttributeValues is a counted request error, without the
    placeholder (as quoted from the AWS CLI in 2026, and recorded for a value nested too deep)."""
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=hash_table, Key={"pk": {"S": key()}}, UpdateExpression="ADD s :s",
                        ExpressionAttributeValues={":s": {"SS": []}})
    assert error_of(excinfo) == ("ValidationException",
                                 f"1 validation error detected: {INVALID}An string set  may not be empty")


@pytest.mark.parametrize(("value", "shown"), [
    ({"SS": ["a", "b", "a"]}, '["a", "b", "a"]'),  # (quoted: recorded in every region in 2026)
    ({"NS": ["1", "2", "1"]}, "[1, 2, 1]"),
])
def test_duplicate_set_members_rejected(ddb, hash_table, value, shown):
    """Set members must be distinct; DynamoDB echoes the whole input collection."""
    error = put_error(ddb, hash_table, {"pk": {"S": key()}, "s": value})
    assert error == ("ValidationException",
                     f"1 validation error detected: {INVALID}Input collection {shown} contains duplicates.")


def test_duplicate_binary_set_members_rejected(ddb, hash_table):
    """Binary set members must be distinct too."""
    error = put_error(ddb, hash_table, {"pk": {"S": key()}, "s": {"BS": [b"", b""]}})
    assert error == ("ValidationException", f'1 validation error detected: {INVALID}Input collection ["",""]'
                                            "of type BS contains duplicates.")  # (as recorded)
    error = put_error(ddb, hash_table, {"pk": {"S": key()}, "s": {"BS": [b"x", b"x"]}})
    assert error[1].endswith("of type BS contains duplicates.")


# --- malformed attribute values -------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "message"), [
    ({}, "Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"),
    ({"S": "a", "N": "1"}, "Supplied AttributeValue has more than one datatypes set, must contain exactly one of "
                           "the supported datatypes"),
    ({"NULL": False}, f"{INVALID}Null attribute value types must have the value of true"),
    ({"M": {"x": {}}}, "Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"),
    ({"L": [{"S": "a", "BOOL": True}]}, "Supplied AttributeValue has more than one datatypes set, must contain "
                                        "exactly one of the supported datatypes"),
])
def test_malformed_attribute_values(raw, hash_table, value, message):
    """An AttributeValue needs exactly one valid type, at any depth."""
    assert put_error(raw, hash_table, {"pk": {"S": key()}, "v": value}) == ("ValidationException", counted(message))


def test_malformed_expression_attribute_value(raw, hash_table):
    """The same checks apply to ExpressionAttributeValues, naming the placeholder."""
    with pytest.raises(ClientError) as excinfo:
        raw.put_item(TableName=hash_table, Item={"pk": {"S": key()}}, ConditionExpression="a = :a",
                     ExpressionAttributeValues={":a": {}})
    assert error_of(excinfo) == ("ValidationException", "ExpressionAttributeValues contains invalid value: Supplied "
                                 "AttributeValue is empty, must contain exactly one of the supported datatypes for "
                                 "key :a")


# --- empty strings and binaries -------------------------------------------------------------------------


def test_empty_string_and_binary_allowed_outside_keys(ddb, hash_table):
    """Since 2020 empty S and B are fine in non-key attributes, top-level and nested."""
    pk = key()
    item = {"pk": {"S": pk}, "s": {"S": ""}, "b": {"B": b""}, "m": {"M": {"e": {"S": ""}}},
            "l": {"L": [{"S": ""}, {"B": b""}]}}
    ddb.put_item(TableName=hash_table, Item=item)
    assert ddb.get_item(TableName=hash_table, Key={"pk": {"S": pk}})["Item"] == item


def test_empty_string_key_rejected(ddb, hash_table, range_table):
    """An empty string is not a valid key value, in items and in Key alike."""
    message = ("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain "
               "an empty string value. Key: {}")
    assert put_error(ddb, hash_table, {"pk": {"S": ""}}) == ("ValidationException", message.format("pk"))
    assert put_error(ddb, range_table, {"pk": {"S": "a"}, "sk": {"S": ""}}) == \
        ("ValidationException", message.format("sk"))
    for operation in ("get_item", "delete_item", "update_item"):
        with pytest.raises(ClientError) as excinfo:
            getattr(ddb, operation)(TableName=hash_table, Key={"pk": {"S": ""}})
        assert error_of(excinfo) == ("ValidationException", message.format("pk"))


def test_empty_binary_key_rejected(ddb, binary_table):
    """An empty binary is not a valid key value either."""
    error = put_error(ddb, binary_table, {"pk": {"B": b""}, "sk": {"B": b"x"}})
    assert error == ("ValidationException", "One or more parameter values are not valid. The AttributeValue for a "
                     "key attribute cannot contain an empty binary value. Key: pk")


# --- keys -----------------------------------------------------------------------------------------------


def test_put_key_type_mismatch(ddb, hash_table, range_table):
    """PutItem names the key attribute, the declared type and the type sent."""
    assert put_error(ddb, hash_table, {"pk": {"N": "1"}}) == \
        ("ValidationException", f"{INVALID}Type mismatch for key pk expected: S actual: N")
    assert put_error(ddb, range_table, {"pk": {"S": "a"}, "sk": {"SS": ["x"]}}) == \
        ("ValidationException", f"{INVALID}Type mismatch for key sk expected: S actual: SS")


def test_put_missing_key(ddb, hash_table, range_table):
    """PutItem without a key attribute names the missing one."""
    assert put_error(ddb, hash_table, {"other": {"S": "a"}}) == \
        ("ValidationException", f"{INVALID}Missing the key pk in the item")
    assert put_error(ddb, range_table, {"pk": {"S": "a"}}) == \
        ("ValidationException", f"{INVALID}Missing the key sk in the item")


@pytest.mark.parametrize("operation", ["get_item", "update_item", "delete_item"])
@pytest.mark.parametrize("bad_key", [
    {"pk": {"N": "1"}, "sk": {"S": "a"}},                      # wrong type
    {"pk": {"S": "a"}},                                         # missing sort key
    {"pk": {"S": "a"}, "sk": {"S": "a"}, "x": {"S": "1"}},      # extra attribute
    {"pk": {"S": "a"}, "other": {"S": "a"}},                    # wrong name
])
def test_key_not_matching_schema(ddb, range_table, operation, bad_key):
    """A Key that is not exactly the table's key schema is rejected with DynamoDB's generic message."""
    with pytest.raises(ClientError) as excinfo:
        getattr(ddb, operation)(TableName=range_table, Key=bad_key)
    assert error_of(excinfo) == ("ValidationException", KEY_MISMATCH)


@pytest.mark.parametrize(("value", "ok"), [
    ("x" * 2048, True), ("x" * 2049, False), ("é" * 1024, True), ("é" * 1024 + "x", False),
])
def test_hash_key_size_limit(ddb, hash_table, value, ok):
    """Partition keys are at most 2048 bytes of UTF-8."""
    item = {"pk": {"S": value}}
    if ok:
        ddb.put_item(TableName=hash_table, Item=item)
        assert ddb.get_item(TableName=hash_table, Key=item)["Item"] == item
        return
    message = f"{INVALID}Size of hashkey has exceeded the maximum size limit of2048 bytes"
    assert put_error(ddb, hash_table, item) == ("ValidationException", message)
    with pytest.raises(ClientError) as excinfo:
        ddb.get_item(TableName=hash_table, Key=item)
    assert error_of(excinfo) == ("ValidationException", message)


@pytest.mark.parametrize(("size", "ok"), [(1024, True), (1025, False)])
def test_range_key_size_limit(ddb, range_table, binary_table, size, ok):
    """Sort keys are at most 1024 bytes (string or binary)."""
    message = f"{INVALID}Aggregated size of all range keys has exceeded the size limit of 1024 bytes"
    for table, item in ((range_table, {"pk": {"S": key()}, "sk": {"S": "s" * size}}),
                        (binary_table, {"pk": {"B": b"k"}, "sk": {"B": b"\x01" * size}})):
        if ok:
            ddb.put_item(TableName=table, Item=item)
        else:
            assert put_error(ddb, table, item) == ("ValidationException", message)


def test_binary_hash_key_size_limit(ddb, binary_table):
    """A binary partition key counts raw bytes, not base64 characters."""
    ddb.put_item(TableName=binary_table, Item={"pk": {"B": b"\x00" * 2048}, "sk": {"B": b"x"}})
    error = put_error(ddb, binary_table, {"pk": {"B": b"\x00" * 2049}, "sk": {"B": b"x"}})
    assert error == ("ValidationException",
                     f"{INVALID}Size of hashkey has exceeded the maximum size limit of2048 bytes")


# --- item size (sized apart from the server: tests/api/item_sizes.py) -------------------------------------

LIMIT = 400 * 1024


def sized_item(pk: str, size: int) -> dict:
    """A mixed item of exactly `size` bytes: maps, lists, numbers, booleans, multibyte text and padding."""
    item = {"pk": {"S": pk}, "nümbers": {"L": [{"N": "12345"}, {"N": "-7"}, {"BOOL": True}, {"NULL": True}]},
            "doc": {"M": {"k": {"S": "☃☃"}, "bin": {"B": b"\x00\x01\x02"}, "n": {"N": "99"}}}, "pad": {"S": ""}}
    item["pad"] = {"S": "p" * (size - item_size(item))}
    assert item_size(item) == size
    return item


def test_item_at_the_size_limit_is_accepted(ddb, hash_table):
    """An item of exactly 400 KB by DynamoDB's size formula is stored and read back."""
    pk = key()
    item = sized_item(pk, LIMIT)
    response = ddb.put_item(TableName=hash_table, Item=item, ReturnConsumedCapacity="TOTAL")
    assert response["ConsumedCapacity"]["CapacityUnits"] == 400.0
    assert ddb.get_item(TableName=hash_table, Key={"pk": {"S": pk}})["Item"] == item


def test_item_one_byte_over_the_limit_is_rejected(ddb, hash_table):
    """One byte more than 400 KB is too big, and nothing is stored."""
    pk = key()
    assert put_error(ddb, hash_table, sized_item(pk, LIMIT + 1)) == ("ValidationException", ITEM_TOO_BIG)
    assert "Item" not in ddb.get_item(TableName=hash_table, Key={"pk": {"S": pk}})


def test_update_beyond_the_size_limit_is_rejected(ddb, hash_table):
    """An update that would grow the item past 400 KB fails with UpdateItem's wording and changes nothing."""
    pk = key()
    item = sized_item(pk, LIMIT - 10)
    ddb.put_item(TableName=hash_table, Item=item)
    ok = ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}}, UpdateExpression="SET x = :v",
                         ExpressionAttributeValues={":v": {"S": "123456789"}}, ReturnValues="UPDATED_NEW")
    assert ok["Attributes"] == {"x": {"S": "123456789"}}  # 1 + 9 bytes: exactly at the limit
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}}, UpdateExpression="SET y = :v",
                        ExpressionAttributeValues={":v": {"S": ""}})
    assert error_of(excinfo) == ("ValidationException", "Item size to update has exceeded the maximum allowed size")
    got = ddb.get_item(TableName=hash_table, Key={"pk": {"S": pk}})["Item"]
    assert "y" not in got and got["x"] == {"S": "123456789"}
    # An update that does not grow the item is measured by what it names: a counter on it still moves.
    ddb.update_item(TableName=hash_table, Key={"pk": {"S": pk}}, UpdateExpression="ADD n :one REMOVE x",
                    ExpressionAttributeValues={":one": {"N": "1"}})
    assert ddb.get_item(TableName=hash_table, Key={"pk": {"S": pk}})["Item"]["n"] == {"N": "1"}


def test_update_item_measures_a_nested_write_by_what_it_writes(ddb):
    """A small write inside a large map is measured by the value it writes, not by the whole map (at a
    one-character key the map alone, plus the charge, is over the limit); the finished item is still held to
    400 KB."""
    table = create_table(ddb, range_type=None)
    item = {"pk": {"S": "a"}, "m": {"M": {"big": {"S": ""}}}}
    item["m"]["M"]["big"] = {"S": "b" * (LIMIT - 20 - item_size(item))}  # 20 bytes below the limit
    ddb.put_item(TableName=table, Item=item)
    ddb.update_item(TableName=table, Key={"pk": {"S": "a"}}, UpdateExpression="SET m.a = :v",
                    ExpressionAttributeValues={":v": {"S": "y"}})
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=table, Key={"pk": {"S": "a"}}, UpdateExpression="SET m.c = :v",
                        ExpressionAttributeValues={":v": {"S": "y" * 30}})
    assert error_of(excinfo) == ("ValidationException", "Item size to update has exceeded the maximum allowed size")


def test_update_item_through_a_list_index_costs_a_byte_more(ddb):
    """A SET through a list index is held to one byte less than the plain SET that writes the same one-element
    list (bisected in eu-west-2, dynoxide issue 210)."""
    table = create_table(ddb, range_type=None)

    def accepted(expression: str, value: dict) -> bool:
        ddb.put_item(TableName=table, Item={"pk": {"S": "k"}, "d": {"L": [{"S": "y"}]}})
        try:
            ddb.update_item(TableName=table, Key={"pk": {"S": "k"}}, UpdateExpression=expression,
                            ExpressionAttributeValues={":v": value})
        except ClientError as error:
            assert (error.response["Error"]["Code"], error.response["Error"]["Message"]) == (
                "ValidationException", "Item size to update has exceeded the maximum allowed size")
            return False
        return True

    def threshold(expression: str, wrap) -> int:
        low, high = LIMIT - 100, LIMIT  # accepted at low, refused at high
        assert accepted(expression, wrap(low)) and not accepted(expression, wrap(high))
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if accepted(expression, wrap(middle)) else (low, middle)
        return low

    plain = threshold("SET d = :v", lambda n: {"L": [{"S": "x" * n}]})
    assert threshold("SET d[0] = :v", lambda n: {"S": "x" * n}) == plain - 1


def test_update_item_ceiling_is_below_a_transactions_at_a_short_key(ddb):
    """At a one-character key, UpdateItem refuses the 409,600-byte item a transaction's Update writes (captured
    in 31 of 33 regions, 2026-10), and takes one 19 bytes smaller (the eu-west-2 bisection): it is held to what
    it names plus 3 bytes and 19 for its one SET."""
    table = create_table(ddb, range_type=None)

    def update(pk: str, length: int) -> None:
        ddb.update_item(TableName=table, Key={"pk": {"S": pk}}, UpdateExpression="SET b = :p",
                        ExpressionAttributeValues={":p": {"S": "x" * length}})

    at_limit = LIMIT - 4  # "pk" + "a" + "b": the item is exactly 409,600 bytes
    with pytest.raises(ClientError) as excinfo:
        update("a", at_limit)
    assert error_of(excinfo) == ("ValidationException", "Item size to update has exceeded the maximum allowed size")
    update("a", at_limit - 19)
    assert len(ddb.get_item(TableName=table, Key={"pk": {"S": "a"}})["Item"]["b"]["S"]) == at_limit - 19
    # A counter added beside it is measured by what it names, not by the whole item.
    ddb.update_item(TableName=table, Key={"pk": {"S": "a"}}, UpdateExpression="ADD ver :one",
                    ExpressionAttributeValues={":one": {"N": "1"}})
    with pytest.raises(ClientError):
        update("c", at_limit - 18)
    ddb.transact_write_items(TransactItems=[{"Update": {
        "TableName": table, "Key": {"pk": {"S": "c"}}, "UpdateExpression": "SET b = :p",
        "ExpressionAttributeValues": {":p": {"S": "x" * at_limit}}}}])
    assert len(ddb.get_item(TableName=table, Key={"pk": {"S": "c"}})["Item"]["b"]["S"]) == at_limit


# --- nesting --------------------------------------------------------------------------------------------


def nested(levels: int, container: str = "M") -> dict:
    """A scalar wrapped in `levels` maps (or lists)."""
    value: dict = {"S": "deep"}
    for _ in range(levels):
        value = {"M": {"a": value}} if container == "M" else {"L": [value]}
    return value


@pytest.mark.parametrize("container", ["M", "L"])
def test_nesting_depth_limit(ddb, hash_table, container):
    """32 levels are allowed (31 containers around a scalar); one more is rejected."""
    pk = key()
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": pk}, "v": nested(31, container)})
    assert ddb.get_item(TableName=hash_table, Key={"pk": {"S": pk}})["Item"]["v"] == nested(31, container)
    assert put_error(ddb, hash_table, {"pk": {"S": key()}, "v": nested(32, container)}) == \
        ("ValidationException", NESTING)


def test_nesting_depth_limit_in_expression_values(ddb, hash_table):
    """The nesting limit applies to ExpressionAttributeValues too. UpdateItem words it as a request validation
    error without the placeholder, whether the value is written or only compared (captured in 31 of 33 regions,
    2026-10); PutItem keeps the placeholder's form."""
    for expression in ({"UpdateExpression": "SET v = :v"},
                       {"UpdateExpression": "SET e = :s", "ConditionExpression": "v = :v"}):
        values = {":v": nested(32)} if "ConditionExpression" not in expression else \
            {":v": nested(32), ":s": {"S": "x"}}
        with pytest.raises(ClientError) as excinfo:
            ddb.update_item(TableName=hash_table, Key={"pk": {"S": key()}}, ExpressionAttributeValues=values,
                            **expression)
        assert error_of(excinfo) == ("ValidationException", f"1 validation error detected: {NESTING}")
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=hash_table, Item={"pk": {"S": key()}}, ConditionExpression="v = :v",
                     ExpressionAttributeValues={":v": nested(32)})
    assert error_of(excinfo) == ("ValidationException", f"ExpressionAttributeValues contains invalid value: "
                                 f"{NESTING} for key :v")


def test_attribute_names_must_be_under_64_kb(ddb, hash_table):
    """65,535 bytes of name is the most DynamoDB accepts, at the top level or inside a map."""
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": "long-name"}, "n" * 65535: {"S": "v"}})
    for item in ({"pk": {"S": "long-name-2"}, "n" * 65536: {"S": "v"}},
                 {"pk": {"S": "long-name-2"}, "m": {"M": {"é" * 32768: {"S": "v"}}}}):
        with pytest.raises(ClientError) as excinfo:
            ddb.put_item(TableName=hash_table, Item=item)
        assert excinfo.value.response["Error"]["Message"] == (
            "1 validation error detected: Attribute name is too large, must be less than 65536 bytes")
    assert "Item" not in ddb.get_item(TableName=hash_table, Key={"pk": {"S": "long-name-2"}})
