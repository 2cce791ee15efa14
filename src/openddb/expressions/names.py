"""The top-level attribute names an expression tree refers to (what a filter or condition reads)."""

from __future__ import annotations

import dataclasses
from typing import Any

from .ast import Path
from .resolve import ExpressionAttributes


def top_level_names(node: Any, attrs: ExpressionAttributes) -> set[str]:
    """Top-level attribute names of every document path in an expression tree."""
    names: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Path):
            first = current.elements[0]
            if isinstance(first, str):
                names.add(attrs.names.get(first, first) if first.startswith("#") else first)
        elif isinstance(current, tuple):
            stack.extend(current)
        elif dataclasses.is_dataclass(current):
            stack.extend(getattr(current, f.name) for f in dataclasses.fields(current))
    return names
