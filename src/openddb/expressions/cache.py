"""Parsed and validated trees, cached per (kind, text): each distinct expression string is parsed once.

Trees are immutable and hold placeholders unresolved, so one cached tree serves every request. Failed
parses raise and are not cached.
"""

from __future__ import annotations

from functools import lru_cache

from .ast import Cond, Path, UpdateAst
from .parser import parse_condition, parse_projection, parse_update
from .validate import check_condition, check_projection, check_update

CACHE_SIZE = 4096


@lru_cache(maxsize=CACHE_SIZE)
def condition_tree(text: str, limited: bool = True) -> Cond:
    """The validated tree of a Condition/Filter/KeyCondition expression; raises ExpressionError. `limited`: held
    to the operator limit (see `check_condition`)."""
    node = parse_condition(text)
    check_condition(node, limited)
    return node


@lru_cache(maxsize=CACHE_SIZE)
def update_tree(text: str, limited: bool = True) -> UpdateAst:
    """The validated tree of an UpdateExpression; raises ExpressionError."""
    node = parse_update(text)
    check_update(node, limited)
    return node


@lru_cache(maxsize=CACHE_SIZE)
def projection_tree(text: str) -> tuple[Path, ...]:
    """The validated paths of a ProjectionExpression; raises ExpressionError."""
    paths = parse_projection(text)
    check_projection(paths)
    return paths
