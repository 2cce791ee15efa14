"""What a vector index holds for an item, and the write checks DynamoDB makes of a vector attribute.

Engine-neutral (imports the model only), so every engine stores the same entries. A vector attribute is a List
of Numbers (the Developer Guide, "Writing items with vector data"; SearchVectors' SearchVector is "provided in
DynamoDB list format", each element "a 32-bit IEEE-754 floating point number"), stored in the index at f32
precision ("Requirements and limitations": "Higher-precision values are accepted but lose precision"). The
entry's vector is packed little-endian float32, `4 * Dimensions` bytes.

An item is in a vector index when it has the vector attribute and, if the index has a HASH element, that
attribute too ("Storage considerations for vector indexes": "Only items that contain a valid vector attribute
(and, if the index defines a partition key, that partition key attribute) are replicated to the index").
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import orjson

from openddb.errors import invalid
from openddb.model import AttributeValue, Item
from openddb.model.schema import KeyAttribute, TableMeta, VectorIndexMeta
from openddb.model.values import item_size

# Tombstones are kept for at least this many changes of their partition (the writers purge older ones), so a
# search's cached matrix at most this many changes behind can be brought up to date from them (`vectors.exact`).
RETAIN = 4096
# An entry as a search reads it: (table partition key, table sort key, packed vector, filters JSON).
EntryRow = tuple[bytes, bytes, bytes, bytes]

# The largest finite float32: a Number beyond it cannot be stored at f32 precision.
F32_MAX = 3.4028234663852886e38


@dataclass(slots=True)
class VectorEntry:
    """An item as a vector index holds it: its search partition (the HASH value as canonical JSON, b"" without a
    HASH element), its packed vector, and its INLINE_FILTER values (canonical JSON text each, None where absent or
    of another type than defined), stored together as `filters_blob`."""

    part: bytes
    vector: bytes
    filters: list[str | None]

    @property
    def filters_blob(self) -> bytes:
        return orjson.dumps(self.filters)


@dataclass(slots=True)
class Changes:
    """What changed in a search partition after a state a search has cached: the table keys whose entries were
    removed (tombstones) and the entries written since (each at its latest state)."""

    removed: list[tuple[bytes, bytes]]
    written: list[EntryRow]


def part_of(value: AttributeValue | None) -> bytes:
    """A search partition's stored form: the HASH value's JSON (numbers and binaries are canonical after
    validation, so equal values give equal bytes), or b"" for an index without a HASH element."""
    return b"" if value is None else orjson.dumps(value)


def pack(value: AttributeValue, dimensions: int) -> bytes | None:
    """The packed float32 vector of a valid vector attribute value, or None if it is not one."""
    elements = value.get("L")
    if not isinstance(elements, list) or len(elements) != dimensions:
        return None
    try:
        return struct.pack(f"<{dimensions}f", *[float(element["N"]) for element in elements])
    except (KeyError, TypeError, OverflowError):
        return None


def entry_of(index: VectorIndexMeta, item: Item | None) -> VectorEntry | None:
    """The entry `index` holds for `item`, or None: no vector attribute, no HASH attribute, or values the write
    checks refuse (only items written before the index was created can hold them: the backfill leaves them out,
    as it does for a GSI's key violations)."""
    if item is None:
        return None
    value = item.get(index.attribute)
    if value is None:
        return None
    hash_key = index.hash_key
    hash_value = None
    if hash_key is not None:
        hash_value = item.get(hash_key.name)
        if hash_value is None or hash_key.type not in hash_value or hash_value[hash_key.type] == "":
            return None
    vector = pack(value, index.dimensions)
    if vector is None:
        return None
    filters = [filter_value(item.get(attribute.name), attribute) for attribute in index.filters]
    return VectorEntry(part_of(hash_value), vector, filters)


def unchanged(index: VectorIndexMeta, old: Item | None, new: Item | None) -> bool:
    """Whether a change leaves every attribute the index's entry is made of as it was (the entry then stays)."""
    if old is None or new is None:
        return old is new
    if old.get(index.attribute) != new.get(index.attribute):
        return False
    hash_key = index.hash_key
    if hash_key is not None and old.get(hash_key.name) != new.get(hash_key.name):
        return False
    return all(old.get(a.name) == new.get(a.name) for a in index.filters)


def filter_value(value: AttributeValue | None, attribute: KeyAttribute) -> str | None:
    """An INLINE_FILTER value as entries hold it (None: absent, or not of the defined type)."""
    return None if value is None or attribute.type not in value else canonical(value)


def canonical(value: AttributeValue) -> str:
    """A value as entries hold filter values and conditions compare them: its JSON text (equal values give equal
    text once validated: numbers normalized, binaries canonical base64)."""
    return orjson.dumps(value).decode()


def check_vectors(meta: TableMeta, item: Item) -> None:
    """Refuse a write whose item holds a vector attribute that is not a List of `Dimensions` Numbers within
    float32's range, or a search-schema attribute of another type than its definition (the Developer Guide's
    "Troubleshooting vector indexes": a write with a vector of the wrong dimensions, or of the wrong type -- a
    String, a Number, a Number Set, a List with a non-number member, where "the error message targets the
    offending element index" -- is rejected). An item lacking the attributes is fine: it stays out of the index."""
    for index in meta.vector_indexes:
        value = item.get(index.attribute)
        if value is not None and not _surely_valid(value, index.dimensions):
            _check_vector(index, value)
        for attribute in ([index.hash_key] if index.hash_key is not None else []) + index.filters:
            found = item.get(attribute.name)
            if found is not None and attribute.type not in found:
                # best guess: the GSI key's wording ("Type mismatch for Index Key"), for a search-schema attribute
                raise invalid(f"Type mismatch for Index Key {attribute.name} Expected: {attribute.type} Actual: "
                              f"{next(iter(found))} IndexName: {index.name}")


# A validated Number is written without an exponent, so one of fewer characters than this is below 10^38, within
# float32's range (3.4 x 10^38); any value lacking "N" reads as this long, and is looked at closely.
_SHORT = 39
_NOT_A_NUMBER = "x" * _SHORT


def _surely_valid(value: AttributeValue, dimensions: int) -> bool:
    """A quick pass that a vector attribute is valid (a List of `dimensions` short Numbers), without converting
    its numbers; False sends it to the exact check, which refuses it or finds it valid after all."""
    elements = value.get("L")
    return isinstance(elements, list) and len(elements) == dimensions and all(
        len(element.get("N", _NOT_A_NUMBER)) < _SHORT for element in elements)


def _check_vector(index: VectorIndexMeta, value: AttributeValue) -> None:
    kind = next(iter(value))
    if kind != "L":
        # best guess: the troubleshooting page names the cause, not the words
        raise invalid(f"Invalid type for vector attribute {index.attribute}: expected a List of Numbers, got "
                      f"{kind} IndexName: {index.name}")
    elements = value["L"]
    if len(elements) != index.dimensions:
        # best guess
        raise invalid(f"Vector dimension mismatch for attribute {index.attribute}: expected {index.dimensions} "
                      f"dimensions, got {len(elements)} IndexName: {index.name}")
    for position, element in enumerate(elements):
        element_kind = next(iter(element))
        if element_kind != "N":
            # best guess
            raise invalid(f"Invalid type for vector attribute {index.attribute}: element at index {position} is "
                          f"{element_kind}, expected N IndexName: {index.name}")
        if abs(float(element["N"])) > F32_MAX:
            # best guess: a Number past float32's range cannot be stored at f32 precision
            raise invalid(f"Vector attribute {index.attribute}: element at index {position} is out of the range "
                          f"of a 32-bit floating point number IndexName: {index.name}")


def projected_names(meta: TableMeta, index: VectorIndexMeta) -> frozenset[str] | None:
    """What a vector index projects, or None for ALL: the table's keys, the search schema's attributes and the
    vector attribute (each counted as a projected attribute: the API Reference, CreateTable's VectorIndexes), and
    INCLUDE's NonKeyAttributes."""
    if index.projection_type == "ALL":
        return None
    names = {*meta.key_names, index.attribute, *(a.name for a in index.filters)}
    if index.hash_key is not None:
        names.add(index.hash_key.name)
    if index.projection_type == "INCLUDE":
        names.update(index.non_key_attributes)
    return frozenset(names)


def vector_write_bytes(meta: TableMeta, old: Item | None, new: Item | None) -> dict[str, float]:
    """VectorWriteRequestBytes per vector index a change writes to: "scales with the size of the data replicated
    to the index", and a write that changes no indexed attribute costs none (Developer Guide, "Monitoring vector
    index capacity"). best guess at the arithmetic: the bytes of the item as the index holds it afterwards (as it
    held it, when the item leaves the index)."""
    charged: dict[str, float] = {}
    for index in meta.vector_indexes:
        before = _held(meta, index, old)
        after = _held(meta, index, new)
        if before != after:
            charged[index.name] = float(item_size(after if after is not None else before or {}))
    return charged


def _held(meta: TableMeta, index: VectorIndexMeta, item: Item | None) -> Item | None:
    if entry_of(index, item) is None or item is None:
        return None
    names = projected_names(meta, index)
    return item if names is None else {name: value for name, value in item.items() if name in names}
