"""One page of a SELECT run as Query or Scan: the native read's own page (`reads.run_query`, `run_scan`: Limit
counts the items evaluated, 1 MB bounds a page), or, for a partition key fixed by IN or OR, the Queries of its
partitions in turn until the Limit is reached, the page holds 10 items, 1 MB has been read in all (`PageBytes`),
or one of them stops on its own. The NextToken carries where the
page stopped (the partition and its LastEvaluatedKey) and which statement it belongs to: a token is good only
for the statement that returned it."""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

import orjson

from openddb.api import reads
from openddb.api.capacity import consumed
from openddb.api.context import RequestContext
from openddb.errors import ValidationException
from openddb.operations.reads import PageBytes
from openddb.partiql.naming import Renaming, renamed
from openddb.partiql.planner import NativeRead

# A SELECT of several partitions (IN) answers "in pages of up to 10 items" (Developer Guide, "PartiQL arithmetic,
# comparison, and logical operators", IN).
PARTITIONS_PAGE_ITEMS = 10
# best guess at both wordings: DynamoDB's are not recorded in the sources searched
_BAD_TOKEN = "Invalid NextToken"
_OTHER_STATEMENT = "The NextToken was issued for a different statement"


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _token(text: str, partition: int, key: Any) -> str:
    return base64.b64encode(orjson.dumps({"s": _digest(text), "p": partition, "k": key})).decode()


def _resume(token: str, text: str) -> tuple[int, Any]:
    """(the partition, the LastEvaluatedKey) a NextToken resumes from."""
    try:
        decoded = orjson.loads(base64.b64decode(token, validate=True))
        digest, partition, key = decoded["s"], int(decoded["p"]), decoded["k"]
    except (binascii.Error, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        raise ValidationException(_BAD_TOKEN) from None
    if digest != _digest(text):
        raise ValidationException(_OTHER_STATEMENT)
    return partition, key


def read_page(context: RequestContext, plan: NativeRead, request: dict[str, Any], text: str,
              names: Renaming) -> dict[str, Any]:
    limit: int | None = request.get("Limit")
    partition, start = 0, None
    if request.get("NextToken") is not None:
        partition, start = _resume(request["NextToken"], text)
    partitions = plan.partitions or (None,)
    if partition >= len(partitions):
        raise ValidationException(_BAD_TOKEN)
    context.keys_in_filter = True  # (see RequestContext.keys_in_filter)
    # The partitions' Queries fill one page of 1 MB in all (a Scan is one read of its own 1 MB).
    budget = PageBytes()
    items: list[Any] = []
    evaluated = 0
    response: dict[str, Any] = {"Items": items}
    while partition < len(partitions):
        native = dict(plan.request)
        value = partitions[partition]
        bound = None if limit is None else limit - evaluated
        if value is not None:
            native["ExpressionAttributeValues"] = {**native["ExpressionAttributeValues"], plan.key_ref: value}
            room = PARTITIONS_PAGE_ITEMS - len(items)
            bound = room if bound is None else min(bound, room)
        if bound is not None:
            native["Limit"] = bound
        if start is not None:
            native["ExclusiveStartKey"] = start
        if request.get("ReturnConsumedCapacity") is not None:
            native["ReturnConsumedCapacity"] = request["ReturnConsumedCapacity"]
        if plan.operation == "Query":
            page = reads.run_query(context, native, budget)
        else:
            page = reads.run_scan(context, native)
        read = page.get("Items", [])
        items.extend([renamed(item, names) for item in read] if names else read)
        evaluated += page["ScannedCount"]
        start = page.get("LastEvaluatedKey")
        if start is not None:
            response["NextToken"] = _token(text, partition, start)
            response["LastEvaluatedKey"] = start
            break
        partition += 1
        full = (limit is not None and evaluated >= limit) or budget.left <= 0 or \
            (value is not None and len(items) >= PARTITIONS_PAGE_ITEMS)
        if full and partition < len(partitions):
            response["NextToken"] = _token(text, partition, None)
            break
    mode = request.get("ReturnConsumedCapacity")
    if mode in ("TOTAL", "INDEXES"):  # (every page's charges, rendered as one: see observe/record.py)
        response["ConsumedCapacity"] = consumed(context.record, mode)
    return response
