"""A small, fast DynamoDB client for the benchmark programs: raw HTTP/1.1 keep-alive on asyncio, SigV4 signed.

The signing is `sigv4.Signer` (equal to botocore's SigV4Auth byte for byte); this module adds
one-request-in-flight connections awaited from coroutines, JSON helpers for setup, and the server start-up helpers
of the programs here (built on servers.py's `Server` and `free_port`).
A connection answered with `Connection: close` (moto's werkzeug server) is reopened before its next request.
"""

from __future__ import annotations

import asyncio
import os
import resource
import ssl
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import orjson
from servers import PEERS_DIR, Server, ensure_peers, free_port
from sigv4 import Signer

TARGET = "DynamoDB_20120810."
CONTENT_TYPE = "application/x-amz-json-1.0"


class DynamoError(Exception):
    """A non-200 answer: HTTP status, the `__type` suffix after '#', and the message."""

    def __init__(self, status: int, error_type: str, message: str, body: bytes) -> None:
        super().__init__(f"HTTP {status} {error_type}: {message}")
        self.status, self.error_type, self.message, self.body = status, error_type, message, body


def error_of(status: int, body: bytes) -> DynamoError:
    """Parse an error answer into a DynamoError (tolerates non-JSON bodies)."""
    try:
        data = orjson.loads(body)
        kind = str(data.get("__type", "")).rsplit("#", 1)[-1]
        message = str(data.get("message", data.get("Message", "")))
    except (orjson.JSONDecodeError, AttributeError):
        kind, message = "", body[:200].decode("utf-8", "replace")
    return DynamoError(status, kind, message, body)


class Endpoint:
    """Where to send requests, and the pre-rendered request head per operation.

    `op` is an operation of DynamoDB (`GetItem`) or a whole X-Amz-Target (`DynamoDBStreams_20120810.GetRecords`).
    With `sign` off every request carries one well-formed Authorization header, signed once: OpenDDB parses
    signatures without verifying them, and a program comparing servers' write paths spares its client the
    per-request HMAC (which would otherwise bound the figures on a 2-core machine)."""

    def __init__(self, url: str, sign: bool = True) -> None:
        parsed = urlparse(url)
        self.host = parsed.hostname or "127.0.0.1"
        self.tls = parsed.scheme == "https"  # (the server's certificate is not checked: a benchmark, on loopback)
        self.port = parsed.port or (443 if self.tls else 80)
        self.host_header = f"{self.host}:{self.port}"
        self.signer = Signer(self.host_header)
        self._fixed = None if sign else self.signer.sig_lines(b"", b"")
        self._heads: dict[str, tuple[bytes, bytes]] = {}

    def build(self, op: str, body: bytes) -> bytes:
        """The full signed HTTP request for `op` with JSON `body`."""
        head = self._heads.get(op)
        if head is None:
            target = op if "." in op else TARGET + op
            head = self._heads[op] = (target.encode(), (f"POST / HTTP/1.1\r\nHost: {self.host_header}\r\n"
                                                        f"Content-Type: {CONTENT_TYPE}\r\nX-Amz-Target: {target}"
                                                        "\r\n").encode())
        lines = self._fixed or self.signer.sig_lines(head[0], body)
        return b"%s%sContent-Length: %d\r\n\r\n%s" % (head[1], lines, len(body), body)


class _Protocol(asyncio.Protocol):
    """Parses HTTP/1.1 responses (Content-Length or chunked) and resolves the waiting future."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.closed = False
        self.close_after = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's TCPTransport is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("connection lost with a request in flight"))

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        parsed = self._parse()
        if parsed is None:
            return
        status, body, end = parsed
        del self.buffer[:end]
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result((status, body))

    def _parse(self) -> tuple[int, bytes, int] | None:
        buffer = self.buffer
        head_end = buffer.find(b"\r\n\r\n")
        if head_end < 0:
            return None
        head = bytes(buffer[:head_end]).lower()
        status = int(head[9:12])
        self.close_after = b"\r\nconnection: close" in head or head.startswith(b"http/1.0")
        start = head_end + 4
        at = head.find(b"\r\ncontent-length:")
        if at >= 0:
            line_end = head.find(b"\r\n", at + 2)
            length = int(head[at + 17:line_end if line_end >= 0 else len(head)])
            if len(buffer) < start + length:
                return None
            return status, bytes(buffer[start:start + length]), start + length
        chunks, pos = [], start
        while True:  # chunked transfer encoding
            line_end = buffer.find(b"\r\n", pos)
            if line_end < 0:
                return None
            size = int(bytes(buffer[pos:line_end]).split(b";")[0], 16)
            if size == 0:
                if buffer.find(b"\r\n", line_end + 2) < 0:
                    return None
                return status, b"".join(chunks), buffer.find(b"\r\n", line_end + 2) + 2
            if len(buffer) < line_end + 4 + size:
                return None
            chunks.append(bytes(buffer[line_end + 2:line_end + 2 + size]))
            pos = line_end + 4 + size


def _unverified() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class Connection:
    """One keep-alive connection with one request in flight at a time."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.protocol: _Protocol | None = None
        self.reconnects = 0

    async def _connect(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.create_connection(_Protocol, self.endpoint.host, self.endpoint.port,
                                                           ssl=_unverified() if self.endpoint.tls else None)
        protocol.transport = transport  # uvloop may call connection_made only after create_connection returns
        if self.protocol is not None:
            self.reconnects += 1
        self.protocol = protocol
        return protocol

    async def call(self, op: str, body: bytes) -> tuple[int, bytes]:
        """Send one request; return (HTTP status, body). Raises ConnectionError if the connection drops."""
        protocol = self.protocol
        if protocol is None or protocol.closed or protocol.close_after:
            if protocol is not None and protocol.transport is not None:
                protocol.transport.close()
            protocol = await self._connect()
        waiter = protocol.waiter = asyncio.get_running_loop().create_future()
        assert protocol.transport is not None
        protocol.transport.write(self.endpoint.build(op, body))
        return await waiter

    async def json(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Send a JSON request; return the parsed answer or raise DynamoError."""
        status, body = await self.call(op, orjson.dumps(payload))
        if status != 200:
            raise error_of(status, body)
        result: dict[str, Any] = orjson.loads(body) if body else {}
        return result

    def close(self) -> None:
        if self.protocol is not None and self.protocol.transport is not None:
            self.protocol.transport.close()


async def recreate_table(conn: Connection, name: str, range_key: bool = True) -> None:
    """Drop `name` if it exists and create it anew (PAY_PER_REQUEST, pk S [+ sk S]); wait until ACTIVE."""
    try:
        await conn.json("DeleteTable", {"TableName": name})
        while True:
            await conn.json("DescribeTable", {"TableName": name})
            await asyncio.sleep(0.05)
    except DynamoError as error:
        if error.error_type != "ResourceNotFoundException":
            raise
    keys = [("pk", "HASH")] + ([("sk", "RANGE")] if range_key else [])
    await conn.json("CreateTable", {
        "TableName": name, "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": k, "AttributeType": "S"} for k, _ in keys],
        "KeySchema": [{"AttributeName": k, "KeyType": t} for k, t in keys]})
    while (await conn.json("DescribeTable", {"TableName": name}))["Table"].get("TableStatus") != "ACTIVE":
        await asyncio.sleep(0.05)


async def scan_all(conn: Connection, table: str) -> AsyncIterator[dict[str, Any]]:
    """Every item of `table`, following LastEvaluatedKey."""
    request: dict[str, Any] = {"TableName": table}
    while True:
        page = await conn.json("Scan", request)
        for item in page.get("Items", ()):
            yield item
        if "LastEvaluatedKey" not in page:
            return
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def percentile_ms(latencies: list[float], fraction: float) -> float:
    """The `fraction` percentile (nearest rank) of latencies in seconds, in milliseconds; 0 when empty."""
    if not latencies:
        return 0.0
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def fast_loop() -> None:
    """Use uvloop for the client when it is installed (so the client is not the bottleneck)."""
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def openddb_command(port: int, data_dir: str, workers: str | None) -> list[str]:
    """The command line of `openddb serve` on `data_dir` (workers None: OpenDDB's default)."""
    command = [sys.executable, "-m", "openddb", "serve", "--port", str(port), "--data-dir", data_dir,
               "--log-level", "warning"]
    return command + (["--workers", workers] if workers else [])


def peer_command(name: str, port: int, data_dir: str | None = None) -> list[str]:
    """The command line of a peer: moto's server, or dynalite (in memory, or on `data_dir` when given)."""
    if name == "moto":
        return ["moto_server", "-H", "127.0.0.1", "-p", str(port)]
    if name == "dynalite":
        cli = PEERS_DIR / "node_modules" / "dynalite" / "cli.js"
        return (["node", str(cli), "--host", "127.0.0.1", "--port", str(port), "--createTableMs", "0",
                 "--deleteTableMs", "0", "--updateTableMs", "0"] + (["--path", data_dir] if data_dir else []))
    raise ValueError(f"unknown server {name!r}: use openddb, moto or dynalite")


def start_server(name: str, data_root: str, workers: str | None = None) -> Server:
    """Start `name` (openddb on a fresh dir under `data_root`, moto, or dynalite in memory) on a free port."""
    port = free_port()
    if name == "openddb":
        return Server(name, openddb_command(port, os.path.join(data_root, f"openddb-{port}"), workers), port)
    ensure_peers([name])
    return Server(name, peer_command(name, port), port)


def url_of(server: Server) -> str:
    return f"http://127.0.0.1:{server.port}"


def now() -> float:
    return time.perf_counter()


def cpu_seconds() -> float:
    """CPU time (user + system) of this client process so far, to tell whether the client saturates a core."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def processes_cpu_seconds(chosen: Callable[[int, list[str]], bool]) -> float:
    """CPU seconds (user + system) of the live processes `chosen(pid, stat fields from the state on)` picks, from
    /proc (0.0 where there is none). Unlike a rate, a server's CPU per request holds on a shared machine."""
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid = int(stat.parent.name)
            fields = stat.read_text().rsplit(")", 1)[1].split()  # state ppid pgrp ... utime(11) stime(12)
        except (OSError, ValueError):
            continue
        if chosen(pid, fields):
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")
