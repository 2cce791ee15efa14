"""ExecuteStatement: one PartiQL statement, parsed (once per distinct text), planned into the operation layer's
operations or the Query/Scan DynamoDB would run, and answered in ExecuteStatement's shape."""

from __future__ import annotations

from typing import Any

from openddb.api import validation as v
from openddb.api.capacity import charge, charge_write, consumed, write_units
from openddb.api.context import RequestContext
from openddb.api.item_access import check_statement_gets, check_statement_writes
from openddb.errors import ConditionalCheckFailedException, DuplicateItemException, ValidationException
from openddb.expressions import updated_values
from openddb.model import AttributeValue, Item
from openddb.model.values import validate_value
from openddb.observe.record import RequestRecord
from openddb.operations import Get, Update
from openddb.partiql import ast
from openddb.partiql.naming import Renaming, renamed
from openddb.partiql.pages import read_page
from openddb.partiql.parser import parse
from openddb.partiql.planner import WritePlan, plan_select, plan_write
from openddb.storage.base import WriteResult

_ON_FAILURE = v.Str(enum=("ALL_OLD", "NONE"))
STATEMENT = v.Str(required=True, min_len=1, max_len=8192)
PARAMETERS = v.List(v.Any_(), min_len=1)
EXECUTE_STATEMENT = v.Struct({
    "Statement": STATEMENT,
    "Parameters": PARAMETERS,
    "ConsistentRead": v.Bool(),
    "NextToken": v.Str(min_len=1, max_len=32768),
    "ReturnConsumedCapacity": v.RETURN_CONSUMED_CAPACITY,
    "Limit": v.Int(minimum=1, java="Integer"),
    "ReturnValuesOnConditionCheckFailure": _ON_FAILURE,
})
# best guess at the wordings below: DynamoDB's are not recorded in the sources searched
PARAMETER_COUNT = "Number of parameters in request and statement don't match."
# DynamoDB's words for an INSERT onto an existing key (DuplicateItemException), as a public PartiQL guide recorded
# them from a Go program's call (request id 2QNMCR7HRCVUVNK4VOJGGFQOIVVV4KQNSO5AEMVJF66Q9ASUAAJG)
DUPLICATE = "Duplicate primary key exists in table"
# best guess at the wording: "The EXISTS function can only be used in transactions" (Developer Guide, "Using the
# EXISTS function with PartiQL for DynamoDB"), how DynamoDB refuses it elsewhere is not recorded
EXISTS_OUTSIDE = "EXISTS can only be used in a statement of ExecuteTransaction"

_PARSED: dict[str, tuple[ast.Statement, int]] = {}
_PARSED_MAX = 1024


def parsed(statement: str) -> tuple[ast.Statement, int]:
    """The statement's tree and parameter count, parsed once per distinct text (a bounded cache)."""
    hit = _PARSED.get(statement)
    if hit is None:
        hit = parse(statement)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[statement] = hit
    return hit


def parameters(raw: list[Any] | None, count: int) -> list[AttributeValue]:
    given = raw or []
    if len(given) != count:
        raise ValidationException(PARAMETER_COUNT)
    return [validate_value(value) for value in given]


def execute_statement(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(EXECUTE_STATEMENT, request)
    text: str = request["Statement"]
    statement, count = parsed(text)
    bound = parameters(request.get("Parameters"), count)
    mode = request.get("ReturnConsumedCapacity")
    if isinstance(statement, ast.Select):
        plan, names = plan_select(context, text, statement, bound, bool(request.get("ConsistentRead")))
        if isinstance(plan, Get):
            if context.access is not None:
                check_statement_gets(context.access, (plan,))
            return _get_response(context, plan, mode, names)
        return read_page(context, plan, request, text, names)
    if isinstance(statement, ast.Exists):
        raise ValidationException(EXISTS_OUTSIDE)
    capacity = mode in ("TOTAL", "INDEXES")
    write = plan_write(context, statement, bound, request.get("ReturnValuesOnConditionCheckFailure"),
                       capacity)
    result = run_write(context, write)
    # "For the write operations this value will be empty" (API Reference, ExecuteStatement, Items), but for RETURNING
    response: dict[str, Any] = {"Items": []}
    attributes = returned(write, result)
    if attributes:
        response["Items"] = [attributes]
    charge_statement(context.record, write, result)
    if capacity:
        response["ConsumedCapacity"] = consumed(context.record, mode)
    return response


def run_write(context: RequestContext, write: WritePlan) -> WriteResult:
    if context.access is not None:
        check_statement_writes(context.access, (write.operation,))
    try:
        return context.engine.write([write.operation.write_op()])[0]
    except ConditionalCheckFailedException:
        if write.insert:
            raise DuplicateItemException(DUPLICATE) from None
        raise


def returned(write: WritePlan, result: WriteResult) -> Item | None:
    """What RETURNING asks for: the old or new item, whole or its updated attributes."""
    returning = write.returning
    if returning is None:
        return None
    if returning in ("ALL_OLD", "ALL_NEW"):
        return result.old if returning == "ALL_OLD" else result.new
    source = result.old if returning == "UPDATED_OLD" else result.new
    operation = write.operation
    if source is None or not isinstance(operation, Update) or operation.update is None:
        return None
    return updated_values(operation.update, source)


def charge_statement(record: RequestRecord, write: WritePlan, result: WriteResult) -> None:
    """Charge the statement as the native write of its kind is charged (a DELETE by the item it removed)."""
    charge_write(record, write.operation.table, write_units(max(result.old_size, result.new_size)), result,
                 write.operation.key)


def _get_response(context: RequestContext, get: Get, mode: Any, names: Renaming) -> dict[str, Any]:
    item, size = get.run(context.engine)
    response: dict[str, Any] = {"Items": [] if item is None else [renamed(item, names) if names else item]}
    charge(context.record, get.table, get.units(size), write=False, size=size, key=get.key)
    if mode in ("TOTAL", "INDEXES"):
        response["ConsumedCapacity"] = consumed(context.record, mode)
    return response


HANDLERS = {"ExecuteStatement": execute_statement}
