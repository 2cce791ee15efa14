"""Time slices of a table's observations added together: for a report over a window (a fresh TableObservations,
the slices left as they were) and for the minutes of an hour merged into one slice (windows.py). Counts and units
add up, peaks and the slowest call keep the highest, sketches merge (sketches.py), samples and examples fill up to
their bounds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from openddb.advisor.observations import LAST, SLOWEST, IndexReads, TableObservations

_EXAMPLES_MAX = 5
_SUMMED = ("calls", "passed_over", "reads", "strong_reads", "writes", "read_units", "write_units", "throttled",
           "scans", "scanned", "scan_returned", "unlimited_pages", "increasing", "compared", "inspected",
           "ttl_checked", "expired_reads", "races", "single_item_transactions")
_HIGHEST = ("peak_read", "peak_write", "scans_per_minute")
_EXAMPLES = ("drift_examples", "grown", "ttl_examples", "expired_examples", "race_examples", "repeats",
             "transaction_examples")
_COUNTED = ("scan_key_filters", "drift", "secrets", "ttl_problems", "appends", "bursts")
K = TypeVar("K")


def merged(slices: Sequence[TableObservations]) -> TableObservations:
    """One table's slices (oldest first) as one, new: described as the newest describes it."""
    newest = slices[-1]
    into = TableObservations(newest.name, newest.meta, slices[0].start)
    into.schema, into.schema_at = newest.schema, newest.schema_at
    into.start, into.ends = slices[0].start, newest.ends
    into.first_seen, into.last_seen = max(slices[0].first_seen, slices[0].start), newest.last_seen
    into.last_key, into.key_tick = newest.last_key, newest.key_tick
    for piece in slices:
        absorb(into, piece)
    return into


def absorb(into: TableObservations, other: TableObservations) -> None:
    """Add `other` (a later slice of the same table, or any slice for a report) into `into`."""
    for name in _SUMMED:
        setattr(into, name, getattr(into, name) + getattr(other, name))
    for name in _HIGHEST:
        setattr(into, name, max(getattr(into, name), getattr(other, name)))
    for name in _EXAMPLES:
        found: list[Any] = getattr(into, name)
        found.extend(getattr(other, name)[:max(_EXAMPLES_MAX - len(found), 0)])
    for name in _COUNTED:
        _add_counts(getattr(into, name), getattr(other, name))
    for client, in_a_row in other.quick_retries.items():
        into.quick_retries[client] = max(into.quick_retries.get(client, 0), in_a_row)
    for attribute, size in other.blobs.items():
        into.blobs[attribute] = max(into.blobs.get(attribute, 0), size)
    for attribute, formats in other.times.items():
        _add_counts(into.times.setdefault(attribute, {}), formats)
    for example, value in other.time_examples.items():
        into.time_examples.setdefault(example, value)
    _patterns(into, other)
    _indexes(into, other)
    if other.sizes.largest > into.sizes.largest:
        into.largest_key = other.largest_key
    into.sizes.merge(other.sizes)
    into.keys.merge(other.keys)
    into.key_sample.merge(other.key_sample)
    into.attributes.merge(other.attributes)


def _add_counts(into: dict[K, int], other: dict[K, int]) -> None:
    for key, count in other.items():
        into[key] = into.get(key, 0) + count


def _patterns(into: TableObservations, other: TableObservations) -> None:
    for key, figures in other.patterns.items():
        mine = into.figures(key)
        for member, value in enumerate(figures):
            mine[member] = max(mine[member], value) if member in (SLOWEST, LAST) else mine[member] + value


def _indexes(into: TableObservations, other: TableObservations) -> None:
    for name, reads in other.indexes.items():
        mine = into.indexes.get(name)
        if mine is None:
            mine = into.indexes[name] = IndexReads()
        mine.reads += reads.reads
        mine.units += reads.units
        mine.writes += reads.writes
        mine.write_units += reads.write_units
        mine.narrow += reads.narrow
