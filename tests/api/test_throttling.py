"""`--throttling on`: provisioned throughput with burst capacity, partition limits (a hot key throttled where the
same rate spread over the partitions is not), a GSI short of write capacity throttling its table's writes, and
on-demand maximums, each refused with DynamoDB's error and ThrottlingReasons; off by default."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from openddb.model.keys import encode_key, partition_hash
from tests.api.test_metrics import scrape, value
from tests.conftest import ServerProcess, one_try_client, unique_name

_ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/"


def _table(ddb: Any, name: str, read: int, write: int, **more: Any) -> None:
    capacity = {"ProvisionedThroughput": {"ReadCapacityUnits": read, "WriteCapacityUnits": write}} if read else {
        "BillingMode": "PAY_PER_REQUEST"}
    ddb.create_table(TableName=name, AttributeDefinitions=more.pop("definitions", [
        {"AttributeName": "pk", "AttributeType": "S"}]), KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        **capacity, **more)


def _puts(ddb: Any, table: str, keys: list[str], size: int = 900) -> tuple[int, list[ClientError]]:
    """Put an item under each key, as fast as one client goes: (how many succeeded, the refusals)."""
    done, refused = 0, []
    for key in keys:
        try:
            ddb.put_item(TableName=table, Item={"pk": {"S": key}, "data": {"S": "x" * size}})
            done += 1
        except ClientError as error:
            refused.append(error)
    return done, refused


def test_provisioned_write_capacity_throttles_and_burst_lets_a_spike_through(throttled: ServerProcess) -> None:
    """A 5 WCU table left unused for 3 s keeps those 15 units as burst: a 15 WCU write and a 1 WCU write pass at
    once (with one second's capacity alone the second would be refused), and the next 60 WCU leave it in debt,
    so the following write is throttled with DynamoDB's error. Item sizes, not request rates, drive it, so a slow
    machine does not change the outcome."""
    ddb = one_try_client(throttled)
    table = unique_name("burst")
    _table(ddb, table, 5, 5)
    time.sleep(3)
    big = 15 * 1024 - 100  # 15 WCU
    assert _puts(ddb, table, ["a"], big) == (1, [])
    assert _puts(ddb, table, ["b"]) == (1, []), "the burst kept no unused capacity"
    assert _puts(ddb, table, ["c"], 4 * big) == (1, [])  # 60 WCU
    done, refused = _puts(ddb, table, ["d"])  # (about 56 units in debt: eleven seconds to pay off, time enough)
    assert done == 0 and len(refused) == 1
    error = refused[0].response
    assert error["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert error["Error"]["Message"] == ("The level of configured provisioned throughput for the table was exceeded. "
                                         "Consider increasing your provisioning level with the UpdateTable API.")
    assert error["ThrottlingReasons"] == [{"reason": "TableWriteProvisionedThroughputExceeded",
                                           "resource": _ARN + table}]
    # A throttled put changed nothing.
    assert ddb.get_item(TableName=table, Key={"pk": {"S": "d"}}, ConsistentRead=True).get("Item") is None
    samples = scrape(throttled.endpoint)  # (one process: every throttle is counted at once)
    assert value(samples, "ThrottledRequests", TableName=table, Operation="PutItem") == 1
    assert value(samples, "WriteThrottleEvents", TableName=table) == 1
    assert value(samples, "ConsumedWriteCapacityUnits", TableName=table) == 76


def test_a_hot_key_is_throttled_and_the_same_rate_spread_is_not(throttled: ServerProcess) -> None:
    """A 3,000 WCU table has three partitions of 1,000 WCU a second: 2,340 WCU at once on one key is throttled
    (TableWriteKeyRangeThroughputExceeded), the same spread two keys a partition is not."""
    ddb = one_try_client(throttled)
    hot, even = unique_name("hot"), unique_name("even")
    _table(ddb, hot, 10, 3000)
    _table(ddb, even, 10, 3000)
    big = 390 * 1024 - 100  # 390 WCU an item: six are 2,340 WCU
    try:
        _hot_and_even(ddb, hot, even, big)
    finally:  # (their 6,000 write units would count against the account's quota other tests meet on a shared store)
        ddb.delete_table(TableName=hot)
        ddb.delete_table(TableName=even)


def _hot_and_even(ddb: Any, hot: str, even: str, big: int) -> None:
    done, refused = _puts(ddb, hot, ["same"] * 6, big)
    assert done < 6 and refused
    assert refused[0].response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert refused[0].response["ThrottlingReasons"] == [{"reason": "TableWriteKeyRangeThroughputExceeded",
                                                         "resource": _ARN + hot}]
    by_partition: dict[int, list[str]] = {0: [], 1: [], 2: []}
    candidate = 0
    while any(len(keys) < 2 for keys in by_partition.values()):
        key = f"key{candidate}"
        candidate += 1
        slot = partition_hash(encode_key({"S": key})) * 3 >> 32  # (the partitions split the hash space evenly)
        if len(by_partition[slot]) < 2:
            by_partition[slot].append(key)
    keys = [key for position in range(2) for keys in by_partition.values() for key in keys[position:position + 1]]
    done, refused = _puts(ddb, even, keys, big)
    assert (done, refused) == (6, [])


def test_a_gsi_short_of_write_capacity_throttles_its_tables_writes(throttled: ServerProcess) -> None:
    ddb = one_try_client(throttled)
    table = unique_name("gsi")
    _table(ddb, table, 100, 100, definitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                              {"AttributeName": "g", "AttributeType": "S"}],
           GlobalSecondaryIndexes=[{"IndexName": "byG", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                    "Projection": {"ProjectionType": "ALL"},
                                    "ProvisionedThroughput": {"ReadCapacityUnits": 1, "WriteCapacityUnits": 1}}])
    refused = []
    for n in range(3):  # (20 KB items: 20 write units of the index each, which holds one a second)
        try:
            ddb.put_item(TableName=table, Item={"pk": {"S": f"k{n}"}, "g": {"S": "x"}, "data": {"S": "x" * 20000}})
        except ClientError as error:
            refused.append(error.response)
    assert refused, "the GSI's one write unit a second never throttled the table's writes"
    assert refused[0]["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert refused[0]["ThrottlingReasons"] == [{"reason": "IndexWriteProvisionedThroughputExceeded",
                                                "resource": _ARN + table + "/index/byG"}]


def test_on_demand_maximum_holds(throttled: ServerProcess) -> None:
    ddb = one_try_client(throttled)
    table = unique_name("maxod")
    _table(ddb, table, 0, 0, OnDemandThroughput={"MaxReadRequestUnits": 4, "MaxWriteRequestUnits": 3})
    done, refused = _puts(ddb, table, [f"k{n}" for n in range(6)])
    assert 3 <= done < 6 and refused
    error = refused[0].response
    assert error["Error"]["Code"] == "ThrottlingException"
    assert error["throttlingReasons"] == [{"reason": "TableWriteMaxOnDemandThroughputExceeded",
                                           "resource": _ARN + table}]
    reads = refusals = 0
    for _ in range(8):
        try:
            ddb.get_item(TableName=table, Key={"pk": {"S": "k0"}}, ConsistentRead=True)
            reads += 1
        except ClientError as refusal:
            assert refusal.response["throttlingReasons"][0]["reason"] == "TableReadMaxOnDemandThroughputExceeded"
            refusals += 1
    assert 4 <= reads < 8 and refusals


def test_nothing_is_throttled_by_default(server: ServerProcess) -> None:
    ddb = one_try_client(server)
    table = unique_name("unthrottled")
    _table(ddb, table, 1, 1)
    assert _puts(ddb, table, [f"k{n}" for n in range(10)]) == (10, [])


def test_workers_share_a_tables_buckets(tmp_path: Path) -> None:
    """With --workers 2 a table is throttled at its own rate, not at that rate per worker: a 300 WCU item leaves a
    5 WCU table a minute in debt, and every write after it is refused whichever worker serves it (each connection
    goes to either; the request id's prefix tells which). With buckets per worker, the other one admitted writes."""
    process = ServerProcess(str(tmp_path), "--throttling", "on", "--workers", "2")
    try:
        ddb = one_try_client(process)
        table = unique_name("shared")
        _table(ddb, table, 5, 5)
        assert _puts(ddb, table, ["big"], 300 * 1024 - 100) == (1, [])
        workers: set[str] = set()
        for attempt in range(40):  # (a new client is a new connection, which the kernel gives to either worker)
            done, refused = _puts(one_try_client(process), table, [f"k{attempt}"])
            assert done == 0, "a worker admitted a write to a table in debt"
            assert refused[0].response["ThrottlingReasons"][0]["reason"] == "TableWriteProvisionedThroughputExceeded"
            workers.add(refused[0].response["ResponseMetadata"]["RequestId"][:36])
            if len(workers) == 2 and attempt >= 5:
                break
        assert len(workers) == 2, "every connection went to one worker"
    finally:
        process.finish()


@pytest.mark.skipif(not os.environ.get("OPENDDB_TEST_POSTGRES"), reason="set OPENDDB_TEST_POSTGRES to a "
                    "postgresql:// URL")
def test_postgresql_nodes_tell_each_other_their_draws() -> None:
    """Two nodes on one PostgreSQL: a 300 WCU item written through one leaves the 5 WCU table a minute in debt on the
    other too, once the nodes have exchanged their draws (about a second each way, later on a busy machine). The
    other node is sent a 1 WCU write every half second until one is refused: on its own buckets (a 5 WCU table
    that starts with a second's capacity) it would admit them all."""
    url = str(os.environ["OPENDDB_TEST_POSTGRES"])
    one, two = (ServerProcess(None, "--engine", url, "--throttling", "on", "--workers", "1") for _ in range(2))
    try:
        table = unique_name("nodes")
        _table(one_try_client(one), table, 5, 5)
        assert _puts(one_try_client(one), table, ["big"], 300 * 1024 - 100) == (1, [])
        client, refused = one_try_client(two), []
        deadline = time.monotonic() + 20
        while not refused and time.monotonic() < deadline:
            time.sleep(0.5)
            refused = _puts(client, table, ["small"])[1]
        assert refused, f"the other node never felt the first one's draws: {one.output()} {two.output()}"
        assert refused[0].response["ThrottlingReasons"][0]["reason"] == "TableWriteProvisionedThroughputExceeded"
        one_try_client(one).delete_table(TableName=table)
    finally:
        for process in (one, two):
            process.finish()
