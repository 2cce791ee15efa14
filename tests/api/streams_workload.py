"""What the streams soak test writes and reads: writers whose every acknowledged item change is known, and a
consumer that follows shard lineage as KCL-style consumers do.

Each writer owns its keys (no other writer touches them), so the order of one item's changes is the order its
writer saw them acknowledged. Every write gives its item a new version `v`, never reused, even by a write that is
refused: a change is named by its key, kind and the versions of its old and new images. A few items are shared:
every writer increments their version on the condition that it is still the one it read, so that writes race
(across the server's workers: conflicts, requests run again) and yet each version is made by one write only, in
the order of the versions.
"""

from __future__ import annotations

import copy
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from tests.conftest import make_client

Image = dict[str, Any]  # an item in DynamoDB's wire form
TTL_ATTRIBUTE = "exp"
SERVICE = {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"}  # a TTL deletion's userIdentity


def version(image: Image | None) -> int | None:
    return None if image is None else int(image["v"]["N"])


def attempt(key: str, image: Image) -> tuple[str, int | None, str | None]:
    """What names a write's new image: key, version and (on a shared item) the writer that wrote it."""
    return key, version(image), image.get("by", {}).get("N")


@dataclass(frozen=True)
class Change:
    """One item change, as a writer expects its stream record (or as a record tells it)."""

    key: str
    event: str  # INSERT | MODIFY | REMOVE
    old: Image | None
    new: Image | None
    ttl: bool = False  # made by the TTL sweep (its record names the service)

    def name(self) -> tuple[str, str, int | None, int | None, bool]:
        """A short name for messages: key, kind, old and new versions, whether by TTL."""
        return self.key, self.event, version(self.old), version(self.new), self.ttl


def change(key: str, old: Image | None, new: Image | None, ttl: bool = False) -> Change:
    event = "INSERT" if old is None else "REMOVE" if new is None else "MODIFY"
    return Change(key, event, old, new, ttl)


def change_of(record: dict[str, Any]) -> Change:
    """The change a stream record (NEW_AND_OLD_IMAGES) tells of."""
    data = record["dynamodb"]
    return Change(data["Keys"]["pk"]["S"], record["eventName"], data.get("OldImage"), data.get("NewImage"),
                  "userIdentity" in record)


@dataclass
class InFlight:
    """The changes of the request under way when the server died: any of them (all or none, for a transaction)
    may have been made."""

    changes: list[Change]
    atomic: bool


@dataclass
class Writer:
    """One writer thread's client, keys and what it saw: acknowledged changes per key in order, versions that
    refused writes would have written, and the request in flight if the server died under it."""

    endpoint: str
    table: str
    index: int
    seed: int
    keys_owned: int = 30
    shared: list[str] = field(default_factory=list)  # the keys every writer increments
    dying: threading.Event = field(default_factory=threading.Event)
    acked: dict[str, list[Change]] = field(default_factory=dict)
    rejected: list[tuple[str, int | None, str | None]] = field(default_factory=list)  # refused `attempt`s
    ttl_keys: list[str] = field(default_factory=list)
    in_flight: InFlight | None = None
    requests: int = 0
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.client: Any = make_client(self.endpoint)
        self.rng = random.Random(self.seed)
        self.keys = [f"w{self.index}-{n}" for n in range(self.keys_owned)]
        self.state: dict[str, Image | None] = dict.fromkeys(self.keys)
        self.versions: dict[str, int] = dict.fromkeys(self.keys, 0)

    # --- the model ---------------------------------------------------------------------------------------------
    def _next(self, key: str) -> int:
        self.versions[key] += 1
        return self.versions[key]

    def _image(self, key: str, number: int) -> Image:
        """A new image of `key` at version `number`, of varied size and shape (images must come back exact)."""
        body = "".join(self.rng.choice("abcdefgh") for _ in range(self.rng.randrange(0, 120)))
        return {"pk": {"S": key}, "v": {"N": str(number)}, "body": {"S": body},
                "doc": {"M": {"w": {"N": str(self.index)}, "l": {"L": [{"BOOL": number % 2 == 0}, {"NULL": True}]}}}}

    def _ack(self, changes: list[Change]) -> None:
        for made in changes:
            self.acked.setdefault(made.key, []).append(made)
            self.state[made.key] = made.new

    def _present(self) -> list[str]:
        return [key for key in self.keys if self.state[key] is not None]

    def acknowledged(self) -> int:
        return sum(len(changes) for changes in self.acked.values())

    # --- the loop ----------------------------------------------------------------------------------------------
    def run(self, until: float) -> None:
        """Write until `until` (monotonic), or until a request fails once `dying` is set (the server is being
        killed: writing goes on until then, so that requests are cut short); any other error is kept in `error`
        (a thread's exception would be lost)."""
        operations: list[tuple[Callable[[], None], int]] = [
            (self.put, 25), (self.update, 25), (self.refused_update, 5), (self.delete, 10), (self.batch, 15),
            (self.transact, 15), (self.ttl_put, 5), (self.contend, 10 if self.shared else 0)]
        actions, weights = zip(*operations)
        try:
            while time.monotonic() < until:
                self.requests += 1
                self.rng.choices(actions, weights)[0]()
        except Exception as error:  # (reported by the test)
            # Once the server is being killed, a request may fail to connect or be cut off; nothing else may fail.
            if not self.dying.is_set() or isinstance(error, ClientError | AssertionError):
                self.error = error

    def _send(self, changes: list[Change], atomic: bool, call: Callable[..., Any], **request: Any) -> Any:
        """Send a request whose success makes `changes`; if the server dies under it, they are in flight."""
        try:
            return call(**request)
        except ClientError:
            raise
        except Exception:
            if self.dying.is_set():
                self.in_flight = InFlight(changes, atomic)
            raise

    # --- operations --------------------------------------------------------------------------------------------
    def put(self) -> None:
        key = self.rng.choice(self.keys)
        new = self._image(key, self._next(key))
        made = [change(key, self.state[key], new)]
        self._send(made, True, self.client.put_item, TableName=self.table, Item=new)
        self._ack(made)

    def update(self) -> None:
        """A conditional update on the version the writer last saw: always accepted (only this writer writes)."""
        present = self._present()
        if not present:
            return self.put()
        key = self.rng.choice(present)
        old = self.state[key]
        assert old is not None
        new = copy.deepcopy(old)
        new["v"] = {"N": str(self._next(key))}
        new["hits"] = {"N": str(int(old.get("hits", {"N": "0"})["N"]) + 1)}
        made = [change(key, old, new)]
        self._send(made, True, self.client.update_item, TableName=self.table, Key={"pk": {"S": key}},
                   UpdateExpression="SET v = :new ADD hits :one", ConditionExpression="v = :seen",
                   ExpressionAttributeValues={":new": new["v"], ":one": {"N": "1"}, ":seen": old["v"]})
        self._ack(made)
        return None

    def refused_update(self) -> None:
        """An update whose condition fails (a version never written, or an absent item): it must leave no record."""
        key = self.rng.choice(self.keys)
        tried, never = self._next(key), self._next(key)
        condition = "v = :seen" if self.state[key] is not None else "attribute_exists(pk)"
        values = {":new": {"N": str(tried)}} | ({":seen": {"N": str(never)}} if ":seen" in condition else {})
        try:
            self.client.update_item(TableName=self.table, Key={"pk": {"S": key}}, UpdateExpression="SET v = :new",
                                    ConditionExpression=condition, ExpressionAttributeValues=values)
        except ClientError as error:
            assert error.response["Error"]["Code"] == "ConditionalCheckFailedException", error.response
            self.rejected.append((key, tried, None))
            return
        raise AssertionError(f"the update of {key} on a condition that cannot hold was accepted")

    def delete(self) -> None:
        """A conditional delete of a present item; of an absent one, an unconditional delete (no change, so no
        record)."""
        key = self.rng.choice(self.keys)
        old = self.state[key]
        if old is None:
            self._send([], True, self.client.delete_item, TableName=self.table, Key={"pk": {"S": key}})
            return
        made = [change(key, old, None)]
        self._send(made, True, self.client.delete_item, TableName=self.table, Key={"pk": {"S": key}},
                   ConditionExpression="v = :seen", ExpressionAttributeValues={":seen": old["v"]})
        self._ack(made)

    def batch(self) -> None:
        """BatchWriteItem over several of the writer's keys: puts, and deletes of present items."""
        planned: dict[str, tuple[Change, dict[str, Any]]] = {}
        for key in self.rng.sample(self.keys, self.rng.randint(2, 6)):
            old = self.state[key]
            if old is not None and self.rng.random() < 0.3:
                planned[key] = (change(key, old, None), {"DeleteRequest": {"Key": {"pk": {"S": key}}}})
            else:
                new = self._image(key, self._next(key))
                planned[key] = (change(key, old, new), {"PutRequest": {"Item": new}})
        while planned:  # unprocessed requests are sent again, as DynamoDB asks
            requests = [request for _, request in planned.values()]
            answer = self._send([made for made, _ in planned.values()], False, self.client.batch_write_item,
                                RequestItems={self.table: requests})
            left = {self._batch_key(request) for request in answer.get("UnprocessedItems", {}).get(self.table, [])}
            self._ack([made for key, (made, _) in planned.items() if key not in left])
            planned = {key: planned[key] for key in left}

    @staticmethod
    def _batch_key(request: dict[str, Any]) -> str:
        if "PutRequest" in request:
            return str(request["PutRequest"]["Item"]["pk"]["S"])
        return str(request["DeleteRequest"]["Key"]["pk"]["S"])

    def transact(self) -> None:
        """TransactWriteItems across three of the writer's items; one in five is cancelled by a condition that
        cannot hold, and then none of its changes may have a record."""
        first, second, third = self.rng.sample(self.keys, 3)
        made: list[Change] = []
        actions = [self._transact_put(first, made), self._transact_update(second, made)]
        cancel = self.rng.random() < 0.2
        old = self.state[third]
        if cancel:
            actions.append({"ConditionCheck": {"TableName": self.table, "Key": {"pk": {"S": third}},
                                               "ConditionExpression": "attribute_exists(pk) AND v = :never",
                                               "ExpressionAttributeValues": {":never": {"N": "-1"}}}})
        elif old is not None:
            made.append(change(third, old, None))
            actions.append({"Delete": {"TableName": self.table, "Key": {"pk": {"S": third}},
                                       "ConditionExpression": "v = :seen",
                                       "ExpressionAttributeValues": {":seen": old["v"]}}})
        else:
            actions.append({"ConditionCheck": {"TableName": self.table, "Key": {"pk": {"S": third}},
                                               "ConditionExpression": "attribute_not_exists(pk)"}})
        try:
            self._send(made, True, self.client.transact_write_items, TransactItems=actions)
        except ClientError as error:
            assert cancel and error.response["Error"]["Code"] == "TransactionCanceledException", error.response
            self.rejected += [attempt(c.key, c.new) for c in made if c.new is not None]
            return
        assert not cancel, "a transaction whose condition cannot hold was accepted"
        self._ack(made)

    def _transact_put(self, key: str, made: list[Change]) -> dict[str, Any]:
        new = self._image(key, self._next(key))
        made.append(change(key, self.state[key], new))
        return {"Put": {"TableName": self.table, "Item": new}}

    def _transact_update(self, key: str, made: list[Change]) -> dict[str, Any]:
        old = self.state[key]
        if old is None:
            return self._transact_put(key, made)
        new = {**old, "v": {"N": str(self._next(key))}, "body": {"S": "transacted"}}
        made.append(change(key, old, new))
        return {"Update": {"TableName": self.table, "Key": {"pk": {"S": key}},
                           "UpdateExpression": "SET v = :new, body = :body", "ConditionExpression": "v = :seen",
                           "ExpressionAttributeValues": {":new": new["v"], ":body": new["body"], ":seen": old["v"]}}}

    def ttl_put(self) -> None:
        """An item of a key of its own that has already expired: the server's sweep deletes it soon."""
        key = f"w{self.index}-ttl{len(self.ttl_keys)}"
        self.ttl_keys.append(key)
        new = {"pk": {"S": key}, "v": {"N": "1"}, TTL_ATTRIBUTE: {"N": str(int(time.time()) - 5)}}
        made = [change(key, None, new)]
        self._send(made, True, self.client.put_item, TableName=self.table, Item=new)
        self._ack(made)


    def create_shared(self) -> None:
        """Put the shared items at version 0 (before the writers start)."""
        for key in self.shared:
            new = {"pk": {"S": key}, "v": {"N": "0"}}
            self.client.put_item(TableName=self.table, Item=new)
            self._ack([change(key, None, new)])

    def contend(self) -> None:
        """Increment a shared item's version from the one read, unless another writer got there first (refused:
        then no record may name this writer at that version)."""
        key = self.rng.choice(self.shared)
        old = self.client.get_item(TableName=self.table, Key={"pk": {"S": key}}, ConsistentRead=True)["Item"]
        new = {**old, "v": {"N": str(int(old["v"]["N"]) + 1)}, "by": {"N": str(self.index)}}
        made = [change(key, old, new)]
        try:
            self._send(made, True, self.client.update_item, TableName=self.table, Key={"pk": {"S": key}},
                       UpdateExpression="SET v = :next, #by = :me", ConditionExpression="v = :seen",
                       ExpressionAttributeNames={"#by": "by"},
                       ExpressionAttributeValues={":next": new["v"], ":me": new["by"], ":seen": old["v"]})
        except ClientError as error:
            assert error.response["Error"]["Code"] == "ConditionalCheckFailedException", error.response
            self.rejected.append(attempt(key, new))
            return
        self._ack(made)


class Consumer:
    """Reads a stream as KCL-style consumers do: every shard from TRIM_HORIZON, a child only once its parent is
    read to its end, open shards polled. `records` is in reading order, so one item's records are in its order."""

    def __init__(self, endpoint: str, arn: str) -> None:
        self.streams: Any = make_client(endpoint, "dynamodbstreams")
        self.arn = arn
        self.records: list[dict[str, Any]] = []
        self.iterators: dict[str, str] = {}  # shards being read: id -> the iterator to go on with
        self.done: set[str] = set()  # shards read to their end
        self.shards: list[dict[str, Any]] = []
        self.status = "ENABLED"
        self.error: BaseException | None = None

    def describe(self) -> None:
        shards: list[dict[str, Any]] = []
        request: dict[str, Any] = {"StreamArn": self.arn}
        while True:
            description = self.streams.describe_stream(**request)["StreamDescription"]
            shards += description["Shards"]
            if "LastEvaluatedShardId" not in description:
                break
            request["ExclusiveStartShardId"] = description["LastEvaluatedShardId"]
        self.shards, self.status = shards, description["StreamStatus"]

    def poll(self) -> int:
        """One round: take up the shards whose parents are read, read each shard being read until a page comes
        back empty or the shard ends; the number of records read."""
        self.describe()
        listed = {shard["ShardId"] for shard in self.shards}
        for shard in self.shards:
            shard_id, parent = shard["ShardId"], shard.get("ParentShardId")
            if shard_id in self.done or shard_id in self.iterators:
                continue
            if parent is None or parent not in listed or parent in self.done:
                self.iterators[shard_id] = self.streams.get_shard_iterator(
                    StreamArn=self.arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        read = 0
        for shard_id in list(self.iterators):
            read += self._read(shard_id)
        return read

    def _read(self, shard_id: str) -> int:
        read = 0
        while True:
            page = self.streams.get_records(ShardIterator=self.iterators[shard_id], Limit=1000)
            self.records += page["Records"]
            read += len(page["Records"])
            if "NextShardIterator" not in page:
                del self.iterators[shard_id]
                self.done.add(shard_id)
                return read
            self.iterators[shard_id] = page["NextShardIterator"]
            if not page["Records"]:
                return read

    def finished(self) -> bool:
        """Whether the stream is disabled (every shard closed) and every shard is read to its end."""
        return self.status == "DISABLED" and all(shard["ShardId"] in self.done for shard in self.shards)

    def run(self, deadline: float) -> None:
        """Poll until finished (or `deadline`, monotonic); an error is kept in `error`."""
        try:
            while not self.finished() and time.monotonic() < deadline:
                if not self.poll():
                    time.sleep(0.1)
        except Exception as error:  # (reported by the test)
            self.error = error
