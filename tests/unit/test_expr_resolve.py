"""Placeholder tables: lookups, use tracking and the unused-placeholder errors."""

from __future__ import annotations

import pytest

from openddb.errors import ValidationException
from openddb.expressions import (
    RESERVED_WORDS,
    ExpressionAttributes,
    compile_condition,
    compile_projection,
    is_reserved,
)


def test_reserved_word_list_is_complete() -> None:
    """The Developer Guide lists 573 reserved words; lookups ignore case."""
    assert len(RESERVED_WORDS) == 573
    assert is_reserved("status") and is_reserved("Name") and not is_reserved("pk")


def test_unused_names_reported_in_request_order() -> None:
    """Names defined but never used are listed as DynamoDB prints them."""
    attrs = ExpressionAttributes({"#a": "x", "#b": "y", "#c": "z"}, None)
    compile_projection("#b", attrs)
    with pytest.raises(ValidationException) as info:
        attrs.check_all_used()
    assert info.value.message == "Value provided in ExpressionAttributeNames unused in expressions: keys: {#a, #c}"


def test_unused_values_reported() -> None:
    """Values defined but never used are rejected after every expression is compiled."""
    attrs = ExpressionAttributes(None, {":v": {"N": "1"}, ":w": {"N": "2"}})
    compile_condition("a = :w", attrs)
    with pytest.raises(ValidationException) as info:
        attrs.check_all_used()
    assert info.value.message == "Value provided in ExpressionAttributeValues unused in expressions: keys: {:v}"


def test_use_is_shared_across_expressions() -> None:
    """A placeholder used by any of the request's expressions counts as used."""
    attrs = ExpressionAttributes({"#a": "x", "#b": "y"}, {":v": {"S": "1"}})
    compile_projection("#a", attrs)
    compile_condition("#b = :v", attrs)
    attrs.check_all_used()


def test_none_tables_are_empty() -> None:
    """Requests without placeholder tables pass the unused check."""
    ExpressionAttributes(None, None).check_all_used()
