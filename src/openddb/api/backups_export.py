"""Exports to a local directory in DynamoDB's S3 export layout: ExportTableToPointInTime (FULL_EXPORT in
DYNAMODB_JSON), DescribeExport, ListExports.

The bucket is a directory: `file:///abs/dir` or an absolute path as S3Bucket is taken as it is (the SDKs do not
check the bucket pattern), a bucket name as the directory of that name under $OPENDDB_EXPORT_ROOT (default
./openddb-exports of the server's working directory). Under it, as on S3 (Developer Guide, "DynamoDB table export
output format"): `S3Prefix/AWSDynamoDB/<ExportId>/` holds `_started`, `data/<id>.json.gz` (gzipped lines
`{"Item": {...}}`), `manifest-files.json` (one line per data file), `manifest-summary.json`, and a `.checksum` of
each manifest. The export reads the table as it stood at ExportTime (default: now) through point-in-time recovery,
which it needs as on DynamoDB: the table is restored into an internal table, written out, and dropped. An export
is recorded (in the internal table `openddb/exports`) only once its manifest is written, so one cut short by a
crash is absent, and its directory holds no manifest."""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import orjson

from openddb import clock
from openddb.api import backups_records as records
from openddb.api import validation as v
from openddb.api.backups_continuous import backed_up_table, restorable
from openddb.api.backups_shapes import Timestamp, timestamp
from openddb.api.context import RequestContext
from openddb.api.figures import epoch_millis
from openddb.errors import (
    ExportNotFoundException,
    InvalidExportTimeException,
    PointInTimeRecoveryUnavailableException,
    UnsupportedOperationException,
)
from openddb.model.schema import TableMeta
from openddb.storage.base import HASH_SPACE, Engine, RestoreSource

EXPORTS_TABLE = "openddb/exports"
EXPORT_TABLE_PREFIX = "openddb/export-"  # the internal tables an export reads its snapshot from
ROOT_VARIABLE = "OPENDDB_EXPORT_ROOT"
_FILE_ITEMS = 100_000  # items per data file

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
    "IncrementalExportSpecification": v.Any_(),
    "FilterSpecification": v.Any_(),
})
DESCRIBE_EXPORT = v.Struct({"ExportArn": v.Str(required=True, min_len=37, max_len=1024)})
LIST_EXPORTS = v.Struct({"TableArn": v.Str(min_len=1, max_len=1024),
                         "MaxResults": v.Int(minimum=1, maximum=25, java="Integer"), "NextToken": v.Str()})


def bucket_directory(bucket: str) -> str:
    """The local directory an S3Bucket stands for (see the module docstring)."""
    if bucket.startswith("file://"):
        return bucket[len("file://"):]
    if os.path.isabs(bucket):
        return bucket
    return os.path.join(os.environ.get(ROOT_VARIABLE) or "openddb-exports", bucket)


def export_table_to_point_in_time(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(EXPORT_TABLE_TO_POINT_IN_TIME, request)
    if (request.get("ExportType") or "FULL_EXPORT") != "FULL_EXPORT" or request.get("ExportFormat") == "ION":
        raise UnsupportedOperationException("ExportTableToPointInTime of an INCREMENTAL_EXPORT or in ION",
                                            "only full exports in DYNAMODB_JSON are written")
    source = backed_up_table(context, request["TableArn"])
    window = context.engine.recovery_window(source)
    if window is None:
        # best guess: as RestoreTableToPointInTime words it (see backups_restore)
        raise PointInTimeRecoveryUnavailableException(
            f"Point in time recovery is not enabled for table '{source.name}'")
    started = clock.now()
    earliest, latest = restorable(window, started)
    at = timestamp(request, "ExportTime")
    if at is None:
        at = latest
    elif not earliest <= at <= latest:
        # The API Reference's description of InvalidExportTimeException (its message is not recorded in public)
        raise InvalidExportTimeException("The specified ExportTime is outside of the point in time recovery window.")
    export_id = f"{int(started * 1000):014d}-{os.urandom(4).hex()}"
    description = {
        "ExportArn": f"{source.arn}/export/{export_id}", "ExportStatus": "COMPLETED",
        "StartTime": epoch_millis(started), "TableArn": source.arn, "TableId": source.uuid,
        "ExportTime": epoch_millis(at), "S3Bucket": request["S3Bucket"], "ExportFormat": "DYNAMODB_JSON",
        "ExportType": "FULL_EXPORT",
        **{member: request[member] for member in ("ClientToken", "S3BucketOwner", "S3Prefix", "S3SseAlgorithm",
                                                  "S3SseKmsKeyId") if request.get(member) is not None}}
    count, size = _write_export(context.engine, source, at, description, export_id)
    description.update({"EndTime": epoch_millis(clock.now()), "ItemCount": count, "BilledSizeBytes": size})
    _save(context.engine, description)
    return {"ExportDescription": description}


def _snapshot(engine: Engine, source: TableMeta, at: float) -> TableMeta:
    """The table as it stood at `at`, restored into an internal table (the caller drops it)."""
    meta = TableMeta(name=f"{EXPORT_TABLE_PREFIX}{uuid.uuid4().hex}", table_id=0, uuid=str(uuid.uuid4()),
                     hash_key=source.hash_key, range_key=source.range_key,
                     attribute_definitions=list(source.attribute_definitions), created_at=time.time(),
                     billing_mode="PAY_PER_REQUEST")
    return engine.restore_table(meta, RestoreSource(table=source, at=at))


def _write_export(engine: Engine, source: TableMeta, at: float, description: dict[str, Any],
                  export_id: str) -> tuple[int, int]:
    """The export's files (manifests last); (item count, bytes)."""
    prefix = "/".join(part for part in (description.get("S3Prefix", "").strip("/"), "AWSDynamoDB", export_id) if part)
    directory = os.path.join(bucket_directory(description["S3Bucket"]), *prefix.split("/"))
    os.makedirs(os.path.join(directory, "data"), exist_ok=True)
    open(os.path.join(directory, "_started"), "wb").close()
    snapshot = _snapshot(engine, source, at)
    files: list[dict[str, Any]] = []
    count = size = 0
    try:
        lines: list[bytes] = []
        for row in engine.scan(snapshot, 0, HASH_SPACE, None):
            lines.append(b'{"Item":' + bytes(row.data) + b"}\n")
            count, size = count + 1, size + row.size
            if len(lines) == _FILE_ITEMS:
                files.append(_data_file(directory, prefix, lines))
                lines = []
        if lines or not files:
            files.append(_data_file(directory, prefix, lines))
    finally:
        engine.delete_table(snapshot.name)
    manifest = b"".join(orjson.dumps(entry) + b"\n" for entry in files)
    _with_checksum(os.path.join(directory, "manifest-files.json"), manifest)
    summary = {"version": "2020-06-30", "exportArn": description["ExportArn"],
               "startTime": _iso(description["StartTime"]), "endTime": _iso(clock.now()),
               "tableArn": source.arn, "tableId": source.uuid, "exportTime": _iso(at),
               "s3Bucket": description["S3Bucket"], "s3Prefix": description.get("S3Prefix"),
               "s3SseAlgorithm": description.get("S3SseAlgorithm", "AES256"),
               "s3SseKmsKeyId": description.get("S3SseKmsKeyId"),
               "manifestFilesS3Key": f"{prefix}/manifest-files.json", "billedSizeBytes": size,
               "itemCount": count, "outputFormat": "DYNAMODB_JSON", "exportType": "FULL_EXPORT"}
    _with_checksum(os.path.join(directory, "manifest-summary.json"), orjson.dumps(summary))
    description["ExportManifest"] = f"{prefix}/manifest-summary.json"
    return count, size


def _data_file(directory: str, prefix: str, lines: list[bytes]) -> dict[str, Any]:
    name = f"{uuid.uuid4().hex[:26]}.json.gz"
    data = gzip.compress(b"".join(lines))
    with open(os.path.join(directory, "data", name), "wb") as out:
        out.write(data)
        os.fsync(out.fileno())
    digest = hashlib.md5(data, usedforsecurity=False).digest()
    return {"itemCount": len(lines), "md5Checksum": base64.b64encode(digest).decode(), "etag": digest.hex(),
            "dataFileS3Key": f"{prefix}/data/{name}"}


def _with_checksum(path: str, data: bytes) -> None:
    """A manifest and its `.checksum` (best guess at its content: the MD5 of the manifest, base64, as S3's
    Content-MD5 is written; the Developer Guide names the file but does not show it)."""
    for target, content in ((path, data), (path.rsplit(".", 1)[0] + ".checksum",
                                           base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()))):
        with open(target, "wb") as out:
            out.write(content)
            os.fsync(out.fileno())


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + \
        f"{int(seconds * 1000) % 1000:03d}Z"


# --- the records ---------------------------------------------------------------------------------------------
def _save(engine: Engine, description: dict[str, Any]) -> None:
    records.save(engine, EXPORTS_TABLE, "export", description["ExportArn"], description)


def _records(engine: Engine) -> list[dict[str, Any]]:
    return records.records(engine, EXPORTS_TABLE, "export")


def describe_export(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(DESCRIBE_EXPORT, request)
    for description in _records(context.engine):
        if description["ExportArn"] == request["ExportArn"]:
            return {"ExportDescription": description}
    # best guess: DynamoDB's wording (the API Reference says "The specified export was not found.")
    raise ExportNotFoundException(f"Export not found: {request['ExportArn']}")


def list_exports(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    """Exports oldest first (of one table with TableArn), MaxResults a page, NextToken the last one's ARN."""
    v.validate(LIST_EXPORTS, request)
    chosen = sorted((d for d in _records(context.engine) if request.get("TableArn") in (None, d["TableArn"])),
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


def drop_abandoned_snapshots(engine: Engine) -> None:
    """A background duty: the internal snapshot tables of exports a crash cut short (older than an hour)."""
    for name in engine.list_tables():
        if name.startswith(EXPORT_TABLE_PREFIX):
            meta = engine.get_table(name)
            if meta is not None and meta.created_at < time.time() - 3600:
                engine.delete_table(name, meta)


HANDLERS = {
    "ExportTableToPointInTime": export_table_to_point_in_time,
    "DescribeExport": describe_export,
    "ListExports": list_exports,
}
