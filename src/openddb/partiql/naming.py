"""The names a SELECT's projected paths take in the items it returns.

A top-level attribute keeps its name. A nested path is not returned as a ProjectionExpression would return it
(the item's shape, cut down to the path), but as one attribute of its own, named as PartiQL names a select-list item
that has no AS: a path ending in an attribute name takes that name (`SELECT a.b.c` returns `c`), any other (one
ending in a list index, `SELECT l[0]`) takes `_N`, N its position in the select list from 1. That is the PartiQL
reference implementation's rule (partiql-lang-kotlin, SelectListItemAliasVisitorTransform: `b.bat AS bat`,
`baz + 1 AS _3`), on which DynamoDB's PartiQL is built.

best guess: DynamoDB's naming is not documented and no recorded answer was found; this is the PartiQL rule
above. Also guessed: a path that finds nothing returns no attribute (PartiQL's MISSING), and of two paths taking one
name the later one's value is returned (an item holds each name once).
"""

from __future__ import annotations

from openddb.expressions.resolve import get_path
from openddb.model import Item
from openddb.partiql import ast

Renaming = tuple[tuple[str, tuple[ast.Step, ...]], ...]  # (name, path) of each select-list item; () returns as read


def renaming(projection: tuple[ast.Path, ...] | None) -> Renaming:
    """How the items a SELECT reads are returned: () when every path is a top-level attribute (read as it is
    projected), else each path's name and steps."""
    if projection is None or all(len(path.steps) == 1 for path in projection):
        return ()
    named = []
    for position, path in enumerate(projection, start=1):
        last = path.steps[-1]
        named.append((last if isinstance(last, str) else f"_{position}", path.steps))
    return tuple(named)


def top_level(projection: tuple[ast.Path, ...]) -> tuple[ast.Path, ...]:
    """The top-level attributes a renamed SELECT reads, each once, in the order first named: the values of its
    paths are taken from them (so the read checks and charges what the paths need, no more)."""
    names = dict.fromkeys(path.steps[0] for path in projection)
    return tuple(ast.Path((name,)) for name in names)


def renamed(item: Item, names: Renaming) -> Item:
    """A read item as the SELECT returns it."""
    out: Item = {}
    for name, steps in names:
        value = get_path(item, steps)
        if value is not None:
            out[name] = value
    return out
