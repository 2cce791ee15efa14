"""Batches: BatchGetItem and BatchWriteItem.

Every key and item of a batch is validated (and every expression compiled) before storage is touched. A
BatchGetItem reads all its keys from one snapshot (`Engine.get_many`); a BatchWriteItem is one `Engine.write`
call, so a batch rejected for any reason writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from openddb.api import validation as v
from openddb.api.capacity import charge, charge_write, consumed_list, item_collection_metrics, read_units, write_units
from openddb.api.context import RequestContext
from openddb.api.expression_members import expression_attributes, expression_text
from openddb.api.item_access import check_gets, check_writes
from openddb.api.keys import SCHEMA_MISMATCH, KeySchemaMismatch, check_index_keys, item_key, parse_key
from openddb.api.limits import exceeds_item_size
from openddb.api.request_digest import canonical_digest
from openddb.errors import ValidationException, invalid
from openddb.expressions import Projection, compile_projection
from openddb.model import Item
from openddb.model.schema import TableMeta
from openddb.model.values import MSG_ITEM_SIZE, item_size, validate_item
from openddb.operations import Delete, Put
from openddb.storage.base import StorageKey, WriteOp, WriteResult

MAX_GET_KEYS = 100
MAX_WRITE_REQUESTS = 25
MAX_GET_RESPONSE_BYTES = 16 * 1024 * 1024
_DUPLICATES = "Provided list of item keys contains duplicates"
_ARN_LENGTH = (1, 1024)  # a table ARN keying a batch map (the API's TableArn shape)
_TABLE_NAME = re.compile(v.TABLE_NAME_PATTERN)


def _table_key_rules(keys: Iterable[str]) -> str | None:
    """The constraints a batch map's table keys break, as DynamoDB lists them, or None. A name (not an ARN) is
    held to a table name's rules, all three listed whichever it breaks (BatchGetItem for 'bad!name', in public
    conformance recordings of 2026); a key outside 1-1024 characters to the TableArn shape's lengths (those are
    listed alone: best guess, no recording found)."""
    keys = list(keys)
    if any(not _ARN_LENGTH[0] <= len(key) <= _ARN_LENGTH[1] for key in keys):
        return (f"Member must have length less than or equal to {_ARN_LENGTH[1]}, Member must have length greater "
                f"than or equal to {_ARN_LENGTH[0]}")
    if any(not key.startswith("arn:") and not (3 <= len(key) <= 255 and _TABLE_NAME.fullmatch(key)) for key in keys):
        return ("Member must have length less than or equal to 255, Member must have length greater than or equal "
                f"to 3, Member must satisfy regular expression pattern: {v.TABLE_NAME_PATTERN}")
    return None


@dataclass
class _TableMap(v.Map):
    """A batch's RequestItems: a map keyed by table name or ARN. A key breaking its rules is reported against the
    whole map, printed as the JSON it was sent as (as recorded of DynamoDB in 2026, see `_table_key_rules`)."""

    def check(self, value: Any, path: str, errors: list[str]) -> None:
        super().check(value, path, errors)
        rules = _table_key_rules(value)  # (a dict: `Map.check` raised otherwise)
        if rules is not None:
            shown = orjson.dumps(value).decode()
            errors.append(f"Value '{shown}' at '{path}' failed to satisfy constraint: Map keys must satisfy "
                          f"constraint: [{rules}]")


def _check_table_references(context: RequestContext, names: Iterable[str]) -> None:
    """Table ARNs name tables of this region: checked with the request's shape, before any table is looked up."""
    for name in names:
        if name.startswith("arn:"):
            context.check_table_arn(name)


KEYS_AND_ATTRIBUTES = v.Struct({
    "Keys": v.List(v.Any_(), required=True, min_len=1, max_len=MAX_GET_KEYS),
    "AttributesToGet": v.List(v.Str(), min_len=1),
    "ConsistentRead": v.Bool(),
    "ProjectionExpression": v.Str(),
    "ExpressionAttributeNames": v.EXPRESSION_NAMES,
})
_GET_OPTIONS = tuple(name for name in KEYS_AND_ATTRIBUTES.fields if name != "Keys")
BATCH_GET_ITEM = v.Struct({
    "RequestItems": _TableMap(KEYS_AND_ATTRIBUTES, required=True, min_len=1, max_len=MAX_GET_KEYS),
    "ReturnConsumedCapacity": v.RETURN_CONSUMED_CAPACITY,
})
WRITE_REQUEST = v.Struct({
    "PutRequest": v.Struct({"Item": v.Any_(required=True)}),
    "DeleteRequest": v.Struct({"Key": v.Any_(required=True)}),
})
BATCH_WRITE_ITEM = v.Struct({
    "RequestItems": _TableMap(v.List(WRITE_REQUEST), required=True, max_len=MAX_WRITE_REQUESTS,
                               value_len=(1, MAX_WRITE_REQUESTS)),
    "ReturnConsumedCapacity": v.RETURN_CONSUMED_CAPACITY,
    "ReturnItemCollectionMetrics": v.RETURN_ITEM_COLLECTION_METRICS,
})


# --- BatchGetItem ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class _TableGet:
    """One table's part of a BatchGetItem, validated."""

    name: str  # as the request spelled it (name or ARN): responses are keyed by it
    meta: TableMeta
    spec: dict[str, Any]
    projection: Projection | None
    consistent: bool
    keys: list[tuple[Item, StorageKey]] = field(default_factory=list)


def _checked_spec(spec: dict[str, Any]) -> Projection | None:
    """What a table's part of a BatchGetItem says in itself, checked before any table is looked up (as DynamoDB
    does, captured in ExtendDB PR 192): its projection, and no key given twice (compared as sent)."""
    attrs = expression_attributes(spec, ("ProjectionExpression",))
    text = expression_text(spec, "ProjectionExpression")
    projection = None if text is None else compile_projection(text, attrs)
    attrs.check_all_used()
    sent = [canonical_digest(raw) for raw in spec["Keys"]]
    if len(set(sent)) != len(sent):
        raise ValidationException(_DUPLICATES)
    return projection


def _table_get(meta: TableMeta, name: str, spec: dict[str, Any], projection: Projection | None) -> _TableGet:
    part = _TableGet(name, meta, spec, projection, bool(spec.get("ConsistentRead")))
    # Keys are duplicates only as sent (`_checked_spec`): the same number written two ways ("1", "1.0") is read
    # twice, as DynamoDB does (observed against it, scylladb PR 29501).
    for raw in spec["Keys"]:
        part.keys.append(parse_key(meta, raw))
    return part


def _unprocessed_entry(part: _TableGet) -> dict[str, Any]:
    """UnprocessedKeys for a table keeps the request's own options, so it can be sent again as is."""
    entry = {k: part.spec[k] for k in _GET_OPTIONS if part.spec.get(k) is not None}  # (members it knows)
    entry["Keys"] = []
    return entry


def _too_many_keys_alone(request: dict[str, Any]) -> None:
    """When one table's Keys past 100 is the request's only violation, refuse it in DynamoDB's 2026 form, without
    the keys and under the members' own names (captured in dynoxide issue 18); with others, the usual message
    stands."""
    items = request.get("RequestItems")
    if not isinstance(items, dict):
        return
    over = [name for name, spec in items.items()
            if isinstance(spec, dict) and isinstance(spec.get("Keys"), list) and len(spec["Keys"]) > MAX_GET_KEYS]
    if len(over) != 1:
        return
    trimmed = {**items, over[0]: {**items[over[0]], "Keys": items[over[0]]["Keys"][:MAX_GET_KEYS]}}
    v.report_alone(BATCH_GET_ITEM, {**request, "RequestItems": trimmed},
                   f"1 validation error detected: Value at 'RequestItems.{over[0]}.member.Keys' failed to satisfy "
                   f"constraint: Member must have length less than or equal to {MAX_GET_KEYS}")


def batch_get_item(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    if request.get("RequestItems") == {}:
        # As DynamoDB has answered since 2026 in all regions but one (dynoxide PR 198); BatchWriteItem keeps "The
        # requestItems parameter is required for BatchWriteItem".
        raise ValidationException("1 validation error detected: Value at 'RequestItems' failed to satisfy constraint: "
                                  "Member must have length greater than or equal to 1")
    try:
        v.validate(BATCH_GET_ITEM, request)
    except ValidationException:
        _too_many_keys_alone(request)
        raise
    request_items: dict[str, Any] = request["RequestItems"]
    if sum(len(spec["Keys"]) for spec in request_items.values()) > MAX_GET_KEYS:
        raise ValidationException("Too many items requested for the BatchGetItem call")
    _check_table_references(context, request_items)
    projections = [_checked_spec(spec) for spec in request_items.values()]
    # Every table is looked up before any key is held to its table's schema: a table missing wins over a key that
    # does not fit (existence comes before the key schema, as for GetItem).
    metas = [context.table(name) for name in request_items]
    parts = [_table_get(meta, name, spec, projection)
             for meta, (name, spec), projection in zip(metas, request_items.items(), projections, strict=True)]
    if context.access is not None:
        for part in parts:
            check_gets(context.access, "dynamodb:BatchGetItem", part.meta, (key for key, _ in part.keys),
                       part.projection)
    rows = context.engine.get_many([(part.meta, key) for part in parts for _, key in part.keys])

    responses: dict[str, list[Item]] = {part.name: [] for part in parts}
    unprocessed: dict[str, dict[str, Any]] = {}
    budget = MAX_GET_RESPONSE_BYTES
    full = False
    position = 0
    for part in parts:
        charged = False
        for key_item, key in part.keys:
            row = rows[position]
            position += 1
            if not full and row is not None:
                if part.projection is None:
                    item: Any = orjson.Fragment(row.data)  # the stored JSON is the wire JSON
                    size = row.size
                else:
                    item = part.projection.apply(orjson.loads(row.data))
                    size = item_size(item)
                if size > budget:
                    full = True  # this key and every later one go back as UnprocessedKeys
                else:
                    budget -= size
                    responses[part.name].append(item)
            if full:
                unprocessed.setdefault(part.name, _unprocessed_entry(part))["Keys"].append(key_item)
                continue
            size = row.size if row is not None else 0
            charge(context.record, part.meta, read_units(size, part.consistent), write=False, size=size, key=key,
                   label=part.name)
            charged = True
        if not charged:  # (a table whose keys all went back unprocessed is reported too, at 0 units)
            charge(context.record, part.meta, 0.0, write=False, label=part.name)

    response: dict[str, Any] = {"Responses": responses, "UnprocessedKeys": unprocessed}
    mode = request.get("ReturnConsumedCapacity")
    if mode in ("TOTAL", "INDEXES"):
        response["ConsumedCapacity"] = consumed_list(context.record, mode)
    return response


# --- BatchWriteItem --------------------------------------------------------------------------------------


def _write_operation(meta: TableMeta, write: dict[str, Any], wants_capacity: bool) -> Put | Delete:
    """One PutRequest or DeleteRequest held to its table: an unconditional Put or Delete."""
    put = write.get("PutRequest")
    if put is None:  # a DeleteRequest (exactly one of the two was checked)
        key_item, key = parse_key(meta, write["DeleteRequest"]["Key"])
        return Delete(meta, key_item, key, None, None, wants_capacity)
    item = validate_item(put["Item"])
    try:
        key_item, key = item_key(meta, item)
    except KeySchemaMismatch:
        # A table key missing, wrong-typed or non-scalar is answered with the key-only wording here (captured
        # against DynamoDB, as reported in paritysuite/dynamodb-conformance PRs 46 and 60 and dynoxide issue 39).
        raise ValidationException(SCHEMA_MISMATCH) from None
    check_index_keys(meta, item)
    if exceeds_item_size(meta, item):
        raise ValidationException(MSG_ITEM_SIZE)
    return Put(meta, key_item, key, None, None, wants_capacity, item)


def batch_write_item(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    if request.get("RequestItems") == {}:
        raise ValidationException("The requestItems parameter is required for BatchWriteItem")
    # (an empty or over-long request list is reported against the whole map, among the constraint violations)
    v.validate(BATCH_WRITE_ITEM, request)
    request_items: dict[str, Any] = request["RequestItems"]
    for name, requests in request_items.items():
        if requests is None:
            raise ValidationException(f"The batch write request list for a table cannot be null or empty: {name}")
    if sum(len(requests) for requests in request_items.values()) > MAX_WRITE_REQUESTS:
        raise ValidationException("Too many items requested for the BatchWriteItem call")

    for requests in request_items.values():  # every request in itself, before any table is looked up
        for write in requests:
            if (write.get("PutRequest") is None) == (write.get("DeleteRequest") is None):
                # Best guess at the wording: no capture of DynamoDB's message was found.
                raise invalid("A WriteRequest must contain exactly one of PutRequest or DeleteRequest")
    _check_table_references(context, request_items)
    metas = [context.table(name) for name in request_items]  # every table, before any item meets its schema
    wants_capacity = request.get("ReturnConsumedCapacity") in ("TOTAL", "INDEXES")
    ops: list[WriteOp] = []
    operations: list[Put | Delete] = []
    seen_by_table: dict[int, set[StorageKey]] = {}  # by table id: a table may be named by name and by ARN
    for meta, requests in zip(metas, request_items.values(), strict=True):
        seen = seen_by_table.setdefault(meta.table_id, set())
        for write in requests:
            operation = _write_operation(meta, write, wants_capacity)
            if operation.key in seen:
                raise ValidationException(_DUPLICATES)
            seen.add(operation.key)
            operations.append(operation)
            ops.append(operation.write_op())  # blind (no old item read) unless capacity or an index needs it
    tables = [(meta, len(requests)) for meta, requests in zip(metas, request_items.values(), strict=True)]

    if context.access is not None:
        check_writes(context.access, operations, "dynamodb:BatchWriteItem")
    results = context.engine.write(ops)
    return _write_response(context, request, tables, ops, results)


def _write_response(context: RequestContext, request: dict[str, Any], tables: list[tuple[TableMeta, int]],
                    ops: list[WriteOp], results: list[WriteResult]) -> dict[str, Any]:
    """BatchWriteItem's answer: nothing unprocessed, and the capacity and item collection metrics asked for."""
    response: dict[str, Any] = {"UnprocessedItems": {}}
    position = 0
    for meta, count in tables:
        for op, r in zip(ops[position:position + count], results[position:position + count], strict=True):
            charge_write(context.record, meta, write_units(max(r.old_size, r.new_size)), r, op.key)
        position += count
    mode = request.get("ReturnConsumedCapacity")
    if mode in ("TOTAL", "INDEXES"):
        response["ConsumedCapacity"] = consumed_list(context.record, mode)
    if request.get("ReturnItemCollectionMetrics") == "SIZE":
        # Item collection metrics describe the written collections of tables with local secondary indexes.
        collections: dict[str, list[dict[str, Any]]] = {}
        seen_collections: set[tuple[int, bytes]] = set()
        for op, result in zip(ops, results):
            written = result.new if result.new is not None else result.old
            if written is None or (op.table.table_id, op.key.pk) in seen_collections:
                continue
            seen_collections.add((op.table.table_id, op.key.pk))
            metrics = item_collection_metrics(context.engine, op.table, written, op.key)
            if metrics is not None:
                collections.setdefault(op.table.name, []).append(metrics)
        response["ItemCollectionMetrics"] = collections
    return response


HANDLERS = {
    "BatchGetItem": batch_get_item,
    "BatchWriteItem": batch_write_item,
}
