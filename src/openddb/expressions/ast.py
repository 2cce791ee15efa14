"""Syntax trees for every expression kind, plus the error the expression modules raise internally.

Trees hold placeholders unresolved (``#n`` stays in a Path, ``:v`` stays a ValueRef), so one parsed tree can
be cached per expression string and resolved against each request's ExpressionAttributeNames/Values.
"""

from __future__ import annotations

from dataclasses import dataclass


class ExpressionError(Exception):
    """An invalid expression; ``message`` lacks the ``Invalid <Kind>: `` prefix that compile_* adds.
    ``counted``: DynamoDB reports it as a constraint violation ("1 validation error detected: " first).
    ``bare``: DynamoDB sends the message with no prefix at all."""

    def __init__(self, message: str, counted: bool = False, bare: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.counted = counted
        self.bare = bare


# A path element is an attribute name, a ``#placeholder`` (str starting with '#') or a list index (int).
PathElement = str | int


@dataclass(frozen=True, slots=True)
class Path:
    """A document path such as ``a.#b[2].c``."""

    elements: tuple[PathElement, ...]


@dataclass(frozen=True, slots=True)
class ValueRef:
    """An expression attribute value placeholder such as ``:v``."""

    name: str


@dataclass(frozen=True, slots=True)
class Call:
    """A function call: ``size(a)``, ``begins_with(a, :v)``, ``if_not_exists(a, :v)`` ..."""

    name: str
    args: tuple[Operand, ...]


@dataclass(frozen=True, slots=True)
class Arith:
    """``left + right`` or ``left - right`` (UpdateExpression SET values only)."""

    op: str
    left: Operand
    right: Operand


Operand = Path | ValueRef | Call | Arith


@dataclass(frozen=True, slots=True)
class Compare:
    """``left <op> right`` with op one of ``= <> < <= > >=``."""

    op: str
    left: Operand
    right: Operand


@dataclass(frozen=True, slots=True)
class Between:
    operand: Operand
    low: Operand
    high: Operand


@dataclass(frozen=True, slots=True)
class In:
    operand: Operand
    choices: tuple[Operand, ...]


@dataclass(frozen=True, slots=True)
class And:
    left: Cond
    right: Cond


@dataclass(frozen=True, slots=True)
class Or:
    left: Cond
    right: Cond


@dataclass(frozen=True, slots=True)
class Not:
    operand: Cond


# A function call in condition position (attribute_exists(a) ...) is a Call node.
Cond = Compare | Between | In | And | Or | Not | Call


@dataclass(frozen=True, slots=True)
class UpdateAst:
    """The four clauses of an UpdateExpression, actions in source order."""

    set: tuple[tuple[Path, Operand], ...] = ()
    remove: tuple[Path, ...] = ()
    add: tuple[tuple[Path, ValueRef], ...] = ()
    delete: tuple[tuple[Path, ValueRef], ...] = ()
