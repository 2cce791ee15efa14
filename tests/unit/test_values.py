"""Unit tests for openddb.model.values: AttributeValue validation, sizes, ordering and equality."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openddb.errors import SerializationException, ValidationException
from openddb.model.values import (
    compare_values,
    item_size,
    type_of,
    validate_item,
    validate_value,
    value_size,
    values_equal,
)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def nested(levels: int, leaf: dict[str, Any] | None = None) -> dict[str, Any]:
    """An attribute value wrapped in ``levels`` single-entry maps."""
    value = leaf if leaf is not None else {"S": "x"}
    for _ in range(levels):
        value = {"M": {"k": value}}
    return value


def message_of(raw: Any) -> tuple[type, str | None]:
    with pytest.raises((ValidationException, SerializationException)) as info:
        validate_item(raw)
    return type(info.value), info.value.message


# --- valid items -----------------------------------------------------------------------------------------


def test_valid_item_of_every_type_is_returned_unchanged() -> None:
    """An already-canonical item comes back as the same object: no copies on the hot path."""
    item = {
        "s": {"S": "x"}, "empty": {"S": ""}, "n": {"N": "-1.5"}, "b": {"B": b64(b"\x00\xff")},
        "t": {"BOOL": True}, "f": {"BOOL": False}, "null": {"NULL": True},
        "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2"]}, "bs": {"BS": [b64(b"a"), b64(b"b")]},
        "l": {"L": [{"S": "x"}, {"L": []}]}, "m": {"M": {"k": {"N": "1"}, "e": {"M": {}}}},
    }  # fmt: skip
    assert validate_item(item) is item


def test_numbers_and_binaries_are_canonicalized_without_mutating_input() -> None:
    """N/NS are normalized and B/BS made canonical, in new containers; the caller's dicts are untouched."""
    item = {
        "n": {"N": "1e3"}, "ns": {"NS": ["01", "2.50"]}, "b": {"B": "QR=="}, "bs": {"BS": ["QR=="]},
        "deep": {"L": [{"M": {"x": {"N": "+5"}}}]}, "same": {"S": "x"},
    }  # fmt: skip
    before = copy.deepcopy(item)
    out = validate_item(item)
    assert item == before
    assert out == {
        "n": {"N": "1000"}, "ns": {"NS": ["1", "2.5"]}, "b": {"B": "QQ=="}, "bs": {"BS": ["QQ=="]},
        "deep": {"L": [{"M": {"x": {"N": "5"}}}]}, "same": {"S": "x"},
    }  # fmt: skip
    assert out["same"] is item["same"]


def test_unknown_members_and_nulls_are_ignored() -> None:
    """DynamoDB's deserializer drops unknown members and JSON nulls before counting datatypes."""
    assert validate_value({"S": None, "N": "01"}) == {"N": "1"}
    assert validate_value({"Q": "junk", "S": "x"}) == {"S": "x"}


def test_empty_string_binary_list_and_map_are_allowed() -> None:
    """Since 2020 DynamoDB allows empty S and B outside keys; empty L and M were always fine."""
    assert validate_value({"B": ""}) == {"B": ""}
    assert validate_value({"L": []}) == {"L": []}
    assert validate_value({"M": {}}) == {"M": {}}
    assert validate_value({"SS": [""]}) == {"SS": [""]}  # an empty string is a valid set member


# --- ValidationException messages ------------------------------------------------------------------------


# Spelled out literally (not imported) so the tests pin DynamoDB's wording independently of the code.
INVALID = "One or more parameter values were invalid: "
EMPTY = "Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"
MULTIPLE = "Supplied AttributeValue has more than one datatypes set, " + EMPTY[34:]
OVERFLOW = "Number overflow. Attempting to store a number with magnitude larger than supported range"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({}, EMPTY),
        ({"X": "1"}, EMPTY),
        ({"S": None}, EMPTY),
        (None, EMPTY),
        ({"S": "a", "N": "1"}, MULTIPLE),
        ({"SS": []}, INVALID + "An string set  may not be empty"),
        ({"NS": []}, INVALID + "An number set  may not be empty"),
        ({"BS": []}, INVALID + "Binary sets should not be empty"),
        ({"SS": ["a", "b", "a"]}, INVALID + 'Input collection ["a", "b", "a"] contains duplicates.'),
        ({"NS": ["1", "1.0"]}, INVALID + "Input collection [1, 1.0] contains duplicates."),
        ({"BS": ["QQ==", "QR=="]}, INVALID + 'Input collection ["QQ==","QR=="]of type BS contains duplicates.'),
        ({"NULL": False}, INVALID + "Null attribute value types must have the value of true"),
        ({"N": "1E126"}, OVERFLOW),
        ({"NS": ["1", "x"]}, "The parameter cannot be converted to a numeric value: x"),
    ],
)
def test_validation_messages(value: Any, message: str) -> None:
    """Each invalid value gets DynamoDB's exact ValidationException wording, nested or not."""
    for item in ({"a": value}, {"a": {"L": [value]}}, {"a": {"M": {"k": value}}}):
        assert message_of(item) == (ValidationException, message)


def test_empty_attribute_name() -> None:
    """Attribute names must have at least one character, at the top level and inside maps."""
    assert message_of({"": {"S": "x"}})[0] is ValidationException
    assert message_of({"a": {"M": {"": {"S": "x"}}}})[0] is ValidationException


def test_nesting_limit() -> None:
    """DynamoDB accepts 31 map wraps around a scalar and rejects 32 (nubo-db/dynoxide#110, eu-west-2)."""
    validate_item({"a": nested(31)})
    with pytest.raises(ValidationException, match=r"^Nesting Levels have exceeded supported limits"):
        validate_item({"a": nested(32)})
    list_wrapped: dict[str, Any] = {"S": "x"}
    for _ in range(32):
        list_wrapped = {"L": [list_wrapped]}
    with pytest.raises(ValidationException, match="Nesting Levels"):
        validate_value(list_wrapped)


# --- SerializationException (wrong JSON types) -----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"S": 5}, "NUMBER_VALUE cannot be converted to String"),
        ({"N": 5}, "NUMBER_VALUE cannot be converted to String"),
        ({"S": True}, "TRUE_VALUE cannot be converted to String"),
        ({"SS": ["a", 1]}, "NUMBER_VALUE cannot be converted to String"),
        ({"BOOL": "yes"}, "STRING_VALUE cannot be converted to Boolean"),
        ({"NULL": 1}, "NUMBER_VALUE cannot be converted to Boolean"),
        ({"S": {}}, "Start of structure or map found where not expected"),
        ({"L": {}}, "Start of structure or map found where not expected"),
        ({"M": []}, "Start of list found where not expected"),
        ({"B": [1, 2]}, "Start of list found where not expected"),
        ({"L": "x"}, "Unexpected field type"),
        ({"M": "x"}, "Unexpected field type"),
        ({"SS": "x"}, "Unexpected field type"),
        ("x", "Unexpected field type"),
        ([], "Start of list found where not expected"),
        ({"B": "abc"}, "Base64 encoded length is expected a multiple of 4 bytes but found: 3"),
    ],
)
def test_serialization_messages(value: Any, message: str) -> None:
    """Wrong JSON types are SerializationExceptions with the deserializer's wording."""
    assert message_of({"a": value}) == (SerializationException, message)


def test_invalid_base64_characters() -> None:
    """A length-valid string with non-alphabet characters is still not base64."""
    assert message_of({"a": {"B": "ab$d"}})[0] is SerializationException


def test_serialization_error_wins_over_earlier_validation_error() -> None:
    """DynamoDB deserializes the whole request before validating, so a later shape error is reported."""
    item = {"a": {"SS": ["x", "x"]}, "b": {"L": [{"M": {"c": {"S": 5}}}]}}
    assert message_of(item) == (SerializationException, "NUMBER_VALUE cannot be converted to String")
    with pytest.raises(SerializationException):
        validate_value({"L": [{"NULL": False}, {"N": 1}]})


@pytest.mark.parametrize("raw", [[], "x", 1, None])
def test_item_must_be_a_map(raw: Any) -> None:
    """A non-object Item is a deserialization error."""
    with pytest.raises(SerializationException):
        validate_item(raw)


# --- size ------------------------------------------------------------------------------------------------


def test_documented_item_size_example() -> None:
    """The Developer Guide's example: {"shirt-color":"R","shirt-size":"M"} is 23 bytes."""
    assert item_size({"shirt-color": {"S": "R"}, "shirt-size": {"S": "M"}}) == 23


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ({"S": "héllo"}, 6),  # UTF-8 bytes, not characters
        ({"S": "😀"}, 4),
        ({"B": b64(b"12345")}, 5),  # raw bytes, not base64 characters
        ({"B": ""}, 0),
        ({"N": "27"}, 2),
        ({"N": "-27"}, 3),
        ({"BOOL": False}, 1),
        ({"NULL": True}, 1),
        ({"L": []}, 3),
        ({"M": {}}, 3),
        ({"L": [{"S": "aa"}, {"S": "b"}]}, 3 + (2 + 1) + (1 + 1)),  # 3 + per element (size + 1)
        ({"M": {"ab": {"S": "c"}}}, 3 + 2 + 1 + 1),  # 3 + per entry (name + value + 1)
        ({"L": [{"L": [{"NULL": True}]}]}, 3 + (3 + 1 + 1) + 1),
        ({"SS": ["ab", "c"]}, 3),  # sets: sum of members, no per-member overhead
        ({"NS": ["27", "-27"]}, 5),
        ({"BS": [b64(b"ab"), b64(b"c")]}, 3),
    ],
)
def test_value_sizes(value: dict[str, Any], size: int) -> None:
    """Per-type sizes from "Item sizes and formats" (list/map element overhead per ExtendDB/extenddb#217)."""
    assert value_size(value) == size


_SIZED_VALUES = st.one_of(
    st.builds(lambda text: {"S": text}, st.text()),
    st.builds(lambda n: {"N": str(n)}, st.integers(-10**30, 10**30)),
    st.builds(lambda data: {"B": b64(data)}, st.binary()),
    st.just({"BOOL": True}),
    st.builds(lambda texts: {"L": [{"S": t} for t in texts]}, st.lists(st.text(), max_size=4)),
    st.builds(lambda texts: {"M": {t: {"S": t} for t in texts}}, st.lists(st.text(min_size=1), max_size=4)),
)


@given(st.dictionaries(st.text(min_size=1), _SIZED_VALUES, max_size=8))
def test_item_size_is_names_plus_value_sizes(item: dict[str, Any]) -> None:
    """The item size (with its inline count of strings) is the UTF-8 length of every name plus its value's size."""
    expected = sum(len(name.encode("utf-8", "surrogatepass")) + value_size(value) for name, value in item.items())
    assert item_size(item) == expected


# --- ordering and equality -------------------------------------------------------------------------------


@given(st.text(), st.text())
def test_string_order_is_utf8_byte_order(a: str, b: str) -> None:
    """Python's code-point order equals UTF-8 byte order, which is DynamoDB's order for S."""
    expected = (a.encode("utf-8", "surrogatepass") > b.encode("utf-8", "surrogatepass")) - (
        a.encode("utf-8", "surrogatepass") < b.encode("utf-8", "surrogatepass")
    )
    assert compare_values({"S": a}, {"S": b}) == expected


@given(st.binary(), st.binary())
def test_binary_order_is_unsigned_bytes(a: bytes, b: bytes) -> None:
    """B compares by unsigned bytes, not by the base64 text (whose alphabet is not in byte order)."""
    assert compare_values({"B": b64(a)}, {"B": b64(b)}) == (a > b) - (a < b)


def test_number_order_is_numeric() -> None:
    """N compares numerically, not as text."""
    assert compare_values({"N": "9"}, {"N": "10"}) == -1
    assert compare_values({"N": "-0.5"}, {"N": "-0.25"}) == -1
    assert compare_values({"N": "1.5"}, {"N": "1.5"}) == 0


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"S": "1"}, {"N": "1"}),
        ({"BOOL": True}, {"BOOL": False}),
        ({"L": []}, {"L": []}),
        ({"SS": ["a"]}, {"SS": ["a"]}),
    ],
)
def test_unorderable_pairs(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Different types, and types without an order, compare as None."""
    assert compare_values(a, b) is None


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ({"SS": ["a", "b"]}, {"SS": ["b", "a"]}, True),
        ({"NS": ["1", "2"]}, {"NS": ["2", "1"]}, True),
        ({"SS": ["a"]}, {"SS": ["a", "b"]}, False),
        ({"L": [{"S": "a"}, {"S": "b"}]}, {"L": [{"S": "b"}, {"S": "a"}]}, False),  # lists are ordered
        ({"M": {"x": {"N": "1"}, "y": {"NULL": True}}}, {"M": {"y": {"NULL": True}, "x": {"N": "1"}}}, True),
        ({"M": {"x": {"N": "1"}}}, {"M": {"y": {"N": "1"}}}, False),
        ({"M": {"x": {"L": [{"SS": ["a", "b"]}]}}}, {"M": {"x": {"L": [{"SS": ["b", "a"]}]}}}, True),
        ({"S": "1"}, {"N": "1"}, False),
        ({"BOOL": True}, {"BOOL": True}, True),
        ({"BOOL": True}, {"BOOL": False}, False),
    ],
)
def test_values_equal(a: dict[str, Any], b: dict[str, Any], equal: bool) -> None:
    """Deep equality with set semantics for SS/NS/BS."""
    assert values_equal(a, b) is equal
    assert values_equal(b, a) is equal


def test_validated_numbers_compare_equal_as_values() -> None:
    """After validation, equal numbers and binaries are equal values whatever their spelling."""
    a = validate_value({"NS": ["1e2", "0.50"]})
    b = validate_value({"NS": ["0.5", "100.0"]})
    assert values_equal(a, b)
    assert values_equal(validate_value({"B": "QR=="}), validate_value({"B": "QQ=="}))


def test_type_of() -> None:
    """type_of returns the single type key."""
    assert type_of({"NS": ["1"]}) == "NS"
