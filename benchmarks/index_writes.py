#!/usr/bin/env python3
"""PutItem throughput on a table with 0, 1 and 5 global secondary indexes, side by side in one run.

    python benchmarks/index_writes.py                          # own OpenDDB, 3 rounds x 8 s, 32 connections
    python benchmarks/index_writes.py --endpoint http://127.0.0.1:8000 --gsis 0,1,5 -d 5

Each table has `pk`/`sk` and one GSI per `g<i>pk`/`g<i>sk` attribute pair (projection ALL); every item carries
all index key attributes (~200 bytes of payload), so every put maintains every index. Rounds rotate the order of
the tables. Prints puts/s and p50/p99 per table (median of rounds) and the cost relative to no index.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
from typing import Any

import orjson
from ddbclient import Connection, DynamoError, Endpoint, fast_loop, median, now, percentile_ms, start_server, url_of


def table_request(name: str, gsis: int) -> dict[str, Any]:
    attributes = ["pk", "sk"] + [f"g{i}{part}" for i in range(gsis) for part in ("pk", "sk")]
    request: dict[str, Any] = {
        "TableName": name, "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": a, "AttributeType": "S"} for a in attributes],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]}
    if gsis:
        request["GlobalSecondaryIndexes"] = [
            {"IndexName": f"gsi{i}", "Projection": {"ProjectionType": "ALL"},
             "KeySchema": [{"AttributeName": f"g{i}pk", "KeyType": "HASH"},
                           {"AttributeName": f"g{i}sk", "KeyType": "RANGE"}]} for i in range(gsis)]
    return request


async def recreate(conn: Connection, name: str, gsis: int) -> None:
    try:
        await conn.json("DeleteTable", {"TableName": name})
    except DynamoError as error:
        if error.error_type != "ResourceNotFoundException":
            raise
    await conn.json("CreateTable", table_request(name, gsis))


def put_body(name: str, gsis: int, rng: random.Random) -> bytes:
    key = rng.randrange(1_000_000)
    item: dict[str, Any] = {"pk": {"S": f"p{key}"}, "sk": {"S": "0"}, "payload": {"S": "x" * 200}}
    for i in range(gsis):
        item[f"g{i}pk"] = {"S": f"g{key % 1000}"}
        item[f"g{i}sk"] = {"S": f"{key}"}
    return orjson.dumps({"TableName": name, "Item": item})


async def drive(endpoint: Endpoint, name: str, gsis: int, connections: int, seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    errors = 0
    stop_at = now() + seconds

    async def worker(seed: int) -> None:
        nonlocal errors
        conn = Connection(endpoint)
        rng = random.Random(seed)
        try:
            while now() < stop_at:
                body = put_body(name, gsis, rng)
                started = now()
                status, _ = await conn.call("PutItem", body)
                if status == 200:
                    latencies.append(now() - started)
                else:
                    errors += 1
        finally:
            conn.close()

    started = now()
    await asyncio.gather(*(worker(seed) for seed in range(connections)))
    elapsed = now() - started
    return {"ops": len(latencies) / elapsed, "p50": percentile_ms(latencies, 0.5),
            "p99": percentile_ms(latencies, 0.99), "errors": errors}


async def run(args: argparse.Namespace, url: str) -> None:
    endpoint = Endpoint(url)
    counts = [int(c) for c in args.gsis.split(",")]
    setup = Connection(endpoint)
    for gsis in counts:
        await recreate(setup, f"gsi-bench-{gsis}", gsis)
    setup.close()
    results: dict[int, list[dict[str, float]]] = {gsis: [] for gsis in counts}
    for round_index in range(args.rounds):
        order = counts[round_index % len(counts):] + counts[:round_index % len(counts)]
        for gsis in order:
            result = await drive(endpoint, f"gsi-bench-{gsis}", gsis, args.connections, args.duration)
            results[gsis].append(result)
            print(f"round {round_index + 1} gsis={gsis}: {result['ops']:.0f} puts/s p50 {result['p50']:.1f} ms "
                  f"p99 {result['p99']:.1f} ms errors {result['errors']:.0f}", flush=True)
    base = median([r["ops"] for r in results[counts[0]]])
    print(f"\n{'GSIs':>5} {'puts/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'vs ' + str(counts[0]):>8}")
    for gsis in counts:
        ops = median([r["ops"] for r in results[gsis]])
        print(f"{gsis:>5} {ops:>10.0f} {median([r['p50'] for r in results[gsis]]):>8.1f} "
              f"{median([r['p99'] for r in results[gsis]]):>8.1f} {ops / base:>8.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", help="a running server; default: start OpenDDB on a temporary data dir")
    parser.add_argument("--workers", default=None, help="OpenDDB --workers when the program starts it")
    parser.add_argument("--gsis", default="0,1,5", help="comma list of index counts")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-d", "--duration", type=float, default=8)
    parser.add_argument("-c", "--connections", type=int, default=32)
    args = parser.parse_args()
    fast_loop()
    if args.endpoint:
        asyncio.run(run(args, args.endpoint))
        return 0
    with tempfile.TemporaryDirectory() as data_root:
        server = start_server("openddb", data_root, args.workers)
        try:
            asyncio.run(run(args, url_of(server)))
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
