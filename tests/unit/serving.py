"""The server's own protocol on real sockets inside one test process: a store with table `tbl` (hash key
`pk`, S) and connections to a `ServerState`, for tests that must put requests into chosen event-loop passes."""

from __future__ import annotations

import asyncio
import json
import socket

from openddb.api.dispatch import Dispatcher
from openddb.api.incoming import Frame
from openddb.server.http import HttpProtocol
from openddb.server.passes import ServerState
from openddb.storage.sqlite import SQLiteEngine
from tests.api.test_protocol import AUTH


def dispatcher_with_table(engine: SQLiteEngine) -> Dispatcher:
    dispatcher = Dispatcher(engine)
    dispatcher.handle(Frame(b"DynamoDB_20120810.CreateTable", AUTH.encode(), json.dumps({
        "TableName": "tbl", "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}]}).encode(), False, b"r"))
    return dispatcher


async def connect(dispatcher: Dispatcher, count: int) -> tuple[list[socket.socket], list[HttpProtocol]]:
    """`count` connections to one ServerState: the client sockets (non-blocking) and the server protocols."""
    loop = asyncio.get_running_loop()
    state = ServerState(dispatcher)
    clients, protocols = [], []
    for _ in range(count):
        server_side, client_side = socket.socketpair()
        client_side.setblocking(False)
        protocol = HttpProtocol(dispatcher, state)
        await loop.connect_accepted_socket(lambda p=protocol: p, server_side)
        clients.append(client_side)
        protocols.append(protocol)
    return clients, protocols


def receive(clients: list[socket.socket], answers: list[bytes]) -> None:
    """Append whatever each client socket has received to its entry of `answers`."""
    for index, client in enumerate(clients):
        try:
            answers[index] += client.recv(65536)
        except BlockingIOError:
            pass
