"""An import's run, in the background: chunks on the server's loop (`background_runs.Runs`, as an index's backfill), one
process driving each import at a time (the holder of its lease), each chunk one transaction that writes its items
and the import's progress (the object and the records of it taken, the counts) together. A run a crash or kill -9
cut short is resumed where its last chunk left it (`resume_imports`, a background duty every few seconds), with
exact counts: an import ends COMPLETED or FAILED, never stuck IN_PROGRESS.

The first step lists the objects under the prefix (none: FAILED S3NoSuchBucket, no table made) and creates the
table CREATING (its name taken meanwhile: FAILED TableAlreadyExists); the table serves no item until the last
step makes it ACTIVE (ack-api-quirks' DynamoDB catalogue, DDB-IMPORT-001: PutItem on it is
ResourceNotFoundException meanwhile). Its secondary indexes are written with its items. An import consumes no
write capacity (Developer Guide, "DynamoDB data import from Amazon S3: how it works")."""

from __future__ import annotations

import copy
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from openddb import clock
from openddb.api import backups_records as records
from openddb.api import transient
from openddb.api.background_runs import Runs
from openddb.api.backups_buckets import bucket_directory
from openddb.api.backups_import_sources import Entry, Source, entries, object_keys
from openddb.api.figures import epoch_millis
from openddb.errors import ResourceInUseException
from openddb.model import Item
from openddb.model.schema import TableMeta
from openddb.storage.base import CatalogChanged, Engine, StorageKey, WriteOp, lease_holder

log = logging.getLogger("openddb.imports")

IMPORTS_TABLE = "openddb/imports"
KIND = "import"
IN_PROGRESS_LIMIT = 50  # "up to 50 concurrent import jobs" (Developer Guide, "Import format quotas and validation")
IMPORT_CHUNK = 500  # records read per chunk (one transaction)
_LEASE_SECONDS = 10.0
_UNTIL_IMPORTED = 1e15  # the table's CREATING lasts until the import's last step ends it
_VALIDATION_FAILURE = ("ItemValidationError", "Some of the items failed validation checks and were not imported. "
                       "Please check CloudWatch error logs for more details.")  # (the validation page's example)
_RUNNING: Runs[str] = Runs()  # the imports this process drives


@dataclass
class _Reader:
    """The object being read, kept from one chunk to the next (reopened after a restart or a failed chunk)."""

    position: int
    taken: int
    entries: Iterator[Entry] = field(repr=False)


def schedule_import(engine: Engine, arn: str) -> None:
    """Drive the import `arn` to its end on this process's loop; no-op if this process drives it already."""
    reading: list[_Reader] = []

    def step() -> bool:
        return records.background_chunk(engine, chunk)

    def chunk() -> bool:
        document = records.record(engine, IMPORTS_TABLE, KIND, arn)
        if document is None or document["Description"]["ImportStatus"] != "IN_PROGRESS" or \
                not engine.try_lease(f"import:{arn}", lease_holder(), _LEASE_SECONDS, time.time()):
            return False
        try:
            more = _begin(engine, document) if "keys" not in document["Progress"] else \
                _advance(engine, document, reading)
        except BaseException:
            reading.clear()  # (read again from the progress stored)
            raise
        return more

    _RUNNING.start(arn, step, f"import {arn}")


def resume_imports(engine: Engine) -> None:
    """A background duty: take up every import still IN_PROGRESS (one a restart cut short, or whose driver died)."""
    for document in records.records(engine, IMPORTS_TABLE, KIND):
        if document["Description"]["ImportStatus"] == "IN_PROGRESS":
            schedule_import(engine, document["Description"]["ImportArn"])


def _begin(engine: Engine, document: dict[str, Any]) -> bool:
    """The first step: the objects listed, the table created; False if the import ended here."""
    description = document["Description"]
    bucket = description["S3BucketSource"]
    keys = object_keys(bucket_directory(bucket["S3Bucket"]), bucket.get("S3KeyPrefix") or "")
    if keys is None:
        # (the Developer Guide's troubleshooting example, without S3's request ids)
        return _finish(engine, document, ("S3NoSuchBucket", "The specified bucket does not exist"))
    meta = TableMeta.from_json(document["Table"])
    meta.pending, meta.pending_until = "CREATING", _UNTIL_IMPORTED
    try:
        engine.create_table(meta)
    except ResourceInUseException:
        existing = engine.get_table(meta.stored_name)
        if existing is None or existing.uuid != meta.uuid:  # (else created before a crash cut this step short)
            # (ack-api-quirks' DynamoDB catalogue, DDB-IMPORT-018: the code; best guess: the message)
            return _finish(engine, document, ("TableAlreadyExists", f"Table already exists: {meta.name}"))
    document["Progress"] = {"keys": keys, "object": 0, "taken": 0}
    records.save(engine, IMPORTS_TABLE, KIND, description["ImportArn"], document)
    return True


def _stored_name(document: dict[str, Any]) -> str:
    """The engine's name of the table being imported into (its namespace's, as the import was asked)."""
    return TableMeta.from_json(document["Table"]).stored_name


def _source(description: dict[str, Any]) -> Source:
    csv_options = (description.get("InputFormatOptions") or {}).get("Csv") or {}
    header = csv_options.get("HeaderList")
    return Source(description["InputFormat"], description["InputCompressionType"],
                  csv_options.get("Delimiter") or ",", tuple(header) if header else None)


def _reader(document: dict[str, Any], meta: TableMeta, position: int, skip: int) -> _Reader:
    """The object at `position`, past its first `skip` records."""
    description = document["Description"]
    directory = bucket_directory(description["S3BucketSource"]["S3Bucket"])
    key = document["Progress"]["keys"][position]
    found = entries(os.path.join(directory, *key.split("/")), _source(description), meta)
    for _ in range(skip):
        next(found, None)
    return _Reader(position, skip, found)


def _advance(engine: Engine, document: dict[str, Any], reading: list[_Reader]) -> bool:
    """One chunk: up to IMPORT_CHUNK records read and their items written with the progress; False once done."""
    description, progress = document["Description"], document["Progress"]
    meta = engine.get_table(_stored_name(document))
    if meta is None or meta.uuid != description["TableId"]:
        return _finish(engine, document, ("TableNotFound", "The table being imported into was deleted"))  # best guess
    keys: list[str] = progress["keys"]
    if not reading or reading[0].position != progress["object"]:
        reading[:] = [_reader(document, meta, progress["object"], progress["taken"])] if \
            progress["object"] < len(keys) else []
    batch: dict[StorageKey, Item] = {}
    for _ in range(IMPORT_CHUNK):
        if not reading:
            break
        entry = next(reading[0].entries, None)
        if entry is None:
            position = reading[0].position + 1
            reading[:] = [_reader(document, meta, position, 0)] if position < len(keys) else []
            progress["object"], progress["taken"] = position, 0
            continue
        reading[0].taken += 1
        progress["taken"] = reading[0].taken
        _count(document, entry, keys[reading[0].position])
        if entry.item is not None and entry.key is not None:
            batch[entry.key] = entry.item
    imports_meta = records.records_table(engine, IMPORTS_TABLE, create=True)
    assert imports_meta is not None
    blind = not meta.indexes and not meta.vector_indexes
    ops = [WriteOp(meta, key, _put(item), blind=blind) for key, item in batch.items()]
    engine.write([*ops, records.record_op(imports_meta, KIND, description["ImportArn"], document)])
    return True if reading else _finish(engine, document, None)


def _put(item: Item) -> Any:
    return lambda old: item


def _count(document: dict[str, Any], entry: Entry, key: str) -> None:
    """The counts of one record read; an error logged as DynamoDB logs it to CloudWatch (the validation page)."""
    description = document["Description"]
    description["ProcessedItemCount"] += 1
    description["ProcessedSizeBytes"] += entry.size
    if entry.item is not None:
        description["ImportedItemCount"] += 1
        return
    description["ErrorCount"] += 1
    log.warning("%s", orjson.dumps({
        "itemS3Pointer": {"bucket": description["S3BucketSource"]["S3Bucket"], "key": key,
                          "itemIndex": document["Progress"]["taken"] - 1},
        "importArn": description["ImportArn"], "errorMessages": [entry.error]}).decode())


def _finish(engine: Engine, document: dict[str, Any], failure: tuple[str, str] | None) -> bool:
    """The last step: the table ACTIVE (if made), the import COMPLETED or FAILED; False (nothing more to do)."""
    description = document["Description"]
    meta = engine.get_table(_stored_name(document))
    if meta is not None and meta.uuid == description["TableId"] and meta.pending_until == _UNTIL_IMPORTED:
        finished = copy.deepcopy(meta)
        now = clock.now()
        finished.pending, finished.pending_until = ("CREATING", transient.until(now)) if transient.delayed() \
            else (None, 0.0)
        try:
            engine.update_table(finished)
        except CatalogChanged:
            return True  # (changed meanwhile: the next step looks again)
    if failure is None and description["ErrorCount"]:
        failure = _VALIDATION_FAILURE
    description["ImportStatus"] = "COMPLETED" if failure is None else "FAILED"
    if failure is not None:
        description["FailureCode"], description["FailureMessage"] = failure
    description["EndTime"] = epoch_millis(clock.now())
    records.save(engine, IMPORTS_TABLE, KIND, description["ImportArn"], document)
    return False
