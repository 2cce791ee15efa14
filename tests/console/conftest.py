"""A server with the console on (its default), shared by a module's tests: each uses its own table names."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import ServerProcess


@pytest.fixture(scope="module")
def console_server() -> Iterator[ServerProcess]:
    process = ServerProcess(None)
    try:
        yield process
    finally:
        process.finish()
