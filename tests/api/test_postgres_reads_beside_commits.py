"""Reads arriving while a group of writes is open on PostgreSQL are not held behind its commit (issue 32).

A read that arrives in the same moment as another connection's write used to run on the write group's connection
(inside its open transaction), one round trip each, and wait for the group's commit to be answered. Now the
group's commit goes out first and the reads come from committed state on the engine's other connection, in one
round trip (server/passes.py `_read_pass`). Shown with a commit made slow on purpose: a deferred constraint trigger
that sleeps at COMMIT, on this test's table only.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator

import psycopg
import pytest

from tests.api.test_protocol import _answers, framed_request
from tests.conftest import ServerProcess, create_table, make_client, unique_name

POSTGRES_URL = os.environ.get("OPENDDB_TEST_POSTGRES")
pytestmark = pytest.mark.skipif(not POSTGRES_URL, reason="set OPENDDB_TEST_POSTGRES to a postgresql:// URL")
SLOW_COMMIT = 0.8  # seconds a commit writing into the test's table takes


@pytest.fixture(scope="module")
def node() -> Iterator[ServerProcess]:
    server = ServerProcess(None, "--engine", str(POSTGRES_URL), "--workers", "1")
    try:
        yield server
    finally:
        server.finish()


@pytest.fixture
def slow_table(node: ServerProcess) -> Iterator[str]:
    """A table whose writes' commits take SLOW_COMMIT seconds (a deferred trigger on its rows alone)."""
    table = create_table(make_client(node.endpoint), unique_name("slow"))
    with psycopg.connect(str(POSTGRES_URL), autocommit=True) as conn:
        tids = [tid for tid, name in conn.execute("SELECT tid, name FROM openddb_tables") if name.endswith(table)]
        assert len(tids) == 1
        tid = tids[0]
        conn.execute(f"CREATE FUNCTION openddb_test_slow_{tid}() RETURNS trigger LANGUAGE plpgsql AS "
                     f"$$ BEGIN PERFORM pg_sleep({SLOW_COMMIT}); RETURN NULL; END $$")
        conn.execute(f"CREATE CONSTRAINT TRIGGER openddb_test_slow_{tid} AFTER INSERT OR UPDATE ON openddb_items "
                     f"DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.tid = {tid}) "
                     f"EXECUTE FUNCTION openddb_test_slow_{tid}()")
        try:
            yield table
        finally:
            conn.execute(f"DROP TRIGGER openddb_test_slow_{tid} ON openddb_items")
            conn.execute(f"DROP FUNCTION openddb_test_slow_{tid}()")


def test_reads_arriving_with_a_write_are_not_held_behind_its_commit(node: ServerProcess, slow_table: str) -> None:
    """Reads sent in the same moment as another connection's write (just before it) are answered long before the
    write's slow commit; the write is answered after it, and the next reads see it."""
    client = make_client(node.endpoint)
    client.put_item(TableName=slow_table, Item={"pk": {"S": "k"}, "sk": {"S": "s"}, "n": {"N": "0"}})
    readers = [socket.create_connection(("127.0.0.1", node.port), timeout=10) for _ in range(8)]
    writer = socket.create_connection(("127.0.0.1", node.port), timeout=10)
    get = framed_request("GetItem", {"TableName": slow_table, "Key": {"pk": {"S": "k"}, "sk": {"S": "s"}},
                                     "ConsistentRead": True})
    time.sleep(1.2)  # (past the node's first background round, which on a shared store may take a while)
    try:
        for step in range(1, 4):
            put = framed_request("PutItem", {"TableName": slow_table,
                                             "Item": {"pk": {"S": "k"}, "sk": {"S": "s"}, "n": {"N": str(step)}}})
            started = time.monotonic()
            for reader in readers:
                reader.sendall(get)
            writer.sendall(put)
            for reader in readers:
                answer = _answers(reader, 1)[0]
                assert answer["Item"]["n"]["N"] in (str(step - 1), str(step))  # (the write is not acknowledged yet)
            read = time.monotonic() - started
            assert _answers(writer, 1) == [{}]
            written = time.monotonic() - started
            assert written >= SLOW_COMMIT, written
            assert read < SLOW_COMMIT / 2, (step, read)
            assert client.get_item(TableName=slow_table, Key={"pk": {"S": "k"}, "sk": {"S": "s"}},
                                   ConsistentRead=True)["Item"]["n"] == {"N": str(step)}
    finally:
        for sock in (*readers, writer):
            sock.close()
