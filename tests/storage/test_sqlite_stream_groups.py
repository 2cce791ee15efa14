"""Stream records of SQLite's group commit: the writes a worker stages for `flush` (optimistic, several workers)
and the ones it writes under the lock (one worker) record every change, in request order, only once committed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from openddb.storage.base import WriteOp
from openddb.storage.sqlite import SQLiteEngine
from tests.storage.test_stream_contract import it, records, skey, streamed


@pytest.fixture(params=[True, False], ids=["optimistic", "locked"])
def worker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[SQLiteEngine, SQLiteEngine]]:
    """A server's engine (grouping its writes) and a second engine on the same store to look from."""
    engine = SQLiteEngine(str(tmp_path), group_commit=True, shared_reads=True)
    engine.session.optimistic = request.param
    other = SQLiteEngine(str(tmp_path))
    yield engine, other
    other.close()
    engine.close()


def test_a_group_records_each_write_in_order(worker: tuple[SQLiteEngine, SQLiteEngine]) -> None:
    engine, other = worker
    meta = streamed(engine)
    blind = WriteOp(meta, skey("a"), lambda old: it("a", 1), blind=True)  # the stream still needs the old item
    engine.write([blind])
    engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 2))])
    engine.write([WriteOp(meta, skey("a"), lambda old: None)])
    assert records(other, meta) == []  # nothing before the commit
    engine.commit()
    got = records(other, meta)
    assert [r.kind for r in got] == ["INSERT", "MODIFY", "REMOVE"]
    assert [orjson.loads(r.old)["n"]["N"] for r in got if r.old] == ["1", "2"]


def test_a_conflicted_group_records_nothing(tmp_path: Path) -> None:
    """A group that loses its check commits no record; its requests run again and record then."""
    engine = SQLiteEngine(str(tmp_path), group_commit=True, shared_reads=True)
    engine.session.optimistic = True
    other = SQLiteEngine(str(tmp_path))
    try:
        meta = streamed(engine)
        engine.write([WriteOp(meta, skey("a"), lambda old: it("a", 1))])
        assert other.get_table(meta.name) is not None
        other.write([WriteOp(meta, skey("a"), lambda old: it("a", 9))])  # another worker changes the row read
        assert engine.commit() == "conflict"
        assert [r.new and orjson.loads(r.new)["n"]["N"] for r in records(other, meta)] == ["9"]
    finally:
        other.close()
        engine.close()
