"""The scale-out engine: PostgreSQL (and the engines that speak its protocol) through psycopg 3.

Layout (see docs/SCALE-OUT.md): `openddb_items (tid, h, pk, sk, size, data)` with primary key
`(tid, h, pk, sk)`: `h` is the 32-bit partition hash (the distribution column on Citus), `pk`/`sk` the
order-preserving key encodings as `bytea`, `data` the item's JSON bytes, returned unchanged. A Query is a
B-tree range read on one `(tid, h, pk)` prefix. A partition key longer than 512 bytes is held in `pk` as its first
bytes and its SHA-256, and whole in `pkx` (PostgreSQL holds a B-tree row to 2,704 bytes; see
`postgres_indexes.stored_key`). `openddb_tables` is the catalog, `openddb_catalog` holds the
schema version, the catalog version (bumped by every DDL) and the table-id counter.
Secondary index entries live in `openddb_index_entries` (schema version 2), maintained inside `write`; see
`postgres_indexes.py`. Stream records (schema version 6) are appended inside `write` too; see `postgres_streams.py`.

Up to three connections per process: the server runs every request on one event-loop thread and engine calls are
synchronous, so one connection serves at a time; the others are where the previous groups' COMMITs wait for
PostgreSQL's WAL flush (`send_commit`, up to COMMITS_IN_FLIGHT), so the node goes on serving meanwhile. A pool
would only add a check-out per call.
Several processes (nodes) share the database; each keeps a cache of table descriptions that a DDL on any node
invalidates through NOTIFY (a socket poll per look-up, no round trip), or, where LISTEN is unsupported
(CockroachDB, YugabyteDB), by reading the catalog version on each look-up.

Isolation: every write runs at READ COMMITTED and locks each key it reads until it commits (strict two-phase
locking on keys, hence serializable). A single-item write locks a present row with `SELECT ... FOR UPDATE` (a
concurrent writer waits, then sees the committed row: a hot counter needs no retries) and creates an absent one
with a plain INSERT, so a racing creator makes it fail with a unique violation and the write runs again. A
multi-item write locks every key in key order with one `INSERT ... ON CONFLICT DO UPDATE` each: a present row
gets a no-op update, an absent key an uncommitted placeholder row that concurrent writers of that key wait for.
Deadlocks and unique violations are retried a few times, then reported as TransactionConflictException.

A write's statements are pipelined (`postgres_pipeline.py`: libpq's pipeline mode, prepared statements, one send
per round trip): a single-item write sends BEGIN, the catalog row's lock and the item's lock in one round trip, and
its row change with COMMIT in a second. With `group_commit` (a server's engine) the writes of one event-loop pass
share one transaction and one COMMIT, each under a savepoint, and the change of a present row a write locked goes
out with the connection's next statements (the next write's locks, a read, the COMMIT): one round trip per write;
see `_group_write` and docs/SCALE-OUT.md.
"""

from __future__ import annotations

import logging
import random
import select
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple, TypeVar

import orjson
import psycopg
from psycopg import errors as pgerrors
from psycopg import pq

from openddb import clock
from openddb.errors import LimitExceededException, ResourceInUseException, TransactionConflictException
from openddb.model import Item
from openddb.model.schema import TableMeta
from openddb.model.values import item_size
from openddb.storage import postgres_throttle
from openddb.storage.base import (
    TOKEN_LIFETIME,
    CatalogChanged,
    CommitResult,
    Engine,
    EngineBusy,
    IndexKey,
    QueryStart,
    ReadsAhead,
    RequestToken,
    Row,
    ScanStart,
    SortRange,
    StorageKey,
    TokenInUse,
    WriteOp,
    WriteResult,
    WriteSession,
    add_sort_clauses,
    charged_sizes,
    is_stored_version,
)
from openddb.storage.postgres_backups import PostgresBackups, recovery_clock
from openddb.storage.postgres_indexes import (
    ENTRY_KEY_LIMIT,
    INDEX_MIGRATION,
    ITEM_KEY_LIMIT,
    TABLE_VERSION,
    TABLE_VERSION_NOWAIT,
    ItemKey,
    Migration,
    PostgresIndexes,
    entry_key,
    index_query_statement,
    index_scan_statement,
    one_row,
    read_key,
    stored_key,
    whole_keys,
)
from openddb.storage.postgres_locks_ahead import (
    DELETE_ITEM,
    ITEM_KEY,
    LOCK_ITEM,
    LOCK_ITEM_NOWAIT,
    UPDATE_ITEM,
    PostgresLocksAhead,
    item_key,
)
from openddb.storage.postgres_pipeline import BYTEA, INT8, Pipeline, Sent
from openddb.storage.postgres_replicas import PRIMARY_POSITION, Replica, Replicas
from openddb.storage.postgres_streams import (
    STREAM_MIGRATION,
    PendingRecord,
    PostgresStreams,
    change_record,
    is_shard_due,
)
from openddb.storage.postgres_vectors import VECTOR_MIGRATION, VECTOR_SEQ_MIGRATION, PostgresVectors

log = logging.getLogger("openddb.storage")

SCHEMA_VERSION = 9
CHANNEL = "openddb_catalog"
MAX_ATTEMPTS = 10
LOCK_TIMEOUT_MS = 2000
# Group commit: a lock wait inside a group longer than this commits the group and runs the write on its own (see
# `_group_write`); a group commits early at this many writes, as each write is a subtransaction and PostgreSQL
# keeps 64 subtransaction ids per backend in shared memory before every snapshot taken elsewhere grows dearer.
GROUP_LOCK_TIMEOUT_MS = 1
GROUP_WRITES = 48
# Group commits left in flight at once (see `send_commit`), each on a connection of its own: a group that formed
# while one commit waits for PostgreSQL's WAL flush sends its COMMIT at the end of its pass instead of waiting for
# that flush to be answered first.
COMMITS_IN_FLIGHT = 2
_GROUP_BOUND = f"SET LOCAL lock_timeout = '{GROUP_LOCK_TIMEOUT_MS}ms'"
_LONE_BOUND = f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT_MS}ms'"


def _store_long_keys(cur: psycopg.Cursor[Any]) -> None:
    """Schema 5: rows whose keys were stored whole but are past the limits of `stored_key` take the new form."""
    rows = cur.execute("SELECT tid, h, pk, sk FROM openddb_items WHERE length(pk) > %s", (ITEM_KEY_LIMIT,)).fetchall()
    log.info("schema 5: storing %d long item keys anew", len(rows))
    if rows:
        cur.executemany("UPDATE openddb_items SET pk=%s, pkx=%s WHERE tid=%s AND h=%s AND pk=%s AND sk=%s",
                        [(stored_key(pk, ITEM_KEY_LIMIT), pk, tid, h, pk, sk) for tid, h, pk, sk in rows])
    rows = cur.execute("SELECT tid, iid, h, pk, sk, tpk, tsk FROM openddb_index_entries "
                       "WHERE length(pk) > %s OR length(tpk) > %s OR length(tsk) > %s",
                       (ENTRY_KEY_LIMIT,) * 3).fetchall()
    log.info("schema 5: storing %d long index entry keys anew", len(rows))
    updates = []
    for tid, iid, h, pk, sk, tpk, tsk in rows:
        stored = entry_key(tid, iid, h, pk, sk, tpk, tsk)
        updates.append((stored[3], stored[5], stored[6], *whole_keys(pk, tpk, tsk), tid, iid, h, pk, sk, tpk, tsk))
    if updates:
        cur.executemany("UPDATE openddb_index_entries SET pk=%s, tpk=%s, tsk=%s, pkx=%s, tpkx=%s, tskx=%s WHERE "
                        "tid=%s AND iid=%s AND h=%s AND pk=%s AND sk=%s AND tpk=%s AND tsk=%s", updates)


# Migrations: target version -> steps (statements, or functions of the cursor). Only portable DDL (no
# extensions, no PostgreSQL-only types).
_CATALOG_TABLE = "CREATE TABLE IF NOT EXISTS openddb_catalog (key VARCHAR(64) PRIMARY KEY, value BIGINT NOT NULL)"
_MIGRATIONS: dict[int, list[Migration]] = {
    1: [
        _CATALOG_TABLE,
        "CREATE TABLE IF NOT EXISTS openddb_tables (name VARCHAR(1024) PRIMARY KEY, tid BIGINT NOT NULL UNIQUE, "
        "version BIGINT NOT NULL, meta BYTEA NOT NULL)",
        "CREATE TABLE IF NOT EXISTS openddb_items (tid BIGINT NOT NULL, h BIGINT NOT NULL, pk BYTEA NOT NULL, "
        "sk BYTEA NOT NULL, size INTEGER NOT NULL, data BYTEA NOT NULL, PRIMARY KEY (tid, h, pk, sk))",
        "CREATE TABLE IF NOT EXISTS openddb_tokens (token VARCHAR(1024) PRIMARY KEY, hash BYTEA NOT NULL, "
        "created_at DOUBLE PRECISION NOT NULL)",
        "CREATE INDEX IF NOT EXISTS openddb_tokens_by_age ON openddb_tokens (created_at)",
    ],
    2: INDEX_MIGRATION,  # secondary index entries (postgres_indexes.py)
    3: ["CREATE TABLE IF NOT EXISTS openddb_leases (name VARCHAR(255) PRIMARY KEY, holder VARCHAR(255) NOT NULL, "
        "expires DOUBLE PRECISION NOT NULL)"],
    4: ["ALTER TABLE openddb_tokens ADD COLUMN sizes BYTEA"],  # what each write of a request was charged on
    # Long keys held as a prefix and a digest, whole beside (see postgres_indexes.stored_key); the keys stored
    # whole before, which were short enough for PostgreSQL's B-tree, are rewritten when past the new limits.
    5: ["ALTER TABLE openddb_items ADD COLUMN pkx BYTEA",
        "ALTER TABLE openddb_index_entries ADD COLUMN pkx BYTEA",
        "ALTER TABLE openddb_index_entries ADD COLUMN tpkx BYTEA",
        "ALTER TABLE openddb_index_entries ADD COLUMN tskx BYTEA",
        _store_long_keys,
        # A node of an older version still running would write a long key whole, beside its stored form: refused.
        f"ALTER TABLE openddb_items ADD CONSTRAINT openddb_items_stored_pk CHECK (length(pk) <= {ITEM_KEY_LIMIT + 1})",
        f"ALTER TABLE openddb_index_entries ADD CONSTRAINT openddb_index_entries_stored_keys CHECK (length(pk) <= "
        f"{ENTRY_KEY_LIMIT + 1} AND length(tpk) <= {ENTRY_KEY_LIMIT + 1} AND length(tsk) <= {ENTRY_KEY_LIMIT + 1})"],
    6: STREAM_MIGRATION,  # DynamoDB Streams (postgres_streams.py)
    7: VECTOR_MIGRATION,  # vector indexes (postgres_vectors.py)
    8: VECTOR_SEQ_MIGRATION,  # vector partitions' change sequences and tombstones (postgres_vectors.py)
    # the throttle's partition splits, kept across restarts (api/partition_splits.py)
    9: ["CREATE TABLE IF NOT EXISTS openddb_partition_splits (key TEXT PRIMARY KEY, boundary BIGINT NOT NULL)"],
}
# Take or renew a lease in one statement: the row changes only if it is free, expired or already ours.
_LEASE = ("INSERT INTO openddb_leases (name, holder, expires) VALUES (%s, %s, %s) ON CONFLICT (name) DO UPDATE "
          "SET holder = EXCLUDED.holder, expires = EXCLUDED.expires "
          "WHERE openddb_leases.expires <= %s OR openddb_leases.holder = EXCLUDED.holder RETURNING holder")

_GET = f"SELECT size, data FROM openddb_items WHERE {ITEM_KEY}"
_INSERT = "INSERT INTO openddb_items (tid, h, pk, sk, size, data, pkx) VALUES (%s, %s, %s, %s, %s, %s, %s)"
_LOCK_OR_HOLD = ("INSERT INTO openddb_items (tid, h, pk, sk, size, data, pkx) VALUES (%s, %s, %s, %s, -1, '', %s) "
                 "ON CONFLICT (tid, h, pk, sk) DO UPDATE SET size = openddb_items.size RETURNING size, data")
_LOCK_OR_HOLD_TYPES = (INT8, INT8, BYTEA, BYTEA, BYTEA)
_LOCK_TOKEN = "SELECT hash, created_at, sizes FROM openddb_tokens WHERE token=%s FOR UPDATE"
_INSERT_TOKEN = "INSERT INTO openddb_tokens (token, hash, created_at) VALUES (%s, %s, %s)"
_UPDATE_TOKEN = "UPDATE openddb_tokens SET hash=%s, created_at=%s, sizes=NULL WHERE token=%s"
_SIZE_TOKEN = "UPDATE openddb_tokens SET sizes=%s WHERE token=%s"
# Expired tokens are swept once every this many token writes (per node), so the table stays small.
_TOKEN_SWEEP_EVERY = 256
_VERSION = "SELECT value FROM openddb_catalog WHERE key='catalog_version'"

# Errors after which the whole transaction is run again: the outcome of a retry is a fresh, correct decision.
_RETRYABLE = (pgerrors.SerializationFailure, pgerrors.DeadlockDetected, pgerrors.UniqueViolation,
              pgerrors.LockNotAvailable)


def query_statement(tid: int, h: int, pk: bytes, sort: SortRange, forward: bool, after: bytes | None,
                    limit: int) -> tuple[str, list[Any]]:
    """The SQL and parameters of one page of a Query: a range read on the primary key's (tid, h, pk) prefix."""
    clauses = ["tid=%s", "h=%s", "pk=%s"]
    params: list[Any] = [tid, h, stored_key(pk, ITEM_KEY_LIMIT)]
    add_sort_clauses(sort, "%s", clauses, params)
    if after is not None:
        clauses.append("sk>%s" if forward else "sk<%s")
        params.append(after)
    params.append(limit)
    return (f"SELECT sk, size, data FROM openddb_items WHERE {' AND '.join(clauses)} "
            f"ORDER BY sk {'ASC' if forward else 'DESC'} LIMIT %s"), params


def scan_statement(tid: int, h_low: int, h_high: int, after: StorageKey | None,
                   limit: int) -> tuple[str, list[Any]]:
    """The SQL and parameters of one page of a Scan segment, in (h, pk, sk) order."""
    if after is None:
        return ("SELECT h, pk, sk, size, data, pkx FROM openddb_items WHERE tid=%s AND h>=%s AND h<%s "
                "ORDER BY h, pk, sk LIMIT %s"), [tid, h_low, h_high, limit]
    return ("SELECT h, pk, sk, size, data, pkx FROM openddb_items WHERE tid=%s AND h>=%s AND h<%s "
            "AND (h, pk, sk) > (%s, %s, %s) ORDER BY h, pk, sk LIMIT %s"), \
        [tid, h_low, h_high, after.h, stored_key(after.pk, ITEM_KEY_LIMIT), after.sk, limit]


FIRST_PAGE = 16  # rows of a keyset read's first page
# Reads fetched ahead for a pass (see `PostgresEngine.read_ahead`) share one snapshot: a BatchGetItem or a
# TransactGetItems answered from them reads its items as of one moment, as from the primary it always does.
_SNAPSHOT = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

Statement = tuple[str, tuple[Any, ...]]


def first_page(start: QueryStart | ScanStart) -> Statement:
    """The statement of the first page a Query or Scan reads, as `query`, `index_query`, `scan` or `index_scan`
    sends it."""
    tid = start.table.table_id
    if isinstance(start, QueryStart):
        if start.index is None:
            assert start.after is None or isinstance(start.after, bytes)
            sql, params = query_statement(tid, start.h, start.pk, start.sort, start.forward, start.after, FIRST_PAGE)
        else:
            assert start.after is None or isinstance(start.after, IndexKey)
            sql, params = index_query_statement(tid, start.index.index_id, start.h, start.pk, start.sort,
                                                start.forward, start.after, FIRST_PAGE)
    elif start.index is None:
        assert start.after is None or isinstance(start.after, StorageKey)
        sql, params = scan_statement(tid, start.low, start.high, start.after, FIRST_PAGE)
    else:
        assert start.after is None or isinstance(start.after, IndexKey)
        sql, params = index_scan_statement(tid, start.index.index_id, start.low, start.high, start.after, FIRST_PAGE)
    return sql, tuple(params)


def statements_ahead(reads: ReadsAhead) -> list[Statement]:
    """The statements (each once) that read what `reads` names."""
    statements: dict[Statement, None] = {}
    for meta, key in reads.gets:
        statements[(_GET, item_key(meta.table_id, key))] = None
    for query in reads.queries:
        statements[first_page(query)] = None
    for scan in reads.scans:
        statements[first_page(scan)] = None
    return list(statements)


def _pages(first: int = FIRST_PAGE, largest: int = 1024) -> Iterator[int]:
    """Page sizes for keyset reads: small first (a Query with Limit=1 reads little), growing geometrically."""
    size = first
    while True:
        yield size
        size = min(size * 4, largest)


T = TypeVar("T")


class PostgresEngine(PostgresLocksAhead, PostgresStreams, PostgresIndexes, PostgresVectors, PostgresBackups, Engine):
    def __init__(self, url: str, *, listen: bool | None = None, group_commit: bool = False,
                 replicas: Sequence[str] = (), replica_max_lag: float = 1.0) -> None:
        """Connect to `url` (a postgresql:// URL), creating or migrating the schema.

        `listen`: invalidate the table cache through LISTEN/NOTIFY (None: if the server supports it).
        `group_commit`: `write` leaves its transaction open for `commit` (see `WriteSession` and `_group_write`);
        without it every write commits on its own and the group is never pending. `replicas`: streaming
        replicas' URLs, which may serve eventually consistent reads up to `replica_max_lag` seconds behind (see
        postgres_replicas.py)."""
        self.url = url
        self.location = _redact(url)
        self.session = WriteSession()
        self.group_commit = group_commit
        self.remote_commits = group_commit  # (a group's COMMIT may be left in flight: see `send_commit`)
        self.commits_in_flight = COMMITS_IN_FLIGHT
        self._group_writes = 0  # writes in the open group
        self._group_lost = False  # the open group's transaction was lost (a broken connection): see `commit`
        self._release_due = False  # the group's last write left its savepoint to release (see `_group_write`)
        # Statements queued on `_pipe` by earlier writes of the group, not yet sent (see `_group_write`), and
        # whether the last write's must go at once.
        self._carried = 0
        self._send_now = False
        # The open group's lock_timeout once the statements queued have run (the session's LOCK_TIMEOUT_MS when it
        # begins), and what it was when the last write's savepoint was taken (a rollback to it restores that).
        self._bound_ms = LOCK_TIMEOUT_MS
        self._bound_at_savepoint = LOCK_TIMEOUT_MS
        self._locked = {}  # rows locked ahead for the pass's writes (postgres_locks_ahead.py)
        self._listen_wanted = listen
        self._tables: dict[str, TableMeta] = {}
        self._live: dict[int, tuple[int, TableMeta]] = {}
        self._stream_shards: dict[int, int] = {}
        self._roll_due = True  # see write
        self._appending: list[tuple[int, int]] = []
        self._catalog_version = -1
        self._stale = True
        self._token_writes = 0
        self._draws_table = False  # the throttle's shared draws table is known to exist (postgres_throttle.py)
        self._conn = self._connect()
        self._replicas = Replicas([Replica(replica, _redact(replica)) for replica in replicas], self._wal_position,
                                  replica_max_lag) if replicas else None
        self.replicated = self._replicas is not None
        # Reads fetched ahead for the requests of a pass (see `read_ahead`), by statement and parameters: from the
        # primary, and those that may be eventually consistent from a replica (only they may use these).
        self.reads_ahead = True
        self._ahead: dict[Statement, list[tuple[Any, ...]]] = {}
        self._ahead_eventual: dict[Statement, list[tuple[Any, ...]]] = {}
        # With remote commits (see `send_commit`): the connections whose group COMMIT is in flight and what each
        # sent, oldest first (taken off by `wait_for_commit`, on the helper thread: a deque's appends and pops are
        # atomic), their answers read and not yet finished (the error, or None: durable), how many commits are
        # sent and not finished, and the connections not in use.
        self._in_flight: deque[tuple[_Link, Sent]] = deque()
        self._answered: deque[tuple[_Link, BaseException | None]] = deque()
        self._commits_out = 0
        self._spares: list[_Link] = []
        self._migrate()
        self.enable_pgvector()

    # --- connection ---------------------------------------------------------------------------
    def _connect(self) -> psycopg.Connection[Any]:
        # autocommit: transactions are explicit (BEGIN with the isolation level each write needs);
        # prepare_threshold=0: every statement is a prepared statement from its first use.
        conn = psycopg.connect(self.url, autocommit=True, prepare_threshold=0)
        # Engine calls run on the node's event loop: a lock held by a node that stopped answering (not one that
        # died: the server frees its locks) must not stall this node for good. A write whose lock wait times out
        # is retried (see _RETRYABLE), then answered TransactionConflictException.
        self._bounded_locks = True
        try:
            conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT_MS}ms'")
        except psycopg.Error:  # an engine speaking the protocol without the setting: keep its default
            self._bounded_locks = False
            log.info("the engine does not take lock_timeout; lock waits are not bounded")
        self.listening = False
        if self._listen_wanted is not False:
            try:
                conn.execute(f"LISTEN {CHANNEL}")
                self.listening = True
            except psycopg.Error:
                if self._listen_wanted:
                    raise
        conn.add_notify_handler(self._on_notify)
        conn.add_notice_handler(self._on_notice)
        self._closing = False
        self._arrivals = select.poll()  # (not select(): a node with many clients has descriptors past 1024)
        self._arrivals.register(conn.pgconn.socket, select.POLLIN)
        self._cur = conn.cursor(binary=True)
        self._pipe = Pipeline(conn, self._on_raw_notify)
        self._tables.clear()
        self._stale = True
        return conn

    def _link(self) -> _Link:
        return _Link(self._conn, self._cur, self._pipe, self._arrivals, self._closing)

    def _use(self, link: _Link | None) -> None:
        """Serve on `link` from now on (a new connection if None or no longer usable)."""
        if link is None or link.conn.closed or link.conn.broken:
            if link is not None:
                link.conn.close()
            self._conn = self._connect()
        else:
            self._conn, self._cur, self._pipe, self._arrivals, self._closing = link

    def _on_notify(self, _notify: psycopg.Notify) -> None:
        self._stale = True

    def _on_raw_notify(self) -> None:  # (a notification read by `Pipeline`)
        self._stale = True

    def _rows(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """The rows of one statement, in one round trip (see postgres_pipeline.py)."""
        self._checked()
        self._pipe.add(sql, params)
        return self._run()[-1]

    def _run(self) -> list[list[tuple[Any, ...]]]:
        """Send what `_pipe` holds (see `Pipeline.run`). If a statement carried from an earlier write of the group
        fails (see `_group_write`), the whole group is lost: that write was already answered (held)."""
        carried, self._carried = self._carried, 0
        try:
            return self._pipe.run()
        except psycopg.Error:
            if not carried or self._pipe.failed_at >= carried:  # (-1: the connection failed)
                raise
            log.warning("a write of a group failed after its answer was made: the group is lost", exc_info=True)
            self._lose_group()
            raise

    @contextmanager
    def _batched(self) -> Iterator[None]:
        """Inside a write: psycopg's statements of this scope pipelined, behind those queued on `_pipe` (sent
        through psycopg too when they are plain commands, so in the same round trip)."""
        commands = self._pipe.take_commands()
        if commands is None:
            self._run()
        with self._conn.pipeline():
            for command in commands or ():
                self._cur.execute(command)
            yield

    def _on_notice(self, diagnostic: psycopg.errors.Diagnostic) -> None:
        # The server's farewell before it closes an idle connection (shutdown, pg_terminate_backend) arrives as
        # a FATAL notice; the end of the stream may follow a moment later.
        if diagnostic.severity_nonlocalized == "FATAL":
            self._closing = True

    def _cursor(self) -> psycopg.Cursor[Any]:
        """The process's cursor, at the start of an engine call (see `_checked`), with the statements an earlier
        write of the group left queued on `_pipe` sent first (psycopg's statements would overtake them)."""
        cur = self._checked()
        if self._carried:
            self._run()
        return cur

    def _checked(self) -> psycopg.Cursor[Any]:
        """The process's cursor, at the start of an engine call; reconnects first if the connection was lost (a
        server restart, a failover), also when the loss happened while the connection sat idle and nothing has
        noticed it yet: then the socket holds only the server's farewell (a FATAL notice) and the end of the
        stream, read here without a round trip, so the call goes out over a new connection instead of failing."""
        conn = self._conn
        if not (conn.closed or conn.broken) and conn.pgconn.transaction_status == pq.TransactionStatus.IDLE:
            try:
                self._poll(conn.pgconn)
            except psycopg.OperationalError:  # the server closed it: `broken` now says so
                pass
        if self.session.pending and (conn.closed or conn.broken or
                                     conn.pgconn.transaction_status == pq.TransactionStatus.INERROR):
            self._lose_group()
        if conn.closed or conn.broken or self._closing:
            log.warning("reconnecting to %s", self.location)
            conn.close()
            self._conn = self._connect()
        return self._cur

    def _poll(self, pgconn: Any) -> None:
        """Read whatever arrived while the connection was idle: catalog notifications (the table cache is then
        stale), or the end of a connection the server closed (OperationalError)."""
        while self._arrivals.poll(0):
            pgconn.consume_input()
            while pgconn.notifies() is not None:
                self._stale = True

    def _migrate(self) -> None:
        cur = self._cursor()
        for attempt in range(MAX_ATTEMPTS):
            try:
                cur.execute("BEGIN")
                if self._bounded_locks:  # a node starting beside one that migrates waits for it, however long
                    cur.execute("SET LOCAL lock_timeout = 0")
                cur.execute(_CATALOG_TABLE)
                # Serialises concurrent starts: the second node waits here, then finds the schema current.
                cur.execute("INSERT INTO openddb_catalog VALUES ('schema_version', 0) ON CONFLICT (key) DO NOTHING")
                row = one_row(cur, "SELECT value FROM openddb_catalog WHERE key='schema_version' FOR UPDATE")
                current = int(row[0])
                if current > SCHEMA_VERSION:
                    raise RuntimeError(f"the database has schema version {current}; this OpenDDB knows only "
                                       f"up to {SCHEMA_VERSION}: upgrade OpenDDB")
                for version in range(current + 1, SCHEMA_VERSION + 1):
                    for statement in _MIGRATIONS[version]:
                        if callable(statement):
                            statement(cur)
                        else:
                            cur.execute(statement)
                cur.execute("INSERT INTO openddb_catalog VALUES ('catalog_version', 0), ('next_tid', 1) "
                            "ON CONFLICT (key) DO NOTHING")
                cur.execute("UPDATE openddb_catalog SET value=%s WHERE key='schema_version'", (SCHEMA_VERSION,))
                cur.execute("COMMIT")
                return
            except (*_RETRYABLE, pgerrors.DuplicateTable, pgerrors.DuplicateObject):
                # Two nodes racing through CREATE TABLE IF NOT EXISTS: the loser retries and finds it done.
                self._rollback()
                if attempt == MAX_ATTEMPTS - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
            except BaseException:
                self._rollback()
                raise

    def _rollback(self) -> None:
        if not self._conn.broken and not self._conn.closed:
            self._pipe.clear()
            self._command("ROLLBACK")

    def _command(self, command: str) -> str:
        """Run a command (with whatever is queued) through `_pipe`; its tag. Transaction ends go this way, not
        through psycopg, which on seeing a ROLLBACK tag deallocates every prepared statement of the connection
        (the pipeline's too)."""
        self._pipe.add(command)
        self._run()
        return self._pipe.tags[-1]

    @contextmanager
    def _transaction(self, begin: str = "BEGIN") -> Iterator[psycopg.Cursor[Any]]:
        """One transaction, not retried (compare `_transact`): committed when the body returns, rolled back when
        it raises. An open group commits first."""
        self._end_group()
        cur = self._cursor()
        cur.execute(begin)
        try:
            yield cur
            self._command("COMMIT")
        except BaseException:
            self._rollback()
            raise

    @contextmanager
    def _ddl_transaction(self) -> Iterator[psycopg.Cursor[Any]]:
        """A table change's transaction. Table changes take turns on the `next_tid` row, which a DeleteTable holds
        while it deletes the table's rows: a wait past lock_timeout is answered LimitExceededException, which
        the SDKs retry after a pause, rather than blocking this node's event loop any longer."""
        try:
            with self._transaction() as cur:
                yield cur
        except pgerrors.LockNotAvailable:
            # (DynamoDB's prefix for its limits on simultaneous table operations; the rest is ours)
            raise LimitExceededException("Subscriber limit exceeded: another table operation still in progress "
                                         "holds back this one; try again") from None

    # --- catalog ------------------------------------------------------------------------------
    def _refresh_catalog(self) -> None:
        """Drop cached table descriptions if any node changed the catalog since we last looked."""
        # (which reads the notifications that arrived while idle: no round trip; and a catalog read may overtake
        # the item changes left queued)
        cur = self._checked()
        if self.listening:
            if not self._stale:
                return
            self._stale = False
        version = one_row(cur, _VERSION)[0]
        if version != self._catalog_version:
            self._catalog_version = version
            self._tables.clear()

    def _ddl(self, cur: psycopg.Cursor[Any]) -> None:
        """Inside a DDL transaction: bump the catalog version and tell the other nodes (delivered on commit)."""
        cur.execute("UPDATE openddb_catalog SET value = value + 1 WHERE key='catalog_version'")
        if self.listening:
            cur.execute(f"NOTIFY {CHANNEL}")
        self._tables.clear()
        self._stale = True

    def create_table(self, meta: TableMeta) -> TableMeta:
        with self._ddl_transaction() as cur:
            self._insert_table(cur, meta)
        return meta

    def _insert_table(self, cur: psycopg.Cursor[Any], meta: TableMeta) -> None:
        """Inside a DDL transaction: store a new table (CreateTable, and a restore's target)."""
        # Locking the counter row serialises DDL across nodes.
        tid = one_row(cur, "UPDATE openddb_catalog SET value = value + 1 WHERE key='next_tid' RETURNING value - 1")[0]
        if cur.execute("SELECT 1 FROM openddb_tables WHERE name=%s", (meta.stored_name,)).fetchone():
            raise ResourceInUseException(f"Table already exists: {meta.name}")
        meta.table_id = int(tid)
        if meta.stream is not None:  # (assigns the stream's id, which the stored description then holds)
            self._store_stream(cur, meta, clock.now())
        cur.execute("INSERT INTO openddb_tables (name, tid, version, meta) VALUES (%s, %s, 1, %s)",
                    (meta.stored_name, tid, meta.to_json()))
        self._ddl(cur)

    def _load_table(self, name: str) -> bytes | None:
        if "\x00" in name:  # text cannot hold NUL, and no table name can (CreateTable checks its pattern)
            return None
        row = self._cur.execute("SELECT meta FROM openddb_tables WHERE name=%s", (name,)).fetchone()
        return None if row is None else bytes(row[0])

    def restored_tables(self) -> list[TableMeta]:
        # One query, filtered in the database (a description's JSON says "restore":null unless a restore made the
        # table): a store other nodes keep changing keeps emptying the cache of descriptions.
        rows = self._cursor().execute("SELECT meta FROM openddb_tables "
                                      "WHERE position('\"restore\":null'::bytea IN meta) = 0")
        return [TableMeta.from_json(bytes(row[0])) for row in rows]

    def list_tables(self) -> list[str]:
        # Sorted here, by code point like the embedded engine, whatever the database's collation.
        return sorted(row[0] for row in self._cursor().execute("SELECT name FROM openddb_tables"))

    def update_table(self, meta: TableMeta) -> None:
        with self._ddl_transaction() as cur:
            cur.execute("UPDATE openddb_catalog SET value = value WHERE key='next_tid'")
            row = cur.execute("SELECT meta FROM openddb_tables WHERE name=%s FOR UPDATE",
                              (meta.stored_name,)).fetchone()
            self._expect(None if row is None else bytes(row[0]), meta)
            # Creates, or disables, the table's stream; the writes that hold this table's catalog row have all
            # committed (FOR UPDATE above waited for them), and later ones will read the description stored here.
            self._store_stream(cur, meta, clock.now())
            # Entries of an index the change removes go with it: a crash cannot leave them orphaned.
            kept = {index.index_id for index in meta.indexes}
            for index in TableMeta.from_json(bytes(row[0])).indexes if row is not None else ():
                if index.index_id not in kept:
                    cur.execute("DELETE FROM openddb_index_entries WHERE tid=%s AND iid=%s",
                                (meta.table_id, index.index_id))
            if row is not None:
                vectors = {index.index_id for index in meta.vector_indexes}
                self.drop_vector_entries(cur, meta.table_id, [i.index_id for i in
                                         TableMeta.from_json(bytes(row[0])).vector_indexes
                                         if i.index_id not in vectors])
            meta.version += 1
            cur.execute("UPDATE openddb_tables SET meta=%s, version = version + 1 WHERE name=%s",
                        (meta.to_json(), meta.stored_name))
            self._ddl(cur)

    def _expect(self, stored: bytes | None, expected: TableMeta) -> None:
        """Inside a DDL transaction: CatalogChanged (and the cached descriptions dropped, so the request's next
        attempt reads them afresh) unless the stored description is the version `expected` was derived from."""
        if not is_stored_version(stored, expected):
            self._tables.clear()
            self._stale = True
            raise CatalogChanged()

    def delete_table(self, name: str, expected: TableMeta | None = None) -> None:
        with self._ddl_transaction() as cur:
            cur.execute("UPDATE openddb_catalog SET value = value WHERE key='next_tid'")
            if expected is not None:
                row = cur.execute("SELECT meta FROM openddb_tables WHERE name=%s FOR UPDATE", (name,)).fetchone()
                self._expect(None if row is None else bytes(row[0]), expected)
            # The catalog row first: that waits for the writes in flight (they hold it FOR SHARE) and holds back
            # new ones before they lock any item, so deleting the items cannot deadlock with them.
            row = cur.execute("DELETE FROM openddb_tables WHERE name=%s RETURNING tid", (name,)).fetchone()
            if row is not None:
                self._drop_recovery(cur, row[0])  # (first: the rows' deletion is not a change to log)
                cur.execute("DELETE FROM openddb_items WHERE tid=%s", (row[0],))
                cur.execute("DELETE FROM openddb_index_entries WHERE tid=%s", (row[0],))
                self.drop_vector_entries(cur, row[0], None)
                # The table's stream is disabled, not dropped: its records stay readable for the retention period.
                self._disable_streams(cur, row[0], None, clock.now())
                self._live.pop(row[0], None)
                self._ddl(cur)

    def table_stats(self, meta: TableMeta) -> tuple[int, int]:
        count, size = one_row(
            self._cursor(), "SELECT count(*), coalesce(sum(size), 0) FROM openddb_items WHERE tid=%s", (meta.table_id,))
        return int(count), int(size)

    # --- items --------------------------------------------------------------------------------
    def _read_rows(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """The rows of one read statement: fetched ahead for this pass (see `read_ahead`), or from a replica if the
        request's reads may be eventually consistent and one is fresh enough, else from the primary."""
        if self._ahead_eventual and self.eventual_reads and self._replicas is not None:
            rows = self._ahead_eventual.get((sql, tuple(params)))
            if rows is not None:
                self._replicas.served += 1
                return rows
        if self._ahead:
            rows = self._ahead.get((sql, tuple(params)))
            if rows is not None:
                return rows
        if self.eventual_reads and self._replicas is not None:
            rows = self._replicas.rows(sql, params)
            if rows is not None:
                return rows
        return self._rows(sql, params)

    def _wal_position(self) -> int:
        return int(self._rows(PRIMARY_POSITION, ())[0][0])

    def read_ahead(self, reads: ReadsAhead) -> None:
        """Send the reads of a pass's requests in one round trip (one statement each, as `get`, `get_many`,
        `query`, `scan` and their index forms send it), in one read-only snapshot, and keep their rows for those
        requests' own reads, which then make no round trip (a wait, two system calls and a wake-up of
        PostgreSQL's backend each). They are answered at the end of the pass at the earliest, and they arrived
        before these reads were sent, so a read answered from them misses no write acknowledged before it
        arrived: what a strongly consistent read promises. Any write forgets them (a later request of the pass
        reads what it wrote). Only between groups: inside an open transaction a failing statement would cost the
        group; a failure here just leaves each request to read for itself. With replicas, the reads that may be
        eventually consistent (`reads.eventual`) go to a replica fresh enough in one round trip, or if none is,
        with the others."""
        self._ahead, self._ahead_eventual = {}, {}
        statements = statements_ahead(reads)
        if reads.eventual is not None:
            primary = set(statements)
            eventual = [one for one in statements_ahead(reads.eventual) if one not in primary]
            if self._replicas is not None and len(eventual) > 1:
                answers = self._replicas.run(eventual)
                if answers is not None:
                    self._ahead_eventual = dict(zip(eventual, answers, strict=True))
                    eventual = []
            statements += eventual
        if len(statements) < 2:  # (one read saves nothing)
            return
        self._checked()
        if self.session.pending or self._carried or \
                self._conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
            return
        self._pipe.add(_SNAPSHOT)
        for statement, values in statements:
            self._pipe.add(statement, values)
        self._pipe.add("COMMIT")
        try:
            answers = self._pipe.run()
        except psycopg.Error as error:  # (a broken connection is replaced by the next call)
            log.debug("reads ahead failed; each request reads for itself: %s", error)
            self._rollback_quietly()
            return
        self._ahead = dict(zip(statements, answers[1:-1], strict=True))

    def end_read_ahead(self) -> None:
        self._ahead, self._ahead_eventual = {}, {}
        self.end_locks_ahead()

    def get(self, meta: TableMeta, key: StorageKey) -> Row | None:
        found = self._read_rows(_GET, item_key(meta.table_id, key))
        if not found:
            return None
        return Row(key, found[0][0], found[0][1])

    def get_many(self, requests: Sequence[tuple[TableMeta, StorageKey]]) -> list[Row | None]:
        if self._ahead:  # (read ahead in one snapshot: if every key was, no round trip)
            ahead = [self._ahead.get((_GET, item_key(meta.table_id, key))) for meta, key in requests]
            fetched = [rows for rows in ahead if rows is not None]
            if len(fetched) == len(requests):
                return [Row(key, rows[0][0], rows[0][1]) if rows else None
                        for (_meta, key), rows in zip(requests, fetched, strict=True)]
        if len(requests) <= 1 or (self.eventual_reads and self._replicas is not None):
            return [self.get(meta, key) for meta, key in requests]  # (eventually consistent: no one snapshot)
        # One snapshot for all reads; the reads themselves go out in one pipelined round trip.
        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") as cur:
            params = [item_key(meta.table_id, key) for meta, key in requests]
            cur.executemany(_GET, params, returning=True)
            rows: list[Row | None] = []
            for _meta, key in requests:
                found = cur.fetchone()
                rows.append(None if found is None else Row(key, found[0], found[1]))
                cur.nextset()
        return rows

    def write(self, ops: Sequence[WriteOp], token: RequestToken | None = None) -> list[WriteResult]:
        self._ahead = {}  # (the rows read ahead may be what this changes; a replica's are as stale as they may be)
        if self._locked:  # (a single-item write of the group on a row locked ahead: no round trip)
            done = self._write_on_locked_row(ops, token is None and self.group_commit)
            if done is not None:
                return done
        # A write guarded by a token commits on its own (the open group first), so the token is durable with it.
        run = self._group_write if token is None and self.group_commit and self._bounded_locks else self._transact

        def body(cur: psycopg.Cursor[Any]) -> list[WriteResult]:
            if token is not None:
                with self._batched():
                    self._record_token(cur, token)
            results = self._write_once(cur, ops)
            if token is not None:  # the sizes a repeat of the request reports
                self._pipe.add(_SIZE_TOKEN, (charged_sizes(results), _token_text(token.token)))
            return results

        try:
            for _attempt in range(MAX_ATTEMPTS):
                try:
                    return run(body, True)
                except pgerrors.NotNullViolation as error:
                    if not is_shard_due(error):
                        raise
                # A stream record found its slot's shard due for rollover, or closed by a rollover it waited for:
                # roll the due shards over, each in a transaction of its own, and run the write again, taking
                # whichever shard is open then, however old (so shards rolling over faster than the write cannot
                # send it round for ever).
                if self._roll_due:
                    self._roll_over(clock.now(), self._appending)
                    self._roll_due = False
        finally:
            self._roll_due = True
        raise TransactionConflictException("Transaction is ongoing for the item")

    def _transact(self, body: Callable[[psycopg.Cursor[Any]], T], queued: bool = False) -> T:
        """Run `body` in one READ COMMITTED transaction, again from the start after a conflict (see _RETRYABLE).
        An open group commits first. `queued`: BEGIN is left queued on `_pipe` for the body to send with its
        first statements (a write's body does: see `_batched`); statements the body leaves queued go with COMMIT."""
        self._end_group()
        cur = self._cursor()
        pipe = self._pipe
        for attempt in range(MAX_ATTEMPTS):
            try:
                pipe.add("BEGIN ISOLATION LEVEL READ COMMITTED")
                if (moved := recovery_clock()) is not None:
                    pipe.add(moved)
                if not queued:
                    self._run()
                result = body(cur)
                pipe.add("COMMIT")
                self._run()
                return result
            except _RETRYABLE as error:
                pipe.clear()
                self._rollback()
                log.debug("write conflict (attempt %d): %s", attempt + 1, error)
                # Blocks this node's event loop, so kept short: just enough to let the other writer finish.
                time.sleep(random.uniform(0, 0.002 * (attempt + 1)))
            except BaseException:
                pipe.clear()
                self._rollback()
                raise
        raise TransactionConflictException("Transaction is ongoing for the item")

    def _group_write(self, body: Callable[[psycopg.Cursor[Any]], T], queued: bool = True) -> T:
        """Run `body` inside the open group's transaction (beginning one), under a savepoint, so a write that
        fails undoes itself alone; the group commits in `commit`, at the end of the server's event-loop pass.

        Inside a group a lock wait is bounded by GROUP_LOCK_TIMEOUT_MS: the group holds the locks of its earlier
        writes, and waiting with them held could deadlock with another node's group (each waiting for the other's
        commit). A write that would wait longer (or meets any conflict) is undone, the group commits, and the
        write runs on its own, waiting as a lone write does: strict two-phase locking either way, and the
        request's answer still waits for the group's commit. Without `session.wait` (a server's engine) a request's
        first write that meets a held lock is put off instead (EngineBusy: the server runs it again shortly, and
        after many tries with `wait`), so the event loop does not wait for another group's commit. A single item's
        locks are taken with NOWAIT (no wait at all), so the common write sets no bound; the statements that may
        wait on another transaction (several items' locks, a creation, index, vector and stream upkeep) are sent
        under the 1 ms bound (`_bound_waits`), a present item's change under the lone writes' (LOCK_TIMEOUT_MS),
        each set only when the transaction's bound is not the one needed already."""
        session = self.session
        if self._group_writes >= GROUP_WRITES:
            self._end_group()
        cur = self._checked()
        pipe = self._pipe
        ahead_only, opened = self._ahead_only, not session.pending
        try:
            self._ahead_only = False
            if opened:
                self._begin_group()
            elif self._release_due:  # the group's last write's savepoint, released with this write's first statements
                pipe.add("RELEASE SAVEPOINT w")
            self._release_due = False
            pipe.add("SAVEPOINT w")
            self._bound_at_savepoint = self._bound_ms
            result = body(cur)
            if self._send_now:
                if len(pipe):
                    self._run()
            elif len(pipe):  # sent with the next statements of this connection, at the latest with the group's COMMIT
                # They wait for no row lock (the write holds them), but may for the lock that extends the table's
                # file, which a 1 ms bound would make them fail: they go under the lone writes' bound.
                # (What is queued before the group's bound was last set, if it is, needs it; this write's changes
                # follow.)
                if self._bound_ms != LOCK_TIMEOUT_MS:
                    pipe.insert_after(_GROUP_BOUND, _LONE_BOUND)
                    self._bound_ms = LOCK_TIMEOUT_MS
                self._carried = len(pipe)
        except _RETRYABLE as error:
            if isinstance(error, pgerrors.LockNotAvailable) and not session.wait and \
                    session.request_began == session.writes:
                raise self._put_off(opened, ahead_only) from None
            self._undo_write()
            log.debug("write conflict in a group: committing the group, then the write on its own: %s", error)
            return self._transact(body, queued)
        except BaseException:
            self._undo_write()
            raise
        self._release_due = True
        session.writes += 1
        self._group_writes += 1
        return result

    def _put_off(self, opened: bool, ahead_only: bool) -> EngineBusy:
        """A request's first write met a row held by another group (this worker's commit in flight, another
        worker's or node's group): undo it and put the request off (the server runs it again shortly, as for
        another worker's writer lock on the embedded engine) rather than commit this group and wait for the row,
        blocking the event loop. A group it began is rolled back (no transaction is left open for a request that
        may not come back); one that holds only rows locked ahead is still rolled back at the end of the pass
        if no write joins it."""
        if opened:
            self._close_group(committing=False)
            self._rollback_quietly()
        else:
            self._undo_write()
            self._ahead_only = ahead_only
        return EngineBusy()

    def _begin_group(self) -> None:
        """Open a group: its BEGIN queued, sent with the first statements of its first write."""
        self.session.pending = True
        self._bound_ms = LOCK_TIMEOUT_MS  # (the session's)
        self._pipe.add("BEGIN ISOLATION LEVEL READ COMMITTED")
        if (moved := recovery_clock()) is not None:
            self._pipe.add(moved)

    def _bound_lone(self) -> None:
        """Inside a group: the statements queued next wait for no other transaction's lock, but may for the one
        that extends the table's file, which a 1 ms bound would make them fail: the lone writes' bound."""
        if self._bound_ms != LOCK_TIMEOUT_MS:
            self._pipe.add(_LONE_BOUND)
            self._bound_ms = LOCK_TIMEOUT_MS

    def _bound_waits(self) -> None:
        """Inside a group: the statements queued next may wait for another transaction's lock: bound the wait.
        (Called just before them: a write that queues none leaves its change carried under the 2 s bound.)"""
        if self.session.pending and self._bound_ms != GROUP_LOCK_TIMEOUT_MS:
            self._pipe.add(_GROUP_BOUND)
            self._bound_ms = GROUP_LOCK_TIMEOUT_MS

    def _undo_write(self) -> None:
        """Roll back the group's last write to its savepoint (its rows, placeholders and locks); if that cannot
        be done, the whole group is lost."""
        conn = self._conn
        if not (conn.broken or conn.closed):
            try:
                self._pipe.add("ROLLBACK TO SAVEPOINT w")  # (behind the write's statements still unsent, if any)
                self._bound_ms = self._bound_at_savepoint  # (a rollback to a savepoint restores its settings)
                self._command("RELEASE SAVEPOINT w")
                return
            except psycopg.Error:
                log.warning("could not undo a write of a group: the group is lost", exc_info=True)
        self._lose_group()

    def _lose_group(self) -> None:
        """The open group's transaction is gone (its writes were never committed): `commit` will say so."""
        self._group_lost = True
        self._close_group(committing=False)
        self._carried = 0
        self._pipe.clear()
        self._rollback_quietly()

    def _close_group(self, *, committing: bool) -> None:
        """The open group is over (its COMMIT about to go, or its transaction lost): no writes, nothing pending."""
        self.session.pending = False
        if committing:
            self.session.commits += 1
        self._group_writes = 0
        self._release_due = False
        self._locked = {}
        self._ahead_only = False

    def _rollback_quietly(self) -> None:
        try:
            self._rollback()
        except psycopg.Error:
            pass  # (a broken connection: the server rolled back, and `_cursor` reconnects)

    def _end_group(self) -> None:
        """Commit the open group, if any: at the end of a pass, or mid-pass before a transaction of its own."""
        if not self.session.pending:
            return
        self._close_group(committing=True)
        try:
            # (COMMIT of a failed transaction would answer ROLLBACK, not an error)
            if self._command("COMMIT") != "COMMIT":
                raise RuntimeError("the group's transaction had failed: rolled back")
        except BaseException:
            self._group_lost = True
            self._rollback_quietly()
            raise

    def commit(self) -> CommitResult:
        """Commit the open group. Raises (and commits nothing more) if a group of this pass was lost: its
        writes' answers must not be sent as successes."""
        try:
            if self._group_lost:
                if self.session.pending:
                    self.session.pending = False
                    self._rollback_quietly()
                raise RuntimeError("a group of writes was lost (connection to PostgreSQL broken): none acknowledged")
            self._end_group()
        finally:
            self._group_lost = False
            self._group_writes = 0
        return "committed"

    def send_commit(self) -> CommitResult:
        """Send the open group's COMMIT (with the statements its writes left queued) and go on serving on another
        connection; "sent". The group's answers wait for `finish_commit`. A group that cannot be sent so (none
        open, or lost, or COMMITS_IN_FLIGHT already in flight) is committed as `commit` does."""
        if not self.session.pending or self._group_lost or self._commits_out >= self.commits_in_flight:
            return self.commit()
        self._close_group(committing=True)
        self._carried = 0
        self._pipe.add("COMMIT")
        try:
            sent = self._pipe.send()
        except BaseException:
            self._rollback_quietly()
            raise
        self._in_flight.append((self._link(), sent))
        self._commits_out += 1
        self._use(self._spares.pop() if self._spares else None)
        return "sent"

    def wait_for_commit(self) -> None:
        """Read the answer of the oldest COMMIT in flight not read yet (on a helper thread: only that connection
        is touched)."""
        if not self._in_flight:
            return
        link, sent = self._in_flight.popleft()
        error: BaseException | None = None
        try:
            link.pipe.receive(sent)
            if link.pipe.tags[-1] != "COMMIT":  # (COMMIT of a failed transaction answers ROLLBACK)
                raise RuntimeError("the group's transaction had failed: rolled back")
        except BaseException as failure:  # (handed to the event loop's thread by finish_commit)
            error = failure
        self._answered.append((link, error))

    def finish_commit(self) -> None:
        if not self._answered:
            return
        link, error = self._answered.popleft()
        self._commits_out -= 1
        if error is not None or link.conn.closed or link.conn.broken:
            link.conn.close()  # (its state after a failed commit is not worth finding out: a new one replaces it)
        else:
            self._spares.append(link)
        if error is not None:
            raise error

    def _record_token(self, cur: psycopg.Cursor[Any], token: RequestToken) -> None:
        """Inside a write transaction: refuse a live token, else store it (see `Engine.write`).

        A token nobody holds yet is stored with a plain INSERT: a concurrent request with the same token makes one
        of the two fail with a unique violation, and its retry then finds the other's record."""
        stored = _token_text(token.token)
        found = cur.execute(_LOCK_TOKEN, (stored,)).fetchone()
        if found is None:
            cur.execute(_INSERT_TOKEN, (stored, token.request_hash, token.created_at))
        elif found[1] > token.created_at - TOKEN_LIFETIME:
            raise TokenInUse(RequestToken(token.token, found[0], found[1], found[2]))
        else:
            cur.execute(_UPDATE_TOKEN, (token.request_hash, token.created_at, stored))
        self._token_writes += 1
        if self._token_writes % _TOKEN_SWEEP_EVERY == 0:
            cur.execute("DELETE FROM openddb_tokens WHERE created_at < %s", (token.created_at - TOKEN_LIFETIME,))

    def try_lease(self, name: str, holder: str, seconds: float, now: float) -> bool:
        with self._transaction() as cur:
            return cur.execute(_LEASE, (name, holder, now + seconds, now)).fetchone() is not None

    def exchange_draws(self, node: str, totals: dict[str, float], now: float) -> list[tuple[str, str, float, float]]:
        with self._transaction() as cur:
            if not self._draws_table:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (postgres_throttle.SCHEMA_LOCK,))
                cur.execute(postgres_throttle.TABLE)
            cur.executemany(postgres_throttle.PUBLISH, [(node, key, total, now, now) for key, total in totals.items()])
            rows = cur.execute(postgres_throttle.READ, (node, now - postgres_throttle.STALE_SECONDS)).fetchall()
            if not self._draws_table or int(now) % 60 == 0:
                cur.execute(postgres_throttle.TRIM, (now - postgres_throttle.STALE_SECONDS,))
        self._draws_table = True
        return [(str(row[0]), str(row[1]), float(row[2]), float(row[3])) for row in rows]

    def save_splits(self, splits: Mapping[str, int]) -> None:
        with self._transaction() as cur:
            cur.executemany("INSERT INTO openddb_partition_splits (key, boundary) VALUES (%s, %s) "
                            "ON CONFLICT (key) DO NOTHING", list(splits.items()))

    def load_splits(self) -> dict[str, int]:
        rows = self._cursor().execute("SELECT key, boundary FROM openddb_partition_splits").fetchall()
        return {str(key): int(boundary) for key, boundary in rows}

    def get_token(self, token: str) -> RequestToken | None:
        found = self._cursor().execute("SELECT hash, created_at, sizes FROM openddb_tokens WHERE token=%s",
                                       (_token_text(token),)).fetchone()
        return None if found is None else RequestToken(token, found[0], found[1], found[2])

    def _write_once(self, cur: psycopg.Cursor[Any], ops: Sequence[WriteOp]) -> list[WriteResult]:
        """Lock, apply, write back, maintain the indexes, append stream records; inside the caller's transaction."""
        keys = [item_key(op.table.table_id, op.key) for op in ops]  # (as the columns hold them)
        whole = {key: op.key.pk for key, op in zip(keys, ops) if key[2] is not op.key.pk}
        live, stored, placeholders = self._lock_items(cur, keys, whole)
        # Apply in request order; a key seen twice sees the first op's outcome.
        current: dict[ItemKey, tuple[Item | None, int]] = {}
        loaded: dict[ItemKey, tuple[Item | None, int]] = {}
        results: list[WriteResult] = []
        # The tables whose committed description has an enabled stream (usually none: then nothing more is done).
        streaming = {tid: table for tid, table in live.items() if table is not None and table.streaming}
        records: list[PendingRecord] = []
        now = clock.now() if streaming else 0.0
        for op, key in zip(ops, keys):
            if key in current:
                old, old_size = current[key]
            else:
                found = stored[key]
                old, old_size = (None, 0) if found is None else (orjson.loads(found[1]), found[0])
                loaded[key] = (old, old_size)
            new = op.apply(old)
            if streaming and key[0] in streaming:  # one record per op that changed the item, in request order
                record = change_record(streaming[key[0]], op.key.h, op.origin, old, new, now)
                if record is not None:
                    records.append(record)
            if new is old:
                results.append(WriteResult(old, old, old_size, old_size))
                current[key] = (old, old_size)
                continue
            new_size = 0 if new is None else item_size(new)
            current[key] = (new, new_size)
            results.append(WriteResult(old, new, old_size, new_size))
        self._write_back(cur, live, current, loaded, stored, placeholders, whole)
        if records:  # last: the shard locks it takes are held until the commit that follows
            self._bound_waits()
            with self._batched():
                self._append_records(cur, records, now)
        return results

    def _lock_items(self, cur: psycopg.Cursor[Any], keys: list[ItemKey], whole: dict[ItemKey, bytes]) -> tuple[
            dict[int, TableMeta | None], dict[ItemKey, tuple[int, bytes] | None], set[ItemKey]]:
        """Lock the write's catalog rows, then its items; the committed descriptions, the stored rows (size, data),
        and the keys that were absent and now hold an uncommitted placeholder row."""
        placeholders: set[ItemKey] = set()
        distinct = sorted(set(keys))
        # First the catalog rows (DDL waits for this write; see postgres_indexes.py), then the items, in key order.
        stored: dict[ItemKey, tuple[int, bytes] | None] = {}
        if len(distinct) == 1:  # the catalog row's lock and the item's, with what is queued, in one round trip
            key = distinct[0]
            grouped = self.session.pending  # (in a group: without waiting, see `_group_write`)
            self._pipe.add(TABLE_VERSION_NOWAIT if grouped else TABLE_VERSION, (key[0],))
            self._pipe.add(LOCK_ITEM_NOWAIT if grouped else LOCK_ITEM, key)
            *_, table, item = self._run()
            live: dict[int, TableMeta | None] = {key[0]: self._described(key[0], table[0] if table else None)}
            stored[key] = item[0] if item else None
            return live, stored, placeholders
        # Several items: lock every key, present or absent, in key order (so two such writes cannot deadlock each
        # other), one statement per key so a key cannot change between "absent" and "locked". A present row is
        # locked by a no-op update; an absent key by inserting a placeholder (size -1), never committed, which a
        # concurrent writer of that key must wait for: a condition on an absent item cannot be skewed.
        tids = sorted({key[0] for key in distinct})
        self._bound_waits()
        for tid in tids:
            self._pipe.add(TABLE_VERSION, (tid,))
        for key in distinct:
            self._pipe.add(_LOCK_OR_HOLD, (*key, whole.get(key)), _LOCK_OR_HOLD_TYPES)
        answers = self._run()[-len(tids) - len(distinct):]
        live = {tid: self._described(tid, rows[0] if rows else None) for tid, rows in zip(tids, answers)}
        for key, rows in zip(distinct, answers[len(tids):]):
            found = rows[0] if rows else None
            stored[key] = None if found is None or found[0] < 0 else found
            if found is not None and found[0] < 0:
                placeholders.add(key)
        return live, stored, placeholders

    def _write_back(self, cur: psycopg.Cursor[Any], live: dict[int, TableMeta | None],
                    current: dict[ItemKey, tuple[Item | None, int]], loaded: dict[ItemKey, tuple[Item | None, int]],
                    stored: dict[ItemKey, tuple[int, bytes] | None], placeholders: set[ItemKey],
                    whole: dict[ItemKey, bytes]) -> None:
        """Store each item's final state (one change per key, however many ops it had) and its index entries."""
        inserts, updates, deletes = [], [], []
        changes: list[tuple[ItemKey, Item | None, Item | None, int, int]] = []
        for key, (new, new_size) in current.items():
            existed = stored[key] is not None or key in placeholders
            old, old_size = loaded[key]
            if new is not old:  # the index entries change from the item as read to its final state
                changes.append((key if key not in whole else (key[0], key[1], whole[key], key[3]), old, new,
                                old_size, new_size))
            if new is None:
                if existed:
                    deletes.append(key)
            elif existed:
                updates.append((new_size, orjson.dumps(new), *key))
            else:
                inserts.append((*key, new_size, orjson.dumps(new), whole.get(key)))
        # Rows that were absent are created with a plain INSERT: if another writer created one meanwhile, the
        # unique violation makes the whole write run again rather than overwrite what it did not see. Queued: they
        # go with the index upkeep's statements, or with the transaction's COMMIT, or end a group's write.
        # (A concurrent creator's row may be locked; the index and vector upkeep bounds its own statements. The
        # rows this write locked wait for no other transaction: a change of them alone is carried, under 2 s.)
        if inserts:
            self._bound_waits()
        for sql, rows in ((_INSERT, inserts), (UPDATE_ITEM, updates), (DELETE_ITEM, deletes)):
            for params in rows:
                self._pipe.add(sql, params)
        tables = [live[change[0][0]] for change in changes]
        entries = any(table is not None and table.indexes for table in tables) and self._maintain_indexes(live, changes)
        vectors = any(table is not None and table.vector_indexes for table in tables) and \
            self._maintain_vectors(live, changes)
        self._send_now = bool(inserts) or entries or vectors

    def _read_pages(self, build: Any) -> Iterator[Any]:
        """Rows of a keyset-paginated read; `build(after_row, limit)` gives the statement of the next page."""
        last = None
        for limit in _pages():
            sql, params = build(last, limit)
            rows = self._read_rows(sql, params)
            yield from rows
            if len(rows) < limit:
                return
            last = rows[-1]

    def query(self, meta: TableMeta, h: int, pk: bytes, sort: SortRange, forward: bool,
              after: bytes | None) -> Iterator[Row]:
        tid = meta.table_id

        def build(last: Any, limit: int) -> tuple[str, list[Any]]:
            return query_statement(tid, h, pk, sort, forward, after if last is None else last[0], limit)

        for sk, size, data in self._read_pages(build):
            yield Row(StorageKey(h, pk, sk), size, data)

    def scan(self, meta: TableMeta, h_low: int, h_high: int, after: StorageKey | None) -> Iterator[Row]:
        tid = meta.table_id

        def build(last: Any, limit: int) -> tuple[str, list[Any]]:  # (paging on whole keys: see stored_key)
            start = after if last is None else StorageKey(last[0], read_key(last[1], last[5]), last[2])
            return scan_statement(tid, h_low, h_high, start, limit)

        for h, pk, sk, size, data, whole_pk in self._read_pages(build):
            yield Row(StorageKey(h, read_key(pk, whole_pk), sk), size, data)

    def close(self) -> None:
        self._conn.close()
        if self._replicas is not None:
            self._replicas.close()
        for link in [*self._spares, *(link for link, _sent in self._in_flight),
                     *(link for link, _error in self._answered)]:
            link.conn.close()


class _Link(NamedTuple):
    """One connection and what the engine keeps with it (see `PostgresEngine._connect`)."""

    conn: psycopg.Connection[Any]
    cur: psycopg.Cursor[Any]
    pipe: Pipeline
    arrivals: select.poll
    closing: bool


def _token_text(token: str) -> str:
    """A ClientRequestToken as the tokens table holds it: text cannot hold NUL, which a token may contain, so
    backslash and NUL are escaped (every other token is stored as it is)."""
    if "\\" in token or "\x00" in token:
        return token.replace("\\", "\\\\").replace("\x00", "\\0")
    return token


def _redact(url: str) -> str:
    """The URL without its password, for logs."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    return f"{scheme}{sep}{credentials.split(':', 1)[0]}:***@{host}"
