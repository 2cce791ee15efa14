"""Continuous backups: DescribeContinuousBackups and UpdateContinuousBackups, which turns point-in-time recovery on
and off; and the upkeep that trims each table's recovery log to its window.

While recovery is on, the engine logs the old image of every change to the table in the change's own
transaction (storage/sqlite_backups.py), so the table can be rebuilt as it stood at any moment from when it was
turned on (or the start of the recovery period, 1-35 days, if later) to now (RestoreTableToPointInTime, in
backups_restore.py)."""

from __future__ import annotations

import time
from typing import Any

from openddb import clock
from openddb.api import validation as v
from openddb.api.context import RequestContext
from openddb.api.figures import epoch_millis
from openddb.errors import TableNotFoundException, ValidationException
from openddb.model.schema import TableMeta
from openddb.storage.base import Engine, RecoveryWindow, lease_holder

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
DEFAULT_RECOVERY_DAYS = 35  # (API Reference, PointInTimeRecoverySpecification: "defaults to 35")
_DAY = 86400.0
LATEST_LAG = 300.0  # LatestRestorableDateTime's distance behind now (see `restorable`)
TRIM_SECONDS = 60.0  # how often the recovery logs are trimmed (by one process of those sharing the store)
_next_trim = 0.0


def backed_up_table(context: RequestContext, name_or_arn: str) -> TableMeta:
    """The table a backup request names; the backup operations call a missing one TableNotFoundException (their
    documented error), worded as DescribeContinuousBackups words it."""
    name, meta = context.find_table(name_or_arn)
    if meta is None:
        raise TableNotFoundException(f"Table not found: {name}")
    return meta


def earliest_restorable(window: RecoveryWindow, now: float) -> float:
    """EarliestRestorableDateTime of a table with recovery on, by the clock `now`: when it was turned on, or the
    start of its recovery period if later."""
    return max(window.enabled_at, now - window.days * _DAY)


def restorable(window: RecoveryWindow, now: float) -> tuple[float, float]:
    """(EarliestRestorableDateTime, LatestRestorableDateTime) of a table with recovery on, by the clock `now`:
    "LatestRestorableDateTime is typically five minutes before the current time" (Developer Guide, "Enable
    point-in-time recovery in DynamoDB"; API Reference, PointInTimeRecoveryDescription), never before the
    earliest ("If you disable point-in-time recovery and later enable it on a table ... you can only immediately
    restore that table using the LatestRestorableDateTime": Developer Guide, "Restore a table in DynamoDB")."""
    earliest = earliest_restorable(window, now)
    return earliest, max(earliest, now - LATEST_LAG)


def _described(window: RecoveryWindow | None, now: float) -> dict[str, Any]:
    """A ContinuousBackupsDescription. Continuous backups are ENABLED for every DynamoDB table (API Reference,
    ContinuousBackupsDescription); RecoveryPeriodInDays and the restorable times only while recovery is on."""
    recovery: dict[str, Any] = {"PointInTimeRecoveryStatus": "DISABLED"}
    if window is not None:
        earliest, latest = restorable(window, now)
        recovery = {"PointInTimeRecoveryStatus": "ENABLED", "RecoveryPeriodInDays": window.days,
                    "EarliestRestorableDateTime": epoch_millis(earliest),
                    "LatestRestorableDateTime": epoch_millis(latest)}
    return {"ContinuousBackupsDescription": {"ContinuousBackupsStatus": "ENABLED",
                                             "PointInTimeRecoveryDescription": recovery}}


def describe_continuous_backups(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_named(DESCRIBE_CONTINUOUS_BACKUPS, request)
    meta = backed_up_table(context, request["TableName"])
    return _described(context.engine.recovery_window(meta), clock.now())


def update_continuous_backups(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    """Turn point-in-time recovery on (for RecoveryPeriodInDays, 35 by default; a table already on keeps its
    earliest restorable time) or off (its log dropped: turning it on again starts afresh, as on DynamoDB)."""
    v.validate_named(UPDATE_CONTINUOUS_BACKUPS, request)
    specification = request["PointInTimeRecoverySpecification"]
    days = specification.get("RecoveryPeriodInDays")
    if not specification["PointInTimeRecoveryEnabled"] and days is not None:
        # (ack-api-quirks' DynamoDB catalogue, DDB-TABLE-442, 2026-10; checked here before the table is looked up,
        # as UpdateTable checks its request-only rules: the order is not recorded)
        raise ValidationException("Invalid Request: Cannot specify RecoveryPeriodInDays when disabling point-in-time "
                                  "recovery.")
    meta = backed_up_table(context, request["TableName"])
    now = clock.now()
    if specification["PointInTimeRecoveryEnabled"]:
        window = context.engine.set_recovery(meta, days or DEFAULT_RECOVERY_DAYS, now)
    else:
        window = context.engine.set_recovery(meta, None, now)
    return _described(window, now)


def trim_recovery_logs(engine: Engine, now: float) -> None:
    """Drop recovery-log records past each table's window: a background duty, once a minute, by the holder of the
    "recovery" lease."""
    global _next_trim
    if now < _next_trim:
        return
    _next_trim = now + TRIM_SECONDS
    if engine.try_lease("recovery", lease_holder(), TRIM_SECONDS * 2, time.time()):
        engine.trim_recovery(now)


HANDLERS = {
    "DescribeContinuousBackups": describe_continuous_backups,
    "UpdateContinuousBackups": update_continuous_backups,
}
