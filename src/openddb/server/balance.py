"""Connections spread evenly over a server's workers.

With one listening socket per worker in a SO_REUSEPORT group, the kernel picks a worker by a hash of the
connection's addresses: 32 connections of one client split 13/19 or 12/20 as often as 16/16 (measured: five
starts, two clients each), and the worker holding more connections answers each of them later, which shows in
the tail latency. So the workers share the server's one listening socket (inherited across the fork) and each
accepts only while it holds no more connections than the least loaded other worker: the connection counts
differ by at most one, whatever order clients connect in, and a client's pool is spread as it grows.

The counts sit in a shared memory page (`Shares`, made by the supervisor before it forks), one 8-byte slot per
worker, written only by its worker. A worker that stops accepting (it holds more than another) has nudged every
other worker first (a byte on that worker's pipe), so one that had stopped looks again: at any moment the least
loaded worker accepts. A worker not serving (not started yet, or dead: the supervisor marks it) counts as
holding everything, so connections never wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import mmap
import os
import socket
import ssl
from collections.abc import Callable

ABSENT = 1 << 62  # a worker not serving: holds "everything"
_SLOT = 8


class Shares:
    """What the workers of one server share to balance their connections: the counts and a pipe per worker."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._page = mmap.mmap(-1, _SLOT * workers)  # (anonymous and shared: the forked workers see one page)
        self.counts = memoryview(self._page).cast("q")
        for index in range(workers):
            self.counts[index] = ABSENT
        self.pipes = [os.pipe() for _ in range(workers)]
        for read_end, write_end in self.pipes:
            os.set_blocking(read_end, False)
            os.set_blocking(write_end, False)

    def absent(self, index: int) -> None:
        """Worker `index` stopped (said by the supervisor): the others no longer wait for it to take its share."""
        self.counts[index] = ABSENT
        self.nudge_others(index)

    def nudge_others(self, index: int) -> None:
        for other, (_, write_end) in enumerate(self.pipes):
            if other != index:
                with contextlib.suppress(BlockingIOError):  # (a full pipe: that worker will look anyway)
                    os.write(write_end, b"x")

    def least_of_others(self, index: int) -> int:
        counts = self.counts
        return min((counts[other] for other in range(self.workers) if other != index), default=ABSENT)


class BalancedServer:
    """One worker's accepting on the shared listening socket (see the module's doc). The server tells it of each
    connection lost (`lost`). Stands in for asyncio's Server: `close()`, `wait_closed()`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, shares: Shares, index: int,
                 protocol: Callable[[], asyncio.Protocol], tls: ssl.SSLContext | None) -> None:
        self.loop = loop
        self.sock = sock
        self.shares = shares
        self.index = index
        self.protocol = protocol
        self.tls = tls
        self.held = 0  # connections accepted and not yet lost (a TLS handshake may still run)
        self.accepting = False
        self.closed = False
        self.tasks: set[asyncio.Task[object]] = set()
        self.nudges = shares.pipes[index][0]

    def start(self) -> None:
        self.loop.add_reader(self.nudges, self._nudged)
        self.changed()

    def changed(self) -> None:
        """The worker's count moved (or another's did): publish it, and accept or not accordingly."""
        if self.closed:
            return
        mine = self.held
        self.shares.counts[self.index] = mine
        fair = mine <= self.shares.least_of_others(self.index)
        if fair and not self.accepting:
            self.loop.add_reader(self.sock.fileno(), self._acceptable)
            self.accepting = True
        elif not fair and self.accepting:
            self._stop_accepting()
            self.shares.nudge_others(self.index)  # (after publishing: a nudged worker reads this count)

    def _stop_accepting(self) -> None:
        if self.accepting:
            self.loop.remove_reader(self.sock.fileno())
            self.accepting = False

    def _nudged(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self.nudges, 4096)
        self.changed()

    def _acceptable(self) -> None:
        while self.accepting:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return  # (another worker took it)
            except ConnectionAbortedError:
                continue
            except OSError:  # (out of file descriptors or memory: the connection stays queued; as asyncio's
                self._stop_accepting()  # own server does, try again in a second)
                self.loop.call_later(1.0, self.changed)
                return
            conn.setblocking(False)
            if conn.family in (socket.AF_INET, socket.AF_INET6):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.held += 1
            task = self.loop.create_task(self._connect(conn))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            self.changed()

    async def _connect(self, conn: socket.socket) -> object:
        try:
            return await self.loop.connect_accepted_socket(self.protocol, conn, ssl=self.tls)
        except Exception:  # (the client went away, or its TLS handshake failed: no connection was made)
            conn.close()
            self.lost()
            return None

    def lost(self) -> None:
        """A connection accepted here is gone."""
        self.held -= 1
        self.changed()

    def close(self) -> None:
        """Stop accepting; the connections stay (the server closes them as it shuts down)."""
        self._stop_accepting()
        self.loop.remove_reader(self.nudges)
        self.closed = True
        self.shares.counts[self.index] = ABSENT
        self.shares.nudge_others(self.index)

    async def wait_closed(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
