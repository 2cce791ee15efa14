#!/usr/bin/env python3
"""Bulk load through BatchWriteItem, then Query latency on the big table versus a small one.

    python benchmarks/bulk_load.py                              # 1,000,000 items, own OpenDDB (default workers)
    python benchmarks/bulk_load.py --items 20000 --queries 500 --workers 2
    python benchmarks/bulk_load.py --endpoint http://127.0.0.1:8000 --items 100000

(a) Loads `--items` ~200-byte items (pk `p<i % --partitions>`, sk `<i>`, so keys spread over many partitions)
into a fresh table with BatchWriteItem of 25 puts from `--connections` concurrent connections, resending any
UnprocessedItems, and reports items/s (and the p50/p99 of one batch request).

(b) Adds the same `--query-partitions` partitions of `--partition-size` items (pk `q<j>`) to that table and to a
freshly loaded `--small-items` table, then measures Query (one such partition, `Limit` 20, random partition per
request) from `--query-connections` connections, `--queries` requests per table per round, alternating which table
goes first over `--query-rounds` rounds. The partition queried has the same size in both tables, so the latencies
should be the same within noise: a Query is a range read whose cost does not grow with the table (issue 8 target:
p99 on the 1,000,000-item table within 20% of the 10,000-item table).

Unless `--endpoint` is given it starts OpenDDB itself on a temporary data dir (under `--tmp`), passing `--workers`
through; the small table then lives in a second, fresh OpenDDB store (`--same-store` puts it next to the big one).
Client: raw HTTP/1.1 keep-alive, SigV4, asyncio (+uvloop), from benchmarks/ddbclient.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
from dataclasses import dataclass

import orjson
from ddbclient import (
    Connection,
    Endpoint,
    cpu_seconds,
    error_of,
    fast_loop,
    median,
    now,
    percentile_ms,
    recreate_table,
    start_server,
    url_of,
)

BIG, SMALL = "bench-bulk", "bench-bulk-small"
DATA = (b"abcdefghijklmnopqrstuvwxyz0123456789" * 5)[:150]
PUT = b'{"PutRequest":{"Item":{"pk":{"S":"%s"},"sk":{"S":"%s"},"c":{"N":"0"},"data":{"S":"' + DATA + b'"}}}}'


@dataclass
class Load:
    """Figures of one bulk load."""

    items: int
    seconds: float
    requests: int
    latencies: list[float]
    resent: int
    client_cpu: float

    @property
    def items_per_s(self) -> float:
        return self.items / self.seconds if self.seconds else 0.0


def batch_body(table: str, keys: list[tuple[bytes, bytes]]) -> bytes:
    """BatchWriteItem of one ~200-byte put per (pk, sk)."""
    return b'{"RequestItems":{"%s":[%s]}}' % (table.encode(), b",".join(PUT % key for key in keys))


async def bulk_load(endpoint: Endpoint, table: str, keys: list[tuple[bytes, bytes]], connections: int) -> Load:
    """Write every key into `table` through BatchWriteItem of 25 from `connections` connections; time it."""
    batches = [keys[start:start + 25] for start in range(0, len(keys), 25)]
    batches.reverse()  # popped from the end: load in key order
    latencies: list[float] = []
    resent = 0

    async def writer(conn: Connection) -> None:
        nonlocal resent
        while batches:
            body = batch_body(table, batches.pop())
            while body:
                started = now()
                status, answer = await conn.call("BatchWriteItem", body)
                latencies.append(now() - started)
                if status != 200:
                    raise error_of(status, answer)
                unprocessed = orjson.loads(answer).get("UnprocessedItems") or {}
                body = orjson.dumps({"RequestItems": unprocessed}) if unprocessed else b""
                resent += sum(len(requests) for requests in unprocessed.values())

    conns = [Connection(endpoint) for _ in range(connections)]
    started, cpu = now(), cpu_seconds()
    await asyncio.gather(*(writer(conn) for conn in conns))
    seconds = now() - started
    for conn in conns:
        conn.close()
    return Load(len(keys), seconds, len(latencies), latencies, resent, (cpu_seconds() - cpu) / seconds)


def table_keys(items: int, partitions: int) -> list[tuple[bytes, bytes]]:
    """The bulk keys: item i goes to partition i % partitions, sort key i."""
    return [(b"p%d" % (i % partitions), b"%d" % i) for i in range(items)]


def query_keys(args: argparse.Namespace) -> list[tuple[bytes, bytes]]:
    """The queried partitions, identical in both tables."""
    return [(b"q%d" % j, b"%06d" % k) for j in range(args.query_partitions) for k in range(args.partition_size)]


async def query_run(endpoint: Endpoint, table: str, args: argparse.Namespace) -> tuple[list[float], float]:
    """`--queries` Query requests on `table` from `--query-connections` connections; (latencies, elapsed) in s."""
    remaining = args.queries
    latencies: list[float] = []
    expected = min(args.limit, args.partition_size)

    async def reader(index: int, conn: Connection) -> None:
        nonlocal remaining
        rnd = random.Random(index)
        while remaining > 0:
            remaining -= 1
            body = (b'{"TableName":"%s","KeyConditionExpression":"pk = :p","ExpressionAttributeValues":'
                    b'{":p":{"S":"q%d"}},"Limit":%d}' % (table.encode(), rnd.randrange(args.query_partitions),
                                                         args.limit))
            started = now()
            status, answer = await conn.call("Query", body)
            latencies.append(now() - started)
            if status != 200:
                raise error_of(status, answer)
            if orjson.loads(answer).get("Count") != expected:
                raise RuntimeError(f"Query on {table} returned {answer[:200]!r}, expected {expected} items")

    conns = [Connection(endpoint) for _ in range(args.query_connections)]
    started = now()
    await asyncio.gather(*(reader(i, conn) for i, conn in enumerate(conns)))
    elapsed = now() - started
    for conn in conns:
        conn.close()
    return latencies, elapsed


async def prepare(endpoint: Endpoint, table: str, keys: list[tuple[bytes, bytes]], args: argparse.Namespace) -> Load:
    """Create `table` and bulk load `keys` into it."""
    conn = Connection(endpoint)
    await recreate_table(conn, table)
    conn.close()
    return await bulk_load(endpoint, table, keys, args.connections)


def print_load(label: str, load: Load) -> None:
    print(f"{label}: {load.items} items in {load.seconds:.2f} s = {load.items_per_s:,.0f} items/s "
          f"({load.requests / load.seconds:,.0f} BatchWriteItem/s, p50 {percentile_ms(load.latencies, 0.5):.1f} ms, "
          f"p99 {percentile_ms(load.latencies, 0.99):.1f} ms, {load.resent} unprocessed items resent, "
          f"client CPU {load.client_cpu:.0%})", flush=True)


async def run(big_url: str, small_url: str, args: argparse.Namespace) -> dict[str, object]:
    """The whole benchmark; returns the figures as a JSON-able dict."""
    big, small = Endpoint(big_url), Endpoint(small_url)
    load = await prepare(big, BIG, table_keys(args.items, args.partitions), args)
    print_load("bulk load", load)
    await bulk_load(big, BIG, query_keys(args), args.connections)  # untimed: the partitions queried
    queried = query_keys(args)  # the small table holds --small-items items in all, queried partitions included
    small_keys = table_keys(max(0, args.small_items - len(queried)), args.partitions) + queried
    small_load = await prepare(small, SMALL, small_keys, args)
    print_load("small table load", small_load)
    rounds: dict[str, list[tuple[float, float]]] = {BIG: [], SMALL: []}
    sizes = {BIG: args.items + args.query_partitions * args.partition_size,
             SMALL: len(small_keys)}
    for round_no in range(args.query_rounds):
        order = [(big, BIG), (small, SMALL)] if round_no % 2 == 0 else [(small, SMALL), (big, BIG)]
        for endpoint, table in order:
            latencies, elapsed = await query_run(endpoint, table, args)
            rounds[table].append((percentile_ms(latencies, 0.5), percentile_ms(latencies, 0.99)))
            print(f"round {round_no + 1}: Query on {sizes[table]:>9,}-item table: p50 {rounds[table][-1][0]:6.2f} ms"
                  f"  p99 {rounds[table][-1][1]:6.2f} ms  ({len(latencies) / elapsed:,.0f} queries/s)", flush=True)
    p50 = {table: median([r[0] for r in rows]) for table, rows in rounds.items()}
    p99 = {table: median([r[1] for r in rows]) for table, rows in rounds.items()}
    ratio = p99[BIG] / max(p99[SMALL], 1e-9)
    print(f"\nQuery, median of {args.query_rounds} rounds:  {sizes[BIG]:,} items p50 {p50[BIG]:.2f} / p99 "
          f"{p99[BIG]:.2f} ms;  {sizes[SMALL]:,} items p50 {p50[SMALL]:.2f} / p99 {p99[SMALL]:.2f} ms;  "
          f"p99 big/small {ratio:.2f} (target at most 1.20: {'met' if ratio <= 1.2 else 'NOT met'})")
    print(f"bulk load: {load.items_per_s:,.0f} items/s ({'meets' if load.items_per_s >= 35000 else 'below'} "
          f"the 35,000 items/s target)")
    return {"items": args.items, "load_seconds": load.seconds, "items_per_s": load.items_per_s,
            "client_cpu": load.client_cpu,
            "batch_p50_ms": percentile_ms(load.latencies, 0.5), "batch_p99_ms": percentile_ms(load.latencies, 0.99),
            "query": {"big_items": sizes[BIG], "small_items": sizes[SMALL], "big_p50_ms": p50[BIG],
                      "big_p99_ms": p99[BIG], "small_p50_ms": p50[SMALL], "small_p99_ms": p99[SMALL],
                      "p99_ratio": ratio, "rounds": rounds}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", help="an already running server (both tables go there)")
    parser.add_argument("--workers", default=None, help="OpenDDB --workers (default: OpenDDB's own default)")
    parser.add_argument("--same-store", action="store_true", help="small table in the big table's OpenDDB store")
    parser.add_argument("--tmp", default=None, help="parent directory of the temporary data dirs")
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=100_000, help="bulk items spread over this many pks")
    parser.add_argument("--connections", "-c", type=int, default=32, help="bulk load connections")
    parser.add_argument("--small-items", type=int, default=10_000)
    parser.add_argument("--query-partitions", type=int, default=10)
    parser.add_argument("--partition-size", type=int, default=100)
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--queries", type=int, default=20_000, help="Query requests per table per round")
    parser.add_argument("--query-connections", type=int, default=32)
    parser.add_argument("--query-rounds", type=int, default=3)
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()
    fast_loop()
    if args.endpoint:
        figures = asyncio.run(run(args.endpoint, args.endpoint, args))
    else:
        servers = []
        with tempfile.TemporaryDirectory(dir=args.tmp) as data_root:
            try:
                servers.append(start_server("openddb", data_root, args.workers))
                if not args.same_store:
                    servers.append(start_server("openddb", data_root, args.workers))
                figures = asyncio.run(run(url_of(servers[0]), url_of(servers[-1]), args))
            finally:
                for server in servers:
                    server.stop()
    if args.json:
        with open(args.json, "w") as out:
            json.dump(figures, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
