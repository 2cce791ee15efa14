"""Multi-item reads and batches: Query, Scan, BatchGetItem, BatchWriteItem."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openddb.api.context import RequestContext

HANDLERS: dict[str, Callable[[RequestContext, dict[str, Any]], dict[str, Any]]] = {}
