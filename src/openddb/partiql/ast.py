"""The PartiQL statements DynamoDB runs, as a tree: SELECT, INSERT, UPDATE, DELETE and their expressions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from openddb.model import AttributeValue

Step = str | int  # a map key or a list index


@dataclass(frozen=True, slots=True)
class Path:
    steps: tuple[Step, ...]  # the first is an attribute name


@dataclass(frozen=True, slots=True)
class Value:
    """A literal, already an attribute value."""

    value: AttributeValue


@dataclass(frozen=True, slots=True)
class Param:
    index: int  # the position of its `?` in the statement, from 0


@dataclass(frozen=True, slots=True)
class ListOf:
    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class MapOf:
    entries: tuple[tuple[str, Expr], ...]


@dataclass(frozen=True, slots=True)
class SetOf:
    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Call:
    name: str  # lower case
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Arith:
    op: Literal["+", "-"]
    left: Expr
    right: Expr


CompareOp = Literal["=", "<>", "<", "<=", ">", ">="]


@dataclass(frozen=True, slots=True)
class Compare:
    op: CompareOp
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Between:
    operand: Expr
    low: Expr
    high: Expr


@dataclass(frozen=True, slots=True)
class In:
    operand: Expr
    options: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Is:
    """`path IS [NOT] MISSING` or `path IS [NOT] NULL` (the operand's PartiQL type: Developer Guide, "PartiQL
    arithmetic, comparison, and logical operators")."""

    path: Path
    kind: Literal["MISSING", "NULL"]
    negated: bool  # IS NOT


@dataclass(frozen=True, slots=True)
class And:
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Or:
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Not:
    operand: Expr


Expr = (Path | Value | Param | ListOf | MapOf | SetOf | Call | Arith | Compare | Between | In | Is | And | Or
        | Not)
Returning = Literal["ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW"]


@dataclass(frozen=True, slots=True)
class Select:
    projection: tuple[Path, ...] | None  # None: *
    table: str
    index: str | None
    where: Expr | None
    descending: bool  # ORDER BY ... DESC
    ordered: bool = False  # has an ORDER BY
    order: tuple[Path, ...] = ()  # the paths ORDER BY names


@dataclass(frozen=True, slots=True)
class Insert:
    table: str
    item: Expr


@dataclass(frozen=True, slots=True)
class Update:
    table: str
    sets: tuple[tuple[Path, Expr], ...]
    removes: tuple[Path, ...]
    where: Expr
    returning: Returning | None


@dataclass(frozen=True, slots=True)
class Delete:
    table: str
    where: Expr
    returning: Returning | None


@dataclass(frozen=True, slots=True)
class Exists:
    """EXISTS(SELECT ...): a transaction's condition check on one item."""

    select: Select


Statement = Select | Insert | Update | Delete | Exists
