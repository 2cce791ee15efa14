"""Engines under test: the embedded SQLite engine always, PostgreSQL when OPENDDB_TEST_POSTGRES holds its URL."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from openddb.storage.base import Engine
from openddb.storage.postgres import PostgresEngine
from openddb.storage.sqlite import SQLiteEngine

POSTGRES_URL = os.environ.get("OPENDDB_TEST_POSTGRES")
needs_postgres = pytest.mark.skipif(not POSTGRES_URL, reason="set OPENDDB_TEST_POSTGRES to a postgresql:// URL")

EngineFactory = Callable[[], Engine]

# Closes the client connection with this pid, and nothing else: a pid read from a connection that has since closed
# may by now belong to another backend (a replica's base backup streaming WAL, another test's connection).
TERMINATE_CLIENT = ("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE pid = %s AND backend_type = 'client backend' AND datname = current_database()")


@contextmanager
def scratch_database() -> Iterator[str]:
    """The URL of a database of its own on the test server, dropped afterwards (skips if the role may not)."""
    import psycopg

    name = f"openddb_scratch_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(str(POSTGRES_URL), autocommit=True) as admin:
        try:
            admin.execute(f"CREATE DATABASE {name}")
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("the test role may not create databases")
        try:
            yield str(POSTGRES_URL).rsplit("/", 1)[0] + "/" + name
        finally:
            admin.execute(f"DROP DATABASE {name}")


@contextmanager
def _engines(kind: str, url: str | None) -> Iterator[EngineFactory]:
    """Engines that share one store (like several server processes would), closed afterwards."""
    opened: list[Engine] = []
    with tempfile.TemporaryDirectory() as data_dir:
        def factory() -> Engine:
            if kind == "sqlite":
                engine: Engine = SQLiteEngine(data_dir)
            else:
                from openddb.storage.postgres import PostgresEngine

                engine = PostgresEngine(str(url))
            opened.append(engine)
            return engine

        try:
            yield factory
        finally:
            for engine in opened:
                engine.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=needs_postgres)])
def open_engine(request: pytest.FixtureRequest) -> Iterator[EngineFactory]:
    """Opens engines that share one store (on PostgreSQL, the test server's database); closes them afterwards."""
    with _engines(request.param, POSTGRES_URL) as factory:
        yield factory


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=needs_postgres)])
def open_private_engine(request: pytest.FixtureRequest) -> Iterator[EngineFactory]:
    """As `open_engine`, on a store no other test uses (a database of its own on PostgreSQL): for tests whose
    store-wide duties (stream rollover and retention) must not reach the tables of tests running beside them."""
    if request.param == "sqlite":
        with _engines("sqlite", None) as factory:
            yield factory
        return
    with scratch_database() as url, _engines("postgres", url) as factory:
        yield factory


@pytest.fixture
def engine(open_engine: EngineFactory) -> Engine:
    return open_engine()


@pytest.fixture
def pair() -> Iterator[tuple[PostgresEngine, PostgresEngine]]:
    """Two nodes' engines on one PostgreSQL database, grouping their writes as servers do."""
    first = PostgresEngine(str(POSTGRES_URL), group_commit=True)
    second = PostgresEngine(str(POSTGRES_URL), group_commit=True)
    try:
        yield first, second
    finally:
        first.close()
        second.close()
