"""The subset of Amazon CloudWatch's API that reads DynamoDB's metrics and Contributor Insights' reports, over the
one-minute history every worker keeps (observe/history.py): GetMetricStatistics, GetMetricData (MetricStat
queries), ListMetrics and GetInsightRuleReport, for the AWS/DynamoDB namespace and the rules DynamoDB makes for a
table's Contributor Insights. The HTTP layer hands calls here in CloudWatch's protocol (server/cloudwatch_wire.py).

What each metric keeps decides the statistics it answers (`kept`): Sum everywhere; SampleCount and Average where
the number of samples is known (requests answered for SuccessfulRequestLatency and ReturnedItemCount; the events
themselves for the throttle, error, condition-failure and conflict counts, whose Minimum and Maximum are then 1).
A statistic a metric does not keep is refused (InvalidParameterCombination), never made up. SuccessfulRequestLatency
also answers percentiles (ExtendedStatistics `pNN`), estimated from its latency buckets (observe/percentiles.py).
Periods are whole minutes, as for CloudWatch's standard-resolution metrics; time ranges reach back three hours at
most. GetMetricData's metric math (Expression) is observe/metric_math.py's.
"""

from __future__ import annotations

from typing import Any

from openddb.observe.history import Series, merged, merged_buckets
from openddb.observe.metric_math import Expressions, MathError, TimeSeries
from openddb.observe.metrics import COUNTERS, HISTOGRAM
from openddb.observe.percentiles import estimate, percentile_of

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


def _statistics(points: list[list[Any]], wanted: list[str], buckets: list[list[float]] | None = None
                ) -> dict[str, float]:
    """The statistics `wanted` of a period's minutes (`buckets`: their latency bucket counts, for percentiles)."""
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
        elif buckets:
            percentile = percentile_of(statistic)
            found = None if percentile is None else estimate(percentile, [sum(c) for c in zip(*buckets, strict=True)])
            if found is not None:
                values[statistic] = found
    return values


def _check_statistics(metric: str, wanted: list[str]) -> None:
    refused = [statistic for statistic in wanted
               if statistic not in kept(metric) and (metric != HISTOGRAM or percentile_of(statistic) is None)]
    if refused:
        # best guess: not a refusal of CloudWatch's, which keeps every statistic; this server's history keeps fewer
        answered = ", ".join(kept(metric)) + (" and percentiles (pNN)" if metric == HISTOGRAM else "")
        raise _combination(f"This server keeps {answered} of {metric}, not {', '.join(refused)}.")


def _find(params: dict[str, Any], history: dict[Series, dict[int, list[Any]]]) -> Series | None:
    """The one series a metric name and dimension set name (None: no such series)."""
    if params.get("Namespace") != NAMESPACE:
        return None
    wanted = {d.get("Name"): d.get("Value") for d in params.get("Dimensions") or [] if isinstance(d, dict)}
    for series in history:
        if series[0] == params.get("MetricName") and dimensions_of(series) == wanted:
            return series
    return None


def _series(params: dict[str, Any], history: dict[Series, dict[int, list[Any]]]) -> dict[int, list[Any]]:
    """The minutes of the one series a metric name and dimension set name (none: an empty series)."""
    found = _find(params, history)
    return {} if found is None else history[found]


def _buckets(params: dict[str, Any], history: dict[Series, dict[int, list[Any]]],
             snapshots: list[dict[str, Any]]) -> dict[int, list[float]]:
    """The latency bucket counts per minute of the series `params` names (none unless it is the latency's)."""
    found = _find(params, history)
    return merged_buckets(snapshots).get(found[1], {}) if found is not None and found[0] == HISTOGRAM else {}


def get_metric_statistics(params: dict[str, Any], snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    for member in ("Namespace", "MetricName"):
        if not params.get(member):
            raise _missing(member)
    window = Window(params, params.get("Period"))
    wanted = list(params.get("Statistics") or [])
    extended = list(params.get("ExtendedStatistics") or [])
    if not wanted and not extended:
        # best guess: CloudWatch asks for one of the two
        raise _missing("Statistics")
    if wanted and extended:  # best guess at the words: the API Reference says one or the other, not both
        raise _combination("The parameters Statistics and ExtendedStatistics are mutually exclusive.")
    if any(statistic not in STATISTICS for statistic in wanted):
        raise invalid(f"The parameter Statistics must be among {', '.join(STATISTICS)}.")  # best guess
    if any(percentile_of(statistic) is None for statistic in extended):  # best guess at the words
        raise invalid("The parameter ExtendedStatistics must be percentiles from p0.0 to p100.")
    if window.count() > MAX_DATAPOINTS:
        raise _combination(f"You have requested up to {window.count():,} datapoints, which exceeds the limit of "
                           f"{MAX_DATAPOINTS:,}. You may reduce the datapoints requested by increasing Period, or "
                           "decreasing the time range.")
    metric = str(params["MetricName"])
    _check_statistics(metric, wanted + extended)
    history = merged(snapshots)[0]
    buckets = window.buckets(_buckets(params, history, snapshots))
    unit = _UNITS.get(metric, "Count")
    datapoints = []
    for at, grouped in sorted(window.buckets(_series(params, history)).items()):
        point: dict[str, Any] = {"Timestamp": at, **_statistics(grouped, wanted)}
        if extended:
            point["ExtendedStatistics"] = _statistics(grouped, extended, buckets.get(at))
        datapoints.append({**point, "Unit": unit})
    return {"Label": metric, "Datapoints": datapoints}


def get_metric_data(params: dict[str, Any], snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    """MetricStat queries as GetMetricStatistics answers them, and metric math Expressions over them
    (observe/metric_math.py), each result newest first unless ScanBy says otherwise."""
    queries = params.get("MetricDataQueries")
    if not isinstance(queries, list) or not queries or not all(isinstance(query, dict) for query in queries):
        raise _missing("MetricDataQueries")
    history = merged(snapshots)[0]
    stats: dict[str, tuple[str, TimeSeries]] = {}
    for query in queries:
        if isinstance(query.get("MetricStat"), dict) and query.get("Expression") is not None:
            # best guess at the words: the API Reference has a query give one or the other
            raise invalid(f"The query {query.get('Id')} has both a MetricStat and an Expression.")
        if isinstance(query.get("MetricStat"), dict):
            stats[str(query.get("Id"))] = _metric_stat(params, query, history, snapshots)
    values = Expressions(queries, stats)
    descending = params.get("ScanBy", "TimestampDescending") == "TimestampDescending"
    results = []
    for query in queries:
        if query.get("ReturnData", True) is False:
            continue
        try:
            found = values.results(query)
        except MathError as error:  # best guess at the words around the reason
            raise invalid(f"Error in expression {query.get('Id')}: {error}") from None
        for label, series in found:
            times = sorted(series, reverse=descending)
            results.append({"Id": query.get("Id"), "Label": label, "Timestamps": times,
                            "Values": [series[at] for at in times], "StatusCode": "Complete"})
    return {"MetricDataResults": results, "Messages": []}


def _metric_stat(params: dict[str, Any], query: dict[str, Any], history: dict[Series, dict[int, list[Any]]],
                 snapshots: list[dict[str, Any]]) -> tuple[str, TimeSeries]:
    """A MetricStat query's (label, time series)."""
    stat = query["MetricStat"]
    metric = stat.get("Metric") or {}
    window = Window(params, stat.get("Period"))
    statistic = str(stat.get("Stat", ""))
    if statistic not in STATISTICS and percentile_of(statistic) is None:
        raise invalid(f"The statistic {statistic} is not among {', '.join(STATISTICS)} or pNN.")  # best guess
    _check_statistics(str(metric.get("MetricName")), [statistic])
    buckets = window.buckets(_buckets(metric, history, snapshots))
    series: TimeSeries = {}
    for at, points in window.buckets(_series(metric, history)).items():
        value = _statistics(points, [statistic], buckets.get(at)).get(statistic)
        if value is not None:
            series[at] = value
    return str(query.get("Label") or metric.get("MetricName")), series


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

