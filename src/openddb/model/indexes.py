"""Secondary index entries: which items an index holds, under which key, and with which attributes.

Engine-neutral, so every engine stores the same entries. An entry's key is `(h, pk, sk)` like a table row's, plus
the item's table key: GSIs may hold many items under one index key.

Key encoding: a one-attribute index key is encoded exactly as a table key (`model/keys.py`), so an LSI shares
its table's partition hash and a Query reuses the table's sort-range code. A multi-attribute key concatenates its
components, each with 0x00 escaped as 0x00 0xFF and terminated by 0x00 0x01: byte order of the result is the
left-to-right order of the components, and "first k components equal" is a byte prefix, so a multi-attribute
sort-key condition is still one range read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from openddb.model import AttributeValue, Item
from openddb.model.keys import encode_key, partition_hash
from openddb.model.schema import IndexMeta, KeyAttribute, TableMeta
from openddb.model.values import item_size
from openddb.vectors.entries import vector_write_bytes

_TERMINATOR = b"\x00\x01"
# An item collection (a partition key's items plus their LSI entries) may hold at most 10 GB. The environment
# variable exists so tests can reach the limit without writing 10 GB.
ITEM_COLLECTION_LIMIT = int(os.environ.get("OPENDDB_ITEM_COLLECTION_LIMIT", 10 * 1024 ** 3))
# The longest value a key attribute may hold: 2,048 bytes in a partition key, 1,024 in a sort key (the Developer
# Guide's "Constraints"; the API layer refuses a write beyond them with its own copy of these numbers).
MAX_PARTITION_BYTES = 2048
MAX_SORT_BYTES = 1024
# Below this many characters a string or base64 value cannot exceed either limit (4 bytes a character at most).
_SURELY_SHORT = MAX_SORT_BYTES // 4


@dataclass(slots=True)
class IndexEntry:
    """One item as an index holds it: the index key (storage form) and the projected item."""

    h: int
    pk: bytes
    sk: bytes
    item: Item
    size: int


def component(encoded: bytes) -> bytes:
    """One component of a multi-attribute key: escaped and terminated (see the module docstring)."""
    return encoded.replace(b"\x00", b"\x00\xff") + _TERMINATOR


def encode_parts(values: list[AttributeValue]) -> bytes:
    """The storage form of an index key made of `values` (one value: the plain table-key encoding)."""
    if len(values) == 1:
        return encode_key(values[0])
    return b"".join(component(encode_key(value)) for value in values)


def projected_names(table: TableMeta, index: IndexMeta) -> frozenset[str] | None:
    """The attribute names an index holds, or None for ALL."""
    if index.projection_type == "ALL":
        return None
    names = set(table.key_names) | set(index.key_names)
    if index.projection_type == "INCLUDE":
        names.update(index.non_key_attributes)
    return frozenset(names)


def project(table: TableMeta, index: IndexMeta, item: Item) -> Item:
    names = projected_names(table, index)
    if names is None:
        return item
    return {name: value for name, value in item.items() if name in names}


def _key_values(item: Item, attributes: list[KeyAttribute], limit: int) -> list[AttributeValue] | None:
    """The item's values for `attributes`, or None if one is absent or cannot be a key: of another type than the
    index defines, an empty string or binary, or longer than `limit` bytes."""
    values = []
    for attribute in attributes:
        value = item.get(attribute.name)
        if value is None or attribute.type not in value:
            return None
        if attribute.type != "N":
            text = value[attribute.type]
            if text == "" or (len(text) > _SURELY_SHORT and len(encode_key(value)) > limit):
                return None
        values.append(value)
    return values


def entry_of(table: TableMeta, index: IndexMeta, item: Item | None, size: int | None = None) -> IndexEntry | None:
    """The entry `index` holds for `item`, or None: an item lacking an index key attribute is not in the index
    (sparse indexes). Nor is one whose value for an index key attribute cannot be a key (another type, an empty
    string or binary, a value over the key size limits): the API layer refuses writes of such items, so only
    items written before a GSI was added can be so, and the Developer Guide ("Detecting and correcting index key
    violations") says its backfill leaves them out of the index without interrupting it. Each attribute of a
    multi-attribute key is held to its own limit, as `api.keys.check_index_keys` holds a write to it.
    `size`, the item's size if the caller knows it, saves recounting it for ALL projections."""
    if item is None:
        return None
    hash_values = _key_values(item, index.hash_keys, MAX_PARTITION_BYTES)
    if hash_values is None:
        return None
    range_values = _key_values(item, index.range_keys, MAX_SORT_BYTES)
    if range_values is None:
        return None
    pk = encode_parts(hash_values)
    sk = encode_parts(range_values) if range_values else b""
    projected = project(table, index, item)
    if projected is item and size is not None:
        return IndexEntry(partition_hash(pk), pk, sk, projected, size)
    return IndexEntry(partition_hash(pk), pk, sk, projected, item_size(projected))


def index_write_units(table: TableMeta, old: Item | None, new: Item | None) -> dict[str, float]:
    """Write capacity each index costs for a change from `old` to `new` (DynamoDB's rules: a put when an item
    enters the index or its projected attributes change, a delete when it leaves, both when its index key
    changes; nothing when it is in the index neither before nor after). Units are 1 KB of the entry (of the
    larger of the old and the new entry when it changes in place). Each vector index the change writes to is
    there too, with its VectorWriteRequestBytes (`vectors.entries.vector_write_bytes`)."""
    units: dict[str, float] = {}
    if old is new:
        return units
    if table.vector_indexes:  # (bytes, not units: `api.capacity` reports them apart)
        units.update(vector_write_bytes(table, old, new))
    if not table.indexes:
        return units
    for index in table.indexes:
        before, after = entry_of(table, index, old), entry_of(table, index, new)
        cost = 0.0
        if before is not None and (after is None or (before.pk, before.sk) != (after.pk, after.sk)):
            cost += _kb(before.size)
            before = None
        if after is not None and (before is None or before.item != after.item):
            # An entry changed in place costs the larger of its two sizes (measured: shrinking a projected
            # attribute from 3 KB to 18 bytes costs the index 3 units).
            cost += _kb(after.size if before is None else max(before.size, after.size))
        if cost:
            units[index.name] = cost
    return units


def _kb(size: int) -> float:
    return float(max(1, -(-size // 1024)))
