"""A vector search partition cached by an engine, brought up to date from the changes stamped after it: on both
engines, by engines sharing one store; on SQLite, a search inside a lone worker's open group transaction sees the
group's changes without caching them (the group may yet be rolled back)."""

from __future__ import annotations

import math
import random
from pathlib import Path

from openddb.model import Item
from openddb.model.schema import TableMeta, VectorIndexMeta
from openddb.storage.sqlite import SQLiteEngine
from openddb.vectors.entries import RETAIN
from tests.storage.conftest import EngineFactory
from tests.storage.test_engine_contract import new_meta
from tests.storage.test_index_contract import delete, put

DIMS = 3


def vector_meta() -> TableMeta:
    meta = new_meta()
    meta.vector_indexes = [VectorIndexMeta("v", "emb", DIMS, "EUCLIDEAN", index_id=1)]
    meta.next_index_id = 2
    return meta


def doc(key: str, values: list[float] | None) -> Item:
    item: Item = {"pk": {"S": key}, "sk": {"S": "s"}}
    if values is not None:
        item["emb"] = {"L": [{"N": repr(x)} for x in values]}
    return item


def nearest(engine: SQLiteEngine | object, meta: TableMeta, query: list[float], k: int = 100) -> list[str]:
    hits = engine.vector_search(meta, meta.vector_indexes[0], b"", query, k, [])  # type: ignore[attr-defined]
    return [hit.item["pk"]["S"] for hit in hits]


def reference(stored: dict[str, list[float]], query: list[float]) -> list[str]:
    return sorted(stored, key=lambda key: math.dist(stored[key], query))


def test_engines_sharing_a_store_search_what_the_other_changed(open_engine: EngineFactory) -> None:
    """Writes through one engine, searches through the other (whose matrix is cached), many rounds."""
    writer, searcher = open_engine(), open_engine()
    meta = writer.create_table(vector_meta())
    rng = random.Random(5)
    stored: dict[str, list[float]] = {}
    for n in range(30):
        stored[f"k{n}"] = [rng.uniform(-1, 1) for _ in range(DIMS)]
        writer.write([put(meta, doc(f"k{n}", stored[f"k{n}"]))])
    query = [0.1, 0.2, 0.3]
    assert nearest(searcher, meta, query) == reference(stored, query)
    for round_number in range(20):
        key = f"k{rng.randrange(40)}"
        if key in stored and round_number % 3 == 0:
            writer.write([delete(meta, doc(key, None))])
            del stored[key]
        else:
            stored[key] = [rng.uniform(-1, 1) for _ in range(DIMS)]
            writer.write([put(meta, doc(key, stored[key]))])
        writer.commit()
        query = [rng.uniform(-1, 1) for _ in range(DIMS)]
        assert nearest(searcher, meta, query) == reference(stored, query)
        assert nearest(searcher, meta, query, k=1) == reference(stored, query)[:1]


def test_tombstones_older_than_the_retained_changes_are_purged(tmp_path: Path) -> None:
    """A partition keeps the tombstones of its last RETAIN changes only, and a search cached further back than
    that loads the partition whole (and answers right)."""
    writer, searcher = SQLiteEngine(str(tmp_path)), SQLiteEngine(str(tmp_path))
    try:
        meta = writer.create_table(vector_meta())
        writer.write([put(meta, doc("kept", [1.0, 0.0, 0.0]))])
        assert nearest(searcher, meta, [0.0, 0.0, 0.0]) == ["kept"]  # (cached at seq 1)
        for n in range(RETAIN // 2 + 2):  # two changes each: a put and a delete
            writer.write([put(meta, doc(f"gone{n % 7}", [0.5, 0.5, 0.5]))])
            writer.write([delete(meta, doc(f"gone{n % 7}", None))])
        seq, oldest = writer._db.execute("SELECT (SELECT seq FROM vector_partitions), min(seq) "
                                         "FROM vector_tombstones").fetchone()
        assert seq == 2 * (RETAIN // 2 + 2) + 1 and oldest > seq - RETAIN
        assert nearest(searcher, meta, [0.0, 0.0, 0.0]) == ["kept"]
    finally:
        searcher.close()
        writer.close()


def test_a_search_inside_an_open_group_sees_it_and_caches_nothing(tmp_path: Path) -> None:
    """A lone worker's group holds the pass's writes in an open transaction: a search in that pass sees them, but
    the engine's cached matrix stays at the last committed state, and a search from another engine sees only that."""
    engine = SQLiteEngine(str(tmp_path), group_commit=True, shared_reads=True)
    other = SQLiteEngine(str(tmp_path))
    try:
        meta = engine.create_table(vector_meta())
        engine.write([put(meta, doc("a", [1.0, 0.0, 0.0])), put(meta, doc("b", [0.0, 1.0, 0.0]))])
        engine.commit()
        engine.end_reads()
        assert nearest(engine, meta, [0.0, 0.0, 0.0]) == ["a", "b"]  # cached, committed
        engine.end_reads()
        assert engine._vector_cache is not None
        cached = engine._vector_cache.get((meta.table_id, 1, b""))
        assert cached is not None and cached.seq == 2
        engine.write([put(meta, doc("c", [0.0, 0.0, 0.1])), delete(meta, doc("a", None))])
        assert nearest(engine, meta, [0.0, 0.0, 0.0]) == ["c", "b"]  # the open group's view
        assert cached.seq == 2 and len(cached.keys) == 2  # (left as it was)
        assert nearest(other, meta, [0.0, 0.0, 0.0]) == ["a", "b"]  # not committed
        engine.commit()
        engine.end_reads()
        assert nearest(engine, meta, [0.0, 0.0, 0.0]) == ["c", "b"]
        assert nearest(other, meta, [0.0, 0.0, 0.0]) == ["c", "b"]
    finally:
        engine.end_reads()  # (a closing engine's checkpoint would wait for the read snapshot)
        other.close()
        engine.close()
