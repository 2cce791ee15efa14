"""Single-item operations: PutItem, GetItem, UpdateItem, DeleteItem.

Each handler validates the whole request and compiles its expressions before storage is touched, then hands
the engine one pure `apply(old_item) -> new_item`; a failed condition raises inside the storage transaction,
which rolls it back, so a rejected request changes nothing.
"""

from __future__ import annotations

from typing import Any

from openddb.api import validation as v
from openddb.api.capacity import charge, charge_write, consumed, item_collection_metrics, write_units
from openddb.api.context import RequestContext
from openddb.api.expression_members import expression_attributes, expression_text
from openddb.api.item_access import check_gets, check_writes
from openddb.api.keys import check_index_keys, check_key_untouched, item_key, parse_key
from openddb.api.limits import exceeds_item_size
from openddb.errors import ValidationException
from openddb.expressions import Condition, compile_condition, compile_projection, compile_update, updated_values
from openddb.model import Item
from openddb.model.values import MSG_ITEM_SIZE, validate_item
from openddb.operations import Delete, Get, Put, Update
from openddb.storage.base import StorageKey, WriteResult

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


def condition_of(context: RequestContext, request: dict[str, Any], attrs: Any) -> Condition | None:
    generated = context.generated("ConditionExpression")
    text = expression_text(request, "ConditionExpression", generated)
    return None if text is None else compile_condition(text, attrs, "ConditionExpression", not generated)


def _returns_old(request: dict[str, Any], return_values: str) -> bool:
    """Whether the answer needs the old item or its size (return values, capacity)."""
    return return_values != "NONE" or request.get("ReturnConsumedCapacity") in ("TOTAL", "INDEXES")


def _write_response(request: dict[str, Any], context: RequestContext, meta: Any, units: float,
                    attributes: Item | None, result: WriteResult, key_item: Item, key: StorageKey) -> dict[str, Any]:
    response: dict[str, Any] = {}
    if attributes:
        response["Attributes"] = attributes
    charge_write(context.record, meta, units, result, key)
    mode = request.get("ReturnConsumedCapacity")
    if mode is not None and mode != "NONE":
        response["ConsumedCapacity"] = consumed(context.record, mode)
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
        condition = condition_of(context, request, attrs)
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
    put = Put(meta, key_item, key, condition, request.get("ReturnValuesOnConditionCheckFailure"),
              _returns_old(request, return_values), item)
    if context.access is not None:
        check_writes(context.access, (put,))
    result = context.engine.write([put.write_op()])[0]
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
    key_item, key = parse_key(meta, request["Key"])
    get = Get(meta, key, projection, bool(request.get("ConsistentRead")))
    if context.access is not None:
        check_gets(context.access, "dynamodb:GetItem", meta, (key_item,), projection)
    item, size = get.run(context.engine)
    response: dict[str, Any] = {}
    if item is not None:
        response["Item"] = item
    charge(context.record, meta, get.units(size), False, size, key)
    mode = request.get("ReturnConsumedCapacity")
    if mode is not None and mode != "NONE":
        response["ConsumedCapacity"] = consumed(context.record, mode)
    return response


def update_item(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_item_request(UPDATE_ITEM, request, update=True)
    try:
        attrs = expression_attributes(request, ("UpdateExpression", "ConditionExpression"), counted_values=True)
        generated = context.generated("UpdateExpression")
        text = expression_text(request, "UpdateExpression", generated)
        update = None if text is None else compile_update(text, attrs, not generated)
        condition = condition_of(context, request, attrs)
        attrs.check_all_used()
    except ValidationException as error:
        raise v.counted_request_error(error) from None
    meta = context.table(request["TableName"])
    key_item, key = parse_key(meta, request["Key"])
    check_key_untouched(meta, update)
    return_values = request.get("ReturnValues") or "NONE"
    operation = Update(meta, key_item, key, condition, request.get("ReturnValuesOnConditionCheckFailure"),
                       _returns_old(request, return_values), update,
                       legacy_updates=context.legacy is not None and context.legacy.attribute_updates)
    if context.access is not None:
        check_writes(context.access, (operation,))
    result = context.engine.write([operation.write_op()])[0]
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
    condition = condition_of(context, request, attrs)
    attrs.check_all_used()
    meta = context.table(request["TableName"])
    key_item, key = parse_key(meta, request["Key"])
    return_values = request.get("ReturnValues") or "NONE"
    if return_values not in ("NONE", "ALL_OLD"):
        raise ValidationException(_WRITE_RETURN_VALUES)
    delete = Delete(meta, key_item, key, condition, request.get("ReturnValuesOnConditionCheckFailure"),
                    _returns_old(request, return_values))
    if context.access is not None:
        check_writes(context.access, (delete,))
    result = context.engine.write([delete.write_op()])[0]
    units = write_units(result.old_size)
    return _write_response(request, context, meta, units, result.old if return_values == "ALL_OLD" else None,
                           result, key_item, key)


HANDLERS = {
    "PutItem": put_item,
    "GetItem": get_item,
    "UpdateItem": update_item,
    "DeleteItem": delete_item,
}
