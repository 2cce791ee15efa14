"""An OpenDDB server inside the calling process, on a thread of its own.

The server runs its own event loop on a daemon thread and installs no signal handlers, so it can be started from
any thread, and from code already running inside an event loop (its clients talk to it over HTTP, never through
the caller's loop). Its store is in memory unless a data dir is given. `reset()` swaps in a fresh, empty store:
the connections of the old one are closed (clients reconnect on their next request) and nothing of it remains
(tables, items, streams, TTL settings, quotas used).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from openddb import clock
from openddb.advisor import report
from openddb.advisor.listener import Advisor
from openddb.advisor.settings import Settings
from openddb.advisor.state import ServerState as AdvisedState
from openddb.server.listen import endpoint_of
from openddb.startup import bind, open_sqlite

if TYPE_CHECKING:
    from openddb.server.http import HttpProtocol
    from openddb.server.passes import ServerState

T = TypeVar("T")
_START_SECONDS = 30
_CLOSE_SECONDS = 10  # how long a closing store waits for a request still in flight


class _Store:
    """One store with its dispatcher and the server state its connections share."""

    def __init__(self, data_dir: str | None, advisor: Advisor | None = None) -> None:
        from openddb.api.dispatch import Dispatcher
        from openddb.server.passes import BACKGROUND_SECONDS, ServerState

        self.engine = open_sqlite(data_dir, "normal")
        self.dispatcher = Dispatcher(self.engine)
        self.state = ServerState(self.dispatcher, advisor=advisor)
        self.state.background = asyncio.get_running_loop().call_later(BACKGROUND_SECONDS, self.state.run_background)
        self.used = False  # a client has connected since it opened

    def connection(self) -> HttpProtocol:
        from openddb.server.http import HttpProtocol

        self.used = True
        return HttpProtocol(self.dispatcher, self.state)

    async def close(self) -> None:
        """Close every connection (once its request in flight, if any, is answered), then the engine."""
        await close_connections(self.state, _CLOSE_SECONDS)
        self.engine.close()


async def close_connections(state: ServerState, timeout: float) -> None:
    """Stop the background duties and close the connections as they become idle, waiting up to `timeout`."""
    loop = asyncio.get_running_loop()
    state.closing = True
    if state.background is not None:
        state.background.cancel()
    for connection in list(state.connections):
        connection.close_if_idle()
    deadline = loop.time() + timeout
    passes = 0
    while state.connections and loop.time() < deadline:
        # An idle connection is gone a pass or two after its close: a reset is that quick; one still answering
        # a request is waited for without spinning.
        await asyncio.sleep(0 if passes < 8 else 0.001)
        passes += 1


class Server:
    """`with Server() as endpoint:` (or `start()` ... `stop()`): a server on `host`:`port` (0: a free port), in
    memory, or durable in `data_dir`."""

    def __init__(self, data_dir: str | None = None, *, host: str = "127.0.0.1", port: int = 0,
                 advisor: Settings | None = None) -> None:
        self.data_dir = data_dir
        # The standards advisor with these settings (None: off): it observes every store of the server's life, so
        # its report covers a whole test session across resets (docs/ADVISOR.md).
        self.advisor = None if advisor is None else Advisor(advisor, lambda: self._current().engine)
        self.host = host
        self.port = port
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._store: _Store | None = None
        self._endpoint: str | None = None

    @property
    def endpoint(self) -> str:
        """The URL clients use (`http://127.0.0.1:PORT`)."""
        if self._endpoint is None:
            raise RuntimeError("the server is not running: call start() first")
        return self._endpoint

    def start(self) -> str:
        """Start serving and return the endpoint; raises `openddb.startup.StartupError` if it cannot (a busy port,
        a bad data dir)."""
        if self._thread is not None:
            raise RuntimeError("the server is running already")
        started: concurrent.futures.Future[str] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, args=(started,), name="openddb-server", daemon=True)
        self._thread.start()
        try:
            self._endpoint = started.result(timeout=_START_SECONDS)
        except BaseException:
            self._thread.join(_START_SECONDS)
            self._thread = None
            raise
        return self._endpoint

    def stop(self) -> None:
        """Stop serving (requests in flight are answered first) and close the store; a server not running is left
        as it is."""
        thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None or loop is None or stop is None:
            return
        loop.call_soon_threadsafe(stop.set)
        thread.join()
        self._thread = self._loop = self._stop = None
        self._endpoint = None

    def reset(self) -> None:
        """Replace the store with a fresh, empty one (in memory only: a data dir's store is kept as it is)."""
        if self.data_dir is not None:
            raise RuntimeError("reset() empties an in-memory store; this server keeps its data in a data dir")
        loop = self._loop
        if loop is None:
            raise RuntimeError("the server is not running: call start() first")
        asyncio.run_coroutine_threadsafe(self._reset(), loop).result()

    def advance_clock(self, seconds: float) -> float:
        """Move the server's clock `seconds` ahead (TTL expiry, stream retention, iterator expiry follow; stream
        upkeep runs at once) and return how far it is ahead of real time. The clock is this process's
        (`openddb.clock`); a reset puts it back to real time."""
        from openddb.server import control

        self._on_loop(lambda state: control.advance(state, seconds))
        return clock.offset()

    def advisor_report(self, table: str | None = None) -> dict[str, Any]:
        """The advisor's report (as GET /openddb/advisor answers it); RuntimeError if the server has no advisor."""
        advisor = self.advisor
        if advisor is None:
            raise RuntimeError("the server was started without an advisor (Server(advisor=Settings()))")
        return self._on_loop(lambda state: report.build(advisor, AdvisedState(state.dispatcher),
                                                         report.Scope(table)))

    def sweep_ttl(self) -> int:
        """Delete every item expired by the server's clock now; the number deleted."""
        from openddb.server import control

        return self._on_loop(lambda state: control.sweep_now(state.engine))

    def _on_loop(self, action: Callable[[ServerState], T]) -> T:
        """Run `action` on the server's event loop, once no group of writes is open."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("the server is not running: call start() first")

        from openddb.server import control

        async def run() -> T:
            state = self._current().state
            while not control.settle(state):
                await asyncio.sleep(0.001)
            try:
                return action(state)
            finally:
                state.engine.end_reads()

        return asyncio.run_coroutine_threadsafe(run(), loop).result()

    async def _reset(self) -> None:
        clock.set_offset(0)
        old = self._store
        if old is None or not old.used:
            return  # nothing can have changed it
        self._store = _Store(None, self.advisor)
        await old.close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    def _run(self, started: concurrent.futures.Future[str]) -> None:
        loop = _new_loop()
        try:
            loop.run_until_complete(self._serve(started))
        except BaseException as error:
            if not started.done():
                started.set_exception(error)
        finally:
            loop.close()

    async def _serve(self, started: concurrent.futures.Future[str]) -> None:
        sock = bind(self.host, self.port)
        loop = asyncio.get_running_loop()
        self._loop, self._stop = loop, asyncio.Event()
        try:
            self._store = _Store(self.data_dir, self.advisor)
            server = await loop.create_server(lambda: self._current().connection(), sock=sock, backlog=1024)
        except BaseException:
            sock.close()
            raise
        started.set_result(endpoint_of(sock))
        await self._stop.wait()
        server.close()
        await self._current().close()
        await server.wait_closed()

    def _current(self) -> _Store:
        assert self._store is not None
        return self._store


def server(data_dir: str | None = None, *, host: str = "127.0.0.1", port: int = 0) -> Server:
    """`with openddb.testing.server() as endpoint:` serves an empty in-memory store (or `data_dir`'s) for the
    block; see `Server`."""
    return Server(data_dir, host=host, port=port)


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on every supported platform
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
