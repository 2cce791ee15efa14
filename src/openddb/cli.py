"""Command line: `openddb serve` wires configuration -> engine -> server."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from openddb import __version__
from openddb.server.workers import reuseport_socket, stop_with_parent, supervise
from openddb.storage.base import Engine, StreamSettings

if TYPE_CHECKING:
    from openddb.streams.triggers import TriggerConfig

log = logging.getLogger("openddb")
_STREAM_DEFAULTS = StreamSettings()


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
    serve.add_argument("--engine", default=os.environ.get("OPENDDB_ENGINE"), metavar="URL",
                       help="a shared database instead of the embedded store: postgresql://user@host:port/db "
                            "(default: $OPENDDB_ENGINE, else the embedded SQLite store)")
    serve.add_argument("--workers", type=int, default=None, metavar="N",
                       help="server processes sharing the port (default: one per CPU core; 1 with --in-memory)")
    serve.add_argument("--sync", choices=("normal", "full"), default="normal",
                       help="normal: durable across a crash of the server; full: fsync each commit")
    serve.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    serve.add_argument("--cors", default="*", metavar="ORIGINS",
                       help="origins allowed to call from a browser page, comma-separated, as DynamoDB Local's -cors "
                            "(default *: any origin)")
    streams = serve.add_argument_group("DynamoDB Streams")
    streams.add_argument("--stream-shards", type=int, default=_STREAM_DEFAULTS.shards, metavar="N",
                         help=f"shards open at once per stream, by partition-hash range "
                              f"(default {_STREAM_DEFAULTS.shards})")
    streams.add_argument("--stream-shard-seconds", type=float, default=_STREAM_DEFAULTS.shard_seconds, metavar="S",
                         help="a shard's life before it rolls over to a child shard (default 14400: 4 hours)")
    streams.add_argument("--stream-retention-seconds", type=float, default=_STREAM_DEFAULTS.retention_seconds,
                         metavar="S", help="how long stream records are kept (default 86400: DynamoDB's 24 hours)")
    streams.add_argument("--trigger", action="append", default=[], metavar="TABLE=URL",
                         help="POST the table's stream records to URL in batches, as AWS Lambda receives them "
                              "(repeatable)")
    streams.add_argument("--config", metavar="FILE",
                         help="triggers with their settings: a TOML ([[trigger]]) or JSON ({\"trigger\": [...]}) file")
    _tail_parser(commands)
    return parser


def _tail_parser(commands: Any) -> None:
    streams = commands.add_parser("streams", help="read DynamoDB Streams")
    actions = streams.add_subparsers(dest="action", required=True)
    tail = actions.add_parser("tail", help="print a table's stream records as JSON lines as they arrive")
    tail.add_argument("table")
    tail.add_argument("--endpoint", default="http://127.0.0.1:8000", metavar="URL",
                      help="the server (default http://127.0.0.1:8000)")
    tail.add_argument("--from", dest="start", choices=("trim_horizon", "latest"), default="trim_horizon",
                      help="trim_horizon: every record kept; latest: only new ones (default trim_horizon)")
    tail.add_argument("--region", default="us-east-1", help="the region of the table (default us-east-1)")


def _stream_settings(args: argparse.Namespace) -> StreamSettings:
    if args.stream_shards < 1 or args.stream_shard_seconds <= 0 or args.stream_retention_seconds <= 0:
        raise SystemExit("openddb: --stream-shards must be at least 1, and the stream durations positive")
    return StreamSettings(args.stream_shards, args.stream_shard_seconds, args.stream_retention_seconds)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def _engine(args: argparse.Namespace) -> tuple[Engine, str]:
    """The storage engine the options ask for, and how the start-up log line names it."""
    if args.engine:
        if not args.engine.startswith(("postgresql://", "postgres://")):
            raise SystemExit(f"openddb: unsupported --engine {args.engine!r} (expected postgresql://...)")
        from openddb.storage.postgres import PostgresEngine

        try:
            postgres = PostgresEngine(args.engine)
        except Exception as error:  # psycopg.OperationalError and friends: say why, without a traceback
            log.error("cannot open the engine %s: %s", args.engine.split("@")[-1], error)
            raise SystemExit(1) from None
        postgres.stream_settings = _stream_settings(args)
        mode = "LISTEN/NOTIFY" if postgres.listening else "polling"
        return postgres, f"engine: postgresql {postgres.location}, catalog changes by {mode}"
    from openddb.storage.sqlite import SQLiteEngine

    sqlite = SQLiteEngine(None if args.in_memory else args.data_dir, sync=args.sync, group_commit=True,
                          shared_reads=True)
    sqlite.stream_settings = _stream_settings(args)
    return sqlite, "engine: sqlite, data: " + ("memory" if args.in_memory else os.path.abspath(sqlite.location))


async def _run(args: argparse.Namespace, sock: socket.socket, quiet: bool = False, shared: bool = False) -> None:
    """Serve on `sock` until SIGINT/SIGTERM; `shared`: other worker processes write to the same store."""
    from openddb.api.dispatch import Dispatcher
    from openddb.server.http import serve
    engine, where = _engine(args)
    # Workers sharing a store do not block their event loop on another's write lock; they retry shortly.
    engine.session.wait = not shared
    # ... and they stage their writes without the lock, taking it only to check and commit them.
    engine.session.optimistic = shared
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    ready = asyncio.Event()
    task = asyncio.create_task(serve(Dispatcher(engine), args.host, args.port, sock=sock, ready=ready, stop=stop,
                                     cors=args.cors))
    await ready.wait()
    host, port = sock.getsockname()[:2]
    if not quiet:
        log.info("OpenDDB %s listening on http://%s:%d (%s)", __version__, host, port, where)
    try:
        await task
    finally:
        engine.close()
        log.info("OpenDDB stopped")


def _triggers(args: argparse.Namespace) -> list[TriggerConfig]:
    """The triggers of --trigger and --config, checked before the server starts; a batch given up on goes to
    `<data dir>/triggers/failures.jsonl` unless the trigger names its own on-failure file."""
    from openddb.streams.triggers import load_config, parse_trigger

    try:
        configs = [parse_trigger(spec) for spec in args.trigger]
        if args.config:
            configs += load_config(args.config)
    except (ValueError, OSError) as error:
        raise SystemExit(f"openddb: {error}") from None
    names = [config.name for config in configs]
    if len(set(names)) != len(names):
        raise SystemExit("openddb: a trigger (table and URL) is given twice")
    for config in configs:
        if config.on_failure is None and not args.in_memory:
            config.on_failure = os.path.join(args.data_dir, "triggers", "failures.jsonl")
    return configs


def _start_deliverer(args: argparse.Namespace, configs: list[TriggerConfig], sock: socket.socket) -> int | None:
    """Fork the one process that delivers the triggers (whatever the number of workers), before any thread or
    event loop exists. It is a client of this server's Streams API over loopback: the socket is bound already,
    so its first requests wait in the listen queue until the server runs."""
    if not configs:
        return None
    from openddb.streams.triggers import StateStore, run_triggers

    host, port = sock.getsockname()[:2]
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    endpoint = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    try:
        state = StateStore(None if args.in_memory else os.path.join(args.data_dir, "triggers", "state.json"))
    except (ValueError, OSError) as error:
        raise SystemExit(f"openddb: {error}") from None
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        sock.close()
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda _signum, _frame: stop.set())
        stop_with_parent(parent)
        run_triggers(configs, endpoint, state, stop)
        code = 0
    except BaseException:
        log.exception("the trigger deliverer failed")
    finally:
        os._exit(code)


def _stop_deliverer(pid: int | None, sock: socket.socket) -> None:
    """Stop the deliverer and wait for it (it saves its positions as it goes; a batch cut short is sent again
    after a restart)."""
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    # A request it sent as the workers stopped may wait in the listen queue of a socket nobody serves any more
    # (this process keeps one open): closing it refuses the request instead of leaving it to time out.
    sock.close()
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass  # it is gone already (a supervisor reaped it)


def _tail(args: argparse.Namespace) -> int:
    from openddb.streams.tail import tail

    return tail(args.endpoint, args.table, args.start.upper(), args.region)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "streams":
        return _tail(args)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    configs = _triggers(args)
    workers = args.workers if args.workers is not None else (os.cpu_count() or 1)
    if args.in_memory:
        workers = 1  # an in-memory store lives in one process
    if workers < 1:
        log.error("--workers must be at least 1")
        return 2
    try:
        sock = _bind(args.host, args.port) if workers == 1 else reuseport_socket(args.host, args.port)
    except OSError as error:
        log.error("cannot listen on %s:%d: %s", args.host, args.port, error)
        return 1
    deliverer = _start_deliverer(args, configs, sock)
    try:
        return _serve(args, sock, workers)
    finally:
        _stop_deliverer(deliverer, sock)


def _serve(args: argparse.Namespace, sock: socket.socket, workers: int) -> int:
    """Serve on the bound socket, in this process or in `workers` forked ones, until stopped."""
    try:
        import uvloop

        runner: Callable[[Coroutine[Any, Any, None]], None] = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency on every supported platform
        runner = asyncio.run
    if workers == 1:
        runner(_run(args, sock))
        return 0
    if args.port == 0:
        args.port = sock.getsockname()[1]

    def run_worker(index: int) -> int:
        # Worker 0 inherits the first socket; the others bind their own, and the kernel spreads connections.
        own = sock if index == 0 else reuseport_socket(args.host, args.port)
        if index != 0:
            sock.close()
        runner(_run(args, own, quiet=index != 0, shared=True))
        return 0

    # Create the store once before forking, so workers never race to create its schema.
    _engine(args)[0].close()
    return supervise(workers, run_worker)

if __name__ == "__main__":
    raise SystemExit(main())
