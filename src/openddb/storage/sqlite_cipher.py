"""Encryption at rest for the embedded store: its SQLite files opened through SQLCipher (the `encryption` extra).

SQLCipher encrypts every page of a database, in the database file, in its write-ahead log and in any temporary
file, with AES-256 (CBC, a random IV per page write) and authenticates it with HMAC-SHA512: items, keys, index
entries, stream and recovery records, the catalog and the identity store (credentials) are all rows of the store's
two files (`openddb.sqlite3`, `openddb-backups.sqlite3`), so none of it reaches the disk in plaintext. The engine
sees the same DB-API as the standard library's sqlite3 (SQLCipher is SQLite with a codec), so a `Driver` says
which module a store's connections come from and which errors it raises; the rest of the engine is unchanged.

A wrong key (or an encrypted store opened without one, or a plaintext store opened with one) is found when the
file is opened and refused with a message that says which (`StoreKeyRefused`), before anything is written.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from openddb.storage.store_keys import StoreKey

EXTRA = "pip install 'openddb[encryption]'"
_PLAIN_HEADER = b"SQLite format 3\0"  # the first 16 bytes of every plaintext SQLite database file
_SQLITE_NOTADB = 26  # "file is not a database": what a wrong key, or none, meets on page 1


class EncryptionUnavailable(Exception):
    """A key was given but SQLCipher is not installed."""


class StoreKeyRefused(Exception):
    """The store's file cannot be opened with the key given (or without one): the message says why."""


@dataclass(frozen=True)
class Driver:
    """Where a store's connections come from: the standard library's sqlite3, or SQLCipher's module with the
    store's key. `error` and `operational_error` are that module's exception classes (SQLCipher's are its own)."""

    connect: Callable[..., Any]
    error: type[Exception]
    operational_error: type[Exception]
    key: StoreKey | None = None

    @property
    def encrypted(self) -> bool:
        return self.key is not None

    def open(self, path: str, *, read_only: bool = False, **options: Any) -> sqlite3.Connection:
        """A connection to the database file `path` (keyed, and checked to open with the key, or without one);
        StoreKeyRefused if it does not. SQLCipher's connection has the standard library's API, so it is typed as
        one."""
        target, uri = (f"file:{path}?mode=ro", True) if read_only else (path, False)
        db = cast(sqlite3.Connection, self.connect(target, uri=uri, **options))
        try:
            if self.key is not None:
                # SQLCipher's own log of a failed page check would go to stderr: the refusal says it better.
                db.execute("PRAGMA cipher_log_level = NONE")
                db.execute(f"PRAGMA key = {self.key.literal()}")
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()  # (reads page 1: a wrong key fails here)
        except self.error as error:
            db.close()
            if getattr(error, "sqlite_errorcode", None) != _SQLITE_NOTADB:
                raise
            raise StoreKeyRefused(_refusal(path, self.key is not None, error)) from None
        except BaseException:
            db.close()
            raise
        return db

    def attach(self, db: sqlite3.Connection, path: str, schema: str) -> None:
        """ATTACH the database file `path` to `db` as `schema`, with the store's key."""
        if self.key is None:
            db.execute(f"ATTACH DATABASE ? AS {schema}", (path,))
        else:
            db.execute(f"ATTACH DATABASE ? AS {schema} KEY ?", (path, self.key.value))


PLAIN = Driver(sqlite3.connect, sqlite3.Error, sqlite3.OperationalError)


def driver(key: StoreKey | None, *, cipher: bool = False) -> Driver:
    """The driver for a store with `key` (None: plaintext, through the standard library unless `cipher`);
    EncryptionUnavailable if SQLCipher is needed and missing."""
    if key is None and not cipher:
        return PLAIN
    try:
        from sqlcipher3 import dbapi2  # (the `encryption` extra: loaded only for a store with a key)
    except ImportError:
        raise EncryptionUnavailable(f"encryption at rest needs SQLCipher, which is not installed: {EXTRA}") \
            from None
    return Driver(dbapi2.connect, dbapi2.Error, dbapi2.OperationalError, key)


def _refusal(path: str, keyed: bool, error: Exception) -> str:
    """Why the file `path` does not open with the key (or without one), from its first bytes: a plaintext database
    with a key, an encrypted one (random bytes) without, or another key's.

    The header is read only once the file failed to open, never beside a working connection: closing a descriptor
    of a database file drops every POSIX lock the process holds on it, SQLite's included (a connection of this
    process that opened it, the checkpointer's or the backups', would lose its locks)."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(len(_PLAIN_HEADER))
    except OSError:
        header = b""
    if keyed and header == _PLAIN_HEADER:
        return (f"{path} is not encrypted: open it without a key, or encrypt it first (`openddb rekey` with "
                f"--new-key-file; see docs/ENCRYPTION.md)")
    if not keyed:
        return (f"{path} is encrypted (or is not a SQLite database): give its key with --encryption-key-file FILE, "
                "--encryption-key-command COMMAND or $OPENDDB_ENCRYPTION_KEY")
    return f"the encryption key does not open {path}: it is another key's store, or not a store ({error})"


def remove_files(path: str, *, side_files_only: bool = False) -> None:
    """A database file and its side files (write-ahead log, shared memory index), gone (`side_files_only`: the
    side files alone)."""
    for name in (path + "-wal", path + "-shm") if side_files_only else (path, path + "-wal", path + "-shm"):
        if os.path.exists(name):
            os.remove(name)
