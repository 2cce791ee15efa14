"""A worker whose group commit finds the writer lock taken by another process keeps serving meanwhile.

The lock is held here through its own open file description, as another worker process would hold it; the
server runs in this process on real sockets and a real SQLite store, as one of several workers does
(optimistic writes, no waiting on the lock in the event loop).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import threading
import time

from openddb.storage.sqlite import SQLiteEngine
from tests.api.test_protocol import framed_request
from tests.unit.serving import connect, dispatcher_with_table, receive

HOLD_SECONDS = 1.0


def _put(key: str) -> bytes:
    return framed_request("PutItem", {"TableName": "tbl", "Item": {"pk": {"S": key}}})


def _batch(prefix: str) -> bytes:
    return framed_request("BatchWriteItem", {"RequestItems": {"tbl": [
        {"PutRequest": {"Item": {"pk": {"S": f"{prefix}{n}"}}}} for n in range(25)]}})


def _transact_put(key: str) -> bytes:  # a token-guarded write: it runs under the lock, not in the group
    return framed_request("TransactWriteItems", {
        "ClientRequestToken": "token-1",
        "TransactItems": [{"Put": {"TableName": "tbl", "Item": {"pk": {"S": key}}}}]})


def test_group_commit_waits_for_another_workers_lock_without_blocking_the_loop(tmp_path) -> None:
    async def scenario() -> dict[str, object]:
        engine = SQLiteEngine(str(tmp_path), group_commit=True, shared_reads=True)
        engine.session.optimistic, engine.session.wait = True, False
        clients, protocols = await connect(dispatcher_with_table(engine), 3)

        other_worker = os.open(tmp_path / "openddb.lock", os.O_RDWR)
        fcntl.flock(other_worker, fcntl.LOCK_EX)
        released = threading.Event()

        def let_go() -> None:
            fcntl.flock(other_worker, fcntl.LOCK_UN)
            released.set()

        # Let go from another thread: if the event loop blocked on the lock, only this could free it.
        timer = threading.Timer(HOLD_SECONDS, let_go)
        timer.start()
        answers: list[bytes] = [b"", b"", b""]
        seen: dict[str, object] = {}

        async def collect(until: float) -> None:
            while time.monotonic() < until:
                await asyncio.sleep(0.005)
                receive(clients, answers)

        try:
            # 75 rows: a group large enough to wait for the lock beside the loop (a small one blocks it briefly).
            protocols[0].data_received(_batch("a") + _batch("b") + _batch("c"))
            await collect(time.monotonic() + 0.1)
            protocols[1].data_received(_put("one"))  # joins the group, which waits for the lock
            protocols[2].data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # nothing to wait for
            await collect(time.monotonic() + 0.2)
            seen["health_while_held"] = answers[2].startswith(b"HTTP/1.1 200") and not released.is_set()
            seen["writes_while_held"] = answers[0] + answers[1]
            # A write that must run under the lock meets the staged group: it waits (the event loop, too, after
            # a while: it must not starve), then runs after the group's commit.
            protocols[1].data_received(_transact_put("t"))
            await collect(time.monotonic() + HOLD_SECONDS + 1.0)
        finally:
            timer.join()
            os.close(other_worker)
        seen["a"], seen["b"] = answers[0], answers[1]
        for client in clients:
            client.close()
        reader = SQLiteEngine(str(tmp_path))
        table = reader.get_table("tbl")
        assert table is not None
        seen["stored"] = reader.table_stats(table)[0]
        reader.close()
        engine.close()
        return seen

    seen = asyncio.run(scenario())
    assert seen["health_while_held"], "the health check waited for another worker's writer lock"
    assert seen["writes_while_held"] == b"", "a write was acknowledged before its commit"
    assert seen["a"].count(b"HTTP/1.1 200") == 3 and seen["a"].count(b'{"UnprocessedItems":{}}') == 3
    assert seen["b"].count(b"HTTP/1.1 200") == 2
    assert seen["stored"] == 77


def test_an_answer_without_the_dispatcher_waits_behind_a_deferred_request(tmp_path) -> None:
    """A health check pipelined behind a write that waits for another worker's lock (deferred, retried) is
    answered after that write, in request order, not ahead of it."""

    async def scenario() -> bytes:
        engine = SQLiteEngine(str(tmp_path), group_commit=True, shared_reads=True)
        engine.session.optimistic, engine.session.wait = True, False
        clients, protocols = await connect(dispatcher_with_table(engine), 1)
        other_worker = os.open(tmp_path / "openddb.lock", os.O_RDWR)
        fcntl.flock(other_worker, fcntl.LOCK_EX)
        timer = threading.Timer(0.2, lambda: fcntl.flock(other_worker, fcntl.LOCK_UN))
        timer.start()
        answers = [b""]
        try:
            protocols[0].data_received(_transact_put("t") + b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            until = time.monotonic() + 3
            while time.monotonic() < until and answers[0].count(b"HTTP/1.1 200") < 2:
                await asyncio.sleep(0.005)
                receive(clients, answers)
        finally:
            timer.join()
            os.close(other_worker)
        clients[0].close()
        engine.close()
        return answers[0]

    answers = asyncio.run(scenario())
    assert answers.count(b"HTTP/1.1 200") == 2
    assert answers.index(b"application/x-amz-json-1.0") < answers.index(b"healthy: x ")
