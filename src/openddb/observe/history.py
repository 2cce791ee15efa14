"""CloudWatch's one-minute data points of the DynamoDB metrics, kept off the request path: about once a second
(`sample`, from the server's background round) the worker's cumulative counts (observe/metrics.py) are compared
with the previous sample, and what grew is added to the minute in progress. So the requests themselves cost
nothing more, and a minute's figures are off by at most the second in which a sample fell.

Kept per minute and series (metric name, label values): the sum and the sample count. The sample count is known
where each sample is one event (throttles, errors, condition failures, conflicts: sum and count are equal), for
SuccessfulRequestLatency (requests answered) and ReturnedItemCount (Query, Scan and ExecuteStatement answered);
for consumed capacity it is not (None), so only its Sum is served. SuccessfulRequestLatency also keeps, per minute,
its requests per latency bucket (observe/metrics.py's BUCKETS), from which percentiles are estimated
(observe/cloudwatch.py). Contributor Insights' key counts are kept per minute too, by rule and key
(observe/insights.py counts them). MINUTES are kept (three hours), as
`ListMetrics --recently-active PT3H` looks back; older minutes are dropped.
"""

from __future__ import annotations

from typing import Any

MINUTES = 180
Series = tuple[str, tuple[str, ...]]  # (metric name, its label values in the order metrics.COUNTERS names them)
_LATENCY = "SuccessfulRequestLatency"
_RETURNED = "ReturnedItemCount"
_UNCOUNTED = frozenset({"ConsumedReadCapacityUnits", "ConsumedWriteCapacityUnits"})


class History:
    """One worker's minutes: series -> minute (epoch seconds) -> [sum, sample count or None]."""

    def __init__(self) -> None:
        self.minutes: dict[Series, dict[int, list[Any]]] = {}
        self.insights: dict[str, dict[str, dict[int, float]]] = {}  # rule -> key -> minute -> count
        self.buckets: dict[tuple[str, ...], dict[int, list[float]]] = {}  # latency labels -> minute -> per bucket
        self._last_buckets: dict[tuple[str, ...], list[float]] = {}
        self._last: dict[Series, tuple[float, float]] = {}  # series -> (cumulative sum, cumulative count)
        self._last_keys: dict[tuple[str, str], float] = {}

    def sample(self, snapshot: dict[str, Any], now: float) -> bool:
        """Add what grew since the last sample to the minute of `now`; True if anything did."""
        minute = int(now // 60) * 60
        grew = False
        requests: dict[tuple[str, ...], float] = {}
        for labels, values in snapshot["latency"]:
            count = float(sum(values[:-1]))
            requests[tuple(labels)] = count
            grew |= self._add((_LATENCY, tuple(labels)), values[-1], count, minute)
            self._add_buckets(tuple(labels), values[:-1], minute)
        for name, series in snapshot["counters"].items():
            for labels, value in series:
                key = tuple(labels)
                counted: float | None = value
                if name in _UNCOUNTED:
                    counted = None
                elif name == _RETURNED:
                    counted = requests.get(key, 0.0)
                grew |= self._add((name, key), value, counted, minute)
        for rule, keys in (snapshot.get("insights") or {}).items():
            for key, count in keys:
                grew |= self._add_key(rule, key, count, minute)
        if grew:
            self._trim(minute)
        return grew

    def _add(self, series: Series, total: float, count: float | None, minute: int) -> bool:
        last_total, last_count = self._last.get(series, (0.0, 0.0))
        self._last[series] = (total, count or 0.0)
        added = total - last_total
        if added < 0 or (count is not None and count < last_count):  # (counted again from zero: a reset)
            added, last_count = total, 0.0
        if added == 0 and (count is None or count == last_count):
            return False
        point = self.minutes.setdefault(series, {}).setdefault(minute, [0.0, None if count is None else 0.0])
        point[0] += added
        if count is not None:
            point[1] += count - last_count
        return True

    def _add_buckets(self, labels: tuple[str, ...], counts: list[float], minute: int) -> None:
        last = self._last_buckets.get(labels)
        self._last_buckets[labels] = list(counts)
        if last is None or len(last) != len(counts) or any(now < before for now, before in zip(counts, last,
                                                                                                 strict=True)):
            last = [0.0] * len(counts)  # (counted again from zero: a reset)
        added = [now - before for now, before in zip(counts, last, strict=True)]
        if any(added):
            point = self.buckets.setdefault(labels, {}).setdefault(minute, [0.0] * len(counts))
            for bucket, count in enumerate(added):
                point[bucket] += count

    def _add_key(self, rule: str, key: str, count: float, minute: int) -> bool:
        last = self._last_keys.get((rule, key), 0.0)
        self._last_keys[(rule, key)] = count
        added = count - last if count >= last else count  # (dropped and counted again: from zero)
        if added <= 0:
            return False
        minutes = self.insights.setdefault(rule, {}).setdefault(key, {})
        minutes[minute] = minutes.get(minute, 0.0) + added
        return True

    def _trim(self, minute: int) -> None:
        oldest = minute - MINUTES * 60
        for points in self.minutes.values():
            for stale in [at for at in points if at < oldest]:
                del points[stale]
        for keys in self.insights.values():
            for counts in keys.values():
                for stale in [at for at in counts if at < oldest]:
                    del counts[stale]
        for minutes in self.buckets.values():
            for stale in [at for at in minutes if at < oldest]:
                del minutes[stale]

    def snapshot(self) -> dict[str, Any]:
        """The minutes, as the other workers read them: {"series": [[name, labels, [[minute, sum, count]...]]...],
        "insights": {rule: {key: [[minute, count]...]}}, "buckets": [[latency labels, [[minute, counts]...]]...]}."""
        return {"series": [[name, list(labels), [[at, point[0], point[1]] for at, point in points.items()]]
                           for (name, labels), points in self.minutes.items() if points],
                "insights": {rule: {key: [[at, count] for at, count in points.items()]
                                    for key, points in keys.items() if points}
                             for rule, keys in self.insights.items()},
                "buckets": [[list(labels), [[at, counts] for at, counts in minutes.items()]]
                            for labels, minutes in self.buckets.items() if minutes]}


def merged(snapshots: list[dict[str, Any]]) -> tuple[dict[Series, dict[int, list[Any]]],
                                                    dict[str, dict[str, dict[int, float]]]]:
    """Every worker's minutes summed: (series -> minute -> [sum, count or None], rule -> key -> minute -> count)."""
    series: dict[Series, dict[int, list[Any]]] = {}
    insights: dict[str, dict[str, dict[int, float]]] = {}
    for snapshot in snapshots:
        history = snapshot.get("history") or {}
        for name, labels, points in history.get("series", ()):
            into = series.setdefault((name, tuple(labels)), {})
            for at, total, count in points:
                point = into.setdefault(int(at), [0.0, None if count is None else 0.0])
                point[0] += total
                if count is not None and point[1] is not None:
                    point[1] += count
        for rule, keys in (history.get("insights") or {}).items():
            for key, points in keys.items():
                into_key = insights.setdefault(rule, {}).setdefault(key, {})
                for at, count in points:
                    into_key[int(at)] = into_key.get(int(at), 0.0) + count
    return series, insights


def merged_buckets(snapshots: list[dict[str, Any]]) -> dict[tuple[str, ...], dict[int, list[float]]]:
    """Every worker's latency bucket counts summed: latency labels -> minute -> requests per bucket."""
    found: dict[tuple[str, ...], dict[int, list[float]]] = {}
    for snapshot in snapshots:
        for labels, minutes in (snapshot.get("history") or {}).get("buckets", ()):
            into = found.setdefault(tuple(labels), {})
            for at, counts in minutes:
                point = into.setdefault(int(at), [0.0] * len(counts))
                for bucket, count in enumerate(counts):
                    point[bucket] += count
    return found
