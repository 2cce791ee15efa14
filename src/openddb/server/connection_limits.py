"""What a client may hold of the server without sending a whole request: time, connections, buffered bytes.

Without these, clients that never finish a request (or never send one) could keep a worker's memory and file
descriptors for ever. One sweep a second (`Watch.sweep`, run by the server's event loop) closes:

* a connection whose request has been arriving for longer than `request_seconds` (its head and body: a slow or
  stalled client), answered 408 first;
* a keep-alive connection idle for longer than `idle_seconds`. DynamoDB closes idle connections after about a
  minute (aws/aws-sdk-java issue 1365, 2017: "will not respect any longer idle ... than 60s"; feast-dev/feast PR
  5167, 2025, measured "roughly 90s"); SDKs notice a closed pooled connection and open another.

The bytes of requests still arriving are counted for the whole worker (`Budget`): past `buffered_bytes`, a
connection that receives more stops being read until others finish or are closed, so half-sent bodies cannot
grow a worker without bound (each body is further bounded by the 16 MB request limit). Past `max_connections`
open connections, a new one first makes room by closing the longest-idle connection, or is closed at once when
every connection is busy. Requests waiting on the server (a held answer, a deferred write) are never timed out.

How DynamoDB answers a request that arrives too slowly is not documented: 408 and a close is a best guess (the
answer HTTP front ends commonly give).
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from typing import Protocol

SWEEP_SECONDS = 1.0


@dataclass(frozen=True)
class ConnectionLimits:
    request_seconds: float = 60.0  # a request's head and body arrive within this, from its first byte
    idle_seconds: float = 60.0  # a keep-alive connection with no request for this long is closed
    max_connections: int = 0  # open connections per worker; 0: from the file-descriptor limit (`connection_cap`)
    buffered_bytes: int = 256 * 1024 * 1024  # bytes of requests still arriving, per worker


class Watched(Protocol):
    """A connection as the sweep sees it."""

    mark: int  # the sweep count when it last began or finished receiving a request (or was opened)

    def receiving(self) -> bool: ...  # part of a request has arrived, not all of it

    def idle(self) -> bool: ...  # no request arriving, none being answered

    def time_out(self) -> None: ...  # answer 408 and close

    def close(self) -> None: ...


class Budget:
    """The bytes of unfinished requests of one worker (`held`, which the connections add to as bytes arrive), and
    the connections waiting for room to read more."""

    __slots__ = ("held", "limit", "waiting")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self.waiting: list[Resumable] = []

    def give_back(self, size: int) -> None:
        """`size` bytes are no longer held; connections that waited read again while there is room."""
        self.held -= size
        while self.waiting and self.held <= self.limit:
            self.waiting.pop(0).resume_reading_budget()


class Resumable(Protocol):
    def resume_reading_budget(self) -> None: ...


class Watch:
    """The sweep over one worker's connections (see the module's doc)."""

    __slots__ = ("cap", "count", "limits")

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.count = 0  # sweeps so far: connections mark their moments with it, no clock read per request
        self.cap = limits.max_connections or connection_cap()

    def sweep(self, connections: set[Watched]) -> int:
        """Close the connections past their time; the number closed."""
        self.count += 1
        request_sweeps = self.limits.request_seconds / SWEEP_SECONDS
        idle_sweeps = self.limits.idle_seconds / SWEEP_SECONDS
        closed = 0
        for connection in list(connections):
            # (a mark taken just after a sweep is up to one sweep older than it says: `>` keeps it fair)
            age = self.count - connection.mark - 1
            if connection.receiving():
                if age >= request_sweeps:
                    connection.time_out()
                    closed += 1
            elif connection.idle() and age >= idle_sweeps:
                connection.close()
                closed += 1
        return closed

    def admit(self, connections: set[Watched]) -> bool:
        """Room for one more connection: True if there is (the longest-idle one closed to make it, if needed)."""
        if len(connections) < self.cap:
            return True
        idle = [connection for connection in connections if connection.idle()]
        if not idle:
            return False
        min(idle, key=lambda connection: connection.mark).close()
        return True


def raise_file_limit() -> int:
    """Raise this process's soft limit of open files to its hard limit (connections are files); the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


# Descriptors kept for the store's files, the listening socket, logs and the engine's own needs.
_RESERVED_FILES = 64


def connection_cap() -> int:
    """Connections a worker accepts by default: what its open-files limit leaves after the store's files."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 16
    return max(16, soft - _RESERVED_FILES)
