"""What a client can hold of the server without finishing a request: slow and idle connections are closed, the
bytes of half-sent requests are bounded (and given back when their connections close), connections are capped,
the open-files limit is raised, and the store's files are the owner's alone. Raw sockets, as such clients are."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import pytest

from tests.conftest import ServerProcess, free_port, make_client, unique_name

PUT = b"DynamoDB_20120810.PutItem"
HEAD = (b"POST / HTTP/1.1\r\nHost: localhost\r\nX-Amz-Target: %s\r\nContent-Type: application/x-amz-json-1.0\r\n"
        b"Authorization: AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/dynamodb/aws4_request, "
        b"SignedHeaders=host, Signature=00\r\nContent-Length: %d\r\n\r\n")


@pytest.fixture(scope="module")
def strict() -> Iterator[ServerProcess]:
    """A server with short limits: requests arrive within 1.5 s, idle connections last 1.5 s, 8 connections, and
    8 MB of unfinished requests."""
    server = ServerProcess(None, "--workers", "1", "--request-timeout", "1.5", "--idle-timeout", "1.5",
                           "--max-connections", "8", "--max-buffered-mb", "8")
    try:
        yield server
    finally:
        server.finish()


def connect(server: ServerProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return sock


def read_until_closed(sock: socket.socket, timeout: float) -> bytes:
    """Everything the server sends until it closes the connection (AssertionError if it is still open then)."""
    sock.settimeout(timeout)
    data = b""
    while True:
        try:
            piece = sock.recv(65536)
        except TimeoutError:
            raise AssertionError(f"still open after {timeout} s; received {data[:200]!r}") from None
        except ConnectionResetError:
            return data
        if not piece:
            return data
        data += piece


def list_tables(sock: socket.socket) -> bytes:
    body = b"{}"
    sock.sendall(HEAD % (b"DynamoDB_20120810.ListTables", len(body)) + body)
    sock.settimeout(10)
    answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200"), answer
    return answer


def test_an_idle_keep_alive_connection_is_closed(strict):
    with connect(strict) as sock:
        list_tables(sock)
        began = time.monotonic()
        assert read_until_closed(sock, 6) == b""
        assert time.monotonic() - began >= 1.4


def test_a_connection_that_is_used_stays_open(strict):
    with connect(strict) as sock:
        for _ in range(4):  # 4 × 0.6 s: longer than the idle timeout in all, never idle that long
            list_tables(sock)
            time.sleep(0.6)
        list_tables(sock)


@pytest.mark.parametrize("sent", [b"POST / HTTP/1.1\r\nHost: loc", HEAD % (PUT, 100) + b'{"TableName":'])
def test_a_request_that_stops_arriving_gets_408_and_a_close(strict, sent):
    """Half a head, or a head and part of its body: answered 408 once the request timeout passes."""
    with connect(strict) as sock:
        sock.sendall(sent)
        answer = read_until_closed(sock, 6)
        assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer
        assert b"Connection: close" in answer


def test_an_open_connection_with_nothing_sent_is_closed_when_idle(strict):
    with connect(strict) as sock:
        assert read_until_closed(sock, 6) == b""


def test_past_the_cap_the_longest_idle_connection_makes_room(strict):
    with contextlib.ExitStack() as opened:  # (every socket closed, whatever fails: none left to the next test)
        first = opened.enter_context(connect(strict))
        list_tables(first)
        time.sleep(0.3)
        others = [opened.enter_context(connect(strict)) for _ in range(7)]
        for sock in others:
            list_tables(sock)
        newest = opened.enter_context(connect(strict))  # the ninth: the first (idle longest) is closed for it
        list_tables(newest)
        assert read_until_closed(first, 3) == b""


def test_past_the_cap_with_every_connection_busy_a_new_one_is_closed(strict):
    with contextlib.ExitStack() as opened:
        busy = [opened.enter_context(connect(strict)) for _ in range(8)]
        for sock in busy:
            sock.sendall(b"POST / HTTP/1.1\r\n")  # each is receiving a request: none is idle
        time.sleep(0.2)
        refused = opened.enter_context(connect(strict))
        assert read_until_closed(refused, 3) == b""
    time.sleep(0.3)
    with connect(strict) as sock:  # and once they are gone there is room again
        list_tables(sock)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def send_some(sock: socket.socket, data: bytes, seconds: float) -> int:
    """Send as much of `data` as the server takes within `seconds`; the bytes sent."""
    sock.settimeout(0.05)
    sent, deadline = 0, time.monotonic() + seconds
    view = memoryview(data)
    while sent < len(data) and time.monotonic() < deadline:
        try:
            sent += sock.send(view[sent:sent + 262144])
        except TimeoutError:
            continue
    return sent


def test_half_sent_bodies_hold_a_bounded_memory_given_back_when_they_close():
    """20 connections each send 7 of a 15 MB body (140 MB in all): the server holds at most its budget (here 16
    MB) of them; the others wait, unread. When the clients go, the memory goes too."""
    server = ServerProcess(None, "--workers", "1", "--max-buffered-mb", "16")
    try:
        pid = server.process.pid
        with connect(server) as sock:
            list_tables(sock)
        before = rss_bytes(pid)
        chunk = b"x" * (7 << 20)
        with contextlib.ExitStack() as opened:
            socks = [opened.enter_context(connect(server)) for _ in range(20)]
            for sock in socks:
                sock.sendall(HEAD % (PUT, 15 << 20))
                send_some(sock, chunk, 0.3)
            time.sleep(0.5)
            grown = rss_bytes(pid) - before
            assert grown < 60 << 20, f"the server grew by {grown >> 20} MB"
        time.sleep(1.0)
        with connect(server) as sock:  # it still serves
            list_tables(sock)
        after = rss_bytes(pid) - before
        assert after < 40 << 20, f"{after >> 20} MB still held after the clients closed"
    finally:
        server.finish()


def test_a_request_waiting_for_room_is_served_once_another_finishes():
    """Past the budget a connection is not refused: it is read again when another request is done. Two requests
    of 700 KB each, both mostly sent, on a 1 MB budget: the second waits for the first, then both are stored."""
    server = ServerProcess(None, "--workers", "1", "--max-buffered-mb", "1")
    try:
        ddb = make_client(server.endpoint)
        table = unique_name("room")
        ddb.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                         AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                         KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
        bodies = [b'{"TableName":"%s","Item":{"pk":{"S":"%d"},"v":{"B":"%s"}}}' % (table.encode(), n,
                                                                              b"QUFB" * 100_000) for n in range(2)]
        with contextlib.ExitStack() as opened:
            socks = [opened.enter_context(connect(server)) for _ in bodies]
            for sock, body in zip(socks, bodies, strict=True):
                sock.sendall(HEAD % (PUT, len(body)))
                sent = send_some(sock, body[:-10], 2.0)
                assert sent == len(body) - 10  # (the kernel takes what the server does not)
            time.sleep(0.3)
            for sock, body in zip(socks, bodies, strict=True):
                sock.sendall(body[-10:])
                sock.settimeout(10)
                assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        assert sorted(item["pk"]["S"] for item in ddb.scan(TableName=table)["Items"]) == ["0", "1"]
    finally:
        server.finish()


def test_the_open_files_limit_is_raised_to_the_hard_limit():
    server = ServerProcess(None, "--workers", "1")
    try:
        with open(f"/proc/{server.process.pid}/limits") as limits:
            line = next(line for line in limits if line.startswith("Max open files"))
        soft, hard = line.split()[3:5]
        assert soft == hard, line
    finally:
        server.finish()


@pytest.mark.skipif(bool(os.environ.get("OPENDDB_TEST_ENGINE")), reason="the embedded store's files")
def test_the_store_is_the_owners_alone():
    parent = tempfile.mkdtemp()
    data = os.path.join(parent, "data")
    server = ServerProcess(data, "--workers", "1")
    try:
        ddb = make_client(server.endpoint)
        ddb.create_table(TableName="owner-only", BillingMode="PAY_PER_REQUEST",
                         AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                         KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
        ddb.put_item(TableName="owner-only", Item={"pk": {"S": "secret"}})
        assert stat.S_IMODE(os.stat(data).st_mode) == 0o700
        names = os.listdir(data)
        assert "openddb.sqlite3" in names and "openddb.sqlite3-wal" in names
        for name in names:
            assert stat.S_IMODE(os.stat(os.path.join(data, name)).st_mode) == 0o600, name
    finally:
        server.finish()


@pytest.mark.parametrize("option", [["--request-timeout", "0"], ["--idle-timeout", "-1"], ["--max-connections", "-2"],
                                    ["--max-buffered-mb", "0"]])
def test_a_limit_that_makes_no_sense_is_one_line_and_exit_code_2(option):
    done = subprocess.run([sys.executable, "-m", "openddb", "serve", "--in-memory", "--port", str(free_port()),
                           *option], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr.strip().startswith("openddb: --request-timeout and --idle-timeout must be positive")
    assert len(done.stderr.strip().splitlines()) == 1
