"""Request pieces shared by the item and read operations: keys, expressions, capacity, return values (a table's
provisioned capacity and its quotas are in `throughput`)."""

from __future__ import annotations

import hashlib
import math
import re
import time
from contextvars import ContextVar
from typing import Any

import orjson

from openddb.api import validation as v
from openddb.api.legacy import generated
from openddb.errors import ValidationException
from openddb.expressions import ExpressionAttributes, Update
from openddb.model import AttributeValue, Item
from openddb.model.indexes import entry_of
from openddb.model.keys import encode_key, partition_hash
from openddb.model.schema import IndexMeta, KeyAttribute, TableMeta
from openddb.model.values import MAX_ITEM_SIZE, MSG_LONG_NAME, MSG_NESTING, item_size, validate_item, validate_value
from openddb.storage.base import Engine, StorageKey

MAX_HASH_KEY_BYTES = 2048
MAX_RANGE_KEY_BYTES = 1024
MAX_EXPRESSION_BYTES = 4096
_INVALID = "One or more parameter values were invalid: "


def invalid(detail: str) -> ValidationException:
    return ValidationException(_INVALID + detail)


SCHEMA_MISMATCH = "The provided key element does not match the schema"


class KeySchemaMismatch(ValidationException):
    """A key, or a full item's key attributes (of the table or an index), that do not fit the key schema: an
    attribute missing or of the wrong type. A refusal like any other, except in a transaction, which DynamoDB
    cancels on it instead (an empty key value still refuses the whole request), and in BatchWriteItem, which words
    it as a key mismatch."""

    @property
    def type_name(self) -> str:
        return self.namespace + "ValidationException"


# --- keys ----------------------------------------------------------------------------------------------


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
            raise KeySchemaMismatch(f"{_INVALID}Missing the key {attribute.name} in the item")
        if attribute.type not in value:
            actual = next(iter(value))
            raise KeySchemaMismatch(f"{_INVALID}Type mismatch for key {attribute.name} expected: {attribute.type} "
                                    f"actual: {actual}")
    key = meta.key_of(item)
    return key, storage_key(meta, key)


# --- expressions ---------------------------------------------------------------------------------------


# A placeholder is '#' or ':' and then letters, digits or underscores (as the expression lexer reads one).
_NAME_KEY = re.compile(r"#[A-Za-z0-9_]+")
_VALUE_KEY = re.compile(r":[A-Za-z0-9_]+")


def canonical_digest(value: Any) -> bytes:
    """A digest of a JSON value that ignores member order (DynamoDB compares requests and keys, not bytes), for a
    value of any depth: one nested deeper than orjson writes is walked without recursion."""
    try:
        return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).digest()
    except TypeError:
        return _deep_digest(value)


def _deep_digest(value: Any) -> bytes:
    digest = hashlib.sha256()
    pending: list[Any] = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            digest.update(b"{%d" % len(node))
            for key in sorted(node, reverse=True):
                pending.append(node[key])
                pending.append(("key", key))
        elif isinstance(node, list):
            digest.update(b"[%d" % len(node))
            pending.extend(reversed(node))
        else:
            digest.update(orjson.dumps(node[1] if isinstance(node, tuple) else node) + b",")
    return digest.digest()


# "The maximum length of all substitution variables in an expression is 2 MB. This is the sum of the lengths of all
# ExpressionAttributeNames and ExpressionAttributeValues." (the Developer Guide's quotas page)
MAX_SUBSTITUTION_BYTES = 2 * 1024 * 1024
MSG_SUBSTITUTION_SIZE = "Expression attribute names and values size has exceeded the maximum allowed size"  # a guess
# The length of the request body being handled (set by the dispatcher; unknown, 0, outside a request).
REQUEST_BYTES: ContextVar[int] = ContextVar("request_bytes", default=0)


def expression_attributes(request: dict[str, Any], expression_members: tuple[str, ...], *,
                          compared_only: bool = False, name_missing: bool = True,
                          counted_values: bool = False) -> ExpressionAttributes:
    """Validate ExpressionAttributeNames/Values for a request whose expressions are `expression_members`.

    With `compared_only`, values may be nested deeper than an item (see `validate_value`): the caller refuses one
    that is written. `name_missing` false: values without an expression are refused without naming the missing
    ones (see `values_without_expression`). `counted_values`: an invalid value of the kinds UpdateItem counts is
    refused as "1 validation error detected: ..." without its placeholder (a value nested too deep: 31 of 33
    regions, 2026-10; an empty set: quoted from the AWS CLI, 2026-07)."""
    names = request.get("ExpressionAttributeNames")
    value_members = [m for m in expression_members if m != "ProjectionExpression"]
    # Reads whose only expression is a projection have no ExpressionAttributeValues member: ignored, as any
    # member an operation does not have.
    values = request.get("ExpressionAttributeValues") if value_members else None
    used_members = [m for m in expression_members if request.get(m) is not None]
    if names is not None:
        if not used_members:
            raise ValidationException("ExpressionAttributeNames can only be specified when using expressions")
        if not names:
            raise ValidationException("ExpressionAttributeNames must not be empty")
        for name, real in names.items():
            _check_placeholder_length("ExpressionAttributeNames", name)
            if not _NAME_KEY.fullmatch(name):
                raise ValidationException(f'ExpressionAttributeNames contains invalid key: Syntax error; key: "{name}"')
            if not real:
                raise ValidationException(f"ExpressionAttributeNames contains invalid value: Empty attribute name for "
                                          f"key {name}")
    validated: dict[str, AttributeValue] | None = None
    if values is not None:
        if not isinstance(values, dict):
            validate_item(values)  # raises the deserializer's error for a non-map
        if not any(request.get(m) is not None for m in value_members):
            raise v.values_without_expression(value_members, named=name_missing)
        if not values:
            raise ValidationException("ExpressionAttributeValues must not be empty")
        validated = {}
        for name, raw in values.items():
            _check_placeholder_length("ExpressionAttributeValues", name)
            if not _VALUE_KEY.fullmatch(name):
                raise ValidationException(
                    f'ExpressionAttributeValues contains invalid key: Syntax error; key: "{name}"')
            try:
                validated[name] = validate_value(raw, compared_only=compared_only)
            except ValidationException as error:
                if error.message == MSG_LONG_NAME:  # answered bare, as for an item (recorded against the service)
                    raise
                if counted_values and (error.message == MSG_NESTING or v.is_counted(error.message or "")):
                    raise ValidationException(v.validation_message([error.message or ""])) from None
                raise invalid_value(name, error) from None
    # Their sum cannot pass the body's length: most requests are spared the count.
    if REQUEST_BYTES.get() > MAX_SUBSTITUTION_BYTES and (names or validated) and \
            _substitution_bytes(names, validated) > MAX_SUBSTITUTION_BYTES:
        raise ValidationException(MSG_SUBSTITUTION_SIZE)
    return ExpressionAttributes(names, validated)


def _substitution_bytes(names: dict[str, str] | None, values: dict[str, AttributeValue] | None) -> int:
    """The length of a request's substitution variables: each placeholder and what it stands for, in bytes (a
    value as an attribute's size)."""
    size = item_size(values) if values else 0
    for placeholder, name in (names or {}).items():
        text = placeholder + name
        size += len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return size


def invalid_value(name: str, error: ValidationException) -> ValidationException:
    """The refusal of expression attribute value `name`, whose own refusal is `error`."""
    return ValidationException(f"ExpressionAttributeValues contains invalid value: {error.message} for key {name}")


MAX_PLACEHOLDER_BYTES = 255  # "#name is five bytes" (the Developer Guide's constraints page)


def _check_placeholder_length(member: str, key: str) -> None:
    """A placeholder longer than 255 bytes is refused, before its syntax is looked at (as reported of DynamoDB;
    its wording for this is not captured, so this one only follows the family's form)."""
    if len(key) > MAX_PLACEHOLDER_BYTES // 4 and len(key.encode("utf-8")) > MAX_PLACEHOLDER_BYTES:
        raise ValidationException(f"{member} contains invalid key: The key is longer than {MAX_PLACEHOLDER_BYTES} "
                                  f"bytes; key: \"{key}\"")


def expression_text(request: dict[str, Any], member: str) -> str | None:
    """An expression member's text, rejecting empty and over-long strings as DynamoDB does."""
    text: str | None = request.get(member)  # a string: the request shape was validated
    if text is None:
        return None
    if not text:
        raise ValidationException(f"Invalid {member}: The expression can not be empty;")
    if len(text.encode("utf-8")) > MAX_EXPRESSION_BYTES and not generated(request, member):
        # Every kind's refusal ends with the size (issue 30; quoted from real responses for a ConditionExpression,
        # "expression size: 200004" (scylladb), and a Query's FilterExpression, "expression size: 5872").
        size = len(text.encode("utf-8"))
        raise ValidationException(f"Invalid {member}: Expression size has exceeded the maximum allowed size; "
                                  f"expression size: {size}")
    return text


# --- capacity ------------------------------------------------------------------------------------------


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


# --- multi-item reads ----------------------------------------------------------------------------------


def key_value_bytes(name: str, value: AttributeValue, *, is_hash: bool) -> bytes:
    """Encoded bytes of one validated S/N/B key value, with DynamoDB's empty and oversize key errors."""
    return _key_bytes(name, value, MAX_HASH_KEY_BYTES if is_hash else MAX_RANGE_KEY_BYTES, is_hash)


# --- item size -----------------------------------------------------------------------------------------


def exceeds_item_size(meta: TableMeta, item: Item, size: int | None = None) -> bool:
    """True if a validated item is over DynamoDB's 400 KB limit, which on a table with local secondary indexes
    holds the item together with its entries in them (their key values and projected attributes). `size`: the
    item's size, if the caller has counted it.

    An item's compact JSON is never shorter than its DynamoDB size (every name and value is written out in full,
    plus quotes and type keys that outweigh the 1-3 byte overheads) and an LSI entry is never larger than its
    item, so the exact count, slow in Python, is only needed for items whose JSON, once per copy, is over it."""
    local = [index for index in meta.indexes if not index.is_global] if meta.indexes else []
    if size is None:
        if len(orjson.dumps(item)) * (1 + len(local)) <= MAX_ITEM_SIZE:
            return False
        size = item_size(item)
    total = size
    for index in local:
        entry = entry_of(meta, index, item, size)
        if entry is not None:
            total += entry.size
    return total > MAX_ITEM_SIZE


# --- secondary indexes ---------------------------------------------------------------------------------

_GIGABYTE = float(1 << 30)


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
                raise KeySchemaMismatch(f"{_INVALID}Type mismatch for Index Key {attribute.name} Expected: "
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


def capacity_with_indexes(meta: TableMeta, mode: str | None, table_units: float, index_units: dict[str, float],
                          *, read: bool, split: bool = False) -> dict[str, Any] | None:
    """ConsumedCapacity including what secondary indexes consumed: the total under TOTAL; with INDEXES also the
    table's share and one entry per index touched, under GlobalSecondaryIndexes / LocalSecondaryIndexes."""
    consumed = consumed_capacity(meta, mode, table_units + sum(index_units.values()), read=read, split=split)
    if consumed is None or mode != "INDEXES":
        return consumed
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


def item_collection_metrics(engine: Any, meta: TableMeta, key_item: Item, key: StorageKey) -> dict[str, Any] | None:
    """ItemCollectionMetrics of the item collection a written key belongs to, for tables with an LSI (else None)."""
    if not any(not index.is_global for index in meta.indexes):
        return None
    size = engine.collection_size(meta, key.h, key.pk)
    low = float(math.floor(size / _GIGABYTE))
    return {"ItemCollectionKey": {meta.hash_key.name: key_item[meta.hash_key.name]},
            "SizeEstimateRangeGB": [low, low + 1.0]}


# ItemCount and size in bytes are counted when a description is asked for. A count slower than _SLOW_COUNT (a
# table of some 50,000 items and more) is reused for a while, so that counting takes at most _COUNT_SHARE of a
# worker's time and a waiter polling DescribeTable on a big table does not stall the requests beside it.
# DynamoDB itself refreshes these figures about every six hours.
_SLOW_COUNT = 0.01
_COUNT_SHARE = 0.01
_COUNTS: dict[tuple[str, str | None], tuple[float, tuple[int, int]]] = {}


def counted(engine: Engine, meta: TableMeta, index: IndexMeta | None = None) -> tuple[int, int]:
    """(item count, size in bytes) of a table or of one of its indexes, counted now or by a recent slow count."""
    started = time.monotonic()
    key = (meta.uuid, None if index is None else index.name)
    known = _COUNTS.get(key)
    if known is not None and known[0] > started:
        return known[1]
    figures = engine.table_stats(meta) if index is None else engine.index_stats(meta, index)
    spent = time.monotonic() - started
    if spent > _SLOW_COUNT:
        for stale in [cached for cached, (until, _) in _COUNTS.items() if until <= started]:
            del _COUNTS[stale]
        _COUNTS[key] = (started + spent / _COUNT_SHARE, figures)
    return figures


def epoch_millis(seconds: float) -> float:
    """A timestamp as DynamoDB writes one in a description: epoch seconds to the millisecond."""
    return round(seconds, 3)


def check_key_untouched(meta: TableMeta, update: Update | None) -> None:
    """An update expression may not set or remove a primary-key attribute."""
    if update is not None:
        for name in meta.key_names:
            if name in update.assigned_top_level_names:
                raise invalid(f"Cannot update attribute {name}. This attribute is part of the key")
