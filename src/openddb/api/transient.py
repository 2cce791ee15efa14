"""Transient statuses: how long tables and indexes stay CREATING, UPDATING or DELETING.

DynamoDB answers CreateTable, UpdateTable and DeleteTable at once and finishes the change in the background: the
table (or index) is CREATING, UPDATING or DELETING meanwhile. OpenDDB finishes every change before it answers, so
by default a table is ACTIVE (or gone) by the next request. With `openddb serve --delay-transient-statuses
[SECONDS]` (DynamoDB Local's `-delayTransientStatuses`), each change keeps its transient status for SECONDS, so
code that waits for ACTIVE (boto3's `table_exists` / `table_not_exists` waiters) is exercised as on AWS.

The status is never kept by a timer: a change stores, in the table's description, the status it shows and until
when (`pending`, `pending_until`, epoch seconds by `openddb.clock`), and every reader derives the status from
them. So every worker and every PostgreSQL node sharing the store sees the same status at the same moment, and
moving the `--dev` clock ahead (`POST /openddb/clock`) ends a transient status at once. A table whose DELETING
time is over is gone to every request; the background duty (`finish_deletions`) then removes it from the store.

What DynamoDB does to requests meanwhile (the API Reference, and DynamoDB's answers quoted in public threads):
- reads and writes of items need an ACTIVE table: on a CREATING table they get ResourceNotFoundException
  ("You can perform read and write operations only on an ACTIVE table", CreateTable); an UPDATING table "remains
  available for data operations" (TableStatus), and on a DELETING table "DynamoDB might continue to accept data
  read and write operations ... until the table deletion is complete" (DeleteTable): both are served;
- UpdateTable needs an ACTIVE table; DeleteTable refuses a CREATING or UPDATING table and answers a DELETING one
  without error (DeleteTable); CreateTable refuses a name in use, whatever its status. Each refusal is a
  ResourceInUseException worded by the status (`refuse_if_busy`).
"""

from __future__ import annotations

import os
import time

from openddb import clock
from openddb.errors import ResourceInUseException
from openddb.model.schema import IndexMeta, IndexStatus, TableMeta, TableStatus
from openddb.storage.base import CatalogChanged, Engine

# The variable holding the seconds a change keeps its transient status (unset or 0: none, the default); `openddb
# serve --delay-transient-statuses` sets it, and every worker it forks inherits it. Read per change (only
# CreateTable, UpdateTable and DeleteTable ask), so a server in a test process may set it too.
DELAY_VARIABLE = "OPENDDB_TRANSIENT_SECONDS"

_IN_USE = "Attempt to change a resource which is still in use: "
# The wording by status: "Table is being created: T" (DeleteTable of a CREATING table, quoted in
# vdesabou/kafka-docker-playground issue 8703, 2026, and CreateTable of one in terraform-aws-dynamodb-table issue
# 51, 2022), "Table is being updated: T" (UpdateTable of an UPDATING table, sebdah/dynamic-dynamodb issue 36) and
# "Table is being deleted: T" (CreateTable of a DELETING table, Wantworthy/dynode issue 26; DeleteTable of one,
# terraform-provider-aws PR 3355). Best guess: UpdateTable of a CREATING or DELETING table, never quoted that we
# found, is taken to use the same words.
_BEING = {"CREATING": "created", "UPDATING": "updated", "DELETING": "deleted"}


def delay_seconds() -> float:
    return float(os.environ.get(DELAY_VARIABLE) or 0)


def until(now: float) -> float:
    """When a transient status that starts `now` ends."""
    return now + delay_seconds()


def delayed() -> bool:
    """Whether changes keep a transient status on this server (if not, none is stored: descriptions stay as they
    were before the option existed)."""
    return delay_seconds() > 0


def table_status(meta: TableMeta, now: float | None = None) -> TableStatus:
    """The table's status now (a table whose deletion is over still says DELETING: see `gone`)."""
    pending = meta.pending
    if pending is not None and (pending == "DELETING" or (clock.now() if now is None else now) < meta.pending_until):
        return pending
    return meta.status


def gone(meta: TableMeta, now: float | None = None) -> bool:
    """Whether the table's deletion is over: no request finds it any more."""
    return meta.pending == "DELETING" and (clock.now() if now is None else now) >= meta.pending_until


def serves_items(meta: TableMeta) -> bool:
    """Whether reads and writes of items reach the table: not while it is CREATING, nor once its deletion is over."""
    now = clock.now()
    return table_status(meta, now) != "CREATING" and not gone(meta, now)


def index_status(index: IndexMeta, now: float) -> IndexStatus:
    """An index's status now: CREATING while its backfill runs (`index.status`), or its transient status."""
    if index.status == "ACTIVE" and index.pending is not None and now < index.pending_until:
        return index.pending
    return index.status


def warm_status(warm_until: float, now: float) -> str:
    """The Status of a WarmThroughput: UPDATING while a raise is under way, then ACTIVE."""
    return "UPDATING" if now < warm_until else "ACTIVE"


def dropping(meta: TableMeta, now: float) -> list[IndexMeta]:
    """The GSIs still being deleted (described as DELETING)."""
    return [index for index in meta.dropping if now < index.pending_until]


def refuse_if_busy(meta: TableMeta, now: float) -> None:
    """ResourceInUseException unless the table is ACTIVE (UpdateTable; DeleteTable checks DELETING first)."""
    status = table_status(meta, now)
    if status in _BEING:
        raise ResourceInUseException(f"{_IN_USE}Table is being {_BEING[status]}: {meta.name}")


def refuse_index_busy(meta: TableMeta, index: IndexMeta, now: float) -> None:
    """An index whose change is still under way takes no other (DynamoDB's words, two spaces included, quoted in
    hashicorp/terraform issue 9559, 2016)."""
    if index_status(index, now) == "UPDATING":
        raise ResourceInUseException(f"{_IN_USE}Index is being updated.  Table: {meta.name} Index: {index.name}")


def finish_deletions(engine: Engine) -> None:
    """Remove from the store every table whose DELETING time is over (a background duty; any process may do it,
    and the first one does: the others find it gone or changed). Over by real time, not by `openddb.clock`: a
    process whose clock a test moved ahead already answers as if the table were gone, but must not remove it
    under the other processes sharing the store, whose clocks have not moved."""
    now = time.time()
    for name in engine.list_tables():
        meta = engine.get_table(name)
        if meta is not None and gone(meta, now):
            try:
                engine.delete_table(name, meta)
            except CatalogChanged:
                pass  # removed (or re-created) by another process meanwhile
