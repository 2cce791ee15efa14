"""Local triggers: a table's stream records POSTed to an HTTP endpoint in batches, as AWS Lambda receives them.

A trigger acts like a Lambda event source mapping on a DynamoDB stream: batches of up to `batch_size` records of
one shard, gathered for up to `batching_window` seconds, shards in lineage order, a batch retried with backoff
until the endpoint answers 2xx, or, after `max_retries` retries (-1: forever, Lambda's default), written to the
on-failure file and passed over. Delivery is at least once: the last delivered sequence number of each shard is
saved (write, fsync, rename) after each batch, so a restart resumes after it and may deliver again only the batch
in flight when the server stopped.

The deliverer is a client of the server's own Streams API (see `tail.Follower`), so it reads the same records
with one server process or several, on any engine.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import random
import re
import threading
import time
import tomllib
import urllib.parse
import uuid
from dataclasses import dataclass, fields
from typing import Any

import orjson

from openddb.streams.tail import (
    GET_RECORDS_MAX,
    POLL_SECONDS,
    REFRESH_SECONDS,
    Follower,
    Position,
    Shard,
    StreamsClient,
    StreamsError,
)

log = logging.getLogger("openddb.triggers")

# Lambda's limits for a DynamoDB event source mapping (docs: "Lambda parameters for Amazon DynamoDB event source
# mappings"): BatchSize 1..10000 (default 100), MaximumBatchingWindowInSeconds 0..300 (default 0),
# MaximumRetryAttempts -1..10000 (default -1, infinite).
BATCH_SIZE_MAX = 10_000
BATCHING_WINDOW_MAX = 300.0
MAX_RETRIES_MAX = 10_000
# A synchronous Lambda invocation's payload is at most 6 MB: a batch is cut before it grows past that.
PAYLOAD_MAX = 6 * 1024 * 1024
# Backoff between attempts at one batch: doubling from the first, up to the cap.
BACKOFF_FIRST = 0.1
BACKOFF_MAX = 10.0
POST_TIMEOUT = 30.0
# How long a stopping deliverer waits for batches in flight; one cut short is delivered again after a restart.
STOP_SECONDS = 5.0
_TABLE_NAME = re.compile(r"[a-zA-Z0-9_.-]{3,255}")


@dataclass(slots=True)
class TriggerConfig:
    table: str
    url: str
    batch_size: int = 100
    batching_window: float = 0.0
    starting_position: str = "TRIM_HORIZON"
    max_retries: int = -1
    on_failure: str | None = None  # JSON-lines file of batches given up on (default: in the data dir)
    region: str = "us-east-1"
    # The failure record carries the batch's records (`payload`, as Lambda's S3 destination has them); off for a
    # file in an encrypted store's data dir, where they would be items in plaintext: the record then holds the
    # batch's shard and sequence numbers only, as Lambda's SQS and SNS destinations do (read back from the stream).
    payload: bool = True

    @property
    def name(self) -> str:
        return f"{self.table} {self.url}"


def _check(config: TriggerConfig) -> TriggerConfig:
    """The config, validated and normalized; ValueError saying what is wrong."""
    where = f"trigger {config.table}={config.url}"
    if not _TABLE_NAME.fullmatch(config.table):  # (DynamoDB's TableName: 3 to 255 of these characters)
        raise ValueError(f"{where}: not a table name (3 to 255 letters, digits, '_', '-' or '.')")
    parsed = urllib.parse.urlsplit(config.url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"{where}: the URL must be http:// or https://")
    if isinstance(config.batch_size, bool) or not isinstance(config.batch_size, int) \
            or not 1 <= config.batch_size <= BATCH_SIZE_MAX:
        raise ValueError(f"{where}: batch_size must be an integer from 1 to {BATCH_SIZE_MAX}")
    if isinstance(config.batching_window, bool) or not isinstance(config.batching_window, int | float) \
            or not 0 <= config.batching_window <= BATCHING_WINDOW_MAX:
        raise ValueError(f"{where}: batching_window must be from 0 to {BATCHING_WINDOW_MAX:g} seconds")
    position = str(config.starting_position).upper()
    if position not in ("TRIM_HORIZON", "LATEST"):
        raise ValueError(f"{where}: starting_position must be TRIM_HORIZON or LATEST")
    if isinstance(config.max_retries, bool) or not isinstance(config.max_retries, int) \
            or not -1 <= config.max_retries <= MAX_RETRIES_MAX:
        raise ValueError(f"{where}: max_retries must be an integer from -1 (forever) to {MAX_RETRIES_MAX}")
    config.starting_position = position
    config.batching_window = float(config.batching_window)
    return config


def parse_trigger(spec: str) -> TriggerConfig:
    """`TABLE=URL`, as --trigger takes it."""
    table, sep, url = spec.partition("=")
    if not sep:
        raise ValueError(f"--trigger {spec!r}: expected TABLE=URL")
    return _check(TriggerConfig(table.strip(), url.strip()))


def load_config(path: str) -> list[TriggerConfig]:
    """The triggers of a config file: JSON ({"trigger": [{...}]}) or TOML ([[trigger]] tables)."""
    with open(path, "rb") as file:
        data = file.read()
    try:
        document = json.loads(data) if path.endswith(".json") else tomllib.loads(data.decode())
    except (ValueError, UnicodeDecodeError) as error:  # (JSONDecodeError and TOMLDecodeError are ValueErrors)
        raise ValueError(f"{path}: {error}") from None
    if not isinstance(document, dict):
        raise ValueError(f"{path}: expected an object with a 'trigger' list")
    unknown = set(document) - {"trigger"}
    if unknown:
        raise ValueError(f"{path}: unknown setting(s): {', '.join(sorted(unknown))}")
    entries = document.get("trigger", [])
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise ValueError(f"{path}: 'trigger' must be a list of tables ([[trigger]] in TOML)")
    names = {f.name for f in fields(TriggerConfig)}
    configs = []
    for entry in entries:
        unknown = set(entry) - names
        if unknown or "table" not in entry or "url" not in entry:
            raise ValueError(f"{path}: a trigger needs 'table' and 'url', and knows only "
                             f"{', '.join(sorted(names))} (got {', '.join(sorted(entry))})")
        configs.append(_check(TriggerConfig(**entry)))
    return configs


def lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """A stream record as Lambda hands it to a function (docs: "Using AWS Lambda with Amazon DynamoDB", and the
    event sample of Lambda's DynamoDB blueprint): GetRecords' record with the stream's ARN added as
    eventSourceARN, a TTL deletion's userIdentity in Lambda's lower camel case ({"type": "Service",
    "principalId": "dynamodb.amazonaws.com"}), and ApproximateCreationDateTime the epoch-seconds number it is on
    the JSON wire."""
    event = dict(record)
    identity = event.pop("userIdentity", None)
    dynamodb = event.pop("dynamodb", None)
    if isinstance(identity, dict):
        event["userIdentity"] = {name[:1].lower() + name[1:]: value for name, value in identity.items()}
    if dynamodb is not None:
        event["dynamodb"] = dynamodb  # (Lambda's order: the record's own members, userIdentity, dynamodb)
    event["eventSourceARN"] = stream_arn
    return event


def _iso(epoch: float, millis: bool = False) -> str:
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch))
    return f"{text}.{int(epoch * 1000) % 1000:03d}Z" if millis else text + "Z"


def failure_record(config: TriggerConfig, shard: Shard, event: dict[str, Any], attempts: int,
                   status: int) -> dict[str, Any]:
    """What Lambda sends an on-failure destination for a stream batch it gave up on (docs: "Retaining discarded
    records for a DynamoDB event source in Lambda"), with the event itself as `payload` (unless the config leaves it
    out), as Lambda adds it for an S3 destination (the member's name is a best guess). The "function" is the
    trigger's URL; `statusCode` is the endpoint's last answer, 0 if it could not be reached."""
    records = event["Records"]
    first, last = records[0]["dynamodb"], records[-1]["dynamodb"]
    record: dict[str, Any] = {
        "requestContext": {"requestId": str(uuid.uuid4()), "functionArn": config.url,
                           "condition": "RetryAttemptsExhausted", "approximateInvokeCount": attempts},
        "responseContext": {"statusCode": status, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "version": "1.0",
        "timestamp": _iso(time.time(), millis=True),
        "DDBStreamBatchInfo": {
            "shardId": shard.shard_id,
            "startSequenceNumber": first["SequenceNumber"],
            "endSequenceNumber": last["SequenceNumber"],
            "approximateArrivalOfFirstRecord": _iso(float(first.get("ApproximateCreationDateTime", 0))),
            "approximateArrivalOfLastRecord": _iso(float(last.get("ApproximateCreationDateTime", 0))),
            "batchSize": len(records),
            "streamArn": shard.stream_arn,
        },
    }
    if config.payload:
        record["payload"] = event
    return record


class StateStore:
    """Each trigger's delivery position per shard (last delivered sequence number, whether finished), in a JSON
    file rewritten atomically after every change (`path` None: kept in memory, as with --in-memory)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.triggers: dict[str, Any] = {}
        if path is not None and os.path.exists(path):
            with open(path, "rb") as file:
                data = file.read()
            try:
                self.triggers = orjson.loads(data)["triggers"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                raise ValueError(f"{path}: not a trigger state file (move it away to start the triggers "
                                 f"afresh)") from None

    def get(self, name: str) -> tuple[bool, dict[str, Position]]:
        """Whether the trigger has started before (its starting position then no longer applies), and where."""
        with self.lock:
            entry = self.triggers.get(name)
        if entry is None:
            return False, {}
        return True, {key: Position(p.get("seq"), bool(p.get("done"))) for key, p in entry["shards"].items()}

    def put(self, name: str, shards: list[Shard]) -> None:
        entry = {"shards": {s.key: {"seq": s.acked, "done": s.done} for s in shards}}
        with self.lock:
            if self.triggers.get(name) == entry:
                return
            self.triggers[name] = entry
            if self.path is not None:
                self._write(orjson.dumps({"version": 1, "triggers": self.triggers}, option=orjson.OPT_INDENT_2))

    def _write(self, data: bytes) -> None:
        """Replace the file so that a crash leaves the old state or the new one, never a torn one."""
        assert self.path is not None
        folder = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(folder, exist_ok=True)
        temporary = self.path + ".tmp"
        with os.fdopen(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.path)
        directory = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself
        finally:
            os.close(directory)


class Endpoint:
    """A keep-alive HTTP connection to a trigger's URL."""

    def __init__(self, url: str) -> None:
        parsed = urllib.parse.urlsplit(url)
        self.https = parsed.scheme == "https"
        self.host = parsed.hostname or ""
        self.port = parsed.port
        self.path = (parsed.path or "/") + (f"?{parsed.query}" if parsed.query else "")
        self._connection: http.client.HTTPConnection | None = None

    def post(self, body: bytes) -> int:
        """The HTTP status of the answer, 0 if there was none (refused, reset, timed out)."""
        for fresh in (self._connection is None, True):  # a kept-alive connection closed meanwhile: once more
            if self._connection is None:
                kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
                self._connection = kind(self.host, self.port, timeout=POST_TIMEOUT)
            try:
                self._connection.request("POST", self.path, body, {"Content-Type": "application/json"})
                response = self._connection.getresponse()
                response.read()
            except (OSError, http.client.HTTPException):
                self.close()
                if fresh:
                    return 0
                continue
            if response.will_close:
                self.close()
            return response.status
        return 0

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


@dataclass(slots=True)
class Attempt:
    """A batch on its way: the event, how many records of its shard's buffer it holds, its retries so far and
    when it may be tried next."""

    event: dict[str, Any]
    count: int
    retries: int = 0
    next_at: float = 0.0
    body: bytes = b""

    def __post_init__(self) -> None:
        self.body = orjson.dumps(self.event)


class Trigger:
    """Delivers one table's records to one URL, in its own thread (`run`), until `stop` is set."""

    def __init__(self, config: TriggerConfig, endpoint: str, store: StateStore, stop: threading.Event) -> None:
        self.config = config
        self.store = store
        self.stop = stop
        self.client = StreamsClient(endpoint, config.region)
        started, known = store.get(config.name)
        self.follower = Follower(self.client, config.table, config.starting_position, known, first=not started)
        self.endpoint = Endpoint(config.url)
        self.buffers: dict[str, list[dict[str, Any]]] = {}  # per shard: read, not yet delivered
        self.since: dict[str, float] = {}  # per shard: when its buffer's oldest record was read
        self.attempts: dict[str, Attempt] = {}  # per shard: the batch being delivered (the buffer's head)

    def run(self) -> None:
        problem = ""  # the last trouble reported, so a server that stays away is not reported every second
        while not self.stop.is_set():
            try:
                self.follower.refresh()
                self._forget_gone_shards()
                self._save()
                problem = ""
                self._deliver_until(time.monotonic() + REFRESH_SECONDS)
            except (OSError, StreamsError) as error:
                self.client.close()
                if str(error) != problem and not self.stop.is_set():  # (not the server going away as it stops)
                    log.warning("trigger %s: %s; trying again", self.config.name, error)
                    problem = str(error)
                self.stop.wait(REFRESH_SECONDS)
            except Exception:
                log.exception("trigger %s failed; starting again", self.config.name)
                self.stop.wait(REFRESH_SECONDS)
        self.client.close()
        self.endpoint.close()

    def _forget_gone_shards(self) -> None:
        """Drop the unsent records of shards past retention (the follower has said they were lost)."""
        for key in [key for key in self.buffers if key not in self.follower.shards]:
            del self.buffers[key]
            self.since.pop(key, None)
            self.attempts.pop(key, None)

    def _save(self) -> None:
        self.store.put(self.config.name, list(self.follower.shards.values()))

    def _deliver_until(self, deadline: float) -> None:
        """Read and deliver ready shards until the deadline (then the caller looks for new shards), or until a
        shard is finished (its children may be ready)."""
        while not self.stop.is_set() and time.monotonic() < deadline:
            busy = False
            for shard in self.follower.ready():
                busy = self._serve(shard) or busy
                if shard.done:
                    return
                if self.stop.is_set():
                    return
            if not busy:  # idle: poll again shortly, or when the next retry is due if that is sooner
                retry = min((attempt.next_at for attempt in self.attempts.values()), default=float("inf"))
                self.stop.wait(max(0.0, min(POLL_SECONDS, retry - time.monotonic())))

    def _serve(self, shard: Shard) -> bool:
        """One step on a shard: read more records if the batch has room, make a batch if one is due, try it if
        its time has come. A batch being retried holds back its own shard only, as in Lambda. Whether anything
        happened."""
        key = shard.key
        buffer = self.buffers.setdefault(key, [])
        fetched: list[dict[str, Any]] = []
        if len(buffer) < self.config.batch_size:
            fetched = self.follower.fetch(shard, min(GET_RECORDS_MAX, self.config.batch_size - len(buffer)))
            if fetched and not buffer:
                self.since[key] = time.monotonic()
            buffer.extend(fetched)
        attempt = self.attempts.get(key)
        if attempt is None and buffer and self._due(shard, buffer):
            batch = _cut(buffer, self.config.batch_size)
            event = {"Records": [lambda_record(record, shard.stream_arn) for record in batch]}
            attempt = self.attempts[key] = Attempt(event, len(batch))
        finished = attempt is not None and time.monotonic() >= attempt.next_at and self._try(shard, attempt)
        if finished:
            assert attempt is not None
            del buffer[:attempt.count]
            del self.attempts[key]
            self.since[key] = time.monotonic()
            shard.acked = attempt.event["Records"][-1]["dynamodb"]["SequenceNumber"]
        if not buffer and shard.exhausted:
            shard.done = True
            self.buffers.pop(key, None)
        if finished or shard.done:
            self._save()
        return bool(fetched) or finished

    def _due(self, shard: Shard, buffer: list[dict[str, Any]]) -> bool:
        """Lambda invokes when the batch is full, the batching window has passed, or (our addition) the shard
        has nothing more to give."""
        waited = time.monotonic() - self.since.get(shard.key, 0.0)
        return len(buffer) >= self.config.batch_size or shard.exhausted or waited >= self.config.batching_window

    def _try(self, shard: Shard, attempt: Attempt) -> bool:
        """POST the batch once. True once it is finished with: delivered (2xx), or given up after the last
        retry (then it goes to the on-failure file); otherwise the next try is scheduled with backoff."""
        status = self.endpoint.post(attempt.body)
        if 200 <= status < 300:
            return True
        if 0 <= self.config.max_retries <= attempt.retries:
            self._give_up(failure_record(self.config, shard, attempt.event, attempt.retries + 1, status))
            return True
        if attempt.retries == 0:
            log.info("trigger %s: the endpoint answered %s; retrying", self.config.name, status or "nothing")
        delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** min(attempt.retries, 20))
        attempt.next_at = time.monotonic() + delay * random.uniform(0.8, 1.2)  # (jitter, as Lambda's has)
        attempt.retries += 1
        return False

    def _give_up(self, record: dict[str, Any]) -> None:
        info = record["DDBStreamBatchInfo"]
        log.error("trigger %s: gave up on %d record(s) of shard %s (%s..%s) after %d attempts%s",
                  self.config.name, info["batchSize"], info["shardId"], info["startSequenceNumber"],
                  info["endSequenceNumber"], record["requestContext"]["approximateInvokeCount"],
                  f"; written to {self.config.on_failure}" if self.config.on_failure else "")
        if self.config.on_failure is None:
            return
        folder = os.path.dirname(os.path.abspath(self.config.on_failure))
        os.makedirs(folder, exist_ok=True)
        # (owner-only, as the store's files: the records hold items)
        with os.fdopen(os.open(self.config.on_failure, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as file:
            file.write(orjson.dumps(record) + b"\n")
            file.flush()
            os.fsync(file.fileno())  # written before the position moves past the batch


def _cut(buffer: list[dict[str, Any]], batch_size: int) -> list[dict[str, Any]]:
    """The next batch: up to `batch_size` records, and no more than fit Lambda's payload limit (at least one)."""
    size = 0
    for count, record in enumerate(buffer[:batch_size]):
        size += len(orjson.dumps(record)) + 100  # (+ eventSourceARN and the separators)
        if size > PAYLOAD_MAX and count:
            return buffer[:count]
    return buffer[:batch_size]


def run_triggers(configs: list[TriggerConfig], endpoint: str, store: StateStore, stop: threading.Event) -> None:
    """Deliver every trigger, each in its own thread, until `stop` is set."""
    triggers = [Trigger(config, endpoint, store, stop) for config in configs]
    threads = [threading.Thread(target=trigger.run, name=f"trigger {trigger.config.table}", daemon=True)
               for trigger in triggers]
    for thread in threads:
        thread.start()
    while not stop.wait(1.0):
        pass
    deadline = time.monotonic() + STOP_SECONDS
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
