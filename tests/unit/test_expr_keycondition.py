"""KeyConditionExpression: allowed shapes and DynamoDB's rejection messages."""

from __future__ import annotations

from typing import Any

import pytest

from openddb.errors import ValidationException
from openddb.expressions import ExpressionAttributes, KeyCondition, compile_key_condition

VALUES: dict[str, Any] = {":p": {"S": "h"}, ":a": {"S": "a"}, ":b": {"S": "b"}}


def key(text: str, range_key: str | None = "sk", names: dict[str, str] | None = None) -> KeyCondition:
    return compile_key_condition(text, ExpressionAttributes(names, VALUES), "pk", range_key)


def message(text: str, range_key: str | None = "sk") -> str:
    with pytest.raises(ValidationException) as info:
        key(text, range_key)
    return str(info.value.message)


@pytest.mark.parametrize(
    ("text", "op", "values"),
    [
        ("pk = :p", None, ()),
        ("pk = :p AND sk = :a", "=", ({"S": "a"},)),
        ("sk < :a AND pk = :p", "<", ({"S": "a"},)),
        ("(pk = :p) AND (sk >= :a)", ">=", ({"S": "a"},)),
        ("pk = :p AND :a > sk", "<", ({"S": "a"},)),  # value on the left flips the operator
        ("pk = :p AND sk BETWEEN :a AND :b", "BETWEEN", ({"S": "a"}, {"S": "b"})),
        ("pk = :p and begins_with(sk, :a)", "begins_with", ({"S": "a"},)),
    ],
)
def test_accepted_shapes(text: str, op: str | None, values: tuple[dict[str, Any], ...]) -> None:
    """Hash equality plus at most one sort-key condition, in any order, reduce to plain data."""
    assert key(text) == KeyCondition({"S": "h"}, op, values)


def test_names_resolve() -> None:
    """#placeholders for key names work (and are the way to use reserved key names)."""
    assert key("#h = :p", names={"#h": "pk"}).hash_value == {"S": "h"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pk = :p OR sk = :a", "Invalid operator used in KeyConditionExpression: OR"),
        ("NOT pk = :p", "Invalid operator used in KeyConditionExpression: NOT"),
        ("pk IN (:p)", "Invalid operator used in KeyConditionExpression: IN"),
        ("pk = :p AND contains(sk, :a)",
         "Invalid operator used in KeyConditionExpression: contains"),
        ("pk = :p AND sk = :a AND sk = :b",
         "KeyConditionExpressions must only contain one condition per key"),  # no prefix (captured)
        ("pk.x = :p", "Invalid KeyConditionExpression: KeyConditionExpressions cannot have conditions on "
                      "nested attributes"),
        ("sk = :a", "Query condition missed key schema element: pk"),
        ("attr1 = :a", "Query condition missed key schema element: pk"),
        ("attr1 = :a AND sk = :a", "Query condition missed key schema element: pk"),
        ("pk < :p", "Query key condition not supported"),
        # A second attribute name where a value belongs (quoted from DynamoDB: aws-sdk-js-v3 #2079).
        ("pk = :p and begins_with(sk, G_M)",
         "Invalid condition in KeyConditionExpression: multiple attribute names used in one condition"),
        ("pk = :p AND sk = attr1",
         "Invalid condition in KeyConditionExpression: multiple attribute names used in one condition"),
        ("pk = :p AND sk BETWEEN attr1 AND :a",
         "Invalid condition in KeyConditionExpression: multiple attribute names used in one condition"),
        ("pk = :p AND attr1 = :a", "Query condition missed key schema element: sk"),
        ("pk = :p AND sk BETWEEN :b AND :a",
         "Invalid KeyConditionExpression: The BETWEEN operator requires upper bound to be greater than or "
         "equal to lower bound; lower bound operand: AttributeValue: {S:b}, upper bound operand: "
         "AttributeValue: {S:a}"),
    ],
)
def test_rejections(text: str, expected: str) -> None:
    """Each disallowed shape gets DynamoDB's message."""
    assert message(text) == expected


def test_hash_only_table_rejects_other_attributes() -> None:
    """Without a sort key, a second condition on a non-key attribute is not a key condition DynamoDB supports
    (quoted from a GSI keyed on its partition key alone, moto issue 8655, 2025); no key is named as missed."""
    assert message("pk = :p AND x = :a", range_key=None) == "Query key condition not supported"
