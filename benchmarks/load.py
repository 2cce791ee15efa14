"""The project's load generator: DynamoDB workloads over keep-alive connections, measured per request.

Each workload runs `connections` coroutines for `duration` seconds (after `warmup` unmeasured), each with one
request in flight on its own connection (ddbclient.Connection, SigV4 signed), and reports successful requests
per second, errors, and p50/p99 latency. The workloads:

| workload | each request | prepared |
| --- | --- | --- |
| put | PutItem of a ~200-byte item, key uniform over 100,000 | - |
| get | GetItem of an existing key (a 200 without Item counts as an error) | 10,000 items |
| update | UpdateItem `SET c = c + :one` on an existing key | 10,000 items |
| query | Query of one partition of 10 items | 100 partitions |
| batchwrite | BatchWriteItem of 25 distinct puts (UnprocessedItems count as errors) | - |
| scan | a Scan page of 100 items, each connection following its LastEvaluatedKey | 10,000 items |
| mixed | 50% get, 40% put, 10% query | as get and query |
| ping | ListTables with Limit 1 (the trivial request, for the ceiling server) | - |
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from ddbclient import Connection, DynamoError, Endpoint, percentile_ms, recreate_table

WORKLOADS = ("put", "get", "update", "query", "batchwrite", "scan", "mixed", "ping")
TABLE, SCAN_TABLE = "bench", "bench-scan"
KEYSPACE, PRELOAD, PARTITIONS, PARTITION_ITEMS = 100_000, 10_000, 100, 10
PAD = "x" * 150  # with the keys and the counter: a ~200-byte item


@dataclass
class Result:
    workload: str
    ops_per_s: float
    errors: int
    p50_ms: float
    p99_ms: float


def _item(pk: str, sk: str = "0") -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}, "c": {"N": "0"}, "pad": {"S": PAD}}


async def _write_all(endpoint: Endpoint, table: str, items: list[dict[str, Any]]) -> None:
    connection = Connection(endpoint)
    try:
        for start in range(0, len(items), 25):
            batch = [{"PutRequest": {"Item": item}} for item in items[start:start + 25]]
            request: dict[str, Any] = {"RequestItems": {table: batch}}
            while request["RequestItems"]:
                request = {"RequestItems": (await connection.json("BatchWriteItem", request)).get(
                    "UnprocessedItems", {})}
    finally:
        connection.close()


async def prepare(url: str, workloads: list[str]) -> None:
    """Create the tables the workloads read and load their items (in 8 writers)."""
    endpoint = Endpoint(url)
    setup = Connection(endpoint)
    try:
        await recreate_table(setup, TABLE)
        if "scan" in workloads:
            await recreate_table(setup, SCAN_TABLE)
    finally:
        setup.close()
    items = [_item(f"k{i}") for i in range(PRELOAD)]
    items += [_item(f"q{p}", str(s)) for p in range(PARTITIONS) for s in range(PARTITION_ITEMS)]
    parts = [items[i::8] for i in range(8)]
    await asyncio.gather(*(_write_all(endpoint, TABLE, part) for part in parts))
    if "scan" in workloads:
        await asyncio.gather(*(_write_all(endpoint, SCAN_TABLE, part[:PRELOAD // 8]) for part in parts))


Request = tuple[str, bytes, Callable[[dict[str, Any]], bool]]  # operation, body, is the answer a success


def _ok(answer: dict[str, Any]) -> bool:
    return True


def _requests(workload: str, rng: random.Random) -> Callable[[], Request]:
    """What one coroutine sends next, for a workload (mixed draws among get, put and query)."""
    def put() -> Request:
        body = {"TableName": TABLE, "Item": {**_item(f"p{rng.randrange(KEYSPACE)}"), "c": {"N": str(rng.random())}}}
        return "PutItem", orjson.dumps(body), _ok

    def get() -> Request:
        key = {"pk": {"S": f"k{rng.randrange(PRELOAD)}"}, "sk": {"S": "0"}}
        return "GetItem", orjson.dumps({"TableName": TABLE, "Key": key}), lambda answer: "Item" in answer

    def update() -> Request:
        key = {"pk": {"S": f"k{rng.randrange(PRELOAD)}"}, "sk": {"S": "0"}}
        return "UpdateItem", orjson.dumps({"TableName": TABLE, "Key": key, "UpdateExpression": "SET c = c + :one",
                                           "ExpressionAttributeValues": {":one": {"N": "1"}}}), _ok

    def query() -> Request:
        body = {"TableName": TABLE, "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": {"S": f"q{rng.randrange(PARTITIONS)}"}}}
        return "Query", orjson.dumps(body), lambda answer: len(answer.get("Items", ())) == PARTITION_ITEMS

    def batchwrite() -> Request:
        keys = rng.sample(range(KEYSPACE), 25)
        batch = [{"PutRequest": {"Item": _item(f"b{k}")}} for k in keys]
        return "BatchWriteItem", orjson.dumps({"RequestItems": {TABLE: batch}}), \
            lambda answer: not answer.get("UnprocessedItems")

    def mixed() -> Request:
        draw = rng.random()
        return get() if draw < 0.5 else put() if draw < 0.9 else query()

    def ping() -> Request:
        return "ListTables", b'{"Limit":1}', _ok

    makers = {"put": put, "get": get, "update": update, "query": query, "batchwrite": batchwrite, "mixed": mixed,
              "ping": ping}
    return makers[workload]


async def _worker(endpoint: Endpoint, workload: str, seed: int, start: float, stop: float,
                  latencies: list[float]) -> int:
    """One connection's loop; returns its errors (latencies of successes measured after `start`)."""
    connection = Connection(endpoint)
    rng = random.Random(seed)
    errors = 0
    scan: dict[str, Any] = {"TableName": SCAN_TABLE, "Limit": 100}
    make = None if workload == "scan" else _requests(workload, rng)
    try:
        while (sent := time.perf_counter()) < stop:
            request: Request = ("Scan", orjson.dumps(scan), _ok) if make is None else make()
            operation, body, check = request
            try:
                status, data = await connection.call(operation, body)
                answer = orjson.loads(data) if status == 200 and data else {}
                good = status == 200 and check(answer)
            except (ConnectionError, DynamoError, orjson.JSONDecodeError):
                good, answer = False, {}
            if make is None:  # the next page, or the table again from its start
                scan.pop("ExclusiveStartKey", None)
                if "LastEvaluatedKey" in answer:
                    scan["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
            if sent >= start:
                if good:
                    latencies.append(time.perf_counter() - sent)
                else:
                    errors += 1
    finally:
        connection.close()
    return errors


async def drive(url: str, workload: str, connections: int, duration: float, warmup: float = 1.0) -> Result:
    """Run one workload against `url` (prepared by `prepare`) and measure it."""
    endpoint = Endpoint(url)
    start = time.perf_counter() + warmup
    stop = start + duration
    latencies: list[float] = []
    errors = await asyncio.gather(*(_worker(endpoint, workload, seed, start, stop, latencies)
                                    for seed in range(connections)))
    return Result(workload, len(latencies) / duration, sum(errors), percentile_ms(latencies, 0.5),
                  percentile_ms(latencies, 0.99))
