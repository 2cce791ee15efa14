"""PostgreSQL layout: a Query (of a table or an index) must be a B-tree range read on a primary key, never a
sequential scan or a sort; the schema migrates on start."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
import pytest

from openddb.model.indexes import entry_of
from openddb.model.keys import encode_key, partition_hash
from openddb.model.schema import IndexMeta, KeyAttribute
from openddb.storage.base import HASH_SPACE, IndexKey, SortRange, StorageKey, WriteOp
from tests.storage.conftest import POSTGRES_URL, needs_postgres, scratch_database
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


@pytest.fixture(scope="module")
def indexed() -> Any:
    """A table with a GSI over 4,000 items in 400 index partitions (10 items share each index key), analysed."""
    from openddb.storage.postgres import PostgresEngine

    engine = PostgresEngine(str(POSTGRES_URL))
    meta = new_meta()
    meta.indexes = [IndexMeta("by-g", "GLOBAL", [KeyAttribute("g", "S")], [KeyAttribute("n", "N")], index_id=1)]
    meta = engine.create_table(meta)
    for part in range(400):
        engine.write([WriteOp(meta, _table_key(part, i),
                              lambda old, part=part, i=i: {"pk": {"S": f"p{part}-{i}"}, "sk": {"S": "s"},
                                                           "g": {"S": f"g{part}"}, "n": {"N": str(i)}})
                      for i in range(10)])
    engine._cursor().execute("ANALYZE openddb_index_entries")
    yield engine, meta
    engine.delete_table(meta.name)
    engine.close()


def _table_key(part: int, i: int) -> StorageKey:
    pk = encode_key({"S": f"p{part}-{i}"})
    return StorageKey(partition_hash(pk), pk, encode_key({"S": "s"}))


@pytest.mark.parametrize(("sort", "forward", "after"), [
    (SortRange(), True, None),
    (SortRange(encode_key({"N": "2"}), True, encode_key({"N": "7"}), False), True, None),
    (SortRange(low=encode_key({"N": "3"})), False, IndexKey(0, b"", encode_key({"N": "8"}), b"p", b"s")),
])
def test_index_query_is_an_index_range_read(indexed: Any, sort: SortRange, forward: bool,
                                            after: IndexKey | None) -> None:
    """An index Query reads one (tid, iid, h, pk) prefix of the entries' primary key in index order (no Sort)."""
    from openddb.storage.postgres_indexes import index_query_statement

    engine, meta = indexed
    pk = encode_key({"S": "g7"})
    h = partition_hash(pk)
    index = meta.indexes[0]
    text = plan(engine, *index_query_statement(meta.table_id, index.index_id, h, pk, sort, forward, after, 16))
    assert "Index Scan" in text and "openddb_index_entries_pkey" in text, text
    assert "Seq Scan" not in text and "Sort" not in text, text
    assert "Index Cond: ((tid = " in text and "(iid = " in text and "(h = " in text and "(pk = " in text, text
    rows = list(engine.index_query(meta, index, h, pk, sort, forward, after))
    assert rows and all(row.key.pk == pk for row in rows)


def test_index_scan_page_is_an_index_range_read(indexed: Any) -> None:
    """An index Scan page resumes from its last entry with a row comparison the index serves directly."""
    from openddb.storage.postgres_indexes import index_scan_statement

    engine, meta = indexed
    start = IndexKey(HASH_SPACE // 2, b"g200", b"", b"p", b"s")
    text = plan(engine, *index_scan_statement(meta.table_id, meta.indexes[0].index_id, 0, HASH_SPACE, start, 64))
    assert "Index Scan" in text and "Seq Scan" not in text and "Sort" not in text, text


def test_a_version_1_database_migrates_on_start() -> None:
    """A database of schema version 1 gains the index-entries and leases tables, and the tokens' sizes, when a
    node starts."""
    import psycopg

    from openddb.storage.postgres import _MIGRATIONS, SCHEMA_VERSION, PostgresEngine

    with scratch_database() as url:
        with psycopg.connect(url, autocommit=True) as old:
            for statement in _MIGRATIONS[1]:
                assert isinstance(statement, str)
                old.execute(statement)
            old.execute("INSERT INTO openddb_catalog VALUES ('schema_version', 1), ('catalog_version', 0), "
                        "('next_tid', 1)")
        engine = PostgresEngine(url)
        try:
            version = engine._cursor().execute(
                "SELECT value FROM openddb_catalog WHERE key='schema_version'").fetchone()[0]
            assert version == SCHEMA_VERSION == 9
            # version 2: index entries; version 3: leases; version 4: the sizes a request token's writes cost;
            # version 7: vector index entries; version 8: their change sequences and tombstones; version 9: the
            # throttle's partition splits
            engine.save_splits({"arn n8 0-536870912": 268435456})
            assert engine.load_splits() == {"arn n8 0-536870912": 268435456}
            assert engine._cursor().execute("SELECT count(*) FROM openddb_vector_entries").fetchone()[0] == 0
            assert engine._cursor().execute("SELECT max(seq) FROM openddb_vector_tombstones").fetchone()[0] is None
            assert engine.index_stats(new_meta(), IndexMeta("i", "GLOBAL", [KeyAttribute("g", "S")])) == (0, 0)
            assert engine.try_lease("duty", "node-a", 10, now=1.0)
            assert engine._cursor().execute("SELECT sizes FROM openddb_tokens").fetchall() == []
        finally:
            engine.close()


def test_a_version_4_database_stores_its_long_keys_anew() -> None:
    """Schema 5 keeps keys past `stored_key`'s limits as a prefix and a digest: rows a version-4 database holds
    whole (short enough then for PostgreSQL's B-tree, long for the new form) are rewritten at start, and found."""
    import os

    import psycopg

    from openddb.storage.postgres import _MIGRATIONS, PostgresEngine
    from openddb.storage.postgres_indexes import ENTRY_KEY_LIMIT, ITEM_KEY_LIMIT

    text = os.urandom(ITEM_KEY_LIMIT).hex()[:ITEM_KEY_LIMIT + 200]  # long, yet it fit before
    pk, sk = encode_key({"S": text}), encode_key({"S": "s"})
    h = partition_hash(pk)
    meta = new_meta()
    meta.indexes = [IndexMeta("by-l", "LOCAL", [KeyAttribute("pk", "S")], [KeyAttribute("l", "S")], index_id=1)]
    meta.table_id = 1
    item = {"pk": {"S": text}, "sk": {"S": "s"}, "l": {"S": "a"}}
    entry = entry_of(meta, meta.indexes[0], item)
    assert entry is not None
    with scratch_database() as url:
        with psycopg.connect(url, autocommit=True) as old:
            for version in range(1, 5):
                for statement in _MIGRATIONS[version]:
                    assert isinstance(statement, str)
                    old.execute(statement)
            old.execute("INSERT INTO openddb_catalog VALUES ('schema_version', 4), ('catalog_version', 0), "
                        "('next_tid', 2)")
            old.execute("INSERT INTO openddb_tables (name, tid, version, meta) VALUES (%s, 1, 1, %s)",
                        (meta.name, meta.to_json()))
            old.execute("INSERT INTO openddb_items (tid, h, pk, sk, size, data) VALUES (1, %s, %s, %s, 9, %s)",
                        (h, pk, sk, orjson.dumps(item)))
            old.execute("INSERT INTO openddb_index_entries (tid, iid, h, pk, sk, tpk, tsk, size, data) "
                        "VALUES (1, 1, %s, %s, %s, %s, %s, %s, %s)",
                        (entry.h, entry.pk, entry.sk, pk, sk, entry.size, orjson.dumps(entry.item)))
        engine = PostgresEngine(url)
        try:
            assert len(pk) > ITEM_KEY_LIMIT > ENTRY_KEY_LIMIT
            table = engine.get_table(meta.name)
            assert table is not None
            key = StorageKey(h, pk, sk)
            found = engine.get(table, key)
            assert found is not None and b'"l"' in found.data
            assert [row.key for row in engine.scan(table, 0, HASH_SPACE, None)] == [key]
            local = table.indexes[0]
            assert [(row.key.tpk, row.key.tsk) for row in engine.index_query(
                table, local, h, pk, SortRange(), True, None)] == [(pk, sk)]
            engine.write([WriteOp(table, key, lambda old: None)])  # the item and its entry both go
            assert engine.get(table, key) is None
            assert list(engine.index_query(table, local, h, pk, SortRange(), True, None)) == []
        finally:
            engine.close()
        # A node of the old version, still running, would write the key whole: refused.
        with psycopg.connect(url, autocommit=True) as old_node, pytest.raises(psycopg.errors.CheckViolation):
            old_node.execute("INSERT INTO openddb_items (tid, h, pk, sk, size, data) VALUES (1, %s, %s, %s, 9, '{}')",
                             (h, pk, sk))
