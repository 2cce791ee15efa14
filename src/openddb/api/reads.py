"""Multi-item reads: Query and Scan.

Both validate the whole request and compile every expression before storage is touched, then read one page
from an engine iterator: a Query is a range read on one partition (`Engine.query`), a Scan walks a range of
partition hashes (`Engine.scan`; parallel-scan segment i of n is the hash range [i*2^32//n, (i+1)*2^32//n)).
A page stops after `Limit` items *evaluated* or once the items read reach 1 MB, both counted before the
filter, and then carries a LastEvaluatedKey even if nothing follows, as DynamoDB's does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from openddb.api import validation as v
from openddb.api.capacity import charge, consumed, read_units
from openddb.api.context import LegacyOrigin, RequestContext
from openddb.api.expression_members import expression_attributes, expression_text
from openddb.api.index_reads import (
    IndexReadPlan,
    check_filter_names,
    check_projected,
    check_query_start,
    index_for_read,
    key_range,
    needs_fetch,
    read_index_page,
    start_key,
)
from openddb.api.item_access import check_read
from openddb.api.keys import empty_key, key_value_bytes, storage_key
from openddb.errors import DynamoDBError, ValidationException, invalid
from openddb.expressions import (
    Condition,
    ExpressionAttributes,
    Projection,
    compile_condition,
    compile_key_condition,
    compile_projection,
)
from openddb.expressions.ast import ExpressionError
from openddb.expressions.compiler import invalid as invalid_expression
from openddb.expressions.keycondition import key_clauses
from openddb.identity.access import key_text
from openddb.model import AttributeValue, Item
from openddb.model.keys import decode_key, encode_key, partition_hash
from openddb.model.schema import IndexMeta, TableMeta
from openddb.model.values import validate_item
from openddb.observe.record import RequestRecord
from openddb.operations.reads import MAX_PAGE_BYTES, PageBytes, ReadPlan
from openddb.storage.base import HASH_SPACE, Row, SortRange, StorageKey

_SELECT_VALUES = ("ALL_ATTRIBUTES", "ALL_PROJECTED_ATTRIBUTES", "SPECIFIC_ATTRIBUTES", "COUNT")
_SELECT = v.Str(enum=_SELECT_VALUES)
_COMMON: dict[str, v.Shape] = {
    # A name is held to a table name's rules, as in the item operations: DynamoDB refuses a malformed one rather
    # than looking it up ("Value 'non!existent!table' at 'tableName' failed to satisfy constraint", quoted in
    # scylladb/scylladb PR 12608, 2023, whose issue 12538 found every request so checked). Best guess: an empty
    # one keeps the bare "Value '' at 'tableName'" form (the item operations' 2026 form is not recorded for reads).
    "TableName": v.ItemTableName(required=True, min_len=1, max_len=1024),
    "IndexName": v.Str(min_len=3, max_len=255, pattern=v.TABLE_NAME_PATTERN),
    "Select": _SELECT,
    "AttributesToGet": v.List(v.Str(), min_len=1),
    "Limit": v.Int(minimum=1, java="Integer"),
    "ConsistentRead": v.Bool(),
    "ExclusiveStartKey": v.Any_(),
    "ReturnConsumedCapacity": v.RETURN_CONSUMED_CAPACITY,
    "ProjectionExpression": v.Str(),
    "FilterExpression": v.Str(),
    "ExpressionAttributeNames": v.EXPRESSION_NAMES,
    "ExpressionAttributeValues": v.EXPRESSION_VALUES,
    "ConditionalOperator": v.Str(enum=("AND", "OR")),
}
QUERY = v.Struct({
    **_COMMON,
    "KeyConditions": v.Any_(),
    "QueryFilter": v.Any_(),
    "ScanIndexForward": v.Bool(),
    "KeyConditionExpression": v.Str(),
})
SCAN = v.Struct({
    **_COMMON,
    "ScanFilter": v.Any_(),
    "Segment": v.Int(minimum=0, maximum=999999, java="Integer"),
    "TotalSegments": v.Int(minimum=1, maximum=1000000, java="Integer"),
})

# Captured from real DynamoDB (see the report of issue 3): these arrive inside the validation envelope (but for
# SPECIFIC_ATTRIBUTES without a projection on a Scan).
_PROJECTION_WITH_SELECT = "Cannot specify the ProjectionExpression when choosing to get {}"
_SPECIFIC_WITHOUT_PROJECTION = ("Must specify the AttributesToGet or ProjectionExpression when choosing to get "
                                "SPECIFIC_ATTRIBUTES")
_PROJECTED_WITHOUT_INDEX = "ALL_PROJECTED_ATTRIBUTES can be used only when Querying using an IndexName"
_TYPE_MISMATCH = "Condition parameter type does not match schema type"
_START_INVALID = "The provided starting key is invalid"
_START_SCHEMA = _START_INVALID + ": The provided key element does not match the schema"
_START_OUTSIDE = "The provided starting key is outside query boundaries based on provided condition"
_START_RANGE = "The provided starting key does not match the range key predicate"


def _validate_shape(shape: v.Struct, request: dict[str, Any]) -> None:
    """Shape errors plus the Select/projection rules, reported together in DynamoDB's envelope."""
    errors: list[str] = []
    shape.check(request, "", errors)
    select = request.get("Select")
    has_projection = request.get("ProjectionExpression") is not None or request.get("AttributesToGet") is not None
    if select in _SELECT_VALUES:
        if has_projection and select != "SPECIFIC_ATTRIBUTES":
            errors.append(_PROJECTION_WITH_SELECT.format("only the Count" if select == "COUNT" else select))
        elif select == "SPECIFIC_ATTRIBUTES" and not has_projection:
            errors.append(_SPECIFIC_WITHOUT_PROJECTION)
        elif select == "ALL_PROJECTED_ATTRIBUTES" and request.get("IndexName") is None:
            errors.append(_PROJECTED_WITHOUT_INDEX)
    if errors == [_SPECIFIC_WITHOUT_PROJECTION] and shape is SCAN:
        raise ValidationException(_SPECIFIC_WITHOUT_PROJECTION)  # Scan says it bare (captures of real DynamoDB)
    if errors:
        raise ValidationException(v.validation_message(errors))


def _index_plan(meta: TableMeta, index: IndexMeta, request: dict[str, Any], attrs: ExpressionAttributes, *,
                query: bool, legacy: LegacyOrigin | None, keys_in_filter: bool = False) -> IndexReadPlan:
    base = _compile(meta, request, attrs, query=False, legacy=legacy)
    wanted: set[str] = set()
    if base.filter is not None:
        names = set(base.filter.names)
        if query and not keys_in_filter:
            check_filter_names(meta, index, names, _filter_member(legacy))
        wanted |= names
    if base.projection is not None:
        check_projected(meta, index, tuple(str(path[0]) for path in base.projection.paths))
        wanted |= set(base.projection.top_level_names)
    # Without Select or a projection, an index read returns what the index projects.
    select = request.get("Select") or ("SPECIFIC_ATTRIBUTES" if base.projection else "ALL_PROJECTED_ATTRIBUTES")
    return IndexReadPlan(meta, index, select, base.projection, base.filter, base.limit, base.consistent,
                         base.capacity_mode, needs_fetch(meta, index, request, wanted))


def _query_index(context: RequestContext, request: dict[str, Any], attrs: ExpressionAttributes,
                 meta: TableMeta, index: IndexMeta, page: PageBytes | None) -> dict[str, Any]:
    text = expression_text(request, "KeyConditionExpression", _generated("KeyConditionExpression", context.legacy))
    assert text is not None
    where = key_range(index, text, attrs)
    plan = _index_plan(meta, index, request, attrs, query=True, legacy=context.legacy,
                       keys_in_filter=context.keys_in_filter)
    attrs.check_all_used()
    if context.access is not None:
        _authorize(context, "Query", meta, index.name, tuple(key_text(value) for value in where.hash_values),
                   plan.projection, plan.filter, plan.select)
    forward = request.get("ScanIndexForward", True) is not False
    after = None
    raw_start = request.get("ExclusiveStartKey")
    if raw_start is not None:
        after = start_key(meta, index, raw_start, _START_INVALID)
        check_query_start(after, where)
    named = {key.name: value for key, value in zip(index.hash_keys, where.hash_values, strict=False)}
    return read_index_page(context, plan,
                           context.engine.index_query(meta, index, where.h, where.pk, where.sort, forward, after), page,
                           named)


def _scan_index(context: RequestContext, request: dict[str, Any], attrs: ExpressionAttributes,
                meta: TableMeta, index: IndexMeta, segments: tuple[int, int] | None) -> dict[str, Any]:
    plan = _index_plan(meta, index, request, attrs, query=False, legacy=context.legacy)
    attrs.check_all_used()
    if context.access is not None:
        _authorize(context, "Scan", meta, index.name, (), plan.projection, plan.filter, plan.select)
    low, high = (0, HASH_SPACE) if segments is None else segment_bounds(*segments)
    after = None
    raw_start = request.get("ExclusiveStartKey")
    if raw_start is not None:
        after = start_key(meta, index, raw_start)
        if segments is not None and not low <= after.h < high:
            raise ValidationException(f"{_START_INVALID}: Invalid ExclusiveStartKey. Please use ExclusiveStartKey "
                                      f"with correct Segment. TotalSegments: {segments[1]} Segment: {segments[0]}")
    return read_index_page(context, plan, context.engine.index_scan(meta, index, low, high, after))


def _authorize(context: RequestContext, operation: str, meta: TableMeta, index: str | None,
               leading: tuple[str, ...], projection: Projection | None, filter_: Condition | None,
               select: str) -> None:
    """AccessDeniedException unless the caller may read so (its projection's and filter's attributes; none
    named without a projection). A PartiQL SELECT run as this read (the one front end that sets
    `keys_in_filter`) needs dynamodb:PartiQLSelect instead."""
    assert context.access is not None
    action = "dynamodb:PartiQLSelect" if context.keys_in_filter else "dynamodb:" + operation
    attributes = None
    if projection is not None:
        attributes = projection.top_level_names | (filter_.names if filter_ is not None else frozenset())
    check_read(context.access, action, meta, index, leading, attributes, select)


def _looked_up(context: RequestContext, request: dict[str, Any], attrs: ExpressionAttributes, *,
               query: bool) -> tuple[TableMeta, IndexMeta | None]:
    """The table (and index) a read names. DynamoDB checks the expressions, which need nothing of the table,
    before it: a missing table or index is reported only if they are right in themselves. (Checked only then,
    so a read that finds its table compiles them once.)"""
    try:
        meta = context.table(request["TableName"])
        return meta, None if request.get("IndexName") is None else index_for_read(context, meta, request)
    except DynamoDBError:
        _expression_errors(request, attrs, query=query, legacy=context.legacy)
        raise


def _expression_errors(request: dict[str, Any], attrs: ExpressionAttributes, *, query: bool,
                       legacy: LegacyOrigin | None) -> None:
    """Raise what is wrong with a read's expressions in themselves, in the order a read that finds its table
    reports it."""
    if query:
        text = expression_text(request, "KeyConditionExpression", _generated("KeyConditionExpression", legacy))
        try:
            for _ in key_clauses(text or "", attrs):
                pass
        except ExpressionError as error:
            raise invalid_expression("KeyConditionExpression", error) from None
    generated = _generated_filter(legacy)
    text = expression_text(request, "FilterExpression", generated)
    if text is not None:
        compile_condition(text, attrs, "FilterExpression", not generated)
    text = expression_text(request, "ProjectionExpression", _generated("ProjectionExpression", legacy))
    if text is not None:
        compile_projection(text, attrs)
    attrs.check_all_used()


def _filter_member(legacy: LegacyOrigin | None) -> str:
    """A Query's filter as DynamoDB names it in refusals: the legacy QueryFilter, or the expression."""
    return "QueryFilter" if legacy is not None and legacy.query_filter is not None else "Filter Expression"


def _generated(member: str, legacy: LegacyOrigin | None) -> bool:
    """Whether ``member`` was written from legacy parameters (no expression limits apply to it)."""
    return legacy is not None and member in legacy.generated


def _generated_filter(legacy: LegacyOrigin | None) -> bool:
    return _generated("FilterExpression", legacy)


def _compile(meta: TableMeta, request: dict[str, Any], attrs: ExpressionAttributes, *, query: bool,
             legacy: LegacyOrigin | None, keys_in_filter: bool = False) -> ReadPlan:
    generated = _generated_filter(legacy)
    text = expression_text(request, "FilterExpression", generated)
    condition = None
    if text is not None:
        condition = compile_condition(text, attrs, "FilterExpression", not generated)
        if query and not keys_in_filter:
            names = condition.names
            for name in meta.key_names:  # key schema order (which key DynamoDB names when both are is not recorded)
                if name in names:
                    raise ValidationException(f"{_filter_member(legacy)} can only contain non-primary key "
                                              f"attributes: Primary key attribute: {name}")
    text = expression_text(request, "ProjectionExpression", _generated("ProjectionExpression", legacy))
    projection = None if text is None else compile_projection(text, attrs)
    select = request.get("Select") or ("SPECIFIC_ATTRIBUTES" if projection is not None else "ALL_ATTRIBUTES")
    limit = request.get("Limit")
    return ReadPlan(meta, select, projection, condition, None if limit is None else int(limit),
                    bool(request.get("ConsistentRead")), request.get("ReturnConsumedCapacity"))


# --- ExclusiveStartKey / LastEvaluatedKey ----------------------------------------------------------------


def _start_key(meta: TableMeta, raw: Any, mismatch: str) -> StorageKey:
    """Validate an ExclusiveStartKey against the table's key schema; DynamoDB's wording on failure."""
    try:
        key = validate_item(raw, path="ExclusiveStartKey")
    except ValidationException as error:
        raise ValidationException(f"{_START_INVALID}: {error.message}") from None
    if len(key) != len(meta.key_names) or any(name not in key for name in meta.key_names):
        raise ValidationException(mismatch)  # other attributes than the key's (a sort key the table lacks...)
    for attribute in (meta.hash_key, meta.range_key):
        # The key's attributes, a value of the wrong type: "The provided key element does not match the schema"
        # for a Query too (issue 30, from DynamoDB's responses), where other attributes get the bare message.
        if attribute is not None and attribute.type not in key[attribute.name]:
            raise ValidationException(_START_SCHEMA)
    try:
        return storage_key(meta, key)
    except ValidationException as error:
        raise ValidationException(f"{_START_INVALID}: {error.message}") from None


def key_of_row(meta: TableMeta, key: StorageKey) -> Item:
    """The primary key of a stored row, in wire form (a LastEvaluatedKey)."""
    out = {meta.hash_key.name: decode_key(meta.hash_key.type, key.pk)}
    if meta.range_key is not None:
        out[meta.range_key.name] = decode_key(meta.range_key.type, key.sk)
    return out


# --- one page --------------------------------------------------------------------------------------------


def _read_page(record: RequestRecord, plan: ReadPlan, rows: Iterator[Row], last_sk: bytes | None = None,
               partition: StorageKey | None = None, page: PageBytes | None = None) -> dict[str, Any]:
    """Evaluate rows until Limit or 1 MB (both before the filter; `page`: what is left of a page several reads
    share) and build the response. A page that stops on `last_sk`, the closed end of a Query's sort range, has
    nothing after it: no LastEvaluatedKey (which DynamoDB would refuse as a start key, see `_start_inside`).
    `partition`: the one partition read (a Query's; None for a Scan), charged with the page's units."""
    items: list[Any] = []
    count = scanned = size = 0
    last: Row | None = None
    limit = plan.limit
    most = MAX_PAGE_BYTES if page is None else page.left
    want_items = plan.select != "COUNT"
    condition, projection = plan.filter, plan.projection
    loads, fragment = orjson.loads, orjson.Fragment
    try:
        for row in rows:
            scanned += 1
            size += row.size
            if condition is None:
                count += 1
                if want_items:
                    # Unfiltered, unprojected items go out as their stored JSON, never parsed.
                    items.append(fragment(row.data) if projection is None else projection.apply(loads(row.data)))
            else:
                item = loads(row.data)
                if condition.evaluate(item):
                    count += 1
                    if want_items:
                        items.append(item if projection is None else projection.apply(item))
            if scanned == limit or size >= most:
                last = row
                break
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()
    if page is not None:
        page.left -= size
    response: dict[str, Any] = {}
    if want_items:
        response["Items"] = items
    response["Count"] = count
    response["ScannedCount"] = scanned
    if last is not None and (last_sk is None or last.key.sk != last_sk):
        response["LastEvaluatedKey"] = key_of_row(plan.meta, last.key)
    charge(record, plan.meta, read_units(size, plan.consistent), False, size, partition)
    record.add_returned(count)
    mode = plan.capacity_mode
    if mode is not None and mode != "NONE":
        response["ConsumedCapacity"] = consumed(record, mode)
    return response


# --- Query -----------------------------------------------------------------------------------------------


def _prefix_end(prefix: bytes) -> bytes | None:
    """The smallest byte string above every string starting with `prefix` (None: no such bound)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes((stripped[-1] + 1,))


def sort_range(meta: TableMeta, op: str | None, values: tuple[AttributeValue, ...]) -> SortRange:
    """The encoded sort-key range of a key condition's sort clause (type-checked against the schema)."""
    if op is None or meta.range_key is None:
        return SortRange()
    for value in values:
        if meta.range_key.type not in value:
            raise invalid(_TYPE_MISMATCH)
        # An empty sort-key operand is refused as an empty key is (DynamoDB refuses it when it reads the key
        # condition, as reported in ministack PR 1067; the wording is the partition key's).
        if value.get("S") == "" or value.get("B") == "":
            raise empty_key(meta.range_key.name, value)
    encoded = [encode_key(value) for value in values]
    first = encoded[0]
    if op == "=":
        return SortRange(first, True, first, True)
    if op == "<":
        return SortRange(high=first, high_inclusive=False)
    if op == "<=":
        return SortRange(high=first)
    if op == ">":
        return SortRange(low=first, low_inclusive=False)
    if op == ">=":
        return SortRange(low=first)
    if op == "BETWEEN":
        return SortRange(first, True, encoded[1], True)
    return SortRange(first, True, _prefix_end(first), False)  # begins_with


def _start_inside(sort: SortRange, sk: bytes, forward: bool) -> bool:
    """DynamoDB accepts a start key only if the range still to read lies inside the key condition's range and
    is not empty: reading forward the start may sit on the lower bound but not on the upper, and backwards the
    other way round (confirmed for `>=` read backwards from its bound, which DynamoDB rejects)."""
    low, high = sort.low, sort.high
    if forward:
        return (low is None or sk >= low) and (high is None or sk < high)
    return (low is None or sk > low) and (high is None or sk <= high)


def _closed_end(sort: SortRange, forward: bool) -> bytes | None:
    """The sort key a read in this direction ends on, if the range's far end is closed (None if open)."""
    if forward:
        return sort.high if sort.high_inclusive else None
    return sort.low if sort.low_inclusive else None


def query(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    _validate_shape(QUERY, request)
    return run_query(context, request)


def run_query(context: RequestContext, request: dict[str, Any], page: PageBytes | None = None) -> dict[str, Any]:
    """One page of a Query whose request fits its shape (checked by `query`, or built by a front end: PartiQL);
    `page`: what is left of a page several Queries share (see `PageBytes`)."""
    if request.get("KeyConditionExpression") is None:
        raise ValidationException(
            "Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.")
    attrs = expression_attributes(request, ("KeyConditionExpression", "FilterExpression", "ProjectionExpression"))
    meta, index = _looked_up(context, request, attrs, query=True)
    if index is not None:
        return _query_index(context, request, attrs, meta, index, page)
    text = expression_text(request, "KeyConditionExpression", _generated("KeyConditionExpression", context.legacy))
    assert text is not None
    range_name = meta.range_key.name if meta.range_key is not None else None
    condition = compile_key_condition(text, attrs, meta.hash_key.name, range_name)
    plan = _compile(meta, request, attrs, query=True, legacy=context.legacy, keys_in_filter=context.keys_in_filter)
    attrs.check_all_used()
    if meta.hash_key.type not in condition.hash_value:
        raise invalid(_TYPE_MISMATCH)
    pk = key_value_bytes(meta.hash_key.name, condition.hash_value, is_hash=True)
    if context.access is not None:
        _authorize(context, "Query", meta, None, (key_text(condition.hash_value),), plan.projection, plan.filter,
                   plan.select)
    sort = sort_range(meta, condition.range_op, condition.range_values)
    h = partition_hash(pk)
    forward = request.get("ScanIndexForward", True) is not False
    after: bytes | None = None
    raw_start = request.get("ExclusiveStartKey")
    if raw_start is not None:
        start = _start_key(meta, raw_start, _START_INVALID)
        if start.pk != pk:
            raise ValidationException(_START_OUTSIDE)
        if meta.range_key is not None and not _start_inside(sort, start.sk, forward):
            raise ValidationException(_START_RANGE)
        after = start.sk
    rows = context.engine.query(meta, h, pk, sort, forward, after)
    return _read_page(context.record, plan, rows, _closed_end(sort, forward), StorageKey(h, pk, b""), page)


# --- Scan ------------------------------------------------------------------------------------------------


def segment_bounds(segment: int, total: int) -> tuple[int, int]:
    """The partition-hash range [low, high) of parallel-scan segment `segment` of `total`."""
    return segment * HASH_SPACE // total, (segment + 1) * HASH_SPACE // total


def _segments(request: dict[str, Any]) -> tuple[int, int] | None:
    segment, total = request.get("Segment"), request.get("TotalSegments")
    if segment is None and total is None:
        return None
    if total is None:
        raise ValidationException("The TotalSegments parameter is required but was not present in the request "
                                  "when Segment parameter is present")
    if segment is None:
        raise ValidationException("The Segment parameter is required but was not present in the request when "
                                  "parameter TotalSegments is present")
    segment, total = int(segment), int(total)
    if segment >= total:
        raise ValidationException("The Segment parameter is zero-based and must be less than parameter "
                                  f"TotalSegments: Segment: {segment} is not less than TotalSegments: {total}")
    return segment, total


def scan(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    _validate_shape(SCAN, request)
    return run_scan(context, request)


def run_scan(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    """One page of a Scan whose request fits its shape (checked by `scan`, or built by a front end: PartiQL)."""
    segments = _segments(request)
    attrs = expression_attributes(request, ("FilterExpression", "ProjectionExpression"))
    meta, index = _looked_up(context, request, attrs, query=False)
    if index is not None:
        return _scan_index(context, request, attrs, meta, index, segments)
    plan = _compile(meta, request, attrs, query=False, legacy=context.legacy)
    attrs.check_all_used()
    if context.access is not None:
        _authorize(context, "Scan", meta, None, (), plan.projection, plan.filter, plan.select)
    low, high = (0, HASH_SPACE) if segments is None else segment_bounds(*segments)
    after: StorageKey | None = None
    raw_start = request.get("ExclusiveStartKey")
    if raw_start is not None:
        after = _start_key(plan.meta, raw_start, _START_SCHEMA)
        if segments is not None and not low <= after.h < high:
            raise ValidationException(f"{_START_INVALID}: Invalid ExclusiveStartKey. Please use ExclusiveStartKey "
                                      f"with correct Segment. TotalSegments: {segments[1]} Segment: {segments[0]}")
    return _read_page(context.record, plan, context.engine.scan(plan.meta, low, high, after))


HANDLERS = {
    "Query": query,
    "Scan": scan,
}
