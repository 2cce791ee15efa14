"""The subset of Amazon CloudWatch's API that reads DynamoDB's metrics and Contributor Insights' reports, over the
one-minute history every worker keeps (observe/history.py): GetMetricStatistics, GetMetricData (MetricStat
queries), ListMetrics and GetInsightRuleReport, for the AWS/DynamoDB namespace and the rules DynamoDB makes for a
table's Contributor Insights. The HTTP layer hands calls here in CloudWatch's protocol (server/cloudwatch_wire.py).

What each metric keeps decides the statistics it answers (`kept`): Sum everywhere; SampleCount and Average where
the number of samples is known (requests answered for SuccessfulRequestLatency and ReturnedItemCount; the events
themselves for the throttle, error, condition-failure and conflict counts, whose Minimum and Maximum are then 1).
A statistic a metric does not keep is refused (InvalidParameterCombination), never made up. Periods are whole
minutes, as for CloudWatch's standard-resolution metrics; time ranges reach back three hours at most.
"""

from __future__ import annotations

from typing import Any

from openddb.observe.history import Series, merged
from openddb.observe.metrics import COUNTERS, HISTOGRAM

NAMESPACE = "AWS/DynamoDB"
JSON_TARGET = b"GraniteServiceVersion20100801."  # X-Amz-Target of a call in the AWS JSON 1.0 protocol
STATISTICS = ("SampleCount", "Average", "Sum", "Minimum", "Maximum")
MAX_DATAPOINTS = 1440  # GetMetricStatistics' limit per call (the API Reference)
_DIMENSIONS: dict[str, tuple[str, ...]] = {name: labels for name, (labels, _) in COUNTERS.items()}
_DIMENSIONS[HISTOGRAM] = ("TableName", "Operation")
_SUM_ONLY = frozenset({"ConsumedReadCapacityUnits", "ConsumedWriteCapacityUnits"})
_COUNTED = frozenset({HISTOGRAM, "ReturnedItemCount"})
_UNITS = {HISTOGRAM: "Milliseconds"}


class CloudWatchError(Exception):
    """A refusal in CloudWatch's terms: the error's shape name (`__type`), its Query-protocol code, and a message."""

    def __init__(self, shape: str, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.shape = shape
        self.code = code
        self.message = message
        self.status = status


def invalid(message: str) -> CloudWatchError:
    return CloudWatchError("InvalidParameterValueException", "InvalidParameterValue", message)


def _combination(message: str) -> CloudWatchError:
    return CloudWatchError("InvalidParameterCombinationException", "InvalidParameterCombination", message)


def _missing(member: str) -> CloudWatchError:
    # best guess: CloudWatch's words for a missing parameter, after its Query protocol's MissingParameter
    return CloudWatchError("MissingRequiredParameterException", "MissingParameter",
                           f"The parameter {member} is required.")


def kept(metric: str) -> tuple[str, ...]:
    """The statistics a metric's history can answer (see the module's doc)."""
    if metric in _SUM_ONLY:
        return ("Sum",)
    if metric in _COUNTED:
        return ("SampleCount", "Average", "Sum")
    return STATISTICS


def dimensions_of(series: Series) -> dict[str, str]:
    """A series' CloudWatch dimensions: its labels by name, the empty ones (a table's own figures) left out."""
    name, labels = series
    return {dimension: value for dimension, value in zip(_DIMENSIONS.get(name, ()), labels, strict=False) if value}


class Window:
    """A call's time range cut into periods: StartTime and EndTime (epoch seconds) and Period (seconds)."""

    def __init__(self, params: dict[str, Any], period: Any) -> None:
        for member in ("StartTime", "EndTime"):
            if not isinstance(params.get(member), int | float):
                raise _missing(member)
        if not isinstance(period, int) or isinstance(period, bool) or period < 60 or period % 60:
            # best guess: CloudWatch's words for a period other than whole minutes of a standard-resolution metric
            raise invalid("The parameter Period must be a multiple of 60.")
        self.start, self.end, self.period = float(params["StartTime"]), float(params["EndTime"]), period
        if self.start >= self.end:
            raise invalid("The parameter StartTime must be less than the parameter EndTime.")

    def count(self) -> int:
        return -int(-(self.end - self.start) // self.period)

    def buckets(self, points: dict[int, Any]) -> dict[int, list[Any]]:
        """The minutes of `points` within the range, grouped by the start of their period (aligned to the
        period from the epoch, as CloudWatch aligns recent data)."""
        grouped: dict[int, list[Any]] = {}
        for minute, point in points.items():
            if minute + 60 > self.start and minute < self.end:
                grouped.setdefault(minute - minute % self.period, []).append(point)
        return grouped


def _statistics(points: list[list[Any]], wanted: list[str]) -> dict[str, float]:
    total = sum(point[0] for point in points)
    counts = [point[1] for point in points]
    samples = None if any(count is None for count in counts) else float(sum(counts))
    values: dict[str, float] = {}
    for statistic in wanted:
        if statistic == "Sum":
            values[statistic] = total
        elif statistic == "SampleCount" and samples is not None:
            values[statistic] = samples
        elif statistic == "Average" and samples:
            values[statistic] = total / samples
        elif statistic in ("Minimum", "Maximum"):
            values[statistic] = 1.0  # (each sample of an event count is one event)
    return values


def _check_statistics(metric: str, wanted: list[str]) -> None:
    refused = [statistic for statistic in wanted if statistic not in kept(metric)]
    if refused:
        # best guess: not a refusal of CloudWatch's, which keeps every statistic; this server's history keeps fewer
        raise _combination(f"This server keeps {', '.join(kept(metric))} of {metric}, not {', '.join(refused)}.")


def _series(params: dict[str, Any], history: dict[Series, dict[int, list[Any]]]) -> dict[int, list[Any]]:
    """The minutes of the one series a metric name and dimension set name (none: an empty series)."""
    if params.get("Namespace") != NAMESPACE:
        return {}
    wanted = {d.get("Name"): d.get("Value") for d in params.get("Dimensions") or [] if isinstance(d, dict)}
    for series, points in history.items():
        if series[0] == params.get("MetricName") and dimensions_of(series) == wanted:
            return points
    return {}


def get_metric_statistics(params: dict[str, Any], snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    for member in ("Namespace", "MetricName"):
        if not params.get(member):
            raise _missing(member)
    window = Window(params, params.get("Period"))
    wanted = list(params.get("Statistics") or [])
    if not wanted and not params.get("ExtendedStatistics"):
        # best guess: CloudWatch asks for one of the two
        raise _missing("Statistics")
    if params.get("ExtendedStatistics"):
        raise _combination("This server keeps no percentiles (ExtendedStatistics).")  # best guess: as above
    if any(statistic not in STATISTICS for statistic in wanted):
        raise invalid(f"The parameter Statistics must be among {', '.join(STATISTICS)}.")  # best guess
    if window.count() > MAX_DATAPOINTS:
        raise _combination(f"You have requested up to {window.count():,} datapoints, which exceeds the limit of "
                           f"{MAX_DATAPOINTS:,}. You may reduce the datapoints requested by increasing Period, or "
                           "decreasing the time range.")
    metric = str(params["MetricName"])
    _check_statistics(metric, wanted)
    points = _series(params, merged(snapshots)[0])
    unit = _UNITS.get(metric, "Count")
    datapoints = [{"Timestamp": at, **_statistics(grouped, wanted), "Unit": unit}
                  for at, grouped in sorted(window.buckets(points).items())]
    return {"Label": metric, "Datapoints": datapoints}


def get_metric_data(params: dict[str, Any], snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    queries = params.get("MetricDataQueries")
    if not isinstance(queries, list) or not queries:
        raise _missing("MetricDataQueries")
    history = merged(snapshots)[0]
    descending = params.get("ScanBy", "TimestampDescending") == "TimestampDescending"
    results = []
    for query in queries:
        stat = query.get("MetricStat")
        if not isinstance(stat, dict):  # best guess: this server answers MetricStat queries only
            raise invalid(f"The query {query.get('Id')} has no MetricStat: this server evaluates no Expression.")
        metric = stat.get("Metric") or {}
        window = Window(params, stat.get("Period"))
        statistic = str(stat.get("Stat", ""))
        if statistic not in STATISTICS:
            raise invalid(f"The statistic {statistic} is not among {', '.join(STATISTICS)}.")  # best guess
        _check_statistics(str(metric.get("MetricName")), [statistic])
        grouped = sorted(window.buckets(_series(metric, history)).items(), reverse=descending)
        values = [(at, _statistics(points, [statistic]).get(statistic))
                  for at, points in grouped]
        if query.get("ReturnData", True) is False:
            continue
        results.append({"Id": query.get("Id"), "Label": query.get("Label") or metric.get("MetricName"),
                        "Timestamps": [at for at, value in values if value is not None],
                        "Values": [value for _, value in values if value is not None], "StatusCode": "Complete"})
    return {"MetricDataResults": results, "Messages": []}


def list_metrics(params: dict[str, Any], snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    """The metrics with a data point in the history (three hours, as RecentlyActive PT3H), filtered as asked."""
    if params.get("Namespace") not in (None, NAMESPACE):
        return {"Metrics": []}
    filters = [d for d in params.get("Dimensions") or [] if isinstance(d, dict)]
    found = []
    for series, points in sorted(merged(snapshots)[0].items()):
        dimensions = dimensions_of(series)
        if not points or params.get("MetricName") not in (None, series[0]):
            continue
        if any(f.get("Name") not in dimensions or f.get("Value") not in (None, dimensions[f["Name"]])
               for f in filters):
            continue
        found.append({"Namespace": NAMESPACE, "MetricName": series[0],
                      "Dimensions": [{"Name": name, "Value": value} for name, value in dimensions.items()]})
    return {"Metrics": found}


def get_insight_rule_report(params: dict[str, Any], snapshots: list[dict[str, Any]],
                            rules: set[str]) -> dict[str, Any]:
    """A Contributor Insights rule's top contributors over a time range, per period (`rules`: the rule names the
    tables' enabled insights have now)."""
    name = params.get("RuleName")
    if not name:
        raise _missing("RuleName")
    if name not in rules:  # best guess: CloudWatch's words for a rule it does not have
        raise CloudWatchError("ResourceNotFoundException", "ResourceNotFoundException", f"Rule {name} not found",
                              404)
    window = Window(params, params.get("Period"))
    keys = merged(snapshots)[1].get(str(name), {})
    totals: list[tuple[float, str, dict[int, float]]] = []
    for key, points in keys.items():
        per_period = {at: float(sum(counts)) for at, counts in window.buckets(points).items()}
        if per_period:
            totals.append((sum(per_period.values()), key, per_period))
    totals.sort(key=lambda total: (-total[0], total[1]))
    contributors = [{"Keys": key.split("|"), "ApproximateAggregateValue": total,
                     "Datapoints": [{"Timestamp": at, "ApproximateValue": value}
                                    for at, value in sorted(per_period.items())]}
                    for total, key, per_period in totals]
    limit = params.get("MaxContributorCount")
    top = contributors[:limit if isinstance(limit, int) and limit > 0 else 10]
    return {"KeyLabels": _key_labels(str(name)), "AggregationStatistic": "Sum",
            "AggregateValue": sum(total for total, _, _ in totals),
            "ApproximateUniqueCount": len(contributors), "Contributors": top,
            "MetricDatapoints": _rule_datapoints(window, keys)}


def _key_labels(rule: str) -> list[str]:
    """PKC and PKT rules count partition keys; SKC and SKT partition and sort keys (rule names: insights.py)."""
    kind = rule.split("-")[1] if rule.count("-") >= 2 else ""
    return ["PartitionKey", "SortKey"] if kind in ("SKC", "SKT") else ["PartitionKey"]


def _rule_datapoints(window: Window, keys: dict[str, dict[int, float]]) -> list[dict[str, Any]]:
    periods: dict[int, list[float]] = {}
    for points in keys.values():
        for at, counts in window.buckets(points).items():
            periods.setdefault(at, []).append(float(sum(counts)))
    return [{"Timestamp": at, "UniqueContributors": float(len(values)), "MaxContributorValue": max(values),
             "SampleCount": sum(values), "Sum": sum(values)} for at, values in sorted(periods.items())]

