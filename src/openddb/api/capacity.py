"""Capacity arithmetic of the item operations and how it is reported: ConsumedCapacity (with what indexes
consumed) and ItemCollectionMetrics (a table's provisioned capacity and its quotas are in `throughput`)."""

from __future__ import annotations

import math
from typing import Any

from openddb.model import Item
from openddb.model.schema import TableMeta
from openddb.storage.base import StorageKey


def read_units(size: int, consistent: bool) -> float:
    units = max(1, -(-size // 4096))  # whole 4 KB blocks, rounded up
    return float(units) if consistent else units / 2


def write_units(size: int) -> float:
    return float(max(1, -(-size // 1024)))  # whole 1 KB blocks, rounded up


def consumed_capacity(meta: TableMeta, mode: str | None, units: float, *, read: bool,
                      split: bool = False) -> dict[str, Any] | None:
    """The ConsumedCapacity member for ReturnConsumedCapacity TOTAL or INDEXES, else None.

    `split` adds ReadCapacityUnits/WriteCapacityUnits, which DynamoDB reports for transactions."""
    if mode not in ("TOTAL", "INDEXES"):
        return None
    consumed: dict[str, Any] = {"TableName": meta.name, "CapacityUnits": units}
    table: dict[str, Any] = {"CapacityUnits": units}
    if split:
        kind = "ReadCapacityUnits" if read else "WriteCapacityUnits"
        consumed[kind] = units
        table[kind] = units
    if mode == "INDEXES":
        consumed["Table"] = table
    return consumed


def capacity_with_indexes(meta: TableMeta, mode: str | None, table_units: float, index_units: dict[str, float],
                          *, read: bool, split: bool = False) -> dict[str, Any] | None:
    """ConsumedCapacity including what secondary indexes consumed: the total under TOTAL; with INDEXES also the
    table's share and one entry per index touched, under GlobalSecondaryIndexes / LocalSecondaryIndexes."""
    vectors = {name: size for name, size in index_units.items() if meta.vector_index(name) is not None} \
        if meta.vector_indexes else {}
    if vectors:  # VectorWriteRequestBytes, reported apart from capacity units (under INDEXES only)
        index_units = {name: units for name, units in index_units.items() if name not in vectors}
    consumed = consumed_capacity(meta, mode, table_units + sum(index_units.values()), read=read, split=split)
    if consumed is None or mode != "INDEXES":
        return consumed
    if vectors:
        consumed["VectorIndexes"] = {name: {"VectorWriteRequestBytes": size} for name, size in vectors.items()}
    kind = "ReadCapacityUnits" if read else "WriteCapacityUnits"
    table: dict[str, Any] = {"CapacityUnits": table_units}
    if split:
        table[kind] = table_units
    consumed["Table"] = table
    for name, units in index_units.items():
        index = meta.index(name)
        member = "GlobalSecondaryIndexes" if index is None or index.is_global else "LocalSecondaryIndexes"
        entry: dict[str, Any] = {"CapacityUnits": units}
        if split:
            entry[kind] = units
        consumed.setdefault(member, {})[name] = entry
    return consumed


_GIGABYTE = float(1 << 30)


def item_collection_metrics(engine: Any, meta: TableMeta, key_item: Item, key: StorageKey) -> dict[str, Any] | None:
    """ItemCollectionMetrics of the item collection a written key belongs to, for tables with an LSI (else None)."""
    if not any(not index.is_global for index in meta.indexes):
        return None
    size = engine.collection_size(meta, key.h, key.pk)
    low = float(math.floor(size / _GIGABYTE))
    return {"ItemCollectionKey": {meta.hash_key.name: key_item[meta.hash_key.name]},
            "SizeEstimateRangeGB": [low, low + 1.0]}
