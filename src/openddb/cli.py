"""Command line: `openddb serve` wires configuration -> engine -> server."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys

from openddb import __version__

log = logging.getLogger("openddb")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="openddb", description="A DynamoDB-compatible database server.")
    parser.add_argument("--version", action="version", version=f"openddb {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the server")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    store = serve.add_mutually_exclusive_group()
    store.add_argument("--data-dir", default=os.environ.get("OPENDDB_DATA_DIR", "./openddb-data"),
                       help="directory of the durable store (default ./openddb-data)")
    store.add_argument("--in-memory", action="store_true", help="keep everything in memory (lost at exit)")
    serve.add_argument("--sync", choices=("normal", "full"), default="normal",
                       help="normal: durable across a crash of the server; full: fsync each commit")
    serve.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    return parser


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


async def _run(args: argparse.Namespace, sock: socket.socket) -> None:
    from openddb.api.dispatch import Dispatcher
    from openddb.server.http import serve
    from openddb.storage.sqlite import SQLiteEngine

    engine = SQLiteEngine(None if args.in_memory else args.data_dir, sync=args.sync)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    ready = asyncio.Event()
    task = asyncio.create_task(serve(Dispatcher(engine), args.host, args.port, sock=sock, ready=ready, stop=stop))
    await ready.wait()
    host, port = sock.getsockname()[:2]
    where = "memory" if args.in_memory else os.path.abspath(engine.location)
    log.info("OpenDDB %s listening on http://%s:%d (data: %s)", __version__, host, port, where)
    try:
        await task
    finally:
        engine.close()
        log.info("OpenDDB stopped")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    try:
        sock = _bind(args.host, args.port)
    except OSError as error:
        log.error("cannot listen on %s:%d: %s", args.host, args.port, error)
        return 1
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency on every supported platform
        runner = asyncio.run
    runner(_run(args, sock))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
