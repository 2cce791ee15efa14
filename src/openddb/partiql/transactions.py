"""ExecuteTransaction: up to 100 PartiQL statements run atomically, by the transaction runner TransactWriteItems
and TransactGetItems use (one engine write, ClientRequestToken idempotency, cancellation reasons, capacity):
writes (INSERT, UPDATE, DELETE) as its actions, or reads (SELECTs of one item each) from one snapshot."""

from __future__ import annotations

from typing import Any

from openddb.api import validation as v
from openddb.api.context import RequestContext
from openddb.api.item_access import check_statement_gets, check_statement_writes
from openddb.api.transactions import MAX_ACTIONS, read_transaction, run_transaction
from openddb.errors import TransactionCanceledException, ValidationException
from openddb.operations import Get, Update, WriteOperation
from openddb.partiql import ast
from openddb.partiql.naming import Renaming, renamed
from openddb.partiql.planner import plan_select, plan_write
from openddb.partiql.statements import DUPLICATE, PARAMETERS, STATEMENT, parameters, parsed

EXECUTE_TRANSACTION = v.Struct({
    "TransactStatements": v.List(v.Struct({
        "Statement": STATEMENT,
        "Parameters": PARAMETERS,
        "ReturnValuesOnConditionCheckFailure": v.Str(enum=("ALL_OLD", "NONE")),
    }), required=True, min_len=1, max_len=MAX_ACTIONS),
    "ClientRequestToken": v.Str(min_len=1, max_len=36),
    "ReturnConsumedCapacity": v.RETURN_CONSUMED_CAPACITY,
})
# The rule: "The entire transaction must consist of either read statements or write statements ... The EXISTS
# function is an exception" (Developer Guide, "Performing transactions with PartiQL for DynamoDB"); a write
# transaction returns nothing ("This statement doesn't return any values for Write operations").
# best guess at both wordings: DynamoDB's are not recorded in the sources searched
MIXED = "The transaction must contain only read statements or only write statements"
NOT_ONE_ITEM = "A transaction's SELECT must read one item, with an equality on every key attribute"


def execute_transaction(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(EXECUTE_TRANSACTION, request)
    entries: list[dict[str, Any]] = request["TransactStatements"]
    statements = []
    for entry in entries:
        statement, count = parsed(entry["Statement"])
        statements.append((statement, parameters(entry.get("Parameters"), count)))
    reads = [isinstance(statement, ast.Select) for statement, _ in statements]
    if any(reads) and not all(reads):
        raise ValidationException(MIXED)
    if all(reads):
        texts = [entry["Statement"] for entry in entries]
        return _read(context, texts, statements, request.get("ReturnConsumedCapacity"))
    actions: list[WriteOperation] = []
    inserts: list[bool] = []
    for entry, (statement, bound) in zip(entries, statements, strict=True):
        assert not isinstance(statement, ast.Select)
        plan = plan_write(context, statement, bound, entry.get("ReturnValuesOnConditionCheckFailure"),
                          False)
        operation = plan.operation
        if isinstance(operation, Update):  # held to the item size limit, as a TransactWriteItems Update is
            operation = operation._replace(size_rule="item")
        actions.append(operation)
        inserts.append(plan.insert)
    if context.access is not None:
        check_statement_writes(context.access, actions)
    try:
        return run_transaction(context, actions, request, request.get("ClientRequestToken"), entries)
    except TransactionCanceledException as cancelled:
        # An INSERT onto an existing key is reported as DuplicateItem (best guess: the code is one the API's
        # BatchStatementErrorCodeEnum lists; its use in cancellation reasons is not recorded).
        reasons = [{"Code": "DuplicateItem", "Message": DUPLICATE}
                   if insert and reason.get("Code") == "ConditionalCheckFailed" else reason
                   for insert, reason in zip(inserts, cancelled.reasons, strict=True)]
        raise TransactionCanceledException(reasons) from None


def _read(context: RequestContext, texts: list[str], statements: list[tuple[Any, Any]],
          mode: str | None) -> dict[str, Any]:
    gets: list[Get] = []
    namings: list[Renaming] = []
    for text, (statement, bound) in zip(texts, statements, strict=True):
        plan, names = plan_select(context, text, statement, bound, True)
        if not isinstance(plan, Get):
            raise ValidationException(NOT_ONE_ITEM)
        gets.append(plan)
        namings.append(names)
    if context.access is not None:
        check_statement_gets(context.access, gets)
    response = read_transaction(context, [(get.table, get.key) for get in gets], [get.projection for get in gets],
                                mode)
    for answer, names in zip(response["Responses"], namings, strict=True):
        if names and "Item" in answer:
            item = renamed(answer["Item"], names)
            if item:
                answer["Item"] = item
            else:  # (as a projection that keeps nothing is answered: see read_transaction)
                del answer["Item"]
    return response


HANDLERS = {"ExecuteTransaction": execute_transaction}
