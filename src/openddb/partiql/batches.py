"""BatchExecuteStatement: up to 25 PartiQL statements, all reads (SELECTs of one item each, as BatchGetItem reads)
or all writes (INSERT, UPDATE, DELETE), each run on its own through the operation layer and answered on its own:
a statement that fails carries an Error {Code, Message, Item} and leaves the others to run."""

from __future__ import annotations

from typing import Any

from openddb.api import validation as v
from openddb.api.capacity import charge, consumed_list
from openddb.api.context import RequestContext
from openddb.api.item_access import check_statement_gets
from openddb.errors import (
    ConditionalCheckFailedException,
    DuplicateItemException,
    DynamoDBError,
    ResourceNotFoundException,
    ValidationException,
)
from openddb.operations import Get
from openddb.partiql import ast
from openddb.partiql.naming import renamed
from openddb.partiql.planner import plan_select, plan_write
from openddb.partiql.statements import (
    EXISTS_OUTSIDE,
    PARAMETERS,
    STATEMENT,
    charge_statement,
    parameters,
    parsed,
    run_write,
)

MAX_STATEMENTS = 25
BATCH_EXECUTE_STATEMENT = v.Struct({
    "Statements": v.List(v.Struct({
        "Statement": STATEMENT,
        "Parameters": PARAMETERS,
        "ConsistentRead": v.Bool(),
        "ReturnValuesOnConditionCheckFailure": v.Str(enum=("ALL_OLD", "NONE")),
    }), required=True, min_len=1, max_len=MAX_STATEMENTS),
    "ReturnConsumedCapacity": v.RETURN_CONSUMED_CAPACITY,
})
# The rules: "The entire batch must consist of either read statements or write statements" and "Each read
# statement ... must specify an equality condition on all key attributes" (API Reference, BatchExecuteStatement).
# best guess at the wording of the refusal: DynamoDB's is not recorded in the sources searched
MIXED = "Batch must consist of either all read statements or all write statements"
# The second rule above: a read of an index, or of more than one item, is refused, that statement alone
# (ValidationError). best guess at the wording, not recorded
NOT_ONE_ITEM = "A SELECT in BatchExecuteStatement must read one item of a table, with an equality on every key " \
    "attribute"
_CODES: dict[type[DynamoDBError], str] = {
    ConditionalCheckFailedException: "ConditionalCheckFailed",
    DuplicateItemException: "DuplicateItem",
    ValidationException: "ValidationError",
    ResourceNotFoundException: "ResourceNotFound",
}


def _error(error: DynamoDBError) -> dict[str, Any]:
    code = next((name for kind, name in _CODES.items() if isinstance(error, kind)), "ValidationError")
    body: dict[str, Any] = {"Code": code, "Message": error.message or ""}
    if isinstance(error, ConditionalCheckFailedException) and error.item is not None:
        body["Item"] = error.item
    return body


def _one(context: RequestContext, entry: dict[str, Any], statement: ast.Statement, capacity: bool) -> dict[str, Any]:
    bound = parameters(entry.get("Parameters"), parsed(entry["Statement"])[1])
    if isinstance(statement, ast.Select):
        plan, names = plan_select(context, entry["Statement"], statement, bound, bool(entry.get("ConsistentRead")))
        if not isinstance(plan, Get):
            raise ValidationException(NOT_ONE_ITEM)
        if context.access is not None:
            check_statement_gets(context.access, (plan,))
        item, size = plan.run(context.engine)
        charge(context.record, plan.table, plan.units(size), write=False, size=size, key=plan.key)
        answer: dict[str, Any] = {"TableName": plan.table.name}
        if item is not None:
            answer["Item"] = renamed(item, names) if names else item
        return answer
    if isinstance(statement, ast.Exists):
        raise ValidationException(EXISTS_OUTSIDE)
    write = plan_write(context, statement, bound, entry.get("ReturnValuesOnConditionCheckFailure"), capacity)
    # charged as the native write of its kind, its secondary indexes' units included (as BatchWriteItem's are)
    charge_statement(context.record, write, run_write(context, write))
    return {"TableName": write.operation.table.name}


def batch_execute_statement(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(BATCH_EXECUTE_STATEMENT, request)
    entries: list[dict[str, Any]] = request["Statements"]
    statements: list[ast.Statement | DynamoDBError] = []
    for entry in entries:
        try:
            statements.append(parsed(entry["Statement"])[0])
        except ValidationException as error:
            statements.append(error)
    reads = {isinstance(statement, ast.Select) for statement in statements
             if not isinstance(statement, DynamoDBError)}
    if len(reads) > 1:
        raise ValidationException(MIXED)
    mode = request.get("ReturnConsumedCapacity")
    responses: list[dict[str, Any]] = []
    for entry, statement in zip(entries, statements, strict=True):
        if isinstance(statement, DynamoDBError):
            responses.append({"Error": _error(statement)})
            continue
        try:
            responses.append(_one(context, entry, statement, mode in ("TOTAL", "INDEXES")))
        except (ConditionalCheckFailedException, DuplicateItemException, ValidationException,
                ResourceNotFoundException) as error:
            responses.append({"Error": _error(error)})
    response: dict[str, Any] = {"Responses": responses}
    if mode in ("TOTAL", "INDEXES"):
        response["ConsumedCapacity"] = consumed_list(context.record, mode)
    return response


HANDLERS = {"BatchExecuteStatement": batch_execute_statement}
