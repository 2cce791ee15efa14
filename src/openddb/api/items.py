"""Single-item operations: PutItem, GetItem, UpdateItem, DeleteItem.

Each handler validates the whole request and compiles its expressions before storage is touched, then hands
the engine one pure `apply(old_item) -> new_item`; a failed condition raises inside the storage transaction,
which rolls it back, so a rejected request changes nothing.
"""

from __future__ import annotations

from typing import Any

import orjson

from openddb.api import validation as v
from openddb.api.capacity import (
    capacity_with_indexes,
    consumed_capacity,
    item_collection_metrics,
    read_units,
    write_units,
)
from openddb.api.context import RequestContext
from openddb.api.expression_members import expression_attributes, expression_text
from openddb.api.keys import check_index_keys, check_key_untouched, item_key, parse_key
from openddb.api.limits import exceeds_item_size
from openddb.api.rewrite_marks import generated, legacy_origin
from openddb.errors import ConditionalCheckFailedException, ValidationException
from openddb.expressions import (
    Condition,
    Update,
    compile_condition,
    compile_projection,
    compile_update,
    updated_values,
)
from openddb.expressions.resolve import get_path
from openddb.expressions.update import WRONG_TYPE
from openddb.model import Item
from openddb.model.indexes import index_write_units
from openddb.model.schema import TableMeta
from openddb.model.values import MAX_ITEM_SIZE, MSG_ITEM_SIZE, MSG_UPDATE_SIZE, item_size, validate_item
from openddb.storage.base import StorageKey, WriteOp, WriteResult

# A ReturnValues outside the enum is reported without its value or member (see validation.RETURN_VALUES_VIOLATION).
_RETURN_VALUES = v.Str(enum=v.RETURN_VALUES, enum_violation=v.RETURN_VALUES_VIOLATION)
_TABLE_NAME = v.ItemTableName(required=True, min_len=1, max_len=1024)
_ON_CONDITION_FAILURE = v.Str(enum=("ALL_OLD", "NONE"))
# PutItem and DeleteItem accept only NONE and ALL_OLD, and word the refusal alike (DeleteItem, as of 2024: boto3
# #4339; PutItem, verified in us-east-1 in 2026 as ExtendDB PR 211 reports, where it had been "Return values set
# to invalid value").
_WRITE_RETURN_VALUES = "ReturnValues can only be ALL_OLD or NONE"
_LEGACY = {"Expected": v.Any_(), "ConditionalOperator": v.Str(enum=("AND", "OR"))}

PUT_ITEM = v.Struct({
    "TableName": _TABLE_NAME,
    "Item": v.Any_(required=True),
    "ConditionExpression": v.Str(),
    "ExpressionAttributeNames": v.EXPRESSION_NAMES,
    "ExpressionAttributeValues": v.EXPRESSION_VALUES,
    # (in the order DynamoDB lists their violations)
    "ReturnConsumedCapacity": v.RETURN_CONSUMED_CAPACITY,
    "ReturnValues": _RETURN_VALUES,
    "ReturnItemCollectionMetrics": v.RETURN_ITEM_COLLECTION_METRICS,
    "ReturnValuesOnConditionCheckFailure": _ON_CONDITION_FAILURE,
    **_LEGACY,
})
GET_ITEM = v.Struct({
    "TableName": _TABLE_NAME,
    "Key": v.Any_(required=True),
    "AttributesToGet": v.List(v.Str(), min_len=1),
    "ConsistentRead": v.Bool(),
    "ProjectionExpression": v.Str(),
    "ExpressionAttributeNames": v.EXPRESSION_NAMES,
    "ReturnConsumedCapacity": v.RETURN_CONSUMED_CAPACITY,
})
UPDATE_ITEM = v.Struct({
    "TableName": _TABLE_NAME,
    "Key": v.Any_(required=True),
    "UpdateExpression": v.Str(),
    "ConditionExpression": v.Str(),
    "ExpressionAttributeNames": v.EXPRESSION_NAMES,
    "ExpressionAttributeValues": v.EXPRESSION_VALUES,
    "ReturnValues": _RETURN_VALUES,
    "ReturnConsumedCapacity": v.RETURN_CONSUMED_CAPACITY,
    "ReturnItemCollectionMetrics": v.RETURN_ITEM_COLLECTION_METRICS,
    "ReturnValuesOnConditionCheckFailure": _ON_CONDITION_FAILURE,
    "AttributeUpdates": v.Any_(),
    **_LEGACY,
})
DELETE_ITEM = v.Struct({
    "TableName": _TABLE_NAME,
    "Key": v.Any_(required=True),
    "ConditionExpression": v.Str(),
    "ExpressionAttributeNames": v.EXPRESSION_NAMES,
    "ExpressionAttributeValues": v.EXPRESSION_VALUES,
    "ReturnConsumedCapacity": v.RETURN_CONSUMED_CAPACITY,
    "ReturnValues": _RETURN_VALUES,
    "ReturnItemCollectionMetrics": v.RETURN_ITEM_COLLECTION_METRICS,
    "ReturnValuesOnConditionCheckFailure": _ON_CONDITION_FAILURE,
    **_LEGACY,
})


def condition_of(request: dict[str, Any], attrs: Any) -> Condition | None:
    text = expression_text(request, "ConditionExpression")
    return None if text is None else compile_condition(text, attrs, "ConditionExpression",
                                                       not generated(request, "ConditionExpression"))


def check_condition(condition: Condition | None, old: Item | None, on_failure: str | None) -> None:
    if condition is not None and not condition.evaluate(old):
        raise ConditionalCheckFailedException(item=old if on_failure == "ALL_OLD" and old is not None else None)


def _write_response(request: dict[str, Any], context: RequestContext, meta: Any, units: float,
                    attributes: Item | None, result: WriteResult, key_item: Item, key: StorageKey) -> dict[str, Any]:
    response: dict[str, Any] = {}
    if attributes:
        response["Attributes"] = attributes
    mode = request.get("ReturnConsumedCapacity")
    if mode in ("TOTAL", "INDEXES"):
        index_units = index_write_units(meta, result.old, result.new)
        response["ConsumedCapacity"] = capacity_with_indexes(meta, mode, units, index_units, read=False)
    if request.get("ReturnItemCollectionMetrics") == "SIZE":
        metrics = item_collection_metrics(context.engine, meta, key_item, key)
        if metrics is not None:
            response["ItemCollectionMetrics"] = metrics
    return response


def put_item(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_item_request(PUT_ITEM, request)
    try:
        # Expressions are checked before the table is looked up: they need nothing of it (DynamoDB's order too).
        attrs = expression_attributes(request, ("ConditionExpression",), name_missing=False)
        condition = condition_of(request, attrs)
        attrs.check_all_used()
        meta = context.table(request["TableName"])
        return_values = request.get("ReturnValues") or "NONE"
        if return_values not in ("NONE", "ALL_OLD"):
            raise ValidationException(_WRITE_RETURN_VALUES)
        item = validate_item(request["Item"])
        key_item, key = item_key(meta, item)
        check_index_keys(meta, item)
        if exceeds_item_size(meta, item):
            raise ValidationException(MSG_ITEM_SIZE)
    except ValidationException as error:
        raise v.counted_request_error(error) from None
    on_failure = request.get("ReturnValuesOnConditionCheckFailure")

    def apply(old: Item | None) -> Item | None:
        check_condition(condition, old, on_failure)
        return item

    blind = condition is None and return_values == "NONE" and not meta.indexes and \
        request.get("ReturnConsumedCapacity") not in ("TOTAL", "INDEXES")
    result = context.engine.write([WriteOp(meta, key, apply, blind)])[0]
    units = write_units(max(result.old_size, result.new_size))
    return _write_response(request, context, meta, units, result.old if return_values == "ALL_OLD" else None,
                           result, key_item, key)


def get_item(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_item_request(GET_ITEM, request)
    attrs = expression_attributes(request, ("ProjectionExpression",))
    text = expression_text(request, "ProjectionExpression")
    projection = None if text is None else compile_projection(text, attrs)
    attrs.check_all_used()
    meta = context.table(request["TableName"])
    _, key = parse_key(meta, request["Key"])
    row = context.engine.get(meta, key)
    consistent = bool(request.get("ConsistentRead"))
    response: dict[str, Any] = {}
    if row is not None:
        # The stored JSON is the wire JSON: without a projection it is sent as it is, never parsed.
        response["Item"] = orjson.Fragment(row.data) if projection is None else projection.apply(orjson.loads(row.data))
    mode = request.get("ReturnConsumedCapacity")
    if mode is not None:
        consumed = consumed_capacity(meta, mode, read_units(row.size if row else 0, consistent), read=True)
        if consumed is not None:
            response["ConsumedCapacity"] = consumed
    return response


# UpdateItem's own accounting of the 400 KB limit (see `update_too_large`), in bytes: for the update, for each
# action that writes a value, for each that removes one, and on top for a SET through a list index and for a SET
# whose value is `a + b` or `a - b`.
_UPDATE_BYTES, _WRITE_BYTES, _REMOVE_BYTES, _LIST_INDEX_BYTES, _ARITHMETIC_BYTES = 3, 19, 2, 1, 50


def update_too_large(meta: TableMeta, update: Update, new: Item) -> bool:
    """True if DynamoDB refuses this UpdateItem as too large. It holds an update to two measures:

    * the finished item, as every write is (with its local secondary index entries: `exceeds_item_size`);
    * its own accounting of the update: what the update writes (each written value as it ends, under its
      attribute's name; an element written through a list index as a one-element list), plus 3 bytes for the
      update, 19 for each action that writes a value (SET, ADD, DELETE), 2 for each REMOVE, 1 more for a SET
      through a list index and 50 more for an arithmetic SET. Key attributes and attributes the update leaves
      alone are not counted, so at a one-character key UpdateItem refuses the 409,600-byte item PutItem or a
      transaction's Update stores, and a counter on a large item still moves.

    Sources: bisections of the limit in eu-west-2 published by dynoxide (CHANGELOG entry for its issue 187: 3,
    19 and 2 bytes, list index +1, "an arithmetic assignment such as SET n = n + :one costs fifty more"; issue
    210: untouched attributes left out, from one 10-byte attribute). The 50 bytes rest on that single report.
    The 31-of-33-region capture (2026-10) of the transaction's 409,600-byte item refused by UpdateItem agrees.
    Whether DynamoDB stores a finished item over 400 KB whose untouched attributes leave the update room is
    not recorded: it is refused here, as the documented 400 KB limit says."""
    writes, removes, through_index = update.action_counts
    charge = (_UPDATE_BYTES + _WRITE_BYTES * writes + _REMOVE_BYTES * removes + _LIST_INDEX_BYTES * through_index
              + _ARITHMETIC_BYTES * update.arithmetic_sets)
    local = sum(1 for index in meta.indexes if not index.is_global) if meta.indexes else 0
    # The item's JSON is never shorter than its size, nor than what the update writes: one encoding clears both.
    if len(orjson.dumps(new)) * (1 + local) + charge <= MAX_ITEM_SIZE:
        return False
    if exceeds_item_size(meta, new):
        return True
    written = 0
    for path in update.written_paths():
        value = get_path(new, path)
        if value is not None:
            written += item_size({str(path[0]): value})
            if isinstance(path[-1], int):  # in its list: the list's 3 bytes and the element's 1 (issue 210)
                written += 4
    return written + charge > MAX_ITEM_SIZE


def update_item(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_item_request(UPDATE_ITEM, request, update=True)
    try:
        attrs = expression_attributes(request, ("UpdateExpression", "ConditionExpression"), counted_values=True)
        text = expression_text(request, "UpdateExpression")
        update = None if text is None else compile_update(text, attrs, not generated(request, "UpdateExpression"))
        condition = condition_of(request, attrs)
        attrs.check_all_used()
    except ValidationException as error:
        raise v.counted_request_error(error) from None
    meta = context.table(request["TableName"])
    key_item, key = parse_key(meta, request["Key"])
    check_key_untouched(meta, update)
    return_values = request.get("ReturnValues") or "NONE"
    on_failure = request.get("ReturnValuesOnConditionCheckFailure")
    legacy_updates = legacy_origin(request, "AttributeUpdates") is not None

    def apply(old: Item | None) -> Item | None:
        check_condition(condition, old, on_failure)
        base = old if old is not None else dict(key_item)
        if update is None:
            return base  # no update: an existing item is left untouched, a missing one is created key-only
        try:
            new = update.apply(base, missing=old is None)
        except ValidationException as error:
            if legacy_updates and error.message == WRONG_TYPE:
                raise ValidationException("Type mismatch for attribute to update") from None
            raise
        if old is None and len(new) == len(key_item):
            # Only REMOVE/DELETE actions on a missing item: DynamoDB does not create it.
            return None
        if update_too_large(meta, update, new):
            raise ValidationException(MSG_UPDATE_SIZE)
        check_index_keys(meta, new, updating=True)
        return new

    result = context.engine.write([WriteOp(meta, key, apply)])[0]
    units = write_units(max(result.old_size, result.new_size))
    attributes: Item | None = None
    if return_values == "ALL_OLD":
        attributes = result.old
    elif return_values == "ALL_NEW":
        attributes = result.new
    elif return_values in ("UPDATED_OLD", "UPDATED_NEW") and update is not None:
        source = result.old if return_values == "UPDATED_OLD" else result.new
        attributes = updated_values(update, source) if source is not None else None
    return _write_response(request, context, meta, units, attributes, result, key_item, key)


def delete_item(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_item_request(DELETE_ITEM, request)
    attrs = expression_attributes(request, ("ConditionExpression",))
    condition = condition_of(request, attrs)
    attrs.check_all_used()
    meta = context.table(request["TableName"])
    key_item, key = parse_key(meta, request["Key"])
    return_values = request.get("ReturnValues") or "NONE"
    if return_values not in ("NONE", "ALL_OLD"):
        raise ValidationException(_WRITE_RETURN_VALUES)
    on_failure = request.get("ReturnValuesOnConditionCheckFailure")

    def apply(old: Item | None) -> Item | None:
        check_condition(condition, old, on_failure)
        return None

    blind = condition is None and return_values == "NONE" and not meta.indexes and \
        request.get("ReturnConsumedCapacity") not in ("TOTAL", "INDEXES")
    result = context.engine.write([WriteOp(meta, key, apply, blind)])[0]
    units = write_units(result.old_size)
    return _write_response(request, context, meta, units, result.old if return_values == "ALL_OLD" else None,
                           result, key_item, key)


HANDLERS = {
    "PutItem": put_item,
    "GetItem": get_item,
    "UpdateItem": update_item,
    "DeleteItem": delete_item,
}
