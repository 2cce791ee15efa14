"""Condition evaluation against items: operators, functions, missing attributes, compile-time checks."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openddb.errors import ValidationException
from openddb.expressions import ExpressionAttributes, compile_condition
from openddb.model.numbers import normalize_number

ITEM: dict[str, Any] = {
    "n": {"N": "5"},
    "s": {"S": "hello"},
    "b": {"B": "AQID"},
    "ss": {"SS": ["red", "blue"]},
    "ns": {"NS": ["1", "2"]},
    "l": {"L": [{"S": "x"}, {"N": "7"}, {"M": {"k": {"S": "v"}}}]},
    "m": {"M": {"child": {"M": {"deep": {"N": "1"}}}, "name": {"S": "z"}}},
    "flag": {"BOOL": True},
    "nil": {"NULL": True},
}


def check(text: str, values: dict[str, Any] | None = None, names: dict[str, str] | None = None,
          item: dict[str, Any] | None = ITEM, kind: str = "ConditionExpression") -> bool:
    return compile_condition(text, ExpressionAttributes(names, values), kind).evaluate(item)


def error(text: str, values: dict[str, Any] | None = None, kind: str = "ConditionExpression") -> str:
    with pytest.raises(ValidationException) as info:
        compile_condition(text, ExpressionAttributes(None, values), kind)
    return str(info.value.message)


N1, N5, N9 = {"N": "1"}, {"N": "5"}, {"N": "9"}


@pytest.mark.parametrize(
    ("text", "values", "expected"),
    [
        ("n = :v", {":v": N5}, True),
        ("n <> :v", {":v": N5}, False),
        ("n < :v", {":v": N9}, True),
        ("n <= :v", {":v": N5}, True),
        ("n > :v", {":v": N1}, True),
        ("n >= :v", {":v": N9}, False),
        ("s < :v", {":v": {"S": "world"}}, True),
        ("n = :v", {":v": {"S": "5"}}, False),  # different types are unequal, not an error
        ("n < :v", {":v": {"S": "9"}}, False),
        ("n BETWEEN :a AND :b", {":a": N1, ":b": N9}, True),
        ("n BETWEEN :a AND :b", {":a": N1, ":b": {"N": "4"}}, False),
        ("n IN (:a, :b)", {":a": N1, ":b": N5}, True),
        ("n IN (:a)", {":a": N1}, False),
        ("m.child.deep = :v", {":v": N1}, True),
        ("l[1] = :v", {":v": {"N": "7"}}, True),
        ("l[2].k = :v", {":v": {"S": "v"}}, True),
        ("l[9] = :v", {":v": N1}, False),
        ("absent = :v", {":v": N1}, False),
        ("absent <> :v", {":v": N1}, True),
        ("ss = :v", {":v": {"SS": ["blue", "red"]}}, True),  # set equality ignores order
    ],
)
def test_comparisons(text: str, values: dict[str, Any], expected: bool) -> None:
    """Comparators, BETWEEN and IN follow the Developer Guide, including cross-type and missing cases."""
    assert check(text, values) is expected


@pytest.mark.parametrize(
    ("text", "values", "expected"),
    [
        ("attribute_exists(n)", None, True),
        ("attribute_exists(m.child.deep)", None, True),
        ("attribute_exists(m.nope)", None, False),
        ("attribute_not_exists(nope)", None, True),
        ("attribute_type(l, :t)", {":t": {"S": "L"}}, True),
        ("attribute_type(nil, :t)", {":t": {"S": "NULL"}}, True),
        ("attribute_type(n, :t)", {":t": {"S": "S"}}, False),
        ("begins_with(s, :p)", {":p": {"S": "he"}}, True),
        ("begins_with(s, :p)", {":p": {"S": "lo"}}, False),
        ("begins_with(b, :p)", {":p": {"B": "AQ=="}}, True),
        ("contains(s, :p)", {":p": {"S": "ell"}}, True),
        ("contains(ss, :p)", {":p": {"S": "red"}}, True),
        ("contains(ss, :p)", {":p": {"S": "re"}}, False),
        ("contains(ns, :p)", {":p": {"N": "2"}}, True),
        ("contains(l, :p)", {":p": {"N": "7"}}, True),
        ("contains(n, :p)", {":p": {"N": "5"}}, False),
        ("size(s) = :v", {":v": N5}, True),
        ("size(b) = :v", {":v": {"N": "3"}}, True),
        ("size(l) = :v", {":v": {"N": "3"}}, True),
        ("size(m) = :v", {":v": {"N": "2"}}, True),
        ("size(ss) > :v", {":v": N1}, True),
        ("size(n) = :v", {":v": N1}, False),  # size of a number is not defined
        ("NOT attribute_exists(n) OR n = :v", {":v": N5}, True),
    ],
)
def test_functions(text: str, values: dict[str, Any] | None, expected: bool) -> None:
    """Each documented function, on each type it supports and one it does not."""
    assert check(text, values) is expected


def test_no_item() -> None:
    """A missing item (PutItem on a new key) satisfies attribute_not_exists and nothing else."""
    assert check("attribute_not_exists(pk)", item=None) is True
    assert check("attribute_exists(pk)", item=None) is False
    assert check("pk = :v", {":v": N1}, item=None) is False


def test_an_operand_named_twice_through_a_placeholder_is_not_distinct() -> None:
    """contains(s, #a) with #a -> s compares s with itself, as contains(s, s) does: DynamoDB's refusal names the
    attribute, so it compares resolved names."""
    with pytest.raises(ValidationException) as info:
        compile_condition("contains(s, #a)", ExpressionAttributes({"#a": "s"}, None), "ConditionExpression")
    assert info.value.message == ("Invalid ConditionExpression: The first operand must be distinct from the "
                                  "remaining operands for this operator or function; operator: contains, first "
                                  "operand: [s]")
    assert check("contains(s, #a)", names={"#a": "n"}) is False


def test_names_are_substituted() -> None:
    """#placeholders resolve to attribute names, including reserved words."""
    assert check("#s.#n = :v", {":v": {"S": "z"}}, {"#s": "m", "#n": "name"}) is True


@pytest.mark.parametrize(
    ("text", "values", "message"),
    [
        ("n BETWEEN :a AND :b", {":a": N5, ":b": N1},
         "Invalid ConditionExpression: The BETWEEN operator requires upper bound to be greater than or equal to "
         "lower bound; lower bound operand: AttributeValue: {N:5}, upper bound operand: AttributeValue: {N:1}"),
        ("n BETWEEN :a AND :b", {":a": N1, ":b": {"S": "x"}},
         "Invalid ConditionExpression: The BETWEEN operator requires same data type for lower and upper bounds; "
         "lower bound operand: AttributeValue: {N:1}, upper bound operand: AttributeValue: {S:x}"),
        ("attribute_type(n, :t)", {":t": {"S": "STRING"}},
         "Invalid ConditionExpression: Invalid attribute type name found; type: STRING, "
         "valid types: { B,NULL,SS,BOOL,L,BS,N,NS,S,M }"),
        ("attribute_type(n, :t)", {":t": N1},
         "Invalid ConditionExpression: Incorrect operand type for operator or function; "
         "operator or function: attribute_type, operand type: N"),
        ("begins_with(s, :t)", {":t": N1},
         "Invalid ConditionExpression: Incorrect operand type for operator or function; "
         "operator or function: begins_with, operand type: N"),
        ("n < :t", {":t": {"BOOL": True}},
         "Invalid ConditionExpression: Incorrect operand type for operator or function; "
         "operator or function: <, operand type: BOOL"),
        ("contains(s, s)", None,
         "Invalid ConditionExpression: The first operand must be distinct from the remaining operands for this "
         "operator or function; operator: contains, first operand: [s]"),
        ("n = :undefined", None,
         "Invalid ConditionExpression: An expression attribute value used in expression is not defined; "
         "attribute value: :undefined"),
        ("#undefined = :v", {":v": N1},
         "Invalid ConditionExpression: An expression attribute name used in the document path is not defined; "
         "attribute name: #undefined"),
        ("", None, "Invalid ConditionExpression: The expression can not be empty;"),
    ],
)
def test_compile_time_errors(text: str, values: dict[str, Any] | None, message: str) -> None:
    """Errors that depend on placeholder values are raised before any item is read."""
    assert error(text, values) == message


def test_kind_names_the_expression_in_messages() -> None:
    """FilterExpression errors say 'Invalid FilterExpression'."""
    assert error("a = :zz", None, "FilterExpression").startswith("Invalid FilterExpression: ")


finite = st.decimals(allow_nan=False, allow_infinity=False, min_value=Decimal("-1e20"),
                     max_value=Decimal("1e20"), places=5)


@given(finite, finite, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
def test_number_comparison_matches_decimal(a: Decimal, b: Decimal, op: str) -> None:
    """Numeric comparisons agree with Python's Decimal ordering."""
    item = {"x": {"N": normalize_number(str(a))}}
    got = check(f"x {op} :v", {":v": {"N": normalize_number(str(b))}}, item=item)
    expected = {"=": a == b, "<>": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    assert got is expected
