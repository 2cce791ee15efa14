"""Exports to a local directory in DynamoDB's S3 export layout: ExportTableToPointInTime (FULL_EXPORT and
INCREMENTAL_EXPORT in DYNAMODB_JSON or ION), DescribeExport, ListExports.

The bucket is a directory (backups_buckets.py). Under it, as on S3 (Developer Guide, "DynamoDB table export
output format"): `S3Prefix/AWSDynamoDB/<ExportId>/` holds `_started`, `data/<id>.json.gz` (gzipped lines
`{"Item": {...}}`; for ION, `data/<id>.ion.gz`, lines `$ion_1_0 {Item:{...}}` written by backups_ion.py),
`manifest-files.json` (one line per data file), `manifest-summary.json`, and a `.checksum` of
each manifest. A full export reads the table as it stood at ExportTime (default: now) through point-in-time
recovery, which it needs as on DynamoDB; an incremental one, the keys the recovery log shows changed in its span
(15 minutes to 24 hours), with their images at both ends. ExportTableToPointInTime answers IN_PROGRESS; the
export is written in the background in chunks (backups_export_runs.py), taken up again after a crash, then
COMPLETED, or FAILED if its source was lost meanwhile (its directory then holds no manifest). The records live in
the internal table `openddb/exports`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from openddb import clock
from openddb.api import validation as v
from openddb.api.backups_continuous import backed_up_table, earliest_restorable
from openddb.api.backups_export_runs import begin_export, export_records, schedule_export, take_lease
from openddb.api.backups_shapes import Timestamp, stamped_id, timestamp
from openddb.api.context import RequestContext
from openddb.api.figures import epoch_millis
from openddb.errors import (
    ExportConflictException,
    ExportNotFoundException,
    InvalidExportTimeException,
    PointInTimeRecoveryUnavailableException,
    ValidationException,
)
from openddb.model.schema import TableMeta
from openddb.storage.base import RecoveryWindow

EXPORT_TABLE_TO_POINT_IN_TIME = v.Struct({
    "TableArn": v.Str(required=True, min_len=1, max_len=1024),
    "ExportTime": Timestamp(),
    "ClientToken": v.Str(),
    "S3Bucket": v.Str(required=True, max_len=255),
    "S3BucketOwner": v.Str(pattern="[0-9]{12}"),
    "S3Prefix": v.Str(max_len=1024),
    "S3SseAlgorithm": v.Str(enum=("AES256", "KMS")),
    "S3SseKmsKeyId": v.Str(min_len=1, max_len=2048),
    "ExportFormat": v.Str(enum=("DYNAMODB_JSON", "ION")),
    "ExportType": v.Str(enum=("FULL_EXPORT", "INCREMENTAL_EXPORT")),
    "IncrementalExportSpecification": v.Struct({
        "ExportFromTime": Timestamp(), "ExportToTime": Timestamp(),
        "ExportViewType": v.Str(enum=("NEW_IMAGE", "NEW_AND_OLD_IMAGES"))}),
    "FilterSpecification": v.Any_(),
})
TOKEN_SECONDS = 8 * 3600.0  # "A client token is valid for 8 hours after the first request that uses it"
_SHORTEST, _LONGEST = 15 * 60.0, 24 * 3600.0  # an incremental export's span (DDB-EXPORT-004, the quotas page)
DESCRIBE_EXPORT = v.Struct({"ExportArn": v.Str(required=True, min_len=37, max_len=1024)})
LIST_EXPORTS = v.Struct({"TableArn": v.Str(min_len=1, max_len=1024),
                         "MaxResults": v.Int(minimum=1, maximum=25, java="Integer"), "NextToken": v.Str()})


def export_table_to_point_in_time(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(EXPORT_TABLE_TO_POINT_IN_TIME, request)
    incremental = _incremental(request)
    source = backed_up_table(context, request["TableArn"])
    earlier = _replayed(context, request)
    if earlier is not None:
        return {"ExportDescription": earlier}
    window = context.engine.recovery_window(source)
    started = clock.now()
    export_id = stamped_id(started)
    description = {
        "ExportArn": f"{source.arn}/export/{export_id}", "ExportStatus": "IN_PROGRESS",
        "StartTime": epoch_millis(started), "TableArn": source.arn, "TableId": source.uuid,
        "S3Bucket": request["S3Bucket"], "ExportFormat": request.get("ExportFormat") or "DYNAMODB_JSON",
        **{member: request[member] for member in ("ClientToken", "S3BucketOwner", "S3Prefix", "S3SseAlgorithm",
                                                  "S3SseKmsKeyId") if request.get(member) is not None}}
    if incremental is None:
        at = _export_time(request, source, window, started)
        description.update({"ExportType": "FULL_EXPORT", "ExportTime": epoch_millis(at)})
    else:
        since, at = _window(incremental, window, started)
        description.update({"ExportType": "INCREMENTAL_EXPORT", "IncrementalExportSpecification": {
            "ExportFromTime": epoch_millis(since), "ExportToTime": epoch_millis(at),
            "ExportViewType": incremental.get("ExportViewType") or "NEW_AND_OLD_IMAGES"}})
    engine = context.engine
    take_lease(engine, description["ExportArn"])  # (before it is recorded: no duty may take it for abandoned)
    with engine.session.serialized():  # (committed now, for the run's first chunk to find it)
        begin_export(engine, description, source, at)
        engine.commit()
    schedule_export(engine, description["ExportArn"])
    return {"ExportDescription": description}


def _replayed(context: RequestContext, request: dict[str, Any]) -> dict[str, Any] | None:
    """The export an ExportTableToPointInTime with this ClientToken started within 8 hours (the API Reference's
    idempotency window), if any: the same request answers it again; one with another table, bucket, prefix, format
    or type is ExportConflictException (ack-api-quirks' DynamoDB catalogue, DDB-EXPORT-009). (ExportTime and the
    incremental span are not compared: an earlier export holds them resolved, not as asked.)"""
    token = request.get("ClientToken")
    if token is None:
        return None
    asked = (request["TableArn"], request["S3Bucket"], request.get("S3Prefix"),
             request.get("ExportFormat") or "DYNAMODB_JSON", request.get("ExportType") or "FULL_EXPORT")
    since = clock.now() - TOKEN_SECONDS
    for earlier in export_records(context.engine):
        if earlier.get("ClientToken") != token or earlier["StartTime"] < since:
            continue
        if asked != (earlier["TableArn"], earlier["S3Bucket"], earlier.get("S3Prefix"), earlier["ExportFormat"],
                     earlier["ExportType"]):
            raise ExportConflictException("Export conflict: Duplicate request detected with conflicting parameters")
        return earlier
    return None


def _incremental(request: dict[str, Any]) -> dict[str, Any] | None:
    """An INCREMENTAL_EXPORT's IncrementalExportSpecification, None for a FULL_EXPORT; their couplings checked in
    DynamoDB's words (ack-api-quirks' DynamoDB catalogue, DDB-EXPORT-003)."""
    specification, export_type = request.get("IncrementalExportSpecification"), request.get("ExportType")
    if specification is not None and export_type is None:
        raise ValidationException("Invalid Request: Export Type expected to be Incremental Export when incremental "
                                  "export specification is provided")
    if specification is not None and export_type == "FULL_EXPORT":
        raise ValidationException("Invalid Request: When Export Type is Full Export , Incremental Export "
                                  "Specification should not be provided")
    if export_type != "INCREMENTAL_EXPORT":
        return None
    if specification is None:
        raise ValidationException("Invalid Request: Incremental Export Specification expected when export type is "
                                  "set as Incremental Export")
    if specification.get("ExportFromTime") is None:
        raise ValidationException("Invalid Request: ExportFromTime must be provided in IncrementalExportSpecification")
    return specification  # type: ignore[no-any-return]


def _export_time(request: dict[str, Any], source: TableMeta, window: RecoveryWindow | None, now: float) -> float:
    """A full export's ExportTime (now by default), in the recovery window."""
    if window is None:
        # best guess: as RestoreTableToPointInTime words it (see backups_restore)
        raise PointInTimeRecoveryUnavailableException(
            f"Point in time recovery is not enabled for table '{source.name}'")
    # (an export reads the table up to now: ExportTime is not bound by LatestRestorableDateTime, the lag of
    # DynamoDB's restores; best guess, as the API Reference only says it must be in the recovery window)
    earliest, latest = earliest_restorable(window, now), now
    at = timestamp(request, "ExportTime")
    if at is None:
        return latest
    if not earliest <= at <= latest:
        # The API Reference's description of InvalidExportTimeException (its message is not recorded in public)
        raise InvalidExportTimeException("The specified ExportTime is outside of the point in time recovery window.")
    return at


def _window(specification: dict[str, Any], window: RecoveryWindow | None, now: float) -> tuple[float, float]:
    """An incremental export's span (ExportFromTime, ExportToTime: now by default), its refusals in DynamoDB's
    words (ack-api-quirks' DynamoDB catalogue, DDB-EXPORT-001 and -004: without recovery too, the first one)."""
    since = timestamp(specification, "ExportFromTime")
    until = timestamp(specification, "ExportToTime")
    assert since is not None
    until = now if until is None else until
    if window is None or since < earliest_restorable(window, now) or since >= until:
        # (best guess: the time it prints, the from time in the captures)
        raise InvalidExportTimeException("Incremental export period from time cannot be less than the table creation "
                                         f"time : {_second(since)}")
    if until > now:
        raise InvalidExportTimeException("Incremental export period to time cannot be greater than the current time "
                                         f": {_second(until)}")
    if until - since < _SHORTEST:
        raise InvalidExportTimeException("Difference between export period from time and export period to time is "
                                         "less than 15 minutes")
    if until - since > _LONGEST:
        # best guess: the wording of the 24-hour limit (the quotas page's "Maximum Incremental Export period window")
        raise InvalidExportTimeException("Difference between export period from time and export period to time is "
                                         "more than 24 hours")
    return since, until


def _second(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def describe_export(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(DESCRIBE_EXPORT, request)
    arn = request["ExportArn"]
    if ":table/" not in arn or "/export/" not in arn:
        # (ack-api-quirks' DynamoDB catalogue, DDB-EXPORT-006: a table's or an import's ARN, or no ARN)
        raise ValidationException("Invalid Export ARN")
    for description in export_records(context.engine):
        if description["ExportArn"] == arn and context.owns(arn):
            return {"ExportDescription": description}
    # (DDB-EXPORT-006: DynamoDB's message names the export twice so)
    raise ExportNotFoundException(f"Export not found: Export not found: {arn}")


def list_exports(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    """Exports oldest first (of one table with TableArn), MaxResults a page, NextToken the last one's ARN."""
    v.validate(LIST_EXPORTS, request)
    chosen = sorted((d for d in export_records(context.engine)
                     if request.get("TableArn") in (None, d["TableArn"]) and context.owns(d["ExportArn"])),
                    key=lambda d: (d["StartTime"], d["ExportArn"]))
    token = request.get("NextToken")
    if token is not None:
        chosen = [d for d in chosen if (d["StartTime"], d["ExportArn"]) > next(
            ((e["StartTime"], e["ExportArn"]) for e in chosen if e["ExportArn"] == token), (float("inf"), ""))]
    limit = request.get("MaxResults") or 25
    answer: dict[str, Any] = {"ExportSummaries": [
        {member: d[member] for member in ("ExportArn", "ExportStatus", "ExportType")} for d in chosen[:limit]]}
    if len(chosen) > limit:
        answer["NextToken"] = chosen[limit - 1]["ExportArn"]
    return answer


HANDLERS = {
    "ExportTableToPointInTime": export_table_to_point_in_time,
    "DescribeExport": describe_export,
    "ListExports": list_exports,
}
