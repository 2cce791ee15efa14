"""Query and Scan with IndexName: key conditions on the index keys, projections, paging, capacity.

An index read walks `Engine.index_query`/`index_scan` entries. Page size (1 MB) and read capacity count the
projected entries' sizes. Items come back as projected; a local secondary index asked for attributes it does not
project (Select ALL_ATTRIBUTES, or a projection or filter naming them) fetches each item from the table, charged
to the table at one read of the whole item each (rounded up to 4 KB per item); the fetched items count toward the
page's 1 MB as well. A global secondary index cannot
fetch: Select ALL_ATTRIBUTES, or a projection naming attributes it does not project, is refused.
LastEvaluatedKey holds the table key and the index key of the last entry evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from openddb import clock
from openddb.api import transient
from openddb.api.capacity import charge, charge_indexes, consumed, read_units
from openddb.api.context import RequestContext
from openddb.api.indexes import schedule_backfill
from openddb.api.keys import empty_index_key, key_value_bytes, storage_key
from openddb.errors import ValidationException, invalid
from openddb.expressions import ExpressionAttributes, compile_key_condition
from openddb.expressions.ast import ExpressionError
from openddb.expressions.compiler import invalid as invalid_expression
from openddb.expressions.keycondition import ONE_CONDITION_PER_KEY, key_clauses
from openddb.model import AttributeValue, Item
from openddb.model.indexes import component, encode_parts, projected_names
from openddb.model.keys import encode_key, partition_hash
from openddb.model.schema import IndexMeta, KeyAttribute, TableMeta
from openddb.model.values import validate_item
from openddb.operations.reads import MAX_PAGE_BYTES, PageBytes
from openddb.storage.base import IndexKey, IndexRow, SortRange, StorageKey

_FETCH_BATCH = 32  # table items fetched at once for a local index read (the page may end within a batch)
_NO_INDEX = "The table does not have the specified index: {}"
_CONSISTENT_GSI = "Consistent reads are not supported on global secondary indexes"
_BACKFILLING = "Cannot read from backfilling global secondary index"
_SELECT_ALL = ("Select type ALL_ATTRIBUTES is not supported for global secondary index {} because its projection "
               "type is not ALL")
_TYPE_MISMATCH = "Condition parameter type does not match schema type"
_START_SCHEMA = "The provided starting key is invalid: The provided key element does not match the schema"
_START_OUTSIDE = "The provided starting key is outside query boundaries based on provided condition"
_START_RANGE = "The provided starting key does not match the range key predicate"


def index_for_read(context: RequestContext, meta: TableMeta, request: dict[str, Any]) -> IndexMeta:
    """The index a Query/Scan names, with DynamoDB's refusals for reads it cannot serve."""
    name = request["IndexName"]
    index = meta.index(name)
    if index is None:
        raise ValidationException(_NO_INDEX.format(name))
    if index.is_global:
        if request.get("ConsistentRead"):
            raise ValidationException(_CONSISTENT_GSI)
        if index.status != "ACTIVE":
            # A backfill that a stopped process left unfinished resumes here (and on DescribeTable).
            schedule_backfill(context.engine, meta, index)
            raise ValidationException(_BACKFILLING)
        if index.pending is not None and transient.index_status(index, clock.now()) == "CREATING":
            raise ValidationException(_BACKFILLING)  # filled, but still CREATING (--delay-transient-statuses)
        if request.get("Select") == "ALL_ATTRIBUTES" and index.projection_type != "ALL":
            raise invalid(_SELECT_ALL.format(name))
    return index


def check_projected(meta: TableMeta, index: IndexMeta, names: tuple[str, ...]) -> None:
    """A global secondary index is asked only for attributes it projects (it cannot fetch from the table)."""
    held = projected_names(meta, index) if index.is_global else None
    if held is not None:
        missing = [name for name in dict.fromkeys(names) if name not in held]
        if missing:
            raise invalid(f"Global secondary index {index.name} does not project [{', '.join(missing)}]")


def check_filter_names(meta: TableMeta, index: IndexMeta, names: set[str], member: str) -> None:
    """A Query's filter names no key attribute of the index, and on a global secondary index only attributes the
    index projects (it cannot fetch the rest from the table). `member`: the filter as the refusal names it."""
    for name in index.key_names:
        if name in names:
            raise ValidationException(
                f"{member} can only contain non-primary key attributes: Primary key attribute: {name}")
    held = projected_names(meta, index) if index.is_global else None
    if held is not None and names - held:
        raise invalid(f"Secondary index {index.name} does not project one or more filter attributes: "
                      f"[{', '.join(sorted(names - held))}]")


def needs_fetch(meta: TableMeta, index: IndexMeta, request: dict[str, Any], wanted: set[str]) -> bool:
    """True if an LSI read must fetch items from the table: attributes it does not project are asked for."""
    if index.is_global or index.projection_type == "ALL":
        return False
    if request.get("Select") == "ALL_ATTRIBUTES":
        return True
    held = projected_names(meta, index)
    return held is not None and bool(wanted - held)


# --- key conditions ------------------------------------------------------------------------------------------


@dataclass(slots=True)
class IndexKeyRange:
    h: int
    pk: bytes
    sort: SortRange
    hash_values: tuple[AttributeValue, ...] = ()  # the partition key's values, as the condition gave them


def _prefix_end(prefix: bytes) -> bytes | None:
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes((stripped[-1] + 1,))


def _range(op: str, values: list[bytes], prefix: bytes, multi: bool) -> SortRange:
    """The byte range of `prefix` + one more sort-key component under `op` (see model/indexes.py)."""
    term = (lambda e: component(e)) if multi else (lambda e: e)
    first = prefix + term(values[0])
    whole_low: bytes | None = prefix or None
    whole_high = _prefix_end(prefix) if prefix else None
    if op == "=":
        return SortRange(first, True, _prefix_end(first), False) if multi else SortRange(first, True, first, True)
    upper_of_first = _prefix_end(first) if multi else first  # everything equal to values[0] lies below this
    if op == "<":
        return SortRange(whole_low, True, first, False)
    if op == "<=":
        return SortRange(whole_low, True, upper_of_first, not multi)
    if op == ">":
        return SortRange(upper_of_first, multi, whole_high, False)
    if op == ">=":
        return SortRange(first, True, whole_high, False)
    if op == "BETWEEN":
        high = prefix + term(values[1])
        return SortRange(first, True, _prefix_end(high) if multi else high, not multi)
    # begins_with: no terminator, so every component starting with the value matches
    start = prefix + (values[0].replace(b"\x00", b"\x00\xff") if multi else values[0])
    return SortRange(start, True, _prefix_end(start), False)


def _typed(attribute: KeyAttribute, value: AttributeValue) -> AttributeValue:
    if attribute.type not in value:
        raise invalid(_TYPE_MISMATCH)
    return value


def key_range(index: IndexMeta, text: str, attrs: ExpressionAttributes) -> IndexKeyRange:
    """Compile a KeyConditionExpression against an index's (possibly multi-attribute) key schema."""
    if len(index.hash_keys) == 1 and len(index.range_keys) <= 1:
        range_key = index.range_keys[0] if index.range_keys else None
        condition = compile_key_condition(text, attrs, index.hash_keys[0].name,
                                          range_key.name if range_key else None)
        hash_values = [_typed(index.hash_keys[0], condition.hash_value)]
        clauses = [] if condition.range_op is None or range_key is None else [
            (condition.range_op, [_typed(range_key, v) for v in condition.range_values])]
    else:
        hash_values, clauses = _multi_key_condition(index, text, attrs)
    for attribute, value in zip(index.hash_keys, hash_values, strict=True):
        if index.is_global and attribute.type != "N" and value[attribute.type] == "":
            raise empty_index_key(index, attribute)  # (an LSI's is the table's partition key)
    for attribute, (_, values) in zip(index.range_keys, clauses, strict=False):
        for value in values:  # an empty sort-key operand, as for the table's (see reads.sort_range)
            if attribute.type != "N" and value[attribute.type] == "":
                raise empty_index_key(index, attribute)
    for attribute, value in zip(index.hash_keys, hash_values, strict=True):  # oversize checks, each attribute
        key_value_bytes(attribute.name, value, is_hash=True)
    pk = encode_parts(hash_values)
    multi = len(index.range_keys) > 1
    prefix = b""
    for _op, values in clauses[:-1]:
        prefix += component(encode_key(values[0]))
    sort = SortRange(prefix or None, True, _prefix_end(prefix) if prefix else None, False)
    if clauses:
        op, values = clauses[-1]
        sort = _range(op, [encode_key(v) for v in values], prefix, multi)
    return IndexKeyRange(partition_hash(pk), pk, sort, tuple(hash_values))


def _multi_key_condition(index: IndexMeta, text: str, attrs: ExpressionAttributes
                         ) -> tuple[list[AttributeValue], list[tuple[str, list[AttributeValue]]]]:
    """Multi-attribute keys: every partition-key attribute with `=`; sort-key attributes constrained left to
    right without gaps, all with `=` but the last one."""
    strangers = False  # a condition on an attribute outside the key schema
    try:
        found: dict[str, tuple[str, list[AttributeValue]]] = {}
        for name, op, clause_values in key_clauses(text, attrs):
            if name in found:
                raise ExpressionError(ONE_CONDITION_PER_KEY, bare=True)
            if name not in index.key_names:
                strangers = True
                continue
            found[name] = (op, list(clause_values))
    except ExpressionError as error:
        raise invalid_expression("KeyConditionExpression", error) from None
    if not found:  # no key attribute at all: the single-key wording, naming the first partition attribute
        raise ValidationException(f"Query condition missed key schema element: {index.hash_keys[0].name}")
    _check_equalities(index, {name: op for name, (op, _) in found.items()})
    if found[index.hash_keys[0].name][0] != "=":  # one partition attribute, alone and not compared by `=`
        raise ValidationException("Query key condition not supported")
    clauses = [found[a.name] for a in index.range_keys if a.name in found]
    if strangers:  # the key attributes named are in order: the condition on another names the next one
        named = index.range_keys[len(clauses)] if len(clauses) < len(index.range_keys) else (
            index.range_keys[-1] if index.range_keys else index.hash_keys[-1])
        raise ValidationException(f"Query condition missed key schema element: {named.name}")
    hash_values = [_typed(attribute, found[attribute.name][1][0]) for attribute in index.hash_keys]
    typed = [(op, [_typed(attribute, v) for v in values])
             for attribute, (op, values) in zip(index.range_keys, clauses, strict=False)]
    return hash_values, typed


# DynamoDB's refusal of a multi-attribute key condition that leaves a gap: the RANGE form is quoted in issue 30
# (from DynamoDB's responses) and matches DynamoDB Local 3.3.1 (floci PR 2471, 2026), which names one attribute:
# the first one lacking equality before the attribute with the condition. The HASH form is its counterpart, a best
# guess: no public response quoting it was found.
_EQUALITY_NEEDED = ("{kind} key attributes {missing} must have equality conditions specified in the query because "
                    "a condition is present on key attribute {present}")


def _check_equalities(index: IndexMeta, ops: dict[str, str]) -> None:
    """Each condition on a key attribute needs `=` on every other partition-key attribute and on every sort-key
    attribute before it (Developer Guide, "Multi-attribute key schema": all partition attributes by equality,
    sort attributes left to right without skipping, an inequality only last). Conditions are taken in key
    schema order, and for each the partition attributes are checked before the sort attributes."""
    hashes = [a.name for a in index.hash_keys]
    ranges = [a.name for a in index.range_keys]
    for present in (*hashes, *ranges):
        if present not in ops:
            continue
        for name in hashes:
            if name != present and ops.get(name) != "=":
                raise ValidationException(_EQUALITY_NEEDED.format(kind="HASH", missing=name, present=present))
        for name in ranges[:ranges.index(present)] if present in ranges else ():
            if ops.get(name) != "=":
                raise ValidationException(_EQUALITY_NEEDED.format(kind="RANGE", missing=name, present=present))


# --- start keys and pages ------------------------------------------------------------------------------------


def _key_names(meta: TableMeta, index: IndexMeta) -> list[str]:
    names = list(meta.key_names)
    names.extend(n for n in index.key_names if n not in names)
    return names


def start_key(meta: TableMeta, index: IndexMeta, raw: Any, mismatch: str = _START_SCHEMA) -> IndexKey:
    """An ExclusiveStartKey for an index read: the table key plus the index key of an entry. `mismatch` is the
    message for a key naming other attributes: a Query's is shorter than a Scan's. A key value of the wrong type
    gets "The provided key element does not match the schema" in both (issue 30, from DynamoDB's responses)."""
    try:
        key = validate_item(raw, path="ExclusiveStartKey")
    except ValidationException as error:
        raise ValidationException(f"The provided starting key is invalid: {error.message}") from None
    names = _key_names(meta, index)
    types = {a.name: a.type for a in (meta.hash_key, meta.range_key, *index.hash_keys, *index.range_keys) if a}
    if len(key) != len(names) or any(n not in key for n in names):
        raise ValidationException(mismatch)
    if any(types[n] not in key[n] for n in names):  # the right attributes, a value of the wrong type
        raise ValidationException(_START_SCHEMA)
    try:  # empty or oversized key values are refused as in a table's start key
        for position, attribute in enumerate((*index.hash_keys, *index.range_keys)):
            key_value_bytes(attribute.name, key[attribute.name], is_hash=position < len(index.hash_keys))
        table_key = storage_key(meta, key)
    except ValidationException as error:
        raise ValidationException(f"The provided starting key is invalid: {error.message}") from None
    pk = encode_parts([key[a.name] for a in index.hash_keys])
    sk = encode_parts([key[a.name] for a in index.range_keys]) if index.range_keys else b""
    return IndexKey(partition_hash(pk), pk, sk, table_key.pk, table_key.sk)


def check_query_start(start: IndexKey, where: IndexKeyRange) -> None:
    """A Query's start key must lie in its partition and inside its sort-key condition. (Index sort keys repeat,
    so unlike a table's a start key may sit on a closed bound in either direction: more entries may follow it.)"""
    if start.pk != where.pk:
        raise ValidationException(_START_OUTSIDE)
    sort = where.sort
    if (sort.low is not None and (start.sk < sort.low or (start.sk == sort.low and not sort.low_inclusive))) or (
            sort.high is not None and (start.sk > sort.high or (start.sk == sort.high and not sort.high_inclusive))):
        raise ValidationException(_START_RANGE)


@dataclass(slots=True)
class IndexReadPlan:
    meta: TableMeta
    index: IndexMeta
    select: str
    projection: Any
    filter: Any
    limit: int | None
    consistent: bool
    capacity_mode: str | None
    fetch: bool


def _in_blocks(size: int) -> int:
    """`size` rounded up to whole 4 KB blocks."""
    return -(-size // 4096) * 4096


def _still_indexed(index: IndexMeta, entry: Item, item: Item) -> bool:
    """Whether the table item fetched for an index entry still has the entry's index key. The entries are read
    before their items, and another worker's (or node's) write in between may have moved the item elsewhere in
    the index or deleted it: such an entry no longer stands for an item where the read found it, and the item as
    fetched may not match the key condition."""
    return all(item.get(key.name) == entry.get(key.name) for key in (*index.hash_keys, *index.range_keys))


def _entries(rows: Any, limit: int | None, most: int) -> tuple[list[IndexRow], int, bool]:
    """The page's entries, up to `limit` or `most` bytes: (entries, their size, whether the page is full)."""
    page: list[IndexRow] = []
    size = 0
    try:
        for row in rows:
            page.append(row)
            size += row.size
            if len(page) == limit or size >= most:
                break
        return page, size, len(page) == limit or size >= most
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()


def _fetch(context: RequestContext, plan: IndexReadPlan, page: list[IndexRow],
           most: int) -> tuple[list[Item | None], float, int, bool]:
    """The table's items of a page's entries (None: gone), the read units they cost, the blocks the page read, and
    whether `most` cut the page short (the entries past the cut are dropped from `page`). The items fetched from the
    table count toward the page's 1 MB too, so it may end sooner. As the Developer Guide counts it (local secondary
    indexes, read capacity units): the entries' size rounded up to 4 KB, plus each fetched item's size rounded up
    to 4 KB."""
    fetched: list[Item | None] = []
    table_units = 0.0
    entries = fetched_blocks = read = 0
    for start in range(0, len(page), _FETCH_BATCH):
        chunk = page[start:start + _FETCH_BATCH]
        found = context.engine.get_many([(plan.meta, StorageKey(r.key.h, r.key.tpk, r.key.tsk)) for r in chunk])
        for row, table_row in zip(chunk, found, strict=True):
            fetched.append(None if table_row is None else orjson.loads(table_row.data))
            table_units += read_units(table_row.size if table_row is not None else 0, plan.consistent)
            entries += row.size
            fetched_blocks += _in_blocks(table_row.size) if table_row is not None else 0
            read = _in_blocks(entries) + fetched_blocks
            if read >= most:
                break
        if read >= most:
            del page[len(fetched):]
            return fetched, table_units, read, True
    return fetched, table_units, read, False


def read_index_page(context: RequestContext, plan: IndexReadPlan, rows: Any,
                    budget: PageBytes | None = None, named: Item | None = None) -> dict[str, Any]:
    """Evaluate entries until Limit or 1 MB (both before the filter; `budget`: what is left of a page several
    reads share) and build the response; `named`: the partition key values a Query named."""
    most = MAX_PAGE_BYTES if budget is None else budget.left
    page, size, full = _entries(rows, plan.limit, most)
    meta, index = plan.meta, plan.index
    table_units = 0.0
    fetched: list[Item | None] = []
    if plan.fetch and page:
        fetched, table_units, read, cut = _fetch(context, plan, page, most)
        if cut:
            full = True
            size = sum(row.size for row in page)
        if budget is not None:
            budget.left -= read
    elif budget is not None:
        budget.left -= size
    items: list[Item] = []
    count = 0
    want_items = plan.select != "COUNT"
    last_item: Item | None = None
    # Fetched for a filter alone, an item still comes back as the index projects it (unless all is asked for).
    whole = plan.select == "ALL_ATTRIBUTES"
    for position, row in enumerate(page):
        entry = item = orjson.loads(row.data)
        last_item = entry
        if plan.fetch:
            fetched_item = fetched[position]
            if fetched_item is None or not _still_indexed(index, entry, fetched_item):
                continue
            item = fetched_item
        if plan.filter is not None and not plan.filter.evaluate(item):
            continue
        count += 1
        if want_items:
            if plan.projection is not None:
                items.append(plan.projection.apply(item))
            else:
                items.append(item if whole else entry)
    response: dict[str, Any] = {}
    if want_items:
        response["Items"] = items
    response["Count"] = count
    response["ScannedCount"] = len(page)
    if full and last_item is not None:
        response["LastEvaluatedKey"] = {n: last_item[n] for n in _key_names(meta, index) if n in last_item}
    if table_units:
        charge(context.record, meta, table_units, write=False)
    charge_indexes(context.record, meta, {index.name: read_units(size, plan.consistent)}, write=False,
                   items=() if named is None else (named,))
    context.record.add_returned(count)
    mode = plan.capacity_mode
    if mode is not None and mode != "NONE":
        response["ConsumedCapacity"] = consumed(context.record, mode)
    return response
