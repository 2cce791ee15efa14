"""Test control over HTTP, for a server started with `--dev`: empty the store, move the clock, sweep TTL now.

    POST /openddb/reset          the whole store replaced by an empty one (the clock back to real time)
    GET  /openddb/clock          {"now": epoch seconds, "offset": seconds ahead of real time}
    POST /openddb/clock          body {"advance": seconds}: the clock moves ahead, then the background duties run
                                 at once (stream shard rollover and retention; iterators older than 15 minutes
                                 by the new time expire), answers as GET
    POST /openddb/ttl/sweep      every expired item of every table with TTL deleted now: {"deleted": n}

No signature is needed; answers are JSON, errors `{"message": ...}` with 400 (a bad request) or 409 (what the
server's engine cannot do). Without `--dev` these paths do not exist (404, as any other path): a server that is
not a test fixture cannot be emptied by a request. OpenDDB keeps one store for every access key and region (no
namespaces), so a reset is of the whole store. The clock and the store are the serving process's: `--dev`
serves from one process (see `openddb.clock`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from openddb import clock
from openddb.api import ttl
from openddb.storage.base import Engine

if TYPE_CHECKING:
    from openddb.server.passes import ServerState

PREFIX = b"/openddb/"
# A sweep examines this many rows per table in one go: all of them, for the tables tests make.
_SWEEP_ROWS = 1 << 62


class ControlRefused(Exception):
    """A control request the server cannot do (answered 409 with the message)."""


def sweep_now(engine: Engine) -> int:
    """Delete every item expired by the clock now, in every table with TTL enabled; the number deleted. Call it
    with no group of writes open."""
    now = clock.now()
    # The sweep goes on from where its last (bounded) chunk stopped, then starts over at the end of a table: the
    # second pass covers what lies before that point.
    return ttl.sweep(engine, now, _SWEEP_ROWS, lease=False) + ttl.sweep(engine, now, _SWEEP_ROWS, lease=False)


def settle(state: ServerState) -> bool:
    """Commit the group of writes open on the server, if any (its answers go out): False if it could not yet."""
    if state.engine.session.pending:
        state.release()
    return not state.engine.session.pending


def advance(state: ServerState, seconds: float) -> None:
    """Move the clock `seconds` ahead and run the server's background duties by the new time at once."""
    clock.advance(seconds)
    state.dispatcher.run_background()


def clock_state() -> dict[str, float]:
    return {"now": clock.now(), "offset": clock.offset()}


def advance_by(body: bytes) -> float:
    """The seconds `{"advance": seconds}` asks for (ValueError if it is not a number of seconds >= 0)."""
    try:
        request = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        request = None
    seconds = request.get("advance") if isinstance(request, dict) else None
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        raise ValueError('expected a JSON body {"advance": seconds}, seconds a number of at least 0')
    return float(seconds)


class Control:
    """The control endpoints of one server; `reopen(old)` closes the old engine and returns a fresh, empty one
    (raising ControlRefused if the engine cannot be emptied)."""

    def __init__(self, reopen: Callable[[Engine], Engine]) -> None:
        self.reopen = reopen

    def respond(self, state: ServerState, method: bytes, url: bytes, body: bytes) -> tuple[int, bytes]:
        """(status, JSON body) for a request to a path under PREFIX."""
        route = (method, url.split(b"?", 1)[0][len(PREFIX):].rstrip(b"/"))
        action = self._routes().get(route)
        if action is None:
            return 404, orjson.dumps({"message": f"no control endpoint {method.decode()} {url.decode()}"})
        if not settle(state):
            return 503, orjson.dumps({"message": "a group of writes is still being committed: try again"})
        try:
            answer = action(state, body)
        except ValueError as error:
            return 400, orjson.dumps({"message": str(error)})
        except ControlRefused as error:
            return 409, orjson.dumps({"message": str(error)})
        finally:
            state.engine.end_reads()
        return 200, orjson.dumps(answer)

    def _routes(self) -> dict[tuple[bytes, bytes], Callable[[ServerState, bytes], dict[str, Any]]]:
        return {(b"POST", b"reset"): self._reset, (b"GET", b"clock"): _read_clock,
                (b"POST", b"clock"): _advance, (b"POST", b"ttl/sweep"): _sweep}

    def _reset(self, state: ServerState, body: bytes) -> dict[str, Any]:
        old = state.engine
        fresh = self.reopen(old)
        fresh.session.wait = old.session.wait
        fresh.session.optimistic = old.session.optimistic
        state.engine = state.dispatcher.engine = fresh
        clock.set_offset(0)
        return {"reset": True}


def _read_clock(state: ServerState, body: bytes) -> dict[str, Any]:
    return clock_state()


def _advance(state: ServerState, body: bytes) -> dict[str, Any]:
    advance(state, advance_by(body))
    return clock_state()


def _sweep(state: ServerState, body: bytes) -> dict[str, Any]:
    return {"deleted": sweep_now(state.engine)}
