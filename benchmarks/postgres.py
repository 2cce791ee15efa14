#!/usr/bin/env python3
"""PostgreSQL engine benchmark (issue 32): OpenDDB nodes on PostgreSQL beside the embedded engine, one run.

    python benchmarks/postgres.py                                  # starts a PostgreSQL (scripts/postgres-start)
    python benchmarks/postgres.py --engine postgresql://u@host:5432/db --baseline HEAD~2 --workers 1,2
    python benchmarks/postgres.py --rounds 1 --duration 2 --workloads put,get   # a quick check
    python benchmarks/postgres.py --baseline 03cf710 --workers 1,2 --pair-workers 1   # two nodes as well

Servers, each on a free loopback port, per `--workers` value W: `sqlite-wW` (the embedded engine on a fresh data
dir), `pg-wW` (the working tree on PostgreSQL) and, with `--baseline REV`, `base-wW` (that git revision, checked
out by `git worktree add --detach`, on PostgreSQL). Every PostgreSQL server gets a database of its own, created
on the `--engine` server and dropped at the end, so the servers share the PostgreSQL process (and its CPU and
WAL) but no rows. Without `--engine`, scripts/postgres-start starts a throw-away PostgreSQL (fsync on, its
defaults) in a temporary dir and stops it at the end: the program runs from a clone of the repository alone.
With `--pair-workers W`, also `pg2-wW` (and `base2-wW` with `--baseline`): two nodes of W workers each on one
database, the client's connections split between them; their rate is the pair's. With `--replica`, a streaming
replica of the PostgreSQL server is started too, and `pgr-wW` (and `pg2r-wW`) are nodes whose eventually
consistent reads (the get and query workloads) may come from it.

Workloads and client are streams.py's (put, update, get, query on a table of `--items` ~200-byte items; 32
connections with one request in flight each; SigV4 signed once). Each round runs every workload on every
server, the order rotating each round, so all see the same noise of a shared machine. Reported per workload and
server: ops/s, p50, p99 (medians over rounds), the ratio to the embedded engine with as many workers (median
of per-round ratios), the server's CPU per answered request and, where PostgreSQL runs on this machine, its CPU
per request as well (all its processes, from /proc), the load generator's (this process's CPU over the run, per
request answered), and how idle the machine's cores were meanwhile (from /proc/stat: 0% means the cores were the
bound, whoever used them, the run or other work on the machine).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import psycopg
import streams
from ddbclient import processes_cpu_seconds
from streams import ROOT, Sample, Server, add_worktree, check_source, drive, git, prepare, use_uvloop

WORKLOADS = ["put", "update", "get", "query"]


@dataclass
class Node(Server):
    """A server on the embedded engine (`engine` None) or on a PostgreSQL database."""

    engine: str | None = None
    workers: int = 1
    peer: Node | None = None  # a second node on the same database (`--nodes 2`): the pair is measured as one
    replica: str | None = None  # a streaming replica of its database (`--engine-replica`)

    def start(self, workers: int = 0) -> None:
        if self.peer is not None:
            self.peer.start(workers)
        self.data_dir.mkdir(parents=True)
        self.log = self.data_dir.with_suffix(".log")
        command = [sys.executable, "-m", "openddb", "serve", "--port", str(self.port), "--data-dir",
                   str(self.data_dir), "--workers", str(workers or self.workers), "--log-level", "warning"]
        if self.engine is not None:
            command += ["--engine", self.engine]
        if self.replica is not None:
            command += ["--engine-replica", self.replica]
        env = {**os.environ, "PYTHONPATH": str(self.src)}
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.data_dir)

    def wait_ready(self, timeout: float = 60.0) -> None:
        super().wait_ready(timeout)
        if self.peer is not None:
            self.peer.wait_ready(timeout)

    def stop(self) -> None:
        super().stop()
        if self.peer is not None:
            self.peer.stop()


async def drive_node(node: Node, label: str, round_: int, args: argparse.Namespace) -> Sample:
    """Run workload `label` on a node, or on a pair of nodes with half the connections each: then the rate is
    the pair's, the CPU per request their mean (weighted by requests), the latencies those of the slower one."""
    assert node.process is not None
    if node.peer is None:
        return await drive(node.port, label, round_, node.name, args, node.process.pid)
    assert node.peer.process is not None
    half = argparse.Namespace(**{**vars(args), "connections": max(1, args.connections // 2)})
    one, two = await asyncio.gather(drive(node.port, label, round_, node.name, half, node.process.pid),
                                    drive(node.peer.port, label, round_, node.name, half, node.peer.process.pid))
    errors = dict(one.errors)
    for kind, count in two.errors.items():
        errors[kind] = errors.get(kind, 0) + count
    ops = one.ops + two.ops
    server_us = (one.server_us * one.ops + two.server_us * two.ops) / max(1, ops)
    # (each drive's client CPU is this process's, both drives': counted once)
    return Sample(round_, node.name, label, ops, one.seconds, errors, max(one.p50_ms, two.p50_ms),
                  max(one.p99_ms, two.p99_ms), max(one.client_cpu, two.client_cpu), server_us)


class Postgres:
    """The PostgreSQL server under test: `url` given, or a throw-away one started here; a database per node."""

    def __init__(self, url: str | None, tmp: str) -> None:
        self.dir: Path | None = None
        os.chmod(tmp, 0o755)  # (the server may run as another user, which must reach its directory: see the script)
        if url is None:
            self.dir = Path(tmp) / "pg"
            url = subprocess.run([str(ROOT / "scripts" / "postgres-start"), str(self.dir)], check=True,
                                 capture_output=True, text=True).stdout.strip().splitlines()[-1]
        self.url = url
        self.databases: list[str] = []
        self.replica_dir: Path | None = None
        self.replica_url: str | None = None

    def start_replica(self, tmp: str) -> None:
        """A streaming replica of the whole server (its databases made later included), for `--replica`."""
        self.replica_dir = Path(tmp) / "pg-replica"
        self.replica_url = subprocess.run(
            [str(ROOT / "scripts" / "postgres-start"), "--replica-of", self.url, str(self.replica_dir)], check=True,
            capture_output=True, text=True).stdout.strip().splitlines()[-1]

    def on_replica(self, database_url: str) -> str:
        assert self.replica_url is not None
        return self.replica_url.rsplit("/", 1)[0] + "/" + database_url.rsplit("/", 1)[1]

    def database(self) -> str:
        name = f"openddb_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(self.url, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        self.databases.append(name)
        return self.url.rsplit("/", 1)[0] + "/" + name

    def postmaster(self) -> int | None:
        """The server's main process, if it runs on this machine (its data dir is known, or it answers so)."""
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                row = conn.execute("SELECT setting FROM pg_settings WHERE name = 'data_directory'").fetchone()
            return int((Path(row[0]) / "postmaster.pid").read_text().split()[0]) if row else None
        except (OSError, ValueError, psycopg.Error):
            return None

    def close(self) -> None:
        if self.replica_dir is not None:
            subprocess.run([str(ROOT / "scripts" / "postgres-start"), "--stop", str(self.replica_dir)], check=False,
                           capture_output=True)
        with psycopg.connect(self.url, autocommit=True) as admin:
            for name in self.databases:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        if self.dir is not None:
            subprocess.run([str(ROOT / "scripts" / "postgres-start"), "--stop", str(self.dir)], check=False,
                           capture_output=True)


def family_cpu_seconds(parent: int) -> float:
    """CPU seconds of `parent` and its live children (PostgreSQL's backends)."""
    return processes_cpu_seconds(lambda pid, fields: pid == parent or int(fields[1]) == parent)


def machine_ticks() -> tuple[int, int]:
    """The machine's CPU time since boot, in ticks of all its cores: idle (iowait included), and all."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[3] + fields[4], sum(fields[:8])


@dataclass
class Run:
    sample: Sample
    pg_us: float | None  # PostgreSQL's CPU per answered request (warm-up included), µs
    idle: float = 0.0  # the machine's idle share of its cores during the run (warm-up included), %


async def run_rounds(nodes: list[Node], args: argparse.Namespace, postmaster: int | None, runs: list[Run]) -> None:
    for node in nodes:
        await prepare(node, args)
        print(f"{node.name}: {args.items} items loaded", flush=True)
    for round_ in range(args.rounds):
        shift = round_ % len(nodes)
        for label in args.workloads:
            for node in nodes[shift:] + nodes[:shift]:
                before = family_cpu_seconds(postmaster) if postmaster and node.engine else None
                idle_before, total_before = machine_ticks()
                sample = await drive_node(node, label, round_ + 1, args)
                idle_after, total_after = machine_ticks()
                idle = 100.0 * (idle_after - idle_before) / max(1, total_after - total_before)
                pg_us = None
                if before is not None and postmaster is not None:
                    answered = sample.rate * (args.duration + args.warmup)
                    pg_us = 1e6 * (family_cpu_seconds(postmaster) - before) / max(1.0, answered)
                runs.append(Run(sample, pg_us, idle))
                line = streams.progress_line(sample) + f"  machine idle {idle:3.0f}%"
                print(line + ("" if pg_us is None else f"  PostgreSQL {pg_us:5.1f} µs CPU/op"), flush=True)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def report(runs: list[Run], nodes: list[Node], labels: list[str]) -> str:
    """A markdown table: per workload and node, medians over rounds and the ratio to the embedded engine."""
    lines = ["| workload | server | ops/s | p50 ms | p99 ms | / embedded, same workers | server CPU µs/op "
             "| PostgreSQL CPU µs/op | client CPU µs/op | machine idle % |", "|" + " --- |" * 10]
    for label in labels:
        for node in nodes:
            mine = [r for r in runs if r.sample.server == node.name and r.sample.workload == label]
            if not mine:
                continue
            base = {r.sample.round: r.sample.rate for r in runs
                    if r.sample.server == f"sqlite-w{node.workers}" and r.sample.workload == label}
            ratio = _median([r.sample.rate / base[r.sample.round] for r in mine if base.get(r.sample.round)])
            pg = _median([r.pg_us for r in mine if r.pg_us is not None])
            cells = [label, node.name, f"{statistics.median(r.sample.rate for r in mine):,.0f}",
                     f"{statistics.median(r.sample.p50_ms for r in mine):.2f}",
                     f"{statistics.median(r.sample.p99_ms for r in mine):.2f}",
                     "n/a" if ratio is None else f"{ratio:.2f}",
                     f"{statistics.median(r.sample.server_us for r in mine):.0f}",
                     "n/a" if pg is None else f"{pg:.0f}",
                     f"{statistics.median(r.sample.client_cpu * 1e4 / max(1.0, r.sample.rate) for r in mine):.0f}",
                     f"{statistics.median(r.idle for r in mine):.0f}"]
            lines.append("| " + " | ".join(cells) + " |")
    errors = sum(sum(r.sample.errors.values()) for r in runs)
    cpu = max((r.sample.client_cpu for r in runs), default=0.0)
    lines.append(f"\nMedians over rounds. Client CPU at most {cpu:.0f}% of one core; {errors} errors.")
    if any(node.replica is not None for node in nodes):
        lines.append("PostgreSQL CPU is the primary's: the replica's (which answers pgr/pg2r reads) is not counted.")
    return "\n".join(lines)


def make_nodes(args: argparse.Namespace, tmp: str, pg: Postgres, baseline: Path | None) -> list[Node]:
    nodes = []
    for workers in args.workers:
        data = Path(tmp)
        nodes.append(Node(f"sqlite-w{workers}", ROOT / "src", data / f"sqlite-w{workers}", workers=workers))
        nodes.append(Node(f"pg-w{workers}", ROOT / "src", data / f"pg-w{workers}", engine=pg.database(),
                          workers=workers))
        if baseline is not None:
            nodes.append(Node(f"base-w{workers}", baseline / "src", data / f"base-w{workers}",
                              engine=pg.database(), workers=workers))
        if args.replica:
            database = pg.database()
            nodes.append(Node(f"pgr-w{workers}", ROOT / "src", data / f"pgr-w{workers}", engine=database,
                              workers=workers, replica=pg.on_replica(database)))
    if args.pair_workers is not None:  # two nodes on one database
        workers = args.pair_workers
        sources = [("pg2", ROOT / "src", False)] + ([("base2", baseline / "src", False)] if baseline else [])
        sources += [("pg2r", ROOT / "src", True)] if args.replica else []
        for name, src, replicated in sources:
            database = pg.database()
            replica = pg.on_replica(database) if replicated else None
            peer = Node(f"{name}-w{workers}-b", src, Path(tmp) / f"{name}-w{workers}-b", engine=database,
                        workers=workers, replica=replica)
            nodes.append(Node(f"{name}-w{workers}", src, Path(tmp) / f"{name}-w{workers}", engine=database,
                              workers=workers, peer=peer, replica=replica))
    return nodes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--engine", help="a postgresql:// URL whose role may create databases (default: start one)")
    parser.add_argument("--baseline", help="also run this git revision on PostgreSQL (e.g. HEAD~2)")
    parser.add_argument("--workers", default="1,2", help="comma list of --workers values (default 1,2)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--duration", type=float, default=5.0, help="measured seconds per run (default 5)")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds before each (default 1)")
    parser.add_argument("-c", "--connections", type=int, default=32, help="keep-alive connections (default 32)")
    parser.add_argument("--items", type=int, default=10_000, help="items in the table (default 10000)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma list of put,update,get,query")
    parser.add_argument("--pair-workers", type=int, help="also run two nodes on one database, each with this many "
                        "workers (pg2-wW; base2-wW with --baseline), the connections split between them")
    parser.add_argument("--replica", action="store_true", help="also run nodes whose eventually consistent reads "
                        "may come from a streaming replica of the database (pgr-wW; pg2r-wW with --pair-workers)")
    args = parser.parse_args(argv)
    args.workers = [int(w) for w in args.workers.split(",") if w.strip()]
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    if unknown := [w for w in args.workloads if w not in WORKLOADS]:
        parser.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    loop_name = use_uvloop()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda signum, frame: signal.raise_signal(signal.SIGINT))
    runs: list[Run] = []
    nodes: list[Node] = []
    with tempfile.TemporaryDirectory(prefix="openddb-pg-bench-") as tmp:
        pg = Postgres(args.engine, tmp)
        if args.replica:
            pg.start_replica(tmp)
        worktree: Path | None = None
        try:
            baseline = None
            if args.baseline:
                worktree, commit = add_worktree(args.baseline, tmp)
                baseline = worktree
                print(f"baseline: {args.baseline} ({commit})", flush=True)
            print(f"new: {streams.describe_new()}; {args.connections} connections; {args.rounds} rounds x "
                  f"{args.duration:g} s (+{args.warmup:g} s warm-up); {loop_name}", flush=True)
            nodes = make_nodes(args, tmp, pg, baseline)
            for node in nodes:
                check_source(node.src)
                node.start()
            for node in nodes:
                node.wait_ready()
            asyncio.run(run_rounds(nodes, args, pg.postmaster(), runs))
        except KeyboardInterrupt:
            print("interrupted: the figures so far", flush=True)
        finally:
            for node in nodes:
                node.stop()
            if worktree is not None:
                git("worktree", "remove", "--force", str(worktree))
            pg.close()
        print(report(runs, nodes, args.workloads), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
