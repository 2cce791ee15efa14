"""Several worker processes on one port share one store consistently."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from tests.conftest import ServerProcess, create_table, make_client, unique_name

pytestmark = pytest.mark.skipif(bool(os.environ.get("OPENDDB_TEST_ENGINE")), reason="embedded engine workers")


@pytest.fixture
def workers(tmp_path):
    process = ServerProcess(str(tmp_path / "data"), "--workers", "2")
    yield process
    process.finish()


def children_of(pid: int, expected: int = 2) -> list[int]:
    """The supervisor's worker processes (the listening socket is ready a moment before the forks)."""
    deadline = time.monotonic() + 10
    while True:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            children = [int(p) for p in handle.read().split()]
        if len(children) >= expected or time.monotonic() > deadline:
            return children
        time.sleep(0.02)


def wait_gone(pids: list[int]) -> None:
    """Wait (up to 10 s each) until these processes have exited."""
    for pid in pids:
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.05)


def test_two_workers_are_running(workers):
    """--workers 2 forks two worker processes under one supervisor."""
    assert len(children_of(workers.process.pid)) == 2


def test_table_created_through_one_worker_is_seen_by_all(workers):
    """A table created on one connection is usable at once on fresh connections, whichever worker they reach."""
    name = create_table(make_client(workers.endpoint), unique_name("w"))
    for index in range(20):  # new clients open new connections, spread over the workers by the kernel
        client = make_client(workers.endpoint)
        client.put_item(TableName=name, Item={"pk": {"S": f"k{index}"}, "sk": {"S": "0"}})
        assert client.describe_table(TableName=name)["Table"]["TableStatus"] == "ACTIVE"
    client = make_client(workers.endpoint)
    client.delete_table(TableName=name)
    for _ in range(20):
        with pytest.raises(ClientError) as excinfo:
            make_client(workers.endpoint).get_item(TableName=name, Key={"pk": {"S": "k0"}, "sk": {"S": "0"}})
        assert excinfo.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_connections_are_spread_evenly_over_the_workers(workers):
    """32 connections opened at once land 15 to 17 on each worker, every time (the kernel's SO_REUSEPORT hash split
    them 12/20 to 15/17, never 16/16, in ten tries), and each is served."""
    pids = children_of(workers.process.pid)
    deadline = time.monotonic() + 10
    opened = []  # until both workers serve (one still starting takes no connection)
    while not all(connections_held(pid, workers.port) for pid in pids):
        assert time.monotonic() < deadline
        opened.append(socket.create_connection(("127.0.0.1", workers.port)))
        time.sleep(0.05)
    for sock in opened:
        sock.close()
    while sum(connections_held(pid, workers.port) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    for _ in range(3):
        sockets = [socket.create_connection(("127.0.0.1", workers.port)) for _ in range(32)]
        try:
            deadline = time.monotonic() + 10
            while sum(held := [connections_held(pid, workers.port) for pid in pids]) < 32:
                assert time.monotonic() < deadline, held
                time.sleep(0.02)
            assert abs(held[0] - held[1]) <= 2  # (one more than even for a worker that accepted fewer in all)
            for sock in sockets:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            for sock in sockets:
                assert sock.recv(12) == b"HTTP/1.1 200"
        finally:
            for sock in sockets:
                sock.close()
        deadline = time.monotonic() + 10
        while sum(connections_held(pid, workers.port) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.02)


def test_a_stopped_worker_holds_no_new_connection_up(workers):
    """While one worker is stopped (as if stuck in a long call), every new connection is answered by the other
    within seconds: none waits in the stopped worker's queue."""
    pids = children_of(workers.process.pid)
    make_client(workers.endpoint).list_tables()
    os.kill(pids[1], signal.SIGSTOP)
    try:
        started = time.monotonic()
        sockets = [socket.create_connection(("127.0.0.1", workers.port)) for _ in range(8)]
        for sock in sockets:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        for sock in sockets:
            sock.settimeout(5)
            assert sock.recv(12) == b"HTTP/1.1 200"
            sock.close()
        assert time.monotonic() - started < 5  # (one taken every 0.2 s: 1.6 s; before, half waited for good)
    finally:
        os.kill(pids[1], signal.SIGCONT)


def connections_held(pid: int, port: int) -> int:
    """The established TCP connections to `port` that process `pid` holds."""
    inodes = set()
    with open("/proc/net/tcp") as handle:
        for row in handle.read().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    held = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            held += os.readlink(f"/proc/{pid}/fd/{fd}") in inodes
        except OSError:
            pass
    return held


def test_conditional_increments_across_workers(workers):
    """50 clients doing read-then-conditional-increment across both workers end at exactly +50."""
    name = create_table(make_client(workers.endpoint), unique_name("w"), range_type=None)
    make_client(workers.endpoint).put_item(TableName=name, Item={"pk": {"S": "c"}, "n": {"N": "0"}})
    errors: list[BaseException] = []

    def increment() -> None:
        client = make_client(workers.endpoint)
        try:
            while True:
                current = client.get_item(TableName=name, Key={"pk": {"S": "c"}}, ConsistentRead=True)["Item"]["n"]
                try:
                    client.update_item(TableName=name, Key={"pk": {"S": "c"}}, UpdateExpression="SET n = n + :one",
                                       ConditionExpression="n = :seen",
                                       ExpressionAttributeValues={":one": {"N": "1"}, ":seen": current})
                    return
                except ClientError as error:
                    if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                        raise
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=increment) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    item = make_client(workers.endpoint).get_item(TableName=name, Key={"pk": {"S": "c"}}, ConsistentRead=True)
    assert item["Item"]["n"] == {"N": "50"}


def test_workers_stop_with_the_supervisor(workers):
    """SIGTERM to the server stops every worker; no worker outlives it."""
    pids = children_of(workers.process.pid)
    workers.process.send_signal(signal.SIGTERM)
    assert workers.process.wait(timeout=20) == 0
    wait_gone(pids)
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}")


def test_workers_do_not_outlive_a_killed_supervisor(workers):
    """kill -9 of the supervisor takes its workers down too (they would keep the port and the store)."""
    pids = children_of(workers.process.pid)
    workers.process.kill()
    workers.process.wait(timeout=20)
    wait_gone(pids)
    for pid in pids:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2] if os.path.exists(f"/proc/{pid}") else "gone"
        assert state in ("gone", "Z"), state


def test_a_killed_servers_shared_directory_is_removed_by_the_next(tmp_path, monkeypatch):
    """The workers' shared temporary directory of a server killed with -9 (which cannot remove it) is removed when
    the next server starts; a running server's directory is left alone."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))

    def owners() -> set[str]:
        return {path.name.split("-")[2] for path in temporary.glob("openddb-metrics-*")}

    servers = [ServerProcess(str(tmp_path / "a"), "--workers", "2")]
    try:
        servers.append(ServerProcess(str(tmp_path / "b"), "--workers", "2"))
        killed, running = servers
        pids = children_of(killed.process.pid)
        children_of(running.process.pid)  # (the directory is made before the workers are forked)
        assert owners() == {str(killed.process.pid), str(running.process.pid)}
        killed.stop(kill=True)
        wait_gone(pids)
        assert owners() == {str(killed.process.pid), str(running.process.pid)}  # (left behind)
        servers.append(ServerProcess(str(tmp_path / "c"), "--workers", "2"))
        children_of(servers[2].process.pid)
        assert owners() == {str(running.process.pid), str(servers[2].process.pid)}
    finally:
        for server in servers:
            server.finish()
    assert not list(temporary.glob("openddb-metrics-*"))


def test_wal_is_copied_back_while_workers_serve(workers, tmp_path):
    """One worker's background thread checkpoints the shared WAL: written pages reach the database file."""
    database = tmp_path / "data" / "openddb.sqlite3"
    client = make_client(workers.endpoint)
    name = create_table(client, unique_name("w"))
    before = database.stat().st_size
    for batch in range(12):
        client.batch_write_item(RequestItems={name: [
            {"PutRequest": {"Item": {"pk": {"S": f"p{batch}-{n}"}, "sk": {"S": "0"}, "pad": {"S": "x" * 4000}}}}
            for n in range(25)]})
    deadline = time.monotonic() + 10
    while database.stat().st_size < before + 1_000_000 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert database.stat().st_size >= before + 1_000_000
