"""Fixtures of the API tests that need a server of their own kind: one verifying signatures for IAM and STS."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.identity_helpers import client, verifying_server
from tests.conftest import ServerProcess


@pytest.fixture(scope="module")
def identity_server() -> Iterator[ServerProcess]:
    """A server verifying signatures, the root's credentials ROOT_KEY and ROOT_SECRET (one per test module)."""
    process = verifying_server()
    try:
        yield process
    finally:
        process.finish()


@pytest.fixture(scope="module")
def iam(identity_server: ServerProcess) -> Any:
    """The root's IAM client."""
    return client(identity_server, "iam")


@pytest.fixture(scope="module")
def throttled() -> Iterator[ServerProcess]:
    """A server applying DynamoDB's throughput limits (`--throttling on`), in one process (one test module)."""
    process = ServerProcess(None, "--throttling", "on", "--workers", "1")
    try:
        yield process
    finally:
        process.finish()
