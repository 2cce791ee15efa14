"""Durability and concurrency through boto3: acknowledged writes survive kill -9, concurrent conditional
increments lose nothing, and SIGTERM drains in-flight requests and exits cleanly."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Iterator

import pytest
from botocore.exceptions import BotoCoreError, ClientError

from tests.conftest import ServerProcess, create_table, make_client


@pytest.fixture
def data_dir() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as directory:
        yield directory


def started(data_dir: str) -> ServerProcess:
    return ServerProcess(data_dir)


def all_keys(client, table: str) -> set[str]:
    keys: set[str] = set()
    kwargs: dict = {"TableName": table, "ConsistentRead": True}
    while True:
        page = client.scan(**kwargs)
        keys.update(item["pk"]["S"] for item in page["Items"])
        if "LastEvaluatedKey" not in page:
            return keys
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def test_acknowledged_writes_survive_kill_9(data_dir):
    """Every write boto3 saw acknowledged is there after the server is SIGKILLed and restarted."""
    first = started(data_dir)
    try:
        client = make_client(first.endpoint)
        table = create_table(client, range_type=None)
        for i in range(200):
            client.put_item(TableName=table, Item={"pk": {"S": f"k{i}"}, "v": {"N": str(i)}})
        client.update_item(TableName=table, Key={"pk": {"S": "k0"}}, UpdateExpression="SET v = :v",
                           ExpressionAttributeValues={":v": {"N": "-1"}})
        client.delete_item(TableName=table, Key={"pk": {"S": "k1"}})
        first.stop(kill=True)
        assert first.process.returncode == -9
    finally:
        first.log.close()
    second = started(data_dir)
    try:
        client = make_client(second.endpoint)
        for i in range(2, 200):
            got = client.get_item(TableName=table, Key={"pk": {"S": f"k{i}"}}, ConsistentRead=True)
            assert got["Item"] == {"pk": {"S": f"k{i}"}, "v": {"N": str(i)}}
        assert client.get_item(TableName=table, Key={"pk": {"S": "k0"}})["Item"]["v"] == {"N": "-1"}
        assert "Item" not in client.get_item(TableName=table, Key={"pk": {"S": "k1"}})
    finally:
        second.finish()


def test_concurrent_conditional_increments(server):
    """50 clients doing optimistic read-increment-write with a condition end at exactly +50."""
    setup = make_client(server.endpoint)
    table = create_table(setup, range_type=None)
    key = {"pk": {"S": "counter"}}
    setup.put_item(TableName=table, Item={**key, "n": {"N": "0"}})
    clients = [make_client(server.endpoint) for _ in range(50)]
    barrier = threading.Barrier(len(clients))
    retries: list[int] = []
    errors: list[BaseException] = []

    def worker(client) -> None:
        try:
            barrier.wait()
            attempts = 0
            while True:
                current = client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]["n"]
                try:
                    client.update_item(TableName=table, Key=key, UpdateExpression="SET n = n + :one",
                                       ConditionExpression="n = :expected",
                                       ExpressionAttributeValues={":one": {"N": "1"}, ":expected": current})
                    retries.append(attempts)
                    return
                except ClientError as error:
                    if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                        raise
                    attempts += 1
        except BaseException as error:  # surfaced by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert len(retries) == 50
    final = setup.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]["n"]
    assert final == {"N": "50"}


class Drained:
    """What a SIGTERM-while-writing run observed."""

    def __init__(self) -> None:
        self.acknowledged: list[str] = []
        self.unanswered: list[str] = []  # writes whose request failed at the connection level
        self.stored: set[str] = set()
        self.shutdown = 0.0


def sigterm_while_writing(data_dir: str, idle_connection: bool) -> Drained:
    """Eight writers busy, SIGTERM, restart; checks exit 0 and that every acknowledged write survived."""
    seen = Drained()
    first = started(data_dir)
    client = make_client(first.endpoint)
    table = create_table(client, range_type=None)
    if idle_connection:
        client.get_item(TableName=table, Key={"pk": {"S": "idle"}})  # keeps a keep-alive connection open
    else:
        client.close()
    lock = threading.Lock()
    terminating = threading.Event()
    failures: list[BaseException] = []

    def writer(index: int) -> None:
        own = make_client(first.endpoint)
        i = 0
        while True:
            pk = f"w{index}-{i}"
            try:
                own.put_item(TableName=table, Item={"pk": {"S": pk}, "blob": {"S": "x" * 2000}})
            except (BotoCoreError, ClientError) as error:
                # Once shutdown starts, refused or closed connections are expected; anything earlier is not.
                with lock:
                    (seen.unanswered if terminating.is_set() else failures).append(pk if terminating.is_set()
                                                                                   else error)
                return
            with lock:
                seen.acknowledged.append(pk)
            i += 1

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while len(seen.acknowledged) < 200 and time.monotonic() < deadline:
        time.sleep(0.01)
    terminating.set()
    begun = time.monotonic()
    first.process.terminate()
    first.process.wait(timeout=20)
    seen.shutdown = time.monotonic() - begun
    for thread in threads:
        thread.join(timeout=30)
    output = first.finish()
    assert first.process.returncode == 0, output
    assert not failures, failures
    assert len(seen.acknowledged) >= 200
    second = started(data_dir)
    try:
        seen.stored = all_keys(make_client(second.endpoint), table)
    finally:
        second.finish()
    missing = set(seen.acknowledged) - seen.stored
    assert not missing, sorted(missing)[:10]
    return seen


def test_sigterm_drains_in_flight_requests(data_dir):
    """SIGTERM while writers are busy: the server exits 0 promptly and every acknowledged write survives."""
    seen = sigterm_while_writing(data_dir, idle_connection=False)
    assert seen.shutdown < 5, f"shutdown took {seen.shutdown:.1f}s"


def test_sigterm_with_an_idle_connection_is_prompt(data_dir):
    """An idle keep-alive connection must not hold up shutdown while other requests drain."""
    seen = sigterm_while_writing(data_dir, idle_connection=True)
    assert seen.shutdown < 5, f"shutdown took {seen.shutdown:.1f}s"


def test_sigterm_answers_every_write_it_applied(data_dir):
    """A graceful stop answers every request it applied: no write is stored whose client saw the connection drop."""
    seen = sigterm_while_writing(data_dir, idle_connection=False)
    applied_unanswered = sorted(set(seen.unanswered) & seen.stored)
    assert not applied_unanswered, applied_unanswered
