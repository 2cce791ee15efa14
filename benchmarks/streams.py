#!/usr/bin/env python3
"""Streams benchmark (issue 23): what a NEW_AND_OLD_IMAGES stream costs writes, and GetRecords throughput.

    python benchmarks/streams.py                                   # HEAD~1 as baseline, 3 rounds x 5 s
    python benchmarks/streams.py --baseline main~3 --rounds 5 --duration 10
    python benchmarks/streams.py --rounds 1 --duration 2           # a quick check

Two OpenDDB servers run side by side, each on a fresh temporary data dir and a free loopback port: "new", the
current tree (working copy included), and "baseline", the git revision `--baseline` checked out with `git worktree
add --detach` in a temporary dir (removed at the end). Each round runs every workload on every server, the server
order rotating each round, so both see the same noise of a shared machine (`--together`: both driven at the
same time, closer still); figures are medians over rounds.

Workloads, `--duration` seconds each after a `--warmup`, from `--connections` keep-alive connections with one
request in flight each: put, update (`SET #c = #c + :one`), get, and query (one partition of 10 items) on a table
without a stream, then put and update on a table with a NEW_AND_OLD_IMAGES stream (where the server refuses such a
table, as servers before streams do, those rows are n/a). Both tables hold `--items` ~200-byte items (pk
`p<i // 10>`, sk `<i % 10>`), loaded before the first round. After each put on the streamed table, the whole stream is
read through the Streams API (DescribeStream, GetShardIterator TRIM_HORIZON per shard, GetRecords Limit 1000 until
a call returns no records): records/s, beside the put rate.

It runs from a clone alone, on the repository's client (ddbclient.py: HTTP/1.1 keep-alive on asyncio, uvloop if
importable), each request with one well-formed SigV4 Authorization header signed once, which OpenDDB parses but
does not verify (so the client's HMAC per request does not bound the figures).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import orjson
from ddbclient import Connection, DynamoError, Endpoint, cpu_seconds, error_of, processes_cpu_seconds
from servers import free_port

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
DYNAMODB = "DynamoDB_20120810."
STREAMS = "DynamoDBStreams_20120810."
PLAIN, STREAMED = "bench-plain", "bench-streamed"
PARTITION = 10  # items per partition key: what one query reads
DATA = ("abcdefghijklmnopqrstuvwxyz0123456789" * 5)[:150]  # with the keys and counters: ~200-byte items


@dataclass
class Server:
    """One `openddb serve` from the sources under `src`, in its own process group so it is stopped whole."""

    name: str
    src: Path
    data_dir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    streams: bool = False  # whether it accepted a table with a stream
    log: Path | None = None

    def start(self, workers: int, log_level: str = "warning", extra: tuple[str, ...] = ()) -> None:
        self.data_dir.mkdir(parents=True)
        self.log = self.data_dir.with_suffix(".log")
        command = [sys.executable, "-m", "openddb", "serve", "--port", str(self.port), "--data-dir",
                   str(self.data_dir), "--workers", str(workers), "--log-level", log_level, *extra]
        env = {**os.environ, "PYTHONPATH": str(self.src)}
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.data_dir)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until ListTables answers; RuntimeError (with the server's log) if it exits or never answers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.process.returncode}):\n{self.log_tail()}")
            try:
                asyncio.run(_list_tables(self.port))
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log and self.log.exists() else ""

    def stop(self) -> None:
        """SIGTERM to the server's process group (supervisor and workers), SIGKILL if it lingers."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(process.pid, sig)
                process.wait(wait)
                return
            except ProcessLookupError:
                return
            except subprocess.TimeoutExpired:
                continue


def connect(port: int) -> Connection:
    """A connection to a local server (signed once: see ddbclient.Endpoint)."""
    return Connection(Endpoint(f"http://127.0.0.1:{port}", sign=False))


async def _list_tables(port: int) -> None:
    connection = connect(port)
    try:
        await connection.json(DYNAMODB + "ListTables", {})
    finally:
        connection.close()


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


def add_worktree(revision: str, parent: str) -> tuple[Path, str]:
    """A detached worktree of `revision` under `parent`, and the revision's short hash."""
    commit = git("rev-parse", "--short", f"{revision}^{{commit}}")
    path = Path(parent) / f"baseline-{commit}"
    git("worktree", "add", "--detach", str(path), commit)
    return path, commit


# --------------------------------------------------------------------------------------------------- workloads

@dataclass
class Sample:
    """One workload on one server in one round (latencies in ms, of the answered requests after the warm-up)."""

    round: int
    server: str
    workload: str
    ops: int
    seconds: float
    errors: dict[str, int]
    p50_ms: float
    p99_ms: float
    client_cpu: float  # % of one core used by this client during the run
    server_us: float = 0.0  # server CPU (all its processes) per answered request, warm-up included, in µs
    stream_records: int | None = None  # put-stream only: records in the whole stream, read after the run
    stream_calls: int | None = None
    stream_seconds: float | None = None

    @property
    def rate(self) -> float:
        return self.ops / self.seconds if self.seconds else 0.0

    @property
    def stream_rate(self) -> float | None:
        if self.stream_records is None or not self.stream_seconds:
            return None
        return self.stream_records / self.stream_seconds


# label -> (operation, table): the "-stream" rows run on the table with a NEW_AND_OLD_IMAGES stream
WORKLOADS: dict[str, tuple[str, str]] = {
    "put": ("PutItem", PLAIN), "update": ("UpdateItem", PLAIN), "get": ("GetItem", PLAIN),
    "query": ("Query", PLAIN), "put-stream": ("PutItem", STREAMED), "update-stream": ("UpdateItem", STREAMED)}


def item_json(index: int, version: int) -> bytes:
    """Item `index` (~200 bytes); `version` differs on every put, so each put changes the item (and so writes a
    stream record: a write that changes nothing writes none)."""
    return (b'{"pk":{"S":"p%d"},"sk":{"S":"%d"},"c":{"N":"0"},"v":{"N":"%d"},"data":{"S":"%s"}}'
            % (index // PARTITION, index % PARTITION, version, DATA.encode()))


def request_maker(operation: str, table: str, items: int) -> tuple[Callable[[], bytes], bytes | None]:
    """A function making the next request body of `operation` on a random item or partition, and a piece every
    good answer holds (None: any 200 will do)."""
    name = table.encode()
    pick = random.randrange
    versions = iter(range(1, 1 << 62))
    if operation == "PutItem":
        return lambda: b'{"TableName":"%s","Item":%s}' % (name, item_json(pick(items), next(versions))), None
    key = b'{"TableName":"%s","Key":{"pk":{"S":"p%d"},"sk":{"S":"%d"}}'
    if operation == "UpdateItem":
        update = (b',"UpdateExpression":"SET #c = #c + :one","ExpressionAttributeNames":{"#c":"c"},'
                  b'"ExpressionAttributeValues":{":one":{"N":"1"}}}')

        def make_update() -> bytes:
            index = pick(items)
            return key % (name, index // PARTITION, index % PARTITION) + update
        return make_update, None
    if operation == "GetItem":
        def make_get() -> bytes:
            index = pick(items)
            return key % (name, index // PARTITION, index % PARTITION) + b"}"
        return make_get, b'"Item"'
    query = b'{"TableName":"%s","KeyConditionExpression":"pk = :p","ExpressionAttributeValues":{":p":{"S":"p%d"}}}'
    partitions = max(1, items // PARTITION)
    return lambda: query % (name, pick(partitions)), b'"Count":%d' % PARTITION


def group_cpu_seconds(group: int) -> float:
    """CPU seconds of every live process in process group `group` (a server's supervisor and workers)."""
    return processes_cpu_seconds(lambda pid, fields: int(fields[2]) == group)


def percentile_ms(ordered: list[float], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000 if ordered else 0.0


async def drive(port: int, label: str, round_: int, server: str, args: argparse.Namespace,
                group: int = 0, also: Callable[[], float] | None = None) -> Sample:
    """Run workload `label` from `args.connections` connections for warm-up + duration seconds; requests begun
    during the warm-up are not counted in the rate (they are in the server's CPU per request, over process group
    `group`, plus the CPU seconds `also` counts: a PostgreSQL server's, whose backends do part of the work)."""
    operation, table = WORKLOADS[label]
    make, expect = request_maker(operation, table, args.items)
    target = DYNAMODB + operation
    connections = [connect(port) for _ in range(args.connections)]
    latencies: list[float] = []
    errors: dict[str, int] = {}
    answered = [0]
    start = time.perf_counter()
    measure_from = start + args.warmup
    stop = measure_from + args.duration

    async def worker(connection: Connection) -> None:
        try:
            while (began := time.perf_counter()) < stop:
                try:
                    status, body = await connection.call(target, make())
                except ConnectionError:
                    status, body = 0, b"connection lost"
                    connection.close()
                    connection = connect(port)
                answered[0] += status == 200
                if began < measure_from:
                    continue
                if status == 200 and (expect is None or expect in body):
                    latencies.append(time.perf_counter() - began)
                else:
                    kind = error_of(status, body).error_type or body[:80].decode("utf-8", "replace")
                    errors[f"{status} {kind}"] = errors.get(f"{status} {kind}", 0) + 1
        finally:
            connection.close()

    def server_seconds() -> float:
        return group_cpu_seconds(group) + (also() if also is not None else 0.0)

    cpu, server_cpu = cpu_seconds(), server_seconds()
    try:
        await asyncio.gather(*(worker(connection) for connection in connections))
    finally:
        for connection in connections:
            connection.close()
    cpu_share = 100 * (cpu_seconds() - cpu) / (time.perf_counter() - start)
    server_us = 1e6 * (server_seconds() - server_cpu) / max(1, answered[0])
    latencies.sort()
    return Sample(round_, server, label, len(latencies), args.duration, errors, percentile_ms(latencies, 0.5),
                  percentile_ms(latencies, 0.99), cpu_share, server_us)


# ------------------------------------------------------------------------------------------ setup and streams

async def create_table(connection: Connection, table: str, stream: bool) -> None:
    """Create `table` (pk S, sk S; on demand), with a NEW_AND_OLD_IMAGES stream if `stream`; wait until ACTIVE."""
    request: dict[str, Any] = {
        "TableName": table, "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                                 {"AttributeName": "sk", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]}
    if stream:
        request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    await connection.json(DYNAMODB + "CreateTable", request)
    while (await connection.json(DYNAMODB + "DescribeTable", {"TableName": table}))["Table"]["TableStatus"] \
            != "ACTIVE":
        await asyncio.sleep(0.05)


async def load(port: int, table: str, items: int, connections: int) -> None:
    """Write items 0..items-1 to `table` by BatchWriteItem of 25, resending anything left unprocessed."""
    batches = iter(range(0, items, 25))

    async def worker() -> None:
        connection = connect(port)
        try:
            for first in batches:
                requests = [{"PutRequest": {"Item": orjson.loads(item_json(index, 0))}}
                            for index in range(first, min(items, first + 25))]
                pending: dict[str, Any] = {table: requests}
                while pending:
                    answer = await connection.json(DYNAMODB + "BatchWriteItem", {"RequestItems": pending})
                    pending = answer.get("UnprocessedItems") or {}
        finally:
            connection.close()

    await asyncio.gather(*(worker() for _ in range(connections)))


async def prepare(server: Server, args: argparse.Namespace) -> None:
    """The tables the workloads use on `server`, loaded; `server.streams` tells whether it took the table with a
    stream. Without a workload on the streamed table it has none: the store then has no stream at all, as a
    user's who has none (an engine may spend something on every write once a store has one)."""
    connection = connect(server.port)
    try:
        await create_table(connection, PLAIN, stream=False)
        if any(WORKLOADS[label][1] == STREAMED for label in args.workloads):
            try:
                await create_table(connection, STREAMED, stream=True)
                server.streams = True
            except DynamoError as error:
                if error.error_type != "ValidationException":
                    raise
                print(f"{server.name}: no table with a stream ({error}); its stream rows are n/a", flush=True)
    finally:
        connection.close()
    for table in (PLAIN, STREAMED) if server.streams else (PLAIN,):
        await load(server.port, table, args.items, args.connections)


async def shard_ids(connection: Connection, arn: str) -> list[str]:
    """Every shard of the stream, following DescribeStream's LastEvaluatedShardId."""
    shards: list[str] = []
    request: dict[str, Any] = {"StreamArn": arn}
    while True:
        description = (await connection.json(STREAMS + "DescribeStream", request))["StreamDescription"]
        shards += [shard["ShardId"] for shard in description.get("Shards", ())]
        if not description.get("LastEvaluatedShardId"):
            return shards
        request["ExclusiveStartShardId"] = description["LastEvaluatedShardId"]


async def read_stream(port: int, table: str) -> tuple[int, int, float]:
    """Read `table`'s whole stream from TRIM_HORIZON, shard after shard, each until GetRecords returns no records
    (or a closed shard ends): (records, GetRecords calls, seconds)."""
    connection = connect(port)
    try:
        start = time.perf_counter()
        arn = (await connection.json(DYNAMODB + "DescribeTable", {"TableName": table}))["Table"]["LatestStreamArn"]
        records = calls = 0
        for shard in await shard_ids(connection, arn):
            iterator = (await connection.json(STREAMS + "GetShardIterator", {
                "StreamArn": arn, "ShardId": shard, "ShardIteratorType": "TRIM_HORIZON"}))["ShardIterator"]
            while iterator:
                page = await connection.json(STREAMS + "GetRecords", {"ShardIterator": iterator, "Limit": 1000})
                calls += 1
                if not page.get("Records"):
                    break
                records += len(page["Records"])
                iterator = page.get("NextShardIterator")
        return records, calls, time.perf_counter() - start
    finally:
        connection.close()


# ------------------------------------------------------------------------------------------------------ rounds

async def run_rounds(servers: list[Server], args: argparse.Namespace, samples: list[Sample],
                     save: Callable[[Sample], None]) -> None:
    """Prepare both servers, then each round run every workload on every server, the order rotating per round."""
    for server in servers:
        started = time.perf_counter()
        await prepare(server, args)
        print(f"{server.name}: tables loaded ({args.items} items each) in {time.perf_counter() - started:.1f} s",
              flush=True)
    for round_ in range(args.rounds):
        shift = round_ % len(servers)
        order = servers[shift:] + servers[:shift]
        for label in args.workloads:
            running = [server for server in order if WORKLOADS[label][1] != STREAMED or server.streams]
            if args.together:  # (both at once: each meets the same moments of the machine's other load)
                found = await asyncio.gather(*(_drive(server, label, round_, args) for server in running))
            else:
                found = [await _drive(server, label, round_, args) for server in running]
            for sample in found:
                samples.append(sample)
                save(sample)
                print(progress_line(sample), flush=True)


async def _drive(server: Server, label: str, round_: int, args: argparse.Namespace) -> Sample:
    """One workload on one server in one round (with the stream read after it, for put-stream)."""
    assert server.process is not None
    sample = await drive(server.port, label, round_ + 1, server.name, args, server.process.pid)
    if label == "put-stream":
        sample.stream_records, sample.stream_calls, sample.stream_seconds = await read_stream(server.port, STREAMED)
    return sample


def progress_line(sample: Sample) -> str:
    line = (f"round {sample.round}  {sample.workload:<13} {sample.server:<9} {sample.rate:>9,.0f} ops/s  "
            f"p50 {sample.p50_ms:6.2f} ms  p99 {sample.p99_ms:6.2f} ms  server {sample.server_us:5.1f} µs CPU/op  "
            f"client CPU {sample.client_cpu:3.0f}%")
    if sample.errors:
        line += f"  errors {sample.errors}"
    if sample.stream_rate is not None:
        line += (f"\n        GetRecords: {sample.stream_records:,} records in {sample.stream_calls} calls, "
                 f"{sample.stream_seconds:.2f} s = {sample.stream_rate:,.0f} records/s")
    return line


# ------------------------------------------------------------------------------------------------------ report

def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _figures(samples: list[Sample], server: str, label: str) -> tuple[float, float, float] | None:
    """Median ops/s, p50 and p99 over rounds of `label` on `server`."""
    runs = [s for s in samples if s.server == server and s.workload == label]
    if not runs:
        return None
    return (statistics.median(s.rate for s in runs), statistics.median(s.p50_ms for s in runs),
            statistics.median(s.p99_ms for s in runs))


def _ratio(samples: list[Sample], top: tuple[str, str], bottom: tuple[str, str]) -> float | None:
    """Median over rounds of the per-round ratio of two (server, workload) rates: pairing runs of one round
    cancels the drift of a shared machine's load between rounds."""
    rates = {(s.round, s.server, s.workload): s.rate for s in samples}
    ratios = [rates[(round_, *top)] / rate for (round_, *key), rate in rates.items()
              if tuple(key) == bottom and rate and (round_, *top) in rates]
    return _median(ratios)


def _cells(figures: tuple[float, float, float] | None) -> list[str]:
    if figures is None:
        return ["n/a", "n/a", "n/a"]
    return [f"{figures[0]:,.0f}", f"{figures[1]:.2f}", f"{figures[2]:.2f}"]


def _ratio_cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _cpu_cell(samples: list[Sample], server: str, label: str) -> str:
    cpu = _median([s.server_us for s in samples if s.server == server and s.workload == label and s.server_us])
    return "n/a" if cpu is None else f"{cpu:.1f}"


def report(samples: list[Sample], labels: list[str]) -> str:
    """The markdown table of medians and ratios, then GetRecords beside put on the streamed table."""
    lines = ["| workload | table | new ops/s | new p50 ms | new p99 ms | baseline ops/s | baseline p50 ms "
             "| baseline p99 ms | new/baseline | streamed/stream-less, new | streamed/stream-less, baseline "
             "| server CPU µs/op, new | server CPU µs/op, baseline |",
             "|" + " --- |" * 13]
    for label in labels:
        streamed = WORKLOADS[label][1] == STREAMED
        plain = label.removesuffix("-stream")
        row = [plain, "NEW_AND_OLD_IMAGES stream" if streamed else "no stream",
               *_cells(_figures(samples, "new", label)), *_cells(_figures(samples, "baseline", label)),
               _ratio_cell(_ratio(samples, ("new", label), ("baseline", label)))]
        row += [_ratio_cell(_ratio(samples, (server, label), (server, plain))) if streamed else ""
                for server in ("new", "baseline")]
        row += [_cpu_cell(samples, server, label) for server in ("new", "baseline")]
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines += stream_reads(samples)
    cpu = max((s.client_cpu for s in samples), default=0.0)
    errors = sum(sum(s.errors.values()) for s in samples)
    lines.append(f"Medians over rounds; ratios are medians of per-round ratios. Client CPU at most {cpu:.0f}% "
                 f"of one core; {errors} errors.")
    return "\n".join(lines)


def stream_reads(samples: list[Sample]) -> list[str]:
    """Per server: GetRecords records/s (one reader, whole stream from TRIM_HORIZON) beside its put rate on the
    streamed table."""
    lines = []
    for server in ("new", "baseline"):
        reads = [s for s in samples if s.server == server and s.stream_rate is not None]
        if not reads:
            continue
        rate = statistics.median(s.stream_rate or 0.0 for s in reads)
        put = statistics.median(s.rate for s in reads)
        lines.append(f"GetRecords, {server}: {rate:,.0f} records/s beside put on the streamed table at {put:,.0f} "
                     f"ops/s ({rate / put if put else 0:.1f}x; median of {len(reads)}; one reader, the whole stream "
                     f"from TRIM_HORIZON with Limit 1000, last pass {reads[-1].stream_records:,} records in "
                     f"{reads[-1].stream_calls} calls).")
    return lines


# -------------------------------------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--baseline", default="HEAD~1", help="git revision to compare with (default HEAD~1)")
    parser.add_argument("--workers", type=int, default=1, help="server processes per server (default 1)")
    parser.add_argument("--log-level", default="warning", choices=("info", "warning"),
                        help="both servers' --log-level (default warning: no request log; info: one line a request)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--duration", type=float, default=5.0, help="measured seconds per run (default 5)")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds before each (default 1)")
    parser.add_argument("-c", "--connections", type=int, default=32, help="keep-alive connections (default 32)")
    parser.add_argument("--items", type=int, default=10_000, help="items per table (default 10000)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated, of {', '.join(WORKLOADS)} (default all)")
    parser.add_argument("--new-args", default="", metavar="ARGS",
                        help='more `openddb serve` options for the new server only (e.g. "--advisor on" with '
                             "--baseline HEAD: one option on against off in one run)")
    parser.add_argument("--baseline-args", default="", metavar="ARGS",
                        help='more `openddb serve` options for the baseline server only (e.g. "--advisor off" with '
                             '--baseline HEAD and --new-args="--advisor on")')
    parser.add_argument("--together", action="store_true",
                        help="drive both servers at the same time, each from its own --connections, instead of one "
                             "after the other: on a machine shared with other loads both meet the same moments of "
                             "it, so their CPU per request compares closely (their ops/s are each about half of "
                             "one alone's: the two share the machine)")
    parser.add_argument("--no-save", action="store_true", help="write no JSON lines under benchmarks/results/")
    args = parser.parse_args(argv)
    args.workloads = [label.strip() for label in args.workloads.split(",") if label.strip()]
    unknown = [label for label in args.workloads if label not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    if args.items < PARTITION:
        parser.error(f"--items must be at least {PARTITION}")
    return args


def use_uvloop() -> str:
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


def check_source(src: Path) -> None:
    """Fail unless `python -m openddb` with PYTHONPATH=src runs the code under `src` (not an installed copy)."""
    found = subprocess.run([sys.executable, "-c", "import openddb; print(openddb.__file__)"], check=True,
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(src)}).stdout
    if not Path(found.strip()).resolve().is_relative_to(src.resolve()):
        raise RuntimeError(f"PYTHONPATH={src} imports openddb from {found.strip()}")


def results_writer(args: argparse.Namespace, run: dict[str, Any]) -> tuple[Callable[[Sample], None], Path | None]:
    """A function appending one sample as a JSON line (with the run's settings) to a new file under
    benchmarks/results/ (git-ignored), and that file; a no-op with --no-save."""
    if args.no_save:
        return lambda sample: None, None
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"streams-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"

    def save(sample: Sample) -> None:
        with path.open("ab") as out:
            out.write(orjson.dumps({**run, **asdict(sample), "rate": sample.rate,
                                    "stream_rate": sample.stream_rate}) + b"\n")
    return save, path


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # SIGTERM stops the run as Ctrl-C does, through SIGINT's handler: inside the event loop that is asyncio.run's,
    # which cancels the run (an exception raised here could land in a protocol callback, which the loop only logs).
    signal.raise_signal(signal.SIGINT)


def describe_new() -> str:
    dirty = git("status", "--porcelain", "--untracked-files=all", "--", "src")
    return git("rev-parse", "--short", "HEAD") + (" + uncommitted changes under src/" if dirty else "")


def run(args: argparse.Namespace, samples: list[Sample], tmp: str, loop_name: str) -> Path | None:
    """Start both servers, run the rounds, and always stop the servers and remove the worktree."""
    servers: list[Server] = []
    worktree: Path | None = None
    try:
        worktree, commit = add_worktree(args.baseline, tmp)
        info = {"new": describe_new(), "baseline": f"{args.baseline} ({commit})", "workers": args.workers,
                "connections": args.connections, "duration": args.duration, "items": args.items, "loop": loop_name}
        print(f"new: {info['new']}; baseline: {info['baseline']}; --workers {args.workers}; {args.connections} "
              f"connections; {args.rounds} rounds x {args.duration:g} s (+{args.warmup:g} s warm-up); {loop_name}",
              flush=True)
        save, path = results_writer(args, info)
        servers = [Server("new", ROOT / "src", Path(tmp) / "data-new"),
                   Server("baseline", worktree / "src", Path(tmp) / "data-baseline")]
        for server in servers:
            check_source(server.src)
            server.start(args.workers, args.log_level,
                         tuple(shlex.split(args.new_args if server.name == "new" else args.baseline_args)))
        for server in servers:
            server.wait_ready()
        asyncio.run(run_rounds(servers, args, samples, save))
        return path
    finally:
        for server in servers:
            server.stop()
        if worktree is not None:
            git("worktree", "remove", "--force", str(worktree))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    loop_name = use_uvloop()
    # Ctrl-C (even where the shell started us ignoring SIGINT, as in a background job) and SIGTERM both end the
    # run through KeyboardInterrupt, so the `finally` that stops the servers runs.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    samples: list[Sample] = []
    status = 0
    path: Path | None = None
    with tempfile.TemporaryDirectory(prefix="openddb-streams-bench-") as tmp:
        try:
            path = run(args, samples, tmp, loop_name)
        except KeyboardInterrupt:
            print("\ninterrupted: servers stopped" + ("; the figures so far:" if samples else ""), file=sys.stderr)
            status = 130
        except (RuntimeError, DynamoError, OSError, subprocess.CalledProcessError) as error:
            detail = error.stderr if isinstance(error, subprocess.CalledProcessError) else ""
            print(f"\nfailed: {error} {detail}", file=sys.stderr)
            status = 1
    if samples:
        print("\n" + report(samples, args.workloads))
    if path is not None:
        print(f"\nraw figures: {path.relative_to(ROOT)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
