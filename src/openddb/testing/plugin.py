"""The pytest plugin (entry point `openddb`, in pytest's `pytest11` group): DynamoDB for tests, in process.

- `openddb_server`: one in-process server per test session (per pytest-xdist worker: each worker is a process
  with its own server and store), started when a test first asks for it.
- `openddb_endpoint`: its URL, with an empty store for each test: the store is replaced by a fresh one before
  any test that asks for it, unless nothing has connected since the last replacement. While the test runs,
  `AWS_ENDPOINT_URL_DYNAMODB` and `AWS_ENDPOINT_URL_DYNAMODB_STREAMS` point at it, so boto3 clients the code under
  test makes itself reach it too; `AWS_DEFAULT_REGION`, `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` are set
  (to `us-east-1`, `testing`, `testing`) only where they are not set already.
- `dynamodb_client`, `dynamodb_resource`: boto3's client and resource for it, made once per session (making a
  client costs far more than a test) and handed to each test after the reset.

Disable it with `-p no:openddb`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from openddb.testing.server import Server

_CREDENTIALS = {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing"}


class _Clients:
    """boto3 objects for one endpoint, each made on first use."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._made: dict[str, Any] = {}

    def get(self, kind: str) -> Any:
        made = self._made.get(kind)
        if made is None:
            boto3 = importlib.import_module("boto3")  # (a test dependency of the project using the plugin)
            factory = boto3.client if kind == "client" else boto3.resource
            made = self._made[kind] = factory("dynamodb", endpoint_url=self.endpoint, region_name="us-east-1",
                                              aws_access_key_id="testing", aws_secret_access_key="testing")
        return made


@pytest.fixture(scope="session")
def openddb_server() -> Iterator[Server]:
    """The session's in-process OpenDDB server (in memory)."""
    from openddb.testing.server import Server

    server = Server()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def openddb_endpoint(openddb_server: Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """The server's URL, its store empty at the start of the test, and the AWS environment pointed at it."""
    openddb_server.reset()
    endpoint = openddb_server.endpoint
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB_STREAMS", endpoint)
    for name, value in _CREDENTIALS.items():
        if not os.environ.get(name):
            monkeypatch.setenv(name, value)
    return endpoint


@pytest.fixture(scope="session")
def _openddb_clients(openddb_server: Server) -> _Clients:
    return _Clients(openddb_server.endpoint)


@pytest.fixture
def dynamodb_client(openddb_endpoint: str, _openddb_clients: _Clients) -> Any:
    """A boto3 DynamoDB client for the test's empty store."""
    return _openddb_clients.get("client")


@pytest.fixture
def dynamodb_resource(openddb_endpoint: str, _openddb_clients: _Clients) -> Any:
    """A boto3 DynamoDB service resource for the test's empty store."""
    return _openddb_clients.get("resource")
