"""Listening sockets: a port belongs to one server; its own worker processes share it, nobody else does.

A server binds one socket, without SO_REUSEPORT, which fails if anything already listens on the port; its
workers inherit that socket across the fork and accept from it (server/balance.py). (They once each bound a
socket of their own in a SO_REUSEPORT group, which any socket of the same user with that option may join,
another server's too; and the kernel's hash split a client's connections unevenly between the workers.)
Start-ups serialize on a lock file around the bind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import socket
import sys
import tempfile
from collections.abc import Iterator

_LISTEN_STATE = "0A"  # TCP_LISTEN in /proc/net/tcp


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, refused (OSError EADDRINUSE) if any other socket listens there."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # connections of a past server in TIME_WAIT
        with _startup_lock(port):
            sock.bind((host, port))
            sock.listen(1024)
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def endpoint_of(sock: socket.socket) -> str:
    """The URL a client on this machine reaches the listening socket at (a wildcard address as loopback)."""
    host, port = sock.getsockname()[:2]
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@contextlib.contextmanager
def _startup_lock(port: int) -> Iterator[None]:
    """Hold the machine-wide lock of openddb start-ups (one file for every port: nothing is left per port).
    Best effort: where the file cannot be opened, go on without it. Port 0 asks the kernel for a free port, which
    it never hands to two sockets."""
    fd = -1
    if port != 0:
        with contextlib.suppress(OSError):
            fd = os.open(os.path.join(tempfile.gettempdir(), "openddb-startup.lock"), os.O_RDONLY | os.O_CREAT,
                         0o644)
    try:
        if fd >= 0:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fd >= 0:
            os.close(fd)  # (drops the lock)


def port_owner(port: int) -> str | None:
    """Who listens on the TCP port, as far as this process can see (Linux' /proc): another openddb server with
    its pid and data dir, or another program's pid and command line; None if it cannot tell."""
    if not sys.platform.startswith("linux"):
        return None
    inodes = _listening_inodes(port)
    pid = _pid_holding(inodes) if inodes else None
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = [part.decode(errors="replace") for part in handle.read().split(b"\0") if part]
    except OSError:
        return f"pid {pid}"
    if "serve" in argv and any("openddb" in part for part in argv[:3]):
        return f"another openddb server (pid {pid}, data: {_data_of(pid, argv)})"
    command = shlex.join(argv)
    return f"pid {pid} ({command[:100]}{'...' if len(command) > 100 else ''})"


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == _LISTEN_STATE and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _pid_holding(inodes: set[str]) -> int | None:
    """The lowest pid with one of the sockets open (a server's supervisor comes before its workers)."""
    links = {f"socket:[{inode}]" for inode in inodes}
    for pid in sorted(int(name) for name in os.listdir("/proc") if name.isdigit()):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in links:
                    return pid
    return None


def _data_of(pid: int, argv: list[str]) -> str:
    """The other server's store, from its command line (its options or DynamoDB Local's), else its environment."""
    for index, part in enumerate(argv):
        if part in ("--in-memory", "-inMemory"):
            return "in memory"
        if part.startswith("--data-dir="):
            return _absolute(pid, part.split("=", 1)[1])
        if part in ("--data-dir", "-dbPath") and index + 1 < len(argv):
            return _absolute(pid, argv[index + 1])
        if part.startswith("--engine"):
            return "a PostgreSQL engine"
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = dict(entry.split(b"=", 1) for entry in handle.read().split(b"\0") if b"=" in entry)
    except OSError:
        environ = {}
    if b"OPENDDB_ENGINE" in environ:
        return "a PostgreSQL engine"
    return _absolute(pid, environ.get(b"OPENDDB_DATA_DIR", b"./openddb-data").decode(errors="replace"))


def _absolute(pid: int, path: str) -> str:
    if os.path.isabs(path):
        return path
    try:
        return os.path.normpath(os.path.join(os.readlink(f"/proc/{pid}/cwd"), path))
    except OSError:
        return path
