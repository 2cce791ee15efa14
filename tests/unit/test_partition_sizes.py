"""Where a partition splits for size (api/partition_sizes.py): only past the limit, at the hash where its data
divides in halves by bytes, and never inside one partition key's hash."""

from __future__ import annotations

from pathlib import Path

from openddb.api.partition_sizes import cut_for_size
from openddb.storage.base import StorageKey
from openddb.storage.sqlite import SQLiteEngine
from tests.storage.test_engine_contract import new_meta, put


def test_the_cut_divides_the_bytes_in_halves_past_the_limit(tmp_path: Path) -> None:
    engine = SQLiteEngine(str(tmp_path))
    try:
        meta = engine.create_table(new_meta())
        sizes = {10: 3000, 20: 1000, 30: 1000, 40: 1000, 50: 100}  # (hash -> about its bytes)
        engine.write([put(meta, StorageKey(h, b"p%d" % h, b"s"), {"pk": {"S": f"p{h}"}, "sk": {"S": "s"},
                                                                 "d": {"S": "x" * size}})
                      for h, size in sizes.items()])
        assert cut_for_size(engine, meta, 0, 100, 10_000) is None  # (under the limit: whole)
        assert cut_for_size(engine, meta, 0, 100, 5000) == 30  # (3,000 + 1,000 bytes below 30, 2,100 above)
        assert cut_for_size(engine, meta, 0, 15, 1000) is None  # (one hash: one partition key is not divided)
        assert cut_for_size(engine, meta, 15, 100, 2000) == 40  # (20 and 30 below 40: half of 3,100 bytes)
    finally:
        engine.close()
