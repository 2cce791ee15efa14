"""Placeholder substitution with use tracking, and the document-path helpers built on resolved paths."""

from __future__ import annotations

from typing import Any, cast

import orjson

from ..errors import ValidationException
from ..model.values import MAX_NAME_BYTES, MSG_LONG_NAME
from .ast import ExpressionError, Path

AttributeValue = dict[str, Any]
Item = dict[str, AttributeValue]
# A resolved path: real attribute names (str) and list indexes (int).
Resolved = tuple[str | int, ...]


class ExpressionAttributes:
    """Per-request placeholder tables with use tracking.

    One instance is shared by every expression of a request, so ``check_all_used`` sees placeholders used
    by any of them.
    """

    __slots__ = ("_fingerprint", "names", "used_names", "used_values", "values")

    def __init__(self, names: dict[str, str] | None, values: dict[str, AttributeValue] | None) -> None:
        self.names: dict[str, str] = names or {}
        self.values: dict[str, AttributeValue] = values or {}
        self.used_names: set[str] = set()
        self.used_values: set[str] = set()
        self._fingerprint: tuple[tuple[tuple[str, str], ...], bytes] | None = None

    def fingerprint(self) -> tuple[tuple[tuple[str, str], ...], bytes]:
        """The placeholder tables as a hashable value: equal tables compile any expression alike."""
        if self._fingerprint is None:
            self._fingerprint = (tuple(self.names.items()), orjson.dumps(self.values) if self.values else b"")
        return self._fingerprint

    def name(self, ref: str) -> str:
        """The attribute name behind ``#ref``; raises ExpressionError when it is not defined."""
        try:
            real = self.names[ref]
        except KeyError:
            raise ExpressionError(
                "An expression attribute name used in the document path is not defined; "
                f"attribute name: {ref}"
            ) from None
        self.used_names.add(ref)
        # A name longer than any item may hold (PutItem's limit) is refused wherever it is used: an update's target,
        # a projection, a condition's path. The text is the one recorded for an update's target and an item; for
        # reads and conditions it is a best guess (the same limit, so taken to be the same answer).
        if len(real) * 4 > MAX_NAME_BYTES and len(real.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise ValidationException(MSG_LONG_NAME)
        return real

    def value(self, ref: str) -> AttributeValue:
        """The value behind ``:ref``; raises ExpressionError when it is not defined."""
        try:
            av = self.values[ref]
        except KeyError:
            raise ExpressionError(
                f"An expression attribute value used in expression is not defined; attribute value: {ref}"
            ) from None
        self.used_values.add(ref)
        return av

    def path(self, path: Path) -> Resolved:
        """``path`` with every ``#name`` replaced by its attribute name."""
        return tuple(
            self.name(el) if type(el) is str and el[0] == "#" else el for el in path.elements
        )

    def check_all_used(self) -> None:
        """Raise DynamoDB's ValidationException if a name or value was supplied but never used."""
        unused = [k for k in self.names if k not in self.used_names]
        if unused:
            raise ValidationException(
                "Value provided in ExpressionAttributeNames unused in expressions: "
                f"keys: {{{', '.join(unused)}}}"
            )
        unused = [k for k in self.values if k not in self.used_values]
        if unused:
            raise ValidationException(
                "Value provided in ExpressionAttributeValues unused in expressions: "
                f"keys: {{{', '.join(unused)}}}"
            )


def get_path(item: Item | None, path: Resolved) -> AttributeValue | None:
    """The value at ``path`` in ``item``, or None when any step is missing or of the wrong type."""
    if item is None:
        return None
    av = item.get(cast(str, path[0]))  # a path always starts with an attribute name
    for el in path[1:]:
        if av is None:
            return None
        if type(el) is int:
            seq = av.get("L")
            if seq is None or el >= len(seq):
                return None
            av = seq[el]
        else:
            members = av.get("M")
            if members is None:
                return None
            av = members.get(el)
    return av


def format_path(path: Resolved) -> str:
    """A path as DynamoDB prints it in messages: ``[a, b, [0]]``."""
    return "[" + ", ".join(f"[{el}]" if type(el) is int else str(el) for el in path) + "]"


def check_no_overlap(paths: list[Resolved]) -> None:
    """Reject two paths where one is a prefix of the other (overlap) or that use one step as both a map
    key and a list index (conflict)."""
    for i, one in enumerate(paths):
        for two in paths[i + 1:]:
            for a, b in zip(one, two):
                if a != b:
                    if (type(a) is int) != (type(b) is int):
                        raise ExpressionError(
                            "Two document paths conflict with each other; must remove or rewrite one of "
                            f"these paths; path one: {format_path(one)}, path two: {format_path(two)}"
                        )
                    break
            else:
                raise ExpressionError(
                    "Two document paths overlap with each other; must remove or rewrite one of these "
                    f"paths; path one: {format_path(one)}, path two: {format_path(two)}"
                )
