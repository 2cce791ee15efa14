"""Attribute values in wire form: validation, size, ordering and equality.

Validation returns values in the server's canonical wire form (docs/ARCHITECTURE.md, "Values inside the
server"): every N and NS member normalized, every B and BS member canonical base64, stray members of an
AttributeValue (unknown type keys, JSON nulls) dropped. Containers are copied only where something changed.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable
from typing import Any

from openddb.errors import SerializationException, ValidationException
from openddb.model import AttributeValue, Item
from openddb.model.numbers import compare_numbers, normalize_number, number_size

MAX_ITEM_SIZE = 400 * 1024
MAX_NESTING_DEPTH = 32
MAX_COMPARED_DEPTH = 100  # see `validate_value`

_INVALID = "One or more parameter values were invalid: "
MSG_EMPTY = "Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"
MSG_MULTIPLE = (
    "Supplied AttributeValue has more than one datatypes set, must contain exactly one of the supported datatypes"
)
MSG_NULL_FALSE = _INVALID + "Null attribute value types must have the value of true"
MSG_NESTING = (
    "Nesting Levels have exceeded supported limits: Attributes in the item have nested levels beyond supported limit"
)
# PutItem, BatchWriteItem and a transaction's Put (a real PutItem response is quoted in
# justinram11/langgraph-checkpoint-dynamodb issue 2); UpdateItem and a transaction's Update word it apart (a real
# UpdateItem response is quoted in linuxfoundation/easycla issue 205, 2019).
MSG_ITEM_SIZE = "Item size has exceeded the maximum allowed size"
MSG_UPDATE_SIZE = "Item size to update has exceeded the maximum allowed size"
# Best guess: no capture of DynamoDB's wording for an empty attribute name was found.
MSG_EMPTY_NAME = _INVALID + "An attribute name cannot be empty"
MAX_NAME_BYTES = 65535  # "less than 64 KB"
MSG_LONG_NAME = "1 validation error detected: Attribute name is too large, must be less than 65536 bytes"
_LONG_NAME = (MAX_NAME_BYTES + 1) // 4  # names shorter than this many characters cannot pass the limit
# DynamoDB's own wording, grammar and double space included ("An string set  may not be empty").
_EMPTY_SET = {"SS": "string", "NS": "number", "BS": "binary"}

# JSON shape each member must have; anything else is a SerializationException raised while the request is
# deserialized, before any validation.
_SHAPES: dict[str, type[Any]] = {
    "S": str, "N": str, "B": str, "BOOL": bool, "NULL": bool,
    "SS": list, "NS": list, "BS": list, "L": list, "M": dict,
}  # fmt: skip
_SET_TYPES = frozenset({"SS", "NS", "BS"})


# --- JSON shape errors ----------------------------------------------------------------------------------


def _token(value: Any) -> str:
    if value is True:
        return "TRUE_VALUE"
    if value is False:
        return "FALSE_VALUE"
    if value is None:
        return "NULL_VALUE"
    return "NUMBER_VALUE" if isinstance(value, int | float) else "STRING_VALUE"


def _wrong_shape(value: Any, expected: type) -> SerializationException:
    """The error DynamoDB's deserializer reports for ``value`` where a JSON ``expected`` was required."""
    if isinstance(value, dict):
        return SerializationException("Start of structure or map found where not expected")
    if isinstance(value, list):
        return SerializationException("Start of list found where not expected")
    if expected is dict or expected is list:
        return SerializationException("Unexpected field type")
    # Confirmed for NUMBER_VALUE -> String; the other token/target pairs follow the same pattern.
    target = "String" if expected is str else "Boolean"
    return SerializationException(f"{_token(value)} cannot be converted to {target}")


def raise_first_shape_error(value: Any) -> None:
    """Raise the SerializationException for the first mis-shaped member or invalid base64 anywhere in the
    AttributeValue ``value``, if any.

    Only called once validation has failed: DynamoDB deserializes the whole request before validating it,
    so a shape error anywhere wins over a validation error found earlier in the walk.
    """
    if type(value) is not dict:
        if value is not None:
            raise _wrong_shape(value, dict)
        return
    for kind, inner in value.items():
        shape = _SHAPES.get(kind)
        if shape is None or inner is None:
            continue
        if type(inner) is not shape:
            raise _wrong_shape(inner, shape)
        if kind in _SET_TYPES:
            for member in inner:
                if type(member) is not str:
                    raise _wrong_shape(member, str)
                if kind == "BS":
                    decode_binary(member)
        elif kind == "B":
            decode_binary(inner)
        elif kind == "L":
            for element in inner:
                raise_first_shape_error(element)
        elif kind == "M":
            for element in inner.values():
                raise_first_shape_error(element)


# --- binaries -------------------------------------------------------------------------------------------


def decode_binary(text: str) -> bytes:
    """Decode base64 as DynamoDB does (padding required); SerializationException if it is not valid."""
    if len(text) % 4:
        raise SerializationException(f"Base64 encoded length is expected a multiple of 4 bytes but found: {len(text)}")
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        # Best guess at the wording; only the length message above is confirmed.
        raise SerializationException("Invalid Base64 character found") from None


def encode_binary(data: bytes) -> str:
    """Canonical base64 text for ``data``."""
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def canonical_binary(text: str) -> str:
    """Validate base64 text and return its canonical form (``text`` itself when already canonical)."""
    canonical = encode_binary(decode_binary(text))
    return text if canonical == text else canonical


def binary_length(canonical: str) -> int:
    """Number of bytes encoded by canonical base64 text, without decoding it."""
    if not canonical:
        return 0
    return len(canonical) // 4 * 3 - (canonical[-1] == "=") - (canonical[-2] == "=")


# --- validation -----------------------------------------------------------------------------------------


def _duplicates(kind: str, members: list[str]) -> ValidationException:
    """DynamoDB lists the whole input collection: a string set's members quoted ('["a", "a"]'), a binary set's
    base64 text quoted and closer, with its type ('["",""]of type BS'), both as recorded in every region of
    paritysuite's 2026-09-20 run; a number set's as it has long been captured, Java-style ("[1, 1]")."""
    if kind == "SS":
        shown = "[" + ", ".join(f'"{m}"' for m in members) + "]"
    elif kind == "BS":
        shown = "[" + ",".join(f'"{m}"' for m in members) + "]of type BS"
    else:
        shown = "[" + ", ".join(members) + "]"
    return ValidationException(f"{_INVALID}Input collection {shown} contains duplicates.")


def _check_s(inner: Any, depth: int) -> Any:
    if type(inner) is not str:
        raise _wrong_shape(inner, str)
    return inner


def _check_n(inner: Any, depth: int) -> Any:
    if type(inner) is not str:
        raise _wrong_shape(inner, str)
    normalized = normalize_number(inner)
    return inner if normalized == inner else normalized


def _check_b(inner: Any, depth: int) -> Any:
    if type(inner) is not str:
        raise _wrong_shape(inner, str)
    return canonical_binary(inner)


def _check_bool(inner: Any, depth: int) -> Any:
    if type(inner) is not bool:
        raise _wrong_shape(inner, bool)
    return inner


def _check_null(inner: Any, depth: int) -> Any:
    if type(inner) is not bool:
        raise _wrong_shape(inner, bool)
    if not inner:
        raise ValidationException(MSG_NULL_FALSE)
    return inner


def _set_checker(kind: str, canonical: Callable[[str], str] | None) -> Callable[[Any, int], Any]:
    # An empty binary set is worded apart (recorded in every region of paritysuite's 2026-09-20 run).
    empty = f"{_INVALID}Binary sets should not be empty" if kind == "BS" else \
        f"{_INVALID}An {_EMPTY_SET[kind]} set  may not be empty"

    def check(inner: Any, depth: int) -> Any:
        if type(inner) is not list:
            raise _wrong_shape(inner, list)
        for member in inner:
            if type(member) is not str:
                raise _wrong_shape(member, str)
        if not inner:
            raise ValidationException(empty)
        members = inner if canonical is None else [canonical(m) for m in inner]
        if len(set(members)) != len(members):
            raise _duplicates(kind, inner)
        return inner if members == inner else members

    return check


def _check_l(inner: Any, depth: int) -> Any:
    if type(inner) is not list:
        raise _wrong_shape(inner, list)
    result = inner
    for index, element in enumerate(inner):
        checked = _value(element, depth + 1)
        if checked is not element:
            if result is inner:
                result = list(inner)
            result[index] = checked
    return result


def _check_m(inner: Any, depth: int) -> Any:
    if type(inner) is not dict:
        raise _wrong_shape(inner, dict)
    return _attributes(inner, depth + 1)


_CHECKS: dict[str, Callable[[Any, int], Any]] = {
    "S": _check_s,
    "N": _check_n,
    "B": _check_b,
    "BOOL": _check_bool,
    "NULL": _check_null,
    "SS": _set_checker("SS", None),
    "NS": _set_checker("NS", normalize_number),
    "BS": _set_checker("BS", canonical_binary),
    "L": _check_l,
    "M": _check_m,
}


def _value(value: Any, depth: int) -> AttributeValue:
    """Validate one AttributeValue at nesting ``depth`` (a top-level attribute is depth 1)."""
    if depth > MAX_NESTING_DEPTH:
        raise ValidationException(MSG_NESTING)
    if type(value) is not dict:
        if value is None:
            raise ValidationException(MSG_EMPTY)
        raise _wrong_shape(value, dict)
    if len(value) == 1:
        for kind, inner in value.items():
            check = _CHECKS.get(kind)
            if check is None or inner is None:
                raise ValidationException(MSG_EMPTY)
            checked = check(inner, depth)
            return value if checked is inner else {kind: checked}
    # Unknown members and JSON nulls are ignored by DynamoDB's deserializer, so they do not count as types.
    present = [(kind, inner) for kind, inner in value.items() if inner is not None and kind in _CHECKS]
    if len(present) != 1:
        raise ValidationException(MSG_MULTIPLE if present else MSG_EMPTY)
    kind, inner = present[0]
    return {kind: _CHECKS[kind](inner, depth)}


def _attributes(attributes: dict[str, Any], depth: int) -> dict[str, AttributeValue]:
    """Validate a name -> AttributeValue map whose values sit at ``depth``; copy only if something changed."""
    result = attributes
    for name, value in attributes.items():
        if not name:
            raise ValidationException(MSG_EMPTY_NAME)
        if len(name) >= _LONG_NAME and len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise ValidationException(MSG_LONG_NAME)
        checked = _value(value, depth)
        if checked is not value:
            if result is attributes:
                result = dict(attributes)
            result[name] = checked
    return result


def validate_item(raw: Any, *, path: str = "Item") -> Item:
    """Validate a wire item as DynamoDB does for PutItem's ``Item``; return it in canonical form.

    ``raw`` is never mutated; the result shares every unchanged value with it. ``path`` names the request
    member for callers that label errors; DynamoDB's messages for item values do not include it.
    Raises SerializationException for mis-shaped JSON and ValidationException for invalid values.
    """
    if type(raw) is not dict:
        raise _wrong_shape(raw, dict)
    try:
        return _attributes(raw, 1)
    except ValidationException:
        for value in raw.values():
            raise_first_shape_error(value)
        raise


def validate_value(raw: Any, *, compared_only: bool = False) -> AttributeValue:
    """Validate one AttributeValue (an expression attribute value or key value); see ``validate_item``.

    A value that is only compared, never stored (`compared_only`), may be nested past the 32 levels an item may
    hold, up to `MAX_COMPARED_DEPTH`: DynamoDB evaluates such a condition in a transaction instead of refusing
    it. The bound keeps the value within what the evaluator and the JSON writer handle."""
    try:
        return _value(raw, 1 - (MAX_COMPARED_DEPTH - MAX_NESTING_DEPTH) if compared_only else 1)
    except ValidationException:
        raise_first_shape_error(raw)
        raise


# --- size -----------------------------------------------------------------------------------------------


def _utf8_length(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def value_size(value: AttributeValue) -> int:
    """Bytes DynamoDB counts for a validated value (Developer Guide, "Item sizes and formats").

    Strings count UTF-8 bytes, binaries raw bytes, BOOL and NULL 1 byte, sets the sum of their members;
    a List or Map costs 3 bytes plus 1 byte per element, plus its elements (and, for a Map, their names).
    """
    for kind, inner in value.items():
        if kind == "S":
            return _utf8_length(inner)
        if kind == "N":
            return number_size(inner)
        if kind == "B":
            return binary_length(inner)
        if kind == "BOOL" or kind == "NULL":
            return 1
        if kind == "M":
            return 3 + sum(_utf8_length(name) + value_size(element) + 1 for name, element in inner.items())
        if kind == "L":
            return 3 + sum(value_size(element) + 1 for element in inner)
        if kind == "SS":
            return sum(map(_utf8_length, inner))
        if kind == "NS":
            return sum(map(number_size, inner))
        if kind == "BS":
            return sum(map(binary_length, inner))
    raise ValueError(f"not a validated attribute value: {value!r}")


def item_size(item: Item) -> int:
    """Bytes DynamoDB counts for a validated item: each attribute name's UTF-8 bytes plus its value's size."""
    size = 0
    for name, value in item.items():  # every write pays this: strings, the common case, are counted inline
        size += len(name) if name.isascii() else len(name.encode("utf-8", "surrogatepass"))
        text = value.get("S")
        if text is None:
            size += value_size(value)
        else:
            size += len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return size


# --- comparison -----------------------------------------------------------------------------------------


def type_of(value: AttributeValue) -> str:
    """The type key of a validated value ("S", "N", ..., "BS")."""
    return next(iter(value))


def compare_values(a: AttributeValue, b: AttributeValue) -> int | None:
    """-1, 0 or 1 for two validated S, N or B values of the same type; None if not comparable.

    Strings order by code point, which is UTF-8 byte order; numbers numerically; binaries as unsigned bytes.
    """
    kind = type_of(a)
    if kind not in b:
        return None
    x, y = a[kind], b[kind]
    if kind == "S":
        return int((x > y) - (x < y))
    if kind == "N":
        return compare_numbers(x, y)
    if kind == "B":
        if x == y:
            return 0
        return -1 if decode_binary(x) < decode_binary(y) else 1
    return None


def values_equal(a: AttributeValue, b: AttributeValue) -> bool:
    """DynamoDB equality of two validated values: same type and value; sets ignore member order."""
    kind = type_of(a)
    if kind not in b:
        return False
    x, y = a[kind], b[kind]
    if kind == "M":
        return len(x) == len(y) and all(name in y and values_equal(v, y[name]) for name, v in x.items())
    if kind == "L":
        return len(x) == len(y) and all(map(values_equal, x, y))
    if kind in _SET_TYPES:
        return len(x) == len(y) and set(x) == set(y)
    # Validated N and B are canonical strings, so equal values are equal strings.
    return bool(x == y)
