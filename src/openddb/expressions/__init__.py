"""DynamoDB's expression language: one lexer and parser for Condition, Filter, KeyCondition, Projection and
Update expressions; placeholder resolution with use tracking; evaluation and pure update application."""

from __future__ import annotations

from .compiler import Condition, compile_condition, compile_projection, compile_update
from .keycondition import KeyCondition, compile_key_condition
from .projection import Projection
from .reserved import RESERVED_WORDS, is_reserved
from .resolve import ExpressionAttributes
from .update import Update, updated_values

__all__ = [
    "RESERVED_WORDS",
    "Condition",
    "ExpressionAttributes",
    "KeyCondition",
    "Projection",
    "Update",
    "compile_condition",
    "compile_key_condition",
    "compile_projection",
    "compile_update",
    "is_reserved",
    "updated_values",
]
