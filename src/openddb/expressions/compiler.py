"""Entry points: expression text + the request's placeholders -> a compiled, ready-to-run object.

Every ExpressionError becomes DynamoDB's ``ValidationException("Invalid <Kind>: <message>")``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from ..errors import ValidationException
from .ast import ExpressionError
from .cache import BoundedCache, condition_tree, projection_tree, update_tree
from .evaluate import Predicate, compile_predicate
from .names import top_level_names
from .projection import Projection, compile_projection_ast
from .resolve import ExpressionAttributes
from .update import Update, compile_update_ast

EMPTY = "The expression can not be empty;"

# Compiled expressions by (kind, text, placeholder tables): a request repeating an expression with the same
# names and values (a counter's `SET n = n + :one`, a guard's `attribute_exists(pk)`) skips compiling it. Each
# entry keeps the placeholders it used, for `check_all_used`. Entries whose placeholder tables are large are not
# kept, and the cache holds at most CACHE_CHARS of expression text and tables.
_COMPILED: BoundedCache[tuple[str, str, Any], tuple[Any, frozenset[str], frozenset[str]]] = BoundedCache()
_compiled_hit = _COMPILED.get
_CACHED_VALUES_MAX = 1024  # bytes of the values' JSON
_CACHED_NAMES_MAX = 4096  # characters of the names

_T = TypeVar("_T")


def _compiled(kind: str, text: str, attrs: ExpressionAttributes, build: Callable[[ExpressionAttributes], _T]) -> _T:
    """``build(attrs)``, from the cache when this expression was compiled with equal placeholder tables."""
    fingerprint = attrs.fingerprint()
    key = (kind, text, fingerprint)
    hit = _compiled_hit(key)
    if hit is None:
        scoped = ExpressionAttributes(attrs.names, attrs.values)  # records this expression's placeholders alone
        compiled = build(scoped)
        hit = (compiled, frozenset(scoped.used_names), frozenset(scoped.used_values))
        values = len(fingerprint[1])
        if values <= _CACHED_VALUES_MAX:
            names = sum(len(ref) + len(name) for ref, name in fingerprint[0])
            if names <= _CACHED_NAMES_MAX:
                _COMPILED.put(key, hit, len(text) + values + names)
    attrs.used_names.update(hit[1])
    attrs.used_values.update(hit[2])
    return cast(_T, hit[0])


def invalid(kind: str, error: ExpressionError) -> ValidationException:
    """The ValidationException DynamoDB sends for an invalid expression of ``kind``."""
    if error.bare:
        return ValidationException(error.message)
    counted = "1 validation error detected: " if error.counted else ""
    return ValidationException(f"{counted}Invalid {kind}: {error.message}")


class Condition:
    """A compiled Condition or Filter expression."""

    __slots__ = ("evaluate", "names")

    def __init__(self, predicate: Predicate, names: frozenset[str] = frozenset()) -> None:
        self.evaluate: Predicate = predicate
        """``evaluate(item)``: True if ``item`` (None = no item) satisfies the condition."""
        self.names = names
        """The top-level attributes the condition reads (for the operation layer's readers: authorization)."""


def compile_condition(text: str, attrs: ExpressionAttributes, kind: str = "ConditionExpression",
                      limited: bool = True) -> Condition:
    """Compile a ConditionExpression or FilterExpression (``kind`` names it in error messages; ``limited``: see
    ``check_condition``)."""
    try:
        if not text.strip():
            raise ExpressionError(EMPTY)
        tree = condition_tree(text, limited)
        return _compiled(kind, text, attrs, lambda scoped: Condition(compile_predicate(tree, scoped),
                                                                      frozenset(top_level_names(tree, scoped))))
    except ExpressionError as e:
        raise invalid(kind, e) from None


def compile_projection(text: str, attrs: ExpressionAttributes) -> Projection:
    """Compile a ProjectionExpression."""
    try:
        if not text.strip():
            raise ExpressionError(EMPTY)
        paths = projection_tree(text)
        return _compiled("ProjectionExpression", text, attrs, lambda scoped: compile_projection_ast(paths, scoped))
    except ExpressionError as e:
        raise invalid("ProjectionExpression", e) from None


def compile_update(text: str, attrs: ExpressionAttributes, limited: bool = True) -> Update:
    """Compile an UpdateExpression (``limited``: see ``check_condition``)."""
    try:
        if not text.strip():
            raise ExpressionError(EMPTY)
        tree = update_tree(text, limited)
        return _compiled("UpdateExpression", text, attrs, lambda scoped: compile_update_ast(tree, scoped))
    except ExpressionError as e:
        raise invalid("UpdateExpression", e) from None



