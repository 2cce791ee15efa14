"""Transactions: TransactWriteItems and TransactGetItems.

TransactWriteItems validates every action like its single-item twin before storage is touched, then hands the
engine one `WriteOp` per action in a single `write` call. Every action's condition is evaluated (a failure is
recorded, not raised, so every reason is reported); the last action's apply raises TransactionCanceledException
if any action failed, which rolls the whole storage transaction back. A ClientRequestToken is recorded by the
engine inside that same transaction, so it is committed exactly when the writes are.

Isolation: a server process executes requests one at a time and the engine serialises writers across processes
(SQLite: BEGIN IMMEDIATE), so transactions are serializable with respect to each other and to single-item writes,
and TransactGetItems reads one snapshot. DynamoDB's TransactionConflict (a concurrent transaction in progress on
the same item) cannot arise: a conflicting request simply waits for the storage lock and then runs against the
committed result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from openddb import clock
from openddb.api import validation as v
from openddb.api.capacity import charge, charge_write, consumed_list, item_collection_metrics, read_units, write_units
from openddb.api.context import RequestContext
from openddb.api.expression_members import expression_attributes, expression_text, invalid_value
from openddb.api.item_access import check_gets, check_writes
from openddb.api.keys import KeySchemaMismatch, check_index_keys, check_key_untouched, item_key, parse_key
from openddb.api.limits import exceeds_item_size
from openddb.api.request_digest import canonical_digest
from openddb.errors import (
    IdempotentParameterMismatchException,
    ItemCollectionSizeLimitExceededException,
    TransactionCanceledException,
    ValidationException,
)
from openddb.expressions import (
    Condition,
    ExpressionAttributes,
    Projection,
    Update,
    compile_condition,
    compile_projection,
    compile_update,
)
from openddb.model import Item
from openddb.model.schema import TableMeta
from openddb.model.values import MSG_ITEM_SIZE, MSG_NESTING, item_size, validate_item, validate_value
from openddb.observe.record import RequestRecord
from openddb.operations import ConditionCheck, Delete, Put, WriteOperation
from openddb.operations import Update as UpdateAction
from openddb.storage.base import TOKEN_LIFETIME, RequestToken, StorageKey, TokenInUse, WriteOp, WriteResult

MAX_ACTIONS = 100
MAX_TRANSACTION_BYTES = 4 * 1024 * 1024

_ON_FAILURE = v.Str(enum=("ALL_OLD", "NONE"))
# A member's table: an ARN, or a name held to a table name's rules (3-255 characters of [a-zA-Z0-9_.-]), refused
# as a constraint of that member ('transactItems.1.member.get.tableName', as DynamoDB's own DAX client mirrors the
# service's refusal; 'transactItems.1.member.put.tableName' in public conformance recordings of 2026).
TABLE_REFERENCE = v.ItemTableName(required=True, min_len=1, max_len=1024)
_EXPRESSIONS = {"ExpressionAttributeNames": v.EXPRESSION_NAMES, "ExpressionAttributeValues": v.EXPRESSION_VALUES}
_CONDITION_CHECK = v.Struct({
    "Key": v.Any_(required=True),
    "TableName": TABLE_REFERENCE,
    "ConditionExpression": v.Str(required=True),
    **_EXPRESSIONS,
    "ReturnValuesOnConditionCheckFailure": _ON_FAILURE,
})
_PUT = v.Struct({
    "Item": v.Any_(required=True),
    "TableName": TABLE_REFERENCE,
    "ConditionExpression": v.Str(),
    **_EXPRESSIONS,
    "ReturnValuesOnConditionCheckFailure": _ON_FAILURE,
})
_DELETE = v.Struct({
    "Key": v.Any_(required=True),
    "TableName": TABLE_REFERENCE,
    "ConditionExpression": v.Str(),
    **_EXPRESSIONS,
    "ReturnValuesOnConditionCheckFailure": _ON_FAILURE,
})
_UPDATE = v.Struct({
    "Key": v.Any_(required=True),
    "UpdateExpression": v.Str(required=True),
    "TableName": TABLE_REFERENCE,
    "ConditionExpression": v.Str(),
    **_EXPRESSIONS,
    "ReturnValuesOnConditionCheckFailure": _ON_FAILURE,
})
TRANSACT_WRITE_ITEMS = v.Struct({
    "TransactItems": v.List(v.Struct({"ConditionCheck": _CONDITION_CHECK, "Put": _PUT, "Delete": _DELETE,
                                      "Update": _UPDATE}), required=True, min_len=1, max_len=MAX_ACTIONS),
    "ReturnConsumedCapacity": v.RETURN_CONSUMED_CAPACITY,
    "ReturnItemCollectionMetrics": v.RETURN_ITEM_COLLECTION_METRICS,
    "ClientRequestToken": v.Str(min_len=1, max_len=36),
})
TRANSACT_GET_ITEMS = v.Struct({
    "TransactItems": v.List(v.Struct({"Get": v.Struct({
        "Key": v.Any_(required=True),
        "TableName": TABLE_REFERENCE,
        "ProjectionExpression": v.Str(),
        "ExpressionAttributeNames": v.EXPRESSION_NAMES,
    }, required=True)}), required=True, min_len=1, max_len=MAX_ACTIONS),
    "ReturnConsumedCapacity": v.RETURN_CONSUMED_CAPACITY,
})

ActionKind = Literal["ConditionCheck", "Put", "Delete", "Update"]
_KINDS: tuple[ActionKind, ...] = ("ConditionCheck", "Put", "Delete", "Update")
_NONE = {"Code": "None"}
MULTIPLE_OPERATIONS = "Transaction request cannot include multiple operations on one item"
TOO_LARGE = "Transaction request size has exceeded the maximum allowed size of 4 MB"  # best guess at AWS's text
TOKEN_MISMATCH = "The request uses the same client token as a previous, but non-identical request."


def _member_attributes(body: dict[str, Any], members: tuple[str, ...], *,
                       compared_only: bool = False) -> ExpressionAttributes:
    """A transaction member's expression attributes. Unlike its single-item twin, a member without any expression
    may carry ExpressionAttributeNames/Values: DynamoDB ignores them (captured in 2026)."""
    if not any(body.get(member) is not None for member in members):
        body = {k: v for k, v in body.items() if k not in ("ExpressionAttributeNames", "ExpressionAttributeValues")}
    return expression_attributes(body, members, compared_only=compared_only)


def _written_too_deep(attrs: ExpressionAttributes) -> str | None:
    """The refusal of a value an update expression writes that is nested deeper than an item may be, if any (the
    values were checked only as compared values, which may be deeper)."""
    for name in sorted(attrs.used_values):
        try:
            validate_value(attrs.values[name])
        except ValidationException as error:
            return invalid_value(name, error).message
    return None


def _condition(body: dict[str, Any], attrs: Any) -> Condition | None:
    text = expression_text(body, "ConditionExpression")
    return None if text is None else compile_condition(text, attrs, "ConditionExpression")


@dataclass(slots=True)
class _Draft:
    """One TransactItems entry checked in itself, before any table is looked up: its kind and compiled expressions
    (its item and key are checked against the table later, in `_bind`)."""

    kind: ActionKind
    body: dict[str, Any]
    attrs: ExpressionAttributes | None
    condition: Condition | None = None
    update: Update | None = None
    cancel: str | None = None  # a refusal that cancels the transaction at this action (a value too deep)


def _draft(context: RequestContext, entry: dict[str, Any] | None) -> _Draft:
    """What one entry says in itself: one action, a table ARN of this region, expressions that parse and use every
    placeholder. DynamoDB checks these for every action before it looks any table up (a malformed action 2 is
    refused though action 1's table does not exist), as PutItem checks its expressions before its table."""
    kinds = [kind for kind in _KINDS if entry is not None and entry.get(kind) is not None]
    if len(kinds) > 1:
        raise ValidationException("TransactItems can only contain one of Check, Put, Update or Delete")
    if not kinds:
        raise ValidationException("Invalid Request: TransactWriteRequest should contain Delete or Put or Update "
                                  "request")
    assert entry is not None
    kind = kinds[0]
    body: dict[str, Any] = entry[kind]
    check_table_reference(context, body["TableName"])
    if kind != "Update":
        attrs = _member_attributes(body, ("ConditionExpression",), compared_only=kind == "ConditionCheck")
        condition = _condition(body, attrs)
        attrs.check_all_used()
        return _Draft(kind, body, attrs, condition)
    # A value nested deeper than an item may be is refused only where it would be written: an Update writing one
    # cancels the transaction at this action; one only compared, by a ConditionCheck or an Update's condition, is
    # evaluated (both captured against DynamoDB in most regions, paritysuite PR 178 and issues 228-229).
    deep: str | None = None  # an Update's first value too deep for an item, as refused: it wins over later errors
    members = ("UpdateExpression", "ConditionExpression")
    try:
        attrs = expression_attributes(body, members)
    except ValidationException as error:
        if MSG_NESTING not in (error.message or ""):
            raise
        deep = error.message
        try:
            attrs = expression_attributes(body, members, compared_only=True)
        except ValidationException:
            return _Draft(kind, body, None, cancel=deep)
    try:
        text = expression_text(body, "UpdateExpression")
        assert text is not None
        update = compile_update(text, attrs)
        written = _written_too_deep(attrs) if deep is not None else None
        if written is not None:
            return _Draft(kind, body, None, cancel=written)
        condition = _condition(body, attrs)
        attrs.check_all_used()
    except ValidationException:
        if deep is not None:
            return _Draft(kind, body, None, cancel=deep)
        raise
    return _Draft(kind, body, attrs, condition, update)


def check_table_reference(context: RequestContext, name: str) -> None:
    """A TableName given as an ARN names a table of this region, checked with the request's shape; a name's own
    constraints are the request shape's (`TABLE_REFERENCE`)."""
    if name.startswith("arn:"):
        context.check_table_arn(name)


def _bind(draft: _Draft, meta: TableMeta) -> tuple[WriteOperation | None, int, str | None]:
    """A drafted action against its table, as its single-item twin would be checked; returns it with its size in
    bytes, or (None, size, message) if its key does not fit the key schema, which cancels the transaction rather
    than refusing it (see `transact_write_items`)."""
    kind, body = draft.kind, draft.body
    on_failure = body.get("ReturnValuesOnConditionCheckFailure")
    if kind == "Put":
        item = validate_item(body["Item"])
        mismatch = None
        try:
            key_item, key = item_key(meta, item)
            check_index_keys(meta, item)
        except KeySchemaMismatch as error:
            mismatch = error.message
        size = item_size(item)
        if exceeds_item_size(meta, item, size):
            raise ValidationException(MSG_ITEM_SIZE)
        if mismatch is not None:
            return None, size, mismatch
        return Put(meta, key_item, key, draft.condition, on_failure, False, item), size, None
    try:
        key_item, key = parse_key(meta, body["Key"])
    except KeySchemaMismatch as error:
        mismatch = error.message
    else:
        mismatch = None
    if draft.cancel is not None:
        return None, 0, draft.cancel
    check_key_untouched(meta, draft.update)
    if mismatch is not None:
        return None, 0, mismatch
    # An Update counts what it may write (its values) beside its key: 'the aggregate size of the items' grows by
    # them, so eleven Updates writing 410 KB each are as far past 4 MB as eleven such Puts. (How DynamoDB sizes an
    # Update is not recorded; a Delete or ConditionCheck writes nothing and counts its key, as before.)
    values = draft.attrs.values if draft.attrs is not None else None
    size = item_size(key_item) + (item_size(values) if kind == "Update" and values else 0)
    if kind == "Update":
        return UpdateAction(meta, key_item, key, draft.condition, on_failure, False, draft.update, "item"), size, None
    operation = Delete if kind == "Delete" else ConditionCheck
    return operation(meta, key_item, key, draft.condition, on_failure, False), size, None


def _same_request(existing: RequestToken, record: RequestToken) -> None:
    if existing.request_hash != record.request_hash:
        raise IdempotentParameterMismatchException(TOKEN_MISMATCH)


class _Outcome:
    """Cancellation reasons gathered while the engine runs the actions of one attempt, in order."""

    __slots__ = ("failed", "reasons")

    def __init__(self, count: int) -> None:
        self.reasons: list[dict[str, Any]] = [_NONE] * count
        self.failed = False


def _apply_for(actions: list[WriteOperation], index: int, outcome: _Outcome) -> Callable[[Item | None], Item | None]:
    action = actions[index]
    last = index == len(actions) - 1

    def apply(old: Item | None) -> Item | None:
        if index == 0:  # an engine may retry the whole transaction: start every attempt clean
            outcome.reasons = [_NONE] * len(actions)
            outcome.failed = False
        new, reason = action.outcome(old)
        if reason is not None:
            outcome.reasons[index] = reason
            outcome.failed = True
        if last and outcome.failed:
            raise TransactionCanceledException(outcome.reasons)
        return new

    return apply


def _collection_reasons(actions: list[WriteOperation], outcome: _Outcome,
                        error: ItemCollectionSizeLimitExceededException) -> list[dict[str, Any]]:
    """The cancellation reasons of a transaction whose writes grew an item collection past its limit: the first Put
    or Update into that collection is refused for it (the API Reference's reason code and message), the actions
    evaluated before keep theirs."""
    grew = next(index for index, action in enumerate(actions) if isinstance(action, Put | UpdateAction)
                and (action.table.table_id, action.key.h) == error.collection)
    reasons = list(outcome.reasons)
    reasons[grew] = {"Code": "ItemCollectionSizeLimitExceeded", "Message": error.MESSAGE}
    return reasons


def _charge_reads(record: RequestRecord, reads: Iterable[tuple[TableMeta, StorageKey, int]]) -> None:
    """Charge transactional reads (table, key, item size): 2 RCU per 4 KB."""
    for meta, key, size in reads:
        charge(record, meta, 2 * read_units(size, True), write=False, size=size, key=key)


def _write_charge(action: WriteOperation, result: WriteResult) -> float:
    """Transactional writes cost 2 WCU per KB; a ConditionCheck is billed as a write of the item it reads."""
    reads_only = isinstance(action, ConditionCheck | Delete)
    size = result.old_size if reads_only else max(result.old_size, result.new_size)
    return 2 * write_units(size)


def _collection_metrics(context: RequestContext, actions: list[WriteOperation]) -> dict[str, list[dict[str, Any]]]:
    """ItemCollectionMetrics for the written items of tables with a local secondary index, once per collection."""
    metrics: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple[int, bytes]] = set()
    for action in actions:
        if isinstance(action, ConditionCheck) or (action.table.table_id, action.key.pk) in seen:
            continue
        seen.add((action.table.table_id, action.key.pk))
        metric = item_collection_metrics(context.engine, action.table, action.key_item, action.key)
        if metric is not None:
            metrics.setdefault(action.table.name, []).append(metric)
    return metrics


def _cancel_on_key(count: int, first: tuple[int, str]) -> None:
    reasons = [_NONE] * count
    reasons[first[0]] = {"Code": "ValidationError", "Message": first[1]}
    raise TransactionCanceledException(reasons)


def _replayed(context: RequestContext, request: dict[str, Any], actions: list[WriteOperation],
              existing: RequestToken) -> dict[str, Any]:
    """The answer to a repeat of a committed request: nothing is written; DynamoDB reports reads of the item
    sizes the first request was charged on (a repeated Delete of a 9 KB item reports 6 units, as reported of
    DynamoDB in dynoxide PR 188), or of the items as they are for a token stored without them."""
    mode = request.get("ReturnConsumedCapacity")
    sizes = existing.charged
    if sizes is None or len(sizes) != len(actions):
        rows = context.engine.get_many([(action.table, action.key) for action in actions])
        sizes = [row.size if row else 0 for row in rows]
    _charge_reads(context.record,
                  ((action.table, action.key, size) for action, size in zip(actions, sizes, strict=True)))
    return {"ConsumedCapacity": consumed_list(context.record, mode, split=True)} if mode in ("TOTAL", "INDEXES") else {}


def transact_write_items(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(TRANSACT_WRITE_ITEMS, request)
    # Every action in itself, then every table, then each action against its table: a malformed action is refused
    # whatever table is missing, and a missing table whatever key does not fit its schema.
    drafts = [_draft(context, entry) for entry in request["TransactItems"]]
    metas = [context.table(draft.body["TableName"]) for draft in drafts]
    actions: list[WriteOperation] = []
    total_size = 0
    first_mismatch: tuple[int, str] | None = None
    for position, (draft, meta) in enumerate(zip(drafts, metas, strict=True)):
        action, size, mismatch = _bind(draft, meta)
        if action is not None:
            actions.append(action)
        elif first_mismatch is None:
            first_mismatch = (position, mismatch or "")
        total_size += size
    if first_mismatch is not None:
        # A key that does not fit the schema cancels the transaction before duplicates or conditions are looked
        # at: the first such action carries the reason, every other one None (captured against DynamoDB).
        _cancel_on_key(len(request["TransactItems"]), first_mismatch)
    if total_size > MAX_TRANSACTION_BYTES:
        check_distinct(actions)
        raise ValidationException(TOO_LARGE)
    if context.access is not None:
        check_writes(context.access, actions)
    return run_transaction(context, actions, request, request.get("ClientRequestToken"), request["TransactItems"])


def check_distinct(actions: list[WriteOperation]) -> None:
    """One item may be the target of one action only."""
    targets = {(a.table.table_id, a.key.h, a.key.pk, a.key.sk) for a in actions}
    if len(targets) != len(actions):
        raise ValidationException(MULTIPLE_OPERATIONS)


def run_transaction(context: RequestContext, actions: list[WriteOperation], request: dict[str, Any],
                    token: str | None, identity: Any) -> dict[str, Any]:
    """Write `actions` atomically (each front end's transaction: TransactWriteItems, PartiQL's ExecuteTransaction),
    guarded by a ClientRequestToken if there is one (`identity`: what makes a repeat the same request), and
    answer with the capacity and item collection metrics `request` asks for."""
    check_distinct(actions)
    record: RequestToken | None = None
    if token is not None:
        now = clock.now()
        record = RequestToken(token, canonical_digest(identity), now)
        existing = context.engine.get_token(token)
        if existing is not None and existing.created_at > now - TOKEN_LIFETIME:
            _same_request(existing, record)
            return _replayed(context, request, actions, existing)
    outcome = _Outcome(len(actions))
    ops = [WriteOp(action.table, action.key, _apply_for(actions, index, outcome))
           for index, action in enumerate(actions)]
    try:
        results = context.engine.write(ops, token=record)
    except ItemCollectionSizeLimitExceededException as error:  # cancels, with the reasons found until then
        raise TransactionCanceledException(_collection_reasons(actions, outcome, error)) from None
    except TokenInUse as error:  # another process committed the same token since we looked
        assert record is not None
        _same_request(error.existing, record)
        return _replayed(context, request, actions, error.existing)
    response: dict[str, Any] = {}
    # Only the table's part costs twice: an index write costs what it costs outside a transaction (checked
    # against DynamoDB, as reported in dynoxide PR 188).
    for action, r in zip(actions, results, strict=True):
        charge_write(context.record, action.table, _write_charge(action, r), r, action.key)
    mode = request.get("ReturnConsumedCapacity")
    if mode in ("TOTAL", "INDEXES"):
        response["ConsumedCapacity"] = consumed_list(context.record, mode, split=True)
    if request.get("ReturnItemCollectionMetrics") == "SIZE":
        metrics = _collection_metrics(context, actions)
        if metrics:
            response["ItemCollectionMetrics"] = metrics
    return response


def transact_get_items(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(TRANSACT_GET_ITEMS, request)
    gets: list[tuple[TableMeta, StorageKey]] = []
    projections: list[Projection | None] = []
    first_mismatch: tuple[int, str] | None = None
    bodies = [entry["Get"] for entry in request["TransactItems"]]
    for body in bodies:  # every member in itself first, then every table (as in TransactWriteItems)
        check_table_reference(context, body["TableName"])
        attrs = _member_attributes(body, ("ProjectionExpression",))
        text = expression_text(body, "ProjectionExpression")
        projections.append(None if text is None else compile_projection(text, attrs))
        attrs.check_all_used()
    metas = [context.table(body["TableName"]) for body in bodies]
    for position, (body, meta) in enumerate(zip(bodies, metas, strict=True)):
        try:
            key_item, key = parse_key(meta, body["Key"])
        except KeySchemaMismatch as error:  # cancels, as in TransactWriteItems (captured against DynamoDB)
            first_mismatch = first_mismatch or (position, error.message or "")
        if first_mismatch is None:
            gets.append((meta, key))
            if context.access is not None:
                check_gets(context.access, "dynamodb:GetItem", meta, (key_item,), projections[position])
    if first_mismatch is not None:
        _cancel_on_key(len(request["TransactItems"]), first_mismatch)
    return read_transaction(context, gets, projections, request.get("ReturnConsumedCapacity"))


def read_transaction(context: RequestContext, gets: list[tuple[TableMeta, StorageKey]],
                     projections: list[Projection | None], mode: str | None) -> dict[str, Any]:
    """Read items from one snapshot, as a transaction (TransactGetItems, PartiQL's ExecuteTransaction of reads):
    each answered {"Item": ...} or {} when it is missing; charged 2 read units per 4 KB."""
    # One item read twice is refused as in TransactWriteItems (DynamoDB's answer, relayed by a service built on it).
    if len({(meta.table_id, key) for meta, key in gets}) != len(gets):
        raise ValidationException(MULTIPLE_OPERATIONS)
    rows = context.engine.get_many(gets)
    if sum(row.size for row in rows if row is not None) > MAX_TRANSACTION_BYTES:
        raise ValidationException(TOO_LARGE)
    responses: list[dict[str, Any]] = []
    for row, projection in zip(rows, projections):
        if row is None:
            responses.append({})
            continue
        item = orjson.Fragment(row.data) if projection is None else projection.apply(orjson.loads(row.data))
        # A projection that keeps nothing answers {}, not {"Item": {}} as GetItem does (captured against
        # DynamoDB, ExtendDB PR 81 and dynoxide issue 53).
        responses.append({"Item": item} if projection is None or item else {})
    response: dict[str, Any] = {"Responses": responses}
    _charge_reads(context.record, ((meta, key, row.size if row else 0) for (meta, key), row in zip(gets, rows)))
    if mode in ("TOTAL", "INDEXES"):
        response["ConsumedCapacity"] = consumed_list(context.record, mode, split=True)
    return response


HANDLERS = {
    "TransactWriteItems": transact_write_items,
    "TransactGetItems": transact_get_items,
}
