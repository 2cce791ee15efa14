"""ProjectionExpression: keep only the selected document paths of an item.

The result keeps the nested structure of what was selected: a map keeps only the selected keys; a list keeps
only the selected elements, compacted in ascending index order (``l[2], l[0]`` yields ``[l0, l2]``).
Paths that do not exist in the item select nothing.
"""

from __future__ import annotations

from typing import Any

from .ast import Path
from .resolve import AttributeValue, ExpressionAttributes, Item, Resolved, check_no_overlap

# A trie of selected paths: step -> sub-trie, or None where the whole value is selected.
Trie = dict[Any, Any]


def build_trie(paths: list[Resolved]) -> Trie:
    """The trie of non-overlapping ``paths``."""
    trie: Trie = {}
    for path in paths:
        node = trie
        for el in path[:-1]:
            child = node.get(el)
            if child is None:
                child = node[el] = {}
            node = child
        node[path[-1]] = None
    return trie


def _select(av: AttributeValue, trie: Trie) -> AttributeValue | None:
    if type(next(iter(trie))) is int:
        seq = av.get("L")
        if seq is None:
            return None
        out_l = []
        for index in sorted(trie):
            if index < len(seq):
                sub = trie[index]
                value = seq[index] if sub is None else _select(seq[index], sub)
                if value is not None:
                    out_l.append(value)
        return {"L": out_l} if out_l else None
    members = av.get("M")
    if members is None:
        return None
    out_m = project(members, trie)
    return {"M": out_m} if out_m else None


def project(item: Item, trie: Trie) -> Item:
    """The parts of ``item`` (or of a map's members) that ``trie`` selects (values shared, not copied)."""
    out: Item = {}
    for name, sub in trie.items():
        found = item.get(name)
        if found is not None:
            value = found if sub is None else _select(found, sub)
            if value is not None:
                out[name] = value
    return out


class Projection:
    """A compiled ProjectionExpression."""

    __slots__ = ("_trie", "paths", "top_level_names")

    def __init__(self, paths: list[Resolved]) -> None:
        self.paths = paths
        self._trie = build_trie(paths)
        self.top_level_names: frozenset[str] = frozenset(str(p[0]) for p in paths)

    def apply(self, item: Item) -> Item:
        """``item`` reduced to the projected paths."""
        return project(item, self._trie)


def compile_projection_ast(paths: tuple[Path, ...], attrs: ExpressionAttributes) -> Projection:
    """Resolve validated projection paths against ``attrs``; raises ExpressionError on overlaps."""
    resolved = [attrs.path(p) for p in paths]
    check_no_overlap(resolved)
    return Projection(resolved)
