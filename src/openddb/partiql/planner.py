"""From a parsed PartiQL statement and its parameters to what runs it: an operation of the operation layer (Get,
Put, Update, Delete), or, for a SELECT that reads more than one item, the Query or Scan DynamoDB would run.

DynamoDB's choice (Developer Guide, "PartiQL select statements"): a WHERE that fixes the partition key with an
equality runs as a Query, narrowed by conditions on the sort key; any other SELECT scans the table or index with
the WHERE as its filter. A SELECT fixing the whole primary key of a table with nothing else reads that one item.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from openddb.api.context import RequestContext, visible_table
from openddb.api.keys import check_index_keys, check_key_untouched, item_key, parse_key
from openddb.api.limits import exceeds_item_size
from openddb.errors import ResourceNotFoundException, ValidationException
from openddb.expressions import (
    ExpressionAttributes,
    Projection,
    compile_condition,
    compile_projection,
    compile_update,
)
from openddb.model import AttributeValue, Item
from openddb.model.schema import IndexMeta, TableMeta
from openddb.model.values import MSG_ITEM_SIZE, validate_item
from openddb.operations import ConditionCheck, Delete, Get, Put, Update
from openddb.partiql import ast
from openddb.partiql.naming import Renaming, renaming, top_level
from openddb.partiql.translate import Placeholders, bind, condition, update_text
from openddb.storage.base import StorageKey

# DynamoDB's words for a write whose WHERE leaves part of the key open, as applications built on it quote its
# ValidationException (clearskies-py/aws, its DynamoDB backend's note on indexed_columns; an UPDATE's comment in an
# application's subscriber code found beside it)
MISSING_KEY = "Where clause does not contain a mandatory equality on all key attributes"
# DynamoDB's words for a SELECT naming an index the table lacks (without its name, unlike Query's), and for a
# strongly consistent SELECT of a global index, as measured against DynamoDB (dynoxide issue 179, eu-west-2;
# paritysuite/dynamodb-conformance PR 171, eu-west-1: the index is looked up before ConsistentRead is checked)
NO_SUCH_INDEX = "The table does not have the specified index"
CONSISTENT_GLOBAL = "Strongly consistent read is not supported on Global Secondary Indexes"
# ORDER BY orders a partition: a SELECT that scans has none to order. best guess at the wording, as remembered of
# DynamoDB's answer; not found in the sources searched
ORDER_WITHOUT_KEY = ("Must have at least one non-optional hash key condition in WHERE clause when using ORDER BY "
                     "clause.")
# "IN ... at max 50 hash attribute values" (Developer Guide, "PartiQL arithmetic, comparison, and logical
# operators"); best guess at the wording of the refusal, not recorded
MAX_PARTITIONS = 50
TOO_MANY_PARTITIONS = f"IN on the partition key takes at most {MAX_PARTITIONS} values"
# ORDER BY names "A hash key or a sort key to use to order returned results" (Developer Guide, "PartiQL select
# statements for DynamoDB"): of the table or index read. best guess at the wording of the refusal, not recorded
ORDER_BY_NON_KEY = "ORDER BY must name a key attribute of the table or index read"
_RANGE_OPS = frozenset({"=", "<", "<=", ">", ">="})


@dataclass(frozen=True, slots=True)
class NativeRead:
    """A SELECT run as the Query or Scan DynamoDB would run for it: that operation's request members."""

    operation: Literal["Query", "Scan"]
    request: dict[str, Any]
    # A partition key fixed by IN or by OR of equalities: one Query per partition, in order, each with the
    # partition's value under `key_ref` in ExpressionAttributeValues.
    partitions: tuple[AttributeValue, ...] = ()
    key_ref: str = ""


@dataclass(frozen=True, slots=True)
class WritePlan:
    operation: Put | Update | Delete | ConditionCheck
    returning: ast.Returning | None
    insert: bool  # a failed condition is a DuplicateItemException


def table_of(context: RequestContext, name: str) -> TableMeta:
    meta = visible_table(context.engine, context.stored(name))
    if meta is None:
        raise ResourceNotFoundException("Requested resource not found")  # as the native reads say it
    return meta


def conjuncts(node: ast.Expr | None) -> list[ast.Expr]:
    if node is None:
        return []
    if isinstance(node, ast.And):
        return conjuncts(node.left) + conjuncts(node.right)
    return [node]


def _attribute(node: ast.Expr) -> str | None:
    """The attribute a bare one-step path names."""
    return node.steps[0] if isinstance(node, ast.Path) and len(node.steps) == 1 and \
        isinstance(node.steps[0], str) else None


def _is_value(node: ast.Expr) -> bool:
    return isinstance(node, ast.Value | ast.Param | ast.ListOf | ast.MapOf | ast.SetOf)


def equality(node: ast.Expr) -> tuple[str, ast.Expr] | None:
    """(attribute, value) of `attribute = value` (either way round)."""
    if not isinstance(node, ast.Compare) or node.op != "=":
        return None
    for left, right in ((node.left, node.right), (node.right, node.left)):
        name = _attribute(left)
        if name is not None and _is_value(right):
            return name, right
    return None


def _on_range(node: ast.Expr, name: str) -> bool:
    """Whether a conjunct is a sort-key condition a Query's key condition can carry."""
    if isinstance(node, ast.Compare) and node.op in _RANGE_OPS:
        return (_attribute(node.left) == name and _is_value(node.right)) or \
            (_attribute(node.right) == name and _is_value(node.left))
    if isinstance(node, ast.Between):
        return _attribute(node.operand) == name and _is_value(node.low) and _is_value(node.high)
    if isinstance(node, ast.Call) and node.name == "begins_with" and len(node.args) == 2:
        return _attribute(node.args[0]) == name and _is_value(node.args[1])
    return False


def _range_key_parts(range_names: list[str], rest: list[ast.Expr]) -> list[ast.Expr]:
    """The sort-key conditions a Query's key condition can carry, taken out of `rest` (the rest is the filter):
    equalities on a gap-free left prefix of the RANGE attributes, then at most one other condition on the next
    one, as DynamoDB's Query takes a multi-attribute key (a condition past a gap, or after a range, stays in the
    filter rather than making the SELECT fail with the Query's refusal); with one RANGE attribute, one condition
    on it, an equality first."""
    taken: list[ast.Expr] = []
    for name in range_names:
        ranged = [part for part in rest if _on_range(part, name)]
        if not ranged:
            break
        equal = next((part for part in ranged if equality(part) is not None), None)
        taken.append(ranged[0] if equal is None else equal)
        rest.remove(taken[-1])
        if equal is None:
            break
    return taken


def _joined(parts: list[ast.Expr], refs: Placeholders) -> str | None:
    return " AND ".join(condition(part, refs) for part in parts) if parts else None


@dataclass(frozen=True, slots=True)
class _SelectPlan:
    """What a SELECT runs as on one table description, worked out once per statement text: only its parameters
    are bound per request."""

    operation: Literal["Get", "Query", "Scan"]
    request: dict[str, Any]  # Query, Scan: the native read's members but its values (see `refs.nodes`)
    refs: Placeholders
    key: tuple[tuple[str, ast.Expr], ...] = ()  # Get: the value of each key attribute
    projection: Projection | None = None  # Get
    partitions: tuple[ast.Expr, ...] = ()  # Query of several partitions (see NativeRead)
    key_ref: str = ""
    names: Renaming = ()  # how the items read are returned (see naming.py)
    global_index: bool = False  # reads a global secondary index (no strongly consistent read)


_PLANS: dict[tuple[str, int, int], _SelectPlan] = {}
_PLANS_MAX = 1024


def plan_select(context: RequestContext, text: str, select: ast.Select, parameters: list[AttributeValue],
                consistent: bool) -> tuple[Get | NativeRead, Renaming]:
    """What runs the SELECT, and how the items it reads are returned (`naming.renamed`)."""
    meta = table_of(context, select.table)
    cache_key = (text, meta.table_id, meta.version)
    plan = _PLANS.get(cache_key)
    if plan is None:
        plan = _plan_select(meta, select)
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        _PLANS[cache_key] = plan
    if consistent and plan.global_index:
        raise ValidationException(CONSISTENT_GLOBAL)
    if plan.operation == "Get":
        _, key = parse_key(meta, {name: bind(node, parameters) for name, node in plan.key})
        return Get(meta, key, plan.projection, consistent), plan.names
    request = dict(plan.request)
    if plan.refs.nodes:
        request["ExpressionAttributeValues"] = plan.refs.bound(parameters)
    if consistent:
        request["ConsistentRead"] = True
    partitions: list[AttributeValue] = []
    for node in plan.partitions:  # each partition once, in the order the statement names them
        value = bind(node, parameters)
        if value not in partitions:
            partitions.append(value)
    return NativeRead(plan.operation, request, tuple(partitions), plan.key_ref), plan.names


def _partition_options(node: ast.Expr, name: str) -> tuple[ast.Expr, ...] | None:
    """The values of `name IN [...]`, or of `name = a OR name = b ...`: the partitions a SELECT reads."""
    if isinstance(node, ast.In):
        if _attribute(node.operand) == name and all(_is_value(option) for option in node.options):
            return node.options
        return None
    if isinstance(node, ast.Or):
        left, right = _partition_options(node.left, name), _partition_options(node.right, name)
        return None if left is None or right is None else left + right
    found = equality(node)
    return (found[1],) if found is not None and found[0] == name else None


def _key_names(meta: TableMeta, index: IndexMeta | None) -> tuple[list[str], list[str]]:
    """The partition and sort key attributes of the table or index read."""
    if index is not None:
        return [a.name for a in index.hash_keys], [a.name for a in index.range_keys]
    return [meta.hash_key.name], [meta.range_key.name] if meta.range_key is not None else []


def _plan_select(meta: TableMeta, select: ast.Select) -> _SelectPlan:
    index = None
    if select.index is not None:
        index = meta.index(select.index)
        if index is None:
            raise ValidationException(NO_SUCH_INDEX)
    hash_names, range_names = _key_names(meta, index)
    global_index = index is not None and index.kind == "GLOBAL"
    if any(len(path.steps) != 1 or path.steps[0] not in (*hash_names, *range_names) for path in select.order):
        raise ValidationException(ORDER_BY_NON_KEY)
    fixed: dict[str, ast.Expr] = {}
    rest: list[ast.Expr] = []
    for part in conjuncts(select.where):
        found = equality(part)
        if found is not None and found[0] in hash_names and found[0] not in fixed:
            fixed[found[0]] = found[1]
        else:
            rest.append(part)
    options: tuple[ast.Expr, ...] = ()
    if len(hash_names) == 1 and not fixed:  # a partition key fixed by IN or OR: a Query per partition
        for part in rest:
            found_options = _partition_options(part, hash_names[0])
            if found_options is not None:
                if len(found_options) > MAX_PARTITIONS:
                    raise ValidationException(TOO_MANY_PARTITIONS)
                options = found_options
                fixed[hash_names[0]] = options[0]
                rest.remove(part)
                break
    refs = Placeholders()
    request: dict[str, Any] = {"TableName": meta.name}
    if index is not None:
        request["IndexName"] = index.name
    names = renaming(select.projection)
    if select.projection:
        paths = top_level(select.projection) if names else select.projection
        request["ProjectionExpression"] = ", ".join(refs.path(path) for path in paths)
    if len(fixed) < len(hash_names):  # the partition key is not fixed: a Scan with the whole WHERE as filter
        if select.ordered:
            raise ValidationException(ORDER_WITHOUT_KEY)
        if select.where is not None:
            request["FilterExpression"] = condition(select.where, refs)
        return _SelectPlan("Scan", {**request, **refs.members()}, refs, names=names, global_index=global_index)
    key_parts: list[ast.Expr] = [ast.Compare("=", ast.Path((name,)), fixed[name]) for name in hash_names]
    key_parts += _range_key_parts(range_names, rest)
    whole_key = [found for found in map(equality, key_parts) if found is not None]
    if index is None and not rest and not options and len(whole_key) == len(hash_names) + len(range_names):
        projection = None
        if select.projection:
            projection = compile_projection(request["ProjectionExpression"], ExpressionAttributes(refs.names, None))
        return _SelectPlan("Get", {}, refs, tuple(whole_key), projection, names=names)
    key_ref = f":{len(refs.nodes)}"  # the first key part's value: the partition key's (see NativeRead.key_ref)
    request["KeyConditionExpression"] = _joined(key_parts, refs)
    filter_text = _joined(rest, refs)
    if filter_text is not None:
        request["FilterExpression"] = filter_text
    if select.descending:
        request["ScanIndexForward"] = False
    return _SelectPlan("Query", {**request, **refs.members()}, refs, partitions=options, key_ref=key_ref,
                       names=names, global_index=global_index)


@dataclass(frozen=True, slots=True)
class _Target:
    """The item an UPDATE or DELETE names: its table, key, and the rest of its WHERE (a condition)."""

    meta: TableMeta
    refs: Placeholders
    key_item: Item
    key: StorageKey
    rest: list[ast.Expr]


def _target(context: RequestContext, table: str, where: ast.Expr, parameters: list[AttributeValue]) -> _Target:
    meta = table_of(context, table)
    refs = Placeholders()
    key, rest = _key_and_condition(meta, where, parameters)
    key_item, storage_key = parse_key(meta, key)
    return _Target(meta, refs, key_item, storage_key, rest)


def _key_and_condition(meta: TableMeta, where: ast.Expr,
                       parameters: list[AttributeValue]) -> tuple[Item, list[ast.Expr]]:
    """A write's WHERE: an equality on every key attribute, and the rest, a condition on the item."""
    key: Item = {}
    rest: list[ast.Expr] = []
    for part in conjuncts(where):
        found = equality(part)
        if found is not None and found[0] in meta.key_names and found[0] not in key:
            key[found[0]] = bind(found[1], parameters)
        else:
            rest.append(part)
    if len(key) != len(meta.key_names):
        raise ValidationException(MISSING_KEY)
    return key, rest


def plan_insert(context: RequestContext, insert: ast.Insert, parameters: list[AttributeValue],
                capacity: bool) -> WritePlan:
    meta = table_of(context, insert.table)
    value = bind(insert.item, parameters)
    if "M" not in value:
        # best guess at the wording for an INSERT whose VALUE is not a map
        raise ValidationException("Unsupported type passed: INSERT VALUE must be a map (a tuple)")
    item = validate_item(value["M"])
    key_item, key = item_key(meta, item)
    check_index_keys(meta, item)
    if exceeds_item_size(meta, item):
        raise ValidationException(MSG_ITEM_SIZE)
    refs = Placeholders()
    text = f"attribute_not_exists({refs.name(meta.hash_key.name)})"
    attrs = ExpressionAttributes(refs.names, None)
    put = Put(meta, key_item, key, compile_condition(text, attrs), None, capacity, item)
    return WritePlan(put, None, True)


def plan_update(context: RequestContext, update: ast.Update, parameters: list[AttributeValue], on_failure: Any,
                capacity: bool) -> WritePlan:
    target = _target(context, update.table, update.where, parameters)
    meta, refs = target.meta, target.refs
    # UPDATE changes an item that exists: DynamoDB does not create one (a missing item fails the condition).
    text = f"attribute_exists({refs.name(meta.hash_key.name)})"
    extra = _joined(target.rest, refs)
    if extra is not None:
        text += f" AND {extra}"  # (each conjunct is atomic or in parentheses already: more are "redundant")
    update_expression = update_text(update.sets, update.removes, refs)
    attrs = ExpressionAttributes(refs.names, refs.bound(parameters))
    compiled = compile_update(update_expression, attrs)
    check_key_untouched(meta, compiled)
    operation = Update(meta, target.key_item, target.key, compile_condition(text, attrs), on_failure,
                       capacity or update.returning is not None, compiled)
    return WritePlan(operation, update.returning, False)


def plan_delete(context: RequestContext, delete: ast.Delete, parameters: list[AttributeValue], on_failure: Any,
                capacity: bool) -> WritePlan:
    target = _target(context, delete.table, delete.where, parameters)
    extra = _joined(target.rest, target.refs)
    compiled = None
    if extra is not None:
        # The rest of the WHERE is checked on an item that is there: "If the DynamoDB table does not have any item
        # with the same primary key ..., SUCCESS is returned with 0 items deleted" (Developer Guide, "PartiQL delete
        # statements for DynamoDB"). (AND binds before OR: the conjuncts need no parentheses.)
        refs = target.refs
        text = f"attribute_not_exists({refs.name(target.meta.hash_key.name)}) OR {extra}"
        compiled = compile_condition(text, ExpressionAttributes(refs.names, refs.bound(parameters)))
    operation = Delete(target.meta, target.key_item, target.key, compiled, on_failure,
                       capacity or delete.returning is not None)
    return WritePlan(operation, delete.returning, False)


def plan_exists(context: RequestContext, exists: ast.Exists, parameters: list[AttributeValue],
                on_failure: Any) -> WritePlan:
    """EXISTS(SELECT ... WHERE <the whole key> [AND ...]): a condition check that the item exists (and meets the
    rest of the WHERE)."""
    if exists.select.where is None:
        raise ValidationException(MISSING_KEY)
    if exists.select.index is not None:
        # "The SELECT statement must specify a full primary key" (Developer Guide, "Using the EXISTS function with
        # PartiQL for DynamoDB"): an index has none. best guess at the wording of the refusal, not recorded
        raise ValidationException("EXISTS must read an item of a table by its full primary key, not an index")
    target = _target(context, exists.select.table, exists.select.where, parameters)
    refs = target.refs
    text = f"attribute_exists({refs.name(target.meta.hash_key.name)})"
    extra = _joined(target.rest, refs)
    if extra is not None:
        text += f" AND {extra}"  # (each conjunct is atomic or in parentheses already: more are "redundant")
    condition_ = compile_condition(text, ExpressionAttributes(refs.names, refs.bound(parameters)))
    return WritePlan(ConditionCheck(target.meta, target.key_item, target.key, condition_, on_failure, False), None,
                     False)


def plan_write(context: RequestContext, statement: ast.Insert | ast.Update | ast.Delete | ast.Exists,
               parameters: list[AttributeValue], on_failure: Any, capacity: bool) -> WritePlan:
    if isinstance(statement, ast.Exists):
        return plan_exists(context, statement, parameters, on_failure)
    if isinstance(statement, ast.Insert):
        return plan_insert(context, statement, parameters, capacity)
    if isinstance(statement, ast.Update):
        return plan_update(context, statement, parameters, on_failure, capacity)
    return plan_delete(context, statement, parameters, on_failure, capacity)
