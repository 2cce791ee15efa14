#!/usr/bin/env python3
"""PartiQL against the native operations it stands for (issue 24): server CPU per request of

    get-item        GetItem of one item                  vs  select-key        SELECT * FROM "t" WHERE pk=? AND sk=?
    query           Query of one 10-item partition        vs  select-partition  SELECT * FROM "t" WHERE pk=?

    python benchmarks/partiql.py                          # 3 rounds x 5 s, 16 connections
    python benchmarks/partiql.py --rounds 5 --duration 10

One OpenDDB server (the current tree, --workers 1) on a fresh temporary data dir; a table of 1,000 ~200-byte items
in 100 partitions of 10. Each round runs the four workloads in a rotating order, so each pair sees the same noise
of a shared machine; figures are medians over rounds, the ratio is PartiQL's CPU per request over the native one's.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from typing import Any

import orjson
from ddbclient import Connection, Endpoint, fast_loop, processes_cpu_seconds, start_server, url_of

TABLE = "partiql-bench"
PARTITIONS, PER_PARTITION = 100, 10
PAD = "x" * 150


def _workloads(rng: random.Random) -> dict[str, tuple[str, Any]]:
    def key() -> tuple[str, str]:
        return f"p{rng.randrange(PARTITIONS)}", str(rng.randrange(PER_PARTITION))

    def get_item() -> bytes:
        pk, sk = key()
        return orjson.dumps({"TableName": TABLE, "Key": {"pk": {"S": pk}, "sk": {"S": sk}}})

    def select_key() -> bytes:
        pk, sk = key()
        return orjson.dumps({"Statement": f'SELECT * FROM "{TABLE}" WHERE pk=? AND sk=?',
                             "Parameters": [{"S": pk}, {"S": sk}]})

    def query() -> bytes:
        return orjson.dumps({"TableName": TABLE, "KeyConditionExpression": "pk = :p",
                             "ExpressionAttributeValues": {":p": {"S": key()[0]}}})

    def select_partition() -> bytes:
        return orjson.dumps({"Statement": f'SELECT * FROM "{TABLE}" WHERE pk=?', "Parameters": [{"S": key()[0]}]})

    return {"get-item": ("GetItem", get_item), "select-key": ("ExecuteStatement", select_key),
            "query": ("Query", query), "select-partition": ("ExecuteStatement", select_partition)}


async def _load(endpoint: Endpoint) -> None:
    connection = Connection(endpoint)
    await connection.json("CreateTable", {
        "TableName": TABLE, "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                                 {"AttributeName": "sk", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]})
    items = [{"pk": {"S": f"p{p}"}, "sk": {"S": str(s)}, "pad": {"S": PAD}}
             for p in range(PARTITIONS) for s in range(PER_PARTITION)]
    for start in range(0, len(items), 25):
        await connection.json("BatchWriteItem", {"RequestItems": {TABLE: [
            {"PutRequest": {"Item": item}} for item in items[start:start + 25]]}})
    connection.close()


async def _drive(endpoint: Endpoint, operation: str, make: Any, connections: int, duration: float,
                 server_pid: int) -> tuple[float, float]:
    """(requests per second, server CPU µs per request) of one workload."""
    answered = [0]
    stop = time.perf_counter() + duration

    async def worker() -> None:
        connection = Connection(endpoint)
        try:
            while time.perf_counter() < stop:
                status, body = await connection.call(operation, make())
                if status != 200:
                    raise RuntimeError(body[:200].decode())
                answered[0] += 1
        finally:
            connection.close()

    def server_cpu() -> float:
        return processes_cpu_seconds(lambda pid, fields: pid == server_pid or int(fields[1]) == server_pid)

    cpu, start = server_cpu(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    elapsed = time.perf_counter() - start
    return answered[0] / elapsed, 1e6 * (server_cpu() - cpu) / max(1, answered[0])


async def _rounds(endpoint: Endpoint, args: argparse.Namespace, server_pid: int) -> dict[str, list[float]]:
    workloads = _workloads(random.Random(7))
    names = list(workloads)
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(args.rounds):
        order = names[round_ % len(names):] + names[:round_ % len(names)]
        for name in order:
            operation, make = workloads[name]
            await _drive(endpoint, operation, make, args.connections, 1.0, server_pid)  # warm-up
            rate, us = await _drive(endpoint, operation, make, args.connections, args.duration, server_pid)
            cpu[name].append(us)
            print(f"round {round_ + 1}  {name:<17} {rate:9,.0f} req/s  server {us:6.1f} µs CPU/request", flush=True)
    return cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args(argv)
    fast_loop()
    with tempfile.TemporaryDirectory() as data_root:
        server = start_server("openddb", data_root, workers="1")
        try:
            endpoint = Endpoint(url_of(server), sign=False)
            asyncio.run(_load(endpoint))
            assert server.process is not None
            cpu = asyncio.run(_rounds(endpoint, args, server.process.pid))
        finally:
            server.stop()
    print("\n| PartiQL | µs CPU/request | native | µs CPU/request | PartiQL / native |")
    print("| --- | --- | --- | --- | --- |")
    for partiql, native in (("select-key", "get-item"), ("select-partition", "query")):
        a, b = statistics.median(cpu[partiql]), statistics.median(cpu[native])
        print(f"| {partiql} | {a:.1f} | {native} | {b:.1f} | {a / b:.2f}x |")
    print(f"\nMedians over {args.rounds} rounds of {args.duration:g} s, {args.connections} connections.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
