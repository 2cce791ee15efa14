"""Start-up checks of `openddb serve`: each mistake in how the server was started becomes one `StartupError`,
which the command line prints as one line (`openddb: ...`) with exit code 2, before anything is served."""

from __future__ import annotations

import argparse
import errno
import os
import re
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING

from openddb.server.listen import listen, port_owner
from openddb.storage.sqlite_cipher import EncryptionUnavailable, StoreKeyRefused, driver, remove_files
from openddb.storage.store_keys import StoreKey

if TYPE_CHECKING:
    import socket

    from openddb.storage.postgres import PostgresEngine
    from openddb.storage.sqlite import SQLiteEngine

POSTGRES_INSTALL = "pip install 'psycopg[binary]>=3.1'"


def add_data_dir_option(parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup, *aliases: str,
                        what: str = "the store") -> None:
    """`--data-dir` (and `aliases`), the embedded store's directory, for every command that opens one."""
    parser.add_argument("--data-dir", *aliases, default=os.environ.get("OPENDDB_DATA_DIR", "./openddb-data"),
                        help=f"{what} (default: $OPENDDB_DATA_DIR, else ./openddb-data)")


class StartupError(Exception):
    """A mistake in the server's options or surroundings, worded for the person who started it."""


def check_port(port: int) -> None:
    if not 0 <= port <= 65535:
        raise StartupError(f"--port {port} is out of range: a port is 0 to 65535 (0: any free port)")


def bind(host: str, port: int) -> socket.socket:
    """The server's listening socket (see `server.listen`), or a StartupError saying why there is none."""
    try:
        return listen(host, port)
    except OSError as error:
        where = f"port {port} on {host}"
        if error.errno == errno.EADDRINUSE:
            owner = port_owner(port)
            raise StartupError(f"{where} is already in use" + (f" by {owner}" if owner else "")) from None
        if error.errno == errno.EACCES:
            raise StartupError(f"not allowed to listen on {where} (ports below 1024 need privileges)") from None
        if error.errno == errno.EADDRNOTAVAIL:
            raise StartupError(f"cannot listen on {host}: not an address of this machine") from None
        reason = error.strerror or str(error)
        raise StartupError(f"cannot listen on {where}: {reason}") from None


def check_data_dir(path: str) -> None:
    """The data dir is a directory this process can create files in (made, with its parents, if missing)."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise StartupError(f"the data dir {path} is a file, not a directory")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)  # (owner-only: see SQLiteEngine)
    except OSError as error:
        raise StartupError(f"cannot create the data dir {path}: {_reason(error)}") from None
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        raise StartupError(f"the data dir {path} is not writable: {_reason(error)}") from None
    for name in ("openddb.sqlite3", "openddb.sqlite3-wal", "openddb.lock", "openddb.catalog"):
        store_file = os.path.join(path, name)
        if os.path.exists(store_file) and not os.access(store_file, os.R_OK | os.W_OK):
            raise StartupError(f"the store file {store_file} is not writable by this user")


def open_sqlite(path: str | None, sync: str, reserve_bytes: int | None = None,
                key: StoreKey | None = None) -> SQLiteEngine:
    """The embedded engine on `path` (None: in memory), as a server uses it; `reserve_bytes`: disk space held
    against a full disk (None: the engine's default); `key`: the store is encrypted with it."""
    from openddb.storage.sqlite import SQLiteEngine

    if path is None:
        if key is not None:
            raise StartupError("an encryption key is for the data dir's files: an --in-memory store writes none")
        return SQLiteEngine(None, sync=sync, group_commit=True, shared_reads=True)
    check_data_dir(path)
    try:
        errors = driver(key).error
    except EncryptionUnavailable as error:
        raise StartupError(str(error)) from None
    try:
        if reserve_bytes is None:
            return SQLiteEngine(path, sync=sync, group_commit=True, shared_reads=True, key=key)
        return SQLiteEngine(path, sync=sync, group_commit=True, shared_reads=True, reserve_bytes=reserve_bytes,
                            key=key)
    except (StoreKeyRefused, errors, OSError) as error:
        raise StartupError(f"cannot open the store in {path}: {error}") from None


def remove_sqlite_store(path: str) -> None:
    """Delete the embedded store's database in `path` (closed first), so that opening it again finds it empty."""
    remove_files(os.path.join(path, "openddb.sqlite3"))


def check_engine_urls(url: str | None, replicas: Sequence[str]) -> None:
    """StartupError unless `url` (if given) and each replica's are PostgreSQL URLs: checked before anything else
    of the server is set up, so a mistyped --engine is what is reported first."""
    for given in (*([url] if url else []), *replicas):
        if not given.startswith(("postgresql://", "postgres://")):
            raise StartupError(f"unsupported --engine {hide_password(given)!r} (expected postgresql://...)")


def open_postgres(url: str, replicas: Sequence[str] = (), replica_max_lag: float = 1.0) -> PostgresEngine:
    """The PostgreSQL engine at `url` (with streaming `replicas` for eventually consistent reads); its driver is
    an optional extra."""
    check_engine_urls(url, replicas)
    if replica_max_lag <= 0:
        raise StartupError("--replica-max-lag must be positive")
    try:
        from openddb.storage.postgres import PostgresEngine
    except ImportError:
        raise StartupError(f"--engine postgresql:// needs the PostgreSQL driver, which is not installed: "
                           f"{POSTGRES_INSTALL} (or the postgres extra: pip install 'openddb[postgres]')") from None
    try:
        return PostgresEngine(url, group_commit=True, replicas=replicas, replica_max_lag=replica_max_lag)
    except Exception as error:  # psycopg.OperationalError and friends: say why, without a traceback
        reason = "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
        raise StartupError(f"cannot open the engine {hide_password(url)}: {reason}") from None


def hide_password(url: str) -> str:
    """The URL with any password (in its credentials or its query) shown as ***."""
    url = re.sub(r"(://[^/@:]*:)[^/@]*@", r"\1***@", url)
    return re.sub(r"([?&]password=)[^&]*", r"\1***", url)


def _reason(error: OSError) -> str:
    if isinstance(error, FileExistsError) or error.errno == errno.ENOTDIR:
        return "a part of the path is a file"
    return error.strerror or str(error)
