"""Keys at DynamoDB's limits (a 2,048-byte partition key, a 1,024-byte sort key), through every path that stores,
finds or pages by a key, with local and global indexes over them: each engine must hold what DynamoDB holds.

The keys are random letters and digits, which a store cannot compress much (PostgreSQL limits a B-tree row to
2,704 bytes: its engine keeps long keys as a prefix and a digest, and whole beside)."""

from __future__ import annotations

import random
import string

from tests.api.test_index_creation import wait_active
from tests.conftest import unique_name

_RANDOM = random.Random(20261126)


def _text(length: int) -> str:
    return "".join(_RANDOM.choices(string.ascii_letters + string.digits, k=length))


def _keys(items: list[dict]) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    return [(item["pk"]["S"], item["sk"]["S"]) for item in items]


def test_items_and_indexes_with_keys_at_the_limits(ddb) -> None:  # type: ignore[no-untyped-def]
    name = unique_name("long")
    pk, g = _text(2048), _text(2048)
    sks = sorted(_text(1024) for _ in range(3))
    ddb.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk", "l", "g")],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        LocalSecondaryIndexes=[{"IndexName": "byL", "Projection": {"ProjectionType": "KEYS_ONLY"},
                                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                                              {"AttributeName": "l", "KeyType": "RANGE"}]}],
        GlobalSecondaryIndexes=[{"IndexName": "byG", "Projection": {"ProjectionType": "ALL"},
                                 "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"},
                                               {"AttributeName": "sk", "KeyType": "RANGE"}]}])
    for n, sk in enumerate(sks):
        ddb.put_item(TableName=name, Item={"pk": {"S": pk}, "sk": {"S": sk}, "l": {"S": f"l{n}" + _text(1000)},
                                           "g": {"S": g}, "g2": {"S": _text(2048)}, "n": {"N": str(n)}})
    rows = list(zip([pk] * 3, sks, strict=True))

    assert ddb.get_item(TableName=name, Key={"pk": {"S": pk}, "sk": {"S": sks[1]}})["Item"]["n"] == {"N": "1"}
    query = {"TableName": name, "KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": pk}}}
    assert _keys(ddb.query(**query)["Items"]) == rows

    def paged(**request: object) -> list[tuple[str, str]]:
        found, start = [], None
        while True:
            page = ddb.query(**request, Limit=1, **({"ExclusiveStartKey": start} if start else {})) \
                if "KeyConditionExpression" in request else \
                ddb.scan(**request, Limit=1, **({"ExclusiveStartKey": start} if start else {}))
            found += _keys(page["Items"])
            start = page.get("LastEvaluatedKey")
            if start is None:
                return found

    assert paged(**query) == rows
    assert sorted(paged(TableName=name)) == rows
    local = {"TableName": name, "IndexName": "byL", "KeyConditionExpression": "pk = :p",
             "ExpressionAttributeValues": {":p": {"S": pk}}}
    fetched = ddb.query(**local, Select="ALL_ATTRIBUTES")["Items"]  # from the table: the entries' whole keys
    assert _keys(fetched) == rows and [item["n"]["N"] for item in fetched] == ["0", "1", "2"]
    assert paged(**local) == rows
    glob = {"TableName": name, "IndexName": "byG", "KeyConditionExpression": "g = :g",
            "ExpressionAttributeValues": {":g": {"S": g}}}
    assert paged(**glob) == rows
    assert sorted(paged(TableName=name, IndexName="byG")) == rows

    # Writes of several keys lock each one, present or absent, even one this long that holds nothing.
    absent = {"pk": {"S": _text(2048)}, "sk": {"S": _text(1024)}}
    ddb.batch_write_item(RequestItems={name: [{"DeleteRequest": {"Key": absent}},
                                              {"DeleteRequest": {"Key": {"pk": {"S": pk}, "sk": {"S": sks[0]}}}}]})
    ddb.transact_write_items(TransactItems=[
        {"ConditionCheck": {"TableName": name, "Key": absent, "ConditionExpression": "attribute_not_exists(pk)"}},
        {"Update": {"TableName": name, "Key": {"pk": {"S": pk}, "sk": {"S": sks[1]}},
                    "UpdateExpression": "SET g = :other", "ExpressionAttributeValues": {":other": {"S": "other"}}}}])
    assert _keys(ddb.query(**query)["Items"]) == rows[1:]
    assert paged(**glob) == rows[2:]  # the moved entry left its old place
    assert _keys(ddb.query(**local)["Items"]) == rows[1:]

    # An index added later is filled from items with such keys.
    ddb.update_table(TableName=name, AttributeDefinitions=[{"AttributeName": "g2", "AttributeType": "S"}],
                     GlobalSecondaryIndexUpdates=[{"Create": {
                         "IndexName": "byG2", "Projection": {"ProjectionType": "KEYS_ONLY"},
                         "KeySchema": [{"AttributeName": "g2", "KeyType": "HASH"}]}}])
    wait_active(ddb, name, "byG2")
    assert sorted(paged(TableName=name, IndexName="byG2")) == rows[1:]
    ddb.delete_item(TableName=name, Key={"pk": {"S": pk}, "sk": {"S": sks[2]}})
    assert _keys(ddb.scan(TableName=name)["Items"]) == rows[1:2]
    ddb.delete_table(TableName=name)


def test_a_binary_sort_key_of_zero_bytes_beside_the_longest_partition_key(ddb) -> None:  # type: ignore[no-untyped-def]
    """A binary sort key of zero bytes, which its order-preserving encoding escapes one by one, beside the
    longest partition key: stored, found and kept in order, on the table and in a local index keyed alike."""
    name = unique_name("long")
    ddb.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                              {"AttributeName": "sk", "AttributeType": "B"},
                              {"AttributeName": "l", "AttributeType": "B"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        LocalSecondaryIndexes=[{"IndexName": "byL", "Projection": {"ProjectionType": "ALL"},
                                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                                              {"AttributeName": "l", "KeyType": "RANGE"}]}])
    pk = _text(2048)
    for last in (b"\x00", b"\x01"):
        key = {"pk": {"S": pk}, "sk": {"B": b"\x00" * 1023 + last}}
        ddb.put_item(TableName=name, Item={**key, "l": {"B": b"\x00" * 1023 + last}})
        assert ddb.get_item(TableName=name, Key=key)["Item"]["l"] == {"B": b"\x00" * 1023 + last}
    query = {"TableName": name, "KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": pk}}}
    assert [item["sk"]["B"][-1:] for item in ddb.query(**query)["Items"]] == [b"\x00", b"\x01"]
    assert [item["l"]["B"][-1:] for item in ddb.query(**query, IndexName="byL", ScanIndexForward=False)["Items"]] \
        == [b"\x01", b"\x00"]
    ddb.delete_table(TableName=name)


def test_keys_shaped_like_a_long_keys_digest_stay_apart(ddb) -> None:  # type: ignore[no-untyped-def]
    """A store that keeps long keys as a prefix and a digest (PostgreSQL: past 512 bytes for an item's partition
    key, 128 for an index entry's keys) must not mistake a key that is such a prefix and digest, one byte shorter
    or of the same length, for the long key it was built from."""
    import hashlib

    name = unique_name("long")
    ddb.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "B"},
                              {"AttributeName": "g", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[{"IndexName": "byG", "Projection": {"ProjectionType": "ALL"},
                                 "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}]}])
    for limit, length in ((512, 700), (128, 300)):
        long_key = bytes(_RANDOM.randrange(256) for _ in range(length))
        digest = hashlib.sha256(long_key).digest()
        lookalikes = [long_key[:limit - 32] + digest, long_key[:limit - 31] + digest]
        ddb.put_item(TableName=name, Item={"pk": {"B": long_key}, "g": {"S": f"g{limit}"}})
        for key in lookalikes:
            assert "Item" not in ddb.get_item(TableName=name, Key={"pk": {"B": key}})
            ddb.put_item(TableName=name, Item={"pk": {"B": key}, "g": {"S": f"g{limit}"}},
                         ConditionExpression="attribute_not_exists(pk)")
        same = {"TableName": name, "IndexName": "byG", "KeyConditionExpression": "g = :g",
                "ExpressionAttributeValues": {":g": {"S": f"g{limit}"}}}
        assert ddb.query(**same)["Count"] == 3
        for key in lookalikes:
            ddb.delete_item(TableName=name, Key={"pk": {"B": key}})
        assert [item["pk"]["B"] for item in ddb.query(**same)["Items"]] == [long_key]
        assert ddb.get_item(TableName=name, Key={"pk": {"B": long_key}})["Item"]["g"] == {"S": f"g{limit}"}
    ddb.delete_table(TableName=name)
