"""Answers leave in request order on every connection, whichever event-loop pass step sends them.

Reads are answered at the end of the pass (with the pass's other answers), writes after their group commit.
These tests put two connections' requests into one pass on purpose (the HTTP tests cannot choose how the
kernel splits their sends into passes): real sockets, a real SQLite store, the server's own protocol.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from openddb.api.incoming import Frame
from openddb.storage.sqlite import SQLiteEngine
from tests.api.test_protocol import AUTH, framed_request
from tests.unit.serving import connect, dispatcher_with_table, receive


def _bodies(data: bytes) -> list[dict]:
    bodies = []
    while data:
        head, rest = data.split(b"\r\n\r\n", 1)
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")))
        bodies.append(json.loads(rest[:length]))
        data = rest[length:]
    return bodies


def _put(key: str) -> bytes:
    return framed_request("PutItem", {"TableName": "tbl", "Item": {"pk": {"S": key}}, "ReturnValues": "ALL_OLD"})


GET = framed_request("GetItem", {"TableName": "tbl", "Key": {"pk": {"S": "k"}}})


@pytest.mark.parametrize("optimistic", [False, True])
def test_answers_keep_request_order_when_a_pass_mixes_reads_and_writes(tmp_path, optimistic: bool) -> None:
    """Connection A writes first (its group commit is scheduled), then connection B reads and writes in the
    same pass: B must still get its read's answer before its write's."""

    async def scenario() -> tuple[list[dict], list[dict]]:
        engine = SQLiteEngine(str(tmp_path), group_commit=True, shared_reads=True)
        engine.session.optimistic = optimistic
        dispatcher = dispatcher_with_table(engine)
        dispatcher.handle(Frame(b"DynamoDB_20120810.PutItem", AUTH.encode(), json.dumps({
            "TableName": "tbl", "Item": {"pk": {"S": "k"}, "n": {"N": "1"}}}).encode(), False, b"r"))
        engine.commit()
        engine.end_reads()
        clients, protocols = await connect(dispatcher, 2)
        a, b = protocols
        a.data_received(_put("a1") + GET)  # one pass: A's write schedules the group commit first ...
        b.data_received(GET + _put("b1") + GET)  # ... then B reads, writes and reads
        answers: list[bytes] = [b"", b""]
        wanted = (2, 3)
        for _ in range(200):
            await asyncio.sleep(0.005)
            receive(clients, answers)
            if all(answer.count(b"HTTP/1.1 ") == want for answer, want in zip(answers, wanted)):
                break
        for client in clients:
            client.close()
        engine.close()
        return _bodies(answers[0]), _bodies(answers[1])

    first, second = asyncio.run(scenario())
    item = {"Item": {"pk": {"S": "k"}, "n": {"N": "1"}}}
    assert first == [{}, item]
    assert second == [item, {}, item]
