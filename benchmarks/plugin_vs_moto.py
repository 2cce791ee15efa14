#!/usr/bin/env python3
"""One file of small DynamoDB tests timed under three set-ups, in one run on one machine (docs/TESTING.md):

- `openddb plugin`: OpenDDB's pytest plugin (an in-process server, an empty store for every test);
- `moto mock_aws`: moto's `mock_aws`, a fresh mock and client per test, as moto's documentation shows;
- `openddb subprocess`: one `openddb serve --in-memory` process per session (per xdist worker), its tables
  deleted after each test.

    python benchmarks/plugin_vs_moto.py                         # 100 tests, 3 rounds, serial and -n 2
    python benchmarks/plugin_vs_moto.py --tests 100 --rounds 5 --workers 0

The test file is the same for all three (each test: CreateTable, three PutItem, one Query); each set-up only
supplies the `dynamodb_client` fixture in a conftest.py. Rounds are interleaved (every set-up once per round, the
order rotating), and the figure is the median wall time of the whole pytest run, start-up and imports included,
beside pytest's own reported time. Every pytest run is a process group of its own, killed (with any server it
started) if it overruns `--timeout`; the subprocess set-up's fixture stops its server however the session ends.

Needs pytest, pytest-xdist, boto3 and moto in the interpreter that runs it (moto is not a dependency of the
project: install it in a throw-away virtual environment, e.g. `python -m venv --system-site-packages
/tmp/moto-venv && /tmp/moto-venv/bin/pip install moto`, and run this with /tmp/moto-venv/bin/python). Without
moto its set-up is left out.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

TESTS = '''
import pytest


@pytest.mark.parametrize("n", range({count}))
def test_small(dynamodb_client, n):
    dynamodb_client.create_table(
        TableName="orders", BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{{"AttributeName": "pk", "AttributeType": "S"}},
                              {{"AttributeName": "sk", "AttributeType": "N"}}],
        KeySchema=[{{"AttributeName": "pk", "KeyType": "HASH"}}, {{"AttributeName": "sk", "KeyType": "RANGE"}}])
    for sk in range(3):
        dynamodb_client.put_item(TableName="orders", Item={{"pk": {{"S": f"c{{n}}"}}, "sk": {{"N": str(sk)}}}})
    found = dynamodb_client.query(TableName="orders", KeyConditionExpression="pk = :p",
                                  ExpressionAttributeValues={{":p": {{"S": f"c{{n}}"}}}})
    assert found["Count"] == 3
'''

MOTO = '''
import os

import boto3
import pytest
from moto import mock_aws

os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")


@pytest.fixture
def dynamodb_client():
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")
'''

SUBPROCESS = '''
import socket
import subprocess
import sys
import time

import boto3
import pytest


def wait_ready(server, port):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError("openddb serve exited at start-up")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError("openddb serve did not start")


@pytest.fixture(scope="session")
def session_client():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "openddb", "serve", "--in-memory", "--port", str(port),
                               "--log-level", "warning"])
    try:
        wait_ready(server, port)
        yield boto3.client("dynamodb", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                           aws_access_key_id="testing", aws_secret_access_key="testing")
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
def dynamodb_client(session_client):
    yield session_client
    for name in session_client.list_tables()["TableNames"]:
        session_client.delete_table(TableName=name)
'''


@dataclass
class Setup:
    name: str
    conftest: str | None  # None: the plugin's own fixtures
    options: list[str]  # pytest options (the other two disable the plugin)
    walls: dict[int, list[float]] = field(default_factory=dict)  # by xdist workers
    reported: dict[int, list[float]] = field(default_factory=dict)


def setups(with_moto: bool) -> list[Setup]:
    chosen = [Setup("openddb plugin", None, []), Setup("openddb subprocess", SUBPROCESS, ["-p", "no:openddb"])]
    if with_moto:
        chosen.insert(1, Setup("moto mock_aws", MOTO, ["-p", "no:openddb"]))
    return chosen


def make_project(root: Path, setup: Setup, tests: int) -> Path:
    project = root / setup.name.replace(" ", "-")
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "test_small.py").write_text(TESTS.format(count=tests))
    if setup.conftest:
        (project / "conftest.py").write_text(setup.conftest)
    return project


def run_pytest(project: Path, setup: Setup, workers: int, timeout: float) -> tuple[float, float]:
    """(wall seconds, pytest's reported seconds) of one pytest run, which must pass."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark", *setup.options]
    if workers:
        command += ["-n", str(workers)]
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    finally:
        # Whatever is left of the run's process group (pytest, its xdist workers, a server a fixture started):
        # nothing after a clean run, everything after a timeout or an interrupt.
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    elapsed = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"{setup.name}: pytest failed in {project}:\n{output[-4000:]}")
    reported = re.search(r"passed in ([0-9.]+)s", output)
    return elapsed, float(reported.group(1)) if reported else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tests", type=int, default=100)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2], help="xdist workers per run (0: none)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one pytest run may take")
    args = parser.parse_args()
    with_moto = importlib.util.find_spec("moto") is not None
    if not with_moto:
        print("moto is not installed in this interpreter: its set-up is left out", file=sys.stderr)
    chosen = setups(with_moto)
    with tempfile.TemporaryDirectory() as root:
        projects = {setup.name: make_project(Path(root), setup, args.tests) for setup in chosen}
        for workers in args.workers:
            for round_number in range(args.rounds):
                shift = round_number % len(chosen)
                for setup in chosen[shift:] + chosen[:shift]:
                    wall, reported = run_pytest(projects[setup.name], setup, workers, args.timeout)
                    setup.walls.setdefault(workers, []).append(wall)
                    setup.reported.setdefault(workers, []).append(reported)
    print(f"{args.tests} tests; median of {args.rounds} interleaved runs: wall time of the whole pytest run "
          "(pytest's own reported time)")
    for workers in args.workers:
        label = f"-n {workers}" if workers else "serial"
        for setup in chosen:
            walls = setup.walls[workers]
            print(f"{setup.name:20} {label:7} {statistics.median(walls):6.2f} s "
                  f"({statistics.median(setup.reported[workers]):.2f} s)   runs: "
                  f"{', '.join(f'{wall:.2f}' for wall in walls)}")


if __name__ == "__main__":
    main()
