"""The embedded engine: one SQLite database (stdlib sqlite3) in WAL mode.

Layout: `tables` holds each table's description as JSON; `items` holds every item of every table under
`(tid, h, pk, sk)`, a WITHOUT ROWID B-tree, so a Query is a range read on one `(tid, h, pk)` prefix and a Scan
walks one table's rows in hash order.

Several worker processes may share the store. Writers serialize on a flock (`openddb.lock`) around each write
transaction, and every committed DDL bumps a counter in a memory-mapped file (`openddb.catalog`), so a worker
notices another's CreateTable/DeleteTable on its next request at the cost of an 8-byte compare.

Group commit: the writes of one event-loop pass share one transaction, committed by `commit`. A lone worker
holds the writer lock for the pass. Workers sharing the store write optimistically instead: each write reads the
committed row, applies its change into an in-memory overlay, and `commit` takes the lock only to check that every
row read is still as it was, write the overlay and commit; if another worker changed one of those rows, nothing
of the group is written and the server runs its requests again under the lock (a "conflict"). The lock is
then held for the SQL alone, so the workers' request handling runs in parallel.

Reads (with `shared_reads`, as the server opens it) share one read transaction per event-loop pass, renewed
whenever any worker has committed since (a second shared counter), so a read always includes every acknowledged
write without paying SQLite's read-lock set-up per statement.

Durability: WAL with synchronous=NORMAL. A committed transaction is in the WAL file before `write` returns, so
it survives a kill -9 of the server; `--sync full` also fsyncs every commit, for power loss.

Encryption at rest: with a key, every connection is SQLCipher's (see sqlite_cipher), and nothing else changes.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial

from openddb import clock
from openddb.errors import ResourceInUseException
from openddb.model.schema import TableMeta
from openddb.storage.base import (
    CatalogChanged,
    Change,
    Engine,
    EngineBusy,
    RequestToken,
    Row,
    SortRange,
    StorageKey,
    WriteSession,
    add_sort_clauses,
    is_stored_version,
)
from openddb.storage.sqlite_backups import RECOVERY_SCHEMA, SQLiteBackups
from openddb.storage.sqlite_cipher import Driver, driver
from openddb.storage.sqlite_indexes import INDEX_SCHEMA, SQLiteIndexes, blob
from openddb.storage.sqlite_reserve import RESERVE_BYTES, SpaceReserve
from openddb.storage.sqlite_schema import add_columns, drop_triggers
from openddb.storage.sqlite_streams import STREAM_SCHEMA, SQLiteStreams, statements
from openddb.storage.sqlite_vectors import VECTOR_SCHEMA, SQLiteVectors, upgrade_vector_schema
from openddb.storage.sqlite_writes import GET_TOKEN, SQLiteWrites, Staged, State, stored
from openddb.storage.store_keys import StoreKey


class _WriterLock:
    """A cross-process writer lock (flock) taken around every write transaction.

    SQLite's own busy handler sleeps 1, 2, 5, 10... ms between retries, which stalls a worker's whole event
    loop; a blocking flock is woken by the kernel the moment the other process commits."""

    def __init__(self, path: str | None) -> None:
        self._path = path
        self._fd = -1 if path is None else os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
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
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
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

    def __init__(self, path: str, writer_lock: str, store_driver: Driver, interval: float = 0.2) -> None:
        self._path = path
        self._driver = store_driver
        self._writer_lock = writer_lock
        self._interval = interval
        # One checkpointer per store is enough: the worker whose thread holds this flock copies, the others'
        # threads only check now and then whether it is free (its holder exited).
        self._duty = os.open(path + ".checkpoint-lock", os.O_RDWR | os.O_CREAT, 0o600)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="openddb-checkpoint", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        db = self._driver.open(self._path, isolation_level=None, check_same_thread=False)
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
                except self._driver.operational_error:  # busy: the next round catches up
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
CREATE TABLE IF NOT EXISTS partition_splits (key TEXT PRIMARY KEY, boundary INTEGER NOT NULL);
INSERT OR IGNORE INTO catalog VALUES ('schema_version', 1), ('catalog_version', 0), ('next_tid', 1);
"""

_GET = "SELECT size, data FROM items WHERE tid=? AND h=? AND pk=? AND sk=?"


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


def _configure(db: sqlite3.Connection, on_disk: bool, sync: str) -> None:
    """The store connection's settings."""
    db.execute("PRAGMA busy_timeout = 30000")
    if on_disk:
        db.execute("PRAGMA journal_mode = WAL")
    db.execute(f"PRAGMA synchronous = {'FULL' if sync == 'full' else 'NORMAL'}")
    # Memory-mapped reads: when another worker has written, the page cache is rebuilt from the shared mapping
    # instead of read() calls; a larger cache keeps hot B-tree pages of a single process.
    db.execute("PRAGMA mmap_size = 1073741824")
    db.execute("PRAGMA cache_size = -65536")
    # Savepoints journal the pages they change; in memory, not in a temporary file written page by page.
    db.execute("PRAGMA temp_store = MEMORY")
    if on_disk:
        db.execute("PRAGMA wal_autocheckpoint = 0")  # (the checkpointer thread copies the WAL back)
        db.execute("PRAGMA journal_size_limit = 67108864")  # a rewound WAL file shrinks back to 64 MB


class SQLiteEngine(SQLiteWrites, SQLiteStreams, SQLiteIndexes, SQLiteVectors, SQLiteBackups, Engine):
    def __init__(self, path: str | None, *, sync: str = "normal", group_commit: bool = False,
                 shared_reads: bool = False, reserve_bytes: int = RESERVE_BYTES,
                 key: StoreKey | None = None) -> None:
        """Open (creating if needed) the store at `path`, a directory; None keeps everything in memory.
        `reserve_bytes`: disk space held against a full disk (see sqlite_reserve); `key`: the store's files are
        encrypted with it (see sqlite_cipher: EncryptionUnavailable without SQLCipher, StoreKeyRefused if it does
        not open them).

        With `group_commit`, `write` leaves its transaction open for `commit` (see `WriteSession`); with
        `shared_reads`, reads share a snapshot until `end_reads` (see `_read`): for a server, which calls it at
        the end of every event-loop pass."""
        self.group_commit = group_commit
        self.shared_reads = shared_reads
        self.session = WriteSession()
        self._overlay: dict[tuple[int, int, bytes, bytes], Staged] = {}
        # The changes of the staged group, in request order (two writes to one key are two records).
        self._changes: list[Change] = []
        self._held: list[Change] = []  # (see SQLiteWrites._write_locked)
        self._held_rows: dict[tuple[int, int, bytes, bytes], State] = {}
        self._open_shards = {}
        self._stream_shards = {}
        self._records = []
        self._recovery_version = b""  # (none read yet: the first write reads which tables log, see `_recovering`)
        self._recovery_tids = frozenset()
        self._locked = False  # a group transaction holding the writer lock is open
        self._conflict = False  # the optimistic group failed its check: nothing of this group may commit
        self._group_catalog = b""
        self.reading = False  # a read snapshot is open (see `_read`)
        self._read_version = b""
        if path is None:
            target = ":memory:"
        else:
            # Owner-only: a data dir made here, and the store's files (SQLite gives its -wal and -shm files the
            # database file's mode). A dir that already exists keeps its mode: it may be the user's own.
            os.makedirs(path, mode=0o700, exist_ok=True)
            target = os.path.join(path, "openddb.sqlite3")
            os.close(os.open(target, os.O_RDWR | os.O_CREAT, 0o600))
        if key is not None and path is None:
            raise ValueError("a store in memory writes nothing to disk: it takes no encryption key")
        self.location = target
        self._driver = driver(key)
        self.encrypted = self._driver.encrypted
        # (first: a key that does not open the store is refused before anything else is made)
        self._db = self._driver.open(target, isolation_level=None, check_same_thread=False, cached_statements=256)
        self._lock = _WriterLock(None if path is None else os.path.join(path, "openddb.lock"))
        self._signal = _CatalogSignal(None if path is None else os.path.join(path, "openddb.catalog"))
        _configure(self._db, path is not None, sync)
        self._checkpointer: _Checkpointer | None = None
        self._reserve = SpaceReserve(path, reserve_bytes)
        if path is not None:
            self._checkpointer = _Checkpointer(target, os.path.join(path, "openddb.lock"), self._driver)
        self._load_row = partial(stored, self._db)  # (a locked write's reads of its rows)
        self._create_schema()
        self._tables: dict[str, TableMeta] = {}
        self._token_writes = 0

    def _create_schema(self) -> None:
        """Create (or bring up to date) the store's tables, under the writer lock."""
        db = self._db
        self._begin()
        try:
            schema = (_SCHEMA, INDEX_SCHEMA, STREAM_SCHEMA, VECTOR_SCHEMA, RECOVERY_SCHEMA)
            for statement in statements(";".join(schema)):
                db.execute(statement)
            upgrade_vector_schema(db)
            self._upgrade_stream_log()
            # Logs an earlier version wrote through triggers on `items`, which the write path writes itself now:
            # the stream records (sqlite_streams) and the recovery log (sqlite_backups).
            drop_triggers(db, "stream_on_")
            drop_triggers(db, "recovery_on_")
            add_columns(db, "tokens", {"sizes": "BLOB"})
            # A process killed between a commit and its notice left the other processes' cached descriptions
            # (and read snapshots) stale: every engine opening the store (a worker replacing a dead one, too)
            # bumps both counters, so the others look again.
            self._signal.bump()
            self._commit()
        except BaseException:
            self._rollback()
            raise

    # --- catalog ------------------------------------------------------------------------------
    def _read(self) -> sqlite3.Connection:
        """The connection, for reading: inside a write transaction as it is, else inside a read snapshot that
        includes every write any worker committed before this call.

        Requests of one event-loop pass share the snapshot (one BEGIN instead of a read transaction per
        statement) until some worker commits, which bumps the shared commit counter and so renews it;
        `end_reads` lets it go at the end of the pass."""
        db = self._db
        if self._held:  # (inside the group's transaction: its reads see the writes held back)
            self._persist_held()
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

    def unavailable(self, error: BaseException) -> bool:
        if isinstance(error, self._driver.operational_error) and \
                getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            self._reserve.give_up()
            return True
        return False

    def optimize(self) -> bool:
        """The write-ahead log folded in and emptied, the file rebuilt without free pages (VACUUM), and the
        planner's statistics refreshed (PRAGMA optimize, SQLite's advice for long-lived connections)."""
        if self.location == ":memory:":
            return False
        self._lock.acquire()  # (no other process writes meanwhile)
        try:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.execute("VACUUM")
            self._db.execute("PRAGMA optimize")
        finally:
            self._lock.release()
        return True

    def keep_reserve(self) -> None:
        self._reserve.hold()

    def _commit(self) -> None:
        try:
            if self._records:  # (the stream records of the transaction's writes, queued)
                self._write_records()
            self._db.execute("COMMIT")
            self._signal.bump_commits()
        finally:
            self._lock.release()

    def _rollback(self) -> None:
        self._forget_records()
        self._held.clear()
        self._held_rows.clear()
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
            self._insert_table(db, meta)
        return meta

    def _insert_table(self, db: sqlite3.Connection, meta: TableMeta) -> None:
        """Inside a DDL transaction: store a new table (CreateTable, and a restore's target)."""
        if db.execute("SELECT 1 FROM tables WHERE name=?", (meta.stored_name,)).fetchone():
            raise ResourceInUseException(f"Table already exists: {meta.name}")
        tid = db.execute("SELECT value FROM catalog WHERE key='next_tid'").fetchone()[0]
        db.execute("UPDATE catalog SET value = value + 1 WHERE key='next_tid'")
        meta.table_id = tid
        self._sync_stream(meta, None, clock.now())
        db.execute("INSERT INTO tables (name, tid, meta) VALUES (?, ?, ?)", (meta.stored_name, tid, meta.to_json()))
        self._bump_catalog()

    def _load_table(self, name: str) -> bytes | None:
        row = self._read().execute("SELECT meta FROM tables WHERE name=?", (name,)).fetchone()
        return None if row is None else bytes(row[0])

    def list_tables(self) -> list[str]:
        return [row[0] for row in self._read().execute("SELECT name FROM tables ORDER BY name")]

    def update_table(self, meta: TableMeta) -> None:
        with self._transaction(ddl=True) as db:
            row = db.execute("SELECT meta FROM tables WHERE name=?", (meta.stored_name,)).fetchone()
            self._expect(None if row is None else row[0], meta)
            meta.version += 1
            stored = TableMeta.from_json(row[0])
            self._sync_stream(meta, stored, clock.now())
            # Entries of an index the change removes go with it: nothing can be left orphaned by a crash.
            kept = {index.index_id for index in meta.indexes}
            for index in stored.indexes:
                if index.index_id not in kept:
                    db.execute("DELETE FROM index_entries WHERE tid=? AND iid=?", (meta.table_id, index.index_id))
            vectors = {index.index_id for index in meta.vector_indexes}
            self.drop_vector_entries(db, meta.table_id,
                                     [i.index_id for i in stored.vector_indexes if i.index_id not in vectors])
            db.execute("UPDATE tables SET meta=? WHERE name=?", (meta.to_json(), meta.stored_name))
            self._bump_catalog()

    def delete_table(self, name: str, expected: TableMeta | None = None) -> None:
        with self._transaction(ddl=True) as db:
            row = db.execute("SELECT tid, meta FROM tables WHERE name=?", (name,)).fetchone()
            if expected is not None:
                self._expect(None if row is None else row[1], expected)
            if row is not None:
                self._sync_stream(None, TableMeta.from_json(row[1]), clock.now())
                self._drop_recovery(row[0])  # (first: the rows' deletion is not a change to log)
                db.execute("DELETE FROM items WHERE tid=?", (row[0],))
                db.execute("DELETE FROM index_entries WHERE tid=?", (row[0],))
                self.drop_vector_entries(db, row[0], None)
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

    def try_lease(self, name: str, holder: str, seconds: float, now: float) -> bool:
        with self._transaction() as db:
            found = db.execute("SELECT holder, expires FROM leases WHERE name=?", (name,)).fetchone()
            if found is not None and found[0] != holder and found[1] > now:
                return False
            db.execute("INSERT OR REPLACE INTO leases (name, holder, expires) VALUES (?, ?, ?)",
                       (name, holder, now + seconds))
            return True

    def save_splits(self, splits: Mapping[str, int]) -> None:
        with self._transaction() as db:
            db.executemany("INSERT OR IGNORE INTO partition_splits (key, boundary) VALUES (?, ?)", splits.items())

    def load_splits(self) -> dict[str, int]:
        return dict(self._read().execute("SELECT key, boundary FROM partition_splits").fetchall())

    def get_token(self, token: str) -> RequestToken | None:
        found = self._read().execute(GET_TOKEN, (token,)).fetchone()
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
            self._close_backups()
            self._db.close()
            self._lock.close()
            self._signal.close()
