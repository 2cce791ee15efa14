"""The PostgreSQL engine's pgvector path (storage/postgres_vectors.py), on a PostgreSQL that has the extension
(OPENDDB_TEST_PGVECTOR; .ci/run starts one from PyPI's `pgserver`, which ships PostgreSQL 16 with pgvector): an
engine there searches with pgvector, and answers as a brute-force reference does for each distance function, with
INLINE_FILTER conditions and with a zero vector; an entry lacking its `vector` (written by an older node) sends its
partition's searches to the numpy path, and the next engine to start gives it one; so does a vector changed by a
node that knows nothing of pgvector; nodes starting together on a new database all take it up."""

from __future__ import annotations

import math
import os
import random
import struct
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from openddb.model import Item
from openddb.model.schema import KeyAttribute, TableMeta, VectorDistance, VectorIndexMeta
from openddb.storage.postgres import PostgresEngine
from openddb.vectors.entries import canonical
from tests.storage.test_engine_contract import new_meta
from tests.storage.test_index_contract import put

PGVECTOR_URL = os.environ.get("OPENDDB_TEST_PGVECTOR")
pytestmark = pytest.mark.skipif(
    not PGVECTOR_URL, reason="set OPENDDB_TEST_PGVECTOR to the URL of a PostgreSQL with pgvector (as .ci/run does: "
    "pip install --target DIR pgserver; PG_BIN=DIR/pgserver/pginstall/bin scripts/postgres-start)")
DIMS = 8
COLOURS = ["red", "green", "blue"]


@pytest.fixture
def engines() -> Iterator[list[PostgresEngine]]:
    opened: list[PostgresEngine] = []
    yield opened
    for engine in opened:
        engine.close()


def open_engine(engines: list[PostgresEngine]) -> PostgresEngine:
    engine = PostgresEngine(str(PGVECTOR_URL))
    engines.append(engine)
    return engine


def vector_meta(distance: VectorDistance) -> TableMeta:
    meta = new_meta()
    meta.vector_indexes = [VectorIndexMeta("v", "emb", DIMS, distance, filters=[KeyAttribute("colour", "S")],
                                           index_id=1)]
    meta.next_index_id = 2
    return meta


def f32(values: list[float]) -> list[float]:
    return list(struct.unpack(f"<{len(values)}f", struct.pack(f"<{len(values)}f", *values)))


def score(distance: VectorDistance, vector: list[float], query: list[float]) -> float:
    """DynamoDB's score, from the float32 values as stored."""
    vector, query = f32(vector), f32(query)
    dot = sum(a * b for a, b in zip(vector, query))
    if distance == "DOT_PRODUCT":
        return dot
    if distance == "EUCLIDEAN":
        return math.dist(vector, query)
    norms = math.hypot(*vector) * math.hypot(*query)
    return 1.0 if norms == 0 else 1.0 - dot / norms


def reference(distance: VectorDistance, stored: dict[str, tuple[list[float], str]], query: list[float], k: int,
              colour: str | None) -> list[tuple[str, float]]:
    scored = [(key, score(distance, vector, query)) for key, (vector, c) in stored.items()
              if colour is None or c == colour]
    scored.sort(key=lambda hit: (-hit[1] if distance == "DOT_PRODUCT" else hit[1], hit[0]))
    return scored[:k]


def search(engine: PostgresEngine, meta: TableMeta, query: list[float], k: int,
           colour: str | None) -> list[tuple[str, float]]:
    conditions = [] if colour is None else [(0, canonical({"S": colour}))]
    hits = engine.vector_search(meta, meta.vector_indexes[0], b"", query, k, conditions)
    return [(hit.item["pk"]["S"], hit.score) for hit in hits]


def load(engine: PostgresEngine, meta: TableMeta, count: int, seed: int) -> dict[str, tuple[list[float], str]]:
    rng = random.Random(seed)
    stored: dict[str, tuple[list[float], str]] = {}
    for n in range(count):
        vector = [0.0] * DIMS if n == 0 else [rng.uniform(-1, 1) for _ in range(DIMS)]
        stored[f"k{n:03d}"] = (vector, COLOURS[n % 3])
        item: Item = {"pk": {"S": f"k{n:03d}"}, "sk": {"S": "s"}, "colour": {"S": COLOURS[n % 3]},
                      "emb": {"L": [{"N": repr(x)} for x in vector]}}
        engine.write([put(meta, item)])
    engine.commit()
    return stored


def same(found: list[tuple[str, float]], expected: list[tuple[str, float]]) -> None:
    assert [key for key, _ in found] == [key for key, _ in expected]
    assert [s for _, s in found] == pytest.approx([s for _, s in expected], rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("distance", ["COSINE", "EUCLIDEAN", "DOT_PRODUCT"])
def test_searches_run_on_pgvector_and_answer_as_brute_force(engines: list[PostgresEngine],
                                                           distance: VectorDistance) -> None:
    engine = open_engine(engines)
    assert engine.pgvector, "the engine did not take up pgvector"
    meta = engine.create_table(vector_meta(distance))
    stored = load(engine, meta, 120, seed=len(distance))
    rng = random.Random(3)
    for k in (1, 10, 100):
        for colour in (None, "green"):
            query = [rng.uniform(-1, 1) for _ in range(DIMS)]
            same(search(engine, meta, query, k, colour), reference(distance, stored, query, k, colour))
    with psycopg.connect(str(PGVECTOR_URL)) as conn:  # (every entry holds its pgvector `vector`)
        count, filled = conn.execute("SELECT count(*), count(emb) FROM openddb_vector_entries WHERE tid=%s",
                                     (meta.table_id,)).fetchone() or (0, 0)
    assert (count, filled) == (120, 120)


def test_an_entry_without_its_vector_is_searched_on_numpy_then_filled(engines: list[PostgresEngine]) -> None:
    engine = open_engine(engines)
    meta = engine.create_table(vector_meta("EUCLIDEAN"))
    stored = load(engine, meta, 40, seed=9)
    query = [0.25] * DIMS
    expected = reference("EUCLIDEAN", stored, query, 5, None)
    with psycopg.connect(str(PGVECTOR_URL), autocommit=True) as conn:
        conn.execute("UPDATE openddb_vector_entries SET emb = NULL WHERE tid=%s AND tpk=%s",
                     (meta.table_id, _stored_pk(conn, meta.table_id, expected[0][0])))
        # (on numpy: pgvector's ranking would put the entry without a `vector` last, missing the nearest)
        same(search(engine, meta, query, 5, None), expected)
        open_engine(engines)  # (a starting engine fills the entries lacking a `vector`)
        row = conn.execute("SELECT count(*) FROM openddb_vector_entries WHERE tid=%s AND emb IS NULL",
                           (meta.table_id,)).fetchone()
        assert row == (0,)
    same(search(engine, meta, query, 5, None), expected)


def test_a_vector_changed_by_an_older_node_is_not_ranked_by_the_one_it_had(engines: list[PostgresEngine]) -> None:
    """An older node writes `vec` alone: the entry is left without `emb` (numpy path), not with the old one."""
    engine = open_engine(engines)
    meta = engine.create_table(vector_meta("EUCLIDEAN"))
    stored = load(engine, meta, 40, seed=11)
    query = [0.5] * DIMS
    farthest = reference("EUCLIDEAN", stored, query, 40, None)[-1][0]
    stored[farthest] = (query, stored[farthest][1])  # (now the nearest)
    with psycopg.connect(str(PGVECTOR_URL), autocommit=True) as conn:
        conn.execute("UPDATE openddb_vector_entries SET vec=%s WHERE tid=%s AND tpk=%s",
                     (struct.pack(f"<{DIMS}f", *query), meta.table_id, _stored_pk(conn, meta.table_id, farthest)))
        assert conn.execute("SELECT count(*) FROM openddb_vector_entries WHERE tid=%s AND emb IS NULL",
                            (meta.table_id,)).fetchone() == (1,)
    found = search(engine, meta, query, 3, None)
    assert found[0][0] == farthest
    same(found, reference("EUCLIDEAN", stored, query, 3, None))


def test_nodes_starting_together_on_a_new_database_all_take_up_pgvector(engines: list[PostgresEngine]) -> None:
    """The first start creates the extension, the column and the trigger; the others wait for it or find them."""
    name = f"openddb_pgv_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(str(PGVECTOR_URL), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
        try:
            url = str(PGVECTOR_URL).rsplit("/", 1)[0] + "/" + name
            with ThreadPoolExecutor(3) as pool:
                started = list(pool.map(lambda _: PostgresEngine(url), range(3)))
            engines.extend(started)
            assert [engine.pgvector for engine in started] == [True, True, True]
        finally:
            for engine in engines:
                engine.close()
            engines.clear()
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def _stored_pk(conn: psycopg.Connection[tuple[object, ...]], tid: int, key: str) -> bytes:
    """The stored table key of the entry whose item's `pk` is `key`."""
    for tpk, in conn.execute("SELECT tpk FROM openddb_vector_entries WHERE tid=%s", (tid,)).fetchall():
        if key.encode() in bytes(tpk):  # type: ignore[arg-type]
            return bytes(tpk)  # type: ignore[arg-type]
    raise AssertionError(f"no entry for {key}")
