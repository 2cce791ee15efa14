"""Which existing items a GSI added by UpdateTable holds, and the AttributeDefinitions rules of adding one.

The Developer Guide ("Detecting and correcting index key violations"): during the backfill, an item whose value
for an index key attribute cannot be a key (another type than the index defines, a partition key over 2,048
bytes, a sort key over 1,024 bytes, an empty string or binary) stays in the table but gets no index entry, and
the backfill goes on; once the index exists, writes of such values are refused.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.api.test_index_creation import scan_index, wait_active
from tests.api.test_indexes import INVALID, defs, error_of, gsi, schema
from tests.conftest import unique_name


def populated(ddb, items: dict[str, dict[str, Any]]) -> str:  # type: ignore[no-untyped-def]
    """A table keyed `pk` (S) holding `items` (pk -> other attributes), written before any index exists."""
    name = unique_name("backfill")
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=defs(pk="S"),
                     KeySchema=schema("pk", ranges=0))
    for pk, attributes in items.items():
        ddb.put_item(TableName=name, Item={"pk": {"S": pk}, **attributes})
    return name


def add_index(ddb, name: str, index: dict[str, Any], **types: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    ddb.update_table(TableName=name, AttributeDefinitions=defs(**types), GlobalSecondaryIndexUpdates=[
        {"Create": index}])
    return wait_active(ddb, name, index["IndexName"])  # type: ignore[no-any-return]


def indexed(ddb, name: str, index: str) -> set[str]:  # type: ignore[no-untyped-def]
    return {item["pk"]["S"] for item in scan_index(ddb, name, index)}


def b64(size: int) -> bytes:
    """A binary value of `size` bytes (boto3 encodes it in base64 on the wire)."""
    return b"\x01" * size


def test_backfill_leaves_out_values_that_cannot_be_a_partition_key(ddb):
    """Empty, wrongly typed and over-long (in bytes, not characters) values are left out; the rest are in."""
    name = populated(ddb, {
        "good": {"g": {"S": "a"}},
        "longest": {"g": {"S": "x" * 2048}},
        "empty": {"g": {"S": ""}},
        "number": {"g": {"N": "1"}},
        "binary": {"g": {"B": b"x"}},
        "too-long": {"g": {"S": "x" * 2049}},
        "too-many-bytes": {"g": {"S": "\u00e9" * 1025}},  # 1,025 characters, 2,050 bytes
        "absent": {"other": {"S": "a"}},
    })
    active = add_index(ddb, name, gsi("byG", "g", ranges=0), g="S")
    assert indexed(ddb, name, "byG") == {"good", "longest"}
    assert active["ItemCount"] == 2
    answer = ddb.query(TableName=name, IndexName="byG", KeyConditionExpression="g = :g",
                       ExpressionAttributeValues={":g": {"S": "a"}})
    assert [item["pk"]["S"] for item in answer["Items"]] == ["good"]
    # Every item stays in the table.
    assert ddb.scan(TableName=name, Select="COUNT")["Count"] == 8


def test_backfill_leaves_out_values_that_cannot_be_a_sort_key(ddb):
    """A sort key is held to 1,024 bytes; an empty binary is left out like an empty string."""
    name = populated(ddb, {
        "good": {"h": {"S": "h"}, "r": {"B": b64(1024)}},
        "long-hash": {"h": {"S": "h" * 2000}, "r": {"B": b"r"}},  # a partition key may be longer
        "empty": {"h": {"S": "h"}, "r": {"B": b""}},
        "too-long": {"h": {"S": "h"}, "r": {"B": b64(1025)}},
        "string": {"h": {"S": "h"}, "r": {"S": "r"}},
        "no-sort": {"h": {"S": "h"}},
    })
    add_index(ddb, name, gsi("byHR", "h", "r"), h="S", r="B")
    assert indexed(ddb, name, "byHR") == {"good", "long-hash"}


def test_backfill_of_a_multi_attribute_key(ddb):
    """Each attribute of a multi-attribute key is checked on its own: one that cannot be a key (or is absent)
    leaves the item out."""
    ok = {"a": {"S": "a"}, "b": {"N": "1"}, "c": {"S": "c"}, "d": {"S": "d"}}
    name = populated(ddb, {
        "good": ok,
        "long-partition-part": {**ok, "a": {"S": "a" * 2048}},
        "empty-partition-part": {**ok, "a": {"S": ""}},
        "wrong-type": {**ok, "b": {"S": "1"}},
        "long-sort-part": {**ok, "d": {"S": "d" * 1025}},
        "empty-sort-part": {**ok, "c": {"S": ""}},
        "missing-part": {k: v for k, v in ok.items() if k != "d"},
    })
    add_index(ddb, name, gsi("multi", "a", "b", "c", "d", ranges=2), a="S", b="N", c="S", d="S")
    assert indexed(ddb, name, "multi") == {"good", "long-partition-part"}
    answer = ddb.query(TableName=name, IndexName="multi", KeyConditionExpression="a = :a AND b = :b AND c = :c",
                       ExpressionAttributeValues={":a": {"S": "a"}, ":b": {"N": "1"}, ":c": {"S": "c"}})
    assert [item["pk"]["S"] for item in answer["Items"]] == ["good"]


def test_writes_after_creation_are_refused_for_the_values_backfill_left_out(ddb):
    """What the backfill skips silently, a write after creation is refused for (the same rule, both ways)."""
    name = populated(ddb, {"good": {"g": {"S": "a"}}})
    add_index(ddb, name, gsi("byG", "g", ranges=0), g="S")
    refused = {
        "": ("One or more parameter values are not valid. A value specified for a secondary index key is not "
             "supported. The AttributeValue for a key attribute cannot contain an empty string value. IndexName: "
             "byG, IndexKey: g"),
        "x" * 2049: (INVALID + "Size limit exceeded for Index Key g Actual Size: 2049 bytes Max Size: 2048 bytes "
                     "IndexName: byG"),
    }
    for value, message in refused.items():
        with pytest.raises(ClientError) as excinfo:
            ddb.put_item(TableName=name, Item={"pk": {"S": "late"}, "g": {"S": value}})
        assert error_of(excinfo) == ("ValidationException", message)
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=name, Item={"pk": {"S": "late"}, "g": {"N": "1"}})
    assert error_of(excinfo) == ("ValidationException", INVALID + "Type mismatch for Index Key g Expected: S "
                                 "Actual: N IndexName: byG")
    assert indexed(ddb, name, "byG") == {"good"}


def test_a_new_index_may_not_retype_an_attribute_a_key_uses(ddb):
    """An attribute the table's key or an existing index keys on keeps its type: a new index keyed on it with
    another type in AttributeDefinitions is refused, and the table is left as it was."""
    name = populated(ddb, {"one": {"g": {"S": "a"}}})
    add_index(ddb, name, gsi("byG", "g", ranges=0), g="S")
    for attribute in ("g", "pk"):  # an existing index's key, the table's key
        with pytest.raises(ClientError) as excinfo:
            ddb.update_table(TableName=name, AttributeDefinitions=defs(**{attribute: "N"}),
                             GlobalSecondaryIndexUpdates=[{"Create": gsi("byN", attribute, ranges=0)}])
        code, message = error_of(excinfo)
        assert code == "ValidationException" and message.startswith(INVALID) and attribute in message
    table = ddb.describe_table(TableName=name)["Table"]
    assert [i["IndexName"] for i in table["GlobalSecondaryIndexes"]] == ["byG"]
    assert sorted((d["AttributeName"], d["AttributeType"]) for d in table["AttributeDefinitions"]) == [
        ("g", "S"), ("pk", "S")]
    # The same type is fine: a second index on the same attribute.
    add_index(ddb, name, gsi("byG2", "g", ranges=0), g="S")
    assert indexed(ddb, name, "byG2") == {"one"}


def test_an_item_the_backfill_left_out_can_be_read_and_deleted_but_not_updated(ddb):
    """An item left out for a wrongly typed index key stays readable; any write keeping that value is refused
    ("How to accidentally create read-only DynamoDB items", tecracer 2024); deleting it is fine."""
    name = populated(ddb, {"number": {"g": {"N": "1"}, "n": {"N": "0"}}})
    add_index(ddb, name, gsi("byG", "g", ranges=0), g="S")
    key = {"pk": {"S": "number"}}
    assert ddb.get_item(TableName=name, Key=key)["Item"]["g"] == {"N": "1"}
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=name, Key=key, UpdateExpression="SET n = :n",
                        ExpressionAttributeValues={":n": {"N": "1"}})
    code, message = error_of(excinfo)
    assert code == "ValidationException" and "Type mismatch for Index Key g Expected: S Actual: N" in message
    ddb.delete_item(TableName=name, Key=key)
    assert ddb.scan(TableName=name, Select="COUNT")["Count"] == 0
    assert indexed(ddb, name, "byG") == set()
