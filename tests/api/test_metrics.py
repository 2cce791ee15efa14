"""GET /metrics: CloudWatch's DynamoDB metrics in Prometheus' text format, counted from the requests actually
served, summed across `--workers`."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest
from botocore.exceptions import ClientError

from tests.conftest import ServerProcess, make_client, one_try_client, unique_name

_SAMPLE = re.compile(r'^(\w+)(?:\{(.*)\})? (\S+)$')


def scrape(endpoint: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The page's samples, by name and label set."""
    with urllib.request.urlopen(endpoint + "/metrics", timeout=10) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = answer.read().decode()
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        assert match is not None, line
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
        samples[(match.group(1), labels)] = float(match.group(3))
    return samples


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def _provisioned_table(ddb, name: str, read: int = 7, write: int = 3) -> None:  # type: ignore[no-untyped-def]
    ddb.create_table(TableName=name, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     ProvisionedThroughput={"ReadCapacityUnits": read, "WriteCapacityUnits": write})


def test_metrics_count_one_process_requests() -> None:
    """Units, returned items, condition failures, user errors and latency follow what was sent (one process: a
    scrape right after the requests counts them all)."""
    server = ServerProcess(None, "--workers", "1")  # (one also on --engine, where --workers defaults to the cores)
    try:
        _count_one_process_requests(server)
    finally:
        server.finish()


def _count_one_process_requests(server: ServerProcess) -> None:
    ddb = make_client(server.endpoint)
    table = unique_name("metrics")
    _provisioned_table(ddb, table)
    before = scrape(server.endpoint)
    for n in range(5):
        ddb.put_item(TableName=table, Item={"pk": {"S": f"k{n}"}, "data": {"S": "x" * 1500}})  # 2 WCU each
    ddb.get_item(TableName=table, Key={"pk": {"S": "k0"}})  # 0.5 RCU
    ddb.get_item(TableName=table, Key={"pk": {"S": "k0"}}, ConsistentRead=True)  # 1 RCU
    scanned = ddb.scan(TableName=table, ReturnConsumedCapacity="TOTAL")
    with pytest.raises(ClientError):
        ddb.put_item(TableName=table, Item={"pk": {"S": "k0"}}, ConditionExpression="attribute_not_exists(pk)")
    with pytest.raises(ClientError):
        ddb.get_item(TableName=table, Key={"nope": {"S": "k0"}})
    after = scrape(server.endpoint)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("ConsumedWriteCapacityUnits", TableName=table) == 10
    assert scanned["ConsumedCapacity"]["CapacityUnits"] == 1.0  # (5 items of 1.5 KB: 2 blocks of 4 KB, eventual)
    assert grew("ConsumedReadCapacityUnits", TableName=table) == 1.5 + 1.0
    assert grew("ReturnedItemCount", TableName=table, Operation="Scan") == 5
    assert grew("ConditionalCheckFailedRequests", TableName=table) == 1
    assert grew("UserErrors") >= 1
    assert grew("SuccessfulRequestLatency_count", TableName=table, Operation="PutItem") == 5
    assert value(after, "SuccessfulRequestLatency_bucket", TableName=table, Operation="PutItem", le="+Inf") == 5
    assert value(after, "ProvisionedReadCapacityUnits", TableName=table) == 7
    assert value(after, "ProvisionedWriteCapacityUnits", TableName=table) == 3
    assert value(after, "process_cpu_seconds_total") > 0 and value(after, "openddb_workers") == 1


def test_two_workers_requests_are_summed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Every scrape, whichever worker answers it, counts the requests both workers served."""
    server = ServerProcess(str(tmp_path / "data"), "--workers", "2")
    try:
        table = unique_name("metrics2")
        _provisioned_table(make_client(server.endpoint), table, 50, 50)
        workers = set()
        for n in range(40):  # a client (a connection) each: the kernel spreads them over the workers
            answer = make_client(server.endpoint).put_item(TableName=table, Item={"pk": {"S": f"k{n}"}})
            workers.add(answer["ResponseMetadata"]["RequestId"][:36])  # (a per-process prefix: server/http.py)
        assert len(workers) == 2, "all 40 connections went to one worker"
        deadline = time.monotonic() + 10
        while True:
            samples = scrape(server.endpoint)
            counted = value(samples, "SuccessfulRequestLatency_count", TableName=table, Operation="PutItem")
            if counted == 40 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert counted == 40
        assert value(samples, "ConsumedWriteCapacityUnits", TableName=table) == 40
        assert value(samples, "openddb_workers") == 2
        # A worker shares its counts at most 0.2 s after they change: the one that answered above may not have
        # written its latest yet, for the other to read.
        time.sleep(0.5)
        for _ in range(6):  # (fresh connections: both workers answer some scrapes, each with the whole sum)
            assert value(scrape(server.endpoint), "ConsumedWriteCapacityUnits", TableName=table) == 40
    finally:
        server.finish()


def test_injected_throttles_are_counted() -> None:
    """A throttle injected by --inject-errors counts as DynamoDB's would: ThrottledRequests by operation and
    Read/WriteThrottleEvents by table, from its ThrottlingReasons."""
    table = unique_name("injected")
    server = ServerProcess(None, "--inject-errors", f"1:throttle@{table}", "--workers", "1")
    try:
        ddb = one_try_client(server)  # (an SDK retries a throttle: one try each here)
        _provisioned_table(ddb, table)
        for operation in (lambda: ddb.put_item(TableName=table, Item={"pk": {"S": "a"}}),
                          lambda: ddb.get_item(TableName=table, Key={"pk": {"S": "a"}})):
            with pytest.raises(ClientError):
                operation()
        samples = scrape(server.endpoint)
        assert value(samples, "ThrottledRequests", TableName=table, Operation="PutItem") == 1
        assert value(samples, "ThrottledRequests", TableName=table, Operation="GetItem") == 1
        assert value(samples, "WriteThrottleEvents", TableName=table) == 1
        assert value(samples, "ReadThrottleEvents", TableName=table) == 1
    finally:
        server.finish()
