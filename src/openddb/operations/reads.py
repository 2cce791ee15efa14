"""Read operations: Get (one item by its full key) and the read plan of a Query or Scan page.

A front end (GetItem, a PartiQL SELECT on a full key) builds a `Get`; Query and Scan (the native operations and
PartiQL's SELECT) build a `ReadPlan` with their key range. Both name the table, index and attributes they read,
for the readers of operations (authorization, metering)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from openddb.api.capacity import read_units
from openddb.expressions import Condition, Projection
from openddb.model.schema import TableMeta
from openddb.storage.base import Engine, StorageKey


class Get(NamedTuple):
    """Immutable, as every operation (a NamedTuple: built on every read in a fraction of a frozen dataclass's
    time)."""

    table: TableMeta
    key: StorageKey
    projection: Projection | None
    consistent: bool

    def run(self, engine: Engine) -> tuple[Any, int]:
        """(the item as the response carries it, or None if there is none; the size it is charged on)."""
        row = engine.get(self.table, self.key)
        if row is None:
            return None, 0
        # The stored JSON is the wire JSON: without a projection it is sent as it is, never parsed.
        if self.projection is None:
            return orjson.Fragment(row.data), row.size
        return self.projection.apply(orjson.loads(row.data)), row.size

    def units(self, size: int) -> float:
        """The read units a read of `size` bytes costs."""
        return read_units(size, self.consistent)


MAX_PAGE_BYTES = 1024 * 1024  # what one Query or Scan page reads at most, before its filter


@dataclass(slots=True)
class PageBytes:
    """The bytes a page made of several reads may still read: a PartiQL SELECT of several partitions reads its
    partitions' Queries into one page of 1 MB in all, as one Query's page is (partiql/pages.py). Each read stops
    once it has read what is left (the item that crosses the line included, as a native page does) and takes what
    it read off."""

    left: int = MAX_PAGE_BYTES


@dataclass(slots=True)
class ReadPlan:
    """The compiled, validated parts a Query and a Scan page share."""

    meta: TableMeta
    select: str
    projection: Projection | None
    filter: Condition | None
    limit: int | None
    consistent: bool
    capacity_mode: str | None

    @property
    def attributes_read(self) -> frozenset[str] | None:
        """Top-level attributes the read returns (None: every one) and filters on."""
        if self.projection is None:
            return None
        filtered = self.filter.names if self.filter is not None else frozenset()
        return self.projection.top_level_names | filtered
