"""Entry points: expression text + the request's placeholders -> a compiled, ready-to-run object.

Every ExpressionError becomes DynamoDB's ``ValidationException("Invalid <Kind>: <message>")``.
"""

from __future__ import annotations

from ..errors import ValidationException
from .ast import ExpressionError
from .cache import condition_tree, projection_tree, update_tree
from .evaluate import Predicate, compile_predicate
from .projection import Projection, compile_projection_ast
from .resolve import ExpressionAttributes
from .update import Update, compile_update_ast

EMPTY = "The expression can not be empty;"


def invalid(kind: str, error: ExpressionError) -> ValidationException:
    """The ValidationException DynamoDB sends for an invalid expression of ``kind``."""
    return ValidationException(f"Invalid {kind}: {error.message}")


class Condition:
    """A compiled Condition or Filter expression."""

    __slots__ = ("evaluate",)

    def __init__(self, predicate: Predicate) -> None:
        self.evaluate: Predicate = predicate
        """``evaluate(item)``: True if ``item`` (None = no item) satisfies the condition."""


def compile_condition(text: str, attrs: ExpressionAttributes, kind: str = "ConditionExpression") -> Condition:
    """Compile a ConditionExpression or FilterExpression (``kind`` names it in error messages)."""
    try:
        if not text.strip():
            raise ExpressionError(EMPTY)
        return Condition(compile_predicate(condition_tree(text), attrs))
    except ExpressionError as e:
        raise invalid(kind, e) from None


def compile_projection(text: str, attrs: ExpressionAttributes) -> Projection:
    """Compile a ProjectionExpression."""
    try:
        if not text.strip():
            raise ExpressionError(EMPTY)
        return compile_projection_ast(projection_tree(text), attrs)
    except ExpressionError as e:
        raise invalid("ProjectionExpression", e) from None


def compile_update(text: str, attrs: ExpressionAttributes) -> Update:
    """Compile an UpdateExpression."""
    try:
        if not text.strip():
            raise ExpressionError(EMPTY)
        return compile_update_ast(update_tree(text), attrs)
    except ExpressionError as e:
        raise invalid("UpdateExpression", e) from None



