"""What an import reads: the objects under a bucket's key prefix, each decompressed and parsed into items (Developer
Guide, "Amazon S3 import formats for DynamoDB" and "Import format quotas and validation").

A bucket is a local directory, as for exports (`bucket_directory`); an object's key is its path under it, with
`/` between the parts. S3KeyPrefix is a raw key prefix, as on S3: "data" also matches "data2/x.json" and
"data.bak" (ack-api-quirks' DynamoDB catalogue, DDB-IMPORT-014), so an export is imported from its `.../data/`
folder with GZIP (DDB-IMPORT-020: from the export's root its manifests are read too, each an error).

An object yields `Entry`s: an item, or the error that kept a line from being one. A line that is no JSON (or no
CSV), and an object that does not decompress, end the object: "if the Amazon S3 object itself is malformed ...
we may skip processing the remaining portion of the object" (an unparseable 6th line of 10: 6 processed, 1
error, DDB-IMPORT-013); an item that breaks a rule is one error and the next line is read. Amazon Ion (the reader
of backups_ion.py) is read a line at a time, each line its records (`$ion_1_0 {Item:{...}}`, as exports write
it); a value that goes on past its line (the formats page's example spreads a list of items over many) has the
rest of the object read with it. ZSTD is read with the `zstandard` library (the `zstd` extra: Python 3.11's
standard library has no ZSTD); without it ImportTable refuses ZSTD (see backups_import.py)."""

from __future__ import annotations

import csv
import gzip
import importlib.util
import io
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from openddb.api import backups_ion as ion
from openddb.api.keys import check_index_keys, item_key
from openddb.api.limits import exceeds_item_size
from openddb.errors import DynamoDBError, ValidationException
from openddb.model import Item
from openddb.model.schema import TableMeta
from openddb.model.values import MSG_ITEM_SIZE, validate_item
from openddb.storage.base import StorageKey

InputFormat = Literal["DYNAMODB_JSON", "ION", "CSV"]
Compression = Literal["GZIP", "ZSTD", "NONE"]
MAX_OBJECTS = 50_000  # "Each import job can take up to 50,000 Amazon S3 objects" (the quotas page)


@dataclass(frozen=True, slots=True)
class Source:
    """How the objects are read: the format, its CSV options, the compression."""

    input_format: InputFormat
    compression: Compression
    delimiter: str = ","
    header: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    """One record read from an object: its item (its size counted), or why it is none."""

    size: int  # bytes of the object it took (uncompressed): ProcessedSizeBytes
    item: Item | None = None
    key: StorageKey | None = None  # the item's
    error: str | None = None


def object_keys(directory: str, prefix: str) -> list[str] | None:
    """The keys of the objects (files) under `directory` whose key starts with `prefix`, sorted; None if the bucket
    (directory) does not exist."""
    if not os.path.isdir(directory):
        return None
    keys: list[str] = []
    for root, _, files in os.walk(directory):
        relative = os.path.relpath(root, directory)
        for name in files:
            key = name if relative == "." else f"{relative.replace(os.sep, '/')}/{name}"
            if key.startswith(prefix):
                keys.append(key)
    return sorted(keys)


def zstd_readable() -> bool:
    """Whether ZSTD objects can be read here (the `zstd` extra, `zstandard`, is installed)."""
    return importlib.util.find_spec("zstandard") is not None


def _decompressed(raw: io.BufferedReader, compression: Compression) -> Iterable[bytes]:
    """The lines of an object as stored with `compression`."""
    if compression == "GZIP":
        return gzip.GzipFile(fileobj=raw)
    if compression == "ZSTD":
        return _zstd_lines(raw)
    return raw


def _zstd_lines(raw: io.BufferedReader) -> Iterator[bytes]:
    """The lines of a ZSTD object (every frame of it: `zstd` writes concatenated inputs as frames one after the
    other); data that is not ZSTD raises OSError, as GZIP's does."""
    import zstandard  # (the `zstd` extra: ImportTable refuses ZSTD where it is missing, see zstd_readable)
    try:
        yield from io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True))
    except zstandard.ZstdError as error:
        raise OSError(f"not ZSTD: {error}") from error


def entries(path: str, source: Source, meta: TableMeta) -> Iterator[Entry]:
    """The entries of one object, in order (see the module docstring)."""
    with open(path, "rb") as raw:
        lines = _decompressed(raw, source.compression)
        try:
            if source.input_format == "CSV":
                yield from _csv_entries(lines, source, meta)
            elif source.input_format == "ION":
                yield from _ion_entries(lines, meta)
            else:
                yield from _json_entries(lines, meta)
        except (OSError, EOFError, zlib.error):  # not GZIP or ZSTD (gzip.BadGzipFile is an OSError, ZSTD's is made
            # one by _zstd_lines), or cut short
            # best guess: the wording of a decompression failure is not recorded
            yield Entry(0, error=f"The object could not be decompressed as {source.compression}")


def _json_entries(lines: Iterable[bytes], meta: TableMeta) -> Iterator[Entry]:
    """DynamoDB JSON: one `{"Item": {...}}` a line (blank lines skipped)."""
    for line in lines:
        if not line.strip():
            continue
        try:
            document = orjson.loads(line)
        except orjson.JSONDecodeError:
            # best guess: the wording of an unparseable line is not recorded
            yield Entry(len(line), error="Unexpected token in the object: the line is not DynamoDB JSON")
            return
        if not isinstance(document, dict) or set(document) != {"Item"}:
            # best guess (as above): a JSON value other than {"Item": {...}}
            yield Entry(len(line), error="The line is not a DynamoDB JSON item: {\"Item\": {...}} expected")
            continue
        yield _checked(document["Item"], len(line), meta)


def _ion_entries(lines: Iterable[bytes], meta: TableMeta) -> Iterator[Entry]:
    """Amazon Ion: the records of each line; a value left open at a line's end, the rest of the object with it.
    Text that is not Ion is one error and ends the object, as a line that is not JSON does."""
    remaining = iter(lines)
    for line in remaining:
        try:
            found = list(ion.records(line.decode("utf-8")))
        except UnicodeDecodeError as error:
            yield Entry(len(line), error=f"The Ion text is not UTF-8: {error}")  # best guess: wording not recorded
            return
        except ion.IonSyntaxError as error:
            if error.incomplete:
                yield from _ion_document(line + b"".join(remaining), meta)
            else:
                yield Entry(len(line), error=f"The line is not Amazon Ion: {error}")  # best guess (as above)
            return
        size = len(line)
        for record in found:
            yield _ion_entry(record, size, meta)
            size = 0  # (the line's bytes counted with its first record)


def _ion_document(data: bytes, meta: TableMeta) -> Iterator[Entry]:
    """The records of Ion text spread over lines, each counted the bytes from the previous one's end to its own."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        yield Entry(len(data), error=f"The Ion text is not UTF-8: {error}")  # best guess: wording not recorded
        return
    start = 0
    try:
        for record in ion.records(text):
            yield _ion_entry(record, record.end - start, meta)
            start = record.end
    except ion.IonSyntaxError as error:
        yield Entry(len(text) - start, error=f"The text is not Amazon Ion: {error}")  # best guess (as above)


def _ion_entry(record: ion.Record, size: int, meta: TableMeta) -> Entry:
    if record.item is None:
        return Entry(size, error=record.error)
    return _checked(record.item, size, meta)


def _csv_entries(lines: Iterable[bytes], source: Source, meta: TableMeta) -> Iterator[Entry]:
    """CSV: the first row is the header unless HeaderList is given; the key attributes of the table and its
    indexes (every attribute AttributeDefinitions names) take their defined type, every other column is a string
    (the formats page); an empty cell is no attribute (best guess: not documented)."""
    sizes = [0]

    def text() -> Iterator[str]:
        for line in lines:
            sizes[0] += len(line)
            yield line.decode("utf-8")

    reader = csv.reader(text(), delimiter=source.delimiter, strict=True)
    types = {d["AttributeName"]: d["AttributeType"] for d in meta.attribute_definitions}
    header = source.header
    taken = 0
    try:
        for row in reader:
            size, taken = sizes[0] - taken, sizes[0]
            if header is None:
                header = tuple(row)
                continue
            if len(row) != len(header):
                # best guess: the formats page says headers apply "as long as they match the number of columns"
                yield Entry(size, error=f"The row has {len(row)} columns; the header has {len(header)}")
                continue
            raw = {name: _csv_value(types.get(name), cell) for name, cell in zip(header, row, strict=True) if cell}
            yield _checked(raw, size, meta)
    except (csv.Error, UnicodeDecodeError) as error:
        yield Entry(sizes[0] - taken, error=f"The object is not CSV: {error}")  # best guess (as above)


def _csv_value(kind: str | None, cell: str) -> dict[str, Any]:
    if kind == "B":
        return {"B": cell}  # (base64, checked as any B value)
    return {kind or "S": cell}


def _checked(raw: Any, size: int, meta: TableMeta) -> Entry:
    """An item checked as PutItem checks one: its values, its table and index keys, its size."""
    try:
        item = validate_item(raw)
        key = item_key(meta, item)[1]
        check_index_keys(meta, item)
        if exceeds_item_size(meta, item):
            raise ValidationException(MSG_ITEM_SIZE)
    except DynamoDBError as error:
        return Entry(size, error=error.message or type(error).__name__)
    except (ValueError, TypeError) as error:  # (a value no check named)
        return Entry(size, error=str(error))
    return Entry(size, item=item, key=key)

