"""Which partitions of a GSI a request draws on (`--throttling on`; api/throttle.py).

A GSI has partitions of its own, by the hash of its own partition key, each serving at most 3,000 read units or
1,000 write units a second (the Developer Guide's throttling guide: IndexReadKeyRangeThroughputExceeded and
IndexWriteKeyRangeThroughputExceeded, "when individual partitions exceed their throughput limits" of a table or a
GSI): a hot GSI partition key throttles the writes that would put items in it, and the Queries on it, while the
table's own keys are spread evenly.

Before a request runs its GSI partitions are known where the request names them: a PutItem's (or a
BatchWriteItem's put's) item, and the partition key a Query on the index names in its KeyConditionExpression. An
UpdateItem's or DeleteItem's index key is the stored item's or the update's, known only once it ran: it draws on
its GSI partitions after it ran (as a Query's or Scan's table partition does) and is not refused by them. Best
guess: DynamoDB does not say how it attributes a write whose index key it must first read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from openddb.expressions import ExpressionAttributes
from openddb.expressions.keycondition import key_clauses
from openddb.model.indexes import encode_parts
from openddb.model.keys import partition_hash
from openddb.model.schema import IndexMeta


def index_hashes(key_names: tuple[str, ...], items: Iterable[dict[str, Any] | None]) -> list[int]:
    """The distinct GSI partition hashes of `items` (written items, or the key values a Query named) under an
    index whose partition key is made of `key_names`; an item without them, or with a value that is no key,
    is in no partition of it."""
    found: list[int] = []
    for item in items:
        if item is None:
            continue
        try:
            h = partition_hash(encode_parts([item[name] for name in key_names]))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        if h not in found:
            found.append(h)
    return found


def index_partitions_named(table: str, index: IndexMeta, operation: str, request: dict[str, Any]) -> list[int]:
    """The hashes of the partitions of `table`'s GSI `index` that `request` names before it runs (see the module's
    doc), read before it is validated: what cannot be read is left to the handler to refuse."""
    return index_hashes(tuple(key.name for key in index.hash_keys), index_items_named(table, index, operation,
                                                                                      request))


def index_items_named(table: str, index: IndexMeta, operation: str, request: dict[str, Any]) -> list[Any]:
    """What `request` names of `table`'s GSI `index` before it runs: the items it puts, or the partition key values
    of a Query on the index ({attribute: value}); unread, unvalidated (each may lack the index's key)."""
    if operation == "PutItem":
        return [request.get("Item")]
    if operation == "BatchWriteItem":
        writes = (request.get("RequestItems") or {}).get(table)
        puts = [write.get("PutRequest") if isinstance(write, dict) else None
                for write in (writes if isinstance(writes, list) else ())]
        return [put.get("Item") if isinstance(put, dict) else None for put in puts]
    if operation == "Query" and request.get("IndexName") == index.name:
        text = request.get("KeyConditionExpression")
        if not isinstance(text, str):
            return []  # (the legacy KeyConditions: rewritten by the handler)
        try:
            attrs = ExpressionAttributes(request.get("ExpressionAttributeNames"),
                                         request.get("ExpressionAttributeValues"))
            equal = {name: values[0] for name, op, values in key_clauses(text, attrs) if op == "=" and values}
        except Exception:  # (any malformed condition is the handler's to refuse, with its message)
            return []
        named = {key.name: equal[key.name] for key in index.hash_keys if key.name in equal}
        return [named] if len(named) == len(index.hash_keys) else []
    return []
