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

- `--openddb-advise`: the server runs the standards advisor (docs/ADVISOR.md); after the session its report is
  printed (`--openddb-advise-format text|json`), and `--openddb-advise-fail-on error|warning` fails the session
  when a finding is that severe; `--openddb-advisor-config FILE`: its thresholds and declared access patterns.
  Per process: with pytest-xdist each worker's server advises on its own tests, and the report is not printed.

Disable it with `-p no:openddb`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from openddb.advisor.formats import failing, render
from openddb.advisor.settings import load

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


_REPORT = pytest.StashKey[dict[str, Any]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("openddb", "OpenDDB's in-process DynamoDB")
    group.addoption("--openddb-advise", action="store_true",
                    help="run the standards advisor on the session's server and print its report at the end")
    group.addoption("--openddb-advise-fail-on", choices=("error", "warning"), default=None,
                    help="fail the session if the advisor finds something this severe or more")
    group.addoption("--openddb-advise-format", choices=("text", "json"), default="text",
                    help="the printed report's format (default text)")
    group.addoption("--openddb-advisor-config", default=None, metavar="FILE",
                    help="the advisor's thresholds and declared access patterns (JSON, docs/ADVISOR.md)")


@pytest.fixture(scope="session")
def openddb_server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """The session's in-process OpenDDB server (in memory)."""
    from openddb.testing.server import Server

    config = request.config
    advise = config.getoption("openddb_advise") or config.getoption("openddb_advise_fail_on") is not None
    # (a test session wants every request observed, whatever its pace: no sampling unless the file asks for it)
    server = Server(advisor=load(config.getoption("openddb_advisor_config"), observe_budget=1.0) if advise else None)
    server.start()
    try:
        yield server
    finally:
        if server.advisor is not None and not hasattr(config, "workerinput"):  # (not an xdist worker)
            config.stash[_REPORT] = server.advisor_report()
        server.stop()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    report = session.config.stash.get(_REPORT, None)
    if report is not None and failing(report, session.config.getoption("openddb_advise_fail_on")):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    report = config.stash.get(_REPORT, None)
    if report is None:
        return
    terminalreporter.section("OpenDDB advisor")
    terminalreporter.write(render(report, config.getoption("openddb_advise_format")))
    fail_on = config.getoption("openddb_advise_fail_on")
    if failing(report, fail_on):
        terminalreporter.write_line(f"openddb: the session fails: findings of severity {fail_on} or more",
                                    red=True)


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
