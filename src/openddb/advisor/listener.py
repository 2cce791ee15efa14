"""The advisor as a listener of the request record (observe/record.py): each answered call updates the observations
of the tables it touched (observations.py) and the per-client trackers (tracking.py). It runs on the event-loop
thread once per request, must be cheap and must not raise: a failure to observe is logged once and the request is
left unobserved."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from openddb import clock
from openddb.advisor import shapes
from openddb.advisor.observations import Schema, TableObservations
from openddb.advisor.settings import Settings
from openddb.advisor.tracking import Bursts, Client, Races, Retries, client_name
from openddb.advisor.windows import Windows
from openddb.api.context import table_name_from
from openddb.model.schema import namespace_of_arn
from openddb.observe.record import RequestRecord
from openddb.storage.base import Engine

log = logging.getLogger("openddb.advisor")

_SCHEMA_SECONDS = 1.0  # how stale a table's description may be in the advisor's view
THROTTLES = frozenset({"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"})
KEY_STRIDE = 4  # partition keys go into the heavy-hitters sketch for one charge in this many
# The calls sampled once the advisor's time budget of the second is spent (Thresholds.observe_budget), when they
# succeed: the frequent single-item calls. Others (Scans, batches, transactions, schema changes, any call refused
# or throttled) are rare, or are what the rules look for, and are observed in full.
SAMPLED = frozenset({"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query"})


class Advisor:
    """The observations of one server process (one worker: see docs/ADVISOR.md, Limits)."""

    def __init__(self, settings: Settings, engine_of: Callable[[], Engine]) -> None:
        self.settings = settings
        self.limits = settings.thresholds
        self.engine_of = engine_of
        self.started = time.time()
        self.tables: dict[str, TableObservations] = {}  # each table's current slice (windows.py: the ones before)
        self.windows = Windows(self.limits.retention_hours)
        self.races = Races()
        self.bursts = Bursts()
        self.retries = Retries()
        self.changes: list[dict[str, Any]] = []  # destructive schema changes of indexes or tables that served reads
        self._failed = False
        # Sampling (Thresholds.observe_budget): seconds spent observing since the budget's second began, when that
        # second ends (monotonic), calls passed over since the last one observed, and the weight of the call being
        # observed (how many calls it stands for: 1, or the calls passed over and itself)
        budget = self.limits.observe_budget
        self.budget = budget if budget < 1.0 else float("inf")
        self.every = max(int(self.limits.sample_every), 1)
        self.large = self.limits.blob_bytes
        self.spent = 0.0
        self.second_ends = time.monotonic() + 1.0
        self.passed = 0
        self.weight = 1
        self.observing = 0.0  # seconds spent observing calls in full, in all
        self._handlers: dict[str, Callable[[RequestRecord, dict[str, Any], Client, float], None]] = {
            "GetItem": self._get, "PutItem": self._write, "UpdateItem": self._write, "DeleteItem": self._write,
            "Query": self._query, "Scan": self._scan, "BatchGetItem": self._batch, "BatchWriteItem": self._batch,
            "TransactWriteItems": self._transaction, "TransactGetItems": self._transaction,
            "DeleteTable": self._schema_change, "UpdateTable": self._schema_change,
            "CreateTable": self._schema_change, "UpdateTimeToLive": self._schema_change,
        }

    def observe(self, record: RequestRecord) -> None:
        weight = 1
        if (self.spent >= self.budget and record.status == 200 and record.operation in SAMPLED
                and not (record.charges and record.charges[0].size >= self.large)):
            # The second's budget is spent: one call in `every` stands for the ones passed over (a large item is
            # rare and what item-large looks for: observed still).
            passed = self.passed = self.passed + 1
            moment = time.monotonic()
            if moment >= self.second_ends:  # a new second, a new budget
                self.spent, self.second_ends = 0.0, moment + 1.0
            if passed < self.every and self.spent >= self.budget:
                return
            # (observed: the one in `every`, or the first call of a new second, which stands for those passed over
            # before it, however few: a client slower than the budget's rate is counted whole)
            weight, self.passed = passed, 0
        handler = self._handlers.get(record.operation)
        request = record.request
        if handler is None or request is None:
            return
        self.weight = weight
        started = time.perf_counter()
        try:
            handler(record, request, (record.access_key, record.client), time.monotonic())
        except Exception:  # (a listener must not raise: the request was answered already)
            # A refused request may hold any JSON where a shape was expected: it goes unobserved, unsaid. An
            # answered one that cannot be observed is a bug, logged once.
            if record.status == 200 and not self._failed:
                self._failed = True
                log.exception("the advisor could not observe a %s request", record.operation)
        spent = time.perf_counter() - started
        self.spent += spent
        self.observing += spent

    def table(self, name: str) -> TableObservations:
        """The observations of the table stored as `name` (its namespace and its name: observe/record.py), made on
        first sight, its description refreshed when stale."""
        now = clock.now()
        table = self.tables.get(name)
        if table is None:
            table = self.tables[name] = TableObservations(name, self.engine_of().get_table(name), now)
        elif now >= table.ends:  # (its minute is over: sealed, and the next one begun)
            table = self.tables[name] = self.windows.roll(table, now)
        if now - table.schema_at > _SCHEMA_SECONDS:
            meta = self.engine_of().get_table(name)
            if meta is not None:
                table.meta, table.schema, table.schema_at = meta, Schema(meta), now
        table.last_seen = now
        return table

    def _account(self, record: RequestRecord, table: TableObservations, pattern: tuple[str, str | None, str, int, bool],
                 now: float) -> tuple[float, float]:
        """Add the record's charges to `table`: its pattern, partition keys, per-second units, indexes."""
        read = write = 0.0
        second = int(now)
        name = table.client_name  # (charges name tables as clients do)
        weight = self.weight
        table.calls += weight
        table.passed_over += weight - 1
        # (unpacked: a NamedTuple's attributes cost more to read than its items)
        for _, charged, index_name, _, units, writes, _, stored, _, _ in record.charges:
            if charged != name:
                continue
            key = None if stored is None else stored.pk
            units *= weight
            if index_name is None:
                if writes:
                    write += units
                else:
                    read += units
                if key is not None:
                    self._key(table, key, units, writes, second, weight)
            else:
                index = table.index(index_name)
                if writes:
                    index.writes += weight
                    index.write_units += units
                else:
                    index.units += units
        table.units(read, write, second)
        table.read_units += read
        table.write_units += write
        if record.error in THROTTLES:
            table.throttled += 1
        table.pattern(pattern, record.latency, read, write, record.status == 200, table.last_seen, weight)
        return read, write

    @staticmethod
    def _key(table: TableObservations, key: bytes, units: float, writes: bool, second: int, weight: int) -> None:
        """Add a charge of `units` (for `weight` calls) to the partition-key sketch, one charge in KEY_STRIDE (its
        units scaled up: a key taking a large share of the traffic takes the same share of the sample)."""
        if weight == 1:
            table.key_tick += 1
            if table.key_tick % KEY_STRIDE:
                return
            units *= KEY_STRIDE
        table.keys.add(key, 0.0 if writes else units, units if writes else 0.0, second, weight / KEY_STRIDE
                       if weight > 1 else 1.0)

    def _named(self, record: RequestRecord, request: dict[str, Any]) -> TableObservations | None:
        name = request.get("TableName")
        return self.table(_stored(record, name)) if isinstance(name, str) and name else None

    def _get(self, record: RequestRecord, request: dict[str, Any], client: Client, now: float) -> None:
        table = self._named(record, request)
        if table is None:
            return
        consistent = request.get("ConsistentRead") is True
        self._account(record, table, ("GetItem", None, table.schema.key_shape, shapes.projected(request),
                                      consistent), now)
        table.reads += self.weight
        table.strong_reads += consistent * self.weight
        self._throttle(record, table, client, now)
        if record.status != 200:
            return
        if self.bursts.call(client, table.name, "read", now, self.limits, self.weight):
            table.burst(client_name(client), "read")
        key = request.get("Key")
        if isinstance(key, dict):
            self.races.read(self._item_id(table, key, record), client, now)
        item = (record.response or {}).get("Item")
        if item is not None and table.schema.ttl is not None:
            table.expired([item], clock.now())

    def _item_id(self, table: TableObservations, key: dict[str, Any], record: RequestRecord
                 ) -> tuple[str, bytes | None, str]:
        partition = _partition(record)
        sort = key.get(table.schema.range_key or "") if table.schema.range_key else None
        return (table.name, partition, str(next(iter(sort.values()))) if isinstance(sort, dict) and sort else "")

    def _throttle(self, record: RequestRecord, table: TableObservations, client: Client, now: float) -> None:
        if record.error in THROTTLES:
            table.quick_retry(client_name(client),
                              self.retries.throttled(client, table.name, now - record.latency, now, self.limits))

    def _write(self, record: RequestRecord, request: dict[str, Any], client: Client, now: float) -> None:
        table = self._named(record, request)
        if table is None:
            return
        operation = record.operation
        conditional = bool(request.get("ConditionExpression") or request.get("Expected"))
        self._account(record, table, (operation, None, table.schema.key_shape, -1, False), now)
        table.writes += self.weight
        self._throttle(record, table, client, now)
        ok = record.status == 200
        if operation == "PutItem" and not conditional:
            table.repeat(self.retries.request(client, operation, request, ok, now, self.limits, table.name))
        if not ok:
            item = request.get("Item")
            if table.schema.index_keys and isinstance(item, dict):
                table.check_index_types(item, table.key_of(item))  # (DynamoDB refuses such a write)
            return
        if self.bursts.call(client, table.name, "write", now, self.limits, self.weight):
            table.burst(client_name(client), "write")
        item = request.get("Item") if operation == "PutItem" else request.get("Key")
        if not isinstance(item, dict):
            return
        key = table.key_of(item)
        table.race(self.races.write(self._item_id(table, item, record), client, now, conditional, key, self.limits))
        size = next((charge.size for charge in record.charges if charge.index_name is None), 0)
        self._sized(table, size, key, self.weight)
        if operation == "PutItem":
            self._put(table, item, key, record, size)
        elif operation == "UpdateItem":
            self._update(table, request, key, record, size)

    @staticmethod
    def _sized(table: TableObservations, size: int, key: Any, weight: int = 1) -> None:
        if size > table.sizes.largest:
            table.largest_key = key
        table.sizes.add(size, weight)

    def _put(self, table: TableObservations, item: dict[str, Any], key: Any, record: RequestRecord,
             size: int) -> None:
        """A new item (PutItem, or a batch's or transaction's Put): key order, index key types, a sample's values."""
        partition = _partition(record)
        if partition is not None:
            if table.last_key is not None and partition != table.last_key:
                table.compared += 1
                table.increasing += partition > table.last_key
            table.last_key = partition
            if table.schema.range_key is None and table.schema.hash_type == "S":
                table.key_sample.add(partition.decode("utf-8", "replace"))
        self._maybe_inspect(table, item, key, size)

    def _maybe_inspect(self, table: TableObservations, item: dict[str, Any], key: Any, size: int) -> None:
        limits = self.limits
        writes = table.writes
        if (writes <= limits.item_sample_first or writes % max(limits.item_sample_every, 1) == 0
                or size >= limits.blob_bytes or self.weight > 1):
            table.inspect(item, key, limits, clock.now())

    def _update(self, table: TableObservations, request: dict[str, Any], key: Any, record: RequestRecord,
                size: int) -> None:
        expression = request.get("UpdateExpression")
        if not isinstance(expression, str):
            return
        names = request.get("ExpressionAttributeNames")
        for attribute in shapes.appended_attributes(expression, names):
            table.append(_partition(record), attribute, size, key, self.limits, self.weight)
        if table.schema.index_keys or table.schema.ttl:
            values = request.get("ExpressionAttributeValues") or {}
            if "list_append" not in expression:
                assigned = _assignments(expression, names, values)
                if assigned:
                    table.check_index_types(assigned, key)
                    self._maybe_inspect(table, assigned, key, size)

    def _query(self, record: RequestRecord, request: dict[str, Any], client: Client, now: float) -> None:
        table = self._named(record, request)
        if table is None:
            return
        index = request.get("IndexName")
        expression = request.get("KeyConditionExpression")
        if isinstance(expression, str):
            shape = shapes.key_condition_shape(expression, request.get("ExpressionAttributeNames"))
        else:
            shape = " AND ".join(f"{name} {condition.get('ComparisonOperator', '?')} ?"
                                 for name, condition in (request.get("KeyConditions") or {}).items())
        consistent = request.get("ConsistentRead") is True
        projected = shapes.projected(request)
        self._account(record, table, ("Query", index, shape, projected, consistent), now)
        self._read(table, index, projected, consistent)
        self._throttle(record, table, client, now)
        self._returned(table, record)

    def _read(self, table: TableObservations, index: Any, projected: int, consistent: bool) -> None:
        weight = self.weight
        table.reads += weight
        table.strong_reads += consistent * weight
        if isinstance(index, str):
            reads = table.index(index)
            reads.reads += weight
            if 0 <= projected <= self.limits.projection_all_attributes:
                reads.narrow += weight

    def _returned(self, table: TableObservations, record: RequestRecord) -> None:
        if table.schema.ttl is not None and record.status == 200 and (table.reads % 8 == 1 or self.weight > 1):
            table.expired((record.response or {}).get("Items") or [], clock.now())

    def _scan(self, record: RequestRecord, request: dict[str, Any], client: Client, now: float) -> None:
        table = self._named(record, request)
        if table is None:
            return
        index = request.get("IndexName")
        consistent = request.get("ConsistentRead") is True
        projected = shapes.projected(request)
        parallel = "Segment" in request
        self._account(record, table, ("Scan", index, "parallel" if parallel else "", projected, consistent), now)
        self._read(table, index, projected, consistent)
        self._throttle(record, table, client, now)
        if record.status != 200 or parallel:
            return
        table.scan(now, self.limits)
        response = record.response or {}
        if request.get("FilterExpression") or request.get("ScanFilter"):
            table.scanned += int(response.get("ScannedCount", 0))
            table.scan_returned += int(response.get("Count", 0))
        if "Limit" not in request and "LastEvaluatedKey" in response:
            table.unlimited_pages += 1
        self._key_filters(table, request)
        self._returned(table, record)

    def _key_filters(self, table: TableObservations, request: dict[str, Any]) -> None:
        filtered = request.get("FilterExpression")
        if isinstance(filtered, str):
            compared = shapes.equality_attributes(filtered, request.get("ExpressionAttributeNames"))
        else:
            compared = tuple(name for name, condition in (request.get("ScanFilter") or {}).items()
                             if condition.get("ComparisonOperator") == "EQ")
        keys = table.key_attributes()
        for attribute in compared:
            if attribute in keys:
                table.scan_key_filters[attribute] = table.scan_key_filters.get(attribute, 0) + 1

    def _batch(self, record: RequestRecord, request: dict[str, Any], client: Client, now: float) -> None:
        items = request.get("RequestItems")
        if not isinstance(items, dict):
            return
        response = record.response or {}
        left = response.get("UnprocessedItems") or response.get("UnprocessedKeys") or {}
        for name, entries in items.items():
            table = self.table(_stored(record, name))
            self._account(record, table, (record.operation, None, table.schema.key_shape, -1, False), now)
            self._throttle(record, table, client, now)
            if record.status != 200:
                continue
            self.retries.batch(client, table.name, name in left, now)
            if record.operation == "BatchGetItem":
                table.reads += 1
                continue
            table.writes += 1
            for entry in entries if isinstance(entries, list) else ():
                put = entry.get("PutRequest") if isinstance(entry, dict) else None
                if isinstance(put, dict) and isinstance(put.get("Item"), dict):
                    self._put(table, put["Item"], table.key_of(put["Item"]), record, 0)

    def _transaction(self, record: RequestRecord, request: dict[str, Any], client: Client, now: float) -> None:
        actions = request.get("TransactItems")
        if not isinstance(actions, list):
            return
        targets: list[tuple[str, str]] = []
        for action in actions:
            for kind, body in action.items() if isinstance(action, dict) else ():
                if isinstance(body, dict) and isinstance(body.get("TableName"), str):
                    key = body.get("Item") if kind == "Put" else body.get("Key")
                    table = self.table(_stored(record, body["TableName"]))
                    targets.append((table.name, repr(sorted(table.key_of(key).items())) if isinstance(key, dict)
                                    else ""))
        for name in dict.fromkeys(name for name, _ in targets):
            table = self.tables[name]
            self._account(record, table, (record.operation, None, f"{len(actions)} actions", -1, False), now)
            self._throttle(record, table, client, now)
        if record.operation == "TransactWriteItems" and "ClientRequestToken" not in request and targets:
            self.tables[targets[0][0]].repeat(self.retries.request(client, record.operation, request,
                                                                   record.status == 200, now, self.limits,
                                                                   targets[0][0]))
        if record.status == 200 and targets and len(set(targets)) == 1:
            self.tables[targets[0][0]].transaction({"operation": record.operation, "actions": len(actions),
                                                    "item": targets[0][1]})

    def _schema_change(self, record: RequestRecord, request: dict[str, Any], client: Client, now: float) -> None:
        name = request.get("TableName")
        if record.status != 200 or not isinstance(name, str):
            return
        name = _stored(record, name)
        table = self.tables.get(name)
        least = max(self.limits.destructive_min_reads, 1)
        reads = 0 if table is None else self.windows.reads(table)
        if record.operation == "DeleteTable" and reads >= least:
            self._destructive({"table": name, "change": "DeleteTable", "reads_before": reads})
        for update in request.get("GlobalSecondaryIndexUpdates") or ():
            deleted = (update.get("Delete") or {}).get("IndexName") if isinstance(update, dict) else None
            served = self.windows.reads(table, deleted) if table is not None and isinstance(deleted, str) else 0
            if served >= least:
                self._destructive({"table": name, "change": f"UpdateTable deleting index {deleted}",
                                   "reads_before": served})
        if table is not None:
            # (described afresh at the next request; a table created again under its name keeps the name's
            # observations: a test suite creates its tables anew for each test)
            table.schema_at = 0.0

    def _destructive(self, change: dict[str, Any]) -> None:
        if len(self.changes) < 50:
            change["at"] = clock.now()
            self.changes.append(change)

    def expire(self) -> None:
        """Forget what ended before the retention (windows.py): old slices, tables seen in none, schema changes."""
        now = clock.now()
        self.windows.expire(self.tables, now)
        horizon = now - self.windows.retention
        self.changes = [change for change in self.changes if change["at"] > horizon]

    def observed(self, name: str, since: float | None) -> TableObservations | None:
        """The observations of the table stored as `name` within the window from `since` (None: all kept), as one
        (None: not seen within it)."""
        current = self.tables.get(name)
        return None if current is None else self.windows.window(current, since)


def _assignments(expression: str, names: dict[str, str] | None, values: dict[str, Any]) -> dict[str, Any]:
    """The attributes a simple "SET a = :v, b = :w" sets to a value (for the checks of written values)."""
    assigned: dict[str, Any] = {}
    head, _, body = expression.strip().partition(" ")
    if head.upper() != "SET":
        return assigned
    for part in body.split(","):
        left, equals, right = part.partition("=")
        right = right.strip()
        if equals and right.startswith(":") and right in values:
            assigned[shapes.resolved(left.strip(), names)] = values[right]
    return assigned


def _stored(record: RequestRecord, name_or_arn: str) -> str:
    """The engine's name of a table the request named (by name: in the caller's namespace; by ARN: in the
    namespace of the account the ARN names, where tables are kept by account and region)."""
    if not name_or_arn.startswith("arn:"):
        return record.namespace + name_or_arn
    return namespace_of_arn(name_or_arn, bool(record.namespace)) + table_name_from(name_or_arn)


def _partition(record: RequestRecord) -> bytes | None:
    """The encoded partition key of the record's first charge (None: no charge, or several partitions)."""
    stored = record.charges[0].key if record.charges else None
    return None if stored is None else stored.pk
