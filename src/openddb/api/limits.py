"""DynamoDB's size limits on keys, expressions and items, and the item-size check of every write."""

from __future__ import annotations

import orjson

from openddb.model import Item
from openddb.model.indexes import entry_of
from openddb.model.schema import TableMeta
from openddb.model.values import MAX_ITEM_SIZE, item_size

MAX_HASH_KEY_BYTES = 2048
MAX_RANGE_KEY_BYTES = 1024
MAX_EXPRESSION_BYTES = 4096
MAX_PLACEHOLDER_BYTES = 255  # "#name is five bytes" (the Developer Guide's constraints page)

# "The maximum length of all substitution variables in an expression is 2 MB. This is the sum of the lengths of all
# ExpressionAttributeNames and ExpressionAttributeValues." (the Developer Guide's quotas page)
MAX_SUBSTITUTION_BYTES = 2 * 1024 * 1024


def exceeds_item_size(meta: TableMeta, item: Item, size: int | None = None) -> bool:
    """True if a validated item is over DynamoDB's 400 KB limit, which on a table with local secondary indexes
    holds the item together with its entries in them (their key values and projected attributes). `size`: the
    item's size, if the caller has counted it.

    An item's compact JSON is never shorter than its DynamoDB size (every name and value is written out in full,
    plus quotes and type keys that outweigh the 1-3 byte overheads) and an LSI entry is never larger than its
    item, so the exact count, slow in Python, is only needed for items whose JSON, once per copy, is over it."""
    local = [index for index in meta.indexes if not index.is_global] if meta.indexes else []
    if size is None:
        if len(orjson.dumps(item)) * (1 + len(local)) <= MAX_ITEM_SIZE:
            return False
        size = item_size(item)
    total = size
    for index in local:
        entry = entry_of(meta, index, item, size)
        if entry is not None:
            total += entry.size
    return total > MAX_ITEM_SIZE
