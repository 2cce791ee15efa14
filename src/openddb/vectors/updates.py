"""UpdateTable's VectorIndexUpdates: one vector index created (online, CREATING while its backfill runs, then
ACTIVE) or deleted per call ("You can add or remove one vector index for each UpdateTable operation": the API
Reference, UpdateTable). A creation is stored CREATING first, so from that moment every write maintains the new
index (`Engine.write`); the table's existing items are then filled in by chunks (`Engine.backfill_vector_index`,
idempotent, so writes racing it neither lose nor duplicate an entry), driven as GSI backfills are: under a lease
in the store, one chunk per event-loop turn, taken up again after a restart (`resume_vector_backfills`, through
`api.indexes.resume_backfills`)."""

from __future__ import annotations

import copy
import time
from typing import Any

from openddb import clock
from openddb.api import indexes as ix
from openddb.api import transient
from openddb.api import validation as v
from openddb.api.background_runs import Runs
from openddb.api.context import RequestContext
from openddb.api.table_descriptions import describe
from openddb.api.table_shapes import UPDATE_TABLE
from openddb.errors import LimitExceededException, ResourceNotFoundException, invalid
from openddb.model.schema import TableMeta, VectorIndexMeta
from openddb.storage.base import CatalogChanged, Engine, StorageKey, lease_holder
from openddb.vectors.definitions import (
    check_table_vectors,
    describe_vector_indexes,
    parse_vector_index,
    require_on_demand,
)

_ALLOWED = frozenset({"TableName", "AttributeDefinitions", "VectorIndexUpdates"})
_RUNNING: Runs[tuple[str, int]] = Runs()  # (table uuid, index id) of the backfills this process drives


def update_vector_indexes(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    """UpdateTable with VectorIndexUpdates (which comes alone: best guess, DynamoDB's rule is not documented)."""
    v.validate_named(UPDATE_TABLE, request)
    if any(value is not None for member, value in request.items() if member not in _ALLOWED):
        raise invalid("VectorIndexUpdates must be the only operation in the request")  # best guess
    updates: list[dict[str, Any]] = request["VectorIndexUpdates"]
    if len(updates) != 1:
        # best guess at the wording of the API Reference's rule
        raise invalid("Only one vector index can be created or deleted per UpdateTable request")
    update = updates[0]
    if (update.get("Create") is None) == (update.get("Delete") is None):
        raise invalid("One of VectorIndexUpdate.Create, VectorIndexUpdate.Delete must be specified")  # best guess
    before = context.described_table(request["TableName"])
    now = clock.now()
    transient.refuse_if_busy(before, now)
    # One online creation at a time, but the index being created may be deleted (the GSIs' rule, "You can delete
    # an index that is being created during the Backfilling phase", and wording: best guess for vector indexes).
    deleting = (update.get("Delete") or {}).get("IndexName")
    if any(i.status == "CREATING" and i.name != deleting for i in before.vector_indexes) or \
            any(transient.index_status(i, now) == "CREATING" for i in before.indexes):
        raise LimitExceededException(ix.ONE_ONLINE_INDEX)
    meta = copy.deepcopy(before)
    if update.get("Create") is not None:
        created: VectorIndexMeta | None = _create(meta, request, update["Create"])
        deleted = None
    else:
        created, deleted = None, _delete(meta, update["Delete"]["IndexName"])
    context.engine.update_table(meta)
    description = describe(context, meta)
    if deleted is not None:
        gone = copy.copy(before)
        gone.vector_indexes = [deleted]
        description.setdefault("VectorIndexes", []).extend(
            {**d, "IndexStatus": "DELETING"} for d in describe_vector_indexes(context, gone, counts=False))
    if created is not None:
        schedule_vector_backfill(context.engine, meta, created)
    return {"TableDescription": description}


def _create(meta: TableMeta, request: dict[str, Any], spec: dict[str, Any]) -> VectorIndexMeta:
    if meta.vector_index(spec["IndexName"]) is not None or meta.index(spec["IndexName"]) is not None:
        raise invalid("Attempting to create an index which already exists")  # (the GSIs' wording)
    require_on_demand(meta.billing_mode)
    types = {d["AttributeName"]: d["AttributeType"] for d in meta.attribute_definitions}
    defined = {d["AttributeName"]: d["AttributeType"] for d in request.get("AttributeDefinitions") or []}
    index = parse_vector_index(spec, {**defined, **types}, meta.key_names, meta.next_index_id)
    index.status, index.backfilling = "CREATING", True
    meta.next_index_id += 1
    for attribute in ([index.hash_key] if index.hash_key else []) + index.filters:
        if attribute.name not in types:
            meta.attribute_definitions.append({"AttributeName": attribute.name, "AttributeType": attribute.type})
    meta.vector_indexes.append(index)
    check_table_vectors(meta)
    return index


def _delete(meta: TableMeta, name: str) -> VectorIndexMeta:
    """The index leaves `meta` (its entries go with the stored change), and so do the definitions of attributes
    nothing else uses."""
    index = meta.vector_index(name)
    if index is None:
        raise ResourceNotFoundException(f"Requested resource not found: Vector index: {name} not found")  # best guess
    meta.vector_indexes.remove(index)
    ix.drop_unused_definitions(meta)
    return index


def resume_vector_backfills(engine: Engine, meta: TableMeta) -> None:
    """Take up every vector index of `meta` still CREATING (a restart cut its backfill short); no-op for running
    ones. Called for each table by `api.indexes.resume_backfills`, which walks the tables once for both kinds."""
    for index in meta.vector_indexes:
        if index.status == "CREATING":
            schedule_vector_backfill(engine, meta, index)


def schedule_vector_backfill(engine: Engine, meta: TableMeta, index: VectorIndexMeta) -> None:
    """Fill a CREATING vector index from the table's items, chunk by chunk on the server's loop, then make it
    ACTIVE; no-op if this process already drives it, or another holds its lease."""
    state: dict[str, Any] = {"after": None, "filled": False}

    def step() -> bool:
        current = engine.get_table(meta.stored_name)
        target = None if current is None or current.uuid != meta.uuid else next(
            (i for i in current.vector_indexes if i.index_id == index.index_id), None)
        if current is None or target is None or target.status != "CREATING" or current.restoring or \
                not engine.try_lease(f"vector-backfill:{meta.uuid}:{index.index_id}", lease_holder(), 10.0,
                                     time.time()):
            return False
        if not state["filled"]:
            after: StorageKey | None = engine.backfill_vector_index(current, target, state["after"],
                                                                   ix.BACKFILL_CHUNK)
            state["after"], state["filled"] = after, after is None
            return True
        finished = copy.deepcopy(current)
        for candidate in finished.vector_indexes:
            if candidate.index_id == index.index_id:
                candidate.status, candidate.backfilling = "ACTIVE", False
        try:
            engine.update_table(finished)
        except CatalogChanged:
            return True  # changed meanwhile: finish on the fresh description
        return False

    _RUNNING.start((meta.uuid, index.index_id), step,
                   f"backfill of vector index {index.name} of table {meta.name}")
