"""The records of exports and imports: JSON documents in an internal table of the store (`openddb/exports`,
`openddb/imports`), one partition of them, sorted by ARN. Internal tables are hidden from ListTables and from
every table operation by their `openddb/` prefix (a name no client can give)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from openddb.errors import ResourceInUseException
from openddb.model.keys import encode_key, partition_hash
from openddb.model.schema import KeyAttribute, TableMeta
from openddb.storage.base import Engine, SortRange, StorageKey, WriteOp


def records_table(engine: Engine, name: str, create: bool) -> TableMeta | None:
    """The internal table `name` (made first if `create`), or None."""
    meta = engine.get_table(name)
    if meta is None and create:
        fresh = TableMeta(name=name, table_id=0, uuid=str(uuid.uuid4()), hash_key=KeyAttribute("pk", "S"),
                          range_key=KeyAttribute("sk", "S"),
                          attribute_definitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                 {"AttributeName": "sk", "AttributeType": "S"}],
                          created_at=time.time(), billing_mode="PAY_PER_REQUEST")
        try:
            meta = engine.create_table(fresh)
        except ResourceInUseException:  # another worker made it meanwhile
            meta = engine.get_table(name)
    return meta


def _partition(kind: str) -> bytes:
    return encode_key({"S": kind})


def record_op(meta: TableMeta, kind: str, arn: str, document: dict[str, Any]) -> WriteOp:
    """The write that stores `document` as the record of `arn` (to commit with other writes, or alone)."""
    partition = _partition(kind)
    record = {"pk": {"S": kind}, "sk": {"S": arn}, "doc": {"S": orjson.dumps(document).decode()}}
    key = StorageKey(partition_hash(partition), partition, encode_key({"S": arn}))
    return WriteOp(meta, key, lambda old: record)


def save(engine: Engine, table: str, kind: str, arn: str, document: dict[str, Any]) -> None:
    meta = records_table(engine, table, create=True)
    assert meta is not None
    engine.write([record_op(meta, kind, arn, document)])


def records(engine: Engine, table: str, kind: str) -> list[dict[str, Any]]:
    """Every record of `kind`, by ARN."""
    meta = records_table(engine, table, create=False)
    if meta is None:
        return []
    partition = _partition(kind)
    rows = engine.query(meta, partition_hash(partition), partition, SortRange(), True, None)
    return [orjson.loads(orjson.loads(row.data)["doc"]["S"]) for row in rows]


def record(engine: Engine, table: str, kind: str, arn: str) -> dict[str, Any] | None:
    """The record of `arn`, or None."""
    meta = records_table(engine, table, create=False)
    if meta is None:
        return None
    partition = _partition(kind)
    row = engine.get(meta, StorageKey(partition_hash(partition), partition, encode_key({"S": arn})))
    return None if row is None else orjson.loads(orjson.loads(row.data)["doc"]["S"])


def background_chunk(engine: Engine, chunk: Callable[[], bool]) -> bool:
    """Run one chunk of a background run (an import's, an export's) as the TTL sweep runs its writes: from a fresh
    read snapshot (one a pass left open would show an older record), under the writer lock, committed at once (an
    optimistic group that conflicted would be lost: no request runs a duty's writes again)."""
    engine.end_reads()
    try:
        with engine.session.serialized():
            try:
                return chunk()
            finally:
                engine.commit()  # (under the lock, waiting for it: it cannot conflict)
    finally:
        engine.end_reads()
