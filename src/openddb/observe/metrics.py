"""CloudWatch's DynamoDB metrics, counted from the request records and served as Prometheus text (`GET /metrics`).

Names and dimensions are CloudWatch's (AWS/DynamoDB namespace), as labels: ConsumedRead/WriteCapacityUnits and
Read/WriteThrottleEvents by TableName (and GlobalSecondaryIndexName for an index's), ThrottledRequests,
SystemErrors, ReturnedItemCount and SuccessfulRequestLatency (a histogram, in milliseconds) by TableName and
Operation, ConditionalCheckFailedRequests and TransactionConflict by TableName, UserErrors with none (CloudWatch
counts them per account and region), ProvisionedRead/WriteCapacityUnits (gauges, from the tables' descriptions).
Beside them, the process figures of every worker, summed (process_cpu_seconds_total, process_resident_memory_bytes,
process_open_fds) and openddb_workers.

Each worker counts its own requests in memory (a few dict updates per request, no lock: one thread). With
`--workers N` every worker writes a snapshot of its counts to a file of its own in a directory the supervisor made
(`share`), at most every SNAPSHOT_SECONDS and only when something changed; the worker answering /metrics sums the
others' snapshots with its own live counts. So a scrape sees another worker's requests at most about
SNAPSHOT_SECONDS late, and a worker that restarts begins again from zero (a counter reset, which Prometheus'
rate() takes in its stride). Figures are per server (per host with workers), not across PostgreSQL nodes.

Where tables are kept by account and region (`--namespaces account-region`), a table is counted by its stored name,
"<account>/<region>/<name>", so two accounts' (or regions') tables of one name are counted apart, and UserErrors by
the caller's namespace (CloudWatch counts it per account and region); in one namespace the names are the tables'
own and the namespace "". The Prometheus text shows such names as `account` and `region` labels beside TableName
(observe/prometheus.py), and CloudWatch's calls read the caller's namespace alone (observe/namespaces.py).
"""

from __future__ import annotations

import os
import resource
import time
from bisect import bisect_left
from pathlib import Path
from typing import Any

import orjson

from openddb.observe.history import History
from openddb.observe.insights import Insights
from openddb.observe.record import Charge, RequestRecord

SNAPSHOT_SECONDS = 0.2
# SuccessfulRequestLatency buckets, milliseconds (CloudWatch reports it in milliseconds).
BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0)
COUNTERS = {
    # name -> (labels, help)
    "ConsumedReadCapacityUnits": (("TableName", "GlobalSecondaryIndexName"), "read capacity units consumed"),
    "ConsumedWriteCapacityUnits": (("TableName", "GlobalSecondaryIndexName"), "write capacity units consumed"),
    "ReadThrottleEvents": (("TableName", "GlobalSecondaryIndexName"), "requests throttled for read capacity"),
    "WriteThrottleEvents": (("TableName", "GlobalSecondaryIndexName"), "requests throttled for write capacity"),
    "ThrottledRequests": (("TableName", "Operation"), "requests throttled"),
    "SystemErrors": (("TableName", "Operation"), "requests answered with a 500 status"),
    "ReturnedItemCount": (("TableName", "Operation"), "items returned by Query, Scan and ExecuteStatement"),
    "ConditionalCheckFailedRequests": (("TableName",), "conditional writes whose condition failed"),
    "TransactionConflict": (("TableName",), "item requests refused for a conflict with a transaction"),
    "UserErrors": (("namespace",), "requests answered with a 400 status other than throttling and condition failures"),
}
HISTOGRAM = "SuccessfulRequestLatency"
# The operations whose items CloudWatch counts in ReturnedItemCount.
_RETURNING = frozenset({"Query", "Scan", "ExecuteStatement"})
_CONDITION = "ConditionalCheckFailedException"
_CONFLICTS = frozenset({"TransactionConflictException", "TransactionCanceledException"})
_THROTTLES = frozenset({"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"})

Labels = tuple[str, ...]


# Members of a (TableName, Operation) series after its latency bucket counts: the latency sum (ms), items returned,
# read and write units consumed by the table itself (a GSI's, and another table's in a batch, go to `units`).
_SUM, _RETURNED, _READ, _WRITE = len(BUCKETS) + 1, len(BUCKETS) + 2, len(BUCKETS) + 3, len(BUCKETS) + 4


class Metrics:
    """One worker's counts (a Listener of the request record), and the Prometheus text of all workers'."""

    def __init__(self, share: str | None = None, worker: int = 0) -> None:
        self.counters: dict[str, dict[Labels, float]] = {name: {} for name in COUNTERS}
        # (TableName, Operation) -> [count per latency bucket (one more for +Inf), then _SUM, _RETURNED, _READ,
        # _WRITE]: one list a request updates (a dict update per figure would cost the request path more)
        self.series: dict[Labels, list[float]] = {}
        # (TableName, GlobalSecondaryIndexName, "r" or "w") -> units, for charges outside the request's own series
        self.units: dict[tuple[str, str, str], float] = {}
        self.insights: Insights | None = None  # Contributor Insights' counts, served with the metrics
        self.history = History()  # CloudWatch's one-minute data points (observe/history.py), sampled off the path
        self._share = Path(share) if share else None
        self._own = self._share / f"worker-{worker}.json" if self._share else None
        self._dirty = False
        self._written = 0.0

    def observe(self, record: RequestRecord) -> None:
        """Count one answered request (a Listener: see observe/record.py). Written for the common case, one charge
        of the table itself (this runs on every request: each bytecode saved is worth it)."""
        self._dirty = True  # (Contributor Insights' counts change only with a request too)
        charges = record.charges
        namespace = record.namespace  # (tables are counted by their stored names: see the module's doc)
        if len(charges) == 1:
            _, table, index, is_global, units, write, _, _, _, _ = charges[0]
            if namespace:
                table = namespace + table
            series = self.series.get((table, record.operation)) or self._new_series(table, record.operation)
            if index is None or not is_global:
                series[_WRITE if write else _READ] += units
            else:
                self._count_apart(charges[0], namespace)
        else:
            named = charges[0].table if charges else record.tables[0] if record.tables else ""
            table = namespace + named
            series = self.series.get((table, record.operation)) or self._new_series(table, record.operation)
            for charge in charges:
                if charge.table == named and (charge.index_name is None or not charge.is_global):
                    series[_WRITE if charge.write else _READ] += charge.units
                else:
                    self._count_apart(charge, namespace)
        if record.status == 200:
            ms = record.latency * 1000
            series[bisect_left(BUCKETS, ms)] += 1
            series[_SUM] += ms
            if record.returned >= 0:
                series[_RETURNED] += record.returned
        else:
            self._refused(record, table)
        insights = self.insights
        if insights is not None and insights.active:  # (one listener, not two: a call less per request)
            insights.observe(record)

    def _new_series(self, table: str, operation: str) -> list[float]:
        series = self.series[(table, operation)] = [0.0] * (_WRITE + 1)
        return series

    def _count_apart(self, charge: Charge, namespace: str) -> None:
        """Count units outside the request's own series: a GSI's, or another table's in a batch."""
        index = (charge.index_name or "") if charge.is_global else ""
        other = (namespace + charge.table, index, "w" if charge.write else "r")
        self.units[other] = self.units.get(other, 0.0) + charge.units

    def _refused(self, record: RequestRecord, table: str) -> None:
        error = record.error
        counters = self.counters
        if record.status >= 500:
            _add(counters["SystemErrors"], (table, record.operation))
        elif error in _THROTTLES:
            _add(counters["ThrottledRequests"], (table, record.operation))
            for reason, throttled_table, index in record.throttled:
                name = "WriteThrottleEvents" if "Write" in reason else "ReadThrottleEvents"
                _add(counters[name], (record.namespace + throttled_table, index or ""))
        elif error == _CONDITION:
            _add(counters["ConditionalCheckFailedRequests"], (table,))
        elif error in _CONFLICTS:
            _add(counters["TransactionConflict"], (table,))
        else:
            _add(counters["UserErrors"], (record.namespace,))

    def sample(self, now: float) -> None:
        """Add what this worker counted since the last sample to its one-minute history (about once a second)."""
        if self.history.sample(self.snapshot(history=False), now):
            self._dirty = True

    def snapshot(self, history: bool = True) -> dict[str, Any]:
        """This worker's figures, as the other workers read them: {"counters": {name: [[labels, value]...]},
        "latency": [[[TableName, Operation], bucket counts and sum]...], "cpu", "rss", "fds", "insights",
        "history" (observe/history.py; left out with `history` False)}."""
        counters = {name: dict(series) for name, series in self.counters.items()}
        read, write = counters["ConsumedReadCapacityUnits"], counters["ConsumedWriteCapacityUnits"]
        returned = counters["ReturnedItemCount"]
        latency = []
        for (table, operation), series in self.series.items():
            for target, member in ((read, _READ), (write, _WRITE)):
                if series[member]:
                    target[(table, "")] = target.get((table, ""), 0.0) + series[member]
            if operation in _RETURNING:
                returned[(table, operation)] = series[_RETURNED]
            if any(series[:_SUM]):
                latency.append([[table, operation], series[:_RETURNED]])
        for (table, index, kind), units in self.units.items():
            target = write if kind == "w" else read
            target[(table, index)] = target.get((table, index), 0.0) + units
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {"counters": {name: [[list(labels), value] for labels, value in series.items()]
                             for name, series in counters.items()},
                "latency": latency, "cpu": usage.ru_utime + usage.ru_stime, "rss": _resident_bytes(),
                "fds": _open_fds(), "insights": self.insights.snapshot() if self.insights is not None else {},
                "history": self.history.snapshot() if history else {}}

    def share(self) -> float:
        """Write this worker's snapshot for the others if it changed and the last is SNAPSHOT_SECONDS old; the
        seconds after which to call again when a change is still unwritten, else 0 (the server calls it at the end
        of every event-loop pass, and again after that delay)."""
        if self._own is None or not self._dirty:
            return 0.0
        now = time.monotonic()
        if now - self._written < SNAPSHOT_SECONDS:
            return self._written + SNAPSHOT_SECONDS - now
        self._written = now
        self._dirty = False
        temporary = self._own.with_suffix(".tmp")
        try:
            temporary.write_bytes(orjson.dumps(self.snapshot()))
            os.replace(temporary, self._own)
        except OSError:  # (the directory went away: the server is stopping)
            pass
        return 0.0

    def collected(self) -> list[dict[str, Any]]:
        """Every worker's snapshot: this one's live, the others' from their files."""
        snapshots = [self.snapshot()]
        if self._share is None:
            return snapshots
        for path in sorted(self._share.glob("worker-*.json")):
            if path == self._own:
                continue
            try:
                snapshots.append(orjson.loads(path.read_bytes()))
            except (OSError, orjson.JSONDecodeError):
                continue
        return snapshots


def _add(series: dict[Labels, float], key: Labels) -> None:
    series[key] = series.get(key, 0.0) + 1


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0
