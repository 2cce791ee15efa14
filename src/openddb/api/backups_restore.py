"""Restores into a new table: RestoreTableFromBackup and RestoreTableToPointInTime, with the overrides DynamoDB
allows (billing mode, provisioned and on-demand throughput, the GSIs and LSIs to keep, encryption).

The engine creates the table, CREATING and empty, and the restore's run fills it in the background, chunk by
chunk (backups_runs.py), then its indexes, stored CREATING, are filled by the index backfill (api/indexes.py);
meanwhile the table serves no item (`pending`), its RestoreSummary says RestoreInProgress, and `finish_restores`
makes it ACTIVE once every index is. DynamoDB does not carry over a
stream, TTL, tags, auto scaling or point-in-time recovery to a restored table (Developer Guide, "Restoring a
DynamoDB table from a backup"): neither does this."""

from __future__ import annotations

import copy
import uuid
from typing import Any

from openddb import clock
from openddb.api import indexes as ix
from openddb.api import transient
from openddb.api import validation as v
from openddb.api.backups_continuous import backed_up_table, restorable
from openddb.api.backups_runs import BUILDING, resume_restores, schedule_restore
from openddb.api.backups_shapes import (
    BACKUP_ARN,
    Timestamp,
    backup_in_use,
    backup_not_found,
    timestamp,
    visible_backup,
)
from openddb.api.context import RequestContext
from openddb.api.table_capacity import provisioned_request
from openddb.api.table_descriptions import describe
from openddb.api.table_encryption import sse_enabled, sse_of
from openddb.errors import (
    InvalidRestoreTimeException,
    LimitExceededException,
    PointInTimeRecoveryUnavailableException,
    ResourceInUseException,
    TableAlreadyExistsException,
    TableInUseException,
    ValidationException,
    invalid,
)
from openddb.model.schema import BillingMode, TableMeta, VectorIndexMeta
from openddb.storage.base import CatalogChanged, Engine, RestoreSource

_OVERRIDES: dict[str, v.Shape] = {
    "BillingModeOverride": v.Str(enum=("PROVISIONED", "PAY_PER_REQUEST")),
    "GlobalSecondaryIndexOverride": v.List(v.Any_()),
    "LocalSecondaryIndexOverride": v.List(v.Any_()),
    "ProvisionedThroughputOverride": ix.THROUGHPUT,
    "OnDemandThroughputOverride": v.Any_(),
    "SSESpecificationOverride": v.Any_(),
    "VectorIndexOverride": v.List(v.Any_()),
}
RESTORE_FROM_BACKUP = v.Struct({"TargetTableName": v.table_name(), "BackupArn": BACKUP_ARN, **_OVERRIDES})
RESTORE_TO_POINT_IN_TIME = v.Struct({
    "SourceTableArn": v.Str(min_len=1, max_len=1024),
    "SourceTableName": v.table_name(required=False),
    "TargetTableName": v.table_name(),
    "UseLatestRestorableTime": v.Bool(),
    "RestoreDateTime": Timestamp(),
    **_OVERRIDES,
})
CONCURRENT_RESTORES = 50
_UNTIL_RESTORED = 1e15  # a restore's CREATING lasts until `finish_restores` ends it (far beyond any clock)


def restore_table_from_backup(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_named(RESTORE_FROM_BACKUP, request, "TargetTableName")
    record = visible_backup(context, request["BackupArn"])
    if record is None:
        raise backup_not_found(request["BackupArn"])
    if record.status == "CREATING":
        raise backup_in_use(record.arn)
    _check_target(context, request["TargetTableName"])
    _check_restores(context)
    source = TableMeta.from_json(record.meta)
    summary = {"SourceBackupArn": record.arn, "SourceTableArn": source.arn, "RestoreDateTime": record.created_at}
    meta = _target(context, source, request, summary)
    return _restore(context, meta, RestoreSource(backup_arn=record.arn))


def restore_table_to_point_in_time(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_named(RESTORE_TO_POINT_IN_TIME, request, "TargetTableName")
    named = request.get("SourceTableArn") or request.get("SourceTableName")
    if named is None or (request.get("SourceTableArn") and request.get("SourceTableName")):
        # best guess: DynamoDB's wording when neither or both of the source members is given
        raise ValidationException("Exactly one of SourceTableArn or SourceTableName must be specified")
    at = timestamp(request, "RestoreDateTime")
    latest = bool(request.get("UseLatestRestorableTime"))
    if (at is not None) == latest:
        # best guess: DynamoDB's wording when neither or both of the restore times is given
        raise ValidationException("Exactly one of RestoreDateTime or UseLatestRestorableTime must be specified")
    source = backed_up_table(context, named)
    window = context.engine.recovery_window(source)
    if window is None:
        # best guess: the API Reference says "Point in time recovery has not yet been enabled for this source table"
        raise PointInTimeRecoveryUnavailableException(
            f"Point in time recovery is not enabled for table '{source.name}'")
    earliest, newest = restorable(window, clock.now())
    if at is None:
        at = newest
    elif not earliest <= at <= newest:
        # The API Reference's description of InvalidRestoreTimeException (its message is not recorded in public)
        raise InvalidRestoreTimeException("An invalid restore time was specified. RestoreDateTime must be between "
                                          "EarliestRestorableDateTime and LatestRestorableDateTime.")
    _check_target(context, request["TargetTableName"])
    _check_restores(context)
    summary = {"SourceTableArn": source.arn, "RestoreDateTime": at}
    meta = _target(context, source, request, summary)
    return _restore(context, meta, RestoreSource(table=source, at=at))


def _check_target(context: RequestContext, name: str) -> None:
    existing = context.engine.get_table(context.stored(name))
    if existing is None:
        return
    if transient.table_status(existing) in ("CREATING", "DELETING"):
        # best guess: the wording of the API Reference's "being created or deleted"
        raise TableInUseException(f"Table is being created or deleted: {name}")
    # best guess: DynamoDB's wording for a target name in use follows CreateTable's ("Table already exists: T")
    raise TableAlreadyExistsException(f"Table already exists: {name}")


def _check_restores(context: RequestContext) -> None:
    """"Any number of users can execute up to 50 concurrent restores (any type of restore) in a given account"
    (API Reference, RestoreTableFromBackup): a restored table still CREATING is one."""
    running = sum(1 for meta in context.engine.restored_tables() if in_progress(meta))
    if running >= CONCURRENT_RESTORES:
        # best guess: DynamoDB's wording of this refusal is not recorded
        raise LimitExceededException(f"Too many concurrent restores: the limit is {CONCURRENT_RESTORES}")


def _restore(context: RequestContext, meta: TableMeta, source: RestoreSource) -> dict[str, Any]:
    """Create the table CREATING and start filling it in the background (backups_runs.py); the answer describes
    it CREATING."""
    for index in meta.indexes:
        index.status = "CREATING"
    for vector_index in meta.vector_indexes:  # (refilled from the restored items as UpdateTable's creation is)
        vector_index.status, vector_index.backfilling = "CREATING", True
    meta.pending, meta.pending_until, meta.restoring = "CREATING", _UNTIL_RESTORED, True
    try:
        meta = context.engine.begin_restore(meta, source)
    except ResourceInUseException:  # created meanwhile by another request
        _check_target(context, meta.name)
        raise
    schedule_restore(context.engine, meta)
    description = describe(context, meta, status="CREATING", counts=False, fresh=True, warm=False)
    return {"TableDescription": description}


def _target(context: RequestContext, source: TableMeta, request: dict[str, Any],
            summary: dict[str, Any]) -> TableMeta:
    """The restored table's description: the source's keys, indexes and settings with the request's overrides;
    without the source's stream, TTL, tags and deletion protection."""
    billing: BillingMode = request.get("BillingModeOverride") or source.billing_mode
    wanted = {"BillingMode": billing, **_index_specs(source, request, billing)}
    if "ProvisionedThroughputOverride" in request:
        wanted["ProvisionedThroughput"] = request["ProvisionedThroughputOverride"]
    elif billing == "PROVISIONED" and source.billing_mode == "PROVISIONED":  # (else CreateTable's refusal)
        wanted["ProvisionedThroughput"] = {"ReadCapacityUnits": source.read_capacity,
                                           "WriteCapacityUnits": source.write_capacity}
    types = {d["AttributeName"]: d["AttributeType"] for d in source.attribute_definitions}
    used = set(source.key_names)
    for spec in wanted.get("GlobalSecondaryIndexes", []) + wanted.get("LocalSecondaryIndexes", []):
        used |= {element["AttributeName"] for element in spec["KeySchema"]}
    vectors = _vector_indexes(source, request)
    searched = {attribute.name for vector in vectors  # (the search schemas' attributes stay defined)
                for attribute in [*vector.filters, *([vector.hash_key] if vector.hash_key else [])]}
    defined = {name: kind for name, kind in types.items() if name in used | searched}
    types = {name: kind for name, kind in types.items() if name in used}
    indexes = ix.create_table_indexes(wanted, types, source.hash_key, source.range_key, billing)
    read, write = provisioned_request(wanted, billing)
    now = clock.now()
    meta = copy.deepcopy(source)
    meta.name, meta.table_id, meta.uuid, meta.created_at, meta.version = \
        request["TargetTableName"], 0, str(uuid.uuid4()), now, 0
    meta.attribute_definitions = [{"AttributeName": name, "AttributeType": kind} for name, kind in defined.items()]
    meta.billing_mode, meta.read_capacity, meta.write_capacity = billing, read, write
    meta.billing_mode_updated_at = now if billing == "PAY_PER_REQUEST" else None
    for number, vector in enumerate(vectors, len(indexes) + 1):  # (ids after the new secondary indexes': unique)
        vector.index_id = number
    meta.indexes, meta.next_index_id, meta.dropping = indexes, len(indexes) + len(vectors) + 1, []
    meta.vector_indexes = vectors
    meta.on_demand = ix.on_demand_request(request.get("OnDemandThroughputOverride") or source.on_demand, billing,
                                          clearing=False)
    if "SSESpecificationOverride" in request:
        sse = sse_of({"SSESpecification": request["SSESpecificationOverride"]})
        meta.sse = sse if sse and sse_enabled(sse) else None
    meta.stream, meta.ttl_attribute, meta.ttl_updated_at, meta.tags = None, None, None, []
    meta.deletion_protection, meta.region, meta.account = False, context.region, context.account
    meta.namespace = context.namespace
    meta.last_increase = meta.last_decrease = None
    meta.decreases_today, meta.on_demand_switches, meta.table_class_updates = 0, [], []
    meta.pending, meta.pending_until, meta.warm_until, meta.sse_until = None, 0.0, 0.0, 0.0
    meta.restore = summary
    return meta


def _index_specs(source: TableMeta, request: dict[str, Any], billing: BillingMode) -> dict[str, Any]:
    """The GlobalSecondaryIndexes and LocalSecondaryIndexes of the restored table, as CreateTable would take them:
    the overrides where given (the indexes to keep, as the API Reference has it), else the source's."""
    specs: dict[str, Any] = {}
    gsis = request.get("GlobalSecondaryIndexOverride")
    lsis = request.get("LocalSecondaryIndexOverride")
    if gsis is None:
        gsis = [_spec(index, billing) for index in source.indexes if index.is_global]
    if lsis is None:
        lsis = [_spec(index, billing) for index in source.indexes if not index.is_global]
    for member, given, kind in (("GlobalSecondaryIndexOverride", gsis, True),
                                ("LocalSecondaryIndexOverride", lsis, False)):
        known = {index.name for index in source.indexes if index.is_global == kind}
        for spec in given:
            if not isinstance(spec, dict) or spec.get("IndexName") not in known:
                # best guess: the API Reference says the indexes "should match existing secondary indexes"; the
                # wording of the refusal is not recorded
                raise invalid(f"{member} must name indexes of the source table: "
                              f"{spec.get('IndexName') if isinstance(spec, dict) else spec}")
    if gsis:
        specs["GlobalSecondaryIndexes"] = gsis
    if lsis:
        specs["LocalSecondaryIndexes"] = lsis
    return specs


def _vector_indexes(source: TableMeta, request: dict[str, Any]) -> list[VectorIndexMeta]:
    """The restored table's vector indexes: those VectorIndexOverride names (each must be one of the source's, as
    the API Reference has it), else all of the source's."""
    given = request.get("VectorIndexOverride")
    if given is None:
        return copy.deepcopy(source.vector_indexes)
    known = {index.name: index for index in source.vector_indexes}
    for spec in given:
        if not isinstance(spec, dict) or spec.get("IndexName") not in known:
            # best guess: the API Reference says the indexes "must match existing vector indexes"; the wording of
            # the refusal is not recorded
            raise invalid("VectorIndexOverride must name vector indexes of the source table: "
                          f"{spec.get('IndexName') if isinstance(spec, dict) else spec}")
    return [copy.deepcopy(known[spec["IndexName"]]) for spec in given]


def _spec(index: Any, billing: BillingMode) -> dict[str, Any]:
    spec: dict[str, Any] = {"IndexName": index.name, "KeySchema": index.key_schema_wire(),
                            "Projection": index.projection_wire()}
    if index.is_global and billing == "PROVISIONED":
        spec["ProvisionedThroughput"] = {"ReadCapacityUnits": max(index.read_capacity, 1),
                                         "WriteCapacityUnits": max(index.write_capacity, 1)}
    if index.is_global and index.on_demand and billing == "PAY_PER_REQUEST":
        spec["OnDemandThroughput"] = dict(index.on_demand)
    return spec


def finish_restores(engine: Engine, everywhere: bool = False) -> None:
    """A background duty: a restored table whose items are in and whose indexes are all built is restored (ACTIVE,
    or CREATING for --delay-transient-statuses more). Each second for the restores this process started;
    `everywhere` (every few seconds) for any, as those of another process or one a restart cut short (whose copy is
    taken up again first)."""
    restored = engine.restored_tables() if everywhere else []
    if everywhere:
        resume_restores(engine, restored)
    names = [meta.stored_name for meta in restored] if everywhere else sorted(BUILDING)
    for name in names:
        meta = engine.get_table(name)
        if meta is None or meta.restore is None or meta.pending_until != _UNTIL_RESTORED:
            BUILDING.discard(name)
            continue
        if meta.restoring or any(index.status == "CREATING" for index in meta.indexes) or \
                any(index.status == "CREATING" for index in meta.vector_indexes):
            continue
        finished = copy.deepcopy(meta)
        finished.pending, finished.pending_until = (
            ("CREATING", transient.until(clock.now())) if transient.delayed() else (None, 0.0))
        try:
            engine.update_table(finished)
            BUILDING.discard(name)
        except CatalogChanged:
            pass  # finished by another process, or changed: the next round looks again


def in_progress(meta: TableMeta) -> bool:
    """RestoreInProgress: the restored table is still CREATING."""
    return meta.restore is not None and transient.table_status(meta) == "CREATING"


HANDLERS = {
    "RestoreTableFromBackup": restore_table_from_backup,
    "RestoreTableToPointInTime": restore_table_to_point_in_time,
}
