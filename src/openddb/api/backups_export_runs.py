"""An export's run, in the background, after ExportTableToPointInTime has answered IN_PROGRESS: chunks on the
server's loop (`background_runs.Runs`), under the export's lease, each a bounded piece of work. The first begins a
point-in-time restore of the table as it stood at ExportTime into an internal table (`openddb/export-<id>`; an
incremental export, a second one at its ExportFromTime); the next ones fill it RESTORE_CHUNK items at a time (the
engine's chunked restore, as RestoreTableToPointInTime's); then each writes up to EXPORT_CHUNK of its items (an
incremental one, of the keys the recovery log shows changed) to the data files (backups_export_files.py); the last
writes the manifests, drops the internal tables and records the export COMPLETED.

Every chunk stores the export's progress (the record `export-progress` of `openddb/exports`: the internal tables,
the last key written, the files and how far each got) after its lines are on disk, so a run cut short by a crash
or kill -9 is taken up where its last chunk left it by a background duty (`resume_exports`) once its lease has
expired: an export ends COMPLETED, or FAILED if its source can no longer give its items (the table deleted or its
recovery turned off meanwhile, or a failure: see the server's log), its directory then without manifests; never
half-visible."""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson

from openddb import clock
from openddb.api import backups_export_files as files
from openddb.api import backups_ion as ion
from openddb.api import backups_records as records
from openddb.api.background_runs import Runs
from openddb.api.figures import epoch_millis
from openddb.model.schema import TableMeta
from openddb.storage.base import (
    HASH_SPACE,
    RESTORE_CHUNK,
    Engine,
    RestoreSource,
    Row,
    StorageKey,
    lease_holder,
)

log = logging.getLogger("openddb.exports")

EXPORTS_TABLE = "openddb/exports"
_PROGRESS = "export-progress"
EXPORT_TABLE_PREFIX = "openddb/export-"  # the internal tables an export reads its snapshots from
EXPORT_CHUNK = 5_000  # items written per chunk
_LEASE_SECONDS = 10.0  # renewed every chunk
# best guess: DynamoDB's FailureCode and FailureMessage of an export it could not finish are not recorded
_CUT_SHORT = ("InternalServerError", "The export was cut short by a restart of the server")
_SOURCE_LOST = ("InternalServerError", "The table's point-in-time recovery no longer covers the export's time")
_RUNNING: Runs[str] = Runs()  # the exports this process drives


def save_export(engine: Engine, description: dict[str, Any]) -> None:
    records.save(engine, EXPORTS_TABLE, "export", description["ExportArn"], description)


def export_records(engine: Engine) -> list[dict[str, Any]]:
    return records.records(engine, EXPORTS_TABLE, "export")


def take_lease(engine: Engine, arn: str) -> bool:
    return engine.try_lease(f"export:{arn}", lease_holder(), _LEASE_SECONDS, time.time())


def begin_export(engine: Engine, description: dict[str, Any], source: TableMeta, at: float) -> None:
    """Store the export `description` (IN_PROGRESS; its lease taken) with its progress, in one transaction: of
    `source` as it stood at `at`. (Committed by the caller.)"""
    meta = records.records_table(engine, EXPORTS_TABLE, create=True)
    assert meta is not None
    progress = {"arn": description["ExportArn"], "source": source.to_json().decode(), "at": at,
                "written": files.Written().to_json()}
    engine.write([records.record_op(meta, "export", description["ExportArn"], description),
                  records.record_op(meta, _PROGRESS, description["ExportArn"], progress)])


@dataclass
class _Run:
    """An export being written: its description, its progress (as stored), and what it was read into."""

    description: dict[str, Any]
    progress: dict[str, Any]
    source: TableMeta = field(init=False)
    written: files.Written = field(init=False)
    changes: list[tuple[StorageKey, float]] | None = None  # (an incremental export's, read once a process)

    def __post_init__(self) -> None:
        self.source = TableMeta.from_json(self.progress["source"])
        self.written = files.Written.from_json(self.progress["written"])

    @property
    def arn(self) -> str:
        return str(self.description["ExportArn"])

    @property
    def ion(self) -> bool:
        return bool(self.description["ExportFormat"] == "ION")

    def snapshot(self, engine: Engine, member: str) -> TableMeta | None:
        name = self.progress.get(member)
        return None if name is None else engine.get_table(name)


def schedule_export(engine: Engine, arn: str) -> None:
    """Drive the export `arn` (IN_PROGRESS, its lease taken) to its end on this process's loop, from where its
    stored progress left it; no-op if this process drives it already."""
    runs: list[_Run] = []

    def chunk() -> bool:
        if not take_lease(engine, arn):
            return False  # (another process drives it)
        if not runs:
            description = records.record(engine, EXPORTS_TABLE, "export", arn)
            progress = records.record(engine, EXPORTS_TABLE, _PROGRESS, arn)
            if description is None or description["ExportStatus"] != "IN_PROGRESS" or progress is None:
                return False
            runs.append(_Run(description, progress))
        return _advance(engine, runs[0])

    def failed() -> None:
        if runs:
            _drop_snapshots(engine, runs[0])
            _fail(engine, runs[0].description, ("InternalServerError", "The export failed (see the server's log)"))

    _RUNNING.start(arn, lambda: records.background_chunk(engine, chunk), f"export {arn}", failed)


def _advance(engine: Engine, run: _Run) -> bool:
    """One chunk; True while more remain."""
    progress = run.progress
    if "snapshot" not in progress:
        _start(engine, run)
    elif not progress.get("restored"):
        if not _restore_chunk(engine, run):
            return False
    elif "IncrementalExportSpecification" in run.description:
        return _advance_changes(engine, run)
    else:
        return _advance_items(engine, run)
    _save_progress(engine, run)
    return True


def _start(engine: Engine, run: _Run) -> None:
    """The export's directory and `_started`; the restores of its snapshots begun."""
    files.begin(files.place(run.description)[1])
    source, at = run.source, float(run.progress["at"])
    times = {"snapshot": at}
    specification = run.description.get("IncrementalExportSpecification")
    if specification is not None:
        times["before"] = float(specification["ExportFromTime"])
    for member, moment in times.items():
        meta = engine.begin_restore(_internal_table(source), RestoreSource(table=source, at=moment))
        run.progress[member] = meta.stored_name


def _restore_chunk(engine: Engine, run: _Run) -> bool:
    """Up to RESTORE_CHUNK more items of a snapshot; False if its source was lost (the export then FAILED)."""
    for member in ("snapshot", "before"):
        meta = run.snapshot(engine, member)
        if member in run.progress and meta is None:
            return _lost(engine, run)
        if meta is None or member in run.progress.get("filled", []):
            continue
        progress = engine.continue_restore(meta, RESTORE_CHUNK)
        if progress == "lost":
            return _lost(engine, run)
        if progress == "done":
            run.progress["filled"] = [*run.progress.get("filled", []), member]
        return True
    run.progress["restored"] = True
    return True


def _lost(engine: Engine, run: _Run) -> bool:
    log.warning("export %s lost its source (its table deleted or its recovery turned off): FAILED", run.arn)
    _drop_snapshots(engine, run)
    _fail(engine, run.description, _SOURCE_LOST)
    return False


def _advance_items(engine: Engine, run: _Run) -> bool:
    """A full export's chunk: the next EXPORT_CHUNK items of the snapshot, in key order, written."""
    snapshot = run.snapshot(engine, "snapshot")
    if snapshot is None:
        return _lost(engine, run)
    after = run.progress.get("after")
    rows: list[Row] = []
    found = engine.scan(snapshot, 0, HASH_SPACE, None if after is None else _key(after))
    for row in found:
        rows.append(row)
        if len(rows) == EXPORT_CHUNK:
            break
    close = getattr(found, "close", None)
    if close is not None:
        close()  # (an engine's scan must be finished before its next call)
    lines = [ion.item_line(row.data) if run.ion else b'{"Item":' + bytes(row.data) + b"}\n" for row in rows]
    _write(run, lines, sum(row.size for row in rows))
    if len(rows) < EXPORT_CHUNK:
        return _complete(engine, run)
    run.progress["after"] = _key_json(rows[-1].key)
    _save_progress(engine, run)
    return True


def _advance_changes(engine: Engine, run: _Run) -> bool:
    """An incremental export's chunk: for each key changed in its span, one line (Developer Guide, "DynamoDB table
    export output format"): the time of its last change, its key, its image at ExportToTime (none if deleted) and,
    for NEW_AND_OLD_IMAGES, at ExportFromTime (none if inserted); nothing for one inserted and deleted inside it."""
    snapshot, before = run.snapshot(engine, "snapshot"), run.snapshot(engine, "before")
    if snapshot is None or before is None:
        return _lost(engine, run)
    specification = run.description["IncrementalExportSpecification"]
    if run.changes is None:
        run.changes = engine.recovery_changes(run.source, float(specification["ExportFromTime"]),
                                              float(run.progress["at"]))
    position = int(run.progress.get("position", 0))
    both = specification["ExportViewType"] == "NEW_AND_OLD_IMAGES"
    lines, size = [], 0
    for key, at in run.changes[position:position + EXPORT_CHUNK]:
        new, old = engine.get(snapshot, key), engine.get(before, key)
        if new is None and old is None:
            continue
        image = new if new is not None else old
        assert image is not None
        item = orjson.loads(image.data)
        keys = {name: item[name] for name in run.source.key_names}
        lines.append(_change_line(run, int(at * 1e6), keys, None if new is None else bytes(new.data),
                                  bytes(old.data) if old is not None and both else None))
        size += image.size
    _write(run, lines, size)
    run.progress["position"] = position + EXPORT_CHUNK
    if run.progress["position"] >= len(run.changes):
        return _complete(engine, run)
    _save_progress(engine, run)
    return True


def _change_line(run: _Run, micros: int, keys: dict[str, Any], new: bytes | None, old: bytes | None) -> bytes:
    """An incremental export's line in its format."""
    if run.ion:
        return ion.change_line(micros, keys, new, old)
    line = b'{"Metadata":{"WriteTimestampMicros":{"N":"%d"}},"Keys":%s' % (micros, orjson.dumps(keys))
    if new is not None:
        line += b',"NewImage":' + new
    if old is not None:
        line += b',"OldImage":' + old
    return line + b"}\n"


def _write(run: _Run, lines: list[bytes], size: int) -> None:
    prefix, directory = files.place(run.description)
    files.append(directory, prefix, run.written, lines, _extension(run))
    run.written.count += len(lines)
    run.written.size += size


def _extension(run: _Run) -> str:
    return "ion.gz" if run.ion else "json.gz"  # (best guess for Ion: the guide shows only .json.gz names)


def _save_progress(engine: Engine, run: _Run) -> None:
    run.progress["written"] = run.written.to_json()
    records.save(engine, EXPORTS_TABLE, _PROGRESS, run.arn, run.progress)


def _key_json(key: StorageKey) -> list[Any]:
    return [key.h, base64.b64encode(key.pk).decode(), base64.b64encode(key.sk).decode()]


def _key(stored: list[Any]) -> StorageKey:
    return StorageKey(int(stored[0]), base64.b64decode(stored[1]), base64.b64decode(stored[2]))


def _internal_table(source: TableMeta) -> TableMeta:
    """An internal table to restore `source` into, as it stood at some time (dropped once the export is written)."""
    return TableMeta(name=f"{EXPORT_TABLE_PREFIX}{uuid.uuid4().hex}", table_id=0, uuid=str(uuid.uuid4()),
                     hash_key=source.hash_key, range_key=source.range_key,
                     attribute_definitions=list(source.attribute_definitions), created_at=time.time(),
                     billing_mode="PAY_PER_REQUEST")


def _complete(engine: Engine, run: _Run) -> bool:
    """The last data file, the manifests (last: a directory with them is a whole export), the snapshots dropped,
    the export recorded COMPLETED; False (nothing more to do)."""
    description, written = run.description, run.written
    prefix, directory = files.place(description)
    summary = {"version": "2020-06-30", "exportArn": run.arn, "startTime": files.iso(description["StartTime"]),
               "endTime": files.iso(clock.now()), "tableArn": run.source.arn, "tableId": run.source.uuid,
               "exportTime": files.iso(float(run.progress["at"])), "s3Bucket": description["S3Bucket"],
               "s3Prefix": description.get("S3Prefix"),
               "s3SseAlgorithm": description.get("S3SseAlgorithm", "AES256"),
               "s3SseKmsKeyId": description.get("S3SseKmsKeyId"),
               "manifestFilesS3Key": f"{prefix}/manifest-files.json", "billedSizeBytes": written.size,
               "itemCount": written.count, "outputFormat": description["ExportFormat"],
               "exportType": description["ExportType"]}
    specification = description.get("IncrementalExportSpecification")
    if specification is not None:  # best guess: the names of an incremental export's span in its manifest
        del summary["exportTime"]
        summary.update({"exportFromTime": files.iso(specification["ExportFromTime"]),
                        "exportToTime": files.iso(specification["ExportToTime"]),
                        "exportViewType": specification["ExportViewType"]})
    files.finish(directory, prefix, written, _extension(run), summary)
    _drop_snapshots(engine, run)
    _save_progress(engine, run)
    save_export(engine, description | {
        "ExportStatus": "COMPLETED", "ExportManifest": f"{prefix}/manifest-summary.json",
        "EndTime": epoch_millis(clock.now()), "ItemCount": written.count, "BilledSizeBytes": written.size})
    return False


def _drop_snapshots(engine: Engine, run: _Run) -> None:
    for member in ("snapshot", "before"):
        meta = run.snapshot(engine, member)
        if meta is not None:
            engine.delete_table(meta.stored_name)


def _fail(engine: Engine, description: dict[str, Any], failure: tuple[str, str]) -> None:
    """The export recorded FAILED; its manifests removed if a crash came between writing them and recording the
    export COMPLETED (a directory with them would pass for a whole export)."""
    directory = files.place(description)[1]
    for name in files.MANIFESTS:
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


def resume_exports(engine: Engine) -> None:
    """A background duty: an export still IN_PROGRESS that no process drives (its lease expired: the process
    writing it died) is taken up where its progress left it; FAILED if it has none (cut short before its first
    record was whole)."""
    for description in export_records(engine):
        arn = description["ExportArn"]
        if description["ExportStatus"] != "IN_PROGRESS" or arn in _RUNNING or not take_lease(engine, arn):
            continue
        if records.record(engine, EXPORTS_TABLE, _PROGRESS, arn) is None:
            _fail(engine, description, _CUT_SHORT)
        else:
            log.info("export %s taken up again where it was cut short", arn)
            schedule_export(engine, arn)


def drop_abandoned_snapshots(engine: Engine) -> None:
    """A background duty: the internal snapshot tables no export IN_PROGRESS reads (left by an export's step a
    crash cut short before its progress was stored), once older than an hour."""
    running = {d["ExportArn"] for d in export_records(engine) if d["ExportStatus"] == "IN_PROGRESS"}
    kept = {progress.get(member) for progress in records.records(engine, EXPORTS_TABLE, _PROGRESS)
            if progress["arn"] in running for member in ("snapshot", "before")}
    for name in engine.list_tables():
        if name.startswith(EXPORT_TABLE_PREFIX) and name not in kept:
            meta = engine.get_table(name)
            if meta is not None and meta.created_at < time.time() - 3600:
                engine.delete_table(name, meta)

