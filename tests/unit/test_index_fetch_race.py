"""A local-index read that fetches items from the table must not answer an item another worker moved or deleted
between reading the index entries and fetching the items.

Two engines on one store stand for two workers. The first reads a Query's index entries; before it fetches their
items (a KEYS_ONLY index, all attributes asked for), the second moves one item out of the queried range and
deletes another. The answer may include neither: one no longer matches the key condition, the other is gone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from openddb.api.dispatch import Dispatcher
from openddb.api.incoming import Frame
from openddb.storage.base import IndexRow
from openddb.storage.sqlite import SQLiteEngine
from tests.api.test_protocol import AUTH


def _call(dispatcher: Dispatcher, operation: str, body: dict[str, Any]) -> dict[str, Any]:
    status, payload = dispatcher.handle(Frame(b"DynamoDB_20120810." + operation.encode(), AUTH.encode(),
                                        json.dumps(body).encode(), False, b"r"))
    assert status == 200, payload
    dispatcher.engine.commit()
    dispatcher.engine.end_reads()
    answer: dict[str, Any] = json.loads(payload)
    return answer


class _WorkerWritesMidRead(SQLiteEngine):
    """A worker whose index reads are followed at once by another worker's writes (`between`)."""

    between: Any = None

    def index_query(self, *args: Any, **kwargs: Any) -> Iterator[IndexRow]:
        rows = list(super().index_query(*args, **kwargs))
        if self.between is not None:
            self.between()
        return iter(rows)


def test_local_index_read_skips_items_moved_or_deleted_before_their_fetch(tmp_path) -> None:
    reader = _WorkerWritesMidRead(str(tmp_path), group_commit=True, shared_reads=True)
    writer = SQLiteEngine(str(tmp_path))
    reading, writing = Dispatcher(reader), Dispatcher(writer)
    _call(reading, "CreateTable", {
        "TableName": "tbl", "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": n, "AttributeType": t}
                                 for n, t in (("pk", "S"), ("sk", "S"), ("lsk", "N"))],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        "LocalSecondaryIndexes": [{"IndexName": "by_lsk", "Projection": {"ProjectionType": "KEYS_ONLY"},
                                   "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                                                 {"AttributeName": "lsk", "KeyType": "RANGE"}]}]})
    for n in range(1, 6):
        _call(reading, "PutItem", {"TableName": "tbl", "Item": {
            "pk": {"S": "p"}, "sk": {"S": f"s{n}"}, "lsk": {"N": str(n)}, "payload": {"S": f"v{n}"}}})

    def move_one_and_delete_one() -> None:
        _call(writing, "UpdateItem", {"TableName": "tbl", "Key": {"pk": {"S": "p"}, "sk": {"S": "s1"}},
                                      "UpdateExpression": "SET lsk = :far", "ExpressionAttributeValues": {
                                          ":far": {"N": "500"}}})
        _call(writing, "DeleteItem", {"TableName": "tbl", "Key": {"pk": {"S": "p"}, "sk": {"S": "s2"}}})

    reader.between = move_one_and_delete_one
    answer = _call(reading, "Query", {
        "TableName": "tbl", "IndexName": "by_lsk", "KeyConditionExpression": "pk = :p AND lsk < :high",
        "ExpressionAttributeValues": {":p": {"S": "p"}, ":high": {"N": "100"}},
        "Select": "ALL_ATTRIBUTES", "ConsistentRead": True})
    reader.between = None

    assert [item["sk"]["S"] for item in answer["Items"]] == ["s3", "s4", "s5"]
    assert all(int(item["lsk"]["N"]) < 100 and "payload" in item for item in answer["Items"])
    assert answer["Count"] == 3
    # Afterwards the index and the table agree again: the moved item is found where it went.
    again = _call(reading, "Query", {
        "TableName": "tbl", "IndexName": "by_lsk", "KeyConditionExpression": "pk = :p AND lsk > :low",
        "ExpressionAttributeValues": {":p": {"S": "p"}, ":low": {"N": "100"}}, "Select": "ALL_ATTRIBUTES"})
    assert [item["sk"]["S"] for item in again["Items"]] == ["s1"]
    reader.close()
    writer.close()
