"""The engine interface: the small contract every storage engine implements.

Engines store opaque item documents under order-preserving binary keys. They know nothing of expressions or
DynamoDB's request shapes: the API layer hands them pure `apply(old_item) -> new_item` functions, and the engine
runs every function of one request inside one storage transaction, so a raised error leaves nothing behind.
That one `write` call is the choke point where index maintenance and change records hook in.
"""

from __future__ import annotations

import os
import socket
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from openddb.model import Item
from openddb.model.schema import IndexMeta, TableMeta, VectorIndexMeta

_HOLDERS: dict[int, str] = {}


def lease_holder() -> str:
    """This process's name in leases (see `Engine.try_lease`), unique across the hosts and processes sharing a
    store; worked out per process id, since workers fork after this module is imported."""
    pid = os.getpid()
    holder = _HOLDERS.get(pid)
    if holder is None:
        holder = _HOLDERS[pid] = f"{socket.gethostname()}:{pid}:{uuid.uuid4().hex[:8]}"
    return holder

# The partition-hash space: parallel-scan segments split [0, HASH_SPACE) into equal ranges.
HASH_SPACE = 1 << 32


@dataclass(slots=True, frozen=True)
class StorageKey:
    """A primary key in storage form: partition hash, encoded partition key, encoded sort key (b"" if none)."""

    h: int
    pk: bytes
    sk: bytes


@dataclass(slots=True)
class Row:
    """One stored item: its key, its DynamoDB size in bytes, and the item document (JSON bytes)."""

    key: StorageKey
    size: int
    data: bytes


# apply(old_item) -> new_item. Return None to delete, or the very `old_item` object to leave the row untouched.
ApplyFn = Callable[[Item | None], Item | None]

# Who made a change: a client's request, the TTL sweep, or a restore (stream records tell TTL deletions apart).
Origin = Literal["user", "ttl", "restore"]


@dataclass(slots=True)
class WriteOp:
    table: TableMeta
    key: StorageKey
    apply: ApplyFn
    # The caller needs neither the old item nor its size (no condition, no old values, no capacity) and the
    # table has no index: an engine may then write without reading the row first, passing None to `apply`. An
    # engine still reads it where its own upkeep needs the old item (PostgreSQL's stream records do).
    blind: bool = False
    origin: Origin = "user"


@dataclass(slots=True)
class WriteResult:
    old: Item | None
    new: Item | None
    old_size: int
    new_size: int


# How long a TransactWriteItems ClientRequestToken is remembered: DynamoDB documents 10 minutes.
TOKEN_LIFETIME = 600.0


@dataclass(slots=True, frozen=True)
class RequestToken:
    """A ClientRequestToken as stored: the token, a digest of the request it came with, and when the request
    that used it committed (epoch seconds); once its writes are done, also the size each write was charged on
    (`charged_sizes`), which a repeat of the request reports reads of."""

    token: str
    request_hash: bytes
    created_at: float
    sizes: bytes | None = None

    @property
    def charged(self) -> list[int] | None:
        """The sizes the request's writes were charged on (None for a token stored without them)."""
        if not self.sizes:
            return None
        return [int.from_bytes(self.sizes[i:i + 4], "big") for i in range(0, len(self.sizes), 4)]


def charged_sizes(results: Sequence[WriteResult]) -> bytes:
    """What a token stores of its request's writes: the larger of each item's old and new size, 4 bytes each."""
    return b"".join(max(r.old_size, r.new_size).to_bytes(4, "big") for r in results)


class TokenInUse(Exception):
    """Raised by `Engine.write` when its token is already recorded and still live; nothing was written."""

    def __init__(self, existing: RequestToken) -> None:
        super().__init__(existing.token)
        self.existing = existing


@dataclass(slots=True)
class SortRange:
    """Bounds on the encoded sort key; None means unbounded on that side."""

    low: bytes | None = None
    low_inclusive: bool = True
    high: bytes | None = None
    high_inclusive: bool = True


@dataclass(frozen=True, slots=True)
class QueryStart:
    """The first page a Query reads: of the table as `Engine.query` reads it, or of `index` as `index_query` does;
    from `after` (its ExclusiveStartKey: a sort key on a table, an `IndexKey` on an index), or the start."""

    table: TableMeta
    h: int
    pk: bytes
    sort: SortRange
    forward: bool
    index: IndexMeta | None = None
    after: bytes | IndexKey | None = None


@dataclass(frozen=True, slots=True)
class ScanStart:
    """The first page a Scan (of a segment, the hash range [low, high)) reads: of the table as `Engine.scan` reads
    it, or of `index` as `index_scan` does; from `after` (a `StorageKey` on a table, an `IndexKey` on an index)."""

    table: TableMeta
    index: IndexMeta | None
    low: int
    high: int
    after: StorageKey | IndexKey | None


@dataclass
class ReadsAhead:
    """The reads of a pass's requests that `Engine.read_ahead` may fetch: items (a GetItem's, a BatchGetItem's
    keys), first pages of Queries and Scans. On an engine with replicas (`Engine.replicated`), those of requests
    whose reads may be eventually consistent are apart, in `eventual`: the engine may fetch them from a replica."""

    gets: list[tuple[TableMeta, StorageKey]] = field(default_factory=list)
    queries: list[QueryStart] = field(default_factory=list)
    scans: list[ScanStart] = field(default_factory=list)
    eventual: ReadsAhead | None = None

    def __len__(self) -> int:
        return len(self.gets) + len(self.queries) + len(self.scans) + len(self.eventual or ())


def add_sort_clauses(sort: SortRange, mark: str, clauses: list[str], params: list[Any]) -> None:
    """Append to `clauses` and `params` the SQL conditions on column `sk` that `sort` stands for, with the
    driver's parameter marker `mark` ("?" or "%s")."""
    if sort.low is not None:
        clauses.append(("sk>=" if sort.low_inclusive else "sk>") + mark)
        params.append(sort.low)
    if sort.high is not None:
        clauses.append(("sk<=" if sort.high_inclusive else "sk<") + mark)
        params.append(sort.high)


@dataclass(slots=True, frozen=True)
class IndexKey:
    """Where an index entry sits: the index key in storage form (h, pk, sk, as `model.indexes.entry_of` computes
    them) and the item's table key (tpk, tsk), which orders entries sharing one index key."""

    h: int
    pk: bytes
    sk: bytes
    tpk: bytes
    tsk: bytes


@dataclass(slots=True)
class IndexRow:
    """One index entry: its key, the size of the projected item, and the projected item (JSON bytes)."""

    key: IndexKey
    size: int
    data: bytes


@dataclass(slots=True)
class VectorHit:
    """One SearchVectors result: its score and the item as stored (the API projects it)."""

    score: float
    item: Item


@dataclass(slots=True)
class Change:
    """One item change, as every write path hands it to its engine's one persist step, which writes the row, its
    index entries and (for a table with a stream) its stream record in one transaction. Changes reach storage in
    commit order; two changes of one key in one group are two changes."""

    table: TableMeta
    key: StorageKey
    old: Item | None  # None: the item did not exist (or, for a blind write, was not read)
    new: Item | None  # None: the item is deleted
    old_size: int
    new_size: int
    new_data: bytes | None  # the new item's stored JSON
    origin: Origin
    old_data: bytes | None = None  # the old item's stored JSON, when it was read
    blind: bool = False  # the old item was not read (`old`, `old_size`, `old_data` say nothing of it)


# --- DynamoDB Streams ------------------------------------------------------------------------------------
ChangeKind = Literal["INSERT", "MODIFY", "REMOVE"]


@dataclass(slots=True, frozen=True)
class StreamSettings:
    """How an engine lays out stream records: `shards` shards open at once per stream, each covering an equal
    range of the partition hash (as partitions do); each rolls over to a child shard covering the same range
    after `shard_seconds`; records are kept `retention_seconds` (DynamoDB: 24 hours), and so are the streams of
    disabled streams and deleted tables."""

    shards: int = 4
    shard_seconds: float = 4 * 3600.0
    retention_seconds: float = 24 * 3600.0


@dataclass(slots=True)
class StreamInfo:
    """A stream as the store keeps it: readable for the retention period after it was disabled or its table
    deleted (`disabled_at`)."""

    stream_id: int
    arn: str
    table_name: str
    label: str
    view_type: str
    key_schema: list[dict[str, str]]  # the table's KeySchema, wire form
    created_at: float
    disabled_at: float | None = None


@dataclass(slots=True)
class ShardInfo:
    """One shard of a stream. Sequence numbers grow within a shard in commit order; a closed shard has its last
    one (`ending_seq`) and its child (same `slot`, the next one created) takes the range's later records."""

    shard_id: str
    parent_id: str | None
    slot: int  # which range of the partition hash: [slot * 2^32 / shards, (slot + 1) * 2^32 / shards)
    starting_seq: int  # no record of the shard has a lower sequence number
    ending_seq: int | None  # set once closed (rolled over, or the stream disabled); None while open
    created_at: float
    trimmed_seq: int = 0  # records below this sequence number are past retention and gone


@dataclass(slots=True)
class StreamRecord:
    """A change as its stream keeps it: what the stream's view type asks for, as stored item JSON."""

    seq: int
    created_at: float
    kind: ChangeKind
    origin: Origin
    # JSON holding the item's primary-key attributes: just those, or the whole item (an engine may keep the
    # image it already has); empty where `old` or `new` holds them. Read it with `key_item`.
    keys: bytes
    old: bytes | None  # the item before (OLD_IMAGE, NEW_AND_OLD_IMAGES; None for an INSERT)
    new: bytes | None  # the item after (NEW_IMAGE, NEW_AND_OLD_IMAGES; None for a REMOVE)
    # The images' DynamoDB sizes, where the engine kept them (None: count them from the images when needed).
    old_size: int | None = None
    new_size: int | None = None

    def key_item(self, key_names: Sequence[str], image: Item | None = None) -> Item:
        """The record's key attributes (`key_names`: the table's, HASH first); `image`: the record's new or old
        image, if the caller has parsed it."""
        if self.keys:
            source = orjson.loads(self.keys)
        elif image is not None:
            source = image
        else:
            source = orjson.loads(self.new or self.old or b"{}")
        return {name: source[name] for name in key_names}


def change_kind(old: Item | None, new: Item | None) -> ChangeKind:
    return "INSERT" if old is None else "REMOVE" if new is None else "MODIFY"


def shard_slot(h: int, shards: int) -> int:
    """The shard range a partition hash falls in."""
    return (h * shards) >> 32


class EngineBusy(Exception):
    """`write` could not start: another process holds the store's writer lock and `session.wait` is off.

    Raised before anything is read or written, so the whole request can simply be run again later."""


class CatalogChanged(Exception):
    """The table description a request worked from is no longer the stored one (another worker or node changed
    or replaced the table meanwhile). Raised before anything is written: the request runs again on the fresh
    description (the dispatcher does so)."""


def is_stored_version(stored: bytes | None, expected: TableMeta) -> bool:
    """Whether a stored table description (JSON, None if the table is gone) is the version `expected` was
    derived from: the same table (uuid) at the same version (see `Engine.update_table`)."""
    if stored is None:
        return False
    found = TableMeta.from_json(stored)
    return (found.uuid, found.version) == (expected.uuid, expected.version)


CommitResult = Literal["committed", "conflict", "busy", "sent"]


@dataclass(slots=True)
class WriteSession:
    """Group commit's state in one process: owned by its engine, driven by the server.

    An engine may leave the transaction of `write` open so that the writes of several requests share one commit
    (`Engine.commit`, which answers with a result, never an exception). How writes join the group is the
    session's configuration (`optimistic`, `wait`), set at start-up and changed only for a scope
    (`serialized`, `waiting`); the counters tell which group a request wrote into."""

    # Stage writes without the writer lock and check them at commit, which may then answer "conflict": set when
    # other processes write the same store. Engines without the mode ignore it.
    optimistic: bool = False
    # Block on the writer lock when another process holds it; when false, `write` raises EngineBusy and
    # `commit` answers "busy" instead of blocking the event loop (engines without such a lock ignore it).
    wait: bool = True
    # A group is open: nothing may be acknowledged to a client (reads included, since they may have seen the
    # open transaction) until `commit` makes it durable.
    pending: bool = False
    # `write` calls that joined a group; around a request, tells the server whether the request wrote into the
    # group (and must run again after a conflict) or did all its work outside it (DDL).
    writes: int = 0
    # Groups committed, by `commit` or in the middle of a pass (a DDL or token-guarded transaction, an index
    # backfill chunk commits the open group first): a request that wrote while this was n wrote into the group
    # committed as the (n+1)-th, so after a conflict only the requests of the failed group run again (those of a
    # group already committed keep their answers, or they would apply twice).
    commits: int = 0
    # `writes` when the request being run began (set by the server around each request; -1 between requests): an
    # engine may refuse the request's first write with EngineBusy, but no later one, which would run its earlier
    # writes again.
    request_began: int = -1

    @contextmanager
    def serialized(self) -> Iterator[None]:
        """Writes in this scope run under the writer lock, waiting for it, so they cannot conflict: a group's
        requests run again after a conflict, a background duty's writes."""
        saved = self.optimistic, self.wait
        self.optimistic, self.wait = False, True
        try:
            yield
        finally:
            self.optimistic, self.wait = saved

    @contextmanager
    def waiting(self, wait: bool = True) -> Iterator[None]:
        """Block on the writer lock in this scope (or not, with `wait` false)."""
        saved, self.wait = self.wait, wait
        try:
            yield
        finally:
            self.wait = saved


# --- backups and point-in-time recovery (see storage/sqlite_backups.py, storage/postgres_backups.py) -----------
BackupStatus = Literal["CREATING", "AVAILABLE", "DELETED"]


@dataclass(slots=True)
class BackupRecord:
    """An on-demand backup as the store keeps it: a copy of one table's items and its description (`meta`, the
    TableMeta JSON) as of one instant. CREATING while its items are being copied (in chunks, see
    `Engine.continue_backup`), then AVAILABLE with every item; one that can no longer be finished is deleted,
    never made AVAILABLE."""

    arn: str
    name: str
    table_name: str
    table_uuid: str
    created_at: float
    status: BackupStatus = "AVAILABLE"
    backup_type: str = "USER"
    size: int = 0
    item_count: int = 0
    meta: bytes = b""


# What one chunk of a backup or a restore left (see `Engine.continue_backup`, `Engine.continue_restore`).
BackupProgress = Literal["more", "done", "lost"]
RestoreProgress = Literal["more", "done", "lost"]
BACKUP_CHUNK = 1_000  # items a chunk of a backup or a restore copies (one short transaction: ~0.1 s of 1 KB items)
RESTORE_CHUNK = 1_000


def restore_ending(from_backup: bool, enabled_at: float | None, at: float) -> RestoreProgress | None:
    """After a restore's last chunk of items: "done" for a backup's; "lost" if the source's recovery (on since
    `enabled_at`, None: off, or the table deleted) no longer covers its time `at`; None: the changes after `at`
    are yet to be undone."""
    if from_backup:
        return "done"
    return "lost" if enabled_at is None or enabled_at > at else None


class RestoreLost(Exception):
    """A restore's source could no longer give its items (see `Engine.continue_restore`)."""


@dataclass(slots=True, frozen=True)
class RecoveryWindow:
    """Point-in-time recovery of one table, while it is on: every item change since `enabled_at` has its old
    image in the table's recovery log, kept for `days` days."""

    enabled_at: float
    days: int


@dataclass(slots=True, frozen=True)
class RestoreSource:
    """Where a restored table's items come from: a backup (`backup_arn`), or a table as it stood at `at` (epoch
    seconds), rebuilt from its current items and the recovery log of the changes after `at`."""

    backup_arn: str | None = None
    table: TableMeta | None = None
    at: float = 0.0


class Engine(ABC):
    """A durable store of tables and items. One instance per process; not shared across threads."""

    # Group commit (see WriteSession); engines that commit every write keep one whose group is never pending.
    session: WriteSession

    @property
    def group_rows(self) -> int:
        """How many rows the open group would write (0 for engines that stage nothing)."""
        return 0

    # Whether the engine encrypts everything it writes to disk itself (the embedded store with a key): tables'
    # SSEDescription say ENABLED only then. PostgreSQL's at-rest encryption is its operator's, unseen from here.
    encrypted: bool = False

    # True while the engine holds a read snapshot shared by the requests of this event-loop pass; the server
    # then calls `end_reads` once the pass is over, so that no snapshot outlives it.
    reading: bool = False

    def end_reads(self) -> None:  # noqa: B027 - deliberately a no-op default, not abstract
        """Let go of the read snapshot, if any."""

    def commit(self) -> CommitResult:
        """Commit whatever `write` left open (engines that commit every write have nothing to do): "committed";
        "conflict" (only with `session.optimistic`) if another process changed a row the group's writes had
        read, nothing of the group committed; "busy" (only without `session.wait`) if another process holds the
        writer lock, nothing done: the group stays open, and more writes may join it."""
        return "committed"

    def wait_for_writer(self) -> None:  # noqa: B027 - deliberately a no-op default, not abstract
        """Block until the writer lock that made `commit` answer "busy" is probably free. Called from a helper
        thread, so the event loop keeps serving meanwhile; touches nothing else of the engine."""

    # Replicas may serve eventually consistent reads (PostgreSQL's `--engine-replica`); then the dispatcher sets
    # `eventual_reads` for the duration of a request whose reads may be eventually consistent (GetItem, Query,
    # Scan, BatchGetItem without ConsistentRead), and the engine may answer its reads from a replica.
    replicated: bool = False
    eventual_reads: bool = False

    # Reads fetched ahead (issue 32): the server hands the engine the keys of the GetItem, BatchGetItem, Query and
    # Scan requests of an event-loop pass before it runs them (`read_ahead`), and an engine with `reads_ahead` may
    # fetch them all at once (PostgreSQL: in one round trip, from one snapshot), answering each request's own read
    # from what it fetched, until a write or `end_read_ahead`. A hint: a read not fetched, or fetched for a key its
    # request does not read, costs only the work. Engines whose reads are local work keep False.
    reads_ahead: bool = False

    def read_ahead(self, reads: ReadsAhead) -> None:  # noqa: B027 - a no-op default
        """Fetch these items and first pages of Queries and Scans, for the reads of the requests about to run."""

    # Writes locked ahead (issue 32): the server hands the engine the keys of a pass's single-item writes
    # (PutItem, UpdateItem, DeleteItem) before it runs them, and an engine with `writes_ahead` may lock and read
    # them all at once (PostgreSQL: in one round trip, inside the group), each write then using its row. A hint,
    # as reads ahead are; forgotten at `end_read_ahead`.
    writes_ahead: bool = False

    def lock_ahead(self, writes: Sequence[tuple[TableMeta, StorageKey]]) -> None:  # noqa: B027 - a no-op default
        """Lock these items for the single-item writes about to run (see `writes_ahead`)."""

    def end_read_ahead(self) -> None:  # noqa: B027 - deliberately a no-op default, not abstract
        """Forget what `read_ahead` fetched and `lock_ahead` locked: the requests they were for have run."""

    # A commit is a remote wait: `send_commit` may leave the group's commit in flight and go on serving reads and
    # a new group (on another connection) while the database makes it durable. Engines whose commit is local
    # work (SQLite's: the server's own CPU and disk) keep False.
    remote_commits: bool = False
    # How many groups' commits `send_commit` may leave in flight at once.
    commits_in_flight: int = 1

    def send_commit(self) -> CommitResult:
        """Like `commit`, but an engine with `remote_commits` may answer "sent": the group's commit has left and
        nothing of it is acknowledged yet; the server then calls `wait_for_commit` (off its event loop) and
        `finish_commit` (on it) once for each commit sent, in the order sent, and calls `send_commit` again only
        while fewer than `commits_in_flight` are sent and not finished."""
        return self.commit()

    def wait_for_commit(self) -> None:  # noqa: B027 - deliberately a no-op default, not abstract
        """Block until the oldest commit `send_commit` sent and this has not waited for is answered. Called from a
        helper thread: touches only the connection that commit went on."""

    def finish_commit(self) -> None:  # noqa: B027 - deliberately a no-op default, not abstract
        """After `wait_for_commit`: return if the oldest group sent and not finished is durable, else raise (none
        of it committed). The connection it went on serves again."""

    # --- catalog ------------------------------------------------------------------------------
    @abstractmethod
    def create_table(self, meta: TableMeta) -> TableMeta:
        """Store a new table, assigning `table_id`; raises ResourceInUseException if the name exists."""

    # Table descriptions by name, valid until `_refresh_catalog` sees another process change the catalog.
    _tables: dict[str, TableMeta]

    def get_table(self, name: str) -> TableMeta | None:
        """The current description of a table, as committed by any process sharing the store."""
        self._refresh_catalog()
        meta = self._tables.get(name)
        if meta is None:
            data = self._load_table(name)
            if data is None:
                return None
            meta = TableMeta.from_json(data)
            self._tables[name] = meta
        return meta

    @abstractmethod
    def _refresh_catalog(self) -> None:
        """Empty `_tables` if any process or node changed the catalog since the last look (cheaply)."""

    @abstractmethod
    def _load_table(self, name: str) -> bytes | None:
        """A table's stored description (JSON), or None."""

    @abstractmethod
    def list_tables(self) -> list[str]:
        """All table names in ascending order."""

    def restored_tables(self) -> list[TableMeta]:
        """The current descriptions of the tables made by a restore (their `restore` set), as their restores'
        limit counts them."""
        return [meta for meta in map(self.get_table, self.list_tables()) if meta is not None and meta.restore]

    @abstractmethod
    def update_table(self, meta: TableMeta) -> None:
        """Replace a table's stored description with `meta` if the stored one is still the one `meta` was derived
        from (same uuid and version), raising its version by one (in `meta` too); else CatalogChanged, nothing
        written. So two workers changing one table at once cannot silently undo each other's change. The entries
        of an index that `meta` no longer has are removed in the same transaction, so none outlive a crash."""

    @abstractmethod
    def delete_table(self, name: str, expected: TableMeta | None = None) -> None:
        """Remove a table and all its items; with `expected`, only if the stored description is still that one
        (same uuid and version), else CatalogChanged (a table changed, e.g. protected against deletion, or
        already deleted by another worker meanwhile)."""

    @abstractmethod
    def table_stats(self, meta: TableMeta) -> tuple[int, int]:
        """(item count, total item size in bytes) of a table."""

    # --- items --------------------------------------------------------------------------------
    @abstractmethod
    def get(self, meta: TableMeta, key: StorageKey) -> Row | None:
        """The stored row under a key, or None."""

    @abstractmethod
    def get_many(self, requests: Sequence[tuple[TableMeta, StorageKey]]) -> list[Row | None]:
        """Several rows read from one consistent snapshot."""

    @abstractmethod
    def write(self, ops: Sequence[WriteOp], token: RequestToken | None = None) -> list[WriteResult]:
        """Apply every op atomically, in order, in one transaction; any exception rolls all of them back.

        With `token`, the same transaction first looks the token up: if a record of it exists whose
        `created_at` is later than `token.created_at - TOKEN_LIFETIME`, raise `TokenInUse(record)` before
        applying any op; otherwise store `token` (replacing an expired record), so the token is committed if
        and only if the ops are. Engines may drop expired records at any time."""

    @abstractmethod
    def try_lease(self, name: str, holder: str, seconds: float, now: float) -> bool:
        """Take or renew the named lease for `seconds` from `now` if it is free, expired or already `holder`'s.

        Background duties that must run once across every process and node sharing the store (index backfill,
        TTL sweeping, stream upkeep) run only while their holder has the lease. `now` is real time (time.time()),
        never the test clock (openddb.clock): processes coordinate in the time they share, and a server whose
        clock a test moved ahead must not hold a lease the others then wait an hour for."""

    def exchange_draws(self, node: str, totals: dict[str, float], now: float) -> list[tuple[str, str, float, float]]:
        """Publish `node`'s cumulative draws on the throttle's buckets (key -> units) and return the other nodes':
        (node, key, total, when its row was made), real time (time.time()) as `now`. Only an engine that nodes on
        several hosts share has others to tell (storage/postgres_throttle.py); here there are none."""
        return []

    @abstractmethod
    def save_splits(self, splits: Mapping[str, int]) -> None:
        """Keep the throttle's partition splits (api/partition_splits.py: a range's key -> the hash it is cut at) for
        the next start; a range already recorded keeps its first cut."""

    @abstractmethod
    def load_splits(self) -> dict[str, int]:
        """Every partition split `save_splits` kept."""

    @abstractmethod
    def get_token(self, token: str) -> RequestToken | None:
        """The committed record of a ClientRequestToken (possibly expired; the caller checks its age), or None."""

    @abstractmethod
    def query(self, meta: TableMeta, h: int, pk: bytes, sort: SortRange, forward: bool,
              after: bytes | None) -> Iterator[Row]:
        """Rows of one partition in sort-key order (reversed if not forward), strictly after `after` if given.

        The caller must consume or close the iterator before issuing another engine call."""

    @abstractmethod
    def scan(self, meta: TableMeta, h_low: int, h_high: int, after: StorageKey | None) -> Iterator[Row]:
        """Rows with h_low <= h < h_high in (h, pk, sk) order, strictly after `after` if given."""

    # --- secondary indexes ----------------------------------------------------------------------
    # An engine that sets `supports_indexes` also maintains, inside `write`'s transaction, every index of the
    # table as the catalog holds it at that moment (not as the op's possibly stale TableMeta says): for each op
    # that changes an item, the entry `model.indexes.entry_of(table, index, old)` is removed and the entry of
    # `new` stored. Until an engine implements these, the API refuses to define indexes on it.
    supports_indexes: bool = False

    def index_query(self, meta: TableMeta, index: IndexMeta, h: int, pk: bytes, sort: SortRange, forward: bool,
                    after: IndexKey | None) -> Iterator[IndexRow]:
        """Entries of one index partition in (sk, tpk, tsk) order (reversed if not forward), strictly after
        `after` in that order if given. Consume or close the iterator before the next engine call."""
        raise NotImplementedError

    def index_scan(self, meta: TableMeta, index: IndexMeta, h_low: int, h_high: int,
                   after: IndexKey | None) -> Iterator[IndexRow]:
        """Entries with h_low <= h < h_high in (h, pk, sk, tpk, tsk) order, strictly after `after` if given."""
        raise NotImplementedError

    def index_stats(self, meta: TableMeta, index: IndexMeta) -> tuple[int, int]:
        """(entry count, total projected size in bytes) of an index."""
        raise NotImplementedError

    def backfill_index(self, meta: TableMeta, index: IndexMeta, after: StorageKey | None,
                       limit: int) -> StorageKey | None:
        """In one write transaction, (re)compute the entries of up to `limit` table rows strictly after `after`
        in (h, pk, sk) order from their current state; return the last row's key, or None once no row is left.
        Idempotent, so it may overlap with concurrent writes (which maintain the index themselves)."""
        raise NotImplementedError

    def drop_index(self, meta: TableMeta, index_id: int) -> None:
        """Remove every entry of an index that is no longer in the table's description."""
        raise NotImplementedError

    def collection_size(self, meta: TableMeta, h: int, pk: bytes) -> int:
        """Bytes of one item collection: the table items under a partition key plus their LSI entries."""
        raise NotImplementedError

    # --- vector indexes -------------------------------------------------------------------------
    # An engine that sets `supports_vectors` also maintains, inside `write`'s transaction, every vector index of
    # the table as the catalog holds it then: for each item a write changes, the entry
    # `vectors.entries.entry_of(index, old)` is replaced by that of `new`.
    supports_vectors: bool = False

    def vector_search(self, meta: TableMeta, index: VectorIndexMeta, part: bytes, query: list[float], k: int,
                      conditions: list[tuple[int, str]]) -> list[VectorHit]:
        """The `k` items of one search partition (`vectors.entries.part_of`) nearest to `query` by the index's
        distance function, best first, among those whose INLINE_FILTER values equal `conditions` ((position in
        `index.filters`, canonical JSON text) pairs); exact, read in one snapshot."""
        raise NotImplementedError

    def vector_stats(self, meta: TableMeta, index: VectorIndexMeta) -> tuple[int, int]:
        """(entry count, bytes of vectors and filter values) of a vector index."""
        raise NotImplementedError

    def backfill_vector_index(self, meta: TableMeta, index: VectorIndexMeta, after: StorageKey | None,
                              limit: int) -> StorageKey | None:
        """`backfill_index` for a vector index: entries of up to `limit` rows after `after`; the last row's key,
        or None once no row is left. Idempotent."""
        raise NotImplementedError

    # --- DynamoDB Streams ---------------------------------------------------------------------------
    # An engine stores a table's stream along with the catalog change that enables it (`TableMeta.stream` with
    # `stream_id` 0: it assigns the id), disables it likewise (`stream.enabled` false; a deleted table's stream
    # too), and inside `write`'s transaction appends one `StreamRecord` per op that changed an item of a table
    # whose (current) description has an enabled stream, in commit order within each shard. A write that leaves
    # the item as it was writes no record.
    stream_settings: StreamSettings = StreamSettings()

    def list_streams(self, table_name: str | None = None) -> list[StreamInfo]:
        """Every stream still readable (enabled, or disabled within retention), oldest first; of one table if
        `table_name` is given."""
        raise NotImplementedError

    def get_stream(self, arn: str) -> StreamInfo | None:
        """A stream by its ARN, if still readable."""
        raise NotImplementedError

    def list_shards(self, stream_id: int) -> list[ShardInfo]:
        """A stream's shards not yet past retention, each after its parent (creation order)."""
        raise NotImplementedError

    def read_stream(self, stream_id: int, shard_id: str, start: int, limit: int) -> list[StreamRecord]:
        """Up to `limit` records of one shard with sequence numbers >= `start`, in sequence order."""
        raise NotImplementedError

    def read_stream_on(self, stream_id: int, shard_id: str, start: int,
                       limit: int) -> tuple[list[StreamRecord], int]:
        """`read_stream`, and where a reader that takes every record returned goes on from: past the last of them
        (`start` if none), or further where the engine knows that no record of the shard can come before."""
        records = self.read_stream(stream_id, shard_id, start, limit)
        return records, records[-1].seq + 1 if records else start

    def shard_end(self, stream_id: int, shard_id: str) -> int:
        """One past the highest sequence number of the shard's records (its starting number if it has none):
        where a LATEST iterator starts."""
        raise NotImplementedError

    def maintain_streams(self, now: float) -> None:
        """Roll over shards older than `shard_seconds` (close them, open their children) and drop what is past
        retention: records, shards, and streams disabled or of deleted tables. Run under the "streams" lease."""
        raise NotImplementedError

    def optimize(self) -> bool:
        """Before serving (DynamoDB Local's -optimizeDbBeforeStartup): compact the store and refresh what its
        query planner knows; False if this engine has nothing to do for it."""
        return False

    def keep_reserve(self) -> None:  # noqa: B027 - deliberately a no-op default: most engines keep none
        """Take back disk space kept in reserve against a full disk, if it was given up and there is room again
        (a background duty, about once a second)."""

    def unavailable(self, error: BaseException) -> bool:
        """Whether `error`, raised by a write or a commit, means the store cannot take writes for now (its disk is
        full) rather than a fault: nothing of the failed request (or group) was kept, and the same request may
        succeed later. The engine may act on it (free space it kept in reserve)."""
        return False

    # --- backups and point-in-time recovery (sqlite_backups.py, postgres_backups.py) -------------------------
    def begin_backup(self, record: BackupRecord, table: TableMeta) -> BackupRecord | None:
        """Store the backup `record` CREATING, of `table` as it stands now: the instant its items are copied as
        (`continue_backup`), while writes go on. None if the table is gone (or replaced)."""
        raise NotImplementedError

    def continue_backup(self, arn: str, limit: int) -> BackupProgress:
        """Copy up to `limit` more items of the backup `arn` begun by `begin_backup`, each chunk its own short
        transaction: "more" while some remain; "done" once the backup is stored AVAILABLE (its size, count and
        meta set), all of it as of its instant; "lost" if it can no longer be finished as of that instant (the
        process holding what it was copied from died): the caller deletes it."""
        raise NotImplementedError

    def create_backup(self, record: BackupRecord, table: TableMeta) -> BackupRecord | None:
        """A whole backup in one call (begin, then every chunk): the stored record, or None if the table is
        gone."""
        if self.begin_backup(record, table) is None:
            return None
        while (progress := self.continue_backup(record.arn, BACKUP_CHUNK)) == "more":
            pass
        return self.get_backup(record.arn) if progress == "done" else None

    def list_backups(self) -> list[BackupRecord]:
        """Every stored backup, CREATING or AVAILABLE (without its `meta`), oldest first."""
        raise NotImplementedError

    def get_backup(self, arn: str) -> BackupRecord | None:
        """A stored backup (CREATING or AVAILABLE) with its `meta`, or None."""
        raise NotImplementedError

    def delete_backup(self, arn: str) -> bool:
        """Remove a backup (one being made too: its copy stops) and its items; False if there was none."""
        raise NotImplementedError

    def begin_restore(self, meta: TableMeta, source: RestoreSource) -> TableMeta:
        """Create the table `meta` (as `create_table` does, ResourceInUseException if the name is taken), empty,
        with the restore of `source` into it recorded, for `continue_restore` to fill it."""
        raise NotImplementedError

    def continue_restore(self, meta: TableMeta, limit: int) -> RestoreProgress:
        """Copy up to `limit` more items into the table `meta` that `begin_restore` made, each chunk one short
        transaction that records how far it got (a restore a restart cut short goes on from there): "more" while
        some remain; "done" once the table holds every item of its source (as of the restore's time); "lost" if
        the source can no longer give them (its recovery log is gone): the caller removes the table. Index
        entries are not written: the caller stores the indexes CREATING, and their backfill makes them."""
        raise NotImplementedError

    def restore_table(self, meta: TableMeta, source: RestoreSource) -> TableMeta:
        """A whole restore in one call (begin, then every chunk)."""
        self.begin_restore(meta, source)
        while (progress := self.continue_restore(meta, RESTORE_CHUNK)) == "more":
            pass
        if progress == "lost":
            self.delete_table(meta.stored_name)
            raise RestoreLost(meta.name)
        return meta

    def recovery_window(self, meta: TableMeta) -> RecoveryWindow | None:
        """The table's point-in-time recovery, or None while it is off."""
        raise NotImplementedError

    def set_recovery(self, meta: TableMeta, days: int | None, now: float) -> RecoveryWindow | None:
        """Turn point-in-time recovery on (keeping `days` days; a table already on keeps its start and takes the
        new period) or off (`days` None: its log is dropped); the new state."""
        raise NotImplementedError

    def trim_recovery(self, now: float) -> None:
        """Drop recovery-log records older than each table's window."""
        raise NotImplementedError

    def recovery_changes(self, meta: TableMeta, since: float, until: float) -> list[tuple[StorageKey, float]]:
        """The keys of the table (recovery on) changed after `since` up to `until` (the log's times), each with
        the time of its last change in that span, in key order: what an incremental export holds."""
        raise NotImplementedError

    @abstractmethod
    def close(self) -> None:
        """Flush and release the store; called once at shutdown."""
