"""DynamoDB Local's command-line options work as aliases, so its scripts and container definitions run unchanged;
the one whose behaviour OpenDDB lacks says so at start-up instead of pretending."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import free_port, make_client

pytestmark = pytest.mark.skipif(bool(os.environ.get("OPENDDB_TEST_ENGINE")), reason="the embedded engine's options")

USERS = {"TableName": "users", "BillingMode": "PAY_PER_REQUEST",
         "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}],
         "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}]}


@contextmanager
def local_style(*args: str, port: int) -> Iterator[tuple[str, list[str]]]:
    """`openddb serve ARGS` exactly as given (no options added); its endpoint, and its log lines once stopped."""
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen([sys.executable, "-m", "openddb", "serve", *args], stdout=log,
                                   stderr=subprocess.STDOUT)
        lines: list[str] = []
        try:
            deadline = time.monotonic() + 20
            while True:
                assert process.poll() is None and time.monotonic() < deadline, "the server did not start"
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.02)
            yield f"http://127.0.0.1:{port}", lines
        finally:
            process.terminate()
            process.wait(20)
            log.seek(0)
            lines += log.read().decode().splitlines()
    assert not any("Traceback" in line for line in lines), lines


def test_a_dynamodb_local_command_line_runs_unchanged() -> None:
    # As a docker-compose file for DynamoDB Local passes it (java's own options included).
    port = free_port()
    with local_style("-Djava.library.path=./DynamoDBLocal_lib", "-jar", "DynamoDBLocal.jar", "-sharedDb",
                     "-inMemory", "-port", str(port), "-disableTelemetry", "-cors", "http://app.example",
                     "--log-level", "warning", port=port) as (endpoint, lines):
        ddb = make_client(endpoint)
        ddb.create_table(**USERS)
        assert ddb.list_tables()["TableNames"] == ["users"]
        request = urllib.request.Request(endpoint + "/", headers={"Origin": "http://app.example"})
        with urllib.request.urlopen(request, timeout=5) as answer:
            assert answer.headers["Access-Control-Allow-Origin"] == "http://app.example"
    assert lines == []  # the options that change nothing here are accepted silently


def test_db_path_is_the_data_dir(tmp_path: Path) -> None:
    port = free_port()
    with local_style("-dbPath", str(tmp_path), "-port", str(port), "--workers", "1", port=port) as (endpoint, _):
        make_client(endpoint).create_table(**USERS)
    assert (tmp_path / "openddb.sqlite3").exists()
    with local_style("-dbPath", str(tmp_path), "-port", str(port), "--workers", "1", port=port) as (endpoint, _):
        assert make_client(endpoint).list_tables()["TableNames"] == ["users"]


def test_transient_statuses_and_optimize_before_startup_do_what_they_say(tmp_path: Path) -> None:
    port = free_port()
    with local_style("-dbPath", str(tmp_path), "-port", str(port), "--workers", "1", port=port) as (endpoint, _):
        ddb = make_client(endpoint)
        ddb.create_table(**USERS)
        for n in range(300):
            ddb.put_item(TableName="users", Item={"id": {"S": str(n)}, "blob": {"S": "x" * 2000}})
        for n in range(300):
            ddb.delete_item(TableName="users", Key={"id": {"S": str(n)}})
    database = tmp_path / "openddb.sqlite3"
    wal = tmp_path / "openddb.sqlite3-wal"
    before = database.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    with local_style("-dbPath", str(tmp_path), "-port", str(port), "-delayTransientStatuses",
                     "-optimizeDbBeforeStartup", "--workers", "1", port=port) as (endpoint, lines):
        ddb = make_client(endpoint)
        # -delayTransientStatuses is implemented (tests/api/test_transient_statuses.py): a new table is CREATING.
        table = dict(USERS, TableName="more")
        assert ddb.create_table(**table)["TableDescription"]["TableStatus"] == "CREATING"
        assert ddb.describe_table(TableName="more")["Table"]["TableStatus"] == "CREATING"
    assert any("-optimizeDbBeforeStartup: the store was optimized" in line for line in lines), lines
    # the freed pages are gone and the write-ahead log folded in: the store is smaller than it was
    assert database.stat().st_size < before / 2


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_a_bad_transient_delay_is_refused(value: str) -> None:
    done = subprocess.run([sys.executable, "-m", "openddb", "serve", "-inMemory",
                           f"--delay-transient-statuses={value}"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "--delay-transient-statuses" in done.stderr


def test_help_describes_them_and_conflicts_are_refused() -> None:
    done = subprocess.run([sys.executable, "-m", "openddb", "serve", "-help"], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0
    assert "DynamoDB Local's options are accepted too" in done.stdout
    done = subprocess.run([sys.executable, "-m", "openddb", "serve", "-inMemory", "-dbPath", "x"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "not allowed with argument" in done.stderr
