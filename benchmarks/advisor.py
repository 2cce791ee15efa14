"""The advisor's own cost, in process: microseconds per observed GetItem and PutItem record, and its memory after
many requests over many distinct keys (synthetic records fed to the listener, as the dispatcher hands them).

    python benchmarks/advisor.py                      # 1,000,000 records
    python benchmarks/advisor.py --records 10000000

For the cost on a running server (get/put throughput and server CPU per request, advisor on against off in one
run) see benchmarks/streams.py --baseline HEAD --new-args="--advisor on" (docs/ADVISOR.md).
"""

from __future__ import annotations

import argparse
import gc
import random
import time
import tracemalloc
import uuid

from openddb.advisor.listener import Advisor
from openddb.advisor.settings import Settings
from openddb.model.keys import encode_key, partition_hash
from openddb.model.schema import KeyAttribute, TableMeta
from openddb.observe.record import Charge, RequestRecord
from openddb.startup import open_sqlite


def records(count: int, table: str) -> list[RequestRecord]:
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
                                     partition_hash(encoded), encoded))
        made.append(record)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=200_000, help="records made at once (bounds this script's own "
                                                                    "memory)")
    args = parser.parse_args()
    engine = open_sqlite(None, "normal")
    table = "bench-" + uuid.uuid4().hex[:6]
    engine.create_table(TableMeta(name=table, table_id=0, uuid=str(uuid.uuid4()), hash_key=KeyAttribute("pk", "S"),
                                  range_key=None, attribute_definitions=[{"AttributeName": "pk",
                                                                          "AttributeType": "S"}],
                                  created_at=time.time(), billing_mode="PAY_PER_REQUEST"))
    gc.collect()
    tracemalloc.start()
    advisor = Advisor(Settings(), lambda: engine)
    before = tracemalloc.get_traced_memory()[0]
    spent = 0.0
    done = 0
    while done < args.records:
        batch = records(min(args.batch, args.records - done), table)
        started = time.perf_counter()
        for record in batch:
            advisor.observe(record)
        spent += time.perf_counter() - started
        done += len(batch)
        del batch
        gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    print(f"{done:,} records (GetItem and PutItem, {done // 2:,} keys): {spent / done * 1e6:.2f} µs per record; "
          f"the advisor holds {held / 1024:,.0f} KiB ({len(advisor.races.items):,} item entries, "
          f"{sum(len(t.keys.counters) for t in advisor.tables.values())} heavy-hitter counters)")


if __name__ == "__main__":
    main()
