"""SQLite's write path: every item write, whichever way it is grouped, is applied first and persisted in one place.

A request's ops are applied (`apply_ops`) against the rows as they stand — read under the writer lock, or from
the pass's read snapshot when a worker writes optimistically — before anything is written, so a refused request
writes nothing. What they changed comes out as a list of `Change`s, in request order, and `_persist` is the one
step that writes changes to storage: each row once (a key changed twice in a group is written once, at its
final state), its index entries from the stored item to the final one, and, for a table with a stream, one
stream record per change, built from the images the change holds (see sqlite_streams). It runs in the request's
transaction (one worker, or a token-guarded transaction) or in the group's, at `commit`. (Writes to tables with
recovery on and neither stream nor index wait under the lock for the next statement that could see their rows,
to be persisted together: `_write_locked`.)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from openddb import clock
from openddb.errors import DynamoDBError
from openddb.model import Item
from openddb.model.values import item_size
from openddb.storage.base import (
    TOKEN_LIFETIME,
    Change,
    CommitResult,
    EngineBusy,
    RequestToken,
    StorageKey,
    TokenInUse,
    WriteOp,
    WriteResult,
    WriteSession,
    charged_sizes,
)
from openddb.storage.sqlite_backups import RecoveryRows
from openddb.storage.sqlite_indexes import blob

if TYPE_CHECKING:
    from openddb.model.schema import TableMeta

Where = tuple[int, int, bytes, bytes]  # a row's (tid, h, pk, sk)
State = tuple[Item | None, int, bytes | None]  # an item as it stands: parsed, its size, its stored JSON

_GET = "SELECT size, data FROM items WHERE tid=? AND h=? AND pk=? AND sk=?"
_GET_DATA = "SELECT data FROM items WHERE tid=? AND h=? AND pk=? AND sk=?"
# An upsert, not INSERT OR REPLACE: REPLACE deletes the old row and inserts the new one (B-tree rebalancing both
# ways), while DO UPDATE rewrites the row where it is, in place when its size is unchanged (~4x faster overwrites).
UPSERT = ("INSERT INTO items (tid, h, pk, sk, size, data) VALUES (?, ?, ?, ?, ?, ?) "
          "ON CONFLICT (tid, h, pk, sk) DO UPDATE SET size=excluded.size, data=excluded.data")
_DELETE = "DELETE FROM items WHERE tid=? AND h=? AND pk=? AND sk=?"
GET_TOKEN = "SELECT hash, created_at, sizes FROM tokens WHERE token=?"
_PUT_TOKEN = "INSERT OR REPLACE INTO tokens (token, hash, created_at, sizes) VALUES (?, ?, ?, ?)"
# Expired tokens are swept once every this many token writes, so the table stays small without a timer.
_TOKEN_SWEEP_EVERY = 256

_SORTED = orjson.OPT_SORT_KEYS
BLIND = object()  # a staged write that did not read its row: nothing to check at commit


def bound(where: Where) -> tuple[int, int, bytearray, bytearray]:
    """A row's (tid, h, pk, sk) as SQL parameters."""
    return where[0], where[1], blob(where[2]), blob(where[3])


def stored(db: sqlite3.Connection, where: Where) -> State:
    """The item stored at `where`, parsed, with its size and stored bytes."""
    found = db.execute(_GET, (where[0], where[1], blob(where[2]), blob(where[3]))).fetchone()
    if found is None:
        return None, 0, None
    return orjson.loads(found[1]), found[0], found[1]


def skips_read(op: WriteOp) -> bool:
    """Whether `op` may be applied without reading its row: its caller needs nothing of the old item, and
    neither do the table's indexes. (A stream's record does, but only its stored bytes: `_persist` reads them under
    the writer lock, as it writes the row, so a blind write keeps no read to check at commit.)"""
    return op.blind and not op.table.indexes and not op.table.vector_indexes


def _holds(ops: Sequence[WriteOp], recovering: frozenset[int]) -> bool:
    """Whether `_write_locked` may hold back the writes of `ops` (see there): each one to a table without
    indexes (whose upkeep may refuse a request after its row is read, in a savepoint of its own), and either
    blind to a table with a stream (its record reads the row as it stands when it is persisted, with the other
    held writes' in one statement: `_append_blind_records`) or to a table with recovery on."""
    for op in ops:
        table = op.table
        if table.indexes or table.vector_indexes or \
                not (op.blind if table.streaming else table.table_id in recovering):
            return False
    return True


def apply_ops(ops: Sequence[WriteOp], load: Callable[[Where], State]) -> tuple[list[WriteResult], list[Change],
                                                                              dict[Where, State]]:
    """Apply `ops` in order, each to the item as the earlier ones left it (`load` reads a row not yet seen);
    return their results, the changes they made, and each key's final state. Writes nothing."""
    seen: dict[Where, State] = {}
    results: list[WriteResult] = []
    changes: list[Change] = []
    for op in ops:
        key = op.key
        where = (op.table.table_id, key.h, key.pk, key.sk)
        blind = skips_read(op)  # (the row as it stands is unknown: even a delete must reach it)
        if blind:
            old: Item | None = None
            old_size, old_data = 0, None
        else:
            old, old_size, old_data = seen.get(where) or load(where)
        new = op.apply(old)
        size = 0 if new is None else item_size(new)
        # Left as it was (or, on a table with a stream, written again as it was: no record for it): no change to
        # write, and the answer still rests on what was read. (Unread, a rewrite of the same item is a row written
        # with the same bytes, which `_persist` sees as no change either.)
        if not blind and (new is old or (op.table.stream is not None and size == old_size and new == old)):
            seen[where] = (old, old_size, old_data)
            results.append(WriteResult(old, new, old_size, size))
            continue
        # A streamed table's rows are written with their attribute names in order, so an unread rewrite of an
        # equal item (attributes in another order) is the same bytes too, which `_persist` sees as no change.
        data = None if new is None else orjson.dumps(new, option=_SORTED if op.table.stream is not None else 0)
        seen[where] = (new, size, data)
        results.append(WriteResult(old, new, old_size, size))
        changes.append(Change(op.table, key, old, new, old_size, size, data, op.origin, old_data, blind))
    return results, changes, seen


class Staged:
    """An optimistic write waiting for `commit`: the row as read (`expected`, or BLIND) and the key's state as the
    group leaves it, which later writes of the group read; `written` false if the group only read the row."""

    __slots__ = ("data", "expected", "item", "size", "written")

    def __init__(self, expected: object, item: Item | None, size: int, data: bytes | None, written: bool) -> None:
        self.expected = expected
        self.item = item
        self.size = size
        self.data = data
        self.written = written


class SQLiteWrites:
    """`Engine.write`, group commit and `commit` of SQLiteEngine, whose connection, lock and catalog it uses."""

    _db: sqlite3.Connection
    group_commit: bool
    shared_reads: bool
    session: WriteSession
    _overlay: dict[Where, Staged]
    _changes: list[Change]  # the changes of the staged group, in request order
    _held: list[Change]  # writes to tables with recovery on, persisted together (see `_write_locked`)
    _held_rows: dict[Where, State]  # each key they wrote, as they left it
    _locked: bool  # a group transaction holding the writer lock is open
    _conflict: bool  # the optimistic group failed its check: nothing of this group may commit
    _group_catalog: bytes
    _token_writes: int
    _signal: Any
    _lock: Any
    _load_row: Callable[[Where], State]

    if TYPE_CHECKING:
        def _begin(self, wait: bool = True) -> None: ...

        def _commit(self) -> None: ...

        def _rollback(self) -> None: ...

        def _check_catalog(self) -> None: ...

        def _read(self) -> sqlite3.Connection: ...

        def _maintain_indexes(self, table: TableMeta, key: StorageKey, old: Item | None,
                              new: Item | None) -> None: ...

        def _append_record(self, change: Change, before: tuple[int, bytes | None]) -> None: ...

        def _append_blind_record(self, change: Change) -> None: ...

        def _append_blind_records(self, changes: Sequence[Change]) -> None: ...

        def _recovering(self) -> frozenset[int]: ...

        def _log_recovery(self, records: Sequence[tuple[Change, tuple[int, bytes | None] | None]]) -> None: ...

        def _log_rows(self, rows: RecoveryRows) -> None: ...

        def _write_records(self) -> None: ...

        def _forget_records(self) -> None: ...

    def write(self, ops: Sequence[WriteOp], token: RequestToken | None = None) -> list[WriteResult]:
        session = self.session
        if self.group_commit:
            if self._conflict:  # this pass's group is lost and will run again: wait for that, then go
                raise EngineBusy()
            session.writes += 1
        # Optimistic: writes whose reads come from one snapshot (one item, items written without reading them,
        # or any items under a shared read snapshot), all checked at commit; writes guarded by a request token
        # run under the lock.
        if session.optimistic and self.group_commit and not self._locked and token is None and \
                (len(ops) == 1 or self.shared_reads or all(skips_read(op) for op in ops)):
            return self._write_optimistic(ops)
        if not self._locked:  # (else the group's transaction, open under the lock, takes this write too)
            self._enter_transaction()
        return self._write_locked(ops, token)

    def _enter_transaction(self) -> None:
        """Under the writer lock: the group's transaction (taken now if this is its first write), or one of the
        write's own without group commit."""
        if not self.group_commit:
            self._begin()
            self._check_catalog()
        elif not self._locked:
            wait = self.session.wait
            if self._overlay:
                self._end_group(wait)
                if self._conflict:  # that group is lost: run this after its requests run again
                    raise EngineBusy()
            self._begin(wait)
            self._check_catalog()
            self._locked = True
            self.session.pending = True

    def _write_locked(self, ops: Sequence[WriteOp], token: RequestToken | None) -> list[WriteResult]:
        db = self._db
        recovering = self._recovering()
        if self._locked and token is None and _holds(ops, recovering):
            # Writes to tables with recovery on (no stream, no index) wait in the group's transaction until the
            # next statement that could see their rows: then their log records and their rows each go in one
            # statement (`_persist_held`), which costs a good deal less than two statements per write. Later
            # writes held back read the rows as these left them.
            results, changes, final = apply_ops(ops, self._load_held if self._held_rows else self._load_row)
            if changes:
                self._held.extend(changes)
                self._held_rows.update(final)
            return results
        if self._held:
            self._persist_held()  # (before this request reads a row, or writes one after them)
        try:
            if token is not None:
                self._check_token(token)
            results, changes, _ = apply_ops(ops, self._load_row)
        except BaseException:
            if not self.group_commit:
                self._rollback()
            raise
        # Nothing is written yet. From here on only an index's upkeep can refuse the request (an item collection
        # grown past its limit): inside a shared group, a savepoint then undoes this request alone. Other writes
        # need none (a savepoint journals a copy of every page the request changes, doubling a batch's I/O).
        savepoint = self.group_commit and (bool(ops[0].table.indexes) if len(ops) == 1 else
                                           any(op.table.indexes for op in ops))
        if savepoint:
            # (the group's stream records so far go in first: a flush inside the savepoint, before a shard
            # rolls over, would otherwise be undone with this request)
            self._write_records()
            db.execute("SAVEPOINT request")
        try:
            if token is not None:
                self._store_token(token, charged_sizes(results))
            self._persist(changes, recovering)
            if savepoint:
                db.execute("RELEASE request")
            elif not self.group_commit:
                self._commit()
        except BaseException:
            if savepoint:
                db.execute("ROLLBACK TO request")
                db.execute("RELEASE request")
                self._forget_records()  # (this request's alone: the group's went in before the savepoint)
            elif not self.group_commit:
                self._rollback()
            else:  # part of this request may be in the group: none of the group may commit
                self._conflict = True
            raise
        return results

    def _persist(self, changes: Sequence[Change], recovering: frozenset[int] | None = None) -> None:
        """The one step that writes item changes, inside the caller's transaction: first what the changes of
        tables with an enabled stream or with recovery on log (`_log_changes`), one record per change, in order
        (two writes to one key in one group are two records); then each changed row at its final state, with its
        index entries from the stored item to the final one. Other tables' changes log nothing."""
        if not changes:
            return
        if recovering is None:
            recovering = self._recovering()
        if len(changes) == 1:
            self._write_change(changes[0], recovering)
            return
        logged = [change for change in changes if change.table.streaming or change.table.table_id in recovering]
        if logged:
            self._log_changes(logged, recovering)
        spans: dict[Where, list[Change]] = {}  # each key's first and last change
        for change in changes:
            key = change.key
            where = (change.table.table_id, key.h, key.pk, key.sk)
            span = spans.get(where)
            if span is None:
                spans[where] = [change, change]
            else:
                span[1] = change
        self._write_rows(spans)

    def _load_held(self, where: Where) -> State:
        """A row as the writes held back left it, else as stored."""
        return self._held_rows.get(where) or self._load_row(where)

    def _persist_held(self) -> None:
        """The blind writes `_write_locked` held back, persisted in the group's transaction, in order (as
        `_persist` would have one by one: the records of a key written twice are two, the second from the first's
        item). If that fails, part of them may be in: none of the group may commit."""
        changes, self._held = self._held, []
        self._held_rows.clear()
        try:
            if len(changes) == 1 or not self._write_held(changes):
                self._persist(changes)
        except BaseException:
            self._conflict = True
            raise

    def _write_held(self, changes: Sequence[Change]) -> bool:
        """`_persist` of changes to tables without indexes, each to a key of its own, either all of tables with
        recovery on and no stream, or all blind writes to tables with a stream and recovery off: their log records
        (recovery: `_log_rows`: a blind change's reads its row as it stands, those of a run in one statement per
        16; another's holds the item its change read, as stored, nothing having written the row since, a run's in
        one statement per 16 too; stream: `_append_blind_records`, which reads each row as it stands in the
        record's statement), then their rows in one statement per kind, each key's bytes bound once for all.
        False, nothing written, if a key is written twice (`_persist` orders those), or if the changes are not all
        of one of those two kinds."""
        streamed = changes[0].table.streaming
        if streamed:
            recovering = self._recovering()
            if not all(change.table.streaming and change.blind and change.table.table_id not in recovering
                       for change in changes):
                return False
        elif any(change.table.streaming for change in changes):
            return False
        rows: dict[Where, Change] = {}
        for change in changes:
            key = change.key
            rows[(change.table.table_id, key.h, key.pk, key.sk)] = change
        if len(rows) < len(changes):
            return False
        if streamed:
            self._append_blind_records(changes)  # (before the rows: each record reads its row as it stands)
        records = None if streamed else RecoveryRows(clock.now())
        puts: list[tuple[int, int, bytearray, bytearray, int, bytearray]] = []
        deletes: list[tuple[int, int, bytearray, bytearray]] = []
        for (tid, h, pk, sk), change in rows.items():
            pk_blob, sk_blob = blob(pk), blob(sk)
            data = None if change.new_data is None else blob(change.new_data)
            if records is not None and change.blind:
                records.unread(tid, h, pk_blob, sk_blob, data)
            elif records is not None and change.old_data != change.new_data:  # (else none, as `_log_changes`)
                records.read(tid, h, pk_blob, sk_blob, change.old_size, change.old_data)
            if data is None:
                deletes.append((tid, h, pk_blob, sk_blob))
            else:
                puts.append((tid, h, pk_blob, sk_blob, change.new_size, data))
        if records is not None:
            self._log_rows(records)
        db = self._db
        for sql, params in ((_DELETE, deletes), (UPSERT, puts)):
            if params:
                db.executemany(sql, params)
        return True

    def _write_change(self, change: Change, recovering: frozenset[int]) -> None:
        """One change's records (on a table with a stream or with recovery on), index entries and row (see
        `_persist`)."""
        key = change.key
        table = change.table
        row = (table.table_id, key.h, blob(key.pk), blob(key.sk))
        if table.streaming or table.table_id in recovering:
            self._log_changes((change,), recovering)
        if table.indexes or table.vector_indexes:
            self._maintain_indexes(table, key, change.old, change.new)
        if change.new_data is None:
            self._db.execute(_DELETE, row)
        else:
            self._db.execute(UPSERT, (*row, change.new_size, blob(change.new_data)))

    def _log_changes(self, changes: Sequence[Change], recovering: frozenset[int]) -> None:
        """Under the writer lock, before the rows of `changes` are written: for each change, its stream record (a
        table with an enabled stream: see sqlite_streams) and its recovery log record (a table with recovery on:
        see sqlite_backups), both from the item before it: the one its key's previous change in `changes` left,
        else the one the change read, else (a blind write, which read nothing) the row as it stands, read here (by
        the recovery log's record itself where no stream record needs it). A change that leaves the item's stored
        bytes as they were is no change: it logs nothing."""
        latest: dict[Where, tuple[int, bytes | None]] = {}
        recovery: list[tuple[Change, tuple[int, bytes | None] | None]] = []  # (None: the record reads the row)
        blind: list[Change] = []  # stream records alone of blind writes, to go in together, before the next queued
        for change in changes:
            key = change.key
            where = (change.table.table_id, key.h, key.pk, key.sk)
            before = latest.get(where)
            latest[where] = (change.new_size, change.new_data)
            if before is None and change.blind:  # (the table has a stream, recovery on, or both)
                if where[0] not in recovering:
                    blind.append(change)  # (a stream's record alone: its statement reads the row)
                    continue
                if not change.table.streaming:
                    recovery.append((change, None))  # (a recovery record alone: its statement reads the row)
                    continue
            if before is None:
                before = (change.old_size, change.old_data) if not change.blind else self._row_before(where)
            if before[1] == change.new_data:
                continue
            if change.table.streaming:
                if blind:
                    self._log_blind(blind)
                    blind = []
                self._append_record(change, before)
            if where[0] in recovering:
                recovery.append((change, before))
        if blind:
            self._log_blind(blind)
        if recovery:
            self._log_recovery(recovery)

    def _log_blind(self, changes: list[Change]) -> None:
        """The stream records of blind writes (`_log_changes`): one alone at once, several in one statement."""
        if len(changes) == 1:
            self._append_blind_record(changes[0])
        else:
            self._append_blind_records(changes)

    def _row_before(self, where: Where) -> tuple[int, bytes | None]:
        """The size and stored JSON of the row at `where` as it stands (0, None if there is none)."""
        found = self._db.execute(_GET, bound(where)).fetchone()
        return (0, None) if found is None else (found[0], found[1])

    def _write_rows(self, spans: dict[Where, list[Change]]) -> None:
        """Each changed row at its final state, with its index entries (see `_persist`)."""
        db = self._db
        puts: list[tuple[int, int, bytearray, bytearray, int, bytearray]] = []
        deletes: list[tuple[int, int, bytearray, bytearray]] = []
        for where, (first, last) in spans.items():
            row = bound(where)
            if last.table.indexes or last.table.vector_indexes:
                # Before the row is written: the upkeep's item collection check sums the partition's rows as the
                # earlier writes left them.
                self._maintain_indexes(last.table, last.key, first.old, last.new)
                if last.new_data is None:
                    db.execute(_DELETE, row)
                else:
                    db.execute(UPSERT, (*row, last.new_size, blob(last.new_data)))
            elif last.new_data is None:
                deletes.append(row)
            else:
                puts.append((*row, last.new_size, blob(last.new_data)))
        # Rows of tables without indexes, which nothing here reads again: one call per statement.
        for sql, params in ((_DELETE, deletes), (UPSERT, puts)):
            if len(params) == 1:
                db.execute(sql, params[0])
            elif params:
                db.executemany(sql, params)

    def _write_optimistic(self, ops: Sequence[WriteOp]) -> list[WriteResult]:
        """Apply `ops` to the committed rows (or this group's staged ones) and stage the outcome for `commit`.

        Nothing is staged if an `apply` raises, so a rejected request leaves the group as it was."""
        overlay = self._overlay
        if not overlay:  # the catalog these writes' table descriptions were checked against
            self._group_catalog = self._signal.seen
        reads: dict[Where, bytes | None] = {}  # rows read from the snapshot, as they were read

        def load(where: Where) -> State:
            before = overlay.get(where)
            if before is not None:
                return before.item, before.size, before.data
            state = stored(self._read(), where)
            reads[where] = state[2]
            return state

        results, changes, final = apply_ops(ops, load)
        written = {(c.table.table_id, c.key.h, c.key.pk, c.key.sk) for c in changes}
        for where, (item, size, data) in final.items():
            before = overlay.get(where)
            expected = before.expected if before is not None else reads.get(where, BLIND)
            overlay[where] = Staged(expected, item, size, data,
                                    where in written or (before is not None and before.written))
        if final:
            self._changes.extend(changes)
            self.session.pending = True
        return results

    def _commit_overlay(self, wait: bool = True) -> None:
        """Under the writer lock: check every row the staged writes read, persist their changes, commit; on a
        changed row roll back and mark the group conflicted. Without `wait`, EngineBusy if another process holds
        the lock (the group stays staged, and more writes may join it)."""
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
        try:
            for where, entry in overlay.items():
                if entry.expected is not BLIND:
                    found = db.execute(_GET_DATA, bound(where)).fetchone()
                    if (None if found is None else found[0]) != entry.expected:
                        self._conflict = True
                        self._rollback()
                        return
            self._persist(changes)
            self._commit()
            self.session.commits += 1
        except DynamoDBError:  # e.g. an item collection grown too large: run the requests again, one by one
            self._conflict = True
            self._rollback()
        except BaseException:
            self._rollback()
            raise

    def _end_group(self, wait: bool = True) -> None:
        """Commit this pass's group (or drop it, if it conflicted; `commit` then reports the conflict). Without
        `wait`, EngineBusy while another process holds the writer lock, the group kept as it is."""
        if self._overlay:
            self._commit_overlay(wait)
        if self._locked:
            self._locked = False
            if self._conflict:
                self._rollback()
            else:
                try:
                    if self._held:
                        self._persist_held()
                    self._commit()
                except BaseException:
                    self._rollback()
                    raise
                self.session.commits += 1
        self.session.pending = False

    def commit(self) -> CommitResult:
        try:
            self._end_group(self.session.wait)
        except EngineBusy:
            return "busy"
        except BaseException:
            self._conflict = False
            raise
        conflict, self._conflict = self._conflict, False
        return "conflict" if conflict else "committed"

    def wait_for_writer(self) -> None:
        self._lock.wait_free()

    @property
    def group_rows(self) -> int:
        return len(self._overlay)

    def _check_token(self, token: RequestToken) -> None:
        """Inside a write transaction: TokenInUse if a live record of the token exists (see `Engine.write`)."""
        found = self._db.execute(GET_TOKEN, (token.token,)).fetchone()
        if found is not None and found[1] > token.created_at - TOKEN_LIFETIME:
            raise TokenInUse(RequestToken(token.token, found[0], found[1], found[2]))

    def _store_token(self, token: RequestToken, sizes: bytes) -> None:
        """Record the token with the sizes its writes were charged on (which a repeat of the request reports)."""
        db = self._db
        db.execute(_PUT_TOKEN, (token.token, token.request_hash, token.created_at, sizes))
        self._token_writes += 1
        if self._token_writes % _TOKEN_SWEEP_EVERY == 0:
            db.execute("DELETE FROM tokens WHERE created_at < ?", (token.created_at - TOKEN_LIFETIME,))
