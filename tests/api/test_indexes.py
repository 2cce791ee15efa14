"""Secondary index definitions and maintenance through boto3: CreateTable validation, DescribeTable, writes."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tests.conftest import unique_name

INVALID = "One or more parameter values were invalid: "


def error_of(excinfo) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


def defs(**types: str) -> list[dict[str, str]]:
    return [{"AttributeName": name, "AttributeType": kind} for name, kind in types.items()]


def schema(*names: str, ranges: int = 1) -> list[dict[str, str]]:
    """KeySchema with the last `ranges` names as RANGE elements (0: all HASH)."""
    split = len(names) - ranges
    return ([{"AttributeName": n, "KeyType": "HASH"} for n in names[:split]]
            + [{"AttributeName": n, "KeyType": "RANGE"} for n in names[split:]])


def gsi(name: str, *keys: str, ranges: int = 1, projection: dict | None = None) -> dict:  # type: ignore[type-arg]
    return {"IndexName": name, "KeySchema": schema(*keys, ranges=ranges),
            "Projection": projection or {"ProjectionType": "ALL"}}


def single_table(ddb) -> str:  # type: ignore[no-untyped-def]
    """The single-table design: PK/SK plus an overloaded GSI1PK/GSI1SK index."""
    name = unique_name("single")
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=defs(PK="S", SK="S", GSI1PK="S", GSI1SK="S"),
                     KeySchema=schema("PK", "SK"), GlobalSecondaryIndexes=[gsi("GSI1", "GSI1PK", "GSI1SK")])
    return name


def create(ddb, **kwargs) -> None:  # type: ignore[no-untyped-def]
    kwargs.setdefault("TableName", unique_name())
    kwargs.setdefault("BillingMode", "PAY_PER_REQUEST")
    ddb.create_table(**kwargs)


def rejected(ddb, **kwargs) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(ClientError) as excinfo:
        create(ddb, **kwargs)
    return error_of(excinfo)


def test_create_and_describe(ddb):
    """DescribeTable reports each index with its schema, projection, status, counts and ARN."""
    name = unique_name()
    created = ddb.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=defs(pk="S", sk="S", g="N", l="S"),
        KeySchema=schema("pk", "sk"),
        GlobalSecondaryIndexes=[gsi("byG", "g", ranges=0, projection={"ProjectionType": "KEYS_ONLY"})],
        LocalSecondaryIndexes=[{"IndexName": "byL", "KeySchema": schema("pk", "l"),
                                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["x"]}}],
    )["TableDescription"]
    assert created["GlobalSecondaryIndexes"][0]["IndexStatus"] == "CREATING"
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "sk": {"S": "1"}, "g": {"N": "5"}, "l": {"S": "z"}})
    table = ddb.describe_table(TableName=name)["Table"]
    (g,) = table["GlobalSecondaryIndexes"]
    assert g["IndexName"] == "byG" and g["IndexStatus"] == "ACTIVE"
    assert g["KeySchema"] == [{"AttributeName": "g", "KeyType": "HASH"}]
    assert g["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    assert g["IndexArn"] == f"arn:aws:dynamodb:us-east-1:000000000000:table/{name}/index/byG"
    assert g["ItemCount"] == 1 and g["IndexSizeBytes"] > 0
    assert g["ProvisionedThroughput"] == {"NumberOfDecreasesToday": 0, "ReadCapacityUnits": 0,
                                          "WriteCapacityUnits": 0}
    (lsi,) = table["LocalSecondaryIndexes"]
    assert lsi["Projection"] == {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["x"]}
    assert lsi["ItemCount"] == 1 and "IndexStatus" not in lsi


def provisioned_table_with_gsi(ddb, read: int, write: int) -> str:
    """A provisioned table (1/1) with the GSI gs1 (keyed on g) of the given throughput; its name."""
    name = unique_name()
    index = {**gsi("gs1", "g", ranges=0),
             "ProvisionedThroughput": {"ReadCapacityUnits": read, "WriteCapacityUnits": write}}
    ddb.create_table(TableName=name, AttributeDefinitions=defs(pk="S", g="S"), KeySchema=schema("pk", ranges=0),
                     ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1},
                     GlobalSecondaryIndexes=[index])
    return name


def test_provisioned_gsi_throughput(ddb):
    """A GSI on a provisioned table carries its own throughput."""
    name = provisioned_table_with_gsi(ddb, 3, 4)
    throughput = ddb.describe_table(TableName=name)["Table"]["GlobalSecondaryIndexes"][0]["ProvisionedThroughput"]
    assert (throughput["ReadCapacityUnits"], throughput["WriteCapacityUnits"]) == (3, 4)


def test_gsi_throughput_update(ddb):
    """The answer shows the index UPDATING with the throughput before the change; the same values again are refused."""
    name = provisioned_table_with_gsi(ddb, 2, 2)

    def update(read: int, write: int) -> dict:
        return ddb.update_table(TableName=name, GlobalSecondaryIndexUpdates=[{"Update": {
            "IndexName": "gs1", "ProvisionedThroughput": {"ReadCapacityUnits": read, "WriteCapacityUnits": write}}}],
        )["TableDescription"]["GlobalSecondaryIndexes"][0]

    answered = update(2, 3)
    assert answered["IndexStatus"] == "UPDATING"
    assert (answered["ProvisionedThroughput"]["ReadCapacityUnits"],
            answered["ProvisionedThroughput"]["WriteCapacityUnits"]) == (2, 2)
    described = ddb.describe_table(TableName=name)["Table"]["GlobalSecondaryIndexes"][0]
    assert described["ProvisionedThroughput"]["WriteCapacityUnits"] == 3 and described["IndexStatus"] == "ACTIVE"
    with pytest.raises(ClientError) as excinfo:
        update(2, 3)
    assert excinfo.value.response["Error"]["Message"].startswith(
        "The provisioned throughput for the index gs1 will not change. The requested value equals the current value. "
        "Current ReadCapacityUnits provisioned for index gs1: 2. Requested ReadCapacityUnits: 2. Current "
        "WriteCapacityUnits")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"AttributeDefinitions": defs(pk="S", g="S", extra="S"), "KeySchema": schema("pk", ranges=0),
      "GlobalSecondaryIndexes": [gsi("gs1", "g", ranges=0)]},
     INVALID + "Some AttributeDefinitions are not used. AttributeDefinitions: [pk, g, extra], keys used: [g, pk]"),
    ({"AttributeDefinitions": defs(pk="S"), "KeySchema": schema("pk", ranges=0),  # (as captured in 2021)
      "GlobalSecondaryIndexes": [gsi("gs1", "g", ranges=0)]},
     INVALID + "Some index key attributes are not defined in AttributeDefinitions. Keys: [g], "
     "AttributeDefinitions: [pk]"),
    ({"AttributeDefinitions": defs(pk="S", l="S"), "KeySchema": schema("pk", ranges=0),
      "LocalSecondaryIndexes": [gsi("ls1", "pk", "l")]},
     INVALID + "Table KeySchema does not have a range key, which is required when specifying a LocalSecondaryIndex"),
    ({"AttributeDefinitions": defs(pk="S", g="S"), "KeySchema": schema("pk", ranges=0),
      "GlobalSecondaryIndexes": [gsi("gs1", "g", ranges=0, projection={"ProjectionType": "INCLUDE"})]},
     INVALID + "ProjectionType is INCLUDE, but NonKeyAttributes is not specified"),
    ({"AttributeDefinitions": defs(pk="S", g="S"), "KeySchema": schema("pk", ranges=0),
      "GlobalSecondaryIndexes": [gsi("gs1", "g", ranges=0, projection={"ProjectionType": "ALL",
                                                                       "NonKeyAttributes": ["a"]})]},
     INVALID + "ProjectionType is ALL, but NonKeyAttributes is specified"),
    ({"AttributeDefinitions": defs(pk="S", g="S"), "KeySchema": schema("pk", ranges=0),
      "GlobalSecondaryIndexes": [{**gsi("gs1", "g", ranges=0),
                                  "ProvisionedThroughput": {"ReadCapacityUnits": 1, "WriteCapacityUnits": 1}}]},
     INVALID + "ProvisionedThroughput should not be specified for index: gs1 when BillingMode is PAY_PER_REQUEST"),
])
def test_definition_errors(ddb, kwargs, message):
    """Index definitions are validated with DynamoDB's messages."""
    assert rejected(ddb, **kwargs) == ("ValidationException", message)


def test_name_and_count_limits(ddb):
    """Index names are unique across both kinds; at most 20 GSIs and 5 LSIs."""
    code, message = rejected(ddb, AttributeDefinitions=defs(pk="S", sk="S", g="S"), KeySchema=schema("pk", "sk"),
                             GlobalSecondaryIndexes=[gsi("same", "g", ranges=0)],
                             LocalSecondaryIndexes=[gsi("same", "pk", "g")])
    assert code == "ValidationException" and "same" in message
    many = defs(pk="S", **{f"a{i}": "S" for i in range(21)})
    code, message = rejected(ddb, AttributeDefinitions=many, KeySchema=schema("pk", ranges=0),
                             GlobalSecondaryIndexes=[gsi(f"g{i:02d}", f"a{i}", ranges=0) for i in range(21)])
    assert code == "ValidationException" and "20" in message


def test_projected_attribute_limit(ddb):
    """At most 100 NonKeyAttributes summed across all indexes."""
    projection = {"ProjectionType": "INCLUDE", "NonKeyAttributes": [f"n{i}" for i in range(20)]}
    code, message = rejected(ddb, AttributeDefinitions=defs(pk="S", **{f"a{i}": "S" for i in range(6)}),
                             KeySchema=schema("pk", ranges=0),
                             GlobalSecondaryIndexes=[gsi(f"gx{i}", f"a{i}", ranges=0, projection=projection)
                                                     for i in range(6)])
    assert code == "ValidationException" and "100" in message


def test_lsi_needs_table_hash_key(ddb):
    """An LSI shares the table's partition key."""
    code, message = rejected(ddb, AttributeDefinitions=defs(pk="S", sk="S", other="S"), KeySchema=schema("pk", "sk"),
                             LocalSecondaryIndexes=[gsi("ls1", "other", "sk")])
    assert code == "ValidationException" and "ls1" in message


def test_index_key_type_mismatch_rejected(ddb):
    """A write whose index key attribute has the wrong type is refused and nothing is written."""
    name = single_table(ddb)
    item = {"PK": {"S": "u#1"}, "SK": {"S": "profile"}, "GSI1PK": {"N": "1"}}
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=name, Item=item)
    assert error_of(excinfo) == ("ValidationException", INVALID + "Type mismatch for Index Key GSI1PK Expected: S "
                                 "Actual: N IndexName: GSI1")
    assert "Item" not in ddb.get_item(TableName=name, Key={"PK": {"S": "u#1"}, "SK": {"S": "profile"}})
    ddb.put_item(TableName=name, Item={"PK": {"S": "u#1"}, "SK": {"S": "profile"}})
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=name, Key={"PK": {"S": "u#1"}, "SK": {"S": "profile"}},
                        UpdateExpression="SET GSI1SK = :v", ExpressionAttributeValues={":v": {"B": b"x"}})
    assert error_of(excinfo)[1] == INVALID + "Type mismatch for Index Key GSI1SK Expected: S Actual: B IndexName: GSI1"
    with pytest.raises(ClientError) as excinfo:
        ddb.batch_write_item(RequestItems={name: [{"PutRequest": {"Item": item}}]})
    assert error_of(excinfo)[0] == "ValidationException"


def test_empty_index_key_rejected(ddb):
    """An empty string in an index key attribute is refused."""
    name = single_table(ddb)
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=name, Item={"PK": {"S": "a"}, "SK": {"S": "b"}, "GSI1PK": {"S": ""}})
    assert error_of(excinfo) == (
        "ValidationException", "One or more parameter values are not valid. A value specified for a secondary index "
        "key is not supported. The AttributeValue for a key attribute cannot contain an empty string value. "
        "IndexName: GSI1, IndexKey: GSI1PK")
    # An update expression producing one is worded apart, alone or in a transaction (which it refuses outright).
    ddb.put_item(TableName=name, Item={"PK": {"S": "a"}, "SK": {"S": "b"}})
    update = {"TableName": name, "Key": {"PK": {"S": "a"}, "SK": {"S": "b"}}, "UpdateExpression": "SET GSI1PK = :e",
              "ExpressionAttributeValues": {":e": {"S": ""}}}
    expected = ("ValidationException", "One or more parameter values are not valid. The update expression attempted "
                "to update a secondary index key to a value that is not supported. The AttributeValue for a key "
                "attribute cannot contain an empty string value.")
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(**update)
    assert error_of(excinfo) == expected
    with pytest.raises(ClientError) as excinfo:
        ddb.transact_write_items(TransactItems=[{"Update": update}])
    assert error_of(excinfo) == expected
    assert ddb.get_item(TableName=name, Key=update["Key"])["Item"] == update["Key"]


def test_attribute_keying_several_indexes_names_the_first_by_name(ddb):
    name = unique_name()
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=defs(pk="S", g="S"),
                     KeySchema=schema("pk", ranges=0),
                     GlobalSecondaryIndexes=[gsi("zzz_idx", "g", ranges=0), gsi("aaa_idx", "g", ranges=0)])
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "g": {"N": "1"}})
    assert error_of(excinfo)[1] == INVALID + "Type mismatch for Index Key g Expected: S Actual: N IndexName: aaa_idx"


def test_sparse_and_overloaded_index(ddb):
    """Items without the index keys stay out of the index; one GSI serves several entity types."""
    name = single_table(ddb)
    writes = [
        {"PK": {"S": "USER#1"}, "SK": {"S": "PROFILE"}, "GSI1PK": {"S": "ORG#a"}, "GSI1SK": {"S": "USER#1"}},
        {"PK": {"S": "USER#2"}, "SK": {"S": "PROFILE"}, "GSI1PK": {"S": "ORG#a"}, "GSI1SK": {"S": "USER#2"}},
        {"PK": {"S": "ORDER#9"}, "SK": {"S": "META"}, "GSI1PK": {"S": "USER#1"}, "GSI1SK": {"S": "ORDER#9"}},
        {"PK": {"S": "USER#3"}, "SK": {"S": "PROFILE"}, "GSI1PK": {"S": "ORG#a"}},  # no sort key: not indexed
        {"PK": {"S": "LOG#1"}, "SK": {"S": "X"}},
    ]
    for item in writes:
        ddb.put_item(TableName=name, Item=item)
    org = ddb.query(TableName=name, IndexName="GSI1", KeyConditionExpression="GSI1PK = :o",
                    ExpressionAttributeValues={":o": {"S": "ORG#a"}})
    assert [i["PK"]["S"] for i in org["Items"]] == ["USER#1", "USER#2"]
    orders = ddb.query(TableName=name, IndexName="GSI1", KeyConditionExpression="GSI1PK = :u AND "
                       "begins_with(GSI1SK, :p)", ExpressionAttributeValues={":u": {"S": "USER#1"},
                                                                            ":p": {"S": "ORDER#"}})
    assert [i["PK"]["S"] for i in orders["Items"]] == ["ORDER#9"]
    assert ddb.scan(TableName=name, IndexName="GSI1")["Count"] == 3
    # Moving an item to another index key, and out of the index, updates the index in the same write.
    ddb.update_item(TableName=name, Key={"PK": {"S": "USER#2"}, "SK": {"S": "PROFILE"}},
                    UpdateExpression="SET GSI1PK = :b", ExpressionAttributeValues={":b": {"S": "ORG#b"}})
    ddb.update_item(TableName=name, Key={"PK": {"S": "USER#1"}, "SK": {"S": "PROFILE"}},
                    UpdateExpression="REMOVE GSI1SK")
    ddb.delete_item(TableName=name, Key={"PK": {"S": "ORDER#9"}, "SK": {"S": "META"}})
    keys = sorted((i["GSI1PK"]["S"], i["PK"]["S"]) for i in ddb.scan(TableName=name, IndexName="GSI1")["Items"])
    assert keys == [("ORG#b", "USER#2")]


def test_duplicate_index_keys(ddb):
    """A GSI holds many items under one index key, ordered by the table key."""
    name = single_table(ddb)
    for n in (3, 1, 2):
        ddb.put_item(TableName=name, Item={"PK": {"S": f"p{n}"}, "SK": {"S": "s"}, "GSI1PK": {"S": "same"},
                                           "GSI1SK": {"S": "same"}})
    result = ddb.query(TableName=name, IndexName="GSI1", KeyConditionExpression="GSI1PK = :v AND GSI1SK = :v",
                       ExpressionAttributeValues={":v": {"S": "same"}})
    assert [i["PK"]["S"] for i in result["Items"]] == ["p1", "p2", "p3"]


def test_transaction_and_batch_maintain_indexes(ddb):
    """TransactWriteItems and BatchWriteItem maintain indexes like single writes."""
    name = single_table(ddb)
    ddb.transact_write_items(TransactItems=[
        {"Put": {"TableName": name, "Item": {"PK": {"S": "t1"}, "SK": {"S": "s"}, "GSI1PK": {"S": "g"},
                                             "GSI1SK": {"S": "1"}}}},
        {"Put": {"TableName": name, "Item": {"PK": {"S": "t2"}, "SK": {"S": "s"}, "GSI1PK": {"S": "g"},
                                             "GSI1SK": {"S": "2"}}}},
    ])
    ddb.batch_write_item(RequestItems={name: [
        {"DeleteRequest": {"Key": {"PK": {"S": "t1"}, "SK": {"S": "s"}}}},
        {"PutRequest": {"Item": {"PK": {"S": "t3"}, "SK": {"S": "s"}, "GSI1PK": {"S": "g"}, "GSI1SK": {"S": "3"}}}},
    ]})
    result = ddb.query(TableName=name, IndexName="GSI1", KeyConditionExpression="GSI1PK = :g",
                       ExpressionAttributeValues={":g": {"S": "g"}})
    assert [i["PK"]["S"] for i in result["Items"]] == ["t2", "t3"]


def test_delete_table_with_indexes(ddb):
    """Deleting a table removes its index entries too (a new table of that name starts empty)."""
    name = single_table(ddb)
    ddb.put_item(TableName=name, Item={"PK": {"S": "a"}, "SK": {"S": "b"}, "GSI1PK": {"S": "g"},
                                       "GSI1SK": {"S": "s"}})
    ddb.delete_table(TableName=name)
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=defs(PK="S", SK="S", GSI1PK="S", GSI1SK="S"),
                     KeySchema=schema("PK", "SK"), GlobalSecondaryIndexes=[gsi("GSI1", "GSI1PK", "GSI1SK")])
    assert ddb.scan(TableName=name, IndexName="GSI1")["Count"] == 0


def lsi_table(ddb, projection: str = "ALL") -> str:  # type: ignore[no-untyped-def]
    name = unique_name("lsi")
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=defs(pk="S", sk="S", l="S"),
                     KeySchema=schema("pk", "sk"),
                     LocalSecondaryIndexes=[gsi("byL", "pk", "l", projection={"ProjectionType": projection})])
    return name


def test_item_collection_metrics(ddb):
    """Writes to a table with an LSI report their item collection's size estimate."""
    name = lsi_table(ddb)
    put = ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "sk": {"S": "1"}, "l": {"S": "x"}},
                       ReturnItemCollectionMetrics="SIZE")
    assert put["ItemCollectionMetrics"] == {"ItemCollectionKey": {"pk": {"S": "a"}}, "SizeEstimateRangeGB": [0.0, 1.0]}
    batch = ddb.batch_write_item(RequestItems={name: [{"PutRequest": {"Item": {"pk": {"S": "b"}, "sk": {"S": "1"}}}}]},
                                 ReturnItemCollectionMetrics="SIZE")
    assert batch["ItemCollectionMetrics"][name][0]["ItemCollectionKey"] == {"pk": {"S": "b"}}


def test_item_collection_size_limit(monkeypatch):
    """An LSI table refuses a write that would grow an item collection past the limit (lowered here)."""
    from tests.conftest import ServerProcess, make_client

    monkeypatch.setenv("OPENDDB_ITEM_COLLECTION_LIMIT", "2000")
    process = ServerProcess(None)
    try:
        client = make_client(process.endpoint)
        name = lsi_table(client)
        client.put_item(TableName=name, Item={"pk": {"S": "a"}, "sk": {"S": "1"}, "l": {"S": "x" * 700}})
        with pytest.raises(ClientError) as excinfo:
            client.put_item(TableName=name, Item={"pk": {"S": "a"}, "sk": {"S": "2"}, "l": {"S": "y" * 700}})
        # (DynamoDB's text: the Developer Guide's list of errors, and the API Reference's cancellation reasons)
        assert error_of(excinfo) == ("ItemCollectionSizeLimitExceededException", "Collection size exceeded.")
        assert "Item" not in client.get_item(TableName=name, Key={"pk": {"S": "a"}, "sk": {"S": "2"}})
        with pytest.raises(ClientError) as excinfo:
            client.batch_write_item(RequestItems={name: [
                {"PutRequest": {"Item": {"pk": {"S": "c"}, "sk": {"S": "1"}}}},
                {"PutRequest": {"Item": {"pk": {"S": "a"}, "sk": {"S": "2"}, "l": {"S": "y" * 700}}}}]})
        assert error_of(excinfo) == ("ItemCollectionSizeLimitExceededException", "Collection size exceeded.")
        # In a transaction it cancels: the action that grows the collection gives the reason, nothing is written.
        with pytest.raises(ClientError) as excinfo:
            client.transact_write_items(TransactItems=[
                {"Put": {"TableName": name, "Item": {"pk": {"S": "c"}, "sk": {"S": "1"}}}},
                {"Put": {"TableName": name, "Item": {"pk": {"S": "a"}, "sk": {"S": "2"}, "l": {"S": "y" * 700}}}}])
        assert error_of(excinfo) == ("TransactionCanceledException", "Transaction cancelled, please refer cancellation "
                                     "reasons for specific reasons [None, ItemCollectionSizeLimitExceeded]")
        assert excinfo.value.response["CancellationReasons"] == [
            {"Code": "None"}, {"Code": "ItemCollectionSizeLimitExceeded", "Message": "Collection size exceeded."}]
        assert "Item" not in client.get_item(TableName=name, Key={"pk": {"S": "c"}, "sk": {"S": "1"}})
        client.put_item(TableName=name, Item={"pk": {"S": "b"}, "sk": {"S": "2"}, "l": {"S": "y" * 700}})
    finally:
        process.finish()


def test_index_key_values_are_held_to_key_size_limits(ddb):
    """A GSI hash key value over 2048 bytes (sort key over 1024) is refused on every write path: stored, the
    item could never be read back through the index."""
    name = unique_name("ixsize")
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                           {"AttributeName": "g", "AttributeType": "S"},
                                           {"AttributeName": "r", "AttributeType": "B"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     GlobalSecondaryIndexes=[{"IndexName": "gsi", "Projection": {"ProjectionType": "KEYS_ONLY"},
                                              "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"},
                                                            {"AttributeName": "r", "KeyType": "RANGE"}]}])
    ddb.put_item(TableName=name, Item={"pk": {"S": "ok"}, "g": {"S": "é" * 1024}, "r": {"B": b"x" * 1024}})
    too_big = "One or more parameter values were invalid: Size limit exceeded for Index Key {} Actual Size: {} bytes " \
              "Max Size: {} bytes IndexName: gsi"
    for attribute, value, message in (("g", {"S": "x" * 2049}, too_big.format("g", 2049, 2048)),
                                      ("g", {"S": "é" * 1025}, too_big.format("g", 2050, 2048)),
                                      ("r", {"B": b"x" * 1025}, too_big.format("r", 1025, 1024))):
        with pytest.raises(ClientError) as excinfo:
            ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, attribute: value})
        assert error_of(excinfo) == ("ValidationException", message)
        with pytest.raises(ClientError) as excinfo:
            ddb.update_item(TableName=name, Key={"pk": {"S": "ok"}}, UpdateExpression="SET #a = :v",
                            ExpressionAttributeNames={"#a": attribute}, ExpressionAttributeValues={":v": value})
        assert error_of(excinfo) == ("ValidationException", message)
    assert ddb.scan(TableName=name)["Count"] == 1
    assert ddb.get_item(TableName=name, Key={"pk": {"S": "ok"}})["Item"]["g"] == {"S": "é" * 1024}


def test_item_size_limit_counts_local_index_entries(ddb):
    """On a table with LSIs the 400 KB limit holds the item plus its entries in them: a 300 KB item fits alone
    but not beside its copy in an ALL LSI, whichever way it is written; out of the LSI it fits."""
    table = lsi_table(ddb, "ALL")
    big = {"pk": {"S": "p"}, "sk": {"S": "s"}, "blob": {"S": "x" * 300_000}}
    in_index = {**big, "l": {"S": "l"}}
    too_big = ("ValidationException", "Item size has exceeded the maximum allowed size")
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=table, Item=in_index)
    assert error_of(excinfo) == too_big
    with pytest.raises(ClientError) as excinfo:
        ddb.batch_write_item(RequestItems={table: [{"PutRequest": {"Item": in_index}}]})
    assert error_of(excinfo) == too_big
    with pytest.raises(ClientError) as excinfo:
        ddb.transact_write_items(TransactItems=[{"Put": {"TableName": table, "Item": in_index}}])
    assert error_of(excinfo) == too_big
    ddb.put_item(TableName=table, Item=big)
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=table, Key={"pk": {"S": "p"}, "sk": {"S": "s"}}, UpdateExpression="SET l = :l",
                        ExpressionAttributeValues={":l": {"S": "l"}})
    assert error_of(excinfo) == ("ValidationException", "Item size to update has exceeded the maximum allowed size")
    with pytest.raises(ClientError) as excinfo:
        ddb.transact_write_items(TransactItems=[{"Update": {
            "TableName": table, "Key": {"pk": {"S": "p"}, "sk": {"S": "s"}}, "UpdateExpression": "SET l = :l",
            "ExpressionAttributeValues": {":l": {"S": "l"}}}}])
    assert excinfo.value.response["Error"]["Code"] == "TransactionCanceledException"
    stored = ddb.get_item(TableName=table, Key={"pk": {"S": "p"}, "sk": {"S": "s"}})["Item"]
    assert "l" not in stored
    assert ddb.query(TableName=table, IndexName="byL", KeyConditionExpression="pk = :p",
                     ExpressionAttributeValues={":p": {"S": "p"}})["Count"] == 0


def test_item_at_the_limit_with_a_keys_only_entry(ddb):
    """An item of exactly 400 KB fits a table without LSIs, not one where it also has a KEYS_ONLY entry."""
    table = lsi_table(ddb, "KEYS_ONLY")
    # pk (2+1) + sk (2+1) + l (1+1) + "blob" name (4) = 12 bytes besides the blob's value.
    item = {"pk": {"S": "p"}, "sk": {"S": "s"}, "l": {"S": "l"}, "blob": {"S": "x" * (409_600 - 12)}}
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=table, Item=item)
    assert error_of(excinfo) == ("ValidationException", "Item size has exceeded the maximum allowed size")
    plain = unique_name("plain")
    ddb.create_table(TableName=plain, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=defs(pk="S", sk="S"),
                     KeySchema=schema("pk", "sk"))
    ddb.put_item(TableName=plain, Item=item)


def test_index_update_refusals(ddb):
    """GlobalSecondaryIndexUpdates refused in the words DynamoDB answers with (recorded against the service), and
    nothing of a refused request applied."""
    name = provisioned_table_with_gsi(ddb, 2, 2)
    other = {"Update": {"IndexName": "gs1", "ProvisionedThroughput": {"ReadCapacityUnits": 3, "WriteCapacityUnits": 3}}}

    def refused(**members) -> tuple[str, str]:  # type: ignore[no-untyped-def]
        with pytest.raises(ClientError) as excinfo:
            ddb.update_table(TableName=name, **members)
        return error_of(excinfo)

    for updates in ([other, {"Delete": {"IndexName": "gs1"}}], [other, other],
                    [{"Delete": {"IndexName": "gs1"}}, {"Create": gsi("gs1", "g", ranges=0)}]):
        assert refused(AttributeDefinitions=defs(g="S"), GlobalSecondaryIndexUpdates=updates) == (
            "ValidationException", INVALID + "Only one global secondary index update per index is allowed "
                                             "simultaneously. Index: gs1")
    for action in ({"Update": {**other["Update"], "IndexName": "ghost"}}, {"Delete": {"IndexName": "ghost"}}):
        assert refused(GlobalSecondaryIndexUpdates=[action]) == (
            "ResourceNotFoundException", f"Requested resource not found: Index ghost for table {name}")
    create = {**gsi("gs2", "h", ranges=0), "ProvisionedThroughput": {"ReadCapacityUnits": 1, "WriteCapacityUnits": 1}}
    assert refused(GlobalSecondaryIndexUpdates=[{"Create": create}]) == (
        "ValidationException", INVALID + "AttributeDefinitions is not specified for index: gs2")
    assert refused(AttributeDefinitions=defs(h="S"), GlobalSecondaryIndexUpdates=[{"Create": gsi("gs2", "h", ranges=0)}]
                   ) == ("ValidationException",
                         INVALID + "Both ReadCapacityUnits and WriteCapacityUnits must be specified for index: gs2")
    assert refused(GlobalSecondaryIndexUpdates=[], DeletionProtectionEnabled=True) == (
        "ValidationException", INVALID + "List of GlobalSecondaryIndexUpdates is empty")
    assert refused(GlobalSecondaryIndexUpdates=[])[1].startswith("At least one of ProvisionedThroughput, ")
    (index,) = ddb.describe_table(TableName=name)["Table"]["GlobalSecondaryIndexes"]
    assert (index["IndexName"], index["ProvisionedThroughput"]["ReadCapacityUnits"]) == ("gs1", 2)


def test_billing_switch_refusals_with_an_index(ddb):
    """A switch to provisioned capacity needs the table's throughput first, then each index's; an on-demand index
    takes no ProvisionedThroughput."""
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=defs(pk="S", g="S"), KeySchema=schema("pk", ranges=0),
                     BillingMode="PAY_PER_REQUEST", GlobalSecondaryIndexes=[gsi("gs1", "g", ranges=0)])
    units = {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}
    create = {**gsi("gs2", "g", ranges=0), "ProvisionedThroughput": units}
    for members, message in (
            ({"AttributeDefinitions": defs(g="S"), "GlobalSecondaryIndexUpdates": [{"Create": create}]},
             "Neither ReadCapacityUnits nor WriteCapacityUnits can be specified for index: gs2 when BillingMode is "
             "PAY_PER_REQUEST"),
            ({"BillingMode": "PROVISIONED"}, "ProvisionedThroughput must be specified when BillingMode is PROVISIONED"),
            ({"BillingMode": "PROVISIONED", "ProvisionedThroughput": units},
             "ProvisionedThroughput must be specified for index: gs1"),
            ({"GlobalSecondaryIndexUpdates": [{"Update": {"IndexName": "gs1", "ProvisionedThroughput": units}}]},
             "The only Updates for index: gs1 when TableThroughputMode is PAY_PER_REQUEST can be to "
             "OnDemandThroughput, WarmThroughput"),
            ({"GlobalSecondaryIndexUpdates": [{"Update": {"IndexName": "gs1", "OnDemandThroughput": {}}}]},
             "The only Updates for index: gs1 when TableThroughputMode is PAY_PER_REQUEST can be to "
             "OnDemandThroughput, WarmThroughput")):
        with pytest.raises(ClientError) as excinfo:
            ddb.update_table(TableName=name, **members)
        assert error_of(excinfo) == ("ValidationException", INVALID + message)


def test_unused_attribute_definitions_are_refused_before_other_index_rules(ddb):
    """Listed as given, with the keys used in the order of DynamoDB's (Java) hash set; checked before the rest."""
    bad_projection = gsi("gs1", "a", ranges=0, projection={"ProjectionType": "INCLUDE"})
    assert rejected(ddb, AttributeDefinitions=defs(sk="S", a="S", b="S", pk="S", c="S"), KeySchema=schema("pk", "sk"),
                    GlobalSecondaryIndexes=[bad_projection], BillingMode="PAY_PER_REQUEST") == (
        "ValidationException", INVALID + "Some AttributeDefinitions are not used. AttributeDefinitions: "
                                         "[sk, a, b, pk, c], keys used: [a, sk, pk]")


def test_gsi_on_demand_and_warm_throughput(ddb):
    """A GSI keeps its own OnDemandThroughput and WarmThroughput (apart from the table's), set at creation and
    by an Update action; warm throughput never goes down, and a switch to provisioned capacity drops the
    on-demand limits (as recorded against the service)."""
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=defs(pk="S", g="S"), KeySchema=schema("pk", ranges=0),
                     BillingMode="PAY_PER_REQUEST", GlobalSecondaryIndexes=[{
                         **gsi("gs1", "g", ranges=0), "OnDemandThroughput": {"MaxReadRequestUnits": 50,
                                                                            "MaxWriteRequestUnits": 50},
                         "WarmThroughput": {"ReadUnitsPerSecond": 13000, "WriteUnitsPerSecond": 5000}}])
    table = ddb.describe_table(TableName=name)["Table"]
    (index,) = table["GlobalSecondaryIndexes"]
    assert "OnDemandThroughput" not in table
    assert index["OnDemandThroughput"] == {"MaxReadRequestUnits": 50, "MaxWriteRequestUnits": 50}
    assert index["WarmThroughput"] == {"ReadUnitsPerSecond": 13000, "WriteUnitsPerSecond": 5000, "Status": "ACTIVE"}

    def update(**action) -> dict:  # type: ignore[no-untyped-def]
        answer = ddb.update_table(TableName=name, GlobalSecondaryIndexUpdates=[{"Update": {"IndexName": "gs1",
                                                                                          **action}}])
        return answer["TableDescription"]

    limits = {"MaxReadRequestUnits": 5000, "MaxWriteRequestUnits": 5000}
    answer = update(OnDemandThroughput=limits)
    assert answer["TableStatus"] == "ACTIVE" and answer["GlobalSecondaryIndexes"][0]["IndexStatus"] == "UPDATING"
    assert ddb.describe_table(TableName=name)["Table"]["GlobalSecondaryIndexes"][0]["OnDemandThroughput"] == limits
    update(OnDemandThroughput=limits)  # the same again is accepted
    answer = update(WarmThroughput={"ReadUnitsPerSecond": 14000})
    (index,) = answer["GlobalSecondaryIndexes"]
    assert index["IndexStatus"] == "ACTIVE" and index["WarmThroughput"]["Status"] == "UPDATING"
    for action, message in (
            ({"WarmThroughput": {"ReadUnitsPerSecond": 13500}},
             "Requested ReadUnitsPerSecond for WarmThroughput for index gs1 is lower than current WarmThroughput, "
             "decreasing WarmThroughput is not supported"),
            ({"WarmThroughput": {}},
             "WarmThroughput must have at least one of ReadUnitsPerSecond or WriteUnitsPerSecond specified for "
             "index: gs1"),
            ({"OnDemandThroughput": {"MaxReadRequestUnits": 0}},
             "Requested MaxReadRequestUnits for OnDemandThroughput for index : gs1 is outside of valid range")):
        with pytest.raises(ClientError) as excinfo:
            update(**action)
        assert error_of(excinfo) == ("ValidationException", INVALID + message)
    ddb.update_table(TableName=name, BillingMode="PROVISIONED",
                     ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 5},
                     GlobalSecondaryIndexUpdates=[{"Update": {"IndexName": "gs1", "ProvisionedThroughput": {
                         "ReadCapacityUnits": 5, "WriteCapacityUnits": 5}}}])
    (index,) = ddb.describe_table(TableName=name)["Table"]["GlobalSecondaryIndexes"]
    assert "OnDemandThroughput" not in index
    assert (index["WarmThroughput"]["ReadUnitsPerSecond"], index["WarmThroughput"]["WriteUnitsPerSecond"]) == (
        14000, 5000)
    with pytest.raises(ClientError) as excinfo:  # UpdateTable words it "for index : X" (CreateTable "index: X")
        update(OnDemandThroughput={"MaxReadRequestUnits": 5})
    assert error_of(excinfo)[1] == INVALID + ("MaxReadRequestUnits for OnDemandThroughput for index : gs1 cannot be "
                                              "specified when the table BillingMode is PROVISIONED")


@pytest.mark.parametrize(("billing", "index", "message"), [
    ({"BillingMode": "PAY_PER_REQUEST"}, {"OnDemandThroughput": {"MaxReadRequestUnits": 0}},
     "Requested MaxReadRequestUnits for OnDemandThroughput for index : gs1 is outside of valid range"),
    ({"BillingMode": "PAY_PER_REQUEST"}, {"WarmThroughput": {"ReadUnitsPerSecond": 1, "WriteUnitsPerSecond": 1}},
     "Requested ReadUnitsPerSecond for WarmThroughput for index gs1 is lower than initial throughput for OnDemand"),
    ({"BillingMode": "PROVISIONED", "ProvisionedThroughput": {"ReadCapacityUnits": 1, "WriteCapacityUnits": 1}},
     {"ProvisionedThroughput": {"ReadCapacityUnits": 1, "WriteCapacityUnits": 1},
      "OnDemandThroughput": {"MaxReadRequestUnits": 10, "MaxWriteRequestUnits": 10}},
     "MaxReadRequestUnits for OnDemandThroughput for index: gs1 cannot be specified when table BillingMode is "
     "PROVISIONED."),
])
def test_gsi_throughput_limits_refused_at_creation(ddb, billing, index, message):
    refusal = rejected(ddb, AttributeDefinitions=defs(pk="S", g="S"), KeySchema=schema("pk", ranges=0),
                       GlobalSecondaryIndexes=[{**gsi("gs1", "g", ranges=0), **index}], **billing)
    assert refusal[0] == "ValidationException" and refusal[1].startswith(INVALID + message)


def test_undefined_index_key_is_refused_before_unused_definitions(ddb):
    """An index key attribute without a definition is reported before definitions no key uses, listing the
    index's key schema and the definitions in Java HashSet order (the recorded answer, agno issue 4769, to a
    request defining the attributes in this order)."""
    names = ["status_message", "metadata", "description", "created_at", "access_count", "external_id", "type",
             "size", "updated_at", "name", "id", "linked_to", "status"]
    definitions = [{"AttributeName": n, "AttributeType": "N" if n == "created_at" else "S"} for n in names]
    refusal = rejected(ddb, AttributeDefinitions=definitions, KeySchema=schema("id", ranges=0),
                       GlobalSecondaryIndexes=[gsi("user_idx", "user_id", "created_at"),
                                               gsi("type_idx", "type", "created_at"),
                                               gsi("status_idx", "status", "created_at")])
    assert refusal == ("ValidationException", INVALID + "Some index key attributes are not defined in "
                       "AttributeDefinitions. Keys: [user_id, created_at], AttributeDefinitions: [" + ", ".join(names)
                       + "]")
