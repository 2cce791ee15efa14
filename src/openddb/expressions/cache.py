"""Parsed and validated trees, cached per (kind, text): each distinct expression string is parsed once.

Trees are immutable and hold placeholders unresolved, so one cached tree serves every request. Failed
parses raise and are not cached. Each cache is bounded by the total length of the texts it holds as well as by
their number: a parsed tree takes tens of times its text's size, and a client sending a stream of distinct
4 KB expressions must not grow a worker by gigabytes.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from .ast import Cond, Path, UpdateAst
from .parser import parse_condition, parse_projection, parse_update
from .validate import check_condition, check_projection, check_update

CACHE_SIZE = 4096
CACHE_CHARS = 512 * 1024  # of expression text per cache (a tree takes up to ~70 times its text: ~35 MB at most)

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


class BoundedCache(Generic[_K, _V]):
    """A dict emptied whenever it would pass `entries` keys or `chars` of key text: a hit costs one lookup, and
    the working set of a real application (tens to hundreds of expressions) fills it again at once."""

    __slots__ = ("_entries", "_held", "_limit", "_store", "get")

    def __init__(self, entries: int = CACHE_SIZE, chars: int = CACHE_CHARS) -> None:
        self._store: dict[_K, _V] = {}
        self._entries, self._limit, self._held = entries, chars, 0
        # The store's own `get`: a hit on the request path is one C call (the store is emptied, never replaced).
        self.get: Callable[[_K], _V | None] = self._store.get

    def put(self, key: _K, value: _V, chars: int) -> None:
        if len(self._store) >= self._entries or self._held + chars > self._limit:
            self._store.clear()
            self._held = 0
        if chars <= self._limit:
            self._store[key] = value
            self._held += chars


def _condition(text: str, limited: bool) -> Cond:
    node = parse_condition(text)
    check_condition(node, limited)
    return node


def _update(text: str, limited: bool) -> UpdateAst:
    node = parse_update(text)
    check_update(node, limited)
    return node


def _projection(text: str) -> tuple[Path, ...]:
    paths = parse_projection(text)
    check_projection(paths)
    return paths


_CONDITIONS: BoundedCache[tuple[str, bool], Cond] = BoundedCache()
_UPDATES: BoundedCache[tuple[str, bool], UpdateAst] = BoundedCache()
_PROJECTIONS: BoundedCache[str, tuple[Path, ...]] = BoundedCache()
_condition_hit, _update_hit, _projection_hit = _CONDITIONS.get, _UPDATES.get, _PROJECTIONS.get


def condition_tree(text: str, limited: bool = True) -> Cond:
    """The validated tree of a Condition/Filter/KeyCondition expression; raises ExpressionError. `limited`: held
    to the operator limit (see `check_condition`)."""
    tree = _condition_hit((text, limited))
    if tree is None:
        tree = _condition(text, limited)
        _CONDITIONS.put((text, limited), tree, len(text))
    return tree


def update_tree(text: str, limited: bool = True) -> UpdateAst:
    """The validated tree of an UpdateExpression; raises ExpressionError."""
    tree = _update_hit((text, limited))
    if tree is None:
        tree = _update(text, limited)
        _UPDATES.put((text, limited), tree, len(text))
    return tree


def projection_tree(text: str) -> tuple[Path, ...]:
    """The validated paths of a ProjectionExpression; raises ExpressionError."""
    paths = _projection_hit(text)
    if paths is None:
        paths = _projection(text)
        _PROJECTIONS.put(text, paths, len(text))
    return paths
