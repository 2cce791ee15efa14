"""Shared fixtures: a real `openddb serve` process on a free port, and boto3 clients pointed at it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from hypothesis import settings

# Property tests check values, not speed: no per-example deadline, which a machine busy with the parallel suite's
# servers can overrun.
settings.register_profile("openddb", deadline=None)
settings.load_profile("openddb")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """A running `openddb serve` child process."""

    def __init__(self, data_dir: str | None, *extra: str) -> None:
        self.port = free_port()
        self.data_dir = data_dir
        self.endpoint = f"http://127.0.0.1:{self.port}"
        args = [sys.executable, "-m", "openddb", "serve", "--port", str(self.port), "--log-level", "warning"]
        if "--advisor-config" in extra:
            args += ["--advisor", "on"]
        engine = os.environ.get("OPENDDB_TEST_ENGINE")
        if engine:
            # The whole suite against a shared engine (e.g. PostgreSQL): every server, whatever its data dir,
            # opens that same database, so "restart on the same data" still finds the data.
            args += ["--engine", engine]
        else:
            args += ["--in-memory"] if data_dir is None else ["--data-dir", data_dir]
        args += list(extra)
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by the fixture after stop()
        self.process = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited early: {self.output()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("server did not start")

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self, kill: bool = False) -> None:
        if self.process.poll() is None:
            if kill:
                self.process.kill()
            else:
                self.process.terminate()
            self.process.wait(timeout=20)

    def finish(self) -> str:
        """Stop (gracefully) if still running, close the log and return it; a clean log has no traceback."""
        self.stop()
        output = self.output()
        self.log.close()
        assert "Traceback" not in output, output
        return output


def make_client(endpoint: str, service: str = "dynamodb") -> object:
    return boto3.client(
        service, endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=30),
    )


def one_try_client(server: ServerProcess) -> Any:
    """A client that tries each call once (an SDK retries throttled calls: here the refusal is what is looked at)."""
    return boto3.client("dynamodb", endpoint_url=server.endpoint, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test",
                        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    with tempfile.TemporaryDirectory() as data_dir:
        process = ServerProcess(data_dir)
        try:
            yield process
        finally:
            process.finish()


@pytest.fixture(scope="session")
def ddb(server: ServerProcess):  # type: ignore[no-untyped-def]
    return make_client(server.endpoint)


@pytest.fixture(scope="session")
def resource(server: ServerProcess):  # type: ignore[no-untyped-def]
    return boto3.resource(
        "dynamodb", endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id="test",
        aws_secret_access_key="test", config=Config(retries={"max_attempts": 1}))


def unique_name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def table_exists(ddb, name: str) -> bool:  # type: ignore[no-untyped-def]
    """Whether DescribeTable finds the table (ListTables' first page may not hold it in a shared store)."""
    try:
        ddb.describe_table(TableName=name)
    except ddb.exceptions.ResourceNotFoundException:
        return False
    return True


def create_table(ddb, name: str | None = None, *, hash_type: str = "S", range_type: str | None = "S",
                 hash_name: str = "pk", range_name: str = "sk") -> str:  # type: ignore[no-untyped-def]
    name = name or unique_name()
    definitions = [{"AttributeName": hash_name, "AttributeType": hash_type}]
    schema = [{"AttributeName": hash_name, "KeyType": "HASH"}]
    if range_type is not None:
        definitions.append({"AttributeName": range_name, "AttributeType": range_type})
        schema.append({"AttributeName": range_name, "KeyType": "RANGE"})
    ddb.create_table(TableName=name, AttributeDefinitions=definitions, KeySchema=schema,
                     BillingMode="PAY_PER_REQUEST")
    return name


@pytest.fixture(scope="session")
def hash_table(ddb) -> str:  # type: ignore[no-untyped-def]
    """A shared table with a string hash key `pk` only."""
    return create_table(ddb, unique_name("hash"), range_type=None)


@pytest.fixture(scope="session")
def range_table(ddb) -> str:  # type: ignore[no-untyped-def]
    """A shared table with string hash key `pk` and string range key `sk`."""
    return create_table(ddb, unique_name("range"))


@pytest.fixture(scope="session", autouse=True)
def export_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Exports to a bucket given by name (not a path) go under a directory of the run, not the working directory's
    ./openddb-exports (the model fuzzer sends such names); a root the caller set is kept."""
    if os.environ.get("OPENDDB_EXPORT_ROOT"):
        yield
        return
    os.environ["OPENDDB_EXPORT_ROOT"] = str(tmp_path_factory.mktemp("exports"))
    try:
        yield
    finally:
        del os.environ["OPENDDB_EXPORT_ROOT"]


def pytest_configure(config: pytest.Config) -> None:
    # boto3 must never wander off to instance metadata for credentials or region.
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
