"""CloudWatch on the same port: GetMetricStatistics, GetMetricData, ListMetrics and GetInsightRuleReport through
boto3's `cloudwatch` client (AWS JSON 1.0, what its current model sends) and in the RPC v2 CBOR protocol (botocore's
own serializer and parser over raw HTTP), agreeing with /metrics and with the requests actually sent, across two
workers; refusals in CloudWatch's terms."""

from __future__ import annotations

import datetime
import http.client
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import ClientError
from botocore.parsers import create_parser
from botocore.serialize import create_serializer

from tests.api.test_metrics import scrape, value
from tests.conftest import ServerProcess, make_client, unique_name


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = ServerProcess(str(tmp_path_factory.mktemp("cloudwatch")), "--workers", "2")
    yield process
    process.finish()


def _window(minutes: int = 10) -> dict[str, Any]:
    now = datetime.datetime.now(datetime.UTC)
    return {"StartTime": now - datetime.timedelta(minutes=minutes), "EndTime": now + datetime.timedelta(minutes=1)}


def _eventually(read: Callable[[], Any], expected: Any) -> Any:
    """What `read` gives once it equals `expected`, or the last it gave after 10 s (each worker samples its counts
    about once a second and shares them within 0.2 s)."""
    deadline = time.monotonic() + 10
    found = read()
    while found != expected and time.monotonic() < deadline:
        time.sleep(0.2)
        found = read()
    return found


def _statistic(cw: Any, metric: str, statistic: str, period: int = 600, **dimensions: str) -> float:
    answer = cw.get_metric_statistics(Namespace="AWS/DynamoDB", MetricName=metric, Period=period,
                                      Dimensions=[{"Name": k, "Value": v} for k, v in dimensions.items()],
                                      Statistics=[statistic], **_window())
    return sum(point[statistic] for point in answer["Datapoints"])


def test_statistics_agree_with_the_requests_sent_and_with_metrics(workers: ServerProcess) -> None:
    """A mixed run through several connections (so both workers serve it): the Sum of consumed units, the
    SampleCount of SuccessfulRequestLatency and the condition failures are what the clients were told, and what
    /metrics counts."""
    ddb = make_client(workers.endpoint)
    table = unique_name("cw")
    ddb.create_table(TableName=table, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST")
    written = read = 0.0
    served_by = set()
    for n in range(12):
        client = make_client(workers.endpoint)  # (a new connection: either worker)
        answer = client.put_item(TableName=table, Item={"pk": {"S": f"k{n}"}, "data": {"S": "x" * 1500}},
                                 ReturnConsumedCapacity="TOTAL")
        written += answer["ConsumedCapacity"]["CapacityUnits"]
        served_by.add(answer["ResponseMetadata"]["RequestId"][:36])  # (a worker's request ids share a prefix)
        answer = client.get_item(TableName=table, Key={"pk": {"S": f"k{n}"}}, ReturnConsumedCapacity="TOTAL")
        read += answer["ConsumedCapacity"]["CapacityUnits"]
    with pytest.raises(ClientError):
        ddb.put_item(TableName=table, Item={"pk": {"S": "k0"}}, ConditionExpression="attribute_not_exists(pk)")
    cw = make_client(workers.endpoint, "cloudwatch")
    assert (written, read, len(served_by)) == (24.0, 6.0, 2)
    assert _eventually(lambda: _statistic(cw, "ConsumedWriteCapacityUnits", "Sum", TableName=table), 24.0) == 24.0
    assert _eventually(lambda: _statistic(cw, "ConsumedReadCapacityUnits", "Sum", TableName=table), 6.0) == 6.0
    assert _eventually(lambda: _statistic(cw, "SuccessfulRequestLatency", "SampleCount", TableName=table,
                                          Operation="PutItem"), 12.0) == 12.0
    assert _eventually(lambda: _statistic(cw, "ConditionalCheckFailedRequests", "Sum", TableName=table), 1.0) == 1.0
    samples = scrape(workers.endpoint)
    assert value(samples, "ConsumedWriteCapacityUnits", TableName=table) == 24.0
    assert value(samples, "ConsumedReadCapacityUnits", TableName=table) == 6.0
    assert value(samples, "ConditionalCheckFailedRequests", TableName=table) == 1.0
    # GetMetricData answers the same, by minute, newest first; ListMetrics names the table's metrics.
    data = cw.get_metric_data(MetricDataQueries=[{"Id": "w", "MetricStat": {"Metric": {
        "Namespace": "AWS/DynamoDB", "MetricName": "ConsumedWriteCapacityUnits",
        "Dimensions": [{"Name": "TableName", "Value": table}]}, "Period": 60, "Stat": "Sum"}}], **_window())
    result = data["MetricDataResults"][0]
    assert (result["Id"], result["StatusCode"], sum(result["Values"])) == ("w", "Complete", 24.0)
    assert result["Timestamps"] == sorted(result["Timestamps"], reverse=True)
    assert all(stamp.second == 0 for stamp in result["Timestamps"])  # (one-minute data points)
    listed = cw.list_metrics(Namespace="AWS/DynamoDB", Dimensions=[{"Name": "TableName", "Value": table}])
    names = {metric["MetricName"] for metric in listed["Metrics"]}
    assert {"ConsumedWriteCapacityUnits", "ConsumedReadCapacityUnits", "SuccessfulRequestLatency",
            "ConditionalCheckFailedRequests"} <= names


def test_refusals_in_cloudwatchs_terms(workers: ServerProcess) -> None:
    cw = make_client(workers.endpoint, "cloudwatch")
    now = datetime.datetime.now(datetime.UTC)
    metric = {"Namespace": "AWS/DynamoDB", "MetricName": "ConsumedReadCapacityUnits"}
    cases = [
        ({"StartTime": now, "EndTime": now - datetime.timedelta(minutes=1), "Period": 60, "Statistics": ["Sum"]},
         "InvalidParameterValueException", "The parameter StartTime must be less than the parameter EndTime."),
        ({**_window(), "Period": 90, "Statistics": ["Sum"]},
         "InvalidParameterValueException", "The parameter Period must be a multiple of 60."),
        ({"StartTime": now - datetime.timedelta(days=2), "EndTime": now, "Period": 60, "Statistics": ["Sum"]},
         "InvalidParameterCombinationException", "You have requested up to 2,880 datapoints, which exceeds the "
         "limit of 1,440. You may reduce the datapoints requested by increasing Period, or decreasing the time "
         "range."),
        ({**_window(), "Period": 60, "Statistics": ["Average"]},
         "InvalidParameterCombinationException", "This server keeps Sum of ConsumedReadCapacityUnits, not Average."),
    ]
    for members, code, message in cases:
        with pytest.raises(ClientError) as excinfo:
            cw.get_metric_statistics(**metric, **members)
        assert (excinfo.value.response["Error"]["Code"], excinfo.value.response["Error"]["Message"]) == (
            code, message)
    # Another namespace, or a metric nothing counted, has no data points (as CloudWatch answers).
    empty = cw.get_metric_statistics(Namespace="AWS/EC2", MetricName="CPUUtilization", Period=60,
                                     Statistics=["Average"], **_window())
    assert empty["Datapoints"] == []


def test_the_cbor_protocol(workers: ServerProcess) -> None:
    """botocore's RPC v2 CBOR serializer's request, sent as it is, is answered in CBOR that its parser reads; a
    refusal carries the Query-protocol code header, so the parser reports CloudWatch's code."""
    model = botocore.session.get_session().get_service_model("cloudwatch")
    serializer, parser = create_serializer("smithy-rpc-v2-cbor"), create_parser("smithy-rpc-v2-cbor")

    def call(operation: str, params: dict[str, Any]) -> dict[str, Any]:
        shape = model.operation_model(operation)
        request = serializer.serialize_to_request(params, shape)
        connection = http.client.HTTPConnection("127.0.0.1", workers.port, timeout=10)
        connection.request("POST", request["url_path"], body=request["body"], headers=request["headers"])
        response = connection.getresponse()
        raw = {"body": response.read(), "headers": {k.lower(): v for k, v in response.getheaders()},
               "status_code": response.status}
        connection.close()
        assert raw["headers"]["smithy-protocol"] == "rpc-v2-cbor"
        return dict(parser.parse(raw, shape.output_shape))

    listed = call("ListMetrics", {"Namespace": "AWS/DynamoDB"})
    assert isinstance(listed["Metrics"], list)
    answer = call("GetMetricStatistics", {"Namespace": "AWS/DynamoDB", "MetricName": "UserErrors", "Period": 60,
                                          "Statistics": ["Sum"], **_window()})
    assert isinstance(answer["Datapoints"], list)
    refused = call("GetMetricStatistics", {"Namespace": "AWS/DynamoDB", "MetricName": "UserErrors", "Period": 61,
                                           "Statistics": ["Sum"], **_window()})
    assert refused["Error"]["Code"] == "InvalidParameterValue"
    assert refused["Error"]["Message"] == "The parameter Period must be a multiple of 60."


def test_contributor_insights_report_names_the_hot_key_per_period(tmp_path: Path) -> None:
    """The rule of a table's most accessed keys, over a time window: the hot key leads, with its count per minute
    (one process, so Contributor Insights' refresh and the counts are this server's alone)."""
    server = ServerProcess(str(tmp_path), "--workers", "1")
    try:
        ddb, cw = make_client(server.endpoint), make_client(server.endpoint, "cloudwatch")
        table = unique_name("hotkey")
        ddb.create_table(TableName=table, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                         KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST")
        ddb.update_contributor_insights(TableName=table, ContributorInsightsAction="ENABLE")
        rule = next(name for name in ddb.describe_contributor_insights(TableName=table)["ContributorInsightsRuleList"]
                    if "-PKC-" in name)
        time.sleep(1.5)  # (enabled tables are read about once a second)
        for n in range(10):
            ddb.put_item(TableName=table, Item={"pk": {"S": "hot" if n < 7 else f"cold{n}"}})

        def report() -> dict[str, Any]:
            return dict(cw.get_insight_rule_report(RuleName=rule, Period=60, **_window()))

        found = _eventually(lambda: report()["AggregateValue"], 10.0)
        assert found == 10.0
        answer = report()
        assert answer["KeyLabels"] == ["PartitionKey"]
        assert answer["ApproximateUniqueCount"] == 4
        top = answer["Contributors"][0]
        assert (top["Keys"], top["ApproximateAggregateValue"]) == (["hot"], 7.0)
        assert sum(point["ApproximateValue"] for point in top["Datapoints"]) == 7.0
        with pytest.raises(ClientError) as excinfo:
            cw.get_insight_rule_report(RuleName="DynamoDBContributorInsights-PKC-none-1", Period=60, **_window())
        assert excinfo.value.response["Error"]["Code"] == "ResourceNotFoundException"
    finally:
        server.finish()


def _estimate(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], percentile: float, **labels: str) -> float:
    """The percentile /metrics' histogram gives, placed in its bucket by linear interpolation (the oracle the
    server's ExtendedStatistics are checked against): cumulative counts by `le` bound."""
    bounds = sorted((float(dict(found)["le"]), count) for (name, found), count in samples.items()
                    if name == "SuccessfulRequestLatency_bucket" and {(k, v) for k, v in labels.items()} <= found)
    total = bounds[-1][1]
    rank, lower, below = percentile / 100 * total, 0.0, 0.0
    for bound, running in bounds:
        if running >= rank and running > below:
            return lower + (bound - lower) * (rank - below) / (running - below)
        lower, below = bound, running
    raise AssertionError(bounds)


def test_latency_percentiles_agree_with_the_histogram(workers: ServerProcess) -> None:
    """ExtendedStatistics p50, p90 and p99 of SuccessfulRequestLatency (GetMetricStatistics, and a pNN Stat in
    GetMetricData) are the histogram's percentiles that GET /metrics serves, over requests served by both
    workers; a metric that keeps no latencies refuses them, as it refuses an extended statistic not of pNN's form
    and Statistics asked with ExtendedStatistics."""
    table = unique_name("pct")
    ddb = make_client(workers.endpoint)
    ddb.create_table(TableName=table, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST")
    for n in range(24):
        make_client(workers.endpoint).get_item(TableName=table, Key={"pk": {"S": f"k{n}"}})  # (either worker)
    cw = make_client(workers.endpoint, "cloudwatch")
    latency = {"Namespace": "AWS/DynamoDB", "MetricName": "SuccessfulRequestLatency",
               "Dimensions": [{"Name": "TableName", "Value": table}, {"Name": "Operation", "Value": "GetItem"}]}
    assert _eventually(lambda: _statistic(cw, "SuccessfulRequestLatency", "SampleCount", period=10800,
                                          TableName=table, Operation="GetItem"), 24.0) == 24.0
    samples = scrape(workers.endpoint)
    answer = cw.get_metric_statistics(**latency, Period=10800, ExtendedStatistics=["p50", "p90", "p99"], **_window())
    (point,) = answer["Datapoints"]
    expected = {name: _estimate(samples, float(name[1:]), TableName=table, Operation="GetItem")
                for name in ("p50", "p90", "p99")}
    assert point["ExtendedStatistics"] == pytest.approx(expected)
    assert point["Unit"] == "Milliseconds"
    assert 0 < expected["p50"] <= expected["p90"] <= expected["p99"]
    data = cw.get_metric_data(MetricDataQueries=[{"Id": "p", "MetricStat": {
        "Metric": latency, "Period": 10800, "Stat": "p90"}}], **_window())
    assert data["MetricDataResults"][0]["Values"] == [pytest.approx(expected["p90"])]
    units = {"Namespace": "AWS/DynamoDB", "MetricName": "ConsumedReadCapacityUnits", "Period": 60, **_window()}
    cases = [
        ({**units, "ExtendedStatistics": ["p99"]}, "InvalidParameterCombinationException",
         "This server keeps Sum of ConsumedReadCapacityUnits, not p99."),
        ({**latency, "Period": 60, **_window(), "ExtendedStatistics": ["tm99"]}, "InvalidParameterValueException",
         "The parameter ExtendedStatistics must be percentiles from p0.0 to p100."),
        ({**latency, "Period": 60, **_window(), "Statistics": ["Sum"], "ExtendedStatistics": ["p99"]},
         "InvalidParameterCombinationException",
         "The parameters Statistics and ExtendedStatistics are mutually exclusive."),
        ({**latency, "Period": 60, **_window(), "ExtendedStatistics": ["p101"]}, "InvalidParameterValueException",
         "The parameter ExtendedStatistics must be percentiles from p0.0 to p100."),
    ]
    for members, code, message in cases:
        with pytest.raises(ClientError) as excinfo:
            cw.get_metric_statistics(**members)
        assert (excinfo.value.response["Error"]["Code"], excinfo.value.response["Error"]["Message"]) == (
            code, message)


def test_metric_math_expressions(workers: ServerProcess) -> None:
    """GetMetricData's Expressions over the request's metrics: arithmetic between time series (on their common
    timestamps) and with scalars, SUM/AVG/MIN/MAX of one series (a scalar) and of METRICS() (a series), an array
    operated on member by member; what a metric's queries answered is the operands' values; malformed or
    unsupported expressions are refused."""
    table = unique_name("math")
    ddb = make_client(workers.endpoint)
    ddb.create_table(TableName=table, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST")
    for n in range(4):
        ddb.put_item(TableName=table, Item={"pk": {"S": f"k{n}"}, "data": {"S": "x" * 1500}})  # 2 WCU
        ddb.get_item(TableName=table, Key={"pk": {"S": f"k{n}"}})  # 0.5 RCU
    cw = make_client(workers.endpoint, "cloudwatch")
    assert _eventually(lambda: _statistic(cw, "ConsumedReadCapacityUnits", "Sum", TableName=table), 2.0) == 2.0
    assert _eventually(lambda: _statistic(cw, "ConsumedWriteCapacityUnits", "Sum", TableName=table), 8.0) == 8.0

    def metric(name: str) -> dict[str, Any]:
        return {"Metric": {"Namespace": "AWS/DynamoDB", "MetricName": name,
                           "Dimensions": [{"Name": "TableName", "Value": table}]}, "Period": 60, "Stat": "Sum"}

    expressions = {"sum": "m1 + m2", "twice": "SUM(m1) * 2", "ratio": "(m1 - m2) / m2", "top": "MAX(METRICS())",
                   "all": "SUM(METRICS())", "mean": "AVG(m1)", "scaled": "METRICS() * 10", "power": "-m2 ^ 2 + 1"}
    queries = [{"Id": "m1", "MetricStat": metric("ConsumedWriteCapacityUnits")},
               {"Id": "m2", "MetricStat": metric("ConsumedReadCapacityUnits"), "Label": "reads"}]
    queries += [{"Id": name, "Expression": text} for name, text in expressions.items()]
    answer = cw.get_metric_data(MetricDataQueries=queries, ScanBy="TimestampAscending", **_window())
    results: dict[str, list[dict[str, float]]] = {}
    for result in answer["MetricDataResults"]:
        results.setdefault(result["Id"], []).append(dict(zip(result["Timestamps"], result["Values"], strict=True)))
    (m1,), (m2,) = results["m1"], results["m2"]
    assert (sum(m1.values()), sum(m2.values())) == (8.0, 2.0)
    both, union = [at for at in m1 if at in m2], sorted(set(m1) | set(m2))
    assert results["sum"] == [{at: m1[at] + m2[at] for at in both}]
    assert results["twice"] == [{at: 16.0 for at in union}]  # (a scalar, on the request's timestamps)
    assert results["ratio"] == [{at: (m1[at] - m2[at]) / m2[at] for at in both}]
    assert results["top"] == [{at: max(v for v in (m1.get(at), m2.get(at)) if v is not None) for at in union}]
    assert results["all"] == [{at: m1.get(at, 0.0) + m2.get(at, 0.0) for at in union}]
    assert results["mean"] == [{at: pytest.approx(8.0 / len(m1)) for at in union}]
    assert results["scaled"] == [{at: v * 10 for at, v in m1.items()}, {at: v * 10 for at, v in m2.items()}]
    assert results["power"] == [{at: -(v ** 2) + 1 for at, v in m2.items()}]
    labels = [result["Label"] for result in answer["MetricDataResults"] if result["Id"] == "scaled"]
    assert labels == ["scaled ConsumedWriteCapacityUnits", "scaled reads"]
    refused = {"m1 +": "Error in expression bad: Unexpected token 'at the end'",
               "FOO(m1)": "Error in expression bad: This server evaluates no function FOO",
               "bad * 2": "Error in expression bad: The expression bad refers to itself",
               "m9": "Error in expression bad: Unrecognized id m9"}
    for text, message in refused.items():
        with pytest.raises(ClientError) as excinfo:
            cw.get_metric_data(MetricDataQueries=[queries[0], {"Id": "bad", "Expression": text}], **_window())
        assert excinfo.value.response["Error"]["Code"] == "InvalidParameterValueException"
        assert excinfo.value.response["Error"]["Message"] == message
