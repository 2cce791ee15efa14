#!/usr/bin/env python3
"""Side-by-side benchmark: OpenDDB and its peers driven by the shared bench, interleaved, in one run.

    python benchmarks/run.py                       # all workloads, 3 rounds, 10 s each
    python benchmarks/run.py --workloads put,get --rounds 1 --duration 5 --peers moto,ceiling

Starts each server on a free loopback port (OpenDDB on a fresh temporary data dir), measures its start-up time
(launch until the first answered request) and idle RSS, runs ../shared/bench/run_matrix.py over all of them,
and prints ops/s and p50/p99 per workload per server with OpenDDB's ratio to each peer. Peers are installed on
demand: moto's server from PyPI (`moto[server]`), dynalite from npm (into benchmarks/.peers), and the shared
bench's trivial-response ceiling server (httptools + uvloop, the same HTTP stack as OpenDDB).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(os.environ.get("OPENDDB_BENCH_DIR", ROOT.parent / "shared" / "bench"))
PEERS_DIR = ROOT / "benchmarks" / ".peers"
PING = b'{"Limit":1}'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answered(port: int) -> bool:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        connection.request("POST", "/", body=PING, headers={
            "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "DynamoDB_20120810.ListTables",
            "Authorization": "AWS4-HMAC-SHA256 Credential=bench/20260101/us-east-1/dynamodb/aws4_request, "
                             "SignedHeaders=host, Signature=0"})
        connection.getresponse().read()
        connection.close()
        return True
    except OSError:
        return False


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children, in MB."""
    total = 0
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    for each in pids:
        for line in Path(f"/proc/{each}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


class Server:
    def __init__(self, name: str, args: list[str], port: int) -> None:
        self.name, self.port = name, port
        started = time.perf_counter()
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not answered(port):
            if self.process.poll() is not None or time.perf_counter() - started > 60:
                raise RuntimeError(f"{name} did not start: {' '.join(args)}")
            time.sleep(0.005)
        self.startup_s = time.perf_counter() - started
        time.sleep(1.0)
        self.idle_rss_mb = rss_mb(self.process.pid)

    @property
    def spec(self) -> str:
        return f"{self.name}=http://127.0.0.1:{self.port}@{self.process.pid}"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def ensure_peers(peers: list[str]) -> None:
    if "moto" in peers and shutil.which("moto_server") is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "moto[server]"], check=True)
    if "dynalite" in peers and not (PEERS_DIR / "node_modules" / "dynalite").exists():
        PEERS_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--prefix", str(PEERS_DIR), "dynalite"], check=True)


def start_servers(args: argparse.Namespace, data_dir: str) -> list[Server]:
    servers = []
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
            servers.append(Server("ceiling", [sys.executable, str(BENCH / "ceiling_server.py"), "--port",
                                              str(port), "--impl", "httptools", "--uvloop"], port))
    return servers


def summarize(out: Path, servers: list[Server]) -> None:
    cells: dict[tuple[str, str], list[dict]] = {}
    for line in out.read_text().splitlines():
        record = json.loads(line)
        label = record.get("label")
        for result in record.get("results", []):
            cells.setdefault((label, result["workload"]), []).append(result)
    names = [s.name for s in servers]
    workloads = sorted({w for _, w in cells}, key=lambda w: "put get update query batchwrite scan mixed ping".find(w))
    print(f"\n{'workload':<11}" + "".join(f"{n:>26}" for n in names))
    base = names[0]
    for workload in workloads:
        row = f"{workload:<11}"
        for name in names:
            results = cells.get((name, workload), [])
            if not results:
                row += f"{'-':>26}"
                continue
            ops = statistics.median(r["ok_ops_per_s"] for r in results)
            p50 = statistics.median(r["p50_ms"] for r in results)
            p99 = statistics.median(r["p99_ms"] for r in results)
            row += f"{ops:>10.0f}/s {p50:>5.1f}/{p99:>6.1f}ms"
        print(row)
    print("\nratio of", base, "ops/s to each server (median of rounds):")
    for workload in workloads:
        mine = cells.get((base, workload))
        if not mine:
            continue
        mine_ops = statistics.median(r["ok_ops_per_s"] for r in mine)
        ratios = []
        for name in names[1:]:
            theirs = cells.get((name, workload))
            if theirs:
                their_ops = statistics.median(r["ok_ops_per_s"] for r in theirs)
                ratios.append(f"{name} {mine_ops / max(1e-9, their_ops):.2f}x")
        print(f"  {workload:<11}" + ", ".join(ratios))
    print("\nstart-up (launch to first answer) and idle RSS:")
    for server in servers:
        print(f"  {server.name:<14} {server.startup_s * 1000:7.0f} ms  {server.idle_rss_mb:7.1f} MB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default="put,get,update,query,batchwrite,scan,mixed")
    parser.add_argument("--peers", default="moto,dynalite,ceiling", help="comma list of moto,dynalite,ceiling")
    parser.add_argument("--workers", default="2", help="OpenDDB --workers; a comma list runs several OpenDDBs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--connections", default="32")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / f"run-{int(time.time())}.jsonl"))
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as data_dir:
        servers = start_servers(args, data_dir)
        try:
            command = [sys.executable, str(BENCH / "run_matrix.py"), "--out", str(out), "--rounds",
                       str(args.rounds), "--duration", str(args.duration), "--connections", args.connections]
            # The ceiling server answers every request with {}: it is only meaningful for the trivial `ping`
            # workload, which every server runs so that each figure can be read against the ceiling.
            stores = [server for server in servers if server.name != "ceiling"]
            workloads = [w for w in args.workloads.split(",") if w != "ping"]
            if workloads:
                matrix = [*command, "--workloads", ",".join(workloads)]
                for server in stores:
                    matrix += ["--server", server.spec]
                subprocess.run([*matrix, "--", "--uvloop"], check=False)
            if len(stores) < len(servers) or "ping" in args.workloads.split(","):
                ping = [*command, "--workloads", "ping"]
                for server in servers:
                    ping += ["--server", server.spec]
                subprocess.run([*ping, "--", "--uvloop"], check=False)
            summarize(out, servers)
        finally:
            for server in servers:
                server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
