"""KeyConditionExpression: ``hash = :v`` and at most one sort-key condition, reduced to plain data.

Whether each value's type matches the key schema is the API layer's check, not this module's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import ValidationException
from .ast import And, Between, Call, Compare, Cond, ExpressionError, In, Not, Operand, Or, Path, ValueRef
from .cache import condition_tree
from .compiler import EMPTY, invalid
from .evaluate import compile_predicate
from .resolve import AttributeValue, ExpressionAttributes

KIND = "KeyConditionExpression"
# Sent with no "Invalid KeyConditionExpression: " prefix (captured in 2023 and 2024).
ONE_CONDITION_PER_KEY = "KeyConditionExpressions must only contain one condition per key"
# ``:v < sk`` means ``sk > :v``.
_FLIPPED = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(slots=True)
class KeyCondition:
    """A Query's key condition: the partition key value and an optional sort-key range."""

    hash_value: AttributeValue
    range_op: str | None  # "=", "<", "<=", ">", ">=", "BETWEEN", "begins_with", or None
    range_values: tuple[AttributeValue, ...]


def _conjuncts(node: Cond, out: list[Cond]) -> None:
    if isinstance(node, And):
        _conjuncts(node.left, out)
        _conjuncts(node.right, out)
    else:
        out.append(node)


def _operator_name(node: Cond) -> str | None:
    """The operator DynamoDB names when ``node`` is not allowed in a key condition, else None."""
    if isinstance(node, Or):
        return "OR"
    if isinstance(node, Not):
        return "NOT"
    if isinstance(node, In):
        return "IN"
    if isinstance(node, Compare):
        if node.op == "<>":
            return "<>"
        for side in (node.left, node.right):
            if isinstance(side, Call):
                return side.name
        return None
    if isinstance(node, Call):
        return None if node.name == "begins_with" else node.name
    if isinstance(node, Between):
        for side in (node.operand, node.low, node.high):
            if isinstance(side, Call):
                return side.name
    return None


_MULTIPLE_NAMES = "Invalid condition in KeyConditionExpression: multiple attribute names used in one condition"


def _split(node: Cond) -> tuple[Path, str, tuple[Operand, ...]]:
    """(key path, operator, value operands) of one allowed conjunct."""
    if isinstance(node, Compare):
        if isinstance(node.left, Path) and isinstance(node.right, Path):
            raise ValidationException(_MULTIPLE_NAMES)
        if isinstance(node.left, Path) and not isinstance(node.right, Path):
            return node.left, node.op, (node.right,)
        if isinstance(node.right, Path) and not isinstance(node.left, Path):
            return node.right, _FLIPPED[node.op], (node.left,)
    elif isinstance(node, Between):
        if isinstance(node.operand, Path):
            return node.operand, "BETWEEN", (node.low, node.high)
    elif isinstance(node, Call) and isinstance(node.args[0], Path):
        return node.args[0], "begins_with", (node.args[1],)
    raise ValidationException("Query key condition not supported")


def key_clauses(text: str, attrs: ExpressionAttributes) -> Iterator[tuple[str, str, tuple[AttributeValue, ...]]]:
    """The (attribute, operator, values) of each ANDed clause of a KeyConditionExpression, in order.

    Checks what every key schema shares: allowed operators, placeholders, top-level attributes, literal values.
    Raises ExpressionError (the caller adds the "Invalid KeyConditionExpression: " prefix) or ValidationException.
    Lazy, so a caller's per-clause checks keep their order relative to these."""
    if not text.strip():
        raise ExpressionError(EMPTY)
    tree = condition_tree(text)
    conjuncts: list[Cond] = []
    _conjuncts(tree, conjuncts)
    for node in conjuncts:
        name = _operator_name(node)
        if name is not None:
            # Reported as it is, without the "Invalid KeyConditionExpression: " prefix (as DynamoDB words it).
            raise ValidationException(f"Invalid operator used in {KIND}: {name}")
    # Resolves every placeholder and runs the constant checks shared with conditions (BETWEEN bounds...).
    compile_predicate(tree, attrs)
    for node in conjuncts:
        path, op, operands = _split(node)
        resolved = attrs.path(path)
        if len(resolved) > 1:
            raise ExpressionError("KeyConditionExpressions cannot have conditions on nested attributes")
        values = tuple(attrs.value(o.name) for o in operands if isinstance(o, ValueRef))
        if len(values) != len(operands):
            # e.g. begins_with(sk, prefix): a second attribute name where a value belongs (as DynamoDB words it)
            if any(isinstance(o, Path) for o in operands):
                raise ValidationException(_MULTIPLE_NAMES)
            raise ValidationException("Query key condition not supported")
        yield str(resolved[0]), op, values


def compile_key_condition(
    text: str, attrs: ExpressionAttributes, hash_key: str, range_key: str | None
) -> KeyCondition:
    """Compile a KeyConditionExpression against the table's (or index's) key schema."""
    try:
        hash_value: AttributeValue | None = None
        range_op: str | None = None
        range_values: tuple[AttributeValue, ...] = ()
        strangers = False  # a condition on an attribute outside the key schema
        for name, op, values in key_clauses(text, attrs):
            if name == hash_key:
                if hash_value is not None:
                    raise ExpressionError(ONE_CONDITION_PER_KEY, bare=True)
                if op != "=":
                    raise ValidationException("Query key condition not supported")
                hash_value = values[0]
            elif name == range_key:
                if range_op is not None:
                    raise ExpressionError(ONE_CONDITION_PER_KEY, bare=True)
                range_op, range_values = op, values
            else:
                strangers = True
        if strangers and hash_value is not None:  # the partition key is there: what is missed is the sort key
            # There is none to miss: DynamoDB's answer for an index keyed on its partition key alone (quoted in
            # moto issue 8655, 2025); a table keyed so is taken to answer alike (inferred).
            if range_key is None:
                raise ValidationException("Query key condition not supported")
            raise ValidationException(f"Query condition missed key schema element: {range_key}")
        if hash_value is None:
            raise ValidationException(f"Query condition missed key schema element: {hash_key}")
        return KeyCondition(hash_value, range_op, range_values)
    except ExpressionError as e:
        raise invalid(KIND, e) from None
