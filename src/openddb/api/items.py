"""Single-item operations: PutItem, GetItem, UpdateItem, DeleteItem.

Each handler validates the whole request and compiles its expressions before storage is touched, then hands
the engine one pure `apply(old_item) -> new_item`; a failed condition raises inside the storage transaction,
which rolls it back, so a rejected request changes nothing.
"""

from __future__ import annotations

from typing import Any

import orjson

from openddb.api import validation as v
from openddb.api.common import (
    consumed_capacity,
    expression_attributes,
    expression_text,
    invalid,
    item_key,
    parse_key,
    read_units,
    write_units,
)
from openddb.api.context import RequestContext
from openddb.errors import ConditionalCheckFailedException, ValidationException
from openddb.expressions import Condition, compile_condition, compile_projection, compile_update, updated_values
from openddb.model import Item
from openddb.model.values import MAX_ITEM_SIZE, item_size, validate_item
from openddb.storage.base import WriteOp

_RETURN_VALUES = v.Str(enum=("NONE", "ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW"))
_ON_CONDITION_FAILURE = v.Str(enum=("ALL_OLD", "NONE"))
_LEGACY = {"Expected": v.Any_(), "ConditionalOperator": v.Str(enum=("AND", "OR"))}

PUT_ITEM = v.Struct({
    "TableName": v.table_name_or_arn(),
    "Item": v.Any_(required=True),
    "ConditionExpression": v.Str(),
    "ExpressionAttributeNames": v.EXPRESSION_NAMES,
    "ExpressionAttributeValues": v.EXPRESSION_VALUES,
    "ReturnValues": _RETURN_VALUES,
    "ReturnConsumedCapacity": v.RETURN_CONSUMED_CAPACITY,
    "ReturnItemCollectionMetrics": v.RETURN_ITEM_COLLECTION_METRICS,
    "ReturnValuesOnConditionCheckFailure": _ON_CONDITION_FAILURE,
    **_LEGACY,
})
GET_ITEM = v.Struct({
    "TableName": v.table_name_or_arn(),
    "Key": v.Any_(required=True),
    "AttributesToGet": v.List(v.Str(), min_len=1),
    "ConsistentRead": v.Bool(),
    "ProjectionExpression": v.Str(),
    "ExpressionAttributeNames": v.EXPRESSION_NAMES,
    "ReturnConsumedCapacity": v.RETURN_CONSUMED_CAPACITY,
})
UPDATE_ITEM = v.Struct({
    "TableName": v.table_name_or_arn(),
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
    "TableName": v.table_name_or_arn(),
    "Key": v.Any_(required=True),
    "ConditionExpression": v.Str(),
    "ExpressionAttributeNames": v.EXPRESSION_NAMES,
    "ExpressionAttributeValues": v.EXPRESSION_VALUES,
    "ReturnValues": _RETURN_VALUES,
    "ReturnConsumedCapacity": v.RETURN_CONSUMED_CAPACITY,
    "ReturnItemCollectionMetrics": v.RETURN_ITEM_COLLECTION_METRICS,
    "ReturnValuesOnConditionCheckFailure": _ON_CONDITION_FAILURE,
    **_LEGACY,
})


def reject_legacy(request: dict[str, Any], *members: str) -> None:
    """Legacy (pre-expression) parameters are not accepted yet; say so rather than ignore them."""
    for member in members:
        if request.get(member) is not None:
            raise ValidationException(f"The legacy parameter {member} is not supported by this server yet; "
                                      "use the expression parameters")


def condition_of(request: dict[str, Any], attrs: Any) -> Condition | None:
    text = expression_text(request, "ConditionExpression")
    return None if text is None else compile_condition(text, attrs, "ConditionExpression")


def check_condition(condition: Condition | None, old: Item | None, on_failure: str | None) -> None:
    if condition is not None and not condition.evaluate(old):
        raise ConditionalCheckFailedException(item=old if on_failure == "ALL_OLD" and old is not None else None)


def _write_response(request: dict[str, Any], context: RequestContext, meta: Any, units: float,
                    attributes: Item | None) -> dict[str, Any]:
    response: dict[str, Any] = {}
    if attributes:
        response["Attributes"] = attributes
    consumed = consumed_capacity(meta, request.get("ReturnConsumedCapacity"), units, read=False)
    if consumed is not None:
        response["ConsumedCapacity"] = consumed
    return response


def put_item(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(PUT_ITEM, request)
    reject_legacy(request, "Expected", "ConditionalOperator")
    meta = context.table(request["TableName"])
    return_values = request.get("ReturnValues") or "NONE"
    if return_values not in ("NONE", "ALL_OLD"):
        raise ValidationException("ReturnValues can only be ALL_OLD or NONE")
    item = validate_item(request["Item"])
    _, key = item_key(meta, item)
    if item_size(item) > MAX_ITEM_SIZE:
        raise ValidationException("Item size has exceeded the maximum allowed size")
    attrs = expression_attributes(request, ("ConditionExpression",))
    condition = condition_of(request, attrs)
    attrs.check_all_used()
    on_failure = request.get("ReturnValuesOnConditionCheckFailure")

    def apply(old: Item | None) -> Item | None:
        check_condition(condition, old, on_failure)
        return item

    result = context.engine.write([WriteOp(meta, key, apply)])[0]
    units = write_units(max(result.old_size, result.new_size))
    return _write_response(request, context, meta, units, result.old if return_values == "ALL_OLD" else None)


def get_item(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(GET_ITEM, request)
    reject_legacy(request, "AttributesToGet")
    meta = context.table(request["TableName"])
    _, key = parse_key(meta, request["Key"])
    attrs = expression_attributes(request, ("ProjectionExpression",))
    text = expression_text(request, "ProjectionExpression")
    projection = None if text is None else compile_projection(text, attrs)
    attrs.check_all_used()
    row = context.engine.get(meta, key)
    consistent = bool(request.get("ConsistentRead"))
    response: dict[str, Any] = {}
    if row is not None:
        item = orjson.loads(row.data)
        response["Item"] = projection.apply(item) if projection is not None else item
    consumed = consumed_capacity(meta, request.get("ReturnConsumedCapacity"),
                                 read_units(row.size if row else 0, consistent), read=True)
    if consumed is not None:
        response["ConsumedCapacity"] = consumed
    return response


def update_item(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(UPDATE_ITEM, request)
    reject_legacy(request, "Expected", "ConditionalOperator", "AttributeUpdates")
    meta = context.table(request["TableName"])
    key_item, key = parse_key(meta, request["Key"])
    return_values = request.get("ReturnValues") or "NONE"
    attrs = expression_attributes(request, ("UpdateExpression", "ConditionExpression"))
    text = expression_text(request, "UpdateExpression")
    update = None if text is None else compile_update(text, attrs)
    condition = condition_of(request, attrs)
    attrs.check_all_used()
    if update is not None:
        for name in meta.key_names:
            if name in update.assigned_top_level_names:
                raise invalid(f"Cannot update attribute {name}. This attribute is part of the key")
    on_failure = request.get("ReturnValuesOnConditionCheckFailure")

    def apply(old: Item | None) -> Item | None:
        check_condition(condition, old, on_failure)
        base = old if old is not None else dict(key_item)
        new = update.apply(base) if update is not None else base
        if new is base and old is None:
            new = dict(key_item)
        if item_size(new) > MAX_ITEM_SIZE:
            raise ValidationException("Item size to update has exceeded the maximum allowed size")
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
    return _write_response(request, context, meta, units, attributes)


def delete_item(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(DELETE_ITEM, request)
    reject_legacy(request, "Expected", "ConditionalOperator")
    meta = context.table(request["TableName"])
    _, key = parse_key(meta, request["Key"])
    return_values = request.get("ReturnValues") or "NONE"
    if return_values not in ("NONE", "ALL_OLD"):
        raise ValidationException("ReturnValues can only be ALL_OLD or NONE")
    attrs = expression_attributes(request, ("ConditionExpression",))
    condition = condition_of(request, attrs)
    attrs.check_all_used()
    on_failure = request.get("ReturnValuesOnConditionCheckFailure")

    def apply(old: Item | None) -> Item | None:
        check_condition(condition, old, on_failure)
        return None

    result = context.engine.write([WriteOp(meta, key, apply)])[0]
    units = write_units(result.old_size)
    return _write_response(request, context, meta, units, result.old if return_values == "ALL_OLD" else None)


HANDLERS = {
    "PutItem": put_item,
    "GetItem": get_item,
    "UpdateItem": update_item,
    "DeleteItem": delete_item,
}
