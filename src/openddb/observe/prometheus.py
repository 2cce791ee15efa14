"""The Prometheus text exposition format (version 0.0.4) of the metrics: every worker's snapshot summed
(observe/metrics.py), the tables' provisioned capacity, the process figures. Where tables are kept by account and
region, each table's (and Contributor Insights rule's) series carries `account` and `region` labels, and UserErrors
one series per account and region."""

from __future__ import annotations

from typing import Any

from openddb.observe.insights import TOP
from openddb.observe.metrics import BUCKETS, COUNTERS, HISTOGRAM
from openddb.storage.base import Engine

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


def render(snapshots: list[dict[str, Any]], engine: Engine) -> bytes:
    """The /metrics page."""
    lines: list[str] = []
    for name, (labels, description) in COUNTERS.items():
        summed: dict[tuple[str, ...], float] = {}
        for snapshot in snapshots:
            for values, value in snapshot["counters"].get(name, ()):
                key = tuple(values)
                summed[key] = summed.get(key, 0.0) + value
        lines += [f"# HELP {name} {description}", f"# TYPE {name} counter"]
        lines += [f"{name}{_labels(labels, key)} {_number(value)}" for key, value in sorted(summed.items())]
    lines += _latency(snapshots)
    lines += _contributors(snapshots)
    lines += _provisioned(engine)
    lines += _process(snapshots)
    return ("\n".join(lines) + "\n").encode()


def _latency(snapshots: list[dict[str, Any]]) -> list[str]:
    summed: dict[tuple[str, ...], list[float]] = {}
    for snapshot in snapshots:
        for values, counts in snapshot["latency"]:
            total = summed.setdefault(tuple(values), [0.0] * (len(BUCKETS) + 2))
            for position, count in enumerate(counts):
                total[position] += count
    lines = [f"# HELP {HISTOGRAM} milliseconds from a request's arrival at the dispatcher to its answer, of "
             "successful requests", f"# TYPE {HISTOGRAM} histogram"]
    names = ("TableName", "Operation")
    for key, counts in sorted(summed.items()):
        running = 0.0
        for le, count in zip((*(_number(bound) for bound in BUCKETS), "+Inf"), counts[:-1], strict=True):
            running += count
            lines.append(f'{HISTOGRAM}_bucket{_labels((*names, "le"), (*key, le))} {_number(running)}')
        lines.append(f"{HISTOGRAM}_sum{_labels(names, key)} {_number(counts[-1])}")
        lines.append(f"{HISTOGRAM}_count{_labels(names, key)} {_number(running)}")
    return lines


def _contributors(snapshots: list[dict[str, Any]]) -> list[str]:
    """Contributor Insights: the TOP keys of each rule (observe/insights.py), counted over every worker."""
    summed: dict[str, dict[str, float]] = {}
    for snapshot in snapshots:
        for rule, keys in snapshot.get("insights", {}).items():
            counts = summed.setdefault(rule, {})
            for key, count in keys:
                counts[key] = counts.get(key, 0.0) + count
    name = "openddb_contributor_insights"
    lines = [f"# HELP {name} Contributor Insights: the most accessed (PKC, SKC) and throttled (PKT, SKT) keys, "
             "by rule, requests since enabled", f"# TYPE {name} gauge"]
    for rule, counts in sorted(summed.items()):
        top = sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))[:TOP]
        lines += [f"{name}{_labels(('rule', 'key'), (rule, key))} {_number(count)}" for key, count in top]
    return lines


def _provisioned(engine: Engine) -> list[str]:
    """ProvisionedRead/WriteCapacityUnits of every provisioned table and its GSIs (on-demand tables have none)."""
    read = ["# HELP ProvisionedReadCapacityUnits read capacity units provisioned",
            "# TYPE ProvisionedReadCapacityUnits gauge"]
    write = ["# HELP ProvisionedWriteCapacityUnits write capacity units provisioned",
             "# TYPE ProvisionedWriteCapacityUnits gauge"]
    names = ("TableName", "GlobalSecondaryIndexName")
    for name in engine.list_tables():
        meta = engine.get_table(name)
        if meta is None or meta.billing_mode != "PROVISIONED":
            continue
        read.append(f"ProvisionedReadCapacityUnits{_labels(names, (name, ''))} {meta.read_capacity}")
        write.append(f"ProvisionedWriteCapacityUnits{_labels(names, (name, ''))} {meta.write_capacity}")
        for index in meta.indexes:
            if index.is_global:
                read.append(f"ProvisionedReadCapacityUnits{_labels(names, (name, index.name))} {index.read_capacity}")
                write.append(f"ProvisionedWriteCapacityUnits{_labels(names, (name, index.name))} "
                             f"{index.write_capacity}")
    return read + write


def _process(snapshots: list[dict[str, Any]]) -> list[str]:
    return ["# HELP process_cpu_seconds_total user and system CPU time of the server's workers",
            "# TYPE process_cpu_seconds_total counter",
            f"process_cpu_seconds_total {_number(sum(s['cpu'] for s in snapshots))}",
            "# HELP process_resident_memory_bytes resident memory of the server's workers",
            "# TYPE process_resident_memory_bytes gauge",
            f"process_resident_memory_bytes {sum(s['rss'] for s in snapshots)}",
            "# HELP process_open_fds open file descriptors of the server's workers",
            "# TYPE process_open_fds gauge",
            f"process_open_fds {sum(s['fds'] for s in snapshots)}",
            "# HELP openddb_workers worker processes whose figures are summed here",
            "# TYPE openddb_workers gauge",
            f"openddb_workers {len(snapshots)}"]


# Labels whose value may be qualified by a namespace, "<account>/<region>/<value>" (observe/metrics.py), shown as
# `account` and `region` labels before the value's own; "namespace" (UserErrors') is shown by those alone.
_QUALIFIED = frozenset({"TableName", "rule", "namespace"})


def _labels(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    pairs = []
    for name, value in zip(names, values, strict=True):
        if name in _QUALIFIED and value.count("/") >= 2:  # (a table or rule name has no "/": the first two part it)
            account, region, value = value.split("/", 2)
            pairs += [f'account="{_escaped(account)}"', f'region="{_escaped(region)}"']
        if value != "" and name != "namespace":
            pairs.append(f'{name}="{_escaped(value)}"')
    return "{" + ",".join(pairs) + "}" if pairs else ""


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)
