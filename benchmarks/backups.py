#!/usr/bin/env python3
"""Backups benchmark (issue 27): what point-in-time recovery costs writes, and how long backups and restores of a
large table take.

    python benchmarks/backups.py                                  # 3 rounds x 5 s, a 100,000-item table
    python benchmarks/backups.py --rounds 1 --duration 2 --large 20000   # a quick check
    python benchmarks/backups.py --baseline main~1 --large 0      # part 1 alone, against another revision

One OpenDDB server (the current tree) on a fresh temporary data dir; with `--baseline REV`, a second one from that
git revision (checked out with `git worktree add --detach` in a temporary dir, removed at the end), run in part 1
beside the first, the server order rotating each round, and figures given for each. Part 1: put and update
(`SET #c = #c + :one`) on two tables of `--items` ~200-byte items, one with point-in-time recovery on and one
without, interleaved in each round (the order rotating), so both see the same noise of a shared machine; medians
over rounds of ops/s and server CPU µs per request (the robust figure on a shared machine). Part 2: a
`--large`-item table with recovery on (the load itself logged), then the wall time of CreateBackup (until
AVAILABLE), RestoreTableFromBackup (until ACTIVE), RestoreTableToPointInTime to the latest restorable time (five
minutes back, as DynamoDB reports it: the moment recovery was turned on, before the load, so the restore copies
every item and undoes every one), and `openddb backup` of the whole store. Runs from a clone alone, on the
repository's client (ddbclient.py, via streams.py's workload driver). `--large 0` leaves part 2 out.

    url=$(scripts/postgres-start /tmp/pg-bench)
    python benchmarks/backups.py --engine "$url" --postgres-pid "$(head -1 /tmp/pg-bench/data/postmaster.pid)"

On PostgreSQL (`--engine`), recovery's log is written by triggers in PostgreSQL's backends: with
`--postgres-pid` (the postmaster's), the CPU per request counts those processes' CPU too (the postmaster and its
children), so the figure is the whole cost of a write; `openddb backup` (SQLite only) is left out.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import streams
from ddbclient import processes_cpu_seconds
from streams import DYNAMODB, ROOT, Sample, Server, add_worktree, connect, create_table, drive, git, load

PITR = "bench-pitr"
LARGE = "bench-large"
streams.WORKLOADS.update({"put-pitr": ("PutItem", PITR), "update-pitr": ("UpdateItem", PITR)})
PAIRS = (("put", "put-pitr"), ("update", "update-pitr"))


async def enable_recovery(port: int, table: str) -> None:
    connection = connect(port)
    try:
        await connection.json(DYNAMODB + "UpdateContinuousBackups", {
            "TableName": table, "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True}})
    finally:
        connection.close()


async def prepare(server: Server, args: argparse.Namespace) -> None:
    connection = connect(server.port)
    try:
        for table in (streams.PLAIN, PITR):
            await create_table(connection, table, stream=False)
    finally:
        connection.close()
    await enable_recovery(server.port, PITR)
    for table in (streams.PLAIN, PITR):
        await load(server.port, table, args.items, args.connections)


async def until_active(port: int, table: str) -> None:
    connection = connect(port)
    try:
        while (await connection.json(DYNAMODB + "DescribeTable", {"TableName": table}))["Table"][
                "TableStatus"] != "ACTIVE":
            await asyncio.sleep(0.02)
    finally:
        connection.close()


async def until_available(port: int, arn: str) -> None:
    """Until the backup `arn` is AVAILABLE (CreateBackup answers CREATING and copies in the background)."""
    connection = connect(port)
    try:
        while (await connection.json(DYNAMODB + "DescribeBackup", {"BackupArn": arn}))["BackupDescription"][
                "BackupDetails"]["BackupStatus"] != "AVAILABLE":
            await asyncio.sleep(0.02)
    finally:
        connection.close()


async def large_table(server: Server, args: argparse.Namespace) -> dict[str, float]:
    """Part 2's timings, in seconds."""
    connection = connect(server.port)
    figures: dict[str, float] = {}
    try:
        await create_table(connection, LARGE, stream=False)
        await enable_recovery(server.port, LARGE)
        await asyncio.sleep(0.01)
        started = time.perf_counter()
        await load(server.port, LARGE, args.large, args.connections)
        figures["load (BatchWriteItem, recovery on)"] = time.perf_counter() - started
        started = time.perf_counter()
        answer = await connection.json(DYNAMODB + "CreateBackup", {"TableName": LARGE, "BackupName": "large"})
        arn = answer["BackupDetails"]["BackupArn"]
        await until_available(server.port, arn)
        figures["CreateBackup (until AVAILABLE)"] = time.perf_counter() - started
        for label, target, request in (
                ("RestoreTableFromBackup", "r-backup", ("RestoreTableFromBackup", {"BackupArn": arn})),
                # (the latest restorable time is five minutes back, as DynamoDB reports it: here the moment recovery
                # was turned on, before the load, so the restore copies every item and undoes every one)
                ("RestoreTableToPointInTime, latest restorable (before the load: copy + undo of every item)",
                 "r-latest", ("RestoreTableToPointInTime", {"SourceTableName": LARGE,
                                                            "UseLatestRestorableTime": True}))):
            started = time.perf_counter()
            await connection.json(DYNAMODB + request[0], {**request[1], "TargetTableName": target})
            await until_active(server.port, target)
            figures[label] = time.perf_counter() - started
    finally:
        connection.close()
    if args.engine:
        return figures
    copy = Path(tempfile.mkdtemp(prefix="openddb-copy-")) / "copy"
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "openddb", "backup", str(copy), "--data-dir", str(server.data_dir)],
                   check=True, capture_output=True, env={"PYTHONPATH": str(server.src)})
    figures["openddb backup (whole store)"] = time.perf_counter() - started
    return figures


def postgres_cpu(args: argparse.Namespace) -> Callable[[], float] | None:
    """CPU seconds of the PostgreSQL server `--postgres-pid` names (the postmaster and its children), if given."""
    master = args.postgres_pid
    if master is None:
        return None
    return lambda: processes_cpu_seconds(lambda pid, fields: pid == master or int(fields[1]) == master)


async def rounds(servers: list[Server], args: argparse.Namespace) -> list[Sample]:
    samples: list[Sample] = []
    for round_ in range(args.rounds):
        order = servers if round_ % 2 == 0 else servers[::-1]
        for pair in PAIRS:
            for server in order:
                group = server.process.pid if server.process else 0
                for label in pair if round_ % 2 == 0 else reversed(pair):
                    sample = await drive(server.port, label, round_, server.name, args, group, postgres_cpu(args))
                    samples.append(sample)
                    print(f"  round {round_ + 1} {server.name:8} {label:12} {sample.rate:9,.0f} ops/s  "
                          f"{sample.server_us:6.0f} µs/op", flush=True)
    return samples


def report(samples: list[Sample], figures: dict[str, float], args: argparse.Namespace) -> None:
    print(f"\nput/update, recovery off vs on ({args.rounds} rounds x {args.duration:g} s, {args.connections} "
          "connections, medians):")
    print(f"  {'server':8} {'workload':10} {'off ops/s':>10} {'on ops/s':>10} {'on/off':>7} {'off µs/op':>10} "
          f"{'on µs/op':>9} {'on/off':>7}  on/off ops/s by round")
    for name in dict.fromkeys(s.server for s in samples):
        mine = [s for s in samples if s.server == name]
        for plain, pitr in PAIRS:
            rate = [statistics.median(s.rate for s in mine if s.workload == w) for w in (plain, pitr)]
            cpu = [statistics.median(s.server_us for s in mine if s.workload == w) for w in (plain, pitr)]
            # (each ratio the median of the rounds' ratios: a round's two runs are back to back, which cancels most
            # of a shared machine's drift between rounds)
            pairs = [(next(s for s in mine if s.workload == plain and s.round == r),
                      next(s for s in mine if s.workload == pitr and s.round == r)) for r in range(args.rounds)]
            rate_ratio = statistics.median(on.rate / off.rate for off, on in pairs)
            cpu_ratio = statistics.median(on.server_us / off.server_us for off, on in pairs)
            by_round = ", ".join(f"{on.rate / off.rate:.2f}" for off, on in pairs)
            print(f"  {name:8} {plain:10} {rate[0]:10,.0f} {rate[1]:10,.0f} {rate_ratio:7.1%} {cpu[0]:10.0f} "
                  f"{cpu[1]:9.0f} {cpu_ratio:7.1%}  {by_round}")
    if figures:
        print(f"\na table of {args.large:,} items (~200 bytes each):")
    for label, seconds in figures.items():
        print(f"  {label:72} {seconds:7.2f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--items", type=int, default=10000)
    parser.add_argument("--large", type=int, default=100000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--engine", help="a PostgreSQL URL to serve from (default: SQLite in a temporary dir)")
    parser.add_argument("--postgres-pid", type=int, help="the PostgreSQL postmaster's pid, to count its CPU")
    parser.add_argument("--baseline", help="a git revision to run beside the current tree in part 1")
    args = parser.parse_args()
    if args.baseline and args.engine:
        parser.error("--baseline runs on SQLite only (two servers on one PostgreSQL database would share tables)")
    with tempfile.TemporaryDirectory(prefix="openddb-bench-") as scratch:
        servers = [Server("new", ROOT / "src", Path(scratch) / "new")]
        worktree: Path | None = None
        try:
            if args.baseline:
                worktree, commit = add_worktree(args.baseline, scratch)
                print(f"baseline: {args.baseline} ({commit})", flush=True)
                servers.append(Server("baseline", worktree / "src", Path(scratch) / "baseline"))
            for server in servers:
                server.start(args.workers, extra=("--engine", args.engine) if args.engine else ())
            for server in servers:
                server.wait_ready()
                asyncio.run(prepare(server, args))
            samples = asyncio.run(rounds(servers, args))
            figures = asyncio.run(large_table(servers[0], args)) if args.large else {}
        finally:
            for server in servers:
                server.stop()
            if worktree is not None:
                git("worktree", "remove", "--force", str(worktree))
    report(samples, figures, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
