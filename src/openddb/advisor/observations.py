"""What the advisor keeps of the traffic, per table and per time slice: its access patterns, partition keys
(space-saving), item sizes, Scans and their filters, reads by consistency and by index, the values its sampled
items hold, and what the per-client trackers found (races, bursts, quick retries, repeats, one-item transactions).
All of it bounded: counters, sketches and capped samples, never the requests themselves (observe/record.py's
listener rules). One TableObservations is one table's slice of one minute (windows.py keeps the slices, merges
older ones by the hour, and ages them out; merging.py adds slices together for a report)."""

from __future__ import annotations

from typing import Any

import orjson

from openddb.advisor import shapes
from openddb.advisor.settings import Thresholds
from openddb.advisor.sketches import Distinct, HeavyHitters, Sizes
from openddb.model.schema import TableMeta

_PATTERNS_MAX = 256  # distinct access patterns kept per table (more are counted as "other")
_ATTRIBUTES_MAX = 64  # attributes whose values are classified per table
_EXAMPLES_MAX = 5
_CLIENTS_MAX = 64  # clients per table and slice for bursts and quick retries
MINUTE = 60.0

# An access pattern: (operation, index or None, key condition shape, projected attributes (-1: all), strongly
# consistent).
PatternKey = tuple[str, str | None, str, int, bool]
# Its figures: requests, refused, latency total and highest (seconds), read units, write units, last seen (epoch).
COUNT, REFUSED, LATENCY, SLOWEST, READ, WRITE, LAST = range(7)


class Schema:
    """What the rules need of a table's description, refreshed from the engine now and then."""

    __slots__ = ("hash_key", "hash_type", "index_keys", "key_attributes", "key_shape", "range_key", "ttl")

    def __init__(self, meta: TableMeta | None) -> None:
        self.hash_key = meta.hash_key.name if meta else ""
        self.hash_type = meta.hash_key.type if meta else "S"
        self.range_key = meta.range_key.name if meta and meta.range_key else None
        self.ttl = meta.ttl_attribute if meta else None
        shape = f"{self.hash_key} = ?"
        self.key_shape = shape + (f" AND {self.range_key} = ?" if self.range_key else "")
        # (index, attribute, type) of every index key attribute: a write whose value has another type is left out
        # of the index
        self.index_keys = [(index.name, key.name, key.type) for index in (meta.indexes if meta else ())
                           for key in (*index.hash_keys, *index.range_keys)]
        self.key_attributes = {self.hash_key, *([self.range_key] if self.range_key else []),
                               *(attribute for _, attribute, _ in self.index_keys)}


class IndexReads:
    """Reads of one secondary index."""

    __slots__ = ("narrow", "reads", "units", "write_units", "writes")

    def __init__(self) -> None:
        self.reads = 0
        self.units = 0.0
        self.writes = 0
        self.write_units = 0.0
        self.narrow = 0  # reads that projected few attributes (Thresholds.projection_all_attributes)


class TableObservations:
    """One table's observations (see the module's doc)."""

    def __init__(self, name: str, meta: TableMeta | None, now: float) -> None:
        self.name = name  # its stored name: its namespace ("<account>/<region>/" or "") and its name
        namespace, _, self.client_name = name.rpartition("/")
        self.namespace = namespace + "/" if namespace else ""
        self.meta = meta  # its last description seen (the report's, once the table is gone)
        self.schema = Schema(meta)
        self.schema_at = now
        self.first_seen = self.last_seen = now
        self.start = now - now % MINUTE  # the time slice (epoch seconds): a minute, an hour once merged
        self.ends = self.start + MINUTE
        self.patterns: dict[PatternKey, list[float]] = {}
        self.keys: HeavyHitters[bytes] = HeavyHitters()  # (sampled: see listener.KEY_STRIDE)
        self.key_tick = 0
        self.sizes = Sizes()
        self.largest_key: Any = None
        self.indexes: dict[str, IndexReads] = {}
        self.reads = self.strong_reads = self.writes = 0
        # Calls on the table (a batch's or transaction's on several tables counts for each), and of them the ones
        # sampling passed over (counted from the call observed for them)
        self.calls = self.passed_over = 0
        self.read_units = self.write_units = 0.0  # the table's own, its indexes' apart
        self.second = 0  # the second of the last charge, the units within it, the highest per second
        self.second_read = self.second_write = self.peak_read = self.peak_write = 0.0
        self.throttled = 0
        self.scans = 0
        self.recent_scans: list[float] = []  # monotonic times of the last Thresholds.scan_per_minute + 1 Scans
        self.scans_per_minute = 0  # the most Scans seen within a minute
        self.scanned = self.scan_returned = 0  # items read and returned by filtered Scans
        self.unlimited_pages = 0  # pages that Scans without Limit ended early (1 MB)
        self.scan_key_filters: dict[str, int] = {}  # key attribute -> Scans filtering on it by equality
        self.last_key: bytes | None = None  # the partition key of the last PutItem
        self.increasing = self.compared = 0
        self.key_sample = Distinct(200)  # partition key values (String keys) for missing-sort-key
        self.drift: dict[tuple[str, str, str], int] = {}  # (index, attribute, type found) -> writes
        self.drift_examples: list[Any] = []
        self.appends: dict[tuple[bytes | None, str], int] = {}  # (item's key, attribute) -> appends, bounded
        self.grown: list[dict[str, Any]] = []  # appended-to items past Thresholds.collection_bytes
        self.inspected = 0
        self.attributes = Distinct(256)
        self.times: dict[str, dict[str, int]] = {}  # time-named attribute -> format -> values
        self.time_examples: dict[tuple[str, str], str] = {}
        self.secrets: dict[str, int] = {}  # secret-named attribute -> plaintext values
        self.blobs: dict[str, int] = {}  # attribute -> largest blob
        self.ttl_checked = 0
        self.ttl_problems: dict[str, int] = {}
        self.ttl_examples: list[Any] = []
        self.expired_reads = 0
        self.expired_examples: list[Any] = []
        # What the per-client trackers found (tracking.py), counted in the slice they happened in
        self.races = 0
        self.race_examples: list[dict[str, Any]] = []
        self.bursts: dict[tuple[str, str], int] = {}  # (client, "read" or "write") -> bursts of single-item calls
        self.quick_retries: dict[str, int] = {}  # client -> most throttled calls in a row sent again at once
        self.repeats: list[dict[str, Any]] = []  # identical writes sent again after an error (the first few)
        self.single_item_transactions = 0
        self.transaction_examples: list[dict[str, Any]] = []

    def carried(self, now: float) -> TableObservations:
        """The table's next slice, from `now`: what continues across slices is carried over (the description, the
        last partition key written, the last Scans' times, the key sketch's stride)."""
        after = TableObservations(self.name, None, now)
        after.meta, after.schema, after.schema_at = self.meta, self.schema, self.schema_at
        after.first_seen, after.last_key, after.key_tick = self.first_seen, self.last_key, self.key_tick
        after.recent_scans = self.recent_scans
        return after

    def race(self, example: dict[str, Any] | None) -> None:
        if example is not None:
            self.races += 1
            if len(self.race_examples) < _EXAMPLES_MAX:
                self.race_examples.append(example)

    def burst(self, client: str, kind: str) -> None:
        slot = (client, kind)
        if slot in self.bursts or len(self.bursts) < _CLIENTS_MAX:
            self.bursts[slot] = self.bursts.get(slot, 0) + 1

    def quick_retry(self, client: str, in_a_row: int) -> None:
        if in_a_row > self.quick_retries.get(client, 0) and (client in self.quick_retries
                                                             or len(self.quick_retries) < _CLIENTS_MAX):
            self.quick_retries[client] = in_a_row

    def repeat(self, example: dict[str, Any] | None) -> None:
        if example is not None and len(self.repeats) < _EXAMPLES_MAX:
            self.repeats.append(example)

    def transaction(self, example: dict[str, Any]) -> None:
        self.single_item_transactions += 1
        if len(self.transaction_examples) < _EXAMPLES_MAX:
            self.transaction_examples.append(example)

    def index(self, name: str) -> IndexReads:
        reads = self.indexes.get(name)
        if reads is None:
            if len(self.indexes) >= 32:  # (a table has at most 25; more are names no index has)
                return IndexReads()
            reads = self.indexes[name] = IndexReads()
        return reads

    def key_attributes(self) -> set[str]:
        return self.schema.key_attributes

    def figures(self, key: PatternKey) -> list[float]:
        """The figures of pattern `key`, made (zero) if new; of "other" once the table has _PATTERNS_MAX."""
        figures = self.patterns.get(key)
        if figures is None:
            if len(self.patterns) >= _PATTERNS_MAX:
                key = ("other", None, "", -1, False)
                figures = self.patterns.get(key)
            if figures is None:
                figures = self.patterns[key] = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        return figures

    def pattern(self, key: PatternKey, latency: float, read: float, write: float, ok: bool, now: float,
                weight: int = 1) -> None:
        figures = self.patterns.get(key) or self.figures(key)
        figures[COUNT] += weight
        if not ok:
            figures[REFUSED] += weight
        figures[LATENCY] += latency * weight
        if latency > figures[SLOWEST]:
            figures[SLOWEST] = latency
        figures[READ] += read
        figures[WRITE] += write
        figures[LAST] = now

    def units(self, read: float, write: float, second: int) -> None:
        """The table's own units of one request, for its per-second peak."""
        if second != self.second:
            self.second, self.second_read, self.second_write = second, 0.0, 0.0
        self.second_read += read
        self.second_write += write
        if self.second_read > self.peak_read:
            self.peak_read = self.second_read
        if self.second_write > self.peak_write:
            self.peak_write = self.second_write

    def scan(self, monotonic: float, limits: Thresholds) -> None:
        self.scans += 1
        recent = self.recent_scans
        recent.append(monotonic)
        if len(recent) > limits.scan_per_minute + 1:
            del recent[0]
        within = sum(1 for moment in recent if monotonic - moment < 60.0)
        if within > self.scans_per_minute:
            self.scans_per_minute = within

    def inspect(self, item: dict[str, Any], key: dict[str, Any], limits: Thresholds, now: float) -> None:
        """Classify a written item's attributes (names, time formats, secrets, blobs, TTL): for a sample."""
        self.inspected += 1
        for name, value in item.items():
            self.attributes.add(name)
            if shapes.time_named(name):
                self._time(name, value)
            if (shapes.secret_named(name) and shapes.plaintext(value)
                    and (name in self.secrets or len(self.secrets) < _ATTRIBUTES_MAX)):
                    self.secrets[name] = self.secrets.get(name, 0) + 1
            size = shapes.blob_size(value)
            if size >= limits.blob_bytes and size > self.blobs.get(name, 0) and len(self.blobs) < _ATTRIBUTES_MAX:
                self.blobs[name] = size
        ttl = self.schema.ttl
        if ttl is not None:
            self.ttl_checked += 1
            problem = shapes.ttl_problem(item.get(ttl))
            if problem is not None:
                self.ttl_problems[problem] = self.ttl_problems.get(problem, 0) + 1
                if len(self.ttl_examples) < _EXAMPLES_MAX:
                    self.ttl_examples.append({"key": key, ttl: item.get(ttl)})

    def _time(self, name: str, value: dict[str, Any]) -> None:
        formats = self.times.get(name)
        if formats is None:
            if len(self.times) >= _ATTRIBUTES_MAX:
                return
            formats = self.times[name] = {}
        kind = shapes.time_format(value)
        if kind not in formats:
            self.time_examples[(name, kind)] = str(next(iter(value.values())))[:40]
        formats[kind] = formats.get(kind, 0) + 1

    def check_index_types(self, item: dict[str, Any], key: dict[str, Any]) -> None:
        for index, attribute, wanted in self.schema.index_keys:
            value = item.get(attribute)
            if value is not None and wanted not in value:
                found = next(iter(value), "?")
                self.drift[(index, attribute, found)] = self.drift.get((index, attribute, found), 0) + 1
                if len(self.drift_examples) < _EXAMPLES_MAX:
                    self.drift_examples.append({"index": index, "attribute": attribute, "type": found, "key": key})

    def append(self, item_key: bytes | None, attribute: str, size: int, key: Any, limits: Thresholds,
               weight: int = 1) -> None:
        slot = (item_key, attribute)
        count = self.appends.get(slot)
        if count is None:
            if len(self.appends) >= 4096:  # (bounded: the oldest half goes; a growing item comes back quickly)
                for old in list(self.appends)[:2048]:
                    del self.appends[old]
            count = 0
        self.appends[slot] = count + weight
        if size >= limits.collection_bytes and len(self.grown) < _EXAMPLES_MAX:
            self.grown.append({"key": key, "attribute": attribute, "item_bytes": size})

    def expired(self, items: list[Any], now: float) -> None:
        """Count items a read returned past their TTL (not yet deleted by the sweep)."""
        ttl = self.schema.ttl
        for stored in items:
            # (an item read from the store may be its stored JSON, passed through unparsed)
            item = orjson.loads(orjson.dumps(stored)) if isinstance(stored, orjson.Fragment) else stored
            value = item.get(ttl) if ttl and isinstance(item, dict) else None
            if value is not None and "N" in value:
                try:
                    expiry = float(value["N"])
                except ValueError:
                    continue
                if expiry < now:
                    self.expired_reads += 1
                    if len(self.expired_examples) < _EXAMPLES_MAX:
                        self.expired_examples.append({"key": self.key_of(item), ttl: value})

    def key_of(self, item: dict[str, Any]) -> dict[str, Any]:
        """The key attributes of `item` (or of a Key)."""
        schema = self.schema
        key = {schema.hash_key: item.get(schema.hash_key)}
        if schema.range_key:
            key[schema.range_key] = item.get(schema.range_key)
        return key
