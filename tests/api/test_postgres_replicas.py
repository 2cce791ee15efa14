"""Eventually consistent reads from a real PostgreSQL streaming replica (`--engine-replica`).

The replica is a second PostgreSQL server made from a base backup of the test server and following its WAL
(scripts/postgres-start --replica-of). Pausing its replay shows which reads it answers: an item written after the
pause is missing from every eventually consistent read it serves, and present in every strongly consistent one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import ServerProcess, create_table, make_client, unique_name

POSTGRES_URL = os.environ.get("OPENDDB_TEST_POSTGRES")
pytestmark = pytest.mark.skipif(not POSTGRES_URL, reason="set OPENDDB_TEST_POSTGRES to a postgresql:// URL")
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "postgres-start"


class Replica:
    """A streaming replica of the test server, started for a test and stopped after it."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="openddb-replica-")
        made = subprocess.run([str(SCRIPT), "--replica-of", str(POSTGRES_URL), self.dir], capture_output=True,
                              text=True, timeout=300)
        assert made.returncode == 0, made.stderr
        self.url = made.stdout.strip().splitlines()[-1]

    def replay(self, on: bool) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("SELECT pg_wal_replay_resume()" if on else "SELECT pg_wal_replay_pause()")

    def stop(self) -> None:
        subprocess.run([str(SCRIPT), "--stop", self.dir], capture_output=True, timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def replica() -> Iterator[Replica]:
    started = Replica()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def own_replica() -> Iterator[Replica]:
    """A replica this test may stop."""
    started = Replica()
    try:
        yield started
    finally:
        started.stop()


def node(replica: Replica, max_lag: float) -> ServerProcess:
    return ServerProcess(None, "--engine", str(POSTGRES_URL), "--workers", "1", "--engine-replica", replica.url,
                         "--replica-max-lag", str(max_lag))


def settled(client, table: str) -> None:  # type: ignore[no-untyped-def]
    """Eventually consistent reads for a second: the node has noted the primary's position often enough to know
    the replica keeps up with it."""
    deadline = time.monotonic() + 1.2
    while time.monotonic() < deadline:
        client.get_item(TableName=table, Key={"pk": {"S": "warm-up"}})
        time.sleep(0.05)


@contextmanager
def written_while_replay_paused(replica: Replica, max_lag: float) -> Iterator[tuple[Any, str]]:
    """A node with the replica, a table, and an item written while the replica's replay was paused; the client
    and the table's name. Afterwards the replay goes on, and the replica shows the item again."""
    server = node(replica, max_lag)
    try:
        client = make_client(server.endpoint)
        table = create_table(client, unique_name("replica"), range_type=None)
        settled(client, table)
        replica.replay(False)
        try:
            client.put_item(TableName=table, Item={"pk": {"S": "new"}})
            yield client, table
        finally:
            replica.replay(True)
        deadline = time.monotonic() + 10
        while "Item" not in client.get_item(TableName=table, Key={"pk": {"S": "new"}}):
            assert time.monotonic() < deadline, "the replica never showed the write"
            time.sleep(0.05)
    finally:
        server.finish()


def test_eventually_consistent_reads_come_from_the_replica_and_strong_ones_never(replica: Replica) -> None:
    with written_while_replay_paused(replica, 60) as (client, table):
        key = {"pk": {"S": "new"}}
        query = {"KeyConditionExpression": "pk = :k", "ExpressionAttributeValues": {":k": {"S": "new"}}}
        # Eventually consistent: answered by the replica, whose replay stopped before the write.
        assert "Item" not in client.get_item(TableName=table, Key=key)
        assert client.query(TableName=table, **query)["Count"] == 0
        assert client.scan(TableName=table)["Count"] == 0
        assert client.batch_get_item(RequestItems={table: {"Keys": [key]}})["Responses"][table] == []
        # Strongly consistent: the primary, always.
        assert client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"] == key
        assert client.query(TableName=table, ConsistentRead=True, **query)["Count"] == 1
        assert client.scan(TableName=table, ConsistentRead=True)["Count"] == 1
        assert client.batch_get_item(RequestItems={table: {"Keys": [key], "ConsistentRead": True}})[
            "Responses"][table] == [key]


def test_a_replica_further_behind_than_the_bound_is_skipped(replica: Replica) -> None:
    """With --replica-max-lag 0.5, a replica that stopped replaying serves stale reads for at most about that
    long; then the primary answers them."""
    with written_while_replay_paused(replica, 0.5) as (client, table):
        written = time.monotonic()
        while "Item" not in client.get_item(TableName=table, Key={"pk": {"S": "new"}}):
            time.sleep(0.02)
        assert time.monotonic() - written < 2.0  # (0.5 s bound plus the 0.2 s between checks, and slack)


def test_stopping_the_replica_under_load_reaches_no_client(own_replica: Replica) -> None:
    replica = own_replica
    server = node(replica, 1)
    try:
        setup = make_client(server.endpoint)
        table = create_table(setup, unique_name("failover"), range_type=None)
        for n in range(20):
            setup.put_item(TableName=table, Item={"pk": {"S": f"k{n}"}, "n": {"N": str(n)}})
        settled(setup, table)
        errors: list[str] = []
        reads = [0]
        stop = threading.Event()

        def reader() -> None:
            client = make_client(server.endpoint)
            while not stop.is_set():
                try:
                    found = client.get_item(TableName=table, Key={"pk": {"S": f"k{reads[0] % 20}"}})
                    assert "Item" in found
                    client.query(TableName=table, KeyConditionExpression="pk = :k",
                                 ExpressionAttributeValues={":k": {"S": "k1"}})
                    reads[0] += 1
                except Exception as error:
                    errors.append(repr(error))

        threads = [threading.Thread(target=reader) for _ in range(4)]
        for thread in threads:
            thread.start()
        time.sleep(0.5)
        before = reads[0]
        replica.stop()  # (pg_ctl stop -m fast: its connections are closed under the node)
        time.sleep(1.5)
        stop.set()
        for thread in threads:
            thread.join(30)
        assert not errors, errors[:3]
        assert before > 0 and reads[0] > before + 20  # reads went on, from the primary
    finally:
        output = server.finish()
    assert "skipped" in output  # (the node said it skipped the replica)
