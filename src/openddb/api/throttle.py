"""Throughput limits as DynamoDB applies them (`openddb serve --throttling on`; off by default).

Each table and each GSI is a set of token buckets, kept per worker process:

- provisioned capacity: a read and a write bucket filled at the provisioned rate, holding up to BURST_SECONDS
  (300 s) of unused capacity, DynamoDB's burst capacity. A bucket starts with one second of capacity and what the
  table left unused since it was made (best guess: DynamoDB does not say how much burst a new table has); a change
  of capacity starts it afresh. Past it, ProvisionedThroughputExceededException with
  Table/Index Read/Write ProvisionedThroughputExceeded.
- on-demand maximums (OnDemandThroughput MaxReadRequestUnits / MaxWriteRequestUnits, of the table or a GSI): a
  bucket at that rate holding one second of it; past it, ThrottlingException with ...MaxOnDemandThroughputExceeded.
- partitions: the table's hash space split in equal ranges, as many as its throughput needs (one per 3,000 read or
  1,000 write units provisioned, of the highest ever provisioned or asked for as warm throughput; at least four for
  an on-demand table, which serves 12,000 reads or 4,000 writes a second from creation). Each partition serves at
  most 3,000 read units or 1,000 write units a second, or a linear combination (a bucket of one second); past it,
  TableRead/WriteKeyRangeThroughputExceeded: one hot key is throttled while the same rate spread over many keys is
  not. A partition that runs near its limit for long enough splits for heat (api/partition_splits.py), so an even
  workload that outgrows its first partitions is served, while one hot key stays throttled. A partition whose data
  passes 10 GB splits at its size median (api/partition_sizes.py); its halves serve their own limits.
- a GSI short of write capacity throttles writes to its table (IndexWriteProvisionedThroughputExceeded, the
  index's ARN): a write to a table is refused while any of its provisioned GSIs' write bucket is empty.
- a GSI's partitions, by the hash of its own partition key, with the same limits and splits for heat as a table's:
  past one, Index Read/Write KeyRangeThroughputExceeded with the index's ARN (api/index_partitions.py says which
  requests name theirs before they run).

A request is admitted while the buckets it draws on are not empty, before it runs (a throttled request changes
nothing); what it consumed is taken from them after it ran (`observe`, a listener of the request record), so a
large item may leave a bucket in debt, which later requests wait out, as on DynamoDB. Only item operations are
throttled; a batch (BatchGetItem, BatchWriteItem) only when every table it names is throttled (DynamoDB refuses a
batch with the exception only when none of it could be served; here a batch is served whole or not at all).
A Query's or Scan's table partition is not looked up before it runs: they draw on the table's and index's
buckets, and their partition after the fact (a Query on a GSI is checked against the GSI partition its key
condition names). The workers of a host draw on the same buckets, in shared memory
(api/shared_buckets.py: `openddb serve --workers N` makes them), so a table is throttled at its rate however many
workers serve it; a Throttle without them (one process) keeps its own. PostgreSQL nodes tell each other their draws
through the store about once a second (api/throttle_exchange.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any, Literal

from openddb import clock
from openddb.api.context import table_name_from, tables_named
from openddb.api.fault_injection import ON_DEMAND_THROTTLE, PROVISIONED_THROTTLE
from openddb.api.index_partitions import index_hashes, index_items_named, index_partitions_named
from openddb.api.partition_sizes import DEFAULT_PARTITION_BYTES, SizeWatch, cut_for_size
from openddb.api.partition_splits import (
    DEFAULT_HEAT_SECONDS,
    LocalSplits,
    Partition,
    PartitionMap,
    SharedSplits,
    SplitBook,
)
from openddb.api.shared_buckets import SharedBucket, SharedBuckets
from openddb.api.throttle_exchange import DrawExchange
from openddb.api.token_buckets import MakeBucket, TokenBucket, local_bucket
from openddb.errors import DynamoDBError, ProvisionedThroughputExceededException, ThrottlingException
from openddb.model.keys import encode_key, partition_hash
from openddb.model.schema import IndexMeta, TableMeta
from openddb.observe.record import RequestRecord
from openddb.storage.base import Engine

BURST_SECONDS = 300.0
PARTITION_READ_UNITS = 3000.0
PARTITION_WRITE_UNITS = 1000.0
ON_DEMAND_PARTITIONS = 4  # 12,000 read or 4,000 write request units at creation (Developer Guide, on-demand mode)

_READS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"})
_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})
_BATCHES = frozenset({"BatchGetItem", "BatchWriteItem"})
Access = Literal["Read", "Write"]


class Resource:
    """A table's or a GSI's buckets, as its description sets them (`shape`: what they were made from)."""

    def __init__(self, shape: tuple[Any, ...], arn: str, provisioned: bool, read: TokenBucket | None,
                 write: TokenBucket | None, partitions: PartitionMap) -> None:
        self.shape = shape
        self.arn = arn
        self.provisioned = provisioned
        self.read = read
        self.write = write
        # one bucket of partition-seconds per partition: a read unit is 1/3000 of it, a write unit 1/1000
        self.partitions = partitions
        self.key_names: tuple[str, ...] = ()  # a GSI's partition key attributes (its partitions' hashes)


def _shape(uuid: str, billing: str, read: int, write: int, on_demand: dict[str, int],
           peaks: tuple[int, int]) -> tuple[Any, ...]:
    """What a resource's buckets are made from (a table dropped and made again under its name has a new uuid)."""
    return (billing, read, write, on_demand.get("MaxReadRequestUnits", -1), on_demand.get("MaxWriteRequestUnits", -1),
            peaks, uuid)


def _resource(shape: tuple[Any, ...], arn: str, now: float, unused: float, make: MakeBucket,
              layout: Callable[[str, int], PartitionMap]) -> Resource:
    """A resource's buckets; `unused`: seconds since the table was made, whose capacity its burst has kept;
    `layout`: its partitions, (what names them, how many it starts with)."""
    billing, read, write, max_read, max_write, (peak_read, peak_write), uuid = shape
    units = max(peak_read, read) / PARTITION_READ_UNITS + max(peak_write, write) / PARTITION_WRITE_UNITS
    key = f"{arn} {shape!r}"
    if billing == "PROVISIONED":
        count = max(1, -int(-units // 1))
        return Resource(shape, arn, True, make(f"{key} r", read, read * BURST_SECONDS, now, unused),
                        make(f"{key} w", write, write * BURST_SECONDS, now, unused),
                        layout(f"{arn} {uuid} n{count}", count))
    count = max(ON_DEMAND_PARTITIONS, -int(-units // 1))
    partitions = layout(f"{arn} {uuid} n{count}", count)
    return Resource(shape, arn, False, make(f"{key} r", max_read, max_read, now, 0.0) if max_read > 0 else None,
                    make(f"{key} w", max_write, max_write, now, 0.0) if max_write > 0 else None, partitions)


class Throttle:
    """Admits or throttles item operations by their tables' throughput, and takes what they consumed."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic, shared: SharedBuckets | None = None,
                 exchange: DrawExchange | None = None, heat_seconds: float = DEFAULT_HEAT_SECONDS,
                 partition_bytes: int = DEFAULT_PARTITION_BYTES) -> None:
        """`shared`: the host's buckets, which every worker draws on (then `monotonic` must be the host's clock,
        time.monotonic); None: this process's own. `exchange`: the draws told across PostgreSQL nodes
        (api/throttle_exchange.py; with `shared` only). `heat_seconds`: how long a partition runs at its limit
        before it splits (api/partition_splits.py); `partition_bytes`: the data past which it splits
        (api/partition_sizes.py)."""
        self._clock = monotonic
        self.exchange = exchange
        self._resources: dict[tuple[str, str | None], Resource] = {}
        self._shared = shared
        self._heat_seconds = heat_seconds
        self._make: MakeBucket = local_bucket
        self._splits: SplitBook = LocalSplits() if shared is None else SharedSplits(shared)
        self._loaded = False  # (the splits the store kept: taken on the first request)
        self._unsaved: dict[str, int] = {}  # splits this process made, for the store (`upkeep`)
        self._sizes = SizeWatch(partition_bytes)
        if shared is not None:
            def make(key: str, rate: float, capacity: float, now: float, unused: float) -> TokenBucket:
                return SharedBucket(shared, key, rate, capacity, now, unused)

            self._make = make

    def table(self, meta: TableMeta) -> Resource:
        shape = _shape(meta.uuid, meta.billing_mode, meta.read_capacity, meta.write_capacity, meta.on_demand,
                       (meta.peak_read, meta.peak_write))
        return self._get((meta.stored_name, None), shape, meta.arn, meta.created_at)

    def index(self, meta: TableMeta, index: IndexMeta) -> Resource:
        shape = _shape(meta.uuid, meta.billing_mode, index.read_capacity, index.write_capacity, index.on_demand,
                       (index.peak_read, index.peak_write))
        found = self._get((meta.stored_name, index.name), shape, f"{meta.arn}/index/{index.name}", meta.created_at)
        found.key_names = tuple(key.name for key in index.hash_keys)
        return found

    def _get(self, key: tuple[str, str | None], shape: tuple[Any, ...], arn: str, created: float) -> Resource:
        found = self._resources.get(key)
        if found is None:  # first seen by this process: what it left unused since it was made is kept as burst
            unused = max(0.0, clock.now() - created)
            found = self._resources[key] = _resource(shape, arn, self._clock(), unused, self._make, self._layout)
        elif found.shape != shape:  # its capacity changed: buckets as it now is
            found = self._resources[key] = _resource(shape, arn, self._clock(), 0.0, self._make, self._layout)
        return found

    def _layout(self, key: str, count: int) -> PartitionMap:
        return PartitionMap(key, count, self._make, self._splits, self._heat_seconds)

    def admit(self, record: RequestRecord, request: dict[str, Any], engine: Engine, namespace: str = "") -> None:
        """Raise DynamoDB's throttling error if the operation of `record` may not run now on what `request` names
        (tables of the caller's `namespace`), noting on the record why, and the keys it named."""
        operation = record.operation
        if operation not in _READS and operation not in _WRITES:
            return  # (the control plane draws on no bucket: no lock to take)
        shared = self._shared
        if shared is None:
            self._admit(record, request, engine, namespace)
            return
        shared.lock()
        try:
            self._admit(record, request, engine, namespace)
        finally:
            shared.unlock()

    def _admit(self, record: RequestRecord, request: dict[str, Any], engine: Engine, namespace: str) -> None:
        if not self._loaded:  # (the partitions as they had split before the server started)
            for key, boundary in engine.load_splits().items():
                self._splits.split(key, boundary)
            self._loaded = True
        operation = record.operation
        access: Access = "Read" if operation in _READS else "Write"
        now = self._clock()
        refusals: list[tuple[Resource, str, str, str | None]] = []
        tables = 0
        for name in dict.fromkeys(table_name_from(named) for named in tables_named(request)):
            meta = engine.get_table(namespace + name)
            if meta is None:
                continue
            tables += 1
            refusal = self._check(meta, access, request, operation, now)
            if refusal is not None:
                refusals.append((refusal[0], refusal[1], name, refusal[2]))
        if not refusals or (operation in _BATCHES and len(refusals) < tables):
            return
        # (Contributor Insights counts the throttled keys)
        record.throttled_keys = tuple((name, pk, sk) for _, _, name, _ in refusals
                                      for meta in (engine.get_table(namespace + name),) if meta is not None
                                      for _, pk, sk in _keys_named(meta, operation, request))
        record.throttled_items = _index_items(refusals, operation, request, engine, namespace)
        record.throttled = tuple((reason, table, index) for _, reason, table, index in refusals)
        raise _throttled(refusals)

    def _check(self, meta: TableMeta, access: Access, request: dict[str, Any], operation: str,
               now: float) -> tuple[Resource, str, str | None] | None:
        """The first limit the request would pass on this table: (resource, reason, index name), or None."""
        table = self.table(meta)
        bucket = table.read if access == "Read" else table.write
        if bucket is not None and bucket.level(now) <= 0:
            limit = "Provisioned" if table.provisioned else "MaxOnDemand"
            return table, f"Table{access}{limit}ThroughputExceeded", None
        index_name = request.get("IndexName") if operation in ("Query", "Scan") else None
        for index in meta.indexes:
            if not index.is_global or (access == "Read" and index.name != index_name):
                continue
            resource = self.index(meta, index)
            bucket = resource.read if access == "Read" else resource.write
            if bucket is not None and bucket.level(now) <= 0:
                limit = "Provisioned" if resource.provisioned else "MaxOnDemand"
                return resource, f"Index{access}{limit}ThroughputExceeded", index.name
            for h in index_partitions_named(meta.name, index, operation, request):
                if resource.partitions.partition(h, now).bucket.level(now) <= 0:
                    return resource, f"Index{access}KeyRangeThroughputExceeded", index.name
        for h in _partitions_named(meta, operation, request):
            if table.partitions.partition(h, now).bucket.level(now) <= 0:
                return table, f"Table{access}KeyRangeThroughputExceeded", None
        return None

    def observe(self, record: RequestRecord) -> None:
        """Take what an answered request consumed from its buckets (a Listener: see observe/record.py)."""
        if not record.charges:
            return
        shared = self._shared
        if shared is None:
            self._take(record)
            return
        shared.lock()
        try:
            self._take(record)
        finally:
            shared.unlock()

    def _take(self, record: RequestRecord) -> None:
        now = self._clock()
        resources = self._resources
        namespace = record.namespace  # (buckets are keyed by stored names; charges name tables as clients do)
        for charge in record.charges:
            if charge.units <= 0:
                continue
            stored = namespace + charge.table
            table = resources.get((stored, None))
            resource = resources.get((stored, charge.index_name)) if charge.is_global else table
            if resource is None:
                continue
            bucket = resource.write if charge.write else resource.read
            if bucket is not None:
                bucket.take(charge.units, now)
                if self.exchange is not None:
                    self.exchange.drawn(bucket.key, charge.units)
            if charge.items and resource.key_names:  # (a GSI's partitions: its key's, of the items charged)
                hashes = index_hashes(resource.key_names, charge.items)
                share = charge.units / len(hashes or (0,)) / (PARTITION_WRITE_UNITS if charge.write
                                                              else PARTITION_READ_UNITS)
                for h in hashes:
                    self._heat(resource.partitions, h, share, now)
            if charge.key is not None and table is not None and charge.index_name is None:
                share = charge.units / (PARTITION_WRITE_UNITS if charge.write else PARTITION_READ_UNITS)
                partition = self._heat(table.partitions, charge.key.h, share, now)
                if charge.write:
                    self._sizes.wrote(stored, table.partitions, partition, charge.size)

    def upkeep(self, engine: Engine) -> None:
        """Split the partitions whose data grew past the limit, and keep the splits this process made in the store,
        so a restart lays the partitions out as they split (a background duty, about once a second, off the
        request path)."""
        for due in self._sizes.take_due():
            meta = engine.get_table(due.table)
            if meta is None or not due.partitions.key.startswith(f"{meta.arn} {meta.uuid} "):
                continue  # (deleted, or made again under its name)
            cut = cut_for_size(engine, meta, due.partition.lo, due.partition.hi, self._sizes.limit)
            if cut is not None:
                self._locked(partial(self._split_for_size, due.partitions, due.partition, cut))
        if self._unsaved:
            engine.save_splits(self._unsaved)
            self._unsaved = {}

    def _split_for_size(self, partitions: PartitionMap, partition: Partition, cut: int) -> None:
        self._note_split(partitions.split_at(partition, cut))

    def _locked(self, action: Callable[[], None]) -> None:
        """Run `action` holding the shared buckets' lock, if any."""
        shared = self._shared
        if shared is None:
            action()
            return
        shared.lock()
        try:
            action()
        finally:
            shared.unlock()

    def _heat(self, partitions: PartitionMap, h: int, share: float, now: float) -> Partition:
        """Take `share` of a partition-second from the partition of hash `h`, and split it if it ran hot; the
        partition drawn on."""
        partition = partitions.partition(h, now)
        partition.bucket.take(share, now)
        partition.heat.take(share, now)
        partition.note(h, share)
        if self.exchange is not None:
            self.exchange.drawn(partition.bucket.key, share)
            self.exchange.drawn(partition.heat.key, share)
        self._note_split(partitions.split_if_hot(partition, now))
        return partition

    def _note_split(self, split: tuple[str, int] | None) -> None:
        """A split this process made: kept in the store by `upkeep`, and told to the other nodes."""
        if split is None:
            return
        self._unsaved[split[0]] = split[1]
        if self.exchange is not None:
            self.exchange.split(*split)


def _index_items(refusals: list[tuple[Resource, str, str, str | None]], operation: str, request: dict[str, Any],
                 engine: Engine, namespace: str) -> tuple[tuple[str, str, Any], ...]:
    """(table, GSI, item or key values) of what the request named of each GSI that refused it."""
    found = []
    for _, _, name, index_name in refusals:
        meta = engine.get_table(namespace + name) if index_name is not None else None
        index = meta.index(index_name) if meta is not None and index_name is not None else None
        if meta is not None and index is not None:
            found += [(name, index.name, item) for item in index_items_named(meta.name, index, operation, request)
                      if isinstance(item, dict)]
    return tuple(found)


def _partitions_named(meta: TableMeta, operation: str, request: dict[str, Any]) -> list[int]:
    return [h for h, _, _ in _keys_named(meta, operation, request)]


def _keys_named(meta: TableMeta, operation: str, request: dict[str, Any]) -> list[tuple[int, bytes, bytes]]:
    """The keys an item request names for this table, (partition hash, encoded partition key, encoded sort key or
    b""), before it is validated: a key that cannot be read is left to the handler to refuse."""
    raws: list[Any] = []
    if operation in ("GetItem", "UpdateItem", "DeleteItem"):
        raws.append(request.get("Key"))
    elif operation == "PutItem":
        raws.append(request.get("Item"))
    elif operation in _BATCHES:
        entry = request.get("RequestItems", {}).get(meta.name)
        if isinstance(entry, dict):
            raws += entry.get("Keys") or []
        elif isinstance(entry, list):
            for write in entry:
                if isinstance(write, dict):
                    body = write.get("PutRequest") or write.get("DeleteRequest") or {}
                    raws.append(body.get("Item") or body.get("Key") if isinstance(body, dict) else None)
    keys = []
    range_key = meta.range_key
    for raw in raws:
        try:
            pk = encode_key(raw[meta.hash_key.name])
            sk = encode_key(raw[range_key.name]) if range_key is not None else b""
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        keys.append((partition_hash(pk), pk, sk))
    return keys


def _throttled(refusals: list[tuple[Resource, str, str, str | None]]) -> DynamoDBError:
    """The error DynamoDB throttles with: ProvisionedThroughputExceededException for a provisioned table's limits,
    ThrottlingException for an on-demand table's, each with its ThrottlingReasons (reason, resource ARN)."""
    reasons = [{"reason": reason, "resource": resource.arn} for resource, reason, _, _ in refusals]
    error: DynamoDBError
    if refusals[0][0].provisioned:
        error = ProvisionedThroughputExceededException(PROVISIONED_THROTTLE)
        error.extra = {"ThrottlingReasons": reasons}
    else:
        # (a hot partition of an on-demand table: the words DynamoDB answers an on-demand table's throttle with;
        # best guess for an on-demand maximum, whose words were not found recorded)
        error = ThrottlingException(ON_DEMAND_THROTTLE)
        error.extra = {"throttlingReasons": reasons}  # (botocore's model names the member so for this exception)
    return error


def throttled_by(error: DynamoDBError) -> tuple[tuple[str, str, str | None], ...]:
    """(reason, table, index or None) of each ThrottlingReason an error carries (a throttle's, or one injected by
    `--inject-errors`), for the request record."""
    extra = error.extra or {}
    found = []
    for reason in extra.get("ThrottlingReasons") or extra.get("throttlingReasons") or ():
        resource = str(reason.get("resource", ""))
        table, _, index = resource.partition(":table/")[2].partition("/index/")
        found.append((str(reason.get("reason", "")), table, index or None))
    return tuple(found)
