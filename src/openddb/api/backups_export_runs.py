"""An export's run, in the background, after ExportTableToPointInTime has answered IN_PROGRESS: chunks on the
server's loop (`indexes.drive`), under the export's lease. The first restores the table as it stood at ExportTime
into an internal table (`openddb/export-<id>`, one transaction); each next one writes up to EXPORT_CHUNK of its
items to the data files; the last writes the manifests, drops the internal table and records the export
COMPLETED. A run cut short by a crash or kill -9 is not resumed (its snapshot and the lines not yet written are
gone with the process): once its lease has expired, a background duty records it FAILED (`fail_abandoned`), and
its directory holds no manifest, so no reader takes it for whole; the snapshot is dropped within the hour."""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import os
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from openddb import clock
from openddb.api import backups_ion as ion
from openddb.api import backups_records as records
from openddb.api.backups_buckets import bucket_directory
from openddb.api.figures import epoch_millis
from openddb.api.indexes import drive
from openddb.model.schema import TableMeta
from openddb.storage.base import HASH_SPACE, Engine, RestoreSource, Row, StorageKey, lease_holder

EXPORTS_TABLE = "openddb/exports"
EXPORT_TABLE_PREFIX = "openddb/export-"  # the internal tables an export reads its snapshot from
_FILE_ITEMS = 100_000  # items per data file
EXPORT_CHUNK = 5_000  # items written per chunk
_LEASE_SECONDS = 10.0  # renewed every chunk
# best guess: DynamoDB's FailureCode and FailureMessage of an export it could not finish are not recorded
_CUT_SHORT = ("InternalServerError", "The export was cut short by a restart of the server")
_RUNNING: set[str] = set()  # the exports this process drives


def save_export(engine: Engine, description: dict[str, Any]) -> None:
    records.save(engine, EXPORTS_TABLE, "export", description["ExportArn"], description)


def export_records(engine: Engine) -> list[dict[str, Any]]:
    return records.records(engine, EXPORTS_TABLE, "export")


def take_lease(engine: Engine, arn: str) -> bool:
    return engine.try_lease(f"export:{arn}", lease_holder(), _LEASE_SECONDS, time.time())


@dataclass
class _Run:
    """An export being written: where, what is written so far, and the snapshot being read."""

    description: dict[str, Any]
    source: TableMeta
    at: float
    directory: str = ""
    prefix: str = ""
    snapshot: TableMeta | None = None  # the table at `at`
    before: TableMeta | None = None  # an incremental export's: the table at its ExportFromTime
    changes: list[tuple[StorageKey, float]] = field(default_factory=list)  # (and the keys it changed since)
    after: StorageKey | None = None
    files: list[dict[str, Any]] = field(default_factory=list)
    lines: list[bytes] = field(default_factory=list)
    count: int = 0
    size: int = 0


def schedule_export(engine: Engine, description: dict[str, Any], source: TableMeta, at: float) -> None:
    """Write the export `description` (recorded IN_PROGRESS, its lease taken) of `source` as it stood at `at`."""
    run = _Run(description, source, at)
    arn = description["ExportArn"]
    _RUNNING.add(arn)

    def chunk() -> bool:
        more = take_lease(engine, arn) and _advance(engine, run)
        if not more:
            _RUNNING.discard(arn)
        return more

    def failed() -> None:
        _RUNNING.discard(arn)
        _drop_snapshots(engine, run)
        _fail(engine, description, ("InternalServerError", "The export failed (see the server's log)"))

    drive(lambda: records.background_chunk(engine, chunk), failed, f"export {arn}")


def _advance(engine: Engine, run: _Run) -> bool:
    """One chunk; True while more remain."""
    if run.snapshot is None:
        _start(engine, run)
        return True
    if run.before is not None:
        return _advance_changes(engine, run)
    rows: list[Row] = []
    found = engine.scan(run.snapshot, 0, HASH_SPACE, run.after)
    for row in found:
        rows.append(row)
        if len(rows) == EXPORT_CHUNK:
            break
    close = getattr(found, "close", None)
    if close is not None:
        close()  # (an engine's scan must be finished before its next call)
    ion_lines = run.description["ExportFormat"] == "ION"
    for row in rows:
        run.lines.append(ion.item_line(row.data) if ion_lines else b'{"Item":' + bytes(row.data) + b"}\n")
        run.count, run.size = run.count + 1, run.size + row.size
        if len(run.lines) == _FILE_ITEMS:
            _write_file(run)
    if len(rows) == EXPORT_CHUNK:
        run.after = rows[-1].key
        return True
    _complete(engine, run)
    return False


def _advance_changes(engine: Engine, run: _Run) -> bool:
    """An incremental export's chunk: for each key changed in its span, one line (Developer Guide, "DynamoDB table
    export output format"): the time of its last change, its key, its image at ExportToTime (none if deleted) and,
    for NEW_AND_OLD_IMAGES, at ExportFromTime (none if inserted); nothing for one inserted and deleted inside it."""
    assert run.snapshot is not None and run.before is not None
    chunk, run.changes = run.changes[:EXPORT_CHUNK], run.changes[EXPORT_CHUNK:]
    both = run.description["IncrementalExportSpecification"]["ExportViewType"] == "NEW_AND_OLD_IMAGES"
    for key, at in chunk:
        new, old = engine.get(run.snapshot, key), engine.get(run.before, key)
        if new is None and old is None:
            continue
        image = new if new is not None else old
        assert image is not None
        item = orjson.loads(image.data)
        keys = {name: item[name] for name in run.source.key_names}
        run.lines.append(_change_line(run, int(at * 1e6), keys, None if new is None else bytes(new.data),
                                      bytes(old.data) if old is not None and both else None))
        run.count, run.size = run.count + 1, run.size + image.size
        if len(run.lines) == _FILE_ITEMS:
            _write_file(run)
    if run.changes:
        return True
    _complete(engine, run)
    return False


def _change_line(run: _Run, micros: int, keys: dict[str, Any], new: bytes | None, old: bytes | None) -> bytes:
    """An incremental export's line in its format."""
    if run.description["ExportFormat"] == "ION":
        return ion.change_line(micros, keys, new, old)
    line = b'{"Metadata":{"WriteTimestampMicros":{"N":"%d"}},"Keys":%s' % (micros, orjson.dumps(keys))
    if new is not None:
        line += b',"NewImage":' + new
    if old is not None:
        line += b',"OldImage":' + old
    return line + b"}\n"


def _write_file(run: _Run) -> None:
    """The lines taken so far, a data file."""
    extension = "ion.gz" if run.description["ExportFormat"] == "ION" else "json.gz"
    run.files.append(_data_file(run.directory, run.prefix, run.lines, extension))
    run.lines = []


def _start(engine: Engine, run: _Run) -> None:
    """The export's directory and `_started`, and the snapshot of the table at ExportTime."""
    description = run.description
    run.prefix, run.directory = _place(description)
    os.makedirs(os.path.join(run.directory, "data"), exist_ok=True)
    open(os.path.join(run.directory, "_started"), "wb").close()
    source = run.source
    run.snapshot = engine.restore_table(_internal_table(source), RestoreSource(table=source, at=run.at))
    specification = description.get("IncrementalExportSpecification")
    if specification is not None:
        since = float(specification["ExportFromTime"])
        run.changes = engine.recovery_changes(source, since, run.at)
        run.before = engine.restore_table(_internal_table(source), RestoreSource(table=source, at=since))


def _internal_table(source: TableMeta) -> TableMeta:
    """An internal table to restore `source` into, as it stood at some time (dropped once the export is written)."""
    return TableMeta(name=f"{EXPORT_TABLE_PREFIX}{uuid.uuid4().hex}", table_id=0, uuid=str(uuid.uuid4()),
                     hash_key=source.hash_key, range_key=source.range_key,
                     attribute_definitions=list(source.attribute_definitions), created_at=time.time(),
                     billing_mode="PAY_PER_REQUEST")


def _complete(engine: Engine, run: _Run) -> None:
    """The last data file, the manifests (last: a directory with them is a whole export), the snapshot dropped,
    the export recorded COMPLETED."""
    description = run.description
    if run.lines or not run.files:
        _write_file(run)
    manifest = b"".join(orjson.dumps(entry) + b"\n" for entry in run.files)
    _with_checksum(os.path.join(run.directory, "manifest-files.json"), manifest)
    summary = {"version": "2020-06-30", "exportArn": description["ExportArn"],
               "startTime": _iso(description["StartTime"]), "endTime": _iso(clock.now()),
               "tableArn": run.source.arn, "tableId": run.source.uuid, "exportTime": _iso(run.at),
               "s3Bucket": description["S3Bucket"], "s3Prefix": description.get("S3Prefix"),
               "s3SseAlgorithm": description.get("S3SseAlgorithm", "AES256"),
               "s3SseKmsKeyId": description.get("S3SseKmsKeyId"),
               "manifestFilesS3Key": f"{run.prefix}/manifest-files.json", "billedSizeBytes": run.size,
               "itemCount": run.count, "outputFormat": description["ExportFormat"],
               "exportType": description["ExportType"]}
    specification = description.get("IncrementalExportSpecification")
    if specification is not None:  # best guess: the names of an incremental export's span in its manifest
        del summary["exportTime"]
        summary.update({"exportFromTime": _iso(specification["ExportFromTime"]),
                        "exportToTime": _iso(specification["ExportToTime"]),
                        "exportViewType": specification["ExportViewType"]})
    _with_checksum(os.path.join(run.directory, "manifest-summary.json"), orjson.dumps(summary))
    _drop_snapshots(engine, run)
    save_export(engine, description | {
        "ExportStatus": "COMPLETED", "ExportManifest": f"{run.prefix}/manifest-summary.json",
        "EndTime": epoch_millis(clock.now()), "ItemCount": run.count, "BilledSizeBytes": run.size})


def _drop_snapshots(engine: Engine, run: _Run) -> None:
    for snapshot in (run.snapshot, run.before):
        if snapshot is not None:
            engine.delete_table(snapshot.stored_name)


def _data_file(directory: str, prefix: str, lines: list[bytes], extension: str) -> dict[str, Any]:
    """A data file (gzipped lines) named as DynamoDB names them (26 characters; `.ion.gz` for Ion: best guess)."""
    name = f"{uuid.uuid4().hex[:26]}.{extension}"
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


def _place(description: dict[str, Any]) -> tuple[str, str]:
    """An export's key prefix (`S3Prefix/AWSDynamoDB/<ExportId>`) and its directory."""
    export_id = description["ExportArn"].rsplit("/", 1)[1]
    prefix = "/".join(part for part in (description.get("S3Prefix", "").strip("/"), "AWSDynamoDB", export_id) if part)
    return prefix, os.path.join(bucket_directory(description["S3Bucket"]), *prefix.split("/"))


def _fail(engine: Engine, description: dict[str, Any], failure: tuple[str, str]) -> None:
    """The export recorded FAILED; its manifests removed if a crash came between writing them and recording the
    export COMPLETED (a directory with them would pass for a whole export)."""
    directory = _place(description)[1]
    for name in ("manifest-summary.json", "manifest-summary.checksum", "manifest-files.json",
                 "manifest-files.checksum"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(directory, name))
    failed = {key: value for key, value in description.items()
              if key not in ("ExportManifest", "ItemCount", "BilledSizeBytes")}
    failed.update({"ExportStatus": "FAILED", "FailureCode": failure[0], "FailureMessage": failure[1],
                   "EndTime": epoch_millis(clock.now())})

    def save() -> bool:
        save_export(engine, failed)
        return False

    records.background_chunk(engine, save)


def fail_abandoned(engine: Engine) -> None:
    """A background duty: an export still IN_PROGRESS that no process drives (its lease expired: the process
    writing it died) is recorded FAILED."""
    for description in export_records(engine):
        arn = description["ExportArn"]
        if description["ExportStatus"] == "IN_PROGRESS" and arn not in _RUNNING and take_lease(engine, arn):
            _fail(engine, description, _CUT_SHORT)


def drop_abandoned_snapshots(engine: Engine) -> None:
    """A background duty: the internal snapshot tables of exports a crash cut short (older than an hour)."""
    for name in engine.list_tables():
        if name.startswith(EXPORT_TABLE_PREFIX):
            meta = engine.get_table(name)
            if meta is not None and meta.created_at < time.time() - 3600:
                engine.delete_table(name, meta)
