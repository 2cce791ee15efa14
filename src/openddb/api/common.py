"""Request pieces shared by the item and read operations: keys, expressions, capacity, return values."""

from __future__ import annotations

import math
import re
import time
from typing import Any

import orjson

from openddb.api.legacy import generated
from openddb.errors import LimitExceededException, ValidationException
from openddb.expressions import ExpressionAttributes, Update
from openddb.model import AttributeValue, Item
from openddb.model.indexes import entry_of
from openddb.model.keys import encode_key, partition_hash
from openddb.model.schema import IndexMeta, KeyAttribute, TableMeta
from openddb.model.values import MAX_ITEM_SIZE, MSG_LONG_NAME, item_size, validate_item, validate_value
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


def expression_attributes(request: dict[str, Any], expression_members: tuple[str, ...]) -> ExpressionAttributes:
    """Validate ExpressionAttributeNames/Values for a request whose expressions are `expression_members`."""
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
            nulls = [m for m in value_members]
            verb = "is" if len(nulls) == 1 else "are"
            raise ValidationException("ExpressionAttributeValues can only be specified when using expressions: "
                                      f"{' and '.join(nulls)} {verb} null")
        if not values:
            raise ValidationException("ExpressionAttributeValues must not be empty")
        validated = {}
        for name, raw in values.items():
            if not _VALUE_KEY.fullmatch(name):
                raise ValidationException(
                    f'ExpressionAttributeValues contains invalid key: Syntax error; key: "{name}"')
            try:
                validated[name] = validate_value(raw)
            except ValidationException as error:
                if error.message == MSG_LONG_NAME:  # answered bare, as for an item (recorded against the service)
                    raise
                raise ValidationException(
                    f"ExpressionAttributeValues contains invalid value: {error.message} for key {name}") from None
    return ExpressionAttributes(names, validated)


def expression_text(request: dict[str, Any], member: str) -> str | None:
    """An expression member's text, rejecting empty and over-long strings as DynamoDB does."""
    text: str | None = request.get(member)  # a string: the request shape was validated
    if text is None:
        return None
    if not text:
        raise ValidationException(f"Invalid {member}: The expression can not be empty;")
    if len(text.encode("utf-8")) > MAX_EXPRESSION_BYTES and not generated(request, member):
        # Only a filter's refusal gives the size: captured without it for a projection (2021) and an update
        # expression (2023), with it for a Query's filter (2021); a 2026 report says so of every other kind.
        size = f" expression size: {len(text.encode('utf-8'))}" if member == "FilterExpression" else ""
        raise ValidationException(f"Invalid {member}: Expression size has exceeded the maximum allowed size;{size}")
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


# --- provisioned throughput --------------------------------------------------------------------------------

MAX_THROUGHPUT = 40_000  # the default per-table (and per-index) quota of read and of write capacity units
_HIGHER_LIMITS = "Refer to the Amazon DynamoDB Developer Guide for current limits and how to request higher limits."
# Decreases of a table's (or a global index's) provisioned capacity: four at any time of a UTC day, then one an hour
# after the last one, until the day ends (the Developer Guide's quota, as recorded against DynamoDB in 2026).
DAILY_DECREASES = 4
_DECREASE_INTERVAL = 3600.0
_DAY = 86400.0
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")


def provisioned_units(throughput: dict[str, Any]) -> tuple[int, int]:
    """(read, write) units of a validated ProvisionedThroughput (the quotas are checked on the whole table by
    `check_throughput_quota`)."""
    return int(throughput["ReadCapacityUnits"]), int(throughput["WriteCapacityUnits"])


ACCOUNT_MAX_THROUGHPUT = 80_000  # the default account quota of each, over all provisioned tables and their indexes
_UNITS = (("ReadCapacityUnits", "MaxReadRequestUnits", "ReadUnitsPerSecond", "TableMaxReadCapacityUnits"),
          ("WriteCapacityUnits", "MaxWriteRequestUnits", "WriteUnitsPerSecond", "TableMaxWriteCapacityUnits"))


def check_throughput_quota(engine: Engine, meta: TableMeta, region: str, before: TableMeta | None = None) -> None:
    """DynamoDB's default capacity quotas, in its recorded words and order: the account's 80,000 units over every
    provisioned table and global index; then 40,000 for the table and for each global index (apart: a table's
    indexes are not added to its own); on-demand maximums and warm throughput of at most 40,000 too.

    `before`: the table as it was, for an UpdateTable. Only what the request raises is held to a quota, so a
    table over one (made so by another version, or by creates racing in two workers) can always come down."""
    indexes = [index for index in meta.indexes if index.is_global]
    old_indexes = {index.name: index for index in (before.indexes if before is not None else [])}
    provisioned = meta.billing_mode == "PROVISIONED"
    for position, (unit, on_demand, warm, quota) in enumerate(_UNITS):
        def units(of: TableMeta | IndexMeta | None, position: int = position) -> int:
            if of is None or (isinstance(of, TableMeta) and of.billing_mode != "PROVISIONED"):
                return 0
            return of.read_capacity if position == 0 else of.write_capacity

        def raised(new: int, old: int) -> bool:
            return new > MAX_THROUGHPUT and new > old

        if provisioned:
            requested = units(meta) + sum(units(index) for index in indexes)
            old_total = units(before) + sum(units(old_indexes.get(index.name)) for index in indexes
                                            if before is not None and before.billing_mode == "PROVISIONED")
            # As recorded: raising a table at 40,000 to 40,001 read "reserved by the account: 40136 ... Requested:
            # 40001", so what the table holds now counts in both.
            if requested > old_total:
                reserved = _reserved_units(engine, units)
                if reserved + requested > ACCOUNT_MAX_THROUGHPUT:
                    raise LimitExceededException(
                        f"This request would have caused the {unit} limit to be exceeded for the account in "
                        f"{region}. Current {unit} reserved by the account: {reserved}. Limit: "
                        f"{ACCOUNT_MAX_THROUGHPUT}. Requested: {requested}")
            if raised(units(meta), units(before)):
                raise LimitExceededException(
                    f"The requested {unit}, {units(meta)}, is above the per table maximum for the account in "
                    f"{region}. Per table maximum: {MAX_THROUGHPUT}. {_HIGHER_LIMITS}")
            for index in indexes:
                if raised(units(index), units(old_indexes.get(index.name))):
                    raise LimitExceededException(
                        f"The requested {unit} for index {index.name}, {units(index)}, is above the per index "
                        f"maximum for the account in {region}. Per table maximum: {MAX_THROUGHPUT}. {_HIGHER_LIMITS}")
        limits: list[tuple[str, TableMeta | IndexMeta, TableMeta | IndexMeta | None]] = [("table", meta, before)]
        limits += [(f"index {index.name}", index, old_indexes.get(index.name)) for index in indexes]
        for of, now, then in limits:
            if raised(now.on_demand.get(on_demand, 0), then.on_demand.get(on_demand, 0) if then else 0):
                raise LimitExceededException(
                    f"Subscriber limit exceeded: Requested {on_demand} for OnDemandThroughput for "
                    f"{of.replace('index ', 'index : ')} exceeds {quota} of the account in region {region}")
        for of, now, then in limits:
            if raised(_peak(now, position), _peak(then, position) if then else 0):
                raise LimitExceededException(
                    f"Subscriber limit exceeded: Requested {warm} for WarmThroughput for {of} exceeds {quota} of the "
                    f"account in region {region}")


def _peak(of: TableMeta | IndexMeta, position: int) -> int:
    return of.peak_read if position == 0 else of.peak_write


def _reserved_units(engine: Engine, units: Any) -> int:
    """Units provisioned by every table (with its global indexes) as it stands."""
    total = 0
    for name in engine.list_tables():
        other = engine.get_table(name)
        if other is not None and other.billing_mode == "PROVISIONED":
            total += units(other) + sum(units(index) for index in other.indexes if index.is_global)
    return total


def decreases_today(provisioned: TableMeta | IndexMeta, now: float) -> int:
    """Decreases made during the current UTC day: the count starts again at midnight."""
    last = provisioned.last_decrease
    if last is None or last // _DAY != now // _DAY:
        return 0
    return provisioned.decreases_today


def count_decrease(provisioned: TableMeta | IndexMeta, now: float) -> None:
    """Record a decrease of provisioned capacity, refused past the daily budget as DynamoDB words it."""
    done = decreases_today(provisioned, now)
    last = provisioned.last_decrease
    if done >= DAILY_DECREASES and last is not None and now - last < _DECREASE_INTERVAL:
        allowed = min(last + _DECREASE_INTERVAL, (now // _DAY + 1) * _DAY)
        raise LimitExceededException(
            "Subscriber limit exceeded: Provisioned throughput decreases are limited within a given UTC day. After "
            f"the first {DAILY_DECREASES} decreases, each subsequent decrease in the same UTC day can be performed "
            f"at most once every {int(_DECREASE_INTERVAL)} seconds. Number of decreases today: {done}. Last "
            f"decrease at {_spelled_time(last)}. Next decrease can be made at {_spelled_time(allowed)}")
    provisioned.last_decrease = now
    provisioned.decreases_today = done + 1


def _spelled_time(seconds: float) -> str:
    """A UTC time as DynamoDB spells it in its limit messages: Friday, October 9, 2026 at 1:21:34 AM Coordinated
    Universal Time (English whatever the server's locale)."""
    moment = time.gmtime(seconds)
    hour = moment.tm_hour % 12 or 12
    return (f"{_WEEKDAYS[moment.tm_wday]}, {_MONTHS[moment.tm_mon - 1]} {moment.tm_mday}, {moment.tm_year} at "
            f"{hour}:{moment.tm_min:02d}:{moment.tm_sec:02d} {'AM' if moment.tm_hour < 12 else 'PM'} "
            "Coordinated Universal Time")


# DynamoDB's warm throughput of an on-demand table (read, write units per second), also kept by a table that was
# ever on-demand; a provisioned table's follows its provisioned capacity (probes of real DynamoDB, 2026-10).
ON_DEMAND_WARM = (12000, 4000)


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


def throughput_description(provisioned: TableMeta | IndexMeta) -> dict[str, Any]:
    """The ProvisionedThroughput member that DescribeTable reports for a table or a global index."""
    throughput: dict[str, Any] = {"NumberOfDecreasesToday": decreases_today(provisioned, time.time()),
                                  "ReadCapacityUnits": provisioned.read_capacity,
                                  "WriteCapacityUnits": provisioned.write_capacity}
    if provisioned.last_increase is not None:
        throughput["LastIncreaseDateTime"] = epoch_millis(provisioned.last_increase)
    if provisioned.last_decrease is not None:
        throughput["LastDecreaseDateTime"] = epoch_millis(provisioned.last_decrease)
    return throughput


def check_key_untouched(meta: TableMeta, update: Update | None) -> None:
    """An update expression may not set or remove a primary-key attribute."""
    if update is not None:
        for name in meta.key_names:
            if name in update.assigned_top_level_names:
                raise invalid(f"Cannot update attribute {name}. This attribute is part of the key")
