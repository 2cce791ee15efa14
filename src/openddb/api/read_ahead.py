"""The keys the GetItem, BatchGetItem, Query and Scan requests of an event-loop pass will read, worked out before
they run, so an engine with `Engine.reads_ahead` can fetch them all in one round trip (see `Engine.read_ahead`;
issue 32).

A hint, never an answer: each request still runs whole (validation, authorization, throttling, its own errors)
and its read takes the rows fetched here only for exactly the statement it makes. A request whose keys cannot be
worked out cheaply here (malformed, a table named by ARN, legacy parameters) is left out and reads for itself;
its own run reports whatever is wrong with it. Only the first page of a Query or Scan is fetched (from its
ExclusiveStartKey, if it has one): the pages after it depend on what the first holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from openddb.api import transient
from openddb.api.expression_members import expression_attributes
from openddb.api.index_reads import key_range, start_key
from openddb.api.keys import key_value_bytes, storage_key
from openddb.api.reads import segment_bounds, sort_range
from openddb.errors import DynamoDBError
from openddb.expressions.ast import ExpressionError
from openddb.expressions.keycondition import compile_key_condition
from openddb.model.keys import partition_hash
from openddb.model.schema import IndexMeta, TableMeta
from openddb.storage.base import HASH_SPACE, Engine, QueryStart, ReadsAhead, ScanStart

GET_ITEM = b"DynamoDB_20120810.GetItem"
BATCH_GET_ITEM = b"DynamoDB_20120810.BatchGetItem"
QUERY = b"DynamoDB_20120810.Query"
SCAN = b"DynamoDB_20120810.Scan"
TARGETS = frozenset((GET_ITEM, BATCH_GET_ITEM, QUERY, SCAN))

# What a malformed request raises on its way through the steps below (its own run words the error).
UNREADABLE = (DynamoDBError, ExpressionError, LookupError, TypeError, ValueError, AttributeError, ArithmeticError)


def read_ahead(engine: Engine, requests: Sequence[tuple[bytes, bytes, str]]) -> None:
    """Hand the engine the reads of `requests` (target, body, the caller's table namespace), in one call; on an
    engine with replicas, those that may be eventually consistent apart (see `ReadsAhead.eventual`)."""
    reads = ReadsAhead(eventual=ReadsAhead() if engine.replicated else None)
    for target, body, namespace in requests:
        try:
            request = orjson.loads(body)
            into = reads if reads.eventual is None or asks_consistency(request) else reads.eventual
            _add(into, engine, namespace, target, request)
        except UNREADABLE:
            continue
    if len(reads) > 1:
        engine.read_ahead(reads)


def asks_consistency(request: dict[str, Any]) -> bool:
    """Whether a read asks for strong consistency (BatchGetItem: for any of its tables): else it may be answered
    from a replica, where the engine has them."""
    if request.get("ConsistentRead") is True:
        return True
    items = request.get("RequestItems")
    return isinstance(items, dict) and any(isinstance(part, dict) and part.get("ConsistentRead") is True
                                           for part in items.values())


def _add(reads: ReadsAhead, engine: Engine, namespace: str, target: bytes, request: dict[str, Any]) -> None:
    """Add what one request reads first to `reads` (nothing if that is not worked out here)."""
    if target == GET_ITEM:
        meta = table_of(engine, namespace, request["TableName"])
        if meta is not None:
            reads.gets.append((meta, storage_key(meta, request["Key"])))
    elif target == BATCH_GET_ITEM:
        keys = []
        for name, spec in request["RequestItems"].items():
            meta = table_of(engine, namespace, name)
            if meta is None:
                return
            keys += [(meta, storage_key(meta, raw)) for raw in spec["Keys"]]
        reads.gets += keys
    elif target == QUERY:
        query = _query_start(engine, namespace, request)
        if query is not None:
            reads.queries.append(query)
    else:
        scan = _scan_start(engine, namespace, request)
        if scan is not None:
            reads.scans.append(scan)


def table_of(engine: Engine, namespace: str, name: Any) -> TableMeta | None:
    if not isinstance(name, str) or name.startswith("arn:"):
        return None
    meta = engine.get_table(namespace + name)
    if meta is None or (meta.pending is not None and not transient.serves_items(meta)):
        return None
    return meta


def _index(meta: TableMeta, request: dict[str, Any]) -> IndexMeta:
    """The index a read names, if it serves reads (else LookupError: the request's own run says why)."""
    index = meta.index(request["IndexName"])
    if index is None or index.status != "ACTIVE":
        raise LookupError(request["IndexName"])
    return index


def _query_start(engine: Engine, namespace: str, request: dict[str, Any]) -> QueryStart | None:
    """The first page a Query reads (as api/reads.py `run_query` and `_query_index` work it out), or None."""
    text = request.get("KeyConditionExpression")
    meta = table_of(engine, namespace, request["TableName"])
    if not isinstance(text, str) or meta is None:
        return None
    attrs = expression_attributes(request, ("KeyConditionExpression", "FilterExpression", "ProjectionExpression"))
    forward = request.get("ScanIndexForward", True) is not False
    start = request.get("ExclusiveStartKey")
    if request.get("IndexName") is not None:
        index = _index(meta, request)
        where = key_range(index, text, attrs)
        return QueryStart(meta, where.h, where.pk, where.sort, forward, index,
                          None if start is None else start_key(meta, index, start))
    condition = compile_key_condition(text, attrs, meta.hash_key.name,
                                      meta.range_key.name if meta.range_key is not None else None)
    pk = key_value_bytes(meta.hash_key.name, condition.hash_value, is_hash=True)
    sort = sort_range(meta, condition.range_op, condition.range_values)
    return QueryStart(meta, partition_hash(pk), pk, sort, forward, None,
                      None if start is None else storage_key(meta, start).sk)


def _scan_start(engine: Engine, namespace: str, request: dict[str, Any]) -> ScanStart | None:
    """The first page a Scan (of its segment) reads (as api/reads.py `run_scan` and `_scan_index` do), or None."""
    meta = table_of(engine, namespace, request["TableName"])
    if meta is None:
        return None
    segment, total = request.get("Segment"), request.get("TotalSegments")
    if segment is None and total is None:
        low, high = 0, HASH_SPACE
    elif isinstance(segment, int) and isinstance(total, int) and 0 <= segment < total:
        low, high = segment_bounds(segment, total)
    else:
        return None
    start = request.get("ExclusiveStartKey")
    if request.get("IndexName") is not None:
        index = _index(meta, request)
        return ScanStart(meta, index, low, high, None if start is None else start_key(meta, index, start))
    return ScanStart(meta, None, low, high, None if start is None else storage_key(meta, start))
