#!/usr/bin/env python3
"""What SQLite alone does with bulk_load.py's rows: the bound under OpenDDB's embedded engine.

    python benchmarks/sqlite_bound.py                      # 1,000,000 rows, commits of 800, in a temporary dir
    python benchmarks/sqlite_bound.py --rows 300000 --commit 25 --tmp /dev/shm

Opens a store with OpenDDB's own engine (its schema, pragmas and background WAL checkpointer), then inserts the
rows bulk_load.py writes (pk `p<i % --partitions>`, sk `<i>`, the same ~200-byte document) straight into its
items table: keys encoded and hashed as the engine does, built before the clock starts, `--commit` rows per
transaction with one `executemany` each. No HTTP, no JSON parsing, no validation: what is left is the B-tree and
the WAL. Each row lands on a page of its own (rows are ordered by their partition key's hash), and each page
changed is a WAL frame, copied again into the database file by the checkpointer.

Prints rows/s and the process CPU; compare with bulk_load.py's items/s on the same machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from openddb.model.keys import encode_key, partition_hash
from openddb.storage.sqlite import SQLiteEngine
from openddb.storage.sqlite_writes import UPSERT

DOCUMENT = (b'{"pk":{"S":"p0"},"sk":{"S":"0"},"c":{"N":"0"},"data":{"S":"'
            + (b"abcdefghijklmnopqrstuvwxyz0123456789" * 5)[:150] + b'"}}')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--commit", type=int, default=800, help="rows per transaction (32 connections x 25)")
    parser.add_argument("--tmp", default=None, help="parent directory of the temporary store")
    args = parser.parse_args()
    rows = []
    for i in range(args.rows):
        pk = encode_key({"S": f"p{i % args.partitions}"})
        rows.append((1, partition_hash(pk), bytearray(pk), bytearray(encode_key({"S": str(i)})), 200,
                     bytearray(DOCUMENT)))
    with tempfile.TemporaryDirectory(dir=args.tmp) as data_dir:
        engine = SQLiteEngine(data_dir)  # (its checkpointer thread runs beside, as in the server)
        db = engine._db  # the engine's own connection, without the engine around it
        started, cpu = time.perf_counter(), time.process_time()
        for start in range(0, len(rows), args.commit):
            db.execute("BEGIN IMMEDIATE")
            db.executemany(UPSERT, rows[start:start + args.commit])  # the engine's own statement
            db.execute("COMMIT")
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        size = os.path.getsize(os.path.join(data_dir, "openddb.sqlite3"))
        engine.close()
    print(f"{args.rows:,} rows in commits of {args.commit}: {args.rows / seconds:,.0f} rows/s "
          f"({seconds:.1f} s, process CPU {cpu:.1f} s, database {size / 2**20:.0f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
