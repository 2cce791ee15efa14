"""`openddb backup`, `openddb restore` and `openddb rekey`: a whole embedded store copied to or from a directory,
or written again under another encryption key.

The copy is made with SQLite's online backup API, file by file (the store, and the file of its on-demand backups
if it has one), each in one step, which reads one snapshot of the source: in WAL mode a running server's workers
go on reading and writing meanwhile, and the copy holds every write committed before it began (a write the copy
overlaps is in it whole or not at all). The copy is a data directory: `openddb serve --data-dir COPY` serves it
as it is. A restore replaces a store's files the same way, and only while no server has the store open (the
checkpoint duty's lock, which a serving process holds, tells). An encrypted store is copied with its key, into an
encrypted copy with the same key (the pages go across as they are read, decrypted and encrypted again).

A rekey (key rotation; or encrypting a plaintext store, or decrypting one) exports each file whole with SQLCipher's
`sqlcipher_export` into a new file beside it, made durable, then renamed over the old one: a crash at any point
leaves the old file or the new one, never a mix. The server must be stopped (the rename would pull the file from
under it). A file that opens with the new key already is left as it is, so the same command run again after an
interruption finishes the job."""

from __future__ import annotations

import fcntl
import os

from openddb.storage.sqlite_cipher import StoreKeyRefused, driver, remove_files
from openddb.storage.store_keys import StoreKey

STORE_FILES = ("openddb.sqlite3", "openddb-backups.sqlite3")
_SERVING_LOCK = "openddb.sqlite3.checkpoint-lock"  # held by a serving process's checkpointer (see sqlite.py)


class StoreCopyError(Exception):
    """A copy that cannot be made: the message says why, for the command line."""


def _copy_file(source: str, target: str, key: StoreKey | None) -> None:
    """One SQLite file copied, consistently, into `target` (replaced if it exists)."""
    files = driver(key)
    origin = files.open(source, read_only=True)
    try:
        os.close(os.open(target, os.O_RDWR | os.O_CREAT, 0o600))
        copy = files.open(target)
        try:
            origin.backup(copy)  # (all pages in one step: one snapshot of the source)
            copy.execute("PRAGMA journal_mode = WAL")
        finally:
            copy.close()
    finally:
        origin.close()


def _serving(data_dir: str) -> bool:
    """Whether a server has the store at `data_dir` open."""
    path = os.path.join(data_dir, _SERVING_LOCK)
    if not os.path.exists(path):
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # (closing drops a lock taken here)
    return False


def backup_store(data_dir: str, target: str, key: StoreKey | None = None) -> list[str]:
    """Copy the store at `data_dir` into the directory `target` (made, mode 0700, if missing); the files copied."""
    if not os.path.exists(os.path.join(data_dir, STORE_FILES[0])):
        raise StoreCopyError(f"no store at {data_dir} (no {STORE_FILES[0]})")
    os.makedirs(target, mode=0o700, exist_ok=True)
    if os.path.exists(os.path.join(target, STORE_FILES[0])):
        raise StoreCopyError(f"{target} already holds a store: copy into a new directory")
    copied = []
    for name in STORE_FILES:
        if os.path.exists(os.path.join(data_dir, name)):
            _copy_file(os.path.join(data_dir, name), os.path.join(target, name), key)
            copied.append(name)
    return copied


def restore_store(source: str, data_dir: str, key: StoreKey | None = None) -> list[str]:
    """Replace the store at `data_dir` (made if missing) with the copy in `source`; refused while a server has it
    open. The files restored."""
    if not os.path.exists(os.path.join(source, STORE_FILES[0])):
        raise StoreCopyError(f"no store copy at {source} (no {STORE_FILES[0]})")
    os.makedirs(data_dir, mode=0o700, exist_ok=True)
    if _serving(data_dir):
        raise StoreCopyError(f"a server has the store at {data_dir} open: stop it first")
    restored = []
    for name in STORE_FILES:
        target = os.path.join(data_dir, name)
        if os.path.exists(os.path.join(source, name)):
            _copy_file(os.path.join(source, name), target, key)
            restored.append(name)
        else:  # (the copy had no on-demand backups: neither has the store now)
            remove_files(target)
    return restored


def rekey_store(data_dir: str, old: StoreKey | None, new: StoreKey | None) -> list[str]:
    """The store at `data_dir` (stopped) written again under the key `new` (None: plaintext) from `old` (None:
    plaintext); the files rewritten (those that opened with `new` already are not)."""
    if not os.path.exists(os.path.join(data_dir, STORE_FILES[0])):
        raise StoreCopyError(f"no store at {data_dir} (no {STORE_FILES[0]})")
    if _serving(data_dir):
        raise StoreCopyError(f"a server has the store at {data_dir} open: stop it first")
    rewritten = []
    for name in STORE_FILES:
        path = os.path.join(data_dir, name)
        if os.path.exists(path) and not _opens(path, new):
            _export(path, old, new)
            rewritten.append(name)
    return rewritten


def _opens(path: str, key: StoreKey | None) -> bool:
    try:
        driver(key, cipher=True).open(path).close()
    except StoreKeyRefused:
        return False
    return True


def _export(path: str, old: StoreKey | None, new: StoreKey | None) -> None:
    """One file exported under the key `new` beside itself, then put in its place."""
    files = driver(old, cipher=True)
    temporary = path + ".rekey"
    remove_files(temporary)  # (what an interrupted rekey left)
    os.close(os.open(temporary, os.O_RDWR | os.O_CREAT, 0o600))
    source = files.open(path, isolation_level=None)
    try:
        source.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # (every commit in the file: its log is left empty)
        source.execute("ATTACH DATABASE ? AS rekeyed KEY ?", (temporary, "" if new is None else new.value))
        source.execute("SELECT sqlcipher_export('rekeyed')")
        source.execute("DETACH DATABASE rekeyed")
    finally:
        source.close()
    fd = os.open(temporary, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    remove_files(path, side_files_only=True)  # (the old file's side files: empty, but not the new file's)
    directory = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
