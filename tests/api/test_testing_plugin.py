"""`openddb.testing`: the in-process server (context manager, start/stop, from a thread, inside a running event
loop, in memory or on a data dir, reset) and the pytest plugin, run as a user runs it: a small pytest project of
its own, in parallel with pytest-xdist."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

import openddb.clock
import openddb.testing
from openddb.startup import StartupError
from tests.conftest import make_client

pytestmark = pytest.mark.skipif(bool(os.environ.get("OPENDDB_TEST_ENGINE")), reason="in-process embedded engine")

USERS = {"TableName": "users", "BillingMode": "PAY_PER_REQUEST",
         "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}],
         "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}]}

CONFTEST = '''
import os

import pytest


@pytest.fixture(autouse=True)
def record_the_server(openddb_server, worker_id):
    # The outer test checks that each xdist worker had a server of its own.
    with open(os.path.join({out!r}, worker_id), "w") as handle:
        handle.write(openddb_server.endpoint)
'''

PROJECT = '''
import os

import boto3
import pytest

USERS = {users!r}


@pytest.mark.parametrize("n", range(8))
def test_each_test_starts_with_an_empty_store(dynamodb_client, n):
    # Every test creates the same table: a store shared between tests, or between xdist workers, would refuse it.
    assert dynamodb_client.list_tables()["TableNames"] == []
    dynamodb_client.create_table(**USERS)
    dynamodb_client.put_item(TableName="users", Item={{"id": {{"S": str(n)}}}})
    assert dynamodb_client.scan(TableName="users")["Count"] == 1


def test_code_that_makes_its_own_client_reaches_the_server(openddb_endpoint):
    assert os.environ["AWS_ENDPOINT_URL_DYNAMODB"] == openddb_endpoint
    client = boto3.client("dynamodb")  # endpoint, region and credentials from the environment
    client.create_table(**USERS)
    assert client.list_tables()["TableNames"] == ["users"]
    streams = boto3.client("dynamodbstreams")
    assert streams.list_streams()["Streams"] == []


def test_the_resource(dynamodb_resource):
    table = dynamodb_resource.create_table(**USERS)
    table.put_item(Item={{"id": "a", "n": 1}})
    assert table.get_item(Key={{"id": "a"}})["Item"]["n"] == 1
'''


def test_the_plugin_in_a_project_run_with_xdist(tmp_path: Path) -> None:
    assert any(point.name == "openddb" for point in entry_points(group="pytest11")), \
        "the plugin's entry point is not installed: pip install -e '.[test]'"
    project, out = tmp_path / "project", tmp_path / "out"
    project.mkdir()
    out.mkdir()
    (project / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    (project / "conftest.py").write_text(CONFTEST.format(out=str(out)))
    (project / "test_users.py").write_text(PROJECT.format(users=USERS))
    environment = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider",
                           "-p", "no:benchmark", "--dist", "load"], cwd=project, env=environment,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "10 passed" in done.stdout
    assert sorted(path.name for path in out.iterdir()) == ["gw0", "gw1"]
    assert len({path.read_text() for path in out.iterdir()}) == 2  # a server (and store) per worker


SCANNING = '''
USERS = {users!r}


def test_lists_users_by_scanning(dynamodb_client):
    dynamodb_client.create_table(**USERS)
    for _ in range(5):
        dynamodb_client.scan(TableName="users")


def test_reads_one_user(dynamodb_client):
    dynamodb_client.create_table(**USERS)
    dynamodb_client.get_item(TableName="users", Key={{"id": {{"S": "1"}}}})
'''


def test_the_plugin_reports_the_advisor_and_fails_the_session(tmp_path: Path) -> None:
    """--openddb-advise prints the advisor's report after the session, its findings across the store's resets
    (the scanning test's table is gone by then); --openddb-advise-fail-on error fails a session whose tests
    passed; without the options nothing is printed and the session passes."""
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    (tmp_path / "test_users.py").write_text(SCANNING.format(users=USERS))
    environment = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}

    def pytest_run(*options: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                               "-p", "no:benchmark", *options], cwd=tmp_path, env=environment,
                              capture_output=True, text=True, timeout=120)

    failed = pytest_run("--openddb-advise-fail-on", "error")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "2 passed" in failed.stdout and "OpenDDB advisor" in failed.stdout
    assert "ERROR   scan-hot-path  table users" in failed.stdout
    assert "the session fails" in failed.stdout
    quiet = pytest_run()
    assert quiet.returncode == 0 and "OpenDDB advisor" not in quiet.stdout


def client(endpoint: str) -> Any:
    return make_client(endpoint)


def test_with_block_serves_and_then_closes_the_port() -> None:
    with openddb.testing.server() as endpoint:
        ddb = client(endpoint)
        ddb.create_table(**USERS)
        ddb.put_item(TableName="users", Item={"id": {"S": "a"}})
        assert ddb.get_item(TableName="users", Key={"id": {"S": "a"}})["Item"] == {"id": {"S": "a"}}
    port = int(endpoint.rsplit(":", 1)[1])
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_started_from_a_thread_and_inside_a_running_event_loop() -> None:
    # The bug: serving from a thread raised "add_signal_handler() can only be called from the main thread"
    # after the socket was bound, and clients then hung.
    results: list[Any] = []

    def in_thread() -> None:
        with openddb.testing.server() as endpoint:
            results.append(client(endpoint).list_tables()["TableNames"])

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join(30)

    async def in_loop() -> None:
        server = openddb.testing.Server()
        endpoint = server.start()
        try:
            tables = await asyncio.get_running_loop().run_in_executor(None, lambda: client(endpoint).list_tables())
            results.append(tables["TableNames"])
        finally:
            server.stop()

    asyncio.run(in_loop())
    assert results == [[], []]


def test_reset_empties_the_store_and_clients_carry_on() -> None:
    server = openddb.testing.Server()
    ddb = client(server.start())
    try:
        ddb.create_table(**USERS, StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"})
        server.reset()
        # The same client (its pooled connection was closed) sees the fresh store: no table, no stream.
        assert ddb.list_tables()["TableNames"] == []
        assert make_client(server.endpoint, "dynamodbstreams").list_streams()["Streams"] == []
        ddb.create_table(**USERS)
    finally:
        server.stop()


def test_the_clock_moves_and_ttl_sweeps_on_demand() -> None:
    # The in-process server's time control, as the HTTP endpoints of `openddb serve --dev` offer it.
    server = openddb.testing.Server()
    ddb = client(server.start())
    try:
        ddb.create_table(**USERS)
        ddb.update_time_to_live(TableName="users",
                                TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires"})
        ddb.put_item(TableName="users", Item={"id": {"S": "a"}, "expires": {"N": str(int(time.time()) + 3600)}})
        assert server.sweep_ttl() == 0
        assert server.advance_clock(3601) >= 3601
        server.sweep_ttl()
        assert "Item" not in ddb.get_item(TableName="users", Key={"id": {"S": "a"}})
        server.reset()
        assert openddb.clock.offset() == 0  # a fresh store, real time again
    finally:
        server.stop()
        openddb.clock.set_offset(0)


def test_a_data_dir_keeps_its_data_across_restarts(tmp_path: Path) -> None:
    with openddb.testing.server(str(tmp_path)) as endpoint:
        client(endpoint).create_table(**USERS)
    server = openddb.testing.server(str(tmp_path))
    with server as endpoint:
        assert client(endpoint).list_tables()["TableNames"] == ["users"]
        with pytest.raises(RuntimeError, match="in-memory"):
            server.reset()


def test_start_up_mistakes_raise_at_start(tmp_path: Path) -> None:
    with openddb.testing.server() as endpoint:
        busy = openddb.testing.Server(port=int(endpoint.rsplit(":", 1)[1]))
        with pytest.raises(StartupError, match="already in use"):
            busy.start()
    (tmp_path / "file").write_text("")
    with pytest.raises(StartupError, match="is a file"):
        openddb.testing.Server(str(tmp_path / "file")).start()
