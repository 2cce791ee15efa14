"""On-demand backups: CreateBackup, DescribeBackup, ListBackups, DeleteBackup. Restores are in
backups_restore.py, continuous backups (point-in-time recovery) in backups_continuous.py; this module's
HANDLERS holds all four's (exports: backups_export.py).

CreateBackup fixes the backup's instant and answers it CREATING; its items are copied in the background, in
chunks, while writes go on (backups_runs.py), and it is AVAILABLE once whole ("the backup is created
asynchronously ... Backup requests are processed instantaneously and become available for restore within
minutes": API Reference, CreateBackup). One a crash cut short is finished after the restart, or deleted if it can
no longer be: never listed AVAILABLE unless whole."""

from __future__ import annotations

from typing import Any

from openddb import clock
from openddb.api import backups_continuous, backups_export, backups_import, backups_restore, transient
from openddb.api import validation as v
from openddb.api.backups_continuous import backed_up_table
from openddb.api.backups_runs import backup_arn, expiry, start_backup
from openddb.api.backups_shapes import (
    BACKUP_ARN,
    BACKUP_NAME,
    Timestamp,
    backup_in_use,
    backup_not_found,
    timestamp,
    visible_backup,
)
from openddb.api.context import RequestContext, table_name_from
from openddb.api.figures import epoch_millis
from openddb.api.table_encryption import sse_description
from openddb.api.throughput import throughput_description
from openddb.errors import TableInUseException
from openddb.model.schema import TableMeta
from openddb.storage.base import BackupRecord

CREATE_BACKUP = v.Struct({"TableName": v.table_name_or_arn(), "BackupName": BACKUP_NAME})
DESCRIBE_BACKUP = v.Struct({"BackupArn": BACKUP_ARN})
LIST_BACKUPS = v.Struct({
    "TableName": v.table_name_or_arn(required=False),
    "Limit": v.Int(minimum=1, maximum=100, java="Integer"),
    "TimeRangeLowerBound": Timestamp(),
    "TimeRangeUpperBound": Timestamp(),
    "ExclusiveStartBackupArn": v.Str(min_len=37, max_len=1024),
    "BackupType": v.Str(enum=("USER", "SYSTEM", "AWS_BACKUP", "ALL")),
})


def create_backup(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_named(CREATE_BACKUP, request)
    meta = backed_up_table(context, request["TableName"])
    now = clock.now()
    if transient.table_status(meta, now) != "ACTIVE":
        # best guess: DynamoDB's wording of a backup of a table not ACTIVE is not recorded in public
        raise TableInUseException(f"Table is in use: {meta.name}")
    # (kept to the millisecond it is described with, so a TimeRange bound taken from a description matches it)
    record = BackupRecord(backup_arn(meta, now), request["BackupName"], meta.name, meta.uuid, epoch_millis(now))
    begun = start_backup(context.engine, record, meta)
    if begun is None:  # deleted or replaced meanwhile
        backed_up_table(context, meta.name)
        raise TableInUseException(f"Table is in use: {meta.name}")  # best guess (as above)
    return {"BackupDetails": _details(begun)}


def _in_use(context: RequestContext, record: BackupRecord) -> bool:
    """A backup still being made, or being restored to a table: DeleteBackup refuses it (BackupInUseException)."""
    return record.status == "CREATING" or any(
        meta.restore is not None and meta.restore.get("SourceBackupArn") == record.arn and meta.restoring
        for meta in context.engine.restored_tables())


def _details(record: BackupRecord, status: str | None = None) -> dict[str, Any]:
    details = {"BackupArn": record.arn, "BackupName": record.name, "BackupSizeBytes": record.size,
               "BackupStatus": status or record.status, "BackupType": record.backup_type,
               "BackupCreationDateTime": epoch_millis(record.created_at)}
    expires = expiry(record)
    if expires is not None:
        details["BackupExpiryDateTime"] = epoch_millis(expires)
    return details


def _description(record: BackupRecord, encrypted: bool, status: str | None = None) -> dict[str, Any]:
    """A BackupDescription: the backup, and its table as it was when the backup was taken."""
    meta = TableMeta.from_json(record.meta)
    source: dict[str, Any] = {
        "TableName": meta.name, "TableId": meta.uuid, "TableArn": meta.arn, "TableSizeBytes": record.size,
        "KeySchema": meta.key_schema_wire(), "TableCreationDateTime": epoch_millis(meta.created_at),
        "ProvisionedThroughput": {"ReadCapacityUnits": meta.read_capacity, "WriteCapacityUnits": meta.write_capacity},
        "ItemCount": record.item_count, "BillingMode": meta.billing_mode}
    if meta.on_demand:
        source["OnDemandThroughput"] = dict(meta.on_demand)
    features: dict[str, Any] = {}
    for index in meta.indexes:
        described: dict[str, Any] = {"IndexName": index.name, "KeySchema": index.key_schema_wire(),
                                     "Projection": index.projection_wire()}
        if index.is_global:
            throughput = throughput_description(index)
            described["ProvisionedThroughput"] = {name: throughput[name]
                                                  for name in ("ReadCapacityUnits", "WriteCapacityUnits")}
        features.setdefault("GlobalSecondaryIndexes" if index.is_global else "LocalSecondaryIndexes",
                            []).append(described)
    if meta.streaming:
        features["StreamDescription"] = {"StreamEnabled": True, "StreamViewType": meta.streaming}
    if meta.ttl_attribute is not None:
        features["TimeToLiveDescription"] = {"TimeToLiveStatus": "ENABLED", "AttributeName": meta.ttl_attribute}
    if meta.sse is not None:
        features["SSEDescription"] = sse_description(meta, encrypted)
    description: dict[str, Any] = {"BackupDetails": _details(record, status), "SourceTableDetails": source}
    if features:
        description["SourceTableFeatureDetails"] = features
    return description


def describe_backup(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_named(DESCRIBE_BACKUP, request, "BackupArn")
    record = visible_backup(context, request["BackupArn"])
    if record is None:
        raise backup_not_found(request["BackupArn"])
    return {"BackupDescription": _description(record, context.engine.encrypted)}


def delete_backup(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_named(DESCRIBE_BACKUP, request, "BackupArn")
    record = visible_backup(context, request["BackupArn"])
    if record is None:
        raise backup_not_found(request["BackupArn"])
    if _in_use(context, record):
        raise backup_in_use(record.arn)
    if not context.engine.delete_backup(record.arn):
        raise backup_not_found(request["BackupArn"])
    return {"BackupDescription": _description(record, context.engine.encrypted, "DELETED")}


def list_backups(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    """Backups oldest first, filtered by table, creation time (the lower bound inclusive, the upper exclusive:
    API Reference, ListBackups) and type (USER by default; SYSTEM: those of deleted tables that had point-in-time
    recovery on; this server takes no AWS_BACKUP backups)."""
    v.validate(LIST_BACKUPS, request)
    low = timestamp(request, "TimeRangeLowerBound")
    high = timestamp(request, "TimeRangeUpperBound")
    name = request.get("TableName")
    if name is not None and name != table_name_from(name):
        context.check_table_arn(name)
    wanted = request.get("BackupType") or "USER"
    chosen = [record for record in context.engine.list_backups()
              if (name is None or record.table_name == table_name_from(name)) and context.owns(record.arn)
              and (low is None or record.created_at >= low) and (high is None or record.created_at < high)
              and wanted in ("ALL", record.backup_type)]
    start = request.get("ExclusiveStartBackupArn")
    if start is not None:
        after = next((i for i, record in enumerate(chosen) if record.arn == start), None)
        chosen = chosen[after + 1:] if after is not None else []
    limit = request.get("Limit")
    answer: dict[str, Any] = {}
    if limit is not None and len(chosen) > limit:
        chosen = chosen[:limit]
        answer["LastEvaluatedBackupArn"] = chosen[-1].arn
    answer["BackupSummaries"] = [_summary(record) for record in chosen]
    return answer


def _summary(record: BackupRecord) -> dict[str, Any]:
    table_arn = record.arn.split("/backup/", 1)[0]
    return {"TableName": record.table_name, "TableId": record.table_uuid, "TableArn": table_arn,
            **_details(record)}


HANDLERS = {
    "CreateBackup": create_backup,
    "DescribeBackup": describe_backup,
    "DeleteBackup": delete_backup,
    "ListBackups": list_backups,
    **backups_restore.HANDLERS,
    **backups_continuous.HANDLERS,
    **backups_export.HANDLERS,
    **backups_import.HANDLERS,
}
