"""Security benchmark (issue 25): what HTTPS (`--tls-cert/--tls-key`), signature checks (`--auth verify`) and
authorization by identity policies cost get and put, against a plain server, one run.

    python benchmarks/security.py                   # 3 interleaved rounds x 5 s of get and put
    python benchmarks/security.py --rounds 5 --duration 10 --variants https,verify --workers 2
    python benchmarks/security.py --variants verify,policy --baseline main --workloads get,put,update,query

Servers of the current tree: "plain" (HTTP, --auth off), "https" (a pair made by `openddb cert` in a temporary dir),
"verify" (--auth verify with the client's key as root credentials: signatures checked, no policy evaluated, as the
root may do anything) and "policy" (--auth verify, the client signing as an IAM user made through IAM on the same
port, whose inline policy allows the workloads' actions on the table and denies table deletion: every call evaluated
against it), each with its table loaded the same way; then, round after round, each workload on each server in turn,
from keep-alive connections (TLS sessions set up once per connection, as SDK clients keep them). The client signs
every request anew for every server, so the servers differ only in what they do. Reports ops/s, p50/p99 and the
server's CPU per request (robust on a shared machine). Servers are always stopped.

With `--together`, a round drives every server at the same time (each from its own `-c` connections, one client
process) instead of one after another: on a shared machine whose load swings from one drive to the next, a round's
figures then meet the same conditions, and the per-round ratios compare like with like (CPU/op is still the robust
figure; ops/s is bounded by the one client when it is near 100%).

With `--baseline REV`, the plain server and each variant also run from that git revision (checked out with `git
worktree add --detach` in a temporary dir, removed at the end), as "<variant>@base", in the same rounds, each
compared with the baseline's plain server: a change's cost or saving on verification measured side by side with
what it replaces.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3
import orjson
from ddbclient import Connection, Endpoint, cpu_seconds, fast_loop, median, percentile_ms, processes_cpu_seconds
from servers import free_port
from sigv4 import Signer
from streams import PARTITION, add_worktree, check_source, git, item_json, request_maker

ROOT = Path(__file__).resolve().parent.parent
TABLE = "bench-security"
VARIANTS = ("https", "verify", "policy")
# The "policy" variant's user's policy: the actions of the workloads on the table and its indexes, a Deny besides.
POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query",
                                   "dynamodb:DescribeTable"],
     "Resource": [f"arn:aws:dynamodb:*:*:table/{TABLE}", f"arn:aws:dynamodb:*:*:table/{TABLE}/index/*"]},
    {"Effect": "Deny", "Action": "dynamodb:DeleteTable", "Resource": "*"}]}
OPERATIONS = {"get": "GetItem", "put": "PutItem", "update": "UpdateItem", "query": "Query"}


class Server:
    """An `openddb serve` of this tree in its own process group, plain or HTTPS."""

    def __init__(self, name: str, tmp: Path, workers: int, tls: tuple[str, str] | None = None,
                 verify: bool = False, src: Path = ROOT / "src") -> None:
        self.name, self.port = name, free_port()
        self.key: tuple[str, str] | None = None  # the access key its workloads sign with (None: the bench root's)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "openddb", "serve", "--port", str(self.port), "--data-dir",
                   str(tmp / f"data-{name.replace('@', '-')}"), "--workers", str(workers), "--log-level", "warning"]
        if tls:
            command += ["--tls-cert", tls[0], "--tls-key", tls[1]]
        if verify:  # (the benchmark client's key: see sigv4.Signer)
            command += ["--auth", "verify", "--root-credentials", "bench:bench"]
        self.log = (tmp / f"{name}.log").open("wb")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT,
                                        start_new_session=True, env={**os.environ, "PYTHONPATH": str(src)})

    def cpu(self) -> float:
        group = self.process.pid
        return processes_cpu_seconds(lambda pid, fields: int(fields[2]) == group)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()


async def ready(server: Server, items: int) -> None:
    """Wait until it answers; create and load its table."""
    for _ in range(400):
        try:
            connection = Connection(Endpoint(server.url))
            await connection.json("ListTables", {})
            break
        except OSError:
            await asyncio.sleep(0.05)
    else:
        raise RuntimeError(f"{server.name} did not start")
    await connection.json("CreateTable", {
        "TableName": TABLE, "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                                 {"AttributeName": "sk", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]})
    for first in range(0, items, 25):
        puts = [{"PutRequest": {"Item": orjson.loads(item_json(index, 0))}}
                for index in range(first, min(items, first + 25))]
        await connection.json("BatchWriteItem", {"RequestItems": {TABLE: puts}})
    connection.close()


def policy_user(server: Server) -> tuple[str, str]:
    """A user made through IAM on the server's port (boto3, set-up only), with POLICY; its access key."""
    iam = boto3.client("iam", endpoint_url=server.url, region_name="us-east-1", aws_access_key_id="bench",
                       aws_secret_access_key="bench")
    iam.create_user(UserName="bench-user")
    iam.put_user_policy(UserName="bench-user", PolicyName="workloads", PolicyDocument=orjson.dumps(POLICY).decode())
    key = iam.create_access_key(UserName="bench-user")["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


def endpoint(server: Server) -> Endpoint:
    """An endpoint of the server, signing with its workloads' key."""
    made = Endpoint(server.url)
    if server.key is not None:
        made.signer = Signer(made.host_header, *server.key)
    return made


async def drive(server: Server, label: str, args: argparse.Namespace) -> dict[str, float]:
    operation = OPERATIONS[label]
    make, _ = request_maker(operation, TABLE, args.items)
    connections = [Connection(endpoint(server)) for _ in range(args.connections)]
    for connection in connections:  # (handshakes before the clock starts: SDKs keep their connections)
        await connection.json("DescribeTable", {"TableName": TABLE})
    latencies: list[float] = []
    errors = [0]
    stop = time.perf_counter() + args.duration

    async def worker(connection: Connection) -> None:
        while (began := time.perf_counter()) < stop:
            status, _ = await connection.call(operation, make())
            if status == 200:
                latencies.append(time.perf_counter() - began)
            else:
                errors[0] += 1

    server_cpu, client_cpu, start = server.cpu(), cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(worker(connection) for connection in connections))
    elapsed = time.perf_counter() - start
    for connection in connections:
        connection.close()
    return {"rate": len(latencies) / elapsed, "p50": percentile_ms(latencies, 0.5),
            "p99": percentile_ms(latencies, 0.99), "cpu_us": 1e6 * (server.cpu() - server_cpu) / max(1, len(latencies)),
            "client": 100 * (cpu_seconds() - client_cpu) / elapsed, "errors": errors[0]}


async def rounds(servers: list[Server], args: argparse.Namespace) -> dict[tuple[str, str], list[dict[str, float]]]:
    for server in servers:
        await ready(server, args.items)
        if server.name.startswith("policy"):
            server.key = policy_user(server)
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for round_ in range(1, args.rounds + 1):
        for label in args.workloads:
            order = servers if round_ % 2 or args.together else list(reversed(servers))
            if args.together:  # (every server at once: a round's figures share the machine's conditions)
                measured = await asyncio.gather(*(drive(server, label, args) for server in order))
            else:
                measured = [await drive(server, label, args) for server in order]
            for server, figures in zip(order, measured, strict=True):
                results.setdefault((label, server.name), []).append(figures)
                print(f"round {round_}  {label:6} {server.name:6} {figures['rate']:>9,.0f} ops/s  p50 "
                      f"{figures['p50']:5.2f} ms  p99 {figures['p99']:6.2f} ms  server {figures['cpu_us']:6.1f} µs "
                      f"CPU/op  client CPU {figures['client']:3.0f}%  errors {figures['errors']:.0f}", flush=True)
    return results


def report(results: dict[tuple[str, str], list[dict[str, float]]], labels: list[str]) -> str:
    lines = ["| workload | server | ops/s | p50 ms | p99 ms | µs CPU/op | ops/s against plain | CPU/op against plain |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    names = list(dict.fromkeys(name for _, name in results))  # (the servers' order: plain first)
    for label in labels:
        for name in names:
            runs = results[(label, name)]
            plain = results[(label, "plain@base" if name.endswith("@base") else "plain")]
            ratio = median([run["rate"] / base["rate"] for run, base in zip(runs, plain) if base["rate"]])
            cpu = median([run["cpu_us"] / base["cpu_us"] for run, base in zip(runs, plain) if base["cpu_us"]])
            lines.append(f"| {label} | {name} | {median([run['rate'] for run in runs]):,.0f} | "
                         f"{median([run['p50'] for run in runs]):.2f} | {median([run['p99'] for run in runs]):.2f} | "
                         f"{median([run['cpu_us'] for run in runs]):.1f} | {ratio:.3f} | {cpu:.3f} |")
    return "\n".join(lines) + "\n\nMedians over rounds; the ratio is the median of per-round ratios."


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("-c", "--connections", type=int, default=32)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--workloads", default="get,put")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="servers besides plain: https, verify, policy")
    parser.add_argument("--baseline", metavar="REV", help="also run each variant from this git revision")
    parser.add_argument("--together", action="store_true",
                        help="drive every server at once, each from its own connections (-c each), instead of in "
                             "turn: on a busy machine a round's figures then share its conditions")
    args = parser.parse_args()
    args.workloads = args.workloads.split(",")
    args.variants = args.variants.split(",")
    assert all(variant in VARIANTS for variant in args.variants), f"variants: {', '.join(VARIANTS)}"
    assert all(label in OPERATIONS for label in args.workloads), f"workloads: {', '.join(OPERATIONS)}"
    assert args.items % PARTITION == 0
    fast_loop()
    signal.signal(signal.SIGTERM, _interrupt)
    servers: list[Server] = []
    worktree: Path | None = None
    with tempfile.TemporaryDirectory(prefix="openddb-security-bench-") as tmp:
        try:
            made = subprocess.run([sys.executable, "-m", "openddb", "cert", "--out", f"{tmp}/tls"], cwd=ROOT,
                                  capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
            if made.returncode:
                raise RuntimeError(made.stderr)
            pair = (f"{tmp}/tls/openddb-cert.pem", f"{tmp}/tls/openddb-key.pem")
            sources = [("", ROOT / "src")]
            if args.baseline:
                worktree, commit = add_worktree(args.baseline, tmp)
                print(f"baseline: {args.baseline} ({commit})", flush=True)
                sources.append(("@base", worktree / "src"))
            servers = [Server("plain", Path(tmp), args.workers)]
            for suffix, src in sources:
                check_source(src)
                if suffix:  # (the baseline's plain server too: a change to the path every server runs shows)
                    servers.append(Server("plain" + suffix, Path(tmp), args.workers, src=src))
                if "https" in args.variants:
                    servers.append(Server("https" + suffix, Path(tmp), args.workers, tls=pair, src=src))
                for name in ("verify", "policy"):
                    if name in args.variants:
                        servers.append(Server(name + suffix, Path(tmp), args.workers, verify=True, src=src))
            results = asyncio.run(rounds(servers, args))
        except KeyboardInterrupt:
            print("interrupted: servers stopped", file=sys.stderr)
            return 130
        finally:
            for server in servers:
                server.stop()
            if worktree is not None:
                git("worktree", "remove", "--force", str(worktree))
    print("\n" + report(results, args.workloads))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
