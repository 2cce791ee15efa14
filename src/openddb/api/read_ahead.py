"""The keys the GetItem and Query requests of an event-loop pass will read, worked out before they run, so an
engine with `Engine.reads_ahead` can fetch them all in one round trip (see `Engine.read_ahead`; issue 32).

A hint, never an answer: each request still runs whole (validation, authorization, throttling, its own errors)
and its read takes the rows fetched here only for exactly the statement it makes. A request whose keys cannot be
worked out cheaply here (malformed, an index, a start key, a table named by ARN, legacy parameters) is left out
and reads for itself; its own run reports whatever is wrong with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from openddb.api import transient
from openddb.api.expression_members import expression_attributes
from openddb.api.keys import key_value_bytes, storage_key
from openddb.api.reads import sort_range
from openddb.errors import DynamoDBError
from openddb.expressions.ast import ExpressionError
from openddb.expressions.keycondition import compile_key_condition
from openddb.model.keys import partition_hash
from openddb.model.schema import TableMeta
from openddb.storage.base import Engine, QueryStart, StorageKey

GET_ITEM = b"DynamoDB_20120810.GetItem"
QUERY = b"DynamoDB_20120810.Query"
TARGETS = frozenset((GET_ITEM, QUERY))

# What a malformed request raises on its way through the steps below (its own run words the error).
_UNREADABLE = (DynamoDBError, ExpressionError, LookupError, TypeError, ValueError, AttributeError)


def read_ahead(engine: Engine, requests: Sequence[tuple[bytes, bytes, str]]) -> None:
    """Hand the engine the reads of `requests` (target, body, the caller's table namespace), in one call."""
    gets: list[tuple[TableMeta, StorageKey]] = []
    queries: list[QueryStart] = []
    for target, body, namespace in requests:
        try:
            request = orjson.loads(body)
            if target == GET_ITEM:
                meta = _table(engine, namespace, request)
                if meta is not None:
                    gets.append((meta, storage_key(meta, request["Key"])))
            else:
                start = _query_start(engine, namespace, request)
                if start is not None:
                    queries.append(start)
        except _UNREADABLE:
            continue
    if len(gets) + len(queries) > 1:
        engine.read_ahead(gets, queries)


def _table(engine: Engine, namespace: str, request: dict[str, Any]) -> TableMeta | None:
    name = request["TableName"]
    if not isinstance(name, str) or name.startswith("arn:"):
        return None
    meta = engine.get_table(namespace + name)
    if meta is None or (meta.pending is not None and not transient.serves_items(meta)):
        return None
    return meta


def _query_start(engine: Engine, namespace: str, request: dict[str, Any]) -> QueryStart | None:
    """The first page a Query of a table reads (as api/reads.py `run_query` works it out), or None."""
    text = request.get("KeyConditionExpression")
    if not isinstance(text, str) or request.get("IndexName") is not None or \
            request.get("ExclusiveStartKey") is not None:
        return None
    meta = _table(engine, namespace, request)
    if meta is None:
        return None
    attrs = expression_attributes(request, ("KeyConditionExpression", "FilterExpression", "ProjectionExpression"))
    condition = compile_key_condition(text, attrs, meta.hash_key.name,
                                      meta.range_key.name if meta.range_key is not None else None)
    pk = key_value_bytes(meta.hash_key.name, condition.hash_value, is_hash=True)
    sort = sort_range(meta, condition.range_op, condition.range_values)
    return QueryStart(meta, partition_hash(pk), pk, sort, request.get("ScanIndexForward", True) is not False)
