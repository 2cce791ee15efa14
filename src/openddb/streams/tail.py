"""Following a table's stream as it grows, as a client of the Streams API over HTTP: `openddb streams tail`.

The reader (`Follower`) is shared with the local triggers. It speaks the public wire API (JSON protocol, target
prefix `DynamoDBStreams_20120810.`) rather than calling the engine, so it reads the same records any Streams
client reads, from one server process or several, on any engine. It walks shards in lineage order: a shard is
read only once its parent is finished and, across the table's streams (a stream disabled and a new one enabled),
only once every shard of the older streams is finished, so the records of one item come in the order written.
"""

from __future__ import annotations

import http.client
import logging
import os
import sys
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

import orjson

log = logging.getLogger("openddb.streams")

TARGET_PREFIX = "DynamoDBStreams_20120810."
# GetRecords returns at most 1000 records per call (the API's Limit maximum).
GET_RECORDS_MAX = 1000
# How often an idle reader asks for new records: Lambda polls each shard four times a second.
POLL_SECONDS = 0.25
# How often the reader looks for new streams and shards (rollovers, a stream enabled again).
REFRESH_SECONDS = 1.0


class StreamsError(Exception):
    """An error answer of the Streams API: its HTTP status, `__type` (without the namespace) and message."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.status = status
        self.kind = kind
        self.message = message


def _authorization(region: str) -> str:
    """A SigV4 Authorization header of the right form. The server checks the form, the service ("dynamodb", the
    signing name of the Streams API too) and the signed headers, not yet the signature, so any credentials do."""
    day = time.strftime("%Y%m%d", time.gmtime())
    return (f"AWS4-HMAC-SHA256 Credential=openddb/{day}/{region}/dynamodb/aws4_request, "
            f"SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature={'0' * 64}")


class StreamsClient:
    """A keep-alive HTTP connection to one server's Streams API. Not thread-safe: one per thread."""

    def __init__(self, endpoint: str, region: str = "us-east-1", timeout: float = 30.0) -> None:
        parsed = urllib.parse.urlsplit(endpoint if "://" in endpoint else "http://" + endpoint)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"not an http(s) endpoint: {endpoint!r}")
        self.scheme = parsed.scheme
        self.host = parsed.hostname
        self.port = parsed.port
        self.region = region
        self.timeout = timeout
        self._connection: http.client.HTTPConnection | None = None

    def call(self, operation: str, request: dict[str, Any], region: str | None = None) -> dict[str, Any]:
        """The operation's response; StreamsError for an error answer, OSError if the server is unreachable."""
        body = orjson.dumps(request)
        headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": TARGET_PREFIX + operation,
                   "X-Amz-Date": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()),
                   "Authorization": _authorization(region or self.region)}
        for attempt in (0, 1):  # a kept-alive connection the server has closed: once more on a fresh one
            connection = self._connect()
            try:
                connection.request("POST", "/", body, headers)
                response = connection.getresponse()
                data = response.read()
                break
            except (OSError, http.client.HTTPException) as error:
                self.close()
                if attempt:
                    raise OSError(f"Streams API at {self.host}: {error}") from error
        if response.status == 200:
            answer: dict[str, Any] = orjson.loads(data)
            return answer
        raise _error(response.status, data)

    def _connect(self) -> http.client.HTTPConnection:
        if self._connection is None:
            kind = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            self._connection = kind(self.host, self.port, timeout=self.timeout)
        return self._connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def _error(status: int, data: bytes) -> StreamsError:
    try:
        wire = orjson.loads(data)
    except orjson.JSONDecodeError:
        wire = None
    if not isinstance(wire, dict):
        return StreamsError(status, "HTTP" + str(status), data[:200].decode(errors="replace"))
    kind = str(wire.get("__type", "")).rpartition("#")[2]
    return StreamsError(status, kind, str(wire.get("message", wire.get("Message", ""))))


@dataclass(slots=True)
class Shard:
    """A shard as the reader walks it. `seq` is the last record read from it (where reading resumes); `acked`
    the last one its consumer is done with (what a restart resumes after); `done` once the consumer has
    everything of a closed shard, which lets its children be read."""

    stream_arn: str
    shard_id: str
    parent_id: str | None
    stream_order: int
    seq: str | None = None
    acked: str | None = None
    iterator: str | None = None
    exhausted: bool = False  # a closed shard read to its end (GetRecords gave no NextShardIterator)
    done: bool = False

    @property
    def key(self) -> str:
        return f"{self.stream_arn} {self.shard_id}"

    @property
    def region(self) -> str:
        parts = self.stream_arn.split(":")
        return parts[3] if len(parts) > 3 else "us-east-1"


@dataclass(slots=True)
class Position:
    """Where a consumer stopped in one shard, as kept across restarts."""

    seq: str | None
    done: bool = False


class Follower:
    """Reads the streams of one table in lineage order.

    `start` ("TRIM_HORIZON" or "LATEST") applies to the shards found by the first `refresh`, unless `known`
    holds a position for them (a consumer resuming); every shard found later, and every shard of a stream
    enabled later, is read from its beginning, so nothing written after the reader started is missed. LATEST
    is positioned by reading to the shard's current end, so the position is a sequence number a restart can
    resume after."""

    def __init__(self, client: StreamsClient, table: str, start: str = "TRIM_HORIZON",
                 known: dict[str, Position] | None = None, first: bool = True) -> None:
        self.client = client
        self.table = table
        self.start = start
        self.known = known or {}
        self.first = first
        self.shards: dict[str, Shard] = {}  # by key, in stream order then DescribeStream's (parents first)

    def refresh(self) -> None:
        """Learn the table's streams and shards; forget those past retention."""
        arns = self._stream_arns()
        listed: dict[str, Shard] = {}
        for order, arn in enumerate(arns):
            for wire in self._describe(arn):
                shard = self._shard(arn, order, wire)
                if shard is not None:
                    listed[shard.key] = shard
        for key, shard in self.shards.items():
            if key not in listed and not shard.done:
                log.warning("stream records of table %s passed retention before they were read (%s)",
                            self.table, shard.shard_id)
        self.shards = listed
        self.first = False

    def _shard(self, arn: str, order: int, wire: dict[str, Any]) -> Shard | None:
        key = f"{arn} {wire['ShardId']}"
        shard = self.shards.get(key)
        if shard is not None:
            shard.stream_order = order
            return shard
        shard = Shard(arn, wire["ShardId"], wire.get("ParentShardId"), order)
        closed = "EndingSequenceNumber" in wire.get("SequenceNumberRange", {})
        position = self.known.pop(key, None)
        if position is not None:
            shard.seq = shard.acked = position.seq
            shard.done = position.done
        elif self.first and self.start == "LATEST":
            if closed:
                shard.done = True  # all of it was written before the reader started
            else:
                self._skip_to_end(shard)
        return shard

    def _stream_arns(self) -> list[str]:
        arns: list[tuple[str, str]] = []
        request: dict[str, Any] = {"TableName": self.table}
        while True:
            try:
                page = self.client.call("ListStreams", request)
            except StreamsError as error:
                if error.kind == "ResourceNotFoundException":
                    return []  # no such table (yet): nothing to read
                raise
            arns.extend((s.get("StreamLabel", ""), s["StreamArn"]) for s in page.get("Streams", []))
            if not page.get("LastEvaluatedStreamArn"):
                break
            request["ExclusiveStartStreamArn"] = page["LastEvaluatedStreamArn"]
        arns.sort()  # labels are creation times (ISO 8601): oldest stream first
        return [arn for _, arn in arns]

    def _describe(self, arn: str) -> list[dict[str, Any]]:
        shards: list[dict[str, Any]] = []
        request: dict[str, Any] = {"StreamArn": arn}
        region = Shard(arn, "", None, 0).region
        while True:
            try:
                page = self.client.call("DescribeStream", request, region)["StreamDescription"]
            except StreamsError as error:
                if error.kind == "ResourceNotFoundException":
                    return []  # the stream passed retention between ListStreams and now
                raise
            shards.extend(page.get("Shards", []))
            if not page.get("LastEvaluatedShardId"):
                return shards
            request["ExclusiveStartShardId"] = page["LastEvaluatedShardId"]

    def ready(self) -> list[Shard]:
        """Shards to read now: not done, their parent done (or past retention), older streams all done."""
        pending = [shard for shard in self.shards.values() if not shard.done]
        if not pending:
            return []
        oldest = min(shard.stream_order for shard in pending)
        out = []
        for shard in pending:
            parent = self.shards.get(f"{shard.stream_arn} {shard.parent_id}") if shard.parent_id else None
            if shard.stream_order == oldest and (parent is None or parent.done):
                out.append(shard)
        return out

    def fetch(self, shard: Shard, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` (<= 1000) next records of the shard, as GetRecords returns them; sets `exhausted` once a
        closed shard is read to its end."""
        if shard.exhausted:
            return []
        if shard.iterator is None:
            shard.iterator = self._iterator(shard)
            if shard.iterator is None:
                return []
        try:
            page = self.client.call("GetRecords", {"ShardIterator": shard.iterator, "Limit": limit}, shard.region)
        except StreamsError as error:
            shard.iterator = None  # the next fetch takes a fresh iterator from `seq`
            if error.kind == "ExpiredIteratorException":
                return []
            if error.kind == "TrimmedDataAccessException":
                log.warning("stream records of table %s past retention were trimmed before they were read (%s)",
                            self.table, shard.shard_id)
                shard.seq = None
                return []
            if error.kind == "ResourceNotFoundException":
                shard.exhausted = True  # the stream passed retention
                return []
            raise
        records: list[dict[str, Any]] = page.get("Records", [])
        if records:
            shard.seq = records[-1]["dynamodb"]["SequenceNumber"]
        shard.iterator = page.get("NextShardIterator")
        if shard.iterator is None:
            shard.exhausted = True
        return records

    def _iterator(self, shard: Shard) -> str | None:
        request = {"StreamArn": shard.stream_arn, "ShardId": shard.shard_id}
        if shard.seq is not None:
            request |= {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": shard.seq}
        else:
            request["ShardIteratorType"] = "TRIM_HORIZON"
        try:
            answer = self.client.call("GetShardIterator", request, shard.region)
        except StreamsError as error:
            if error.kind == "TrimmedDataAccessException" and shard.seq is not None:
                log.warning("stream records of table %s past retention were trimmed before they were read (%s)",
                            self.table, shard.shard_id)
                shard.seq = None
                return self._iterator(shard)
            if error.kind == "ResourceNotFoundException":
                shard.exhausted = True  # the shard or its stream passed retention
                return None
            raise
        iterator: str | None = answer.get("ShardIterator")
        if iterator is None:
            shard.exhausted = True
        return iterator

    def _skip_to_end(self, shard: Shard) -> None:
        """Position an open shard after its last record, for a LATEST start."""
        while self.fetch(shard, GET_RECORDS_MAX):
            pass
        shard.acked = shard.seq
        if shard.exhausted:  # it closed meanwhile: everything of it was before the start
            shard.done = True


def tail(endpoint: str, table: str, start: str = "TRIM_HORIZON", region: str = "us-east-1") -> int:
    """`openddb streams tail`: print the table's records as JSON lines as they arrive, until interrupted."""
    follower = Follower(StreamsClient(endpoint, region), table, start)
    waiting = False
    try:
        while True:
            try:
                follower.refresh()
                if not follower.shards and not waiting:
                    print(f"openddb: table {table} has no stream yet; waiting for one", file=sys.stderr)
                waiting = not follower.shards
                _print_until_refresh(follower)
            except BrokenPipeError:
                raise
            except (OSError, StreamsError) as error:
                print(f"openddb: {error}; trying again", file=sys.stderr)
                time.sleep(REFRESH_SECONDS)
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:  # the reader of our output went away (`| head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (so the flush at exit fails no more)
        return 0


def _print_until_refresh(follower: Follower) -> None:
    """Read every ready shard until it is time to look for new shards again."""
    deadline = time.monotonic() + REFRESH_SECONDS
    while True:
        busy = False
        for shard in follower.ready():
            records = follower.fetch(shard, GET_RECORDS_MAX)
            for record in records:
                sys.stdout.buffer.write(orjson.dumps(record) + b"\n")
            sys.stdout.flush()
            busy = busy or bool(records)
            if shard.exhausted:
                shard.done = True
                return  # its children are ready now: learn them at once
        if time.monotonic() >= deadline:
            return
        if not busy:
            time.sleep(POLL_SECONDS)
