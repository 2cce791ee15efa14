"""The rules read from a table's traffic: Scans, partition keys, consistency, batches, throttling, capacity,
transactions, conditions and idempotency (RULES.md ids)."""

from __future__ import annotations

import time
from typing import Any

from openddb import clock
from openddb.advisor.findings import Finding, Outcome
from openddb.advisor.listener import KEY_STRIDE, Advisor
from openddb.advisor.observations import TableObservations
from openddb.advisor.sketches import COUNT, ERROR, PEAK_READ, PEAK_WRITE
from openddb.model.keys import decode_key
from openddb.model.schema import TableMeta


def scan_hot_path(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    limits = advisor.limits
    if seen is None or not seen.scans:
        return []
    share = seen.scans / seen.reads if seen.reads else 0.0
    often = seen.scans_per_minute > limits.scan_per_minute
    if not often and not (seen.reads >= limits.scan_min_reads and share >= limits.scan_read_share):
        return []
    return [Finding("scan-hot-path", seen.name,
                    f"{seen.scans} Scans of {seen.reads} reads ({share:.0%}); up to {seen.scans_per_minute} within "
                    "one minute",
                    {"scans": seen.scans, "reads": seen.reads, "scan_share": round(share, 3),
                     "most_scans_in_a_minute": seen.scans_per_minute,
                     "thresholds": {"scan_per_minute": limits.scan_per_minute,
                                    "scan_read_share": limits.scan_read_share}})]


def scan_unpaginated(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    limits = advisor.limits
    if seen is None:
        return []
    found: list[Outcome] = []
    if seen.scanned >= limits.scan_discard_min_scanned:
        discarded = 1 - seen.scan_returned / seen.scanned
        if discarded >= limits.scan_discard_share:
            found.append(Finding("scan-unpaginated", seen.name,
                                 f"filtered Scans discarded {discarded:.0%} of the {seen.scanned} items they read",
                                 {"scanned": seen.scanned, "returned": seen.scan_returned,
                                  "discarded_share": round(discarded, 3)}))
    if seen.unlimited_pages >= limits.scan_unlimited_pages:
        found.append(Finding("scan-unpaginated", seen.name,
                             f"{seen.unlimited_pages} full 1 MB pages read by Scans without Limit",
                             {"pages_without_limit": seen.unlimited_pages}))
    return found


def scan_filter_instead_of_query(advisor: Advisor, seen: TableObservations | None,
                                 meta: TableMeta) -> list[Outcome]:
    if seen is None or not seen.scan_key_filters:
        return []
    keys = {meta.hash_key.name: "the table's partition key"}
    if meta.range_key:
        keys[meta.range_key.name] = "the table's sort key"
    for index in meta.indexes:
        for key in index.hash_keys:
            keys.setdefault(key.name, f"the partition key of index {index.name}")
        for key in index.range_keys:
            keys.setdefault(key.name, f"the sort key of index {index.name}")
    return [Finding("scan-filter-instead-of-query", seen.name,
                    f"{count} Scans filter on {attribute} = value, {keys.get(attribute, 'a key attribute')}",
                    {"attribute": attribute, "scans": count, "key_of": keys.get(attribute)})
            for attribute, count in sorted(seen.scan_key_filters.items())]


def hot_partition(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    limits = advisor.limits
    if seen is None or not seen.keys.total:
        return []
    found: list[Outcome] = []
    sampled = seen.keys.total
    total = round(sampled * KEY_STRIDE)  # (the sketch sees one charge in KEY_STRIDE)
    for key, counter in seen.keys.top(3):
        share = (counter[COUNT] - counter[ERROR]) / sampled
        shown = _shown(key, meta)
        if total >= limits.hot_key_min_requests and share >= limits.hot_key_share:
            found.append(Finding("hot-partition", seen.name,
                                 f"partition key {shown} took about {share:.0%} of {total} requests",
                                 {"key": shown, "sampled_requests": int(counter[COUNT]),
                                  "overcount": int(counter[ERROR]), "sampled_table_requests": round(sampled),
                                  "sampling": f"1 in {KEY_STRIDE}", "table_requests": total,
                                  "share_at_least": round(share, 3),
                                  "peak_read_units_per_second": counter[PEAK_READ],
                                  "peak_write_units_per_second": counter[PEAK_WRITE]}))
        elif (counter[PEAK_READ] >= limits.partition_read_units * limits.partition_near_share
              or counter[PEAK_WRITE] >= limits.partition_write_units * limits.partition_near_share):
            found.append(Finding("hot-partition", seen.name,
                                 f"partition key {shown} consumed {counter[PEAK_READ]:g} read and "
                                 f"{counter[PEAK_WRITE]:g} write units within one second, near the per-partition "
                                 "limits (3,000 and 1,000)",
                                 {"key": shown, "peak_read_units_per_second": counter[PEAK_READ],
                                  "peak_write_units_per_second": counter[PEAK_WRITE]}))
    return found


def _shown(key: bytes, meta: TableMeta) -> object:
    try:
        return decode_key(meta.hash_key.type, key)
    except (ValueError, UnicodeDecodeError):
        return key.hex()


def monotonic_partition_key(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    limits = advisor.limits
    if seen is None or seen.compared < limits.monotonic_min_keys:
        return []
    share = seen.increasing / seen.compared
    if share < limits.monotonic_share:
        return []
    last = _shown(seen.last_key, meta) if seen.last_key is not None else None
    return [Finding("monotonic-partition-key", seen.name,
                    f"{share:.0%} of {seen.compared} new partition keys were larger than the one written before",
                    {"increasing": seen.increasing, "compared": seen.compared, "share": round(share, 3),
                     "latest_key": last})]


def strong_read_unneeded(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    limits = advisor.limits
    if seen is None or seen.reads < limits.strong_read_min:
        return []
    share = seen.strong_reads / seen.reads
    if share < limits.strong_read_share:
        return []
    return [Finding("strong-read-unneeded", seen.name,
                    f"{seen.strong_reads} of {seen.reads} reads ({share:.0%}) were strongly consistent",
                    {"strong_reads": seen.strong_reads, "reads": seen.reads, "share": round(share, 3)})]


def batch_opportunity(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    if seen is None:
        return []
    limits = advisor.limits
    bursts: list[dict[str, Any]] = [{"client": client, "kind": kind, "bursts": count}
                                    for (client, kind), count in seen.bursts.items() if count >= limits.batch_bursts]
    if not bursts:
        return []
    return [Finding("batch-opportunity", seen.name,
                    f"{sum(entry['bursts'] for entry in bursts)} bursts of {limits.batch_burst} or more single-item "
                    f"calls within {limits.batch_burst_seconds * 1000:g} ms from one client",
                    {"bursts": bursts[:5]})]


def throttle_no_backoff(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    if seen is None:
        return []
    limits = advisor.limits
    retries = advisor.retries
    found: list[Outcome] = []
    quick = [(client, in_a_row) for client, in_a_row in seen.quick_retries.items()
             if in_a_row >= limits.backoff_retries]
    if quick:
        found.append(Finding("throttle-no-backoff", seen.name,
                             f"throttled requests sent again within {limits.backoff_seconds * 1000:g} ms, up to "
                             f"{max(in_a_row for _, in_a_row in quick)} times in a row",
                             {"clients": [{"client": client, "quick_retries_in_a_row": in_a_row}
                                          for client, in_a_row in quick[:5]],
                              "throttled_requests": seen.throttled}))
    now = time.monotonic()
    left = [client for (client, table), when in retries.unprocessed.items()
            if table == seen.name and now - when >= limits.unprocessed_seconds]
    if left:
        found.append(Finding("throttle-no-backoff", seen.name,
                             f"UnprocessedItems of a batch not sent again within {limits.unprocessed_seconds:g} s",
                             {"clients": ["@".join(part for part in client if part) for client in left[:5]]}))
    return found


def capacity_mode(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    if meta.billing_mode != "PROVISIONED" or seen is None:
        return []
    limits = advisor.limits
    observed = clock.now() - seen.first_seen
    factor = limits.capacity_factor
    found: list[Outcome] = []
    for kind, provisioned, peak in (("read", meta.read_capacity, seen.peak_read),
                                    ("write", meta.write_capacity, seen.peak_write)):
        evidence = {"kind": kind, "provisioned_units": provisioned, "peak_units_per_second": peak,
                    "observed_seconds": round(observed, 1), "throttled_requests": seen.throttled}
        if peak >= provisioned * factor or (seen.throttled and kind == "read" and peak >= provisioned):
            found.append(Finding("capacity-mode", seen.name, f"{kind} peak {peak:g} units/s against {provisioned} "
                                 "provisioned: under-provisioned", evidence))
        elif observed >= limits.capacity_min_seconds and peak * factor <= provisioned:
            found.append(Finding("capacity-mode", seen.name, f"{kind} peak {peak:g} units/s against {provisioned} "
                                 f"provisioned over {observed:.0f} s: over-provisioned", evidence))
    return found


def transaction_overuse(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    count = 0 if seen is None else seen.single_item_transactions
    if seen is None or not count:
        return []
    return [Finding("transaction-overuse", meta.name, f"{count} transactions touched one item only",
                    {"transactions": count, "examples": seen.transaction_examples})]


def missing_idempotency(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    repeated = None if seen is None else seen.repeats
    if not repeated:
        return []
    return [Finding("missing-idempotency", meta.name,
                    f"{len(repeated)} identical writes sent again after an error without an idempotency token or "
                    "condition", {"examples": repeated})]


def unconditional_shared_write(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    races = 0 if seen is None else seen.races
    if seen is None or not races:
        return []
    return [Finding("unconditional-shared-write", meta.name,
                    f"{races} unconditional writes raced with another client's write of the same item",
                    {"races": races, "examples": seen.race_examples})]


RULES = {
    "scan-hot-path": scan_hot_path, "scan-unpaginated": scan_unpaginated,
    "scan-filter-instead-of-query": scan_filter_instead_of_query, "hot-partition": hot_partition,
    "monotonic-partition-key": monotonic_partition_key, "strong-read-unneeded": strong_read_unneeded,
    "batch-opportunity": batch_opportunity, "throttle-no-backoff": throttle_no_backoff,
    "capacity-mode": capacity_mode, "transaction-overuse": transaction_overuse,
    "missing-idempotency": missing_idempotency, "unconditional-shared-write": unconditional_shared_write,
}
