"""Local triggers (`serve --trigger`) and `openddb streams tail`: records delivered as AWS Lambda receives them,
retried, in order per item, resumed after a restart; the settings' parsing and the event shapes."""

from __future__ import annotations

import http.server
import itertools
import json
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from openddb.streams.tail import Shard
from openddb.streams.triggers import (
    StateStore,
    TriggerConfig,
    failure_record,
    lambda_record,
    load_config,
    parse_trigger,
)
from tests.conftest import ServerProcess, make_client, unique_name

ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/orders/stream/2026-11-29T08:20:01.123"


def _record(seq: str, name: str = "INSERT", **extra: Any) -> dict[str, Any]:
    return {"eventID": "e" + seq, "eventName": name, "eventVersion": "1.1", "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1", **extra,
            "dynamodb": {"ApproximateCreationDateTime": 1795940370, "Keys": {"pk": {"S": "a"}},
                         "SequenceNumber": seq, "SizeBytes": 3, "StreamViewType": "KEYS_ONLY"}}


# --- the pure parts ----------------------------------------------------------------------------------------

def test_trigger_option_takes_table_equals_url_with_lambdas_defaults() -> None:
    # (Lambda's defaults for a DynamoDB event source mapping: BatchSize 100, no window, retries forever.)
    config = parse_trigger("orders=http://127.0.0.1:9000/hook")
    assert (config.table, config.url, config.batch_size, config.batching_window, config.max_retries) == \
        ("orders", "http://127.0.0.1:9000/hook", 100, 0.0, -1)
    assert config.starting_position == "TRIM_HORIZON"
    for bad in ("orders", "orders=ftp://host/x", "ab=http://h/", "orders=http:///nohost"):
        with pytest.raises(ValueError):
            parse_trigger(bad)


def test_config_file_in_toml_and_json(tmp_path: Any) -> None:
    # The settings of Lambda's event source mapping, by their local names, in either format.
    toml = tmp_path / "openddb.toml"
    toml.write_text('[[trigger]]\ntable = "orders"\nurl = "http://127.0.0.1:9000/"\nbatch_size = 10\n'
                    'batching_window = 2\nstarting_position = "latest"\nmax_retries = 3\non_failure = "f.jsonl"\n'
                    '[[trigger]]\ntable = "users"\nurl = "http://127.0.0.1:9001/"\n')
    first, second = load_config(str(toml))
    assert (first.batch_size, first.batching_window, first.starting_position, first.max_retries,
            first.on_failure) == (10, 2.0, "LATEST", 3, "f.jsonl")
    assert (second.table, second.batch_size) == ("users", 100)
    path = tmp_path / "openddb.json"
    path.write_text(json.dumps({"trigger": [{"table": "orders", "url": "http://h:1/", "batch_size": 5}]}))
    assert load_config(str(path))[0].batch_size == 5


@pytest.mark.parametrize("entry", [
    {"table": "orders", "url": "http://h/", "batch_size": 0},
    {"table": "orders", "url": "http://h/", "batch_size": 10001},  # (Lambda's maximum is 10,000)
    {"table": "orders", "url": "http://h/", "batching_window": 301},  # (and 300 seconds)
    {"table": "orders", "url": "http://h/", "max_retries": -2},
    {"table": "orders", "url": "http://h/", "starting_position": "AT_TIMESTAMP"},
    {"table": "orders", "url": "http://h/", "colour": "blue"},
    {"url": "http://h/"},
])
def test_config_file_refuses_what_lambda_would(tmp_path: Any, entry: dict[str, Any]) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"trigger": [entry]}))
    with pytest.raises(ValueError):
        load_config(str(path))


def test_lambda_record_adds_the_stream_arn_and_lambdas_user_identity() -> None:
    # Lambda's event carries eventSourceARN, and a TTL deletion's userIdentity in lower camel case, where
    # GetRecords has PrincipalId/Type.
    ttl = _record("000000000000000000007", "REMOVE",
                  userIdentity={"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"})
    event = lambda_record(ttl, ARN)
    assert event["eventSourceARN"] == ARN
    assert event["userIdentity"] == {"principalId": "dynamodb.amazonaws.com", "type": "Service"}
    assert list(event) == ["eventID", "eventName", "eventVersion", "eventSource", "awsRegion", "userIdentity",
                           "dynamodb", "eventSourceARN"]
    assert isinstance(event["dynamodb"]["ApproximateCreationDateTime"], int)  # a number, as Lambda has it
    assert "userIdentity" not in lambda_record(_record("000000000000000000008"), ARN)


def test_failure_record_is_lambdas_with_the_batch() -> None:
    config = TriggerConfig("orders", "http://127.0.0.1:9/hook", max_retries=2)
    shard = Shard(ARN, "shardId-1", None, 0)
    event = {"Records": [lambda_record(_record(s), ARN) for s in ("000000000000000000003", "000000000000000000009")]}
    record = failure_record(config, shard, event, attempts=3, status=500)
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 3
    assert record["responseContext"]["statusCode"] == 500
    assert record["DDBStreamBatchInfo"] == {
        "shardId": "shardId-1", "startSequenceNumber": "000000000000000000003",
        "endSequenceNumber": "000000000000000000009", "approximateArrivalOfFirstRecord": "2026-11-29T08:19:30Z",
        "approximateArrivalOfLastRecord": "2026-11-29T08:19:30Z", "batchSize": 2, "streamArn": ARN}
    assert record["payload"] == event


def test_state_store_survives_reopening(tmp_path: Any) -> None:
    path = str(tmp_path / "triggers" / "state.json")
    store = StateStore(path)
    assert store.get("orders http://h/") == (False, {})
    shard = Shard(ARN, "shardId-1", None, 0, acked="000000000000000000012")
    store.put("orders http://h/", [shard])
    started, positions = StateStore(path).get("orders http://h/")
    assert started
    assert positions[shard.key].seq == "000000000000000000012"
    assert not positions[shard.key].done
    assert not os.path.exists(path + ".tmp")


# --- end to end: a real server delivering to a real HTTP endpoint -----------------------------------------

class Receiver:
    """A local HTTP endpoint standing in for a Lambda function: keeps the batches it answered 2xx, and fails on
    purpose (`fail_rate` of the requests at random, or all of them while `failing`)."""

    def __init__(self, fail_rate: float = 0.0) -> None:
        self.fail_rate = fail_rate
        self.failing = False
        self.poison: str | None = None  # a key whose batches fail
        self.batches: list[dict[str, Any]] = []
        self.attempts = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with receiver.lock:
                    receiver.attempts += 1
                    fail = receiver.failing or random.random() < receiver.fail_rate or any(
                        record["dynamodb"]["Keys"].get("pk") == {"S": receiver.poison} for record in body["Records"])
                    if not fail:
                        receiver.batches.append(body)
                self.send_response(500 if fail else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def records(self) -> list[dict[str, Any]]:
        with self.lock:
            return [record for batch in self.batches for record in batch["Records"]]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    endpoint = Receiver()
    yield endpoint
    endpoint.close()


def wait_for(condition: Callable[[], bool], seconds: float = 40.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def stream_table(ddb: Any, name: str, view: str = "NEW_AND_OLD_IMAGES") -> str:
    ddb.create_table(TableName=name, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST",
                     StreamSpecification={"StreamEnabled": True, "StreamViewType": view})
    return name


def write_versions(ddb: Any, table: str, keys: int, versions: int, delete: bool = True) -> int:
    """Put, update and (optionally) delete each key, interleaved across keys: the records each key must get, in
    this order. Returns how many records that makes."""
    count = 0
    for version in range(versions):
        for key in range(keys):
            if version == 0:
                ddb.put_item(TableName=table, Item={"pk": {"S": f"k{key}"}, "v": {"N": "0"}})
            else:
                ddb.update_item(TableName=table, Key={"pk": {"S": f"k{key}"}}, UpdateExpression="SET v = :v",
                                ExpressionAttributeValues={":v": {"N": str(version)}})
            count += 1
    if delete:
        for key in range(keys):
            ddb.delete_item(TableName=table, Key={"pk": {"S": f"k{key}"}})
            count += 1
    return count


def per_item(records: list[dict[str, Any]]) -> dict[str, list[tuple[str, str | None]]]:
    """Each key's records as (eventName, the new image's version), first delivery of each eventID only."""
    seen: set[str] = set()
    out: dict[str, list[tuple[str, str | None]]] = {}
    for record in records:
        if record["eventID"] in seen:
            continue
        seen.add(record["eventID"])
        image = record["dynamodb"].get("NewImage")
        key = record["dynamodb"]["Keys"]["pk"]["S"]
        out.setdefault(key, []).append((record["eventName"], image["v"]["N"] if image else None))
    return out


def expected_per_item(keys: int, versions: int, delete: bool = True) -> dict[str, list[tuple[str, str | None]]]:
    events: list[tuple[str, str | None]] = [("INSERT", "0")] + [("MODIFY", str(v)) for v in range(1, versions)]
    if delete:
        events.append(("REMOVE", None))
    return {f"k{key}": list(events) for key in range(keys)}


def test_flaky_endpoint_gets_every_record_once_in_item_order_across_rollovers(tmp_path: Any) -> None:
    # The endpoint answers 500 a third of the time; shards roll over every second. Every record arrives, each
    # in a batch the endpoint accepted once, per item in the order written, in Lambda's event format.
    endpoint = Receiver(fail_rate=0.33)
    config = tmp_path / "triggers.toml"
    table = unique_name("trig")
    config.write_text(f'[[trigger]]\ntable = "{table}"\nurl = "{endpoint.url}"\nbatch_size = 7\n')
    server = ServerProcess(str(tmp_path / "data"), "--data-dir", str(tmp_path / "data"), "--config", str(config),
                           "--stream-shards", "3", "--stream-shard-seconds", "1")
    try:
        ddb = make_client(server.endpoint)
        stream_table(ddb, table)
        total = write_versions(ddb, table, keys=12, versions=4)
        wait_for(lambda: len(endpoint.records()) >= total)
        time.sleep(0.5)  # (nothing more may come)
        records = endpoint.records()
        assert len(records) == total
        assert len({record["eventID"] for record in records}) == total
        assert per_item(records) == expected_per_item(12, 4)
        arn = ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        assert all(len(batch["Records"]) <= 7 for batch in endpoint.batches)
        for record in records:
            assert record["eventSourceARN"] == arn
            assert record["eventSource"] == "aws:dynamodb"
            assert isinstance(record["dynamodb"]["ApproximateCreationDateTime"], int | float)
        assert endpoint.attempts > len(endpoint.batches)  # it did fail, and the batches were sent again
    finally:
        server.finish()
        endpoint.close()


def test_restart_resumes_without_loss(tmp_path: Any, receiver: Receiver) -> None:
    # Delivery positions survive a kill -9: records written while the endpoint was failing are delivered after
    # the restart, and those delivered before are not sent again (at least once: only a batch in flight may be).
    table = unique_name("trig")
    data = str(tmp_path / "data")
    options = ("--data-dir", data, "--trigger", f"{table}={receiver.url}")
    server = ServerProcess(data, *options)
    try:
        ddb = make_client(server.endpoint)
        stream_table(ddb, table)
        first = write_versions(ddb, table, keys=5, versions=2, delete=False)
        wait_for(lambda: len(receiver.records()) >= first)
        time.sleep(0.5)  # (the position of the last batch is saved)
        receiver.failing = True
        second = write_versions(ddb, table, keys=5, versions=1, delete=True)
        wait_for(lambda: receiver.attempts > len(receiver.batches) + 1)
        server.stop(kill=True)
    finally:
        server.finish()
    receiver.failing = False
    server = ServerProcess(data, *options)
    try:
        wait_for(lambda: len({r["eventID"] for r in receiver.records()}) >= first + second)
        time.sleep(0.5)
        records = receiver.records()
        assert len(records) == first + second  # nothing delivered twice
        events = [("INSERT", "0"), ("MODIFY", "1"), ("MODIFY", "0"), ("REMOVE", None)]
        assert per_item(records) == {f"k{k}": events for k in range(5)}
    finally:
        server.finish()


def test_batch_given_up_after_max_retries_goes_to_the_on_failure_file(tmp_path: Any, receiver: Receiver) -> None:
    # max_retries 2: three attempts, then a Lambda-like failure record with the batch, and delivery goes on.
    table = unique_name("trig")
    failures = tmp_path / "failed.jsonl"
    config = tmp_path / "triggers.json"
    config.write_text(json.dumps({"trigger": [{"table": table, "url": receiver.url, "max_retries": 2,
                                               "batch_size": 10, "batching_window": 0.5,
                                               "on_failure": str(failures)}]}))
    server = ServerProcess(None, "--config", str(config), "--stream-shards", "1")
    try:
        ddb = make_client(server.endpoint)
        stream_table(ddb, table, "KEYS_ONLY")
        receiver.failing = True
        for key in range(3):
            ddb.put_item(TableName=table, Item={"pk": {"S": f"k{key}"}})
        wait_for(lambda: failures.exists() and failures.read_text().endswith("\n"))
        assert receiver.attempts == 3
        (line,) = failures.read_text().splitlines()
        record = json.loads(line)
        assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
        assert record["requestContext"]["approximateInvokeCount"] == 3
        assert record["responseContext"]["statusCode"] == 500
        info = record["DDBStreamBatchInfo"]
        assert info["batchSize"] == 3
        assert info["streamArn"] == ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        given_up = record["payload"]["Records"]
        assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in given_up] == ["k0", "k1", "k2"]
        assert info["startSequenceNumber"] == given_up[0]["dynamodb"]["SequenceNumber"]
        receiver.failing = False
        ddb.put_item(TableName=table, Item={"pk": {"S": "after"}})
        wait_for(lambda: len(receiver.records()) == 1)
        assert receiver.records()[0]["dynamodb"]["Keys"] == {"pk": {"S": "after"}}
    finally:
        server.finish()


def test_latest_starts_after_what_was_written_before(tmp_path: Any, receiver: Receiver) -> None:
    # starting_position LATEST: the records already in the stream when the trigger first starts are skipped.
    table = unique_name("trig")
    data = str(tmp_path / "data")
    server = ServerProcess(data, "--data-dir", data)
    try:
        ddb = make_client(server.endpoint)
        stream_table(ddb, table)
        ddb.put_item(TableName=table, Item={"pk": {"S": "before"}})
    finally:
        server.finish()
    config = tmp_path / "triggers.toml"
    config.write_text(f'[[trigger]]\ntable = "{table}"\nurl = "{receiver.url}"\nstarting_position = "LATEST"\n')
    server = ServerProcess(data, "--data-dir", data, "--config", str(config))
    try:
        ddb = make_client(server.endpoint)
        # The trigger has found the stream and its end once it has saved its position (a fixed sleep raced a loaded
        # machine: the write came first and LATEST rightly skipped it).
        state = Path(data) / "triggers" / "state.json"
        wait_for(lambda: state.exists() and table in state.read_text())
        ddb.put_item(TableName=table, Item={"pk": {"S": "after"}})
        wait_for(lambda: len(receiver.records()) >= 1)
        time.sleep(0.5)
        assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in receiver.records()] == ["after"]
    finally:
        server.finish()


def test_one_deliverer_with_several_workers(tmp_path: Any, receiver: Receiver) -> None:
    # With --workers 2 exactly one process delivers: each record arrives once.
    table = unique_name("trig")
    data = str(tmp_path / "data")
    server = ServerProcess(data, "--data-dir", data, "--workers", "2", "--trigger", f"{table}={receiver.url}")
    try:
        ddb = make_client(server.endpoint)
        stream_table(ddb, table)
        total = write_versions(ddb, table, keys=6, versions=2)
        wait_for(lambda: len(receiver.records()) >= total)
        time.sleep(1.0)
        assert len(receiver.records()) == total
        assert per_item(receiver.records()) == expected_per_item(6, 2)
    finally:
        server.finish()


def test_bad_trigger_settings_stop_the_server_before_it_starts(tmp_path: Any) -> None:
    (tmp_path / "triggers").mkdir()
    (tmp_path / "triggers" / "state.json").write_text("not json")
    for args in (["--in-memory", "--trigger", "orders"], ["--in-memory", "--config", str(tmp_path / "x.toml")],
                 ["--data-dir", str(tmp_path), "--trigger", "orders=http://127.0.0.1:9/"]):
        done = subprocess.run([sys.executable, "-m", "openddb", "serve", "--port", "0", *args],
                              capture_output=True, text=True, timeout=30)
        assert done.returncode != 0
        assert "openddb:" in done.stderr
        assert "Traceback" not in done.stderr


def _interruptible() -> None:
    """In the tail's process before it starts: SIGINT as a terminal's Ctrl-C delivers it. A test run started in the
    background by a shell script inherits SIGINT ignored (POSIX), and Python then leaves it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_streams_tail_prints_records_as_json_lines(server: ServerProcess) -> None:
    # `openddb streams tail` prints every record of the table, one JSON object a line, as it arrives.
    ddb = make_client(server.endpoint)
    table = stream_table(ddb, unique_name("tail"))
    ddb.put_item(TableName=table, Item={"pk": {"S": "a"}})
    tail = subprocess.Popen([sys.executable, "-m", "openddb", "streams", "tail", table, "--endpoint",
                             server.endpoint], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_interruptible)
    try:
        assert tail.stdout is not None
        first = json.loads(tail.stdout.readline())
        assert (first["eventName"], first["dynamodb"]["Keys"]) == ("INSERT", {"pk": {"S": "a"}})
        ddb.delete_item(TableName=table, Key={"pk": {"S": "a"}})
        second = json.loads(tail.stdout.readline())
        assert (second["eventName"], second["dynamodb"]["OldImage"]) == ("REMOVE", {"pk": {"S": "a"}})
    finally:
        tail.send_signal(signal.SIGINT)
        _, errors = tail.communicate(timeout=30)  # (a loaded machine may take long to run it)
    assert tail.returncode == 0
    assert b"Traceback" not in errors


def test_streams_tail_from_latest_skips_what_was_there(server: ServerProcess) -> None:
    ddb = make_client(server.endpoint)
    table = stream_table(ddb, unique_name("tail"))
    ddb.put_item(TableName=table, Item={"pk": {"S": "old"}})
    tail = subprocess.Popen([sys.executable, "-m", "openddb", "streams", "tail", table, "--from", "latest",
                             "--endpoint", server.endpoint], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            preexec_fn=_interruptible)
    try:
        # New items until the tail shows one (it shows nothing until it has found the stream's end): the first
        # line it prints is one of them, never the item that was there before. No read blocks for long.
        assert tail.stdout is not None
        deadline = time.monotonic() + 30
        for n in itertools.count():
            assert time.monotonic() < deadline, "the tail printed nothing"
            ddb.put_item(TableName=table, Item={"pk": {"S": f"new{n}"}})
            if select.select([tail.stdout], [], [], 0.5)[0]:
                break
        first = json.loads(tail.stdout.readline())["dynamodb"]["Keys"]["pk"]["S"]
        assert first.startswith("new"), first
    finally:
        tail.send_signal(signal.SIGINT)
        tail.communicate(timeout=30)


def test_ttl_deletion_reaches_the_trigger_with_lambdas_user_identity(receiver: Receiver) -> None:
    # Lambda marks a TTL deletion with userIdentity {"type": "Service", "principalId": "dynamodb.amazonaws.com"}.
    table = unique_name("trig")
    server = ServerProcess(None, "--trigger", f"{table}={receiver.url}")
    try:
        ddb = make_client(server.endpoint)
        stream_table(ddb, table, "OLD_IMAGE")
        ddb.update_time_to_live(TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"})
        ddb.put_item(TableName=table, Item={"pk": {"S": "gone"}, "ttl": {"N": str(int(time.time()) - 10)}})
        wait_for(lambda: len(receiver.records()) >= 2)
        insert, remove = receiver.records()
        assert "userIdentity" not in insert
        assert remove["eventName"] == "REMOVE"
        assert remove["userIdentity"] == {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
        assert remove["dynamodb"]["OldImage"]["pk"] == {"S": "gone"}
    finally:
        server.finish()


@pytest.mark.skipif(bool(os.environ.get("OPENDDB_TEST_ENGINE")), reason="encrypts the embedded store")
def test_an_encrypted_data_dir_keeps_no_items_in_the_failure_file(tmp_path: Path, receiver: Receiver) -> None:
    # With a key, the default failure file (in the data dir) gets the batch's stream and sequence numbers only,
    # as Lambda's SQS and SNS destinations do: the items would be plaintext beside the encrypted store.
    table, data, key, config = unique_name("trig"), tmp_path / "data", tmp_path / "key", tmp_path / "triggers.json"
    key.write_text("ab" * 32)
    config.write_text(json.dumps({"trigger": [{"table": table, "url": receiver.url, "max_retries": 0}]}))
    server = ServerProcess(str(data), "--workers", "1", "--encryption-key-file", str(key), "--stream-shards", "1",
                           "--config", str(config))
    failures = data / "triggers" / "failures.jsonl"
    try:
        ddb = make_client(server.endpoint)
        stream_table(ddb, table)
        receiver.failing = True
        ddb.put_item(TableName=table, Item={"pk": {"S": "FailedKeyMarker"}, "v": {"S": "FailedValueMarker"}})
        wait_for(lambda: failures.exists() and failures.read_text().endswith("\n"))
        record = json.loads(failures.read_text().splitlines()[0])
        assert "payload" not in record
        assert record["DDBStreamBatchInfo"]["batchSize"] == 1
        assert record["DDBStreamBatchInfo"]["streamArn"] == \
            ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    finally:
        server.finish()
    for path in data.rglob("*"):
        if path.is_file():
            assert b"FailedKeyMarker" not in path.read_bytes() and b"FailedValueMarker" not in path.read_bytes()


def test_a_failing_batch_holds_back_its_own_shard_only(receiver: Receiver) -> None:
    # As in Lambda, a batch being retried blocks the shard it came from; the other shards go on delivering, and
    # once the endpoint takes the batch everything arrives, in order per item.
    table = unique_name("trig")
    server = ServerProcess(None, "--trigger", f"{table}={receiver.url}", "--stream-shards", "4")
    try:
        ddb = make_client(server.endpoint)
        stream_table(ddb, table)
        receiver.poison = "k0"
        total = write_versions(ddb, table, keys=24, versions=2, delete=False)
        # Other shards deliver while k0's batch is refused (and retried): both must be seen, in either order.
        wait_for(lambda: len(receiver.records()) >= 6 and receiver.attempts > len(receiver.batches))
        assert not any(record["dynamodb"]["Keys"]["pk"] == {"S": "k0"} for record in receiver.records())
        receiver.poison = None
        wait_for(lambda: len(receiver.records()) >= total)
        assert per_item(receiver.records()) == expected_per_item(24, 2, delete=False)
    finally:
        server.finish()
