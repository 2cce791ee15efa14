"""The embedded engine: one SQLite database (stdlib sqlite3) in WAL mode.

Layout: `tables` holds each table's description as JSON; `items` holds every item of every table under
`(tid, h, pk, sk)`, a WITHOUT ROWID B-tree, so a Query is a range read on one `(tid, h, pk)` prefix and a Scan
walks one table's rows in hash order.

Several worker processes may share the store. Writers serialize on a flock (`openddb.lock`) around each write
transaction, and every committed DDL bumps a counter in a memory-mapped file (`openddb.catalog`), so a worker
notices another's CreateTable/DeleteTable on its next request at the cost of an 8-byte compare.

Group commit: the writes of one event-loop pass share one transaction, committed by `flush`. A lone worker
holds the writer lock for the pass. Workers sharing the store write optimistically instead: each write reads the
committed row, applies its change into an in-memory overlay, and `flush` takes the lock only to check that every
row read is still as it was, write the overlay and commit; if another worker changed one of those rows, nothing
of the group is written and the server runs its requests again under the lock (`WriteConflict`). The lock is
then held for the SQL alone, so the workers' request handling runs in parallel.

Reads (with `shared_reads`, as the server opens it) share one read transaction per event-loop pass, renewed
whenever any worker has committed since (a second shared counter), so a read always includes every acknowledged
write without paying SQLite's read-lock set-up per statement.

Durability: WAL with synchronous=NORMAL. A committed transaction is in the WAL file before `write` returns, so
it survives a kill -9 of the server; `--sync full` also fsyncs every commit, for power loss.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import NamedTuple

import orjson

from openddb.errors import DynamoDBError, ResourceInUseException
from openddb.model import Item
from openddb.model.schema import TableMeta
from openddb.model.values import item_size
from openddb.storage.base import (
    TOKEN_LIFETIME,
    CatalogChanged,
    Engine,
    EngineBusy,
    Origin,
    RequestToken,
    Row,
    SortRange,
    StorageKey,
    TokenInUse,
    WriteConflict,
    WriteOp,
    WriteResult,
    add_sort_clauses,
    charged_sizes,
    is_stored_version,
)
from openddb.storage.sqlite_indexes import INDEX_SCHEMA, SQLiteIndexes, blob
from openddb.storage.sqlite_streams import STREAM_SCHEMA, SQLiteStreams


class _WriterLock:
    """A cross-process writer lock (flock) taken around every write transaction.

    SQLite's own busy handler sleeps 1, 2, 5, 10... ms between retries, which stalls a worker's whole event
    loop; a blocking flock is woken by the kernel the moment the other process commits."""

    def __init__(self, path: str | None) -> None:
        self._path = path
        self._fd = -1 if path is None else os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._probe = -1

    def wait_free(self) -> None:
        """Block until no other process holds the lock (for a helper thread). It takes the lock and drops it at
        once through a second open file description: flock belongs to the description, so the lock the event
        loop takes through `_fd` is never one this thread acquired."""
        if self._path is None:
            return
        if self._probe < 0:
            self._probe = os.open(self._path, os.O_RDWR)
        fcntl.flock(self._probe, fcntl.LOCK_EX)
        fcntl.flock(self._probe, fcntl.LOCK_UN)

    def acquire(self, wait: bool = True) -> bool:
        """Take the lock; with wait=False return False at once if another process holds it."""
        if self._fd >= 0:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
        return True

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        for fd in (self._fd, self._probe):
            if fd >= 0:
                os.close(fd)
        self._fd = self._probe = -1


class _CatalogSignal:
    """Two 8-byte counters in a shared memory-mapped file: one bumped after every committed DDL, one after every
    committed write.

    Reading them costs a memory compare, so every request can check whether another process changed the
    catalog (cached table descriptions must be dropped) or committed data (a read snapshot must be renewed)
    without a query."""

    def __init__(self, path: str | None) -> None:
        if path is None:
            self._counters = mmap.mmap(-1, 16)  # private to this process
        else:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if os.fstat(fd).st_size < 16:
                    os.ftruncate(fd, 16)
                self._counters = mmap.mmap(fd, 16)
            finally:
                os.close(fd)
        self.seen = self.current()

    def current(self) -> bytes:
        """The catalog counter."""
        return self._counters[:8]

    def commits(self) -> bytes:
        """The commit counter."""
        return self._counters[8:16]

    def bump(self) -> None:
        """Call with the writer lock held, after the DDL committed."""
        self._increment(0)

    def bump_commits(self) -> None:
        """Call with the writer lock held, after a write committed (before it is acknowledged)."""
        self._increment(8)

    def _increment(self, start: int) -> None:
        counter = slice(start, start + 8)
        self._counters[counter] = (int.from_bytes(self._counters[counter], "little") + 1).to_bytes(8, "little")

    def close(self) -> None:
        self._counters.close()


_WAL_RESTART_FRAMES = 16384  # 64 MB of 4 KB pages
_REWIND_REST_FRAMES = 1024  # frames that arrived during the last catch-up pass: few enough to copy holding writers
_CATCH_UP_PASSES = 4


class _Checkpointer:
    """Copies the WAL back into the database file from a background thread with its own connection.

    SQLite's automatic checkpoint runs inside the commit that crosses the threshold, on the event-loop thread,
    and includes an fsync; here it runs beside the server (sqlite3 releases the GIL while it works). PASSIVE
    checkpoints never block writers or readers."""

    def __init__(self, path: str, writer_lock: str, interval: float = 0.2) -> None:
        self._path = path
        self._writer_lock = writer_lock
        self._interval = interval
        # One checkpointer per store is enough: the worker whose thread holds this flock copies, the others'
        # threads only check now and then whether it is free (its holder exited).
        self._duty = os.open(path + ".checkpoint-lock", os.O_RDWR | os.O_CREAT, 0o644)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="openddb-checkpoint", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        writers = _WriterLock(self._writer_lock)
        try:
            db.execute("PRAGMA busy_timeout = 1000")
            on_duty = False
            while not self._stop.wait(self._interval):
                if not on_duty:
                    try:
                        fcntl.flock(self._duty, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        on_duty = True
                    except BlockingIOError:
                        continue
                try:
                    _, frames, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    if frames > _WAL_RESTART_FRAMES:
                        self._rewind(db, frames, writers)
                except sqlite3.OperationalError:  # busy: the next round catches up
                    pass
        finally:
            writers.close()
            db.close()

    def _rewind(self, db: sqlite3.Connection, frames: int, writers: _WriterLock) -> None:
        """Copy back the rest of the WAL and start it again from the beginning.

        The WAL is rewound only once every frame is copied back, a moment steady writes may never leave, so
        RESTART holds writers back while it copies the rest. First catch up beside them (each PASSIVE copies what
        arrived during the one before, a shrinking rest), then take the writer lock: SQLite's busy handler would
        let the workers' commits, which never pause, win it again and again while the rest grows."""
        for _ in range(_CATCH_UP_PASSES):
            _, now, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            arrived, frames = now - frames, now
            if arrived <= _REWIND_REST_FRAMES:
                break
        writers.acquire()
        try:
            db.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
        finally:
            writers.release()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        os.close(self._duty)  # lets another worker's checkpointer take over


SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS catalog (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS tables (name TEXT PRIMARY KEY, tid INTEGER NOT NULL UNIQUE, meta BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS items (
    tid INTEGER NOT NULL, h INTEGER NOT NULL, pk BLOB NOT NULL, sk BLOB NOT NULL,
    size INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (tid, h, pk, sk)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tokens (token TEXT PRIMARY KEY, hash BLOB NOT NULL, created_at REAL NOT NULL, sizes BLOB);
CREATE INDEX IF NOT EXISTS tokens_by_age ON tokens (created_at);
CREATE TABLE IF NOT EXISTS leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires REAL NOT NULL);
INSERT OR IGNORE INTO catalog VALUES ('schema_version', 1), ('catalog_version', 0), ('next_tid', 1);
"""

_GET = "SELECT size, data FROM items WHERE tid=? AND h=? AND pk=? AND sk=?"
_GET_DATA = "SELECT data FROM items WHERE tid=? AND h=? AND pk=? AND sk=?"
# An upsert, not INSERT OR REPLACE: REPLACE deletes the old row and inserts the new one (B-tree rebalancing both
# ways), while DO UPDATE rewrites the row where it is, in place when its size is unchanged (~4x faster overwrites).
_UPSERT = ("INSERT INTO items (tid, h, pk, sk, size, data) VALUES (?, ?, ?, ?, ?, ?) "
           "ON CONFLICT (tid, h, pk, sk) DO UPDATE SET size=excluded.size, data=excluded.data")
_DELETE = "DELETE FROM items WHERE tid=? AND h=? AND pk=? AND sk=?"
_GET_TOKEN = "SELECT hash, created_at, sizes FROM tokens WHERE token=?"
_PUT_TOKEN = "INSERT OR REPLACE INTO tokens (token, hash, created_at) VALUES (?, ?, ?)"
_SIZE_TOKEN = "UPDATE tokens SET sizes=? WHERE token=?"
# Expired tokens are swept once every this many token writes, so the table stays small without a timer.
_TOKEN_SWEEP_EVERY = 256


_BLIND = object()  # a staged write that did not read its row: nothing to check at commit


def _bound(where: tuple[int, int, bytes, bytes]) -> tuple[int, int, bytearray, bytearray]:
    """A row's (tid, h, pk, sk) as SQL parameters."""
    return where[0], where[1], blob(where[2]), blob(where[3])


class _Staged:
    """An optimistic write waiting for `flush`: the row as read (`expected`, or `_BLIND`; `original` parsed) and
    what to write, with the table whose indexes the change must reach."""

    __slots__ = ("data", "expected", "item", "original", "size", "table", "written")

    def __init__(self, table: TableMeta, expected: object, original: Item | None, item: Item | None,
                 data: bytes | None, size: int, written: bool) -> None:
        self.table = table
        self.expected = expected
        self.original = original
        self.item = item
        self.data = data
        self.size = size
        self.written = written  # False: the row was only read (a write that changed nothing); check it alone


class _Change(NamedTuple):
    """An item change of a streamed table, staged with its group until `flush` writes its stream record."""

    table: TableMeta
    key: StorageKey
    old: Item | None
    new: Item | None
    old_data: bytes | None
    new_data: bytes | None
    origin: Origin


def _skips_read(op: WriteOp) -> bool:
    """Whether `op` may be written without reading its row: its caller needs nothing of the old item, and
    neither do the table's indexes or stream."""
    return op.blind and not op.table.indexes and op.table.streaming is None


def _blind_outcome(op: WriteOp) -> tuple[Item | None, int, bytes | None]:
    """What a blind op (`WriteOp.blind`) writes: the new item (None: the row is deleted), its size, its stored JSON."""
    new = op.apply(None)
    if new is None:
        return None, 0, None
    return new, item_size(new), orjson.dumps(new)


def _stored(db: sqlite3.Connection,
            row: tuple[int, int, bytearray, bytearray]) -> tuple[Item | None, int, bytes | None]:
    """The item stored in `row` (tid, h, pk, sk, bound as SQL parameters), parsed, with its size and stored bytes."""
    found = db.execute(_GET, row).fetchone()
    if found is None:
        return None, 0, None
    return orjson.loads(found[1]), found[0], found[1]


def _row(db: sqlite3.Connection, meta: TableMeta, key: StorageKey) -> Row | None:
    """The stored row under a key, read through `db` as it stands (no snapshot renewal in between)."""
    found = db.execute(_GET, (meta.table_id, key.h, blob(key.pk), blob(key.sk))).fetchone()
    return None if found is None else Row(key, found[0], found[1])


def scan_sql(tid: int, h_low: int, h_high: int, after: StorageKey | None) -> tuple[str, tuple[object, ...]]:
    """The SQL and parameters of a Scan segment's rows in (h, pk, sk) order, strictly after `after`."""
    if after is None or after.h < h_low:
        return ("SELECT h, pk, sk, size, data FROM items WHERE tid=? AND h>=? AND h<? ORDER BY h, pk, sk",
                (tid, h_low, h_high))
    # The row value alone bounds the start (it is inside the segment): with `h>=?` beside it SQLite seeks to
    # the segment's start and filters every row before `after`, so a page would cost O(its position).
    return ("SELECT h, pk, sk, size, data FROM items WHERE tid=? AND (h, pk, sk) > (?, ?, ?) AND h<? "
            "ORDER BY h, pk, sk", (tid, after.h, after.pk, after.sk, h_high))


class SQLiteEngine(SQLiteStreams, SQLiteIndexes, Engine):
    def __init__(self, path: str | None, *, sync: str = "normal", group_commit: bool = False,
                 shared_reads: bool = False) -> None:
        """Open (creating if needed) the store at `path`, a directory; None keeps everything in memory.

        With `group_commit`, `write` leaves its transaction open for `flush` (see `Engine.pending`); with
        `shared_reads`, reads share a snapshot until `end_reads` (see `_read`): for a server, which calls it at
        the end of every event-loop pass."""
        self.group_commit = group_commit
        self.shared_reads = shared_reads
        self.pending = False
        self._overlay: dict[tuple[int, int, bytes, bytes], _Staged] = {}
        # The stream records of the staged group, in request order (two writes to one key are two records).
        self._changes: list[_Change] = []
        self._open_shards = {}
        self._locked = False  # a group transaction holding the writer lock is open
        self._conflict = False  # the optimistic group failed its check: nothing of this group may commit
        self._group_catalog = b""
        self.reading = False  # a read snapshot is open (see `_read`)
        self._read_version = b""
        if path is None:
            target = ":memory:"
        else:
            os.makedirs(path, exist_ok=True)
            target = os.path.join(path, "openddb.sqlite3")
        self.location = target
        self._lock = _WriterLock(None if path is None else os.path.join(path, "openddb.lock"))
        self._signal = _CatalogSignal(None if path is None else os.path.join(path, "openddb.catalog"))
        self._db = sqlite3.connect(target, isolation_level=None, check_same_thread=False,
                                   cached_statements=256)
        db = self._db
        db.execute("PRAGMA busy_timeout = 30000")
        if path is not None:
            db.execute("PRAGMA journal_mode = WAL")
        db.execute(f"PRAGMA synchronous = {'FULL' if sync == 'full' else 'NORMAL'}")
        # Memory-mapped reads: when another worker has written, the page cache is rebuilt from the shared mapping
        # instead of read() calls; a larger cache keeps hot B-tree pages of a single process.
        db.execute("PRAGMA mmap_size = 1073741824")
        db.execute("PRAGMA cache_size = -65536")
        # Savepoints journal the pages they change; in memory, not in a temporary file written page by page.
        db.execute("PRAGMA temp_store = MEMORY")
        self._checkpointer: _Checkpointer | None = None
        if path is not None:
            db.execute("PRAGMA wal_autocheckpoint = 0")
            db.execute("PRAGMA journal_size_limit = 67108864")  # a rewound WAL file shrinks back to 64 MB
            self._checkpointer = _Checkpointer(target, os.path.join(path, "openddb.lock"))
        self._begin()
        try:
            for statement in ";".join((_SCHEMA, INDEX_SCHEMA, STREAM_SCHEMA)).split(";"):
                if statement.strip():
                    db.execute(statement)
            if "sizes" not in {row[1] for row in db.execute("PRAGMA table_info(tokens)")}:  # a store made before
                db.execute("ALTER TABLE tokens ADD COLUMN sizes BLOB")
            # A process killed between a commit and its notice left the other processes' cached descriptions
            # (and read snapshots) stale: every engine opening the store (a worker replacing a dead one, too)
            # bumps both counters, so the others look again.
            self._signal.bump()
            self._commit()
        except BaseException:
            self._rollback()
            raise
        self._tables: dict[str, TableMeta] = {}
        self._token_writes = 0

    # --- catalog ------------------------------------------------------------------------------
    def _read(self) -> sqlite3.Connection:
        """The connection, for reading: inside a write transaction as it is, else inside a read snapshot that
        includes every write any worker committed before this call.

        Requests of one event-loop pass share the snapshot (one BEGIN instead of a read transaction per
        statement) until some worker commits, which bumps the shared commit counter and so renews it;
        `end_reads` lets it go at the end of the pass."""
        db = self._db
        if not self.shared_reads:
            return db
        if self.reading:
            commits = self._signal.commits()
            if commits != self._read_version:
                db.execute("COMMIT")
                self._read_version = commits
                db.execute("BEGIN")
        elif not db.in_transaction:
            self._read_version = self._signal.commits()
            db.execute("BEGIN")
            self.reading = True
        return db

    def end_reads(self) -> None:
        if self.reading:
            self.reading = False
            self._db.execute("COMMIT")

    def _begin(self, wait: bool = True) -> None:
        # The read snapshot ends before waiting for the lock: a reader parked here would hold back a RESTART
        # checkpoint, which holds back the lock's holder, which holds back us (until the checkpoint times out).
        self.end_reads()
        if not self._lock.acquire(wait):
            raise EngineBusy()
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._lock.release()
            raise

    def _expect(self, stored: bytes | None, expected: TableMeta) -> None:
        """Inside a DDL transaction: CatalogChanged (and no cached description kept) unless the stored description
        is the version `expected` was derived from."""
        if not is_stored_version(stored, expected):
            self._tables.clear()
            raise CatalogChanged()

    def _check_catalog(self) -> None:
        """Just after `_begin`: if another process changed the catalog since the table descriptions in hand were
        read, let go and raise CatalogChanged (a table may be gone, or replaced under the same name: its rows must
        not be written under the old description). Later writes of the group hold the lock, so no change can
        slip in after this."""
        if self._signal.current() != self._signal.seen:
            self._rollback()
            raise CatalogChanged()

    def _commit(self) -> None:
        try:
            self._db.execute("COMMIT")
            self._signal.bump_commits()
        finally:
            self._lock.release()

    def _rollback(self) -> None:
        try:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
        finally:
            self._lock.release()

    def _refresh_catalog(self) -> None:
        """Drop cached table descriptions if any process changed the catalog since we last looked."""
        current = self._signal.current()
        if current != self._signal.seen:
            self._signal.seen = current
            self._tables.clear()

    def _bump_catalog(self) -> None:
        """Inside a DDL transaction: record the change in the store (for readers of the file alone)."""
        self._db.execute("UPDATE catalog SET value = value + 1 WHERE key='catalog_version'")
        self._tables.clear()

    def _commit_ddl(self) -> None:
        """Commit a DDL transaction, then tell the other processes (still under the writer lock)."""
        try:
            self._db.execute("COMMIT")
            self._signal.bump_commits()
            self._signal.bump()
            self._signal.seen = self._signal.current()
        finally:
            self._lock.release()

    @contextmanager
    def _transaction(self, ddl: bool = False) -> Iterator[sqlite3.Connection]:
        """A write transaction of its own (any group is committed first): committed when the body returns (with
        `_commit_ddl` for a catalog change), rolled back when it raises."""
        self._end_group()
        self._begin()
        try:
            yield self._db
            if ddl:
                self._commit_ddl()
            else:
                self._commit()
        except BaseException:
            self._rollback()
            raise

    def create_table(self, meta: TableMeta) -> TableMeta:
        with self._transaction(ddl=True) as db:
            if db.execute("SELECT 1 FROM tables WHERE name=?", (meta.name,)).fetchone():
                raise ResourceInUseException(f"Table already exists: {meta.name}")
            tid = db.execute("SELECT value FROM catalog WHERE key='next_tid'").fetchone()[0]
            db.execute("UPDATE catalog SET value = value + 1 WHERE key='next_tid'")
            meta.table_id = tid
            self._sync_stream(meta, None, time.time())
            db.execute("INSERT INTO tables (name, tid, meta) VALUES (?, ?, ?)", (meta.name, tid, meta.to_json()))
            self._bump_catalog()
        return meta

    def _load_table(self, name: str) -> bytes | None:
        row = self._read().execute("SELECT meta FROM tables WHERE name=?", (name,)).fetchone()
        return None if row is None else bytes(row[0])

    def list_tables(self) -> list[str]:
        return [row[0] for row in self._read().execute("SELECT name FROM tables ORDER BY name")]

    def update_table(self, meta: TableMeta) -> None:
        with self._transaction(ddl=True) as db:
            row = db.execute("SELECT meta FROM tables WHERE name=?", (meta.name,)).fetchone()
            self._expect(None if row is None else row[0], meta)
            meta.version += 1
            stored = TableMeta.from_json(row[0])
            self._sync_stream(meta, stored, time.time())
            # Entries of an index the change removes go with it: nothing can be left orphaned by a crash.
            kept = {index.index_id for index in meta.indexes}
            for index in stored.indexes:
                if index.index_id not in kept:
                    db.execute("DELETE FROM index_entries WHERE tid=? AND iid=?", (meta.table_id, index.index_id))
            db.execute("UPDATE tables SET meta=? WHERE name=?", (meta.to_json(), meta.name))
            self._bump_catalog()

    def delete_table(self, name: str, expected: TableMeta | None = None) -> None:
        with self._transaction(ddl=True) as db:
            row = db.execute("SELECT tid, meta FROM tables WHERE name=?", (name,)).fetchone()
            if expected is not None:
                self._expect(None if row is None else row[1], expected)
            if row is not None:
                self._sync_stream(None, TableMeta.from_json(row[1]), time.time())
                db.execute("DELETE FROM items WHERE tid=?", (row[0],))
                db.execute("DELETE FROM index_entries WHERE tid=?", (row[0],))
                db.execute("DELETE FROM tables WHERE name=?", (name,))
                self._bump_catalog()

    def table_stats(self, meta: TableMeta) -> tuple[int, int]:
        count, size = self._read().execute(
            "SELECT count(*), coalesce(sum(size), 0) FROM items WHERE tid=?", (meta.table_id,)).fetchone()
        return int(count), int(size)

    # --- items --------------------------------------------------------------------------------
    def get(self, meta: TableMeta, key: StorageKey) -> Row | None:
        return _row(self._read(), meta, key)

    def get_many(self, requests: Sequence[tuple[TableMeta, StorageKey]]) -> list[Row | None]:
        # One consistent view: the open write transaction, or one read snapshot, not renewed between the rows.
        db = self._read()
        own = not db.in_transaction  # reads without a shared snapshot: take one for these rows alone
        if own:
            db.execute("BEGIN")
        try:
            return [_row(db, meta, key) for meta, key in requests]
        finally:
            if own:
                db.execute("COMMIT")

    def write(self, ops: Sequence[WriteOp], token: RequestToken | None = None) -> list[WriteResult]:
        if self.group_commit:
            if self._conflict:  # this pass's group is lost and will run again: wait for that, then go
                raise EngineBusy()
            self.group_writes += 1
        # Optimistic: writes whose reads come from one snapshot (one item, items written without reading them,
        # or any items under a shared read snapshot), all checked at commit; writes guarded by a request token
        # run under the lock.
        if self.optimistic and self.group_commit and not self._locked and token is None and \
                (len(ops) == 1 or self.shared_reads or all(_skips_read(op) for op in ops)):
            return self._write_optimistic(ops)
        db = self._db
        results: list[WriteResult] = []
        # Inside a shared group transaction a request needs a savepoint to undo only itself, unless nothing is
        # written before its last apply() can fail: one item with no index, or blind writes (prepared first, then
        # written). A savepoint journals a copy of every page the request changes, which doubles a batch's I/O.
        blind = token is None and all(_skips_read(op) for op in ops)
        savepoint = self.group_commit and not blind and \
            (len(ops) != 1 or token is not None or bool(ops[0].table.indexes))
        if self.group_commit:
            if not self._locked:
                if self._overlay:
                    self._end_group(self.lock_wait)
                    if self._conflict:  # that group is lost: run this after its requests run again
                        raise EngineBusy()
                self._begin(self.lock_wait)
                self._check_catalog()
                self._locked = True
                self.pending = True
            if savepoint:
                db.execute("SAVEPOINT request")
        else:
            self._begin()
            self._check_catalog()
        if blind:
            return self._write_blind(ops)
        try:
            if token is not None:
                self._record_token(token)
            for op in ops:
                key = op.key
                params = (op.table.table_id, key.h, blob(key.pk), blob(key.sk))
                if _skips_read(op):
                    new, new_size, data = _blind_outcome(op)
                    if data is None:
                        db.execute(_DELETE, params)
                    else:
                        db.execute(_UPSERT, (*params, new_size, blob(data)))
                    results.append(WriteResult(None, new, 0, new_size))
                    continue
                old, old_size, old_data = _stored(db, params)
                new = op.apply(old)
                if new is old:
                    results.append(WriteResult(old, old, old_size, old_size))
                    continue
                self._maintain_indexes(op.table, key, old, new)
                if new is None:
                    if old is not None:
                        db.execute(_DELETE, params)
                        if op.table.stream is not None:
                            self._record_change(op.table, key, old, None, old_data, None, op.origin, time.time())
                    results.append(WriteResult(old, None, old_size, 0))
                    continue
                new_size = item_size(new)
                new_data = orjson.dumps(new)
                db.execute(_UPSERT, (*params, new_size, blob(new_data)))
                if op.table.stream is not None:
                    self._record_change(op.table, key, old, new, old_data, new_data, op.origin, time.time())
                results.append(WriteResult(old, new, old_size, new_size))
            if token is not None:  # the sizes a repeat of the request reports
                db.execute(_SIZE_TOKEN, (charged_sizes(results), token.token))
            if savepoint:
                db.execute("RELEASE request")
            elif not self.group_commit:
                self._commit()
        except BaseException:
            if savepoint:
                db.execute("ROLLBACK TO request")
                db.execute("RELEASE request")
            elif not self.group_commit:
                self._rollback()
            raise
        return results

    def _write_blind(self, ops: Sequence[WriteOp]) -> list[WriteResult]:
        """Write items nothing needs to read first (`WriteOp.blind`): every row is built before the first is
        written, so a rejected request writes nothing and needs no savepoint."""
        rows: list[tuple[tuple[int, int, bytearray, bytearray], int, bytes | None]] = []
        results: list[WriteResult] = []
        db = self._db
        writing = False
        try:
            for op in ops:
                key = op.key
                new, size, data = _blind_outcome(op)
                rows.append(((op.table.table_id, key.h, blob(key.pk), blob(key.sk)), size, data))
                results.append(WriteResult(None, new, 0, size))
            writing = True
            puts = [(*params, size, blob(data)) for params, size, data in rows if data is not None]
            if len(puts) == len(rows):  # puts alone (a batch's usual case): one call
                db.executemany(_UPSERT, puts)
            else:
                for params, size, data in rows:
                    if data is None:
                        db.execute(_DELETE, params)
                    else:
                        db.execute(_UPSERT, (*params, size, blob(data)))
        except BaseException:
            if not self.group_commit:
                self._rollback()
            elif writing:  # part of this request may be in the group: none of the group may commit
                self._conflict = True
            raise
        if not self.group_commit:
            self._commit()
        return results

    def _write_optimistic(self, ops: Sequence[WriteOp]) -> list[WriteResult]:
        """Apply `ops` to the committed rows (or this group's staged ones) and stage the outcome for `flush`.

        Nothing is staged if an `apply` raises, so a rejected request leaves the group as it was."""
        db: sqlite3.Connection | None = None  # the read snapshot, taken at the first read (blind writes need none)
        overlay = self._overlay
        if not overlay:  # the catalog these writes' table descriptions were checked against
            self._group_catalog = self._signal.seen
        staged: dict[tuple[int, int, bytes, bytes], _Staged] = {}
        changes: list[_Change] = []
        results: list[WriteResult] = []
        for op in ops:
            key = op.key
            where = (op.table.table_id, key.h, key.pk, key.sk)
            before = staged.get(where) or overlay.get(where)
            table = op.table
            if _skips_read(op):  # (nothing needs the row as it was)
                new, size, data = _blind_outcome(op)
                if before is None:
                    staged[where] = _Staged(table, _BLIND, None, new, data, size, True)
                else:
                    staged[where] = _Staged(table, before.expected, before.original, new, data, size, True)
                results.append(WriteResult(None, new, 0, size))
                continue
            if before is not None:
                old, old_size, expected, original = before.item, before.size, before.expected, before.original
                old_data = before.data
            else:
                if db is None:
                    db = self._read()
                old, old_size, expected = _stored(db, _bound(where))
                original, old_data = old, expected
            new = op.apply(old)
            if new is old:  # nothing to write, but the answer rests on what was read: check it at commit
                if before is None:
                    staged[where] = _Staged(table, expected, old, old, expected,  # type: ignore[arg-type]
                                            old_size, False)
                results.append(WriteResult(old, old, old_size, old_size))
                continue
            size = 0 if new is None else item_size(new)
            data = None if new is None else orjson.dumps(new)
            staged[where] = _Staged(table, expected, original, new, data, size, True)
            if table.stream is not None:
                changes.append(_Change(table, key, old, new, old_data, data, op.origin))
            results.append(WriteResult(old, new, old_size, size))
        if staged:
            overlay.update(staged)
            self._changes.extend(changes)
            self.pending = True
        return results

    def _commit_overlay(self, wait: bool = True) -> None:
        """Under the writer lock: check every row the staged writes read, write them, commit; on a changed row
        roll back and mark the group conflicted. Without `wait`, EngineBusy if another process holds the lock
        (the group stays staged, and more writes may join it)."""
        if self._conflict:
            self._overlay, self._changes = {}, []
            return
        self._begin(wait)
        overlay, self._overlay = self._overlay, {}
        changes, self._changes = self._changes, []
        db = self._db
        if self._signal.current() != self._group_catalog:  # a table may have gone or changed: run them again
            self._conflict = True
            self._rollback()
            return
        puts: list[tuple[int, int, bytearray, bytearray, int, bytearray]] = []
        deletes: list[tuple[int, int, bytearray, bytearray]] = []
        try:
            for where, entry in overlay.items():
                row = _bound(where)
                if entry.expected is not _BLIND:
                    found = db.execute(_GET_DATA, row).fetchone()
                    if (None if found is None else found[0]) != entry.expected:
                        self._conflict = True
                        self._rollback()
                        return
                if not entry.written:
                    continue
                if entry.table.indexes:
                    # From the committed item to the final one, before the row is written: the upkeep's item
                    # collection check sums the partition's rows as the group's earlier writes left them.
                    self._maintain_indexes(entry.table, StorageKey(*where[1:]), entry.original, entry.item)
                    if entry.data is None:
                        db.execute(_DELETE, row)
                    else:
                        db.execute(_UPSERT, (*row, entry.size, blob(entry.data)))
                elif entry.data is None:
                    deletes.append(row)
                else:
                    puts.append((*row, entry.size, blob(entry.data)))
            # The rows of tables without indexes, which nothing in the group reads again: one call per statement.
            db.executemany(_DELETE, deletes)
            db.executemany(_UPSERT, puts)
            now = time.time()
            for change in changes:  # (in request order: two writes to one key are two records)
                self._record_change(*change, now)
            self._commit()
            self.group_commits += 1
        except DynamoDBError:  # e.g. an item collection grown too large: run the requests again, one by one
            self._conflict = True
            self._rollback()
        except BaseException:
            self._rollback()
            raise

    def _end_group(self, wait: bool = True) -> None:
        """Commit this pass's group (or drop it, if it conflicted; `flush` then reports the conflict). Without
        `wait`, EngineBusy while another process holds the writer lock, the group kept as it is."""
        if self._overlay:
            self._commit_overlay(wait)
        if self._locked:
            self._locked = False
            if self._conflict:
                self._rollback()
            else:
                try:
                    self._commit()
                except BaseException:
                    self._rollback()
                    raise
                self.group_commits += 1
        self.pending = False

    def flush(self) -> None:
        """Commit the writes this pass grouped (see `Engine.pending`); WriteConflict if nothing of them could be
        committed because another worker changed a row they read; EngineBusy (nothing done) if `lock_wait` is off
        and another worker holds the writer lock."""
        try:
            self._end_group(self.lock_wait)
        finally:
            conflict, self._conflict = self._conflict, False
        if conflict:
            raise WriteConflict()

    def wait_for_writer(self) -> None:
        self._lock.wait_free()

    @property
    def group_rows(self) -> int:
        return len(self._overlay)

    def _record_token(self, token: RequestToken) -> None:
        """Inside a write transaction: refuse a live token, else store it (see `Engine.write`)."""
        db = self._db
        found = db.execute(_GET_TOKEN, (token.token,)).fetchone()
        if found is not None and found[1] > token.created_at - TOKEN_LIFETIME:
            raise TokenInUse(RequestToken(token.token, found[0], found[1], found[2]))
        db.execute(_PUT_TOKEN, (token.token, token.request_hash, token.created_at))
        self._token_writes += 1
        if self._token_writes % _TOKEN_SWEEP_EVERY == 0:
            db.execute("DELETE FROM tokens WHERE created_at < ?", (token.created_at - TOKEN_LIFETIME,))

    def try_lease(self, name: str, holder: str, seconds: float, now: float) -> bool:
        with self._transaction() as db:
            found = db.execute("SELECT holder, expires FROM leases WHERE name=?", (name,)).fetchone()
            if found is not None and found[0] != holder and found[1] > now:
                return False
            db.execute("INSERT OR REPLACE INTO leases (name, holder, expires) VALUES (?, ?, ?)",
                       (name, holder, now + seconds))
            return True

    def get_token(self, token: str) -> RequestToken | None:
        found = self._read().execute(_GET_TOKEN, (token,)).fetchone()
        return None if found is None else RequestToken(token, found[0], found[1], found[2])

    def query(self, meta: TableMeta, h: int, pk: bytes, sort: SortRange, forward: bool,
              after: bytes | None) -> Iterator[Row]:
        clauses = ["tid=?", "h=?", "pk=?"]
        params: list[object] = [meta.table_id, h, blob(pk)]
        add_sort_clauses(sort, "?", clauses, params)
        if after is not None:
            clauses.append("sk>?" if forward else "sk<?")
            params.append(after)
        sql = (f"SELECT sk, size, data FROM items WHERE {' AND '.join(clauses)} "
               f"ORDER BY sk {'ASC' if forward else 'DESC'}")
        for sk, size, data in self._read().execute(sql, params):
            yield Row(StorageKey(h, pk, sk), size, data)

    def scan(self, meta: TableMeta, h_low: int, h_high: int, after: StorageKey | None) -> Iterator[Row]:
        for h, pk, sk, size, data in self._read().execute(*scan_sql(meta.table_id, h_low, h_high, after)):
            yield Row(StorageKey(h, pk, sk), size, data)

    def close(self) -> None:
        try:
            self._end_group()
            self.end_reads()
            if self._checkpointer is not None:
                self._checkpointer.close()
            if self.location != ":memory:":
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self._db.close()
            self._lock.close()
            self._signal.close()
