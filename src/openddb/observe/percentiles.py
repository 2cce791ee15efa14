"""Percentiles of SuccessfulRequestLatency (CloudWatch's ExtendedStatistics `p50`, `p99`, `p99.9`...), estimated
from the requests counted per latency bucket (observe/metrics.py's BUCKETS, kept per minute by observe/history.py).

CloudWatch computes percentiles from the values themselves (approximately, for large sets); this server keeps no
values, only bucket counts, so a percentile is found in its bucket and placed in it by linear interpolation
between the bucket's bounds (as Prometheus' histogram_quantile does): exact at the bounds, within the bucket's
width elsewhere. Best guess: one past the last bound (10 s) is answered as that bound. Only the `pNN` form is
answered; CloudWatch's other extended statistics (trimmed means, TC, PR...) are refused by the caller as not kept.
"""

from __future__ import annotations

import re

from openddb.observe.metrics import BUCKETS

_NAME = re.compile(r"p(\d{1,3}(?:\.\d{1,10})?)")


def percentile_of(name: str) -> float | None:
    """The percentile a statistic's name asks for (`p99.9` -> 99.9), or None if it names none (p0 to p100)."""
    match = _NAME.fullmatch(name)
    if match is None:
        return None
    value = float(match.group(1))
    return value if 0.0 <= value <= 100.0 else None


def estimate(percentile: float, counts: list[float]) -> float | None:
    """The latency (ms) below which `percentile` percent of the requests counted per bucket fell (None: none)."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = percentile / 100.0 * total
    below = 0.0
    for bucket, count in enumerate(counts):
        if count > 0 and below + count >= rank:
            if bucket >= len(BUCKETS):
                return BUCKETS[-1]
            lower = BUCKETS[bucket - 1] if bucket else 0.0
            return lower + (BUCKETS[bucket] - lower) * max(0.0, rank - below) / count
        below += count
    return BUCKETS[-1]
