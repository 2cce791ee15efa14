"""DynamoDB's legacy (pre-expression) parameters, rewritten into expressions before a handler runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Operation name -> rewrite(request) -> request using only expression parameters.
REWRITERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}
