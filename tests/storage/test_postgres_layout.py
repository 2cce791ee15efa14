"""PostgreSQL layout: a Query must be a B-tree range read on the primary key, never a sequential scan or a sort."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from openddb.storage.base import HASH_SPACE, SortRange, StorageKey, WriteOp
from tests.storage.conftest import POSTGRES_URL, needs_postgres
from tests.storage.test_engine_contract import new_meta

pytestmark = needs_postgres


@pytest.fixture(scope="module")
def populated() -> Any:
    """An engine and a table of 4,000 items over 400 partitions, analysed so the planner knows the sizes."""
    from openddb.storage.postgres import PostgresEngine

    engine = PostgresEngine(str(POSTGRES_URL))
    meta = engine.create_table(new_meta())
    for part in range(400):
        h = part * (HASH_SPACE // 400)
        engine.write([WriteOp(meta, StorageKey(h, b"p%d" % part, b"s%02d" % i),
                              lambda old, i=i: {"n": {"N": str(i)}}) for i in range(10)])
    engine._cursor().execute("ANALYZE openddb_items")
    yield engine, meta
    engine.delete_table(meta.name)
    engine.close()


def plan(engine: Any, sql: str, params: list[Any]) -> str:
    rows = engine._cursor().execute("EXPLAIN " + sql, params).fetchall()
    return "\n".join(row[0] for row in rows)


@pytest.mark.parametrize(("sort", "forward", "after"), [
    (SortRange(), True, None),
    (SortRange(b"s02", True, b"s07", False), True, None),
    (SortRange(low=b"s03"), False, b"s08"),
])
def test_query_is_an_index_range_read(populated: Any, sort: SortRange, forward: bool, after: bytes | None) -> None:
    """Every shape of Query reads one (tid, h, pk) prefix of the primary key, in index order (no Sort node)."""
    from openddb.storage.postgres import query_statement

    engine, meta = populated
    h = 7 * (HASH_SPACE // 400)
    text = plan(engine, *query_statement(meta.table_id, h, b"p7", sort, forward, after, 16))
    assert "Index Scan" in text and "openddb_items_pkey" in text, text
    assert "Seq Scan" not in text and "Sort" not in text, text
    assert "Index Cond: ((tid = " in text and "(h = " in text and "(pk = " in text, text
    rows = list(engine.query(meta, h, b"p7", sort, forward, after))
    assert rows and all(row.key.pk == b"p7" for row in rows)


def test_scan_page_is_an_index_range_read(populated: Any) -> None:
    """A Scan page resumes from its last key with a row comparison the index serves directly."""
    from openddb.storage.postgres import scan_statement

    engine, meta = populated
    start = StorageKey(HASH_SPACE // 2, b"p200", b"s03")
    text = plan(engine, *scan_statement(meta.table_id, 0, HASH_SPACE, start, 64))
    assert "Index Scan" in text and "Seq Scan" not in text and "Sort" not in text, text


def test_polling_mode_sees_ddl_at_once() -> None:
    """Without LISTEN (CockroachDB, YugabyteDB) the engine reads the catalog version per look-up: no delay at all."""
    from openddb.storage.postgres import PostgresEngine

    first, second = PostgresEngine(str(POSTGRES_URL)), PostgresEngine(str(POSTGRES_URL), listen=False)
    try:
        assert not second.listening
        meta = first.create_table(new_meta(f"poll-{uuid.uuid4().hex[:8]}"))
        assert second.get_table(meta.name) is not None
        first.delete_table(meta.name)
        assert second.get_table(meta.name) is None
    finally:
        first.close()
        second.close()
