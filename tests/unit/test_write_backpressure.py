"""A client that sends requests without reading the answers is not served beyond what its connection can take.

Pipelined requests are answered in order; a client that stops reading would otherwise have every answer to
everything it sends buffered in the worker. Once the connection's send buffer is full the server stops reading
that connection, so the client's own sends block; when the client reads again, every answer arrives, in order.
"""

from __future__ import annotations

import asyncio
import json

from openddb.api.incoming import Frame
from openddb.storage.sqlite import SQLiteEngine
from tests.api.test_protocol import AUTH, framed_request
from tests.unit.serving import connect, dispatcher_with_table

REQUESTS = 4000
GET = framed_request("GetItem", {"TableName": "tbl", "Key": {"pk": {"S": "k"}}})


def test_a_client_not_reading_its_answers_is_not_answered_ahead(tmp_path) -> None:
    async def scenario() -> tuple[int, int, int]:
        engine = SQLiteEngine(str(tmp_path), group_commit=True, shared_reads=True)
        dispatcher = dispatcher_with_table(engine)
        dispatcher.handle(Frame(b"DynamoDB_20120810.PutItem", AUTH.encode(), json.dumps({
            "TableName": "tbl", "Item": {"pk": {"S": "k"}, "blob": {"S": "x" * 4000}}}).encode(), False, b"r"))
        engine.commit()
        engine.end_reads()
        clients, protocols = await connect(dispatcher, 1)
        client, server_side = clients[0], protocols[0]
        pending = GET * REQUESTS  # ~1 MB of requests, ~16 MB of answers
        sent = 0
        largest_buffer = 0
        for _ in range(300):  # send what the connection takes, never read
            try:
                sent += client.send(pending[sent:])
            except BlockingIOError:
                pass
            await asyncio.sleep(0.002)
            assert server_side.transport is not None
            largest_buffer = max(largest_buffer, server_side.transport.get_write_buffer_size())
            if sent == len(pending):
                break
        received = b""
        for _ in range(3000):  # now read: every answer of what was sent arrives
            try:
                while chunk := client.recv(1 << 20):
                    received += chunk
            except BlockingIOError:
                pass
            if sent == len(pending) and received.count(b"HTTP/1.1 200 OK") == REQUESTS:
                break
            try:
                sent += client.send(pending[sent:])
            except BlockingIOError:
                pass
            await asyncio.sleep(0.002)
        client.close()
        engine.close()
        return largest_buffer, received.count(b"HTTP/1.1 200 OK"), received.count(b'"blob"')

    largest_buffer, answers, items = asyncio.run(scenario())
    assert largest_buffer < 4 * 1024 * 1024, largest_buffer  # not the ~16 MB of every answer
    assert answers == items == REQUESTS
