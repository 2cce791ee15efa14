#!/usr/bin/env python3
"""Vector search benchmark (issue 31): SearchVectors latency over one large search partition, and what a vector
index costs PutItem, side by side in one run.

    python benchmarks/vectors.py                                # 100,000 vectors of 256 dims, TopK 10
    python benchmarks/vectors.py --vectors 20000 --searches 100 -d 3 --rounds 1     # a quick check
    python benchmarks/vectors.py --endpoint http://127.0.0.1:8000
    python benchmarks/vectors.py --endpoint http://127.0.0.1:8000 --reuse --rounds 0   # the searches again, on the
                                                                # table an earlier run loaded (another build, say)

Starts OpenDDB on a temporary data dir (or uses `--endpoint`), creates a table with one COSINE vector index of
`--dims` dimensions and no search schema (so every item is in one search partition), loads `--vectors` random
vectors with BatchWriteItem, then:

- search: the first search (which loads the partition's matrix into the server process) timed alone, then
  `--searches` SearchVectors of TopK `--top-k` with random search vectors, one at a time on one connection:
  p50 and p99 latency. Then `--after-put` times: one PutItem of a new item to the searched partition (through
  another connection), then one search timed alone: what a search pays to take in a change its cached matrix
  lacks (before change sequences, a reload of the whole partition).
Server CPU per search and per put is reported beside (for a server this program starts): on a shared machine it
holds where rates and latencies do not.

- put: PutItem throughput from `--connections` connections for `--duration` s on two tables whose items are the
  same (a `--dims` vector attribute and ~200 bytes), one with a vector index on the attribute and one without,
  the order rotating over `--rounds` rounds; medians of rounds.

Runs from a clone alone, on the repository's client (ddbclient.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
from typing import Any

import orjson
from ddbclient import (
    Connection,
    DynamoError,
    Endpoint,
    fast_loop,
    median,
    now,
    percentile_ms,
    processes_cpu_seconds,
    start_server,
    url_of,
)

SEARCHED, PLAIN, INDEXED = "vec-bench-search", "vec-bench-put-plain", "vec-bench-put-indexed"
SERVER: list[int] = []  # the started server's supervisor pid (none with --endpoint): its CPU time is measured


def server_cpu() -> float:
    """CPU seconds of the started server's processes (supervisor and workers); 0.0 with --endpoint. CPU per
    request holds on a shared machine where rates and latencies do not."""
    if not SERVER:
        return 0.0
    return processes_cpu_seconds(lambda pid, fields: pid == SERVER[0] or int(fields[1]) == SERVER[0])


def vector(rng: random.Random, dims: int) -> list[dict[str, str]]:
    return [{"N": f"{rng.uniform(-1, 1):.6f}"} for _ in range(dims)]


def table_request(name: str, dims: int, indexed: bool) -> dict[str, Any]:
    request: dict[str, Any] = {
        "TableName": name, "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}]}
    if indexed:
        request["VectorIndexes"] = [{"IndexName": "byEmbedding", "VectorAttribute": {"AttributeName": "emb"},
                                     "Dimensions": dims, "DistanceFunction": "COSINE",
                                     "Projection": {"ProjectionType": "KEYS_ONLY"}}]
    return request


async def recreate(conn: Connection, request: dict[str, Any]) -> None:
    try:
        await conn.json("DeleteTable", {"TableName": request["TableName"]})
    except DynamoError as error:
        if error.error_type != "ResourceNotFoundException":
            raise
    await conn.json("CreateTable", request)


async def load(endpoint: Endpoint, count: int, dims: int, connections: int) -> float:
    """Write `count` items with random vectors to the searched table; seconds taken."""
    started = now()
    batches = [range(start, min(start + 25, count)) for start in range(0, count, 25)]

    async def worker(seed: int) -> None:
        conn, rng = Connection(endpoint), random.Random(seed)
        try:
            for batch in batches[seed::connections]:
                pending: dict[str, Any] = {SEARCHED: [
                    {"PutRequest": {"Item": {"pk": {"S": f"k{n}"}, "emb": {"L": vector(rng, dims)}}}} for n in batch]}
                while pending:
                    answer = await conn.json("BatchWriteItem", {"RequestItems": pending})
                    pending = answer.get("UnprocessedItems") or {}
        finally:
            conn.close()

    await asyncio.gather(*(worker(seed) for seed in range(connections)))
    return now() - started


async def searches(endpoint: Endpoint, dims: int, top_k: int, count: int, after_put: int) -> dict[str, float]:
    conn, rng = Connection(endpoint), random.Random(31)

    def body() -> bytes:
        return orjson.dumps({"TableName": SEARCHED, "IndexName": "byEmbedding", "TopK": top_k,
                             "SearchVector": vector(rng, dims)})

    try:
        started = now()
        status, answer = await conn.call("SearchVectors", body())
        first = now() - started
        if status != 200:
            raise RuntimeError(answer.decode())
        latencies = []
        cpu = server_cpu()
        for _ in range(count):
            payload = body()
            started = now()
            status, answer = await conn.call("SearchVectors", payload)
            latencies.append(now() - started)
            if status != 200 or len(orjson.loads(answer)["SearchResults"]) != top_k:
                raise RuntimeError(answer.decode())
        cpu = server_cpu() - cpu
        load = os.getloadavg()[0]  # (the machine's 1-minute load average as the searches end: it is shared)
        changed = await searches_after_put(endpoint, conn, body, after_put)
    finally:
        conn.close()
    return {"first": first * 1000, "p50": percentile_ms(latencies, 0.5), "p99": percentile_ms(latencies, 0.99),
            "cpu_ms": cpu / count * 1000, "load": load,
            "after_put_p50": percentile_ms(changed, 0.5) if changed else 0.0,
            "after_put_max": max(changed, default=0.0) * 1000}


async def searches_after_put(endpoint: Endpoint, conn: Connection, body: Any, count: int) -> list[float]:
    """`count` times, a PutItem of a new item to the searched partition from another connection, then a search on
    `conn` (whose server process has the partition cached) timed alone."""
    writer, rng = Connection(endpoint), random.Random(47)
    dims = len(orjson.loads(body())["SearchVector"])
    latencies = []
    try:
        for n in range(count):
            item = {"pk": {"S": f"after-put-{n}-{rng.randrange(10**9)}"}, "emb": {"L": vector(rng, dims)}}
            status, answer = await writer.call("PutItem", orjson.dumps({"TableName": SEARCHED, "Item": item}))
            if status != 200:
                raise RuntimeError(answer.decode())
            payload = body()
            started = now()
            status, answer = await conn.call("SearchVectors", payload)
            latencies.append(now() - started)
            if status != 200:
                raise RuntimeError(answer.decode())
    finally:
        writer.close()
    return latencies


async def puts(endpoint: Endpoint, table: str, dims: int, connections: int, seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    stop_at = now() + seconds

    async def worker(seed: int) -> None:
        conn, rng = Connection(endpoint), random.Random(seed)
        try:
            while now() < stop_at:
                item = {"pk": {"S": f"p{rng.randrange(1_000_000)}"}, "payload": {"S": "x" * 200},
                        "emb": {"L": vector(rng, dims)}}
                payload = orjson.dumps({"TableName": table, "Item": item})
                started = now()
                status, answer = await conn.call("PutItem", payload)
                if status != 200:
                    raise RuntimeError(answer.decode())
                latencies.append(now() - started)
        finally:
            conn.close()

    started, cpu = now(), server_cpu()
    await asyncio.gather(*(worker(seed) for seed in range(connections)))
    cpu = server_cpu() - cpu
    return {"ops": len(latencies) / (now() - started), "p50": percentile_ms(latencies, 0.5),
            "p99": percentile_ms(latencies, 0.99), "cpu_us": cpu / max(1, len(latencies)) * 1e6}


async def run(args: argparse.Namespace, url: str) -> None:
    endpoint = Endpoint(url)
    setup = Connection(endpoint)
    for request in ([] if args.reuse else [table_request(SEARCHED, args.dims, True)]) + [
            table_request(PLAIN, args.dims, False), table_request(INDEXED, args.dims, True)]:
        await recreate(setup, request)
    setup.close()
    if not args.reuse:
        took = await load(endpoint, args.vectors, args.dims, args.connections)
        print(f"loaded {args.vectors} vectors of {args.dims} dims in {took:.1f} s "
              f"({args.vectors / took:.0f} items/s)", flush=True)
    found = await searches(endpoint, args.dims, args.top_k, args.searches, args.after_put)
    print(f"SearchVectors TopK={args.top_k} over {args.vectors} x {args.dims}: first (loads the partition) "
          f"{found['first']:.0f} ms, then p50 {found['p50']:.1f} ms, p99 {found['p99']:.1f} ms, server CPU "
          f"{found['cpu_ms']:.1f} ms/search ({args.searches} searches, load average {found['load']:.1f}); "
          f"the search after a put (x{args.after_put}): "
          f"p50 {found['after_put_p50']:.1f} ms, max {found['after_put_max']:.1f} ms", flush=True)
    results: dict[str, list[dict[str, float]]] = {PLAIN: [], INDEXED: []}
    for round_index in range(args.rounds):
        for table in ([PLAIN, INDEXED] if round_index % 2 == 0 else [INDEXED, PLAIN]):
            result = await puts(endpoint, table, args.dims, args.connections, args.duration)
            results[table].append(result)
            print(f"round {round_index + 1} {table}: {result['ops']:.0f} puts/s p50 {result['p50']:.1f} ms "
                  f"p99 {result['p99']:.1f} ms, server CPU {result['cpu_us']:.0f} us/put", flush=True)
    if not args.rounds:
        return
    plain = median([r["ops"] for r in results[PLAIN]])
    plain_cpu = median([r["cpu_us"] for r in results[PLAIN]])
    print(f"\n{'table':<22} {'puts/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'vs plain':>9} {'CPU us/put':>11} "
          f"{'vs plain':>9}")
    for table in (PLAIN, INDEXED):
        ops = median([r["ops"] for r in results[table]])
        cpu = median([r["cpu_us"] for r in results[table]])
        print(f"{table:<22} {ops:>8.0f} {median([r['p50'] for r in results[table]]):>8.1f} "
              f"{median([r['p99'] for r in results[table]]):>8.1f} {ops / plain:>9.2f} {cpu:>11.0f} "
              f"{cpu / plain_cpu if plain_cpu else 0:>9.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", help="a running server; default: start OpenDDB on a temporary data dir")
    parser.add_argument("--workers", default=None, help="OpenDDB --workers when the program starts it")
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--searches", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-d", "--duration", type=float, default=5)
    parser.add_argument("-c", "--connections", type=int, default=16)
    parser.add_argument("--after-put", type=int, default=10, help="searches each timed after one PutItem")
    parser.add_argument("--reuse", action="store_true",
                        help="search the table an earlier run loaded (with --endpoint) instead of loading it")
    args = parser.parse_args()
    fast_loop()
    if args.endpoint:
        asyncio.run(run(args, args.endpoint))
        return 0
    with tempfile.TemporaryDirectory() as data_root:
        server = start_server("openddb", data_root, args.workers)
        SERVER.append(server.process.pid)
        try:
            time.sleep(0.1)
            asyncio.run(run(args, url_of(server)))
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
