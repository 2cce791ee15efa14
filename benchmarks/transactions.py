#!/usr/bin/env python3
"""Transfer-transaction benchmark: concurrent TransactWriteItems moving money between accounts.

    python benchmarks/transactions.py --endpoint http://127.0.0.1:8000 -c 32 -d 10
    python benchmarks/transactions.py --servers openddb,moto --rounds 3 -d 10 --workers 2

`--accounts` accounts (hash key `pk`) start with `--balance` each. Every connection repeatedly sends one
TransactWriteItems of two Updates: the source `SET balance = balance - :amt` with ConditionExpression
`balance >= :amt`, the target `SET balance = balance + :amt`, between two distinct random accounts, a random amount
in 1..`--max-amount`. Per second it counts committed transactions, cancelled ones (TransactionCanceledException,
split into a failed balance condition and anything else, e.g. TransactionConflict) and errors (any other answer or
a lost connection), with p50/p99 latency of all answered requests. At the end it scans the table and checks that
the total balance is unchanged and that no balance is negative (atomicity and isolation under concurrency).

With `--servers` it starts each named server itself (OpenDDB on a fresh temporary data dir with `--workers`,
moto's server, dynalite), runs `--rounds` interleaved rounds (the server order rotates each round, a fresh table
each run) and prints a side-by-side table of medians. Client: raw HTTP/1.1 keep-alive, SigV4, asyncio (+uvloop).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
from dataclasses import dataclass, field

import orjson
from ddbclient import (
    Connection,
    DynamoError,
    Endpoint,
    cpu_seconds,
    error_of,
    fast_loop,
    median,
    now,
    percentile_ms,
    recreate_table,
    scan_all,
    start_server,
    url_of,
)

TABLE = "bench-transfers"


@dataclass
class Result:
    """One run against one server."""

    server: str
    seconds: float = 0.0
    committed: int = 0
    cancelled_condition: int = 0
    cancelled_other: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    error_types: dict[str, int] = field(default_factory=dict)
    total_before: int = 0
    total_after: int = 0
    negative: int = 0
    client_cpu: float = 0.0

    def rate(self, count: int) -> float:
        return count / self.seconds if self.seconds else 0.0

    @property
    def consistent(self) -> bool:
        return self.total_before == self.total_after and self.negative == 0


def transfer_body(source: int, target: int, amount: int) -> bytes:
    """TransactWriteItems moving `amount` from account `source` to `target`, conditional on the source's balance."""
    return (b'{"TransactItems":[{"Update":{"TableName":"%s","Key":{"pk":{"S":"a%d"}},'
            b'"UpdateExpression":"SET #b = #b - :amt","ConditionExpression":"#b >= :amt",'
            b'"ExpressionAttributeNames":{"#b":"balance"},"ExpressionAttributeValues":{":amt":{"N":"%d"}}}},'
            b'{"Update":{"TableName":"%s","Key":{"pk":{"S":"a%d"}},"UpdateExpression":"SET #b = #b + :amt",'
            b'"ExpressionAttributeNames":{"#b":"balance"},"ExpressionAttributeValues":{":amt":{"N":"%d"}}}}]}'
            % (TABLE.encode(), source, amount, TABLE.encode(), target, amount))


async def load_accounts(conns: list[Connection], accounts: int, balance: int) -> None:
    """Create the table and write every account through BatchWriteItem, retrying unprocessed items."""
    await recreate_table(conns[0], TABLE, range_key=False)
    batches = [list(range(start, min(accounts, start + 25))) for start in range(0, accounts, 25)]

    async def writer(conn: Connection) -> None:
        while batches:
            requests = [{"PutRequest": {"Item": {"pk": {"S": f"a{i}"}, "balance": {"N": str(balance)}}}}
                        for i in batches.pop()]
            while requests:
                answer = await conn.json("BatchWriteItem", {"RequestItems": {TABLE: requests}})
                requests = answer.get("UnprocessedItems", {}).get(TABLE, [])

    await asyncio.gather(*(writer(conn) for conn in conns))


async def total_balance(conn: Connection) -> tuple[int, int, int]:
    """(sum of balances, number of accounts, number of negative balances) from a full Scan."""
    total = count = negative = 0
    async for item in scan_all(conn, TABLE):
        value = int(item["balance"]["N"])
        total += value
        count += 1
        negative += value < 0
    return total, count, negative


async def run_once(name: str, url: str, args: argparse.Namespace) -> Result:
    """Load the accounts, run the transfer load for warmup + duration, verify the total; return the figures."""
    endpoint = Endpoint(url)
    conns = [Connection(endpoint) for _ in range(args.connections)]
    result = Result(name)
    await load_accounts(conns, args.accounts, args.balance)
    result.total_before, count, _ = await total_balance(conns[0])
    if count != args.accounts:
        raise RuntimeError(f"{name}: loaded {count} accounts, expected {args.accounts}")
    recording = False
    stop = False

    async def client(index: int, conn: Connection) -> None:
        rnd = random.Random(args.seed * 7919 + index)
        while not stop:
            source = rnd.randrange(args.accounts)
            target = rnd.randrange(args.accounts - 1)
            target += target >= source  # two distinct accounts
            body = transfer_body(source, target, rnd.randint(1, args.max_amount))
            started = now()
            try:
                status, answer = await conn.call("TransactWriteItems", body)
            except ConnectionError:
                status, answer = 0, b""
            if not recording:
                continue
            result.latencies.append(now() - started)
            if status == 200:
                result.committed += 1
                continue
            kind = error_of(status, answer).error_type if status else "conn_lost"
            if kind == "TransactionCanceledException":
                reasons = [r.get("Code") for r in orjson.loads(answer).get("CancellationReasons", [])]
                if "ConditionalCheckFailed" in reasons:
                    result.cancelled_condition += 1
                else:
                    result.cancelled_other += 1
                    key = "cancelled:" + ",".join(str(r) for r in reasons)
                    result.error_types[key] = result.error_types.get(key, 0) + 1
                continue
            result.errors += 1
            key = f"http_{status}:{kind}"
            result.error_types[key] = result.error_types.get(key, 0) + 1

    tasks = [asyncio.create_task(client(i, conn)) for i, conn in enumerate(conns)]
    await asyncio.sleep(args.warmup)
    recording, started, cpu = True, now(), cpu_seconds()
    await asyncio.sleep(args.duration)
    recording, result.seconds = False, now() - started
    result.client_cpu = (cpu_seconds() - cpu) / result.seconds
    stop = True
    await asyncio.gather(*tasks)
    result.total_after, count, result.negative = await total_balance(conns[0])
    if count != args.accounts:
        result.error_types["accounts_changed"] = count
    try:
        await conns[0].json("DeleteTable", {"TableName": TABLE})
    except DynamoError:
        pass
    for conn in conns:
        conn.close()
    return result


def report(result: Result) -> None:
    """One line per run."""
    check = "ok" if result.consistent else (f"MISMATCH total {result.total_before} -> {result.total_after}, "
                                            f"{result.negative} negative")
    print(f"{result.server:<10} committed {result.rate(result.committed):8.0f}/s  cancelled "
          f"{result.rate(result.cancelled_condition):6.0f}/s (+{result.rate(result.cancelled_other):.0f}/s other)  "
          f"errors {result.rate(result.errors):6.1f}/s  p50 {percentile_ms(result.latencies, 0.5):6.2f} ms  "
          f"p99 {percentile_ms(result.latencies, 0.99):7.2f} ms  client CPU {result.client_cpu:4.0%}  balance {check}",
          flush=True)
    if result.error_types:
        print(f"{'':<10} {result.error_types}", flush=True)


def summarize(results: dict[str, list[Result]]) -> None:
    """Side-by-side medians over rounds, and the first server's ratio to each other."""
    print(f"\n{'server':<10}{'committed/s':>13}{'cancelled/s':>13}{'errors/s':>10}{'p50 ms':>9}{'p99 ms':>9}"
          f"  balance")
    names = list(results)
    committed = {}
    for name in names:
        runs = results[name]
        committed[name] = median([r.rate(r.committed) for r in runs])
        cancelled = median([r.rate(r.cancelled_condition + r.cancelled_other) for r in runs])
        errors = median([r.rate(r.errors) for r in runs])
        p50 = median([percentile_ms(r.latencies, 0.5) for r in runs])
        p99 = median([percentile_ms(r.latencies, 0.99) for r in runs])
        balance = "ok" if all(r.consistent for r in runs) else "MISMATCH"
        print(f"{name:<10}{committed[name]:>13.0f}{cancelled:>13.0f}{errors:>10.1f}{p50:>9.2f}{p99:>9.2f}  {balance}")
    for name in names[1:]:
        print(f"{names[0]} / {name} committed/s: {committed[names[0]] / max(committed[name], 1e-9):.2f}x")


async def run_rounds(targets: list[tuple[str, str]], args: argparse.Namespace) -> dict[str, list[Result]]:
    """Interleaved rounds over `targets` (name, url), rotating the order each round."""
    results: dict[str, list[Result]] = {name: [] for name, _ in targets}
    for round_no in range(args.rounds):
        shift = round_no % len(targets)
        for name, url in targets[shift:] + targets[:shift]:
            result = await run_once(name, url, args)
            results[name].append(result)
            report(result)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--endpoint", help="an already running server, e.g. http://127.0.0.1:8000")
    target.add_argument("--servers", default="openddb", help="servers to start: comma list of openddb,moto,dynalite")
    parser.add_argument("--workers", default=None, help="OpenDDB --workers (default: OpenDDB's own default)")
    parser.add_argument("--accounts", type=int, default=1000)
    parser.add_argument("--balance", type=int, default=100, help="starting balance of every account")
    parser.add_argument("--max-amount", type=int, default=50, help="transfer amounts are uniform in 1..this")
    parser.add_argument("--connections", "-c", type=int, default=32)
    parser.add_argument("--duration", "-d", type=float, default=10.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds before each run")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.accounts < 2:
        parser.error("--accounts must be at least 2")
    fast_loop()
    if args.endpoint:
        results = asyncio.run(run_rounds([("endpoint", args.endpoint)], args))
    else:
        servers = []
        with tempfile.TemporaryDirectory() as data_root:
            try:
                for name in args.servers.split(","):
                    servers.append(start_server(name, data_root, args.workers))
                results = asyncio.run(run_rounds([(s.name, url_of(s)) for s in servers], args))
            finally:
                for server in servers:
                    server.stop()
    summarize(results)
    return 0 if all(r.consistent for runs in results.values() for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
