"""Primary and index keys in requests and items: checked against the key schema, with DynamoDB's wording, and
turned into their storage form."""

from __future__ import annotations

from typing import Any

from openddb.api.limits import MAX_HASH_KEY_BYTES, MAX_RANGE_KEY_BYTES
from openddb.errors import INVALID_PARAMETERS, ValidationException, invalid
from openddb.expressions import Update
from openddb.model import AttributeValue, Item
from openddb.model.keys import encode_key, partition_hash
from openddb.model.schema import IndexMeta, KeyAttribute, TableMeta
from openddb.model.values import validate_item
from openddb.storage.base import StorageKey
from openddb.vectors.entries import check_vectors

SCHEMA_MISMATCH = "The provided key element does not match the schema"


class KeySchemaMismatch(ValidationException):
    """A key, or a full item's key attributes (of the table or an index), that do not fit the key schema: an
    attribute missing or of the wrong type. A refusal like any other, except in a transaction, which DynamoDB
    cancels on it instead (an empty key value still refuses the whole request), and in BatchWriteItem, which words
    it as a key mismatch."""

    @property
    def type_name(self) -> str:
        return self.namespace + "ValidationException"


def empty_key(name: str, value: AttributeValue) -> ValidationException:
    """An empty S or B value for the key attribute `name`. (DynamoDB words this one "are not valid." rather than
    "were invalid:".)"""
    return ValidationException("One or more parameter values are not valid. The AttributeValue for a key "
                               f"attribute cannot contain an empty {'string' if 'S' in value else 'binary'} "
                               f"value. Key: {name}")


def _key_bytes(name: str, value: AttributeValue, limit: int, is_hash: bool) -> bytes:
    encoded = encode_key(value)
    raw_length = len(encoded) if "N" not in value else len(value["N"])
    if raw_length == 0:
        raise empty_key(name, value)
    if "N" not in value and raw_length > limit:
        if is_hash:
            raise invalid(f"Size of hashkey has exceeded the maximum size limit of{limit} bytes")
        raise invalid(f"Aggregated size of all range keys has exceeded the size limit of {limit} bytes")
    return encoded


def storage_key(meta: TableMeta, key: Item) -> StorageKey:
    """The storage form of a validated primary key (types already checked)."""
    hash_key, range_key = meta.hash_key, meta.range_key
    pk = _key_bytes(hash_key.name, key[hash_key.name], MAX_HASH_KEY_BYTES, True)
    sk = b""
    if range_key is not None:
        sk = _key_bytes(range_key.name, key[range_key.name], MAX_RANGE_KEY_BYTES, False)
    return StorageKey(partition_hash(pk), pk, sk)


def parse_key(meta: TableMeta, raw: Any) -> tuple[Item, StorageKey]:
    """Validate a request's `Key` against the table's key schema."""
    key = validate_item(raw, path="Key")
    names = meta.key_names
    if len(key) != len(names):
        raise KeySchemaMismatch(SCHEMA_MISMATCH)
    for attribute in (meta.hash_key, meta.range_key):
        if attribute is None:
            continue
        value = key.get(attribute.name)
        if value is None or attribute.type not in value:
            raise KeySchemaMismatch(SCHEMA_MISMATCH)
    return key, storage_key(meta, key)


def item_key(meta: TableMeta, item: Item) -> tuple[Item, StorageKey]:
    """Check that a full item carries the table's key attributes with the declared types."""
    for attribute in (meta.hash_key, meta.range_key):
        if attribute is None:
            continue
        value = item.get(attribute.name)
        if value is None:
            raise KeySchemaMismatch(f"{INVALID_PARAMETERS}Missing the key {attribute.name} in the item")
        if attribute.type not in value:
            actual = next(iter(value))
            raise KeySchemaMismatch(f"{INVALID_PARAMETERS}Type mismatch for key {attribute.name} expected: "
                                    f"{attribute.type} actual: {actual}")
    key = meta.key_of(item)
    return key, storage_key(meta, key)


def key_value_bytes(name: str, value: AttributeValue, *, is_hash: bool) -> bytes:
    """Encoded bytes of one validated S/N/B key value, with DynamoDB's empty and oversize key errors."""
    return _key_bytes(name, value, MAX_HASH_KEY_BYTES if is_hash else MAX_RANGE_KEY_BYTES, is_hash)


def empty_index_key(index: IndexMeta, attribute: KeyAttribute, *, updating: bool = False) -> ValidationException:
    """An empty S or B value for an index key attribute, in an item or in a Query of the index; an update
    expression that produces one is worded apart (as DynamoDB does, per 2026 captures)."""
    kind = "string" if attribute.type == "S" else "binary"
    if updating:  # (probed against DynamoDB: this one names no index)
        return ValidationException(
            "One or more parameter values are not valid. The update expression attempted to update a secondary index "
            f"key to a value that is not supported. The AttributeValue for a key attribute cannot contain an empty "
            f"{kind} value.")
    return ValidationException(
        "One or more parameter values are not valid. A value specified for a secondary index key is not supported. "
        f"The AttributeValue for a key attribute cannot contain an empty {kind} value. IndexName: {index.name}, "
        f"IndexKey: {attribute.name}")


def check_index_keys(meta: TableMeta, item: Item, *, updating: bool = False) -> None:
    """Refuse an item whose value for an index key attribute has the wrong type or is empty (an item that merely
    lacks the attribute is fine: it stays out of that index). Call before the write, or inside `apply` for an
    update (`updating`), so that a refused write changes nothing. Where one attribute keys several indexes, the
    first by name is the one named (observed of DynamoDB)."""
    for index in sorted(meta.indexes, key=lambda index: index.name) if len(meta.indexes) > 1 else meta.indexes:
        for attribute in (*index.hash_keys, *index.range_keys):
            value = item.get(attribute.name)
            if value is None:
                continue
            if attribute.type not in value:
                actual = next(iter(value))
                raise KeySchemaMismatch(f"{INVALID_PARAMETERS}Type mismatch for Index Key {attribute.name} Expected: "
                                        f"{attribute.type} Actual: {actual} IndexName: {index.name}")
            if attribute.type != "N" and value[attribute.type] == "":
                raise empty_index_key(index, attribute, updating=updating)
            # A value of 256 characters or fewer cannot pass either limit (4 bytes a character at most).
            if attribute.type != "N" and len(value[attribute.type]) > MAX_RANGE_KEY_BYTES // 4:
                limit = MAX_HASH_KEY_BYTES if attribute in index.hash_keys else MAX_RANGE_KEY_BYTES
                size = len(encode_key(value))
                if size > limit:  # else the item would be stored but out of reach of the index's queries
                    raise invalid(f"Size limit exceeded for Index Key {attribute.name} Actual Size: {size} bytes "
                                  f"Max Size: {limit} bytes IndexName: {index.name}")
    if meta.vector_indexes:
        check_vectors(meta, item)


def check_key_untouched(meta: TableMeta, update: Update | None) -> None:
    """An update expression may not set or remove a primary-key attribute."""
    if update is not None:
        for name in meta.key_names:
            if name in update.assigned_top_level_names:
                raise invalid(f"Cannot update attribute {name}. This attribute is part of the key")
