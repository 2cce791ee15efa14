"""Engines under test: the embedded SQLite engine always, PostgreSQL when OPENDDB_TEST_POSTGRES holds its URL."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator

import pytest

from openddb.storage.base import Engine
from openddb.storage.sqlite import SQLiteEngine

POSTGRES_URL = os.environ.get("OPENDDB_TEST_POSTGRES")
needs_postgres = pytest.mark.skipif(not POSTGRES_URL, reason="set OPENDDB_TEST_POSTGRES to a postgresql:// URL")

EngineFactory = Callable[[], Engine]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=needs_postgres)])
def open_engine(request: pytest.FixtureRequest) -> Iterator[EngineFactory]:
    """Opens engines that share one store (like several server processes would); closes them afterwards."""
    opened: list[Engine] = []
    with tempfile.TemporaryDirectory() as data_dir:
        def factory() -> Engine:
            if request.param == "sqlite":
                engine: Engine = SQLiteEngine(data_dir)
            else:
                from openddb.storage.postgres import PostgresEngine

                engine = PostgresEngine(str(POSTGRES_URL))
            opened.append(engine)
            return engine

        yield factory
        for engine in opened:
            engine.close()


@pytest.fixture
def engine(open_engine: EngineFactory) -> Engine:
    return open_engine()
