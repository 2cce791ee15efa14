"""The advisor's thresholds (RULES.md's default triggers, each configurable) and the declared access patterns, read
from an optional JSON file (`openddb serve --advisor-config FILE`; docs/ADVISOR.md shows its form)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

# (Thresholds.observe_budget's default: 0.1% of each second. A call observed in full costs a running server about
# three times what it costs in a loop over the same records (docs/ADVISOR.md, Cost and limits), so a larger budget
# showed in every single-item call's CPU: 0.5% and one in 64 cost 4 to 11% of a one-worker server's CPU per call.)
OBSERVE_BUDGET = 0.001


class SettingsError(ValueError):
    """The advisor's configuration file cannot be used (the message says why)."""


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Each rule's trigger; the names say which rule reads them (RULES.md gives the defaults)."""

    scan_per_minute: int = 3  # scan-hot-path: more Scans of one table within any minute than this
    scan_read_share: float = 0.10  # scan-hot-path: Scans' share of a table's reads ...
    scan_min_reads: int = 20  # ... once the table had this many reads
    scan_discard_share: float = 0.90  # scan-unpaginated: share of scanned items a filter discarded ...
    scan_discard_min_scanned: int = 100  # ... over at least this many scanned items
    scan_unlimited_pages: int = 3  # scan-unpaginated: pages read by Scans without Limit
    hot_key_share: float = 0.25  # hot-partition: one key's share of a table's key requests ...
    hot_key_min_requests: int = 1000  # ... over at least this many
    partition_read_units: float = 3000.0  # hot-partition: DynamoDB's per-partition limits, per second
    partition_write_units: float = 1000.0
    partition_near_share: float = 0.8  # hot-partition: "near" the limit
    monotonic_share: float = 0.90  # monotonic-partition-key: share of new keys larger than the one before ...
    monotonic_min_keys: int = 50  # ... over at least this many new keys
    composite_key_share: float = 0.5  # missing-sort-key: share of sampled keys that look composite ...
    composite_key_min: int = 20  # ... of at least this many sampled keys
    gsi_unused_writes: int = 1000  # gsi-unused: index writes with no read of the index
    gsi_max: int = 5  # gsi-too-many: more GSIs than this ...
    gsi_write_amplification: float = 3.0  # ... or index write units at least this times the table's own
    projection_all_attributes: int = 3  # gsi-projection-all: reads of an ALL index projecting at most this many
    projection_all_min_reads: int = 20  # ... of at least this many reads
    item_large_bytes: int = 100 * 1024  # item-large: warning
    item_error_bytes: int = 350 * 1024  # item-large: error
    blob_bytes: int = 32 * 1024  # item-large: one binary or base64-looking attribute
    collection_appends: int = 100  # unbounded-collection: appends to one item's attribute ...
    collection_bytes: int = 64 * 1024  # ... or an appended-to item past this size
    ttl_wrong_share: float = 0.01  # ttl-wrong-type: share of sampled items
    shared_write_seconds: float = 1.0  # unconditional-shared-write: another client's write within this
    retry_seconds: float = 10.0  # missing-idempotency: an identical request again within this after an error
    strong_read_share: float = 0.5  # strong-read-unneeded
    strong_read_min: int = 20
    batch_burst: int = 10  # batch-opportunity: single-item calls from one client to one table ...
    batch_burst_seconds: float = 0.05  # ... within this ...
    batch_bursts: int = 3  # ... this many times
    backoff_seconds: float = 0.01  # throttle-no-backoff: a retry after a throttle sooner than this ...
    backoff_retries: int = 3  # ... this many times in a row
    unprocessed_seconds: float = 5.0  # throttle-no-backoff: UnprocessedItems not retried within this
    capacity_factor: float = 4.0  # capacity-mode: over- or under-provisioned by this factor ...
    capacity_min_seconds: float = 60.0  # ... once the table was observed this long
    destructive_min_reads: int = 1  # schema-destructive-change: reads of the dropped table or index before
    timestamp_formats: int = 2  # timestamp-format
    naming_styles: int = 2  # naming-consistency
    item_sample_first: int = 64  # items inspected in full: every one of a table's first N writes ...
    item_sample_every: int = 32  # ... then one in N
    # Sampling, for the advisor's cost on a busy server: GetItem, PutItem, UpdateItem, DeleteItem and Query calls that
    # succeeded are observed in full until the advisor has spent this share of the current second on them, then one
    # in `sample_every`, counted for the ones passed over (1 or more: every request observed in full).
    observe_budget: float = OBSERVE_BUDGET
    sample_every: int = 256
    # The window: observations are kept by the minute, by the hour after an hour, for this many hours (windows.py)
    retention_hours: float = 24.0


@dataclass(frozen=True, slots=True)
class DeclaredPattern:
    """An access pattern a team designed for: the operation, the index (None: the table) and the key condition
    shape as the report writes it ("pk = ? AND sk BETWEEN ? AND ?"; "" for a Scan)."""

    operation: str
    index: str | None
    key_condition: str


@dataclass(frozen=True, slots=True)
class Settings:
    thresholds: Thresholds = field(default_factory=Thresholds)
    declared: dict[str, list[DeclaredPattern]] = field(default_factory=dict)  # table -> its declared patterns
    source: str = ""  # the file they came from ("" : the defaults)


def load(path: str | None, observe_budget: float = OBSERVE_BUDGET) -> Settings:
    """The settings of `path` (None: the defaults, with `observe_budget`: the pytest plugin observes every request
    unless the file says otherwise); SettingsError if the file cannot be read or is not of the documented form."""
    defaults = Thresholds(observe_budget=observe_budget)
    if path is None:
        return Settings(defaults)
    try:
        document = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError) as error:
        raise SettingsError(f"--advisor-config {path}: {error}") from None
    if not isinstance(document, dict):
        raise SettingsError(f"--advisor-config {path}: a JSON object is expected")
    return Settings(_thresholds(path, document.get("thresholds", {}), defaults),
                    _declared(path, document.get("tables", {})), path)


def _thresholds(path: str, given: Any, defaults: Thresholds) -> Thresholds:
    known = {item.name: item.type for item in dataclasses.fields(Thresholds)}
    if not isinstance(given, dict):
        raise SettingsError(f"--advisor-config {path}: \"thresholds\" must be an object")
    for name, value in given.items():
        if name not in known:
            raise SettingsError(f"--advisor-config {path}: unknown threshold {name!r}")
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise SettingsError(f"--advisor-config {path}: threshold {name!r} must be a number at least 0")
    values = {name: type(getattr(defaults, name))(value) for name, value in given.items()}
    return dataclasses.replace(defaults, **values)


def _declared(path: str, tables: Any) -> dict[str, list[DeclaredPattern]]:
    if not isinstance(tables, dict):
        raise SettingsError(f"--advisor-config {path}: \"tables\" must be an object")
    declared: dict[str, list[DeclaredPattern]] = {}
    for table, spec in tables.items():
        patterns = spec.get("access_patterns") if isinstance(spec, dict) else None
        if not isinstance(patterns, list):
            raise SettingsError(f"--advisor-config {path}: tables.{table}.access_patterns must be a list")
        declared[table] = []
        for pattern in patterns:
            if not isinstance(pattern, dict) or not isinstance(pattern.get("operation"), str):
                raise SettingsError(f"--advisor-config {path}: each access pattern of {table} needs an "
                                    "\"operation\"")
            declared[table].append(DeclaredPattern(pattern["operation"], pattern.get("index"),
                                                   str(pattern.get("key_condition", ""))))
    return declared
