"""Writes locked ahead: the items a pass's single-item writes will change, locked and read in one round trip.

Inside a group a PutItem, UpdateItem or DeleteItem makes one round trip of its own (its savepoint, the catalog
row's lock, the item's lock), and that round trip, not the SQL, was most of what a write cost: PostgreSQL's
backend wakes, parses the savepoint commands and answers once per write, the node sends, polls and reads once per
write (docs/SCALE-OUT.md, "Writes locked ahead"). The server hands the engine the keys of a pass's single-item
writes before it runs them (`Engine.lock_ahead`); here they are all locked (NOWAIT, in key order, the catalog
rows first) and read in one round trip inside the group, and each of those writes then runs without a round
trip: its change is queued for the connection's next one (at the latest the group's COMMIT), like any present
item's change in a group (see `PostgresEngine._group_write`).

Kept only for the writes that need nothing more than the row: a present item, in a table whose committed
description has no secondary or vector index and no stream (their upkeep sends statements at once, which a
write without a savepoint must not do). Such a write takes no savepoint: a refusal (a failed condition, an
invalid update) has queued nothing, so it leaves nothing to undo but its lock, held to the commit like the
group's others (strict two-phase locking, no change). An item whose lock another transaction holds (another
group's, this worker's commit in flight) is skipped (`SKIP LOCKED`): its write locks for itself, the pass's others
keep their locks (with NOWAIT one such item made the whole round trip fail, and every write of the pass then made
a round trip of its own). A catalog row's lock that cannot be taken at once (a table change holds it) still fails
the round trip: it is rolled back (to a savepoint if a group was open) and every write runs as before. A hint, as
reads ahead are: a write whose key was not locked ahead, or was written meanwhile by a write of another kind, locks
for itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson
import psycopg

from openddb.model.schema import TableMeta
from openddb.model.values import item_size
from openddb.storage.base import CatalogChanged, StorageKey, WriteOp, WriteResult, WriteSession
from openddb.storage.postgres_indexes import (
    ITEM_KEY_LIMIT,
    TABLE_VERSION_NOWAIT,
    ItemKey,
    stored_key,
)
from openddb.storage.postgres_pipeline import Pipeline

# The most keys one round trip locks ahead (a pass's writes are one per connection, mostly).
MOST_AHEAD = 256
# The statements on an item's row that a write sends (PostgresEngine's too).
ITEM_KEY = "tid=%s AND h=%s AND pk=%s AND sk=%s"
LOCK_ITEM = f"SELECT size, data FROM openddb_items WHERE {ITEM_KEY} FOR UPDATE"
LOCK_ITEM_NOWAIT = f"{LOCK_ITEM} NOWAIT"  # (inside a group: see PostgresEngine._group_write)
LOCK_ITEM_SKIP = f"{LOCK_ITEM} SKIP LOCKED"  # (locks ahead: a row locked elsewhere comes back as absent)
UPDATE_ITEM = f"UPDATE openddb_items SET size=%s, data=%s WHERE {ITEM_KEY}"
DELETE_ITEM = f"DELETE FROM openddb_items WHERE {ITEM_KEY}"


class PostgresLocksAhead:
    """`lock_ahead` and the writes that use it; mixed into PostgresEngine."""

    writes_ahead = True
    # item key -> (committed table description, stored size and data), locked by the open group
    _locked: dict[ItemKey, tuple[TableMeta, tuple[int, bytes]]]
    # the open group was begun by `lock_ahead` and no write has joined it yet
    _ahead_only = False

    if TYPE_CHECKING:  # provided by PostgresEngine
        session: WriteSession
        group_commit: bool
        _pipe: Pipeline
        _bounded_locks: bool
        _group_lost: bool
        _carried: int
        _bound_ms: int

        def _run(self) -> list[list[tuple[Any, ...]]]: ...
        def _checked(self) -> psycopg.Cursor[Any]: ...
        def _command(self, command: str) -> str: ...
        def _begin_group(self) -> None: ...
        def _close_group(self, *, committing: bool) -> None: ...
        def _rollback_quietly(self) -> None: ...
        def _described(self, tid: int, row: Sequence[Any] | None) -> TableMeta: ...
        def _bound_lone(self) -> None: ...

    def lock_ahead(self, writes: Sequence[tuple[TableMeta, StorageKey]]) -> None:
        """Lock and read the items of these single-item writes, about to run, in one round trip inside the group
        (beginning it); see the module's docstring."""
        if not (self.group_commit and self._bounded_locks) or self._group_lost:
            return
        keys = sorted({key for key in (_key(meta, at) for meta, at in writes) if key is not None}
                      - set(self._locked))[:MOST_AHEAD]
        if not keys:
            return
        self._checked()
        opened = not self.session.pending
        tids = sorted({key[0] for key in keys})
        pipe = self._pipe
        if opened:
            self._begin_group()
        else:
            pipe.add("SAVEPOINT a")
        for tid in tids:
            pipe.add(TABLE_VERSION_NOWAIT, (tid,))
        for key in keys:
            pipe.add(LOCK_ITEM_SKIP, key)
        if not opened:
            pipe.add("RELEASE SAVEPOINT a")
        try:
            answers = self._run()
        except psycopg.Error:
            self._forget_locks(opened)
            return
        answers = answers[len(answers) - len(tids) - len(keys) - (0 if opened else 1):]
        self._keep(tids, keys, answers)
        self._ahead_only = self._ahead_only or opened

    def _keep(self, tids: list[int], keys: list[ItemKey], answers: list[list[tuple[Any, ...]]]) -> None:
        """Keep the rows locked that a write may use without a round trip (see the module's docstring)."""
        tables: dict[int, TableMeta] = {}
        for tid, rows in zip(tids, answers):
            try:
                table = self._described(tid, rows[0] if rows else None)
            except CatalogChanged:
                continue
            if not (table.indexes or table.vector_indexes or table.streaming):
                tables[tid] = table
        for key, rows in zip(keys, answers[len(tids):]):
            if key[0] in tables and rows and rows[0][0] >= 0:
                self._locked[key] = (tables[key[0]], (rows[0][0], rows[0][1]))

    def _forget_locks(self, opened: bool) -> None:
        """The round trip failed (a lock held elsewhere): undo it; the writes lock for themselves."""
        if self._group_lost:  # (a change carried from an earlier write failed with it: `commit` says so)
            return
        try:
            if opened:
                self._close_group(committing=False)
                self._rollback_quietly()
            else:
                self._command("ROLLBACK TO SAVEPOINT a")
                self._command("RELEASE SAVEPOINT a")
        except psycopg.Error:  # (a broken connection: the next call reconnects, and loses the group if open)
            pass

    def _write_on_locked_row(self, ops: Sequence[WriteOp], grouped: bool) -> list[WriteResult] | None:
        """Run a single-item write of the group (`grouped`) on the row `lock_ahead` locked for it, without a round
        trip; None if it has none (the write then locks for itself). Every other write forgets the rows locked
        for its keys (they may be what it changes)."""
        keys = [_key(op.table, op.key) for op in ops]
        locked = self._locked.pop(keys[0], None) if len(ops) == 1 and keys[0] is not None else None
        if locked is None or not grouped or not self.session.pending:
            for key in keys:
                self._locked.pop(key, None)  # type: ignore[arg-type]
            return None
        self._ahead_only = False
        old_size, data = locked[1]
        old = orjson.loads(data)
        new = ops[0].apply(old)  # (a refusal raises here, having queued nothing)
        key = keys[0]
        assert key is not None
        if new is old:
            result = WriteResult(old, old, old_size, old_size)
        else:
            new_size = 0 if new is None else item_size(new)
            self._bound_lone()
            if new is None:
                self._pipe.add(DELETE_ITEM, key)
            else:
                self._pipe.add(UPDATE_ITEM, (new_size, orjson.dumps(new), *key))
            self._carried = len(self._pipe)
            result = WriteResult(old, new, old_size, new_size)
        self.session.writes += 1
        return [result]

    def end_locks_ahead(self) -> None:
        """The pass's writes have run: forget the rows locked for them; a group `lock_ahead` began that no write
        joined (their requests never reached the engine) is rolled back, so it holds no locks meanwhile."""
        self._locked = {}
        if self._ahead_only and self.session.pending and not self._group_lost:
            self._forget_locks(True)
        self._ahead_only = False


def item_key(tid: int, key: StorageKey) -> ItemKey:
    """An item's primary key as its columns hold it (see `postgres_indexes.stored_key`)."""
    return tid, key.h, stored_key(key.pk, ITEM_KEY_LIMIT), key.sk


def _key(meta: TableMeta, at: StorageKey) -> ItemKey | None:
    """The key as the item's columns hold it; None for a long partition key (its whole form is kept apart)."""
    key = item_key(meta.table_id, at)
    return key if key[2] is at.pk else None
