"""The SQLite WAL is copied back and rewound by the background checkpointer while writers keep writing."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from openddb.storage import sqlite as sqlite_module
from openddb.storage.base import StorageKey
from openddb.storage.sqlite import SQLiteEngine
from tests.storage.test_engine_contract import item, new_meta, put


def _rewinds(wal: Path) -> int:
    """The WAL header's checkpoint sequence number: SQLite adds one each time the WAL starts over."""
    with open(wal, "rb") as file:
        header = file.read(16)
    return int.from_bytes(header[12:16], "big") if len(header) == 16 else 0


def test_the_wal_is_rewound_under_steady_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two engines (two workers) write without a pause longer than an event-loop pass; the checkpointer must
    still rewind the WAL again and again (taking the writer lock between their commits), and every write
    stays readable."""
    monkeypatch.setattr(sqlite_module, "_WAL_RESTART_FRAMES", 64)
    first = SQLiteEngine(str(tmp_path), group_commit=True)
    second = SQLiteEngine(str(tmp_path), group_commit=True, shared_reads=True)
    wal = tmp_path / "openddb.sqlite3-wal"
    try:
        meta = first.create_table(new_meta())
        metas = {first: meta, second: second.get_table(meta.name) or meta}  # each engine's own look, as a request's
        start = _rewinds(wal)
        written = 0
        deadline = time.monotonic() + 20
        while _rewinds(wal) < start + 3 and time.monotonic() < deadline:
            for engine in (first, second):
                engine.write([put(metas[engine], StorageKey(written % 997, b"p%d" % written, b""), item(written))])
                engine.commit()
                written += 1
            time.sleep(0.0005)
        assert _rewinds(wal) >= start + 3, f"the WAL was not rewound while {written} writes committed"
        assert os.path.getsize(wal) < 64 * 1024 * 1024
        for n in (0, written // 2, written - 1):
            row = second.get(meta, StorageKey(n % 997, b"p%d" % n, b""))
            assert row is not None and row.data == b'{"pk":{"S":"p"},"n":{"N":"%d"}}' % n
        second.end_reads()
    finally:
        second.close()
        first.close()
