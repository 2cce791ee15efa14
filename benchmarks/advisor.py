"""The advisor's own cost, in process.

1. Per operation: real request records (PutItem, UpdateItem, GetItem, Query, as the dispatcher hands them to its
   listeners) captured from an in-process server driven by boto3, then fed again and again to a fresh advisor:
   microseconds per record observed in full (observe_budget 1), and sampled (the budget spent: the test that
   passes a call over, and one full observation in sample_every), and from them the advisor's cost per call on
   a server serving 2,000, 10,000 and 20,000 calls a second (the budget, observe_budget of each second, spread
   over its calls, plus the sampled cost).
2. Memory: synthetic GetItem and PutItem records over many distinct keys fed to one advisor observing every one:
   the bytes it holds after N records (sys.getsizeof over its object graph; `--tracemalloc` to trace them).

    python benchmarks/advisor.py                      # 1,000,000 records for the memory figure
    python benchmarks/advisor.py --records 10000000
    python benchmarks/advisor.py --memory-only --records 10000000 --minutes 1500   # over 25 simulated hours
    python benchmarks/advisor.py --profile query      # cProfile of observing Query records, every one in full

For the cost on a running server (throughput and server CPU per request, advisor on against off in one run) see
benchmarks/streams.py --baseline HEAD --baseline-args="--advisor off" --new-args="--advisor on" (docs/ADVISOR.md).
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import gc
import pstats
import random
import sys
import time
import tracemalloc
import types
import uuid
from typing import Any

import boto3

from openddb import clock
from openddb.advisor.listener import Advisor
from openddb.advisor.settings import Settings, Thresholds
from openddb.model.keys import encode_key, partition_hash
from openddb.model.schema import KeyAttribute, TableMeta
from openddb.observe.record import Charge, RequestRecord
from openddb.startup import open_sqlite
from openddb.storage.base import Engine, StorageKey
from openddb.testing.server import Server

OPERATIONS = ("put", "update", "get", "query")


class Recorder:
    """A listener that keeps the records it is told of (a benchmark's, not the server's: listeners keep nothing)."""

    def __init__(self) -> None:
        self.records: list[RequestRecord] = []

    def observe(self, record: RequestRecord) -> None:
        self.records.append(record)


def captured(count: int) -> tuple[dict[str, list[RequestRecord]], Server]:
    """`count` records of each operation, from a real server (kept running: its engine answers the advisor)."""
    server = Server()
    endpoint = server.start()
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="bench",
                          aws_secret_access_key="bench")
    client.create_table(TableName="bench", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                                      {"AttributeName": "sk", "KeyType": "RANGE"}],
                        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                              {"AttributeName": "sk", "AttributeType": "S"}],
                        BillingMode="PAY_PER_REQUEST")
    recorder = Recorder()
    server._current().dispatcher.listeners.append(recorder)  # (a benchmark reaching in: no public hook for this)
    found: dict[str, list[RequestRecord]] = {}
    calls = {
        "put": lambda n: client.put_item(TableName="bench", Item={"pk": {"S": f"user-{n}"}, "sk": {"S": "profile"},
                                                                  "name": {"S": "x" * 40},
                                                                  "created_at": {"N": "1767225600"}}),
        "update": lambda n: client.update_item(TableName="bench", Key={"pk": {"S": f"user-{n}"},
                                                                       "sk": {"S": "profile"}},
                                               UpdateExpression="SET #v = :v", ExpressionAttributeNames={"#v": "v"},
                                               ExpressionAttributeValues={":v": {"N": str(n)}}),
        "get": lambda n: client.get_item(TableName="bench", Key={"pk": {"S": f"user-{n}"}, "sk": {"S": "profile"}}),
        "query": lambda n: client.query(TableName="bench", KeyConditionExpression="pk = :p",
                                        ExpressionAttributeValues={":p": {"S": f"user-{n}"}}),
    }
    for operation in OPERATIONS:
        recorder.records.clear()
        for number in range(count):
            calls[operation](number)
        found[operation] = list(recorder.records)
    server._current().dispatcher.listeners.remove(recorder)
    return found, server


def per_record(records: list[RequestRecord], engine: Engine, thresholds: Thresholds, repeat: int) -> float:
    """CPU microseconds per record fed to a fresh advisor, `repeat` passes over `records`."""
    advisor = Advisor(Settings(thresholds), lambda: engine)
    started = time.process_time()  # (CPU time: on a shared machine, wall time counts the other processes' too)
    for _ in range(repeat):
        for record in records:
            advisor.observe(record)
    return (time.process_time() - started) / (repeat * len(records)) * 1e6


def synthetic(count: int, table: str) -> list[RequestRecord]:
    """`count` records, half GetItem and half PutItem, over `count` / 2 distinct keys."""
    made = []
    for number in range(count):
        key = f"user-{random.randrange(max(count // 2, 1))}"
        encoded = encode_key({"S": key})
        get = number % 2 == 0
        record = RequestRecord("GetItem" if get else "PutItem")
        record.status, record.latency, record.access_key = 200, 0.0003, "bench"
        record.request = ({"TableName": table, "Key": {"pk": {"S": key}}} if get else
                          {"TableName": table, "Item": {"pk": {"S": key}, "name": {"S": "x" * 40},
                                                        "created_at": {"N": "1767225600"}}})
        record.charges.append(Charge(table, table, None, False, 0.5 if get else 1.0, not get, 80,
                                     StorageKey(partition_hash(encoded), encoded, b"")))
        made.append(record)
    return made


def held_bytes(advisor: Advisor) -> int:
    """The bytes of the objects the advisor's observations hold (sys.getsizeof over their object graph, each object
    once; the engine, settings, bound handlers, classes, functions and modules left out): without tracemalloc,
    whose tracing slows a run of millions of records tenfold, and which counts the key encoder's cache of this
    script's synthetic keys beside the advisor's own objects."""
    skipped = (type, types.ModuleType, types.FunctionType, types.MethodType, types.BuiltinFunctionType, Engine,
               Settings, Thresholds)
    seen: set[int] = set()
    total = 0
    pending = [value for name, value in vars(advisor).items() if name not in ("engine_of", "settings", "limits",
                                                                            "_handlers")]
    while pending:
        item = pending.pop()
        if id(item) in seen or isinstance(item, skipped):
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        pending.extend(gc.get_referents(item))
    return total


def memory(count: int, batch: int, thresholds: Thresholds, traced: bool, minutes: int = 1) -> str:
    engine = open_sqlite(None, "normal")
    table = "bench-" + uuid.uuid4().hex[:6]
    engine.create_table(TableMeta(name=table, table_id=0, uuid=str(uuid.uuid4()), hash_key=KeyAttribute("pk", "S"),
                                  range_key=None, attribute_definitions=[{"AttributeName": "pk",
                                                                          "AttributeType": "S"}],
                                  created_at=time.time(), billing_mode="PAY_PER_REQUEST"))
    gc.collect()
    if traced:
        tracemalloc.start()
    advisor = Advisor(Settings(thresholds), lambda: engine)
    before = tracemalloc.get_traced_memory()[0] if traced else 0
    done = 0
    step = max(count // max(minutes, 1), 1)  # records a simulated minute (the clock moved on after each)
    try:
        while done < count:
            records = synthetic(min(batch, count - done), table)
            for number, record in enumerate(records, done + 1):
                advisor.observe(record)
                if minutes > 1 and number % step == 0:
                    clock.set_offset(clock.offset() + 60.0)
            done += len(records)
            del records
            gc.collect()
    finally:
        clock.set_offset(0)
    if traced:
        held = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
    else:
        held = held_bytes(advisor)
    how = "tracemalloc" if traced else "sys.getsizeof over its object graph"
    return (f"{done:,} records (GetItem and PutItem over {done // 2:,} keys): the advisor holds {held / 1024:,.0f} "
            f"KiB ({how}; {len(advisor.races.items):,} item entries, "
            f"{sum(len(t.keys.counters) for t in advisor.tables.values())} heavy-hitter counters; over {minutes:,} "
            f"minutes: {sum(len(kept) for kept in advisor.windows.sealed.values()) + len(advisor.tables)} time "
            "slices kept)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=1_000_000, help="records for the memory figure")
    parser.add_argument("--batch", type=int, default=200_000, help="synthetic records made at once (bounds this "
                                                                    "script's own memory)")
    parser.add_argument("--captured", type=int, default=500, help="real records captured per operation")
    parser.add_argument("--repeat", type=int, default=20, help="passes over the captured records")
    parser.add_argument("--profile", choices=OPERATIONS, help="profile observing this operation's records in full")
    parser.add_argument("--tracemalloc", action="store_true", help="measure the memory with tracemalloc (slow over "
                                                                   "millions of records) instead of sys.getsizeof")
    parser.add_argument("--memory-only", action="store_true", help="the memory figure alone")
    parser.add_argument("--minutes", type=int, default=1, help="the memory figure's records spread over this many "
                                                               "minutes of a simulated clock (the advisor keeps a "
                                                               "slice a minute, then an hour: advisor/windows.py)")
    args = parser.parse_args()
    every = dataclasses.replace(Thresholds(), observe_budget=1.0)
    if args.memory_only:
        print(memory(args.records, args.batch, every, args.tracemalloc, args.minutes))
        return
    found, server = captured(args.captured)
    engine = server._current().engine
    try:
        if args.profile:
            advisor = Advisor(Settings(every), lambda: engine)
            records: list[Any] = found[args.profile] * args.repeat
            profile = cProfile.Profile(time.process_time)
            profile.runcall(lambda: [advisor.observe(record) for record in records])
            pstats.Stats(profile).sort_stats("tottime").print_stats(25)
            return
        # In full: every record observed. Sampled: the budget spent at once (observe_budget 0), so each record costs
        # the test that passes it over, and one in sample_every its full observation. On a server serving R calls a
        # second the advisor then spends about observe_budget seconds + R x sampled a second: per call,
        # observe_budget / R + sampled (at most `full`).
        budget = Thresholds().observe_budget
        rates = (2_000, 10_000, 20_000)
        print("| operation | µs per call observed in full | µs per call, sampled | "
              + " | ".join(f"µs per call at {rate:,}/s" for rate in rates) + " |")
        print("| --- | --- | --- | " + " | ".join("---" for _ in rates) + " |")
        for operation in OPERATIONS:
            full = per_record(found[operation], engine, every, args.repeat)
            sampled = per_record(found[operation], engine, dataclasses.replace(Thresholds(), observe_budget=0.0),
                                 args.repeat * 4)
            at = [min(full, budget / rate * 1e6 + sampled) for rate in rates]
            print(f"| {operation} | {full:.2f} | {sampled:.2f} | " + " | ".join(f"{cost:.2f}" for cost in at) + " |")
    finally:
        server.stop()
    # (every record observed in full: the bounded maps at their fullest)
    print(memory(args.records, args.batch, every, args.tracemalloc))


if __name__ == "__main__":
    main()
