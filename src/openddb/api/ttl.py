"""Time to Live: UpdateTimeToLive and DescribeTimeToLive, and the sweep that deletes expired items.

An item expires once the Number in its TTL attribute (epoch seconds) is below the current time; values more
than five years in the past are ignored, as are attributes of any other type. DynamoDB deletes expired items
best effort (typically within days), so an expired item stays readable until its turn comes, and it is kept if
it no longer qualifies by then. Here `sweep` runs about once a second (`Dispatcher.run_background`) on the one
process, of all the workers and nodes sharing the store, that holds the sweep's lease, and examines a bounded
chunk of each table per run: small tables expire within seconds, a large one within a pass proportional to its
size. Its deletes go through `Engine.write` like a DeleteItem's, so indexes (and later stream records) follow in
the same transaction.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from itertools import islice
from typing import Any

import orjson

from openddb import clock
from openddb.api import validation as v
from openddb.api.context import RequestContext
from openddb.errors import ValidationException
from openddb.model import Item
from openddb.model.schema import TableMeta
from openddb.storage.base import HASH_SPACE, ApplyFn, Engine, Row, StorageKey, WriteOp, lease_holder

# "It can take up to one hour for the change to fully process. Any additional UpdateTimeToLive calls for the
# same table during this one hour duration result in a ValidationException." (API reference)
CHANGE_INTERVAL = 3600.0
IGNORED_AGE = 5 * 365 * 86400  # TTL values further in the past than this are not expiry times
SWEEP_ROWS = 1000  # rows examined per table per sweep
_LEASE = "ttl-sweep"
_LEASE_SECONDS = 3.0  # renewed every sweep; a stopped holder blocks the others this long

UPDATE_TIME_TO_LIVE = v.Struct({
    "TableName": v.table_name_or_arn(),
    "TimeToLiveSpecification": v.Struct({
        "Enabled": v.Bool(required=True),
        "AttributeName": v.Str(required=True, min_len=1, max_len=255),
    }, required=True),
})
DESCRIBE_TIME_TO_LIVE = v.Struct({"TableName": v.table_name_or_arn()})


def update_time_to_live(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_named(UPDATE_TIME_TO_LIVE, request)
    spec = request["TimeToLiveSpecification"]
    enabled, name = spec["Enabled"], spec["AttributeName"]
    before = context.described_table(request["TableName"])
    current = before.ttl_attribute
    # What the request asks is checked before how recently the setting changed.
    if current is not None and current != name:
        raise ValidationException(f"TimeToLive is active on a different AttributeName: current AttributeName is "
                                  f"{current}")
    if enabled and current is not None:
        raise ValidationException("TimeToLive is already enabled")
    if not enabled and current is None:
        raise ValidationException("TimeToLive is already disabled")
    now = clock.now()
    if before.ttl_updated_at is not None and now - before.ttl_updated_at < CHANGE_INTERVAL:
        raise ValidationException("Time to live has been modified multiple times within a fixed interval")
    meta = copy.deepcopy(before)  # the engine's cached description stays untouched until the change is stored
    meta.ttl_attribute = name if enabled else None
    meta.ttl_updated_at = now
    context.engine.update_table(meta)
    return {"TimeToLiveSpecification": {"AttributeName": name, "Enabled": enabled}}


def describe_time_to_live(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_named(DESCRIBE_TIME_TO_LIVE, request)
    meta = context.described_table(request["TableName"])
    if meta.ttl_attribute is None:
        return {"TimeToLiveDescription": {"TimeToLiveStatus": "DISABLED"}}
    return {"TimeToLiveDescription": {"TimeToLiveStatus": "ENABLED", "AttributeName": meta.ttl_attribute}}


HANDLERS = {
    "UpdateTimeToLive": update_time_to_live,
    "DescribeTimeToLive": describe_time_to_live,
}


# --- expiry ----------------------------------------------------------------------------------------------


def expired(item: Item, attribute: str, now: float) -> bool:
    """Whether `item` has expired at `now` under the TTL attribute `attribute`."""
    value = item.get(attribute)
    if value is None or "N" not in value:
        return False
    try:
        seconds = float(value["N"])
    except (TypeError, ValueError):
        return False
    return now - IGNORED_AGE <= seconds < now


def _expire(attribute: str, now: float) -> ApplyFn:
    """Delete the item if it is (still) expired when the write reads it; else leave it as it is."""
    def apply(old: Item | None) -> Item | None:
        return None if old is not None and expired(old, attribute, now) else old
    return apply


# Where each table's sweep stands (table uuid -> the last key examined; None: start over), in this process.
_cursors: dict[str, StorageKey | None] = {}


def _expired_keys(engine: Engine, meta: TableMeta, attribute: str, now: float, rows: int) -> list[StorageKey]:
    """The keys of expired items among the next `rows` rows of the table's sweep, which moves on."""
    after = _cursors.get(meta.uuid)
    scan: Iterator[Row] = engine.scan(meta, 0, HASH_SPACE, after)
    found: list[StorageKey] = []
    seen = 0
    last = None
    try:
        for row in islice(scan, rows):
            seen += 1
            last = row.key
            if expired(orjson.loads(row.data), attribute, now):
                found.append(row.key)
    finally:
        close = getattr(scan, "close", None)
        if close is not None:
            close()
        engine.end_reads()
    _cursors[meta.uuid] = last if seen == rows else None
    return found


def sweep(engine: Engine, now: float, rows: int = SWEEP_ROWS, lease: bool = True) -> int:
    """Delete the expired items found in the next chunk of every table with TTL enabled, if this process holds
    the sweep's lease (or `lease` is off); the number deleted. Call it with no group of writes open."""
    tables = [meta for meta in map(engine.get_table, engine.list_tables())
              if meta is not None and meta.ttl_attribute is not None]
    if not tables or (lease and not engine.try_lease(_LEASE, lease_holder(), _LEASE_SECONDS, time.time())):
        return 0
    deleted = 0
    with engine.session.serialized():  # a plain transaction under the lock: no conflict to retry
        for meta in tables:
            attribute = meta.ttl_attribute
            assert attribute is not None
            keys = _expired_keys(engine, meta, attribute, now, rows)
            if not keys:
                continue
            apply = _expire(attribute, now)
            results = engine.write([WriteOp(meta, key, apply, origin="ttl") for key in keys])
            engine.commit()
            deleted += sum(1 for result in results if result.old is not None and result.new is None)
    return deleted
