"""Capacity arithmetic of the item operations, the charges handlers make to the request's record
(observe/record.py) whether or not the client asked, the ConsumedCapacity rendered from them (with what indexes
consumed), and ItemCollectionMetrics (a table's provisioned capacity and its quotas are in `throughput`)."""

from __future__ import annotations

import math
from typing import Any

from openddb.model import Item
from openddb.model.indexes import index_write_units
from openddb.model.schema import TableMeta
from openddb.observe.record import Charge, RequestRecord
from openddb.storage.base import StorageKey, WriteResult

_tuple = tuple.__new__


def read_units(size: int, consistent: bool) -> float:
    units = max(1, -(-size // 4096))  # whole 4 KB blocks, rounded up
    return float(units) if consistent else units / 2


def write_units(size: int) -> float:
    return float(max(1, -(-size // 1024)))  # whole 1 KB blocks, rounded up


def charge(record: RequestRecord, meta: TableMeta, units: float, write: bool, size: int = 0,
           key: StorageKey | None = None, label: str | None = None) -> None:
    """Charge the request of `record` `units` read or written in table `meta` (see observe/record.py), on the
    partition of `key` (None: several, as a Scan reads). `label`: the ConsumedCapacity entry it is reported in
    (the table's name unless a request names one table twice)."""
    name = meta.name  # (tuple.__new__: a NamedTuple's own __new__ costs several times more)
    record.charges.append(_tuple(Charge, (label or name, name, None, False, units, write, size, key, False, ())))


def charge_write(record: RequestRecord, meta: TableMeta, units: float, result: WriteResult,
                 key: StorageKey) -> None:
    """Charge a write to the table `meta`: `units` to the table itself (on the larger of the old and the new item),
    and what it cost its secondary and vector indexes (as every front end's writes are charged: single items,
    batches, transactions, PartiQL)."""
    charge(record, meta, units, True, max(result.old_size, result.new_size), key)
    if meta.indexes or meta.vector_indexes:
        charge_indexes(record, meta, index_write_units(meta, result.old, result.new), write=True,
                       items=(result.old, result.new))


def charge_indexes(record: RequestRecord, meta: TableMeta, index_units: dict[str, float], *, write: bool,
                   key: StorageKey | None = None, label: str | None = None,
                   items: tuple[Item | None, ...] = ()) -> None:
    """Charge what secondary indexes of `meta` consumed (index name -> units; for a vector index, the bytes of
    its VectorWriteRequestBytes, which are reported apart from capacity units); `items`: a write's (old, new)
    items, or the key values a Query named (see observe/record.py)."""
    for name, units in index_units.items():
        if meta.vector_indexes and meta.vector_index(name) is not None:
            record.charges.append(_tuple(Charge, (label or meta.name, meta.name, name, True, 0.0, write, int(units),
                                                  key, True, ())))
            continue
        index = meta.index(name)
        record.charges.append(_tuple(Charge, (label or meta.name, meta.name, name, index is None or index.is_global,
                                              units, write, 0, key, False, items)))


def consumed(record: RequestRecord, mode: str | None, *, split: bool = False) -> dict[str, Any] | None:
    """The ConsumedCapacity member of a one-table call, rendered from the request's charges, for
    ReturnConsumedCapacity TOTAL or INDEXES; else None. `split` adds ReadCapacityUnits/WriteCapacityUnits, which
    DynamoDB reports for transactions."""
    if mode not in ("TOTAL", "INDEXES"):
        return None
    entries = consumed_list(record, mode, split=split)
    return entries[0] if entries else None


def consumed_list(record: RequestRecord, mode: str | None, *, split: bool = False) -> list[dict[str, Any]]:
    """ConsumedCapacity as a list, one entry per table charged in order of first charge (batches,
    transactions); empty unless ReturnConsumedCapacity is TOTAL or INDEXES."""
    if mode not in ("TOTAL", "INDEXES"):
        return []
    groups: dict[str, list[Charge]] = {}
    for entry in record.charges:
        groups.setdefault(entry.label, []).append(entry)
    return [_entry(charges, mode, split) for charges in groups.values()]


def _entry(charges: list[Charge], mode: str, split: bool) -> dict[str, Any]:
    """One table's ConsumedCapacity: the total; with INDEXES also the table's share and one entry per index
    charged, under GlobalSecondaryIndexes / LocalSecondaryIndexes."""
    kind = "WriteCapacityUnits" if charges[0].write else "ReadCapacityUnits"
    total = sum((entry.units for entry in charges), 0.0)
    rendered: dict[str, Any] = {"TableName": charges[0].table, "CapacityUnits": total}
    if split:
        rendered[kind] = total
    if mode != "INDEXES":
        return rendered
    table_units = sum((entry.units for entry in charges if entry.index_name is None), 0.0)
    rendered["Table"] = {"CapacityUnits": table_units, kind: table_units} if split else {"CapacityUnits": table_units}
    for entry in charges:
        if entry.index_name is None:
            continue
        if entry.vector:  # (VectorWriteRequestBytes, apart from capacity units)
            vectors = rendered.setdefault("VectorIndexes", {})
            earlier = vectors.get(entry.index_name, {}).get("VectorWriteRequestBytes", 0)
            vectors[entry.index_name] = {"VectorWriteRequestBytes": earlier + entry.size}
            continue
        member = rendered.setdefault("GlobalSecondaryIndexes" if entry.is_global else "LocalSecondaryIndexes", {})
        previous = member.get(entry.index_name)
        units = entry.units + (previous["CapacityUnits"] if previous else 0.0)
        member[entry.index_name] = {"CapacityUnits": units, kind: units} if split else {"CapacityUnits": units}
    return rendered


_GIGABYTE = float(1 << 30)


def item_collection_metrics(engine: Any, meta: TableMeta, key_item: Item, key: StorageKey) -> dict[str, Any] | None:
    """ItemCollectionMetrics of the item collection a written key belongs to, for tables with an LSI (else None)."""
    if not any(not index.is_global for index in meta.indexes):
        return None
    size = engine.collection_size(meta, key.h, key.pk)
    low = float(math.floor(size / _GIGABYTE))
    return {"ItemCollectionKey": {meta.hash_key.name: key_item[meta.hash_key.name]},
            "SizeEstimateRangeGB": [low, low + 1.0]}
