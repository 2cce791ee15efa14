#!/usr/bin/env python3
"""Side-by-side benchmark: OpenDDB and its peers under the same load, interleaved, in one run.

    python benchmarks/run.py                       # all workloads, 3 rounds, 10 s each
    python benchmarks/run.py --workloads put,get --rounds 1 --duration 5 --peers moto,ceiling

Starts each server on a free loopback port (OpenDDB on a fresh temporary data dir), measures its start-up time
(launch until the first answered request) and idle RSS, drives every workload of load.py against each server in
rounds (the servers' order rotating each round, so all see the same noise of a shared machine), and prints
ops/s and p50/p99 per workload per server (medians of the rounds) with the first server's ratio to each other.
Peers are installed on demand: moto's server from PyPI (`moto[server]`), dynalite from npm (into
benchmarks/.peers), and ceiling.py, a server answering `{}` on OpenDDB's HTTP stack (it runs `ping` only).
Everything here is in the repository: no other checkout is needed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import load
from ddbclient import fast_loop
from servers import PEERS_DIR, ROOT, Server, ensure_peers, free_port

ORDER = "put get update query batchwrite scan mixed ping"


def start_servers(args: argparse.Namespace, data_dir: str, servers: list[Server]) -> None:
    """Start the servers the options name, appending each to `servers` as it is up (so a failure stops the ones
    already started)."""
    for workers in args.workers.split(","):
        port = free_port()
        name = "openddb" if len(args.workers.split(",")) == 1 else f"openddb-w{workers}"
        servers.append(Server(name, [sys.executable, "-m", "openddb", "serve", "--port", str(port),
                                     "--data-dir", os.path.join(data_dir, name), "--workers", workers,
                                     "--log-level", "warning"], port))
    peers = [p for p in args.peers.split(",") if p]
    ensure_peers(peers)
    for peer in peers:
        port = free_port()
        if peer == "moto":
            servers.append(Server("moto", ["moto_server", "-H", "127.0.0.1", "-p", str(port)], port))
        elif peer == "dynalite":
            cli = PEERS_DIR / "node_modules" / "dynalite" / "cli.js"
            servers.append(Server("dynalite", ["node", str(cli), "--host", "127.0.0.1", "--port", str(port),
                                               "--createTableMs", "0", "--deleteTableMs", "0"], port))
        elif peer == "ceiling":
            servers.append(Server("ceiling", [sys.executable, str(Path(__file__).parent / "ceiling.py"),
                                              "--port", str(port)], port))


Cells = dict[tuple[str, str], list[load.Result]]  # (server, workload) -> its results, one a round


async def measure(servers: list[Server], args: argparse.Namespace, out: Path) -> Cells:
    """Every (round, workload, server), the servers' order rotating each round; results also as JSON lines."""
    workloads = [w for w in args.workloads.split(",") if w]
    stores = [server for server in servers if server.name != "ceiling"]
    for server in stores:
        await load.prepare(f"http://127.0.0.1:{server.port}", workloads)
    cells: Cells = {}
    with out.open("a") as sink:
        for round_ in range(args.rounds):
            shift = round_ % len(servers)
            for workload in workloads:
                # The ceiling server answers everything with {}: only the trivial `ping` means anything there.
                for server in (servers[shift:] + servers[:shift]):
                    if server.name == "ceiling" and workload != "ping":
                        continue
                    result = await load.drive(f"http://127.0.0.1:{server.port}", workload, args.connections,
                                              args.duration)
                    cells.setdefault((server.name, workload), []).append(result)
                    print(f"round {round_ + 1}  {workload:<10} {server.name:<14} {result.ops_per_s:>9,.0f} ops/s  "
                          f"p50 {result.p50_ms:6.2f}  p99 {result.p99_ms:7.2f} ms  errors {result.errors}",
                          flush=True)
                    sink.write(json.dumps({"round": round_, "server": server.name, **asdict(result)}) + "\n")
    return cells


def summarize(cells: Cells, servers: list[Server]) -> None:
    names = [s.name for s in servers]
    workloads = sorted({w for _, w in cells}, key=ORDER.find)
    print(f"\n{'workload':<11}" + "".join(f"{n:>26}" for n in names))

    def ops(name: str, workload: str) -> float | None:
        results = cells.get((name, workload))
        return statistics.median(r.ops_per_s for r in results) if results else None

    for workload in workloads:
        row = f"{workload:<11}"
        for name in names:
            results = cells.get((name, workload), [])
            if not results:
                row += f"{'-':>26}"
                continue
            p50 = statistics.median(r.p50_ms for r in results)
            p99 = statistics.median(r.p99_ms for r in results)
            row += f"{ops(name, workload):>10.0f}/s {p50:>5.1f}/{p99:>6.1f}ms"
        print(row)
    base = names[0]
    print("\nratio of", base, "ops/s to each server (median of rounds):")
    for workload in workloads:
        mine = ops(base, workload)
        if mine is None:
            continue
        ratios = [f"{name} {mine / max(1e-9, theirs):.2f}x" for name in names[1:]
                  if (theirs := ops(name, workload)) is not None]
        print(f"  {workload:<11}" + ", ".join(ratios))
    print("\nstart-up (launch to first answer) and idle RSS:")
    for server in servers:
        print(f"  {server.name:<14} {server.startup_s * 1000:7.0f} ms  {server.idle_rss_mb:7.1f} MB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default="put,get,update,query,batchwrite,scan,mixed",
                        help=f"comma list of {','.join(load.WORKLOADS)}")
    parser.add_argument("--peers", default="moto,dynalite,ceiling", help="comma list of moto,dynalite,ceiling")
    parser.add_argument("--workers", default="2", help="OpenDDB --workers; a comma list runs several OpenDDBs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / f"run-{int(time.time())}.jsonl"))
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fast_loop()
    servers: list[Server] = []
    with tempfile.TemporaryDirectory() as data_dir:
        try:
            start_servers(args, data_dir, servers)
            summarize(asyncio.run(measure(servers, args, out)), servers)
        finally:
            for server in servers:
                server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
