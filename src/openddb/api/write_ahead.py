"""The items the PutItem, UpdateItem and DeleteItem requests of an event-loop pass will write, worked out before
they run, so an engine with `Engine.writes_ahead` can lock them all in one round trip (see `Engine.lock_ahead`;
issue 32).

A hint, as reads ahead are (api/read_ahead.py): each request still runs whole and finds its own errors; a request
whose key cannot be worked out cheaply here is left out and locks for itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from openddb.api.keys import storage_key
from openddb.api.read_ahead import UNREADABLE, table_of
from openddb.model.schema import TableMeta
from openddb.storage.base import Engine, StorageKey

PUT_ITEM = b"DynamoDB_20120810.PutItem"
TARGETS = frozenset((PUT_ITEM, b"DynamoDB_20120810.UpdateItem", b"DynamoDB_20120810.DeleteItem"))


def lock_ahead(engine: Engine, requests: Sequence[tuple[bytes, bytes, str]]) -> None:
    """Hand the engine the items of `requests` (target, body, the caller's table namespace), in one call."""
    writes: list[tuple[TableMeta, StorageKey]] = []
    for target, body, namespace in requests:
        try:
            request = orjson.loads(body)
            meta = table_of(engine, namespace, request["TableName"])
            if meta is not None:
                writes.append((meta, storage_key(meta, request["Item" if target == PUT_ITEM else "Key"])))
        except UNREADABLE:
            continue
    if writes:
        engine.lock_ahead(writes)
