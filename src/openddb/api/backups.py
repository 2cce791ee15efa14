"""Continuous backups: DescribeContinuousBackups, and UpdateContinuousBackups as far as it can be honoured without
restores (point-in-time recovery can be turned off, not on)."""

from __future__ import annotations

from typing import Any

from openddb.api import validation as v
from openddb.api.context import RequestContext
from openddb.errors import TableNotFoundException, UnsupportedOperationException, ValidationException
from openddb.model.schema import TableMeta

DESCRIBE_CONTINUOUS_BACKUPS = v.Struct({"TableName": v.table_name_or_arn()})
# RecoveryPeriodInDays is 1-35 days (the API Reference's PointInTimeRecoverySpecification; botocore's model gives
# the shape an Integer: min 1, max 35), checked in the envelope like any constrained member.
_PITR_SPECIFICATION = v.Struct({
    "PointInTimeRecoveryEnabled": v.Bool(required=True),
    "RecoveryPeriodInDays": v.Int(minimum=1, maximum=35, java="Integer"),
}, required=True)
UPDATE_CONTINUOUS_BACKUPS = v.Struct({
    "TableName": v.table_name_or_arn(),
    "PointInTimeRecoverySpecification": _PITR_SPECIFICATION,
})
# Point-in-time recovery as a table without it describes it: no RecoveryPeriodInDays and no restorable times,
# which DynamoDB gives only while it is enabled (API Reference, PointInTimeRecoveryDescription). DynamoDB reports
# every table's continuous backups ENABLED; this server takes no backups yet, so it says DISABLED rather than
# claim a capability it does not have.
def _disabled() -> dict[str, Any]:
    recovery = {"PointInTimeRecoveryStatus": "DISABLED"}
    return {"ContinuousBackupsDescription": {"ContinuousBackupsStatus": "DISABLED",
                                             "PointInTimeRecoveryDescription": recovery}}


def _backed_up_table(context: RequestContext, name_or_arn: str) -> TableMeta:
    """The table a continuous-backups request names; the backup operations call a missing one
    TableNotFoundException (their documented error), worded as DescribeContinuousBackups words it."""
    name, meta = context.find_table(name_or_arn)
    if meta is None:
        raise TableNotFoundException(f"Table not found: {name}")
    return meta


def describe_continuous_backups(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    """Continuous backups are on for every DynamoDB table; point-in-time recovery is off, since it cannot be
    turned on here (restores are not built yet)."""
    v.validate_named(DESCRIBE_CONTINUOUS_BACKUPS, request)
    _backed_up_table(context, request["TableName"])
    return _disabled()


def update_continuous_backups(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    """The request is checked in full (RecoveryPeriodInDays included) and its table looked up, as on DynamoDB.
    Turning point-in-time recovery off is what it is here already, and answers so; turning it on would promise
    restores this server cannot make, so it is refused by name rather than pretended."""
    v.validate_named(UPDATE_CONTINUOUS_BACKUPS, request)
    specification = request["PointInTimeRecoverySpecification"]
    if not specification["PointInTimeRecoveryEnabled"] and specification.get("RecoveryPeriodInDays") is not None:
        # (ack-api-quirks' DynamoDB catalogue, DDB-TABLE-442, 2026-10; checked here before the table is looked up,
        # as UpdateTable checks its request-only rules: the order is not recorded)
        raise ValidationException("Invalid Request: Cannot specify RecoveryPeriodInDays when disabling point-in-time "
                                  "recovery.")
    _backed_up_table(context, request["TableName"])
    if specification["PointInTimeRecoveryEnabled"]:
        raise UnsupportedOperationException(
            "UpdateContinuousBackups with PointInTimeRecoveryEnabled true",
            "point-in-time recovery needs restores (RestoreTableToPointInTime), which it does not have yet")
    return _disabled()


HANDLERS = {
    "DescribeContinuousBackups": describe_continuous_backups,
    "UpdateContinuousBackups": update_continuous_backups,
}
