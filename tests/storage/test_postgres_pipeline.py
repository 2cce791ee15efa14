"""One round trip of statements through libpq's pipeline (storage/postgres_pipeline.py), on a real PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from openddb.storage.postgres_pipeline import BYTEA, INT8, Pipeline
from tests.storage.conftest import POSTGRES_URL, needs_postgres

pytestmark = needs_postgres


@pytest.fixture
def piped() -> Iterator[tuple[Pipeline, str]]:
    """A pipeline on a connection of its own, with a table of its own (dropped afterwards)."""
    table = f"pipeline_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(str(POSTGRES_URL), autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (k BIGINT PRIMARY KEY, v BYTEA, f DOUBLE PRECISION, n INTEGER)")
        try:
            yield Pipeline(conn, lambda: None), table
        finally:
            conn.execute(f"DROP TABLE {table}")


def test_statements_answer_in_order_with_their_types(piped: tuple[Pipeline, str]) -> None:
    pipe, table = piped
    insert = f"INSERT INTO {table} (k, v, f, n) VALUES (%s, %s, %s, %s)"
    pipe.add("BEGIN")
    pipe.add(insert, (1, b"\x00one", 1.5, 7))
    pipe.add(insert, (2, None, -0.25, -3), (INT8, BYTEA, 0, 0))  # a NULL where the first use had bytes
    pipe.add(f"SELECT k, v, f, n, 'text'::text FROM {table} ORDER BY k")
    pipe.add("COMMIT")
    answers = pipe.run()
    assert answers == [[], [], [], [(1, b"\x00one", 1.5, 7, "text"), (2, None, -0.25, -3, "text")], []]
    assert pipe.tags[-1] == "COMMIT"
    pipe.add(f"SELECT v FROM {table} WHERE k=%s", (2,))  # prepared by its first use, used again
    pipe.add(f"SELECT v FROM {table} WHERE k=%s", (1,))
    assert pipe.run() == [[(None,)], [(b"\x00one",)]]


def test_a_failed_statement_undoes_its_round_trip_and_the_connection_goes_on(
        piped: tuple[Pipeline, str]) -> None:
    """The error is psycopg's (a unique violation here), the statements after it were not run, and the
    connection and its prepared statements go on working; so after DEALLOCATE ALL (which psycopg sends on a
    ROLLBACK), once the missing statement has failed."""
    pipe, table = piped
    insert = f"INSERT INTO {table} (k) VALUES (%s)"
    pipe.add(insert, (1,))
    pipe.run()
    pipe.add(insert, (2,))
    pipe.add(insert, (1,))
    pipe.add(insert, (3,))
    with pytest.raises(psycopg.errors.UniqueViolation):
        pipe.run()
    assert pipe.failed_at == 1
    count = f"SELECT count(*)::int8 FROM {table} WHERE k > %s"
    pipe.add(count, (0,))
    assert pipe.run() == [[(1,)]]  # (a round trip outside BEGIN is one implicit transaction: 2 was undone)
    pipe.conn.execute("DEALLOCATE ALL")
    pipe.add(count, (0,))
    with pytest.raises(psycopg.errors.InvalidSqlStatementName):
        pipe.run()
    pipe.add(count, (0,))
    assert pipe.run() == [[(1,)]]
