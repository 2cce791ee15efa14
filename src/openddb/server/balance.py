"""Connections spread evenly over a server's workers.

With one listening socket per worker in a SO_REUSEPORT group, the kernel picks a worker by a hash of the
connection's addresses: 32 connections of one client split 12/20 to 15/17, never 16/16, in ten tries (five
starts, two clients each), and the worker holding more connections answers each of them later, which shows in
the tail latency. So the workers share the server's one listening socket (inherited across the fork) and each
accepts only while it holds at most one connection more than the least loaded worker and, of the workers
that do, accepted its last the longest ago: a burst of connections is split within one or two (16/16 from a fresh
start), a client's pool is spread as it grows, and a client that opens one short-lived connection after another
while holding one (a new SDK client per call) reaches every worker in turn, not always the one that holds
nothing else.

The counts sit in a shared memory page (`Shares`, made by the supervisor before it forks), two 8-byte slots per
worker (connections held, when it last accepted one: `time.monotonic_ns`, one clock for every process), written
only by its worker. A worker that stops accepting has nudged every other worker first (a byte on that worker's
pipe), so one that had stopped looks again: at any moment some worker accepts. A worker just forked counts as
holding nothing and never having accepted: the others soon stop accepting until it serves (so a client's first
connections reach every worker, as they did when each worker had a socket of its own); a dead one (the supervisor
marks it) counts as holding everything, so none waits for it.
A worker that should not accept still watches the socket: a connection that no other worker took within
`OVERDUE_SECONDS` (one stuck in a long call, or stopped) it takes anyway, and the next after as long again.
"""

from __future__ import annotations

import asyncio
import contextlib
import mmap
import os
import socket
import ssl
import time
from collections.abc import Callable

ABSENT = 1 << 62  # a worker not serving (dead, or stopping): holds "everything"
_SLOT = 8
OVERDUE_SECONDS = 0.2  # a connection no other worker took within this is taken anyway, one at a time


class Shares:
    """What the workers of one server share to balance their connections: the counts and a pipe per worker."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._page = mmap.mmap(-1, 2 * _SLOT * workers)  # (anonymous and shared: the forked workers see one page)
        self.counts = memoryview(self._page).cast("q")  # [2i]: held by worker i, [2i + 1]: its last accept
        for index in range(workers):
            self.counts[2 * index] = self.counts[2 * index + 1] = ABSENT
        self.pipes = [os.pipe() for _ in range(workers)]
        for read_end, write_end in self.pipes:
            os.set_blocking(read_end, False)
            os.set_blocking(write_end, False)

    def starting(self, index: int) -> None:
        """Worker `index` was just forked: it counts as holding nothing, so connections wait for it to take its
        share (as they queued on its own socket when each worker had one) rather than all going to the others."""
        self.counts[2 * index] = self.counts[2 * index + 1] = 0

    def absent(self, index: int) -> None:
        """Worker `index` stopped (said by the supervisor): the others no longer wait for it to take its share."""
        self.counts[2 * index] = self.counts[2 * index + 1] = ABSENT
        self.nudge_others(index)

    def nudge_others(self, index: int) -> None:
        for other, (_, write_end) in enumerate(self.pipes):
            if other != index:
                with contextlib.suppress(BlockingIOError):  # (a full pipe: that worker will look anyway)
                    os.write(write_end, b"x")

    def fair(self, index: int, held: int, last: int) -> bool:
        """Publish worker `index`'s counts; whether it may accept (see the module's doc). Some worker always may."""
        counts = self.counts
        counts[2 * index], counts[2 * index + 1] = held, last
        slots = counts.tolist()
        least = min(slots[0::2])
        if held > least + 1:
            return False
        return last <= min(when for holds, when in zip(slots[0::2], slots[1::2]) if holds <= least + 1)


class BalancedServer:
    """One worker's accepting on the shared listening socket (see the module's doc). The server tells it of each
    connection lost (`lost`). Stands in for asyncio's Server: `close()`, `wait_closed()`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, shares: Shares, index: int,
                 protocol: Callable[[], asyncio.Protocol], tls: ssl.SSLContext | None) -> None:
        self.loop, self.sock, self.protocol, self.tls = loop, sock, protocol, tls
        self.shares, self.index = shares, index  # (this worker's slot and pipe among the shares)
        self.held = 0  # connections accepted and not yet lost (a TLS handshake may still run)
        self.last = 0  # when this worker last accepted a connection (time.monotonic_ns)
        self.reader: Callable[[], None] | None = None  # what the listening socket's readiness calls now
        self.overdue: asyncio.TimerHandle | None = None
        self.closed = False
        self.tasks: set[asyncio.Task[object]] = set()
        self.nudges = shares.pipes[index][0]

    def start(self) -> None:
        self.loop.add_reader(self.nudges, self._nudged)
        self._watch(self._noticed)
        self.changed()

    def changed(self) -> None:
        """The worker's count moved (or another's did): publish it, and accept or not accordingly."""
        if self.closed:
            return
        if self.shares.fair(self.index, self.held, self.last):
            self._watch(self._acceptable)
        elif self.reader == self._acceptable:
            self._watch(self._noticed)
            self.shares.nudge_others(self.index)  # (after publishing: a nudged worker reads this count)

    def _watch(self, reader: Callable[[], None] | None) -> None:
        if reader == self.reader:
            return
        if self.reader is not None:
            self.loop.remove_reader(self.sock.fileno())
        if reader is not None:
            self.loop.add_reader(self.sock.fileno(), reader)
        self.reader = reader

    def _nudged(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self.nudges, 4096)
        self.changed()

    def _acceptable(self) -> None:
        while self.reader == self._acceptable and self._accept_one():
            pass

    def _noticed(self) -> None:
        """A connection arrived while another worker should take it: if none has within OVERDUE_SECONDS (it is
        stuck in a long call, or stopped), take it anyway."""
        self._watch(None)
        self.overdue = self.loop.call_later(OVERDUE_SECONDS, self._overdue)

    def _overdue(self) -> None:
        self.overdue = None
        if self.closed or self.reader is not None:
            return
        self._accept_one()  # (one only: a worker merely slow to be scheduled keeps the rest; nothing when another
        # worker took it meanwhile)
        if self.reader is None and self.overdue is None:
            self._watch(self._noticed)

    def _accept_one(self) -> bool:
        """Accept a connection if one waits; False if none did, or accepting failed."""
        try:
            conn, _ = self.sock.accept()
        except (BlockingIOError, InterruptedError):
            return False  # (another worker took it)
        except ConnectionAbortedError:
            return True
        except OSError:  # (out of file descriptors or memory: the connection stays queued; as asyncio's own
            self._watch(None)  # server does, try again in a second)
            if self.overdue is not None:
                self.overdue.cancel()
            self.overdue = self.loop.call_later(1.0, self._overdue)
            return False
        conn.setblocking(False)
        if conn.family in (socket.AF_INET, socket.AF_INET6):
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.held += 1
        self.last = time.monotonic_ns()
        task = self.loop.create_task(self._connect(conn))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        self.changed()
        return True

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
        self._watch(None)
        if self.overdue is not None:
            self.overdue.cancel()
        self.loop.remove_reader(self.nudges)
        self.closed = True
        self.shares.absent(self.index)  # (which wakes the others)

    async def wait_closed(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
