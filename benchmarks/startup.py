#!/usr/bin/env python3
"""Start-up time and idle memory of OpenDDB and its peers.

    python benchmarks/startup.py                           # openddb,moto,dynalite, 10 launches each
    python benchmarks/startup.py --servers openddb --runs 3 --workers 1

Start-up: the time from launching the server's command until its first answered HTTP request (a ListTables
POST, polled every 5 ms), median (and min/max) of `--runs` launches. OpenDDB is launched as
`python -m openddb serve` on an existing data dir holding `--tables` tables of `--items` items each (written once
beforehand); dynalite likewise on a LevelDB dir (`--path`) holding the same tables; moto's server keeps nothing
on disk, so it starts empty.

Idle memory, one second after the first answer of each launch: RSS of every process of the server (for OpenDDB
with several workers: the supervisor and each forked worker; a worker is what serves requests) and the
proportional set size (PSS) of the whole server, which counts pages shared after fork once rather than in every
worker. Issue 8 targets: start-up under 0.5 s, idle RSS under 60 MB per worker.

Peers are installed on demand like run.py does (moto's server from PyPI, dynalite from npm into benchmarks/.peers);
a peer that cannot be installed is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ddbclient import Connection, Endpoint, openddb_command, peer_command
from servers import Server, ensure_peers, free_port

DATA = "x" * 150


@dataclass
class Memory:
    """Idle memory of one server: RSS per process (MB, the launched process first) and total PSS (MB)."""

    rss: list[float]
    pss: float

    @property
    def per_worker(self) -> float:
        """RSS of the largest serving process: a forked worker, or the only process."""
        return max(self.rss[1:] or self.rss)


def processes(pid: int) -> list[int]:
    """`pid` and its descendants."""
    found = [pid]
    for each in found:
        try:
            found += [int(p) for p in Path(f"/proc/{each}/task/{each}/children").read_text().split()]
        except OSError:
            pass
    return found


def field_kb(path: str, name: str) -> int:
    """A `Name:  123 kB` field of a /proc status-like file (0 when absent)."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(name):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory(pid: int) -> Memory:
    pids = processes(pid)
    return Memory([field_kb(f"/proc/{p}/status", "VmRSS:") / 1024 for p in pids],
                  sum(field_kb(f"/proc/{p}/smaps_rollup", "Pss:") for p in pids) / 1024)


async def populate(url: str, tables: int, items: int) -> None:
    """Create `tables` tables (pk, sk) and write `items` ~200-byte items into each."""
    conn = Connection(Endpoint(url))
    for t in range(tables):
        name = f"startup-{t}"
        await conn.json("CreateTable", {
            "TableName": name, "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                                     {"AttributeName": "sk", "AttributeType": "S"}],
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]})
        while (await conn.json("DescribeTable", {"TableName": name}))["Table"].get("TableStatus") != "ACTIVE":
            await asyncio.sleep(0.05)
        for start in range(0, items, 25):
            requests = [{"PutRequest": {"Item": {"pk": {"S": f"p{i % 100}"}, "sk": {"S": str(i)},
                                                 "data": {"S": DATA}}}} for i in range(start, min(items, start + 25))]
            while requests:
                answer = await conn.json("BatchWriteItem", {"RequestItems": {name: requests}})
                requests = answer.get("UnprocessedItems", {}).get(name, [])
    conn.close()


def command(name: str, port: int, data_dir: str, workers: str | None) -> list[str]:
    """The launch command; OpenDDB and dynalite on `data_dir`, moto in memory."""
    if name == "openddb":
        return openddb_command(port, data_dir, workers)
    return peer_command(name, port, data_dir if name == "dynalite" else None)


def measure(name: str, data_dir: str, args: argparse.Namespace) -> tuple[list[float], list[Memory]]:
    """Populate `data_dir` once (if the server persists), then launch `--runs` times; start-up seconds and memory."""
    if name != "moto":
        port = free_port()
        server = Server(name, command(name, port, data_dir, args.workers), port)
        try:
            asyncio.run(populate(f"http://127.0.0.1:{port}", args.tables, args.items))
        finally:
            server.stop()
    times, memories = [], []
    for _ in range(args.runs):
        port = free_port()
        server = Server(name, command(name, port, data_dir, args.workers), port)  # waits 1 s after the first answer
        try:
            times.append(server.startup_s)
            memories.append(memory(server.process.pid))
        finally:
            server.stop()
    return times, memories


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default="openddb,moto,dynalite", help="comma list of openddb,moto,dynalite")
    parser.add_argument("--runs", type=int, default=10, help="launches per server")
    parser.add_argument("--workers", default=None, help="OpenDDB --workers (default: OpenDDB's own default)")
    parser.add_argument("--tables", type=int, default=5, help="tables in the existing data dir")
    parser.add_argument("--items", type=int, default=1000, help="items per table")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for name in args.servers.split(","):
            try:
                ensure_peers([name])
            except (subprocess.CalledProcessError, OSError) as error:
                print(f"{name}: skipped, cannot install it ({error})")
                continue
            times, memories = measure(name, os.path.join(root, name), args)
            rows.append((name, times, memories))
            print(f"{name}: start-up {', '.join(f'{t * 1000:.0f}' for t in times)} ms", flush=True)
    print(f"\n{'server':<10}{'start-up ms median (min-max)':>30}{'processes':>11}{'RSS/worker MB':>15}"
          f"{'RSS total MB':>14}{'PSS total MB':>14}")
    for name, times, memories in rows:
        span = f"{statistics.median(times) * 1000:.0f} ({min(times) * 1000:.0f}-{max(times) * 1000:.0f})"
        print(f"{name:<10}{span:>30}{statistics.median([len(m.rss) for m in memories]):>11.0f}"
              f"{statistics.median([m.per_worker for m in memories]):>15.1f}"
              f"{statistics.median([sum(m.rss) for m in memories]):>14.1f}"
              f"{statistics.median([m.pss for m in memories]):>14.1f}")
    print("\nissue 8 targets: start-up under 500 ms, idle RSS under 60 MB per worker")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
