"""PostgreSQL connection loss: a node whose connection the server closed while it sat idle (a restart, a
failover, an administrator's pg_terminate_backend) serves its next request over a new connection instead of
failing it."""

from __future__ import annotations

import time
import uuid

import psycopg
import pytest

from openddb.model.keys import encode_key, partition_hash
from openddb.storage.base import StorageKey, WriteOp
from tests.storage.conftest import POSTGRES_URL, TERMINATE_CLIENT, needs_postgres, scratch_database
from tests.storage.test_engine_contract import new_meta

pytestmark = needs_postgres


def _terminate(pid: int) -> None:
    """Close one backend from the server side, as a restart does to idle connections, and wait until it is gone."""
    with psycopg.connect(str(POSTGRES_URL), autocommit=True) as admin:
        assert admin.execute(TERMINATE_CLIENT, (pid,)).fetchone() == (True,)
        for _ in range(200):
            if admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid=%s", (pid,)).fetchone() is None:
                return
            time.sleep(0.01)
    raise AssertionError(f"backend {pid} still there")


def test_an_idle_connection_closed_by_the_server_is_replaced_before_the_next_call() -> None:
    from openddb.storage.postgres import PostgresEngine

    engine = PostgresEngine(str(POSTGRES_URL))
    try:
        meta = engine.create_table(new_meta(f"conn-{uuid.uuid4().hex[:8]}"))
        pk = encode_key({"S": "a"})
        key = StorageKey(partition_hash(pk), pk, encode_key({"S": "s"}))
        engine.write([WriteOp(meta, key, lambda old: {"pk": {"S": "a"}, "sk": {"S": "s"}})])
        for call in (lambda: engine.get_table(meta.name), lambda: engine.get(meta, key), engine.list_tables,
                     lambda: engine.write([WriteOp(meta, key, lambda old: {"pk": {"S": "a"}, "sk": {"S": "t"}})])):
            old_pid = engine._conn.info.backend_pid
            _terminate(old_pid)
            call()
            assert engine._conn.info.backend_pid != old_pid
        found = engine.get(meta, key)
        assert found is not None and b'"t"' in found.data
        engine.delete_table(meta.name)
    finally:
        engine.close()


def test_a_table_change_held_back_past_the_lock_timeout_is_limit_exceeded_not_a_failure() -> None:
    """Table changes take turns on one row, which a DeleteTable of a large table holds while it deletes the rows:
    another table change that waits past the lock timeout is answered LimitExceededException (which SDKs retry),
    and the engine serves on. (On a database of its own: the held row would hold back the table changes of every
    test running beside it.)"""
    with scratch_database() as url:
        _held_back_table_changes(url)


def _held_back_table_changes(url: str) -> None:
    from openddb.errors import LimitExceededException
    from openddb.storage.postgres import PostgresEngine

    engine = PostgresEngine(url)
    meta = engine.create_table(new_meta(f"turns-{uuid.uuid4().hex[:8]}"))
    try:
        with psycopg.connect(url, autocommit=True) as other:
            other.execute("BEGIN")
            other.execute("UPDATE openddb_catalog SET value = value WHERE key='next_tid'")  # a table change underway
            for change in (lambda: engine.create_table(new_meta(f"turns-{uuid.uuid4().hex[:8]}")),
                           lambda: engine.update_table(meta)):
                with pytest.raises(LimitExceededException, match=r"^Subscriber limit exceeded: "):
                    change()
            other.execute("ROLLBACK")
        assert engine.get_table(meta.name) is not None
        engine.update_table(meta)
    finally:
        engine.delete_table(meta.name)
        engine.close()
