"""An export's files in S3's export layout (Developer Guide, "DynamoDB table export output format"): its place under
the bucket, its data files written a chunk at a time, its manifests.

A data file grows by one gzip member a chunk (a gzip file may hold many: every reader of gzip reads them as one
stream), up to FILE_ITEMS lines; how far each one got is kept with the export's progress (`Written`), so a run
taken up again after a crash first cuts the file back to what its last recorded chunk wrote, and no line is in a
file twice or missing. A file is named (26 characters, as DynamoDB's) when it is begun; its MD5 is taken when it is
full or the export ends."""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from openddb.api.backups_buckets import bucket_directory

FILE_ITEMS = 100_000  # lines per data file


@dataclass(slots=True)
class Written:
    """What an export has written so far: its full data files (manifest entries), the one being written (its
    name, its length in bytes and lines), the lines and the bytes of items in all."""

    files: list[dict[str, Any]] = field(default_factory=list)
    current: str | None = None
    length: int = 0
    lines: int = 0
    count: int = 0
    size: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Written:
        return cls(**raw)


def place(description: dict[str, Any]) -> tuple[str, str]:
    """An export's key prefix (`S3Prefix/AWSDynamoDB/<ExportId>`) and its directory."""
    export_id = description["ExportArn"].rsplit("/", 1)[1]
    prefix = "/".join(part for part in (description.get("S3Prefix", "").strip("/"), "AWSDynamoDB", export_id) if part)
    return prefix, os.path.join(bucket_directory(description["S3Bucket"]), *prefix.split("/"))


def begin(directory: str) -> None:
    """The export's directory, its `data/` and its empty `_started`."""
    os.makedirs(os.path.join(directory, "data"), exist_ok=True)
    open(os.path.join(directory, "_started"), "wb").close()


def append(directory: str, prefix: str, written: Written, lines: list[bytes], extension: str) -> None:
    """`lines` added to the data file being written (begun if none is), the file cut back first to the length
    `written` records; the file closed into a manifest entry once it holds FILE_ITEMS lines."""
    if not lines:
        return
    if written.current is None:
        written.current, written.length, written.lines = f"{uuid.uuid4().hex[:26]}.{extension}", 0, 0
    member = gzip.compress(b"".join(lines))
    path = os.path.join(directory, "data", written.current)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(descriptor, written.length)
        os.lseek(descriptor, written.length, os.SEEK_SET)
        os.write(descriptor, member)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    written.length += len(member)
    written.lines += len(lines)
    if written.lines >= FILE_ITEMS:
        close(directory, prefix, written)


def close(directory: str, prefix: str, written: Written) -> None:
    """The data file being written, cut to its recorded length, as a manifest entry."""
    assert written.current is not None
    path = os.path.join(directory, "data", written.current)
    with open(path, "r+b") as data:
        data.truncate(written.length)
        content = data.read()
    digest = hashlib.md5(content, usedforsecurity=False).digest()
    written.files.append({"itemCount": written.lines, "md5Checksum": base64.b64encode(digest).decode(),
                          "etag": digest.hex(), "dataFileS3Key": f"{prefix}/data/{written.current}"})
    written.current, written.length, written.lines = None, 0, 0


def finish(directory: str, prefix: str, written: Written, extension: str, summary: dict[str, Any]) -> None:
    """The last data file closed (an empty one if the export has none: "for partitions that are empty, your
    export request will create an empty file"), then the manifests, last: a directory with them is a whole
    export."""
    if written.current is None and not written.files:
        written.current = f"{uuid.uuid4().hex[:26]}.{extension}"
        empty = gzip.compress(b"")
        with open(os.path.join(directory, "data", written.current), "wb") as out:
            out.write(empty)
            os.fsync(out.fileno())
        written.length = len(empty)
    if written.current is not None:
        close(directory, prefix, written)
    manifest = b"".join(orjson.dumps(entry) + b"\n" for entry in written.files)
    _with_checksum(os.path.join(directory, "manifest-files.json"), manifest)
    _with_checksum(os.path.join(directory, "manifest-summary.json"), orjson.dumps(summary))


MANIFESTS = ("manifest-summary.json", "manifest-summary.checksum", "manifest-files.json", "manifest-files.checksum")


def _with_checksum(path: str, data: bytes) -> None:
    """A manifest and its `.checksum` (best guess at its content: the MD5 of the manifest, base64, as S3's
    Content-MD5 is written; the Developer Guide names the file but does not show it)."""
    for target, content in ((path, data), (path.rsplit(".", 1)[0] + ".checksum",
                                           base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()))):
        with open(target, "wb") as out:
            out.write(content)
            os.fsync(out.fileno())


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + \
        f"{int(seconds * 1000) % 1000:03d}Z"
