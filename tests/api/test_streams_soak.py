"""Streams under load: writers (puts, conditional updates, deletes, batches, transactions, TTL expiries) against
a server with two workers whose four shards roll over every 3 seconds, and a consumer following shard lineage
meanwhile. Every acknowledged change has exactly one record, in per-item order, with the right images; a refused
write has none. Then kill -9 in the middle of such writing: after a restart, no acknowledged change lacks its
record and no record lacks its change.

OPENDDB_SOAK_SECONDS sets how long the soak writes (default 60, as the issue asks at least a minute); run with -s
to see the throughput figures.
"""

from __future__ import annotations

import os
import random
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.api.streams_workload import (
    SERVICE,
    TTL_ATTRIBUTE,
    Change,
    Consumer,
    Writer,
    attempt,
    change,
    change_of,
    version,
)
from tests.conftest import ServerProcess, make_client, unique_name

SOAK_SECONDS = float(os.environ.get("OPENDDB_SOAK_SECONDS", "60"))
WRITERS = int(os.environ.get("OPENDDB_SOAK_WRITERS", "4"))
KILL_AFTER = 10.0  # seconds of writing before kill -9
SHARED = ["shared-0", "shared-1", "shared-2"]  # items every writer increments
SEED = int(os.environ.get("OPENDDB_SOAK_SEED", str(random.randrange(1 << 30))))


@pytest.fixture(autouse=True)
def embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Always the embedded engine on a store of its own: a 3-second shard period applies to every stream of a
    store, and would roll other tests' streams on a shared engine (OPENDDB_TEST_ENGINE)."""
    monkeypatch.delenv("OPENDDB_TEST_ENGINE", raising=False)


def start(data_dir: str) -> ServerProcess:
    return ServerProcess(data_dir, "--workers", "2", "--stream-shards", "4", "--stream-shard-seconds", "3")


@pytest.fixture
def data_dir(tmp_path: Path) -> str:
    return str(tmp_path / "data")


@pytest.fixture
def soak_server(data_dir: str) -> Iterator[ServerProcess]:
    process = start(data_dir)
    try:
        yield process
    finally:
        process.finish()


def streamed_table(ddb: Any) -> tuple[str, str]:
    """A table with a NEW_AND_OLD_IMAGES stream and TTL on `exp`: (name, stream ARN)."""
    name = unique_name("soak")
    ddb.create_table(TableName=name, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST",
                     StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
    ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE})
    return name, ddb.describe_table(TableName=name)["Table"]["LatestStreamArn"]


def writers_for(endpoint: str, table: str, dying: threading.Event | None = None) -> list[Writer]:
    """The writers, the shared items created."""
    print(f"\nsoak seed {SEED} (OPENDDB_SOAK_SEED reproduces each writer's choices)")
    dying = dying or threading.Event()
    writers = [Writer(endpoint, table, index, SEED + index, shared=SHARED, dying=dying) for index in range(WRITERS)]
    writers[0].create_shared()
    return writers


def run_threads(targets: list[tuple[Any, tuple[Any, ...]]]) -> list[threading.Thread]:
    threads = [threading.Thread(target=target, args=args, daemon=True) for target, args in targets]
    for thread in threads:
        thread.start()
    return threads


def table_items(ddb: Any, table: str, expiring_only: bool = False) -> dict[str, dict[str, Any]]:
    """The table's items by key, read consistently (only those with a TTL attribute, if asked)."""
    request: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    if expiring_only:
        request |= {"FilterExpression": "attribute_exists(#e)", "ExpressionAttributeNames": {"#e": TTL_ATTRIBUTE}}
    items: dict[str, dict[str, Any]] = {}
    while True:
        page = ddb.scan(**request)
        items |= {item["pk"]["S"]: item for item in page["Items"]}
        if "LastEvaluatedKey" not in page:
            return items
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def await_expiries(ddb: Any, table: str, seconds: float = 30) -> None:
    """Wait until the TTL sweep has deleted every expired item (each written already expired)."""
    deadline = time.monotonic() + seconds
    while table_items(ddb, table, expiring_only=True):
        assert time.monotonic() < deadline, "the TTL sweep left expired items"
        time.sleep(0.3)


def read_all(endpoint: str, arn: str, seconds: float = 60) -> tuple[Consumer, float]:
    """Every record of a disabled stream, read along shard lineage: (the consumer, seconds it took)."""
    consumer = Consumer(endpoint, arn)
    began = time.monotonic()
    consumer.run(began + seconds)
    assert consumer.error is None and consumer.finished(), consumer.error
    return consumer, time.monotonic() - began


# --- checks ---------------------------------------------------------------------------------------------------

def by_key(records: list[dict[str, Any]]) -> dict[str, list[Change]]:
    """Each item's changes, as the records tell them, in reading order."""
    changes: dict[str, list[Change]] = {}
    for record in records:
        made = change_of(record)
        changes.setdefault(made.key, []).append(made)
    return changes


def names(changes: list[Change], limit: int = 12) -> list[Any]:
    shown: list[Any] = [made.name() for made in changes[-limit:]]
    return ([f"... {len(changes) - limit} before"] if len(changes) > limit else []) + shown


def check_records(records: list[dict[str, Any]], writers: list[Writer]) -> dict[str, list[Change]]:
    """What holds of any stream the workload wrote: unique event ids, TTL records naming the service (and only
    they), each record's OldImage the NewImage before it, no record of a refused write. Each item's changes."""
    ids = [record["eventID"] for record in records]
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} duplicate eventIDs"
    for record in records:
        if "userIdentity" in record:
            assert record["userIdentity"] == SERVICE and record["eventName"] == "REMOVE", record
    actual = by_key(records)
    for key, changes in actual.items():
        before = None
        for index, made in enumerate(changes):
            assert made.old == before, \
                f"{key}: a record whose OldImage is not the image before it: {names(changes[:index + 1])}"
            before = made.new
    refused = {made for writer in writers for made in writer.rejected}
    written = {attempt(made.key, made.new) for changes in actual.values() for made in changes if made.new}
    assert not refused & written, f"records of refused writes: {sorted(refused & written)[:10]}"
    return actual


def acknowledged(writers: list[Writer]) -> dict[str, list[Change]]:
    """Each item's acknowledged changes in order: as its writer saw them, or a shared item's by version."""
    expected: dict[str, list[Change]] = {}
    for writer in writers:
        for key, changes in writer.acked.items():
            expected.setdefault(key, []).extend(changes)
    for key in SHARED:
        expected[key].sort(key=lambda made: version(made.new) or 0)
    return expected


def expected_changes(writers: list[Writer]) -> dict[str, list[Change]]:
    """Each item's acknowledged changes in order, and after each expired item's insertion its removal by TTL."""
    expected = acknowledged(writers)
    for writer in writers:
        for key in writer.ttl_keys:
            if key in expected:
                expected[key].append(change(key, expected[key][-1].new, None, ttl=True))
    return expected


def check_exactly_once(actual: dict[str, list[Change]], expected: dict[str, list[Change]]) -> None:
    wrong = sorted(key for key in expected.keys() | actual.keys() if actual.get(key, []) != expected.get(key, []))
    details = [f"{key}: records {names(actual.get(key, []))}, acknowledged {names(expected.get(key, []))}"
               for key in wrong[:5]]
    assert not wrong, f"{len(wrong)} items whose records differ from their acknowledged changes:\n" + \
        "\n".join(details)


# --- the soak ---------------------------------------------------------------------------------------------------

def test_soak_every_acknowledged_change_once_in_order(soak_server):
    """Writers for OPENDDB_SOAK_SECONDS across rollovers, a lineage-following consumer meanwhile: the records are
    exactly the acknowledged changes (and the TTL sweep's removals), each item's in the order they were acknowledged,
    images exact, none for a refused write; the table ends as the writers left it."""
    ddb = make_client(soak_server.endpoint)
    table, arn = streamed_table(ddb)
    consumer = Consumer(soak_server.endpoint, arn)
    writers = writers_for(soak_server.endpoint, table)
    began = time.monotonic()
    [reader] = run_threads([(consumer.run, (began + SOAK_SECONDS + 120,))])
    for thread in run_threads([(writer.run, (began + SOAK_SECONDS,)) for writer in writers]):
        thread.join()
    wrote = time.monotonic() - began
    seen_while_writing = len(consumer.records)
    assert [writer.error for writer in writers] == [None] * WRITERS
    await_expiries(ddb, table)
    ddb.update_table(TableName=table, StreamSpecification={"StreamEnabled": False})  # closes the open shards
    reader.join(timeout=120)
    assert consumer.error is None and consumer.finished(), consumer.error
    assert len(consumer.shards) > 4 * (SOAK_SECONDS // 3) * 0.5, "too few rollovers"
    actual = check_records(consumer.records, writers)
    expected = expected_changes(writers)
    check_exactly_once(actual, expected)
    final = {key: changes[-1].new for key, changes in expected.items() if changes[-1].new is not None}
    assert table_items(ddb, table) == final
    # Read again from TRIM_HORIZON (shards in another order): the same records, each item's in the same order,
    # with the same event ids; and GetRecords' pace on its own.
    again, took = read_all(soak_server.endpoint, arn)
    assert {r["eventID"]: r for r in again.records} == {r["eventID"]: r for r in consumer.records}
    assert by_key(again.records) == actual
    changes = sum(writer.acknowledged() for writer in writers)
    print(f"soak: {WRITERS} writers, {wrote:.0f} s, {sum(w.requests for w in writers)} requests, "
          f"{changes} acknowledged changes ({changes / wrote:.0f} writes/s), "
          f"{sum(len(w.ttl_keys) for w in writers)} TTL expiries, {sum(len(expected[k]) - 1 for k in SHARED)} "
          f"increments of shared items ({sum(k in SHARED for w in writers for k, *_ in w.rejected)} lost races), "
          f"{len(consumer.shards)} shards; consumer saw "
          f"{seen_while_writing} records while the writers wrote ({seen_while_writing / wrote:.0f} records/s), "
          f"{len(consumer.records)} in all; a second reading: {len(again.records) / took:.0f} records/s")


# --- kill -9 ----------------------------------------------------------------------------------------------------

def workers_of(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as handle:
        return [int(child) for child in handle.read().split()]


def await_gone(pids: list[int], port: int, seconds: float = 20) -> None:
    """Wait until the killed supervisor's workers are dead (they die with it, by PDEATHSIG) and its port free:
    a worker still alive could still write to the store."""
    deadline = time.monotonic() + seconds
    for pid in pids:
        while os.path.exists(f"/proc/{pid}") and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z":
            assert time.monotonic() < deadline, f"worker {pid} outlived its supervisor"
            time.sleep(0.05)
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        except OSError:
            return
        assert time.monotonic() < deadline, "the killed server's port still answers"
        time.sleep(0.05)


def kill_while_writing(data_dir: str) -> tuple[str, str, list[Writer], Consumer]:
    """Write (and read the stream) for KILL_AFTER seconds, then kill -9 the server under the writers: (table,
    stream ARN, writers, the consumer that read meanwhile)."""
    first = start(data_dir)
    try:
        table, arn = streamed_table(make_client(first.endpoint))
        dying = threading.Event()
        writers = writers_for(first.endpoint, table, dying)
        consumer = Consumer(first.endpoint, arn)
        threads = run_threads([(writer.run, (time.monotonic() + 10 * KILL_AFTER,)) for writer in writers] +
                              [(consumer.run, (time.monotonic() + 10 * KILL_AFTER,))])
        time.sleep(KILL_AFTER)
        pids = workers_of(first.process.pid)
        dying.set()  # from here on a failed request is one the kill cut short
        first.stop(kill=True)
        assert first.process.returncode == -9
        for thread in threads:
            thread.join(timeout=60)
        await_gone(pids, first.port)
    finally:
        first.log.close()
    assert [writer.error for writer in writers] == [None] * WRITERS
    # The consumer stopped at the kill, unable to connect; an error the server answered would be a fault.
    assert consumer.records and not isinstance(consumer.error, ClientError), consumer.error
    return table, arn, writers, consumer


def check_after_kill(actual: dict[str, list[Change]], items: dict[str, dict[str, Any]],
                     writers: list[Writer]) -> None:
    """Each item's records: its acknowledged changes, once each and in order, and besides them only a change in
    flight at the kill (or the TTL sweep's removal); its last record leaves it as it is now; a transaction cut
    short has all its records or none."""
    acked = acknowledged(writers)
    in_flight = [made for writer in writers if writer.in_flight for made in writer.in_flight.changes]
    expiring = {key for writer in writers for key in writer.ttl_keys}
    for key in sorted({key for writer in writers for key in writer.keys} | expiring | set(SHARED)):
        expected, got = acked.get(key, []), actual.get(key, [])
        assert [made for made in got if made in expected] == expected, \
            f"{key}: records {names(got)}, acknowledged {names(expected)}"
        for extra in (made for made in got if made not in expected):
            assert extra in in_flight or (extra.ttl and key in expiring), \
                f"{key}: a record of no change made: {extra.name()}, acknowledged {names(expected)}"
        assert items.get(key) == (got[-1].new if got else None), \
            f"{key}: the item is {items.get(key)}, its records {names(got)}"
    for writer in writers:
        if writer.in_flight is not None and writer.in_flight.atomic:
            made = [change in actual.get(change.key, []) for change in writer.in_flight.changes]
            assert all(made) or not any(made), f"a transaction cut short made part of its changes: {made}"


def test_kill_9_during_the_soak(data_dir):
    """kill -9 of a two-worker server while writers write across rollovers: after a restart on the same store,
    every acknowledged change has its record, and every record's change is the item's history (the item as read
    now is its last record's NewImage); a request in flight at the kill has all its records or none, as its
    changes; a record a consumer read before the kill is still there, the same (it was of a committed change)."""
    table, arn, writers, before = kill_while_writing(data_dir)
    second = start(data_dir)
    try:
        ddb = make_client(second.endpoint)
        await_expiries(ddb, table)
        items = table_items(ddb, table)
        ddb.update_table(TableName=table, StreamSpecification={"StreamEnabled": False})
        consumer, _ = read_all(second.endpoint, arn)
        actual = check_records(consumer.records, writers)
        check_after_kill(actual, items, writers)
        after = {record["eventID"]: record for record in consumer.records}
        lost = [record for record in before.records if after.get(record["eventID"]) != record]
        assert not lost, f"{len(lost)} records read before the kill are not there after it, e.g. {lost[0]}"
        cut = [made for writer in writers if writer.in_flight is not None for made in writer.in_flight.changes]
        print(f"kill -9 after {KILL_AFTER:.0f} s: {sum(w.acknowledged() for w in writers)} acknowledged changes, "
              f"{len(consumer.records)} records in {len(consumer.shards)} shards ({len(before.records)} read before "
              f"the kill); {len(cut)} changes in flight at "
              f"the kill, {sum(made in actual.get(made.key, []) for made in cut)} of them made")
    finally:
        second.finish()
