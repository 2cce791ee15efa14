#!/usr/bin/env python3
"""The ceiling: a server that answers every request with `{}` on OpenDDB's own HTTP stack (uvloop + httptools).

What a DynamoDB-shaped request costs on this machine before any database work: read beside OpenDDB's figures for
the trivial `ping` workload, it says how much of a request's time the server spends in HTTP and the client.

    python benchmarks/ceiling.py --port 19000
"""

from __future__ import annotations

import argparse
import asyncio
import zlib

import httptools

_BODY = b"{}"
_ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: 2\r\n"
           b"x-amz-crc32: %d\r\n\r\n{}" % zlib.crc32(_BODY))


class _Ceiling(asyncio.Protocol):
    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self.transport is not None:
                self.transport.close()

    def on_message_complete(self) -> None:
        if self.transport is not None:
            self.transport.write(_ANSWER)


async def serve(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(_Ceiling, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    try:
        import uvloop

        uvloop.run(serve(port))
    except ImportError:
        asyncio.run(serve(port))


if __name__ == "__main__":
    main()
