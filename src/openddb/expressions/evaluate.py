"""Conditions compiled to closures: resolve placeholders once per request, then evaluate per item with no
parsing, no lookups by name and no regexes.

Comparisons between different types are false, never errors; ``<`` and friends order only S, N and B.
Checks that need the placeholder values (BETWEEN bounds, operand types of constants) happen here, at compile
time, so a bad request fails before any item is read.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import cast

from ..model.values import compare_values, type_of, values_equal
from .ast import And, Between, Call, Compare, Cond, ExpressionError, In, Not, Operand, Or, Path, ValueRef
from .resolve import AttributeValue, ExpressionAttributes, Item, Resolved, format_path, get_path

Getter = Callable[[Item | None], AttributeValue | None]
Predicate = Callable[[Item | None], bool]

VALID_TYPES = ("S", "SS", "N", "NS", "B", "BS", "BOOL", "NULL", "L", "M")
_ORDERED = frozenset({"S", "N", "B"})
# DynamoDB lists the valid attribute_type names in this order in its message.
_TYPE_LIST = "{ B,NULL,SS,BOOL,L,BS,N,NS,S,M }"


def describe(av: AttributeValue) -> str:
    """``AttributeValue: {N:5}``, the way DynamoDB quotes a constant operand in messages."""
    ((t, v),) = av.items()
    return f"AttributeValue: {{{t}:{v}}}"


def operand_type_error(operator: str, av: AttributeValue) -> ExpressionError:
    return ExpressionError(
        "Incorrect operand type for operator or function; "
        f"operator or function: {operator}, operand type: {type_of(av)}"
    )


def path_getter(path: Resolved) -> Getter:
    """A fast getter for a resolved path (top-level names skip the walk)."""
    if len(path) == 1:
        name = cast(str, path[0])  # a path always starts with an attribute name

        def top(item: Item | None) -> AttributeValue | None:
            return None if item is None else item.get(name)

        return top
    return lambda item: get_path(item, path)


def size_of(av: AttributeValue | None) -> AttributeValue | None:
    """``size()``: UTF-16 code units of S (DynamoDB counts a character outside the Basic Multilingual Plane,
    such as an emoji, as two), bytes of B, members of sets, lists and maps; None for other types."""
    if av is None:
        return None
    ((t, v),) = av.items()
    if t == "S":
        return {"N": str(len(v) if v.isascii() else len(v.encode("utf-16-le")) // 2)}
    if t == "B":
        return {"N": str(len(base64.b64decode(v)))}
    if t in ("SS", "NS", "BS", "L", "M"):
        return {"N": str(len(v))}
    return None


class _Compiler:
    """Turns one resolved condition tree into a predicate; ``attrs`` records the placeholders used."""

    __slots__ = ("attrs",)

    def __init__(self, attrs: ExpressionAttributes) -> None:
        self.attrs = attrs

    def constant(self, node: Operand) -> AttributeValue | None:
        return self.attrs.value(node.name) if isinstance(node, ValueRef) else None

    def operand(self, node: Operand) -> Getter:
        if isinstance(node, Path):
            return path_getter(self.attrs.path(node))
        if isinstance(node, ValueRef):
            av = self.attrs.value(node.name)
            return lambda item: av
        assert isinstance(node, Call) and node.name == "size"
        argument = node.args[0]
        if isinstance(argument, ValueRef):  # the size of a value is known now; of a number, say, it is an error
            av = self.attrs.value(argument.name)
            size = size_of(av)
            if size is None:
                raise operand_type_error("size", av)
            return lambda item: size
        inner = self.operand(argument)
        return lambda item: size_of(inner(item))

    def distinct(self, operator: str, first: Operand, others: tuple[Operand, ...]) -> None:
        # DynamoDB rejects e.g. contains(a, a): the operand compared with itself, by its resolved name (its
        # message names the attribute, not the placeholder), so contains(a, #a) with #a -> a too.
        if not isinstance(first, Path):
            return
        resolved = self.attrs.path(first)
        if any(isinstance(o, Path) and (o == first or self.attrs.path(o) == resolved) for o in others):
            raise ExpressionError(
                "The first operand must be distinct from the remaining operands for this operator or "
                f"function; operator: {operator}, first operand: {format_path(resolved)}"
            )

    def condition(self, node: Cond) -> Predicate:
        if isinstance(node, And):
            left, right = self.condition(node.left), self.condition(node.right)
            return lambda item: left(item) and right(item)
        if isinstance(node, Or):
            left, right = self.condition(node.left), self.condition(node.right)
            return lambda item: left(item) or right(item)
        if isinstance(node, Not):
            inner = self.condition(node.operand)
            return lambda item: not inner(item)
        if isinstance(node, Compare):
            return self.compare(node)
        if isinstance(node, Between):
            return self.between(node)
        if isinstance(node, In):
            return self.in_(node)
        return self.function(node)

    def compare(self, node: Compare) -> Predicate:
        op = node.op
        self.distinct(op, node.left, (node.right,))
        left, right = self.operand(node.left), self.operand(node.right)
        if op not in ("=", "<>"):
            for side in (node.left, node.right):
                const = self.constant(side)
                if const is not None and type_of(const) not in _ORDERED:
                    raise operand_type_error(op, const)
        if op == "=":
            def eq(item: Item | None) -> bool:
                a, b = left(item), right(item)
                return a is not None and b is not None and values_equal(a, b)
            return eq
        if op == "<>":
            def ne(item: Item | None) -> bool:
                a, b = left(item), right(item)
                return a is None or b is None or not values_equal(a, b)
            return ne
        test: Callable[[int], bool] = {
            "<": lambda c: c < 0,
            "<=": lambda c: c <= 0,
            ">": lambda c: c > 0,
            ">=": lambda c: c >= 0,
        }[op]

        def ordered(item: Item | None) -> bool:
            a, b = left(item), right(item)
            if a is None or b is None:
                return False
            c = compare_values(a, b)
            return c is not None and test(c)
        return ordered

    def between(self, node: Between) -> Predicate:
        self.distinct("BETWEEN", node.operand, (node.low, node.high))
        value, low, high = self.operand(node.operand), self.operand(node.low), self.operand(node.high)
        low_c, high_c = self.constant(node.low), self.constant(node.high)
        for const in (self.constant(node.operand), low_c, high_c):
            if const is not None and type_of(const) not in _ORDERED:
                raise operand_type_error("BETWEEN", const)
        if low_c is not None and high_c is not None:
            order = compare_values(low_c, high_c)
            if order is None:
                raise ExpressionError(
                    "The BETWEEN operator requires same data type for lower and upper bounds; "
                    f"lower bound operand: {describe(low_c)}, upper bound operand: {describe(high_c)}"
                )
            if order > 0:
                raise ExpressionError(
                    "The BETWEEN operator requires upper bound to be greater than or equal to lower bound; "
                    f"lower bound operand: {describe(low_c)}, upper bound operand: {describe(high_c)}"
                )

        def check(item: Item | None) -> bool:
            a, lo, hi = value(item), low(item), high(item)
            if a is None or lo is None or hi is None:
                return False
            c1 = compare_values(lo, a)
            if c1 is None or c1 > 0:
                return False
            c2 = compare_values(a, hi)
            return c2 is not None and c2 <= 0
        return check

    def in_(self, node: In) -> Predicate:
        self.distinct("IN", node.operand, node.choices)
        value = self.operand(node.operand)
        choices = [self.operand(c) for c in node.choices]

        def check(item: Item | None) -> bool:
            a = value(item)
            if a is None:
                return False
            for choice in choices:
                b = choice(item)
                if b is not None and values_equal(a, b):
                    return True
            return False
        return check

    def function(self, node: Call) -> Predicate:
        name = node.name
        if name in ("attribute_exists", "attribute_not_exists"):
            get = self.operand(node.args[0])
            if name == "attribute_exists":
                return lambda item: get(item) is not None
            return lambda item: get(item) is None
        self.distinct(name, node.args[0], node.args[1:])
        first, second = self.operand(node.args[0]), self.operand(node.args[1])
        const = self.constant(node.args[1])
        if name == "attribute_type":
            if const is not None:
                if "S" not in const:
                    raise operand_type_error(name, const)
                if const["S"] not in VALID_TYPES:
                    raise ExpressionError(
                        f"Invalid attribute type name found; type: {const['S']}, valid types: {_TYPE_LIST}"
                    )

            def has_type(item: Item | None) -> bool:
                a, t = first(item), second(item)
                return a is not None and t is not None and type_of(a) == t.get("S")
            return has_type
        if name == "begins_with":
            for side in (self.constant(node.args[0]), const):
                if side is not None and type_of(side) not in ("S", "B"):
                    raise operand_type_error(name, side)
            return lambda item: _begins_with(first(item), second(item))
        return lambda item: _contains(first(item), second(item))


def _begins_with(a: AttributeValue | None, b: AttributeValue | None) -> bool:
    if a is None or b is None:
        return False
    if "S" in a and "S" in b:
        return bool(a["S"].startswith(b["S"]))
    if "B" in a and "B" in b:
        return base64.b64decode(a["B"]).startswith(base64.b64decode(b["B"]))
    return False


_SET_MEMBER = {"SS": "S", "NS": "N", "BS": "B"}


def _contains(a: AttributeValue | None, b: AttributeValue | None) -> bool:
    if a is None or b is None:
        return False
    ((t, v),) = a.items()
    if t == "S":
        return "S" in b and b["S"] in v
    if t in _SET_MEMBER:
        # Set members are normalized (N) or canonical base64 (B), so equal members are equal strings.
        member = b.get(_SET_MEMBER[t])
        return member is not None and member in v
    if t == "L":
        return any(values_equal(x, b) for x in v)
    if t == "B" and "B" in b:
        return base64.b64decode(b["B"]) in base64.b64decode(v)
    return False


def compile_predicate(node: Cond, attrs: ExpressionAttributes) -> Predicate:
    """Resolve ``node`` against ``attrs`` and return its predicate; raises ExpressionError."""
    return _Compiler(attrs).condition(node)
