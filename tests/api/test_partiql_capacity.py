"""PartiQL's capacity figures against the native operations doing the same work on a twin table: a batch of writes
charges each statement's secondary-index units as BatchWriteItem (and UpdateItem) charge theirs."""

from __future__ import annotations

from typing import Any

from tests.conftest import unique_name


def _indexed_table(ddb: Any, prefix: str) -> str:
    """pk/sk with a local index on `lk` and a global index on `gk`, both projecting all attributes."""
    name = unique_name(prefix)
    ddb.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk", "lk", "gk")],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        LocalSecondaryIndexes=[{"IndexName": "byl", "Projection": {"ProjectionType": "ALL"}, "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "lk", "KeyType": "RANGE"}]}],
        GlobalSecondaryIndexes=[{"IndexName": "byg", "Projection": {"ProjectionType": "ALL"}, "KeySchema": [
            {"AttributeName": "gk", "KeyType": "HASH"}]}])
    return name


def _summed(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """ConsumedCapacity entries of one table (several native calls) added up, index by index."""
    total: dict[str, Any] = {"CapacityUnits": 0.0, "Table": {"CapacityUnits": 0.0}}
    for entry in entries:
        total["CapacityUnits"] += entry["CapacityUnits"]
        total["Table"]["CapacityUnits"] += entry["Table"]["CapacityUnits"]
        for member in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
            for index, units in entry.get(member, {}).items():
                slot = total.setdefault(member, {}).setdefault(index, {"CapacityUnits": 0.0})
                slot["CapacityUnits"] += units["CapacityUnits"]
    return total


def test_batch_of_writes_charges_index_units_as_the_native_writes(ddb):
    """BatchExecuteStatement's ConsumedCapacity per table includes each index written (a GSI key moved costs its
    delete and put), equal to BatchWriteItem's and UpdateItem's for the same writes."""
    tables = {"pql": _indexed_table(ddb, "pqlcap"), "native": _indexed_table(ddb, "nacap")}
    seed = {"pk": {"S": "p"}, "sk": {"S": "old"}, "lk": {"S": "l0"}, "gk": {"S": "g0"}, "pad": {"S": "x" * 1500}}
    for name in tables.values():
        ddb.put_item(TableName=name, Item=seed)
        ddb.put_item(TableName=name, Item={**seed, "sk": {"S": "gone"}})
    pql = tables["pql"]
    got = ddb.batch_execute_statement(Statements=[
        {"Statement": f"INSERT INTO \"{pql}\" VALUE {{'pk': 'p', 'sk': 'a', 'lk': 'l1', 'gk': 'g1'}}"},
        {"Statement": f"INSERT INTO \"{pql}\" VALUE {{'pk': 'p', 'sk': 'b', 'gk': ?, 'pad': ?}}",
         "Parameters": [{"S": "g2"}, {"S": "y" * 2500}]},
        {"Statement": f"UPDATE \"{pql}\" SET gk = 'g9' WHERE pk = 'p' AND sk = 'old'"},
        {"Statement": f"DELETE FROM \"{pql}\" WHERE pk = 'p' AND sk = 'gone'"},
    ], ReturnConsumedCapacity="INDEXES")
    assert all("Error" not in response for response in got["Responses"])
    native = tables["native"]
    calls = [ddb.batch_write_item(RequestItems={native: [
        {"PutRequest": {"Item": {"pk": {"S": "p"}, "sk": {"S": "a"}, "lk": {"S": "l1"}, "gk": {"S": "g1"}}}},
        {"PutRequest": {"Item": {"pk": {"S": "p"}, "sk": {"S": "b"}, "gk": {"S": "g2"}, "pad": {"S": "y" * 2500}}}},
        {"DeleteRequest": {"Key": {"pk": {"S": "p"}, "sk": {"S": "gone"}}}},
    ]}, ReturnConsumedCapacity="INDEXES")["ConsumedCapacity"][0],
        ddb.update_item(TableName=native, Key={"pk": {"S": "p"}, "sk": {"S": "old"}}, UpdateExpression="SET gk = :g",
                        ExpressionAttributeValues={":g": {"S": "g9"}},
                        ReturnConsumedCapacity="INDEXES")["ConsumedCapacity"]]
    expected = _summed(calls)
    [entry] = got["ConsumedCapacity"]
    assert entry["TableName"] == pql
    assert {key: value for key, value in entry.items() if key != "TableName"} == expected
    # and it is more than the table's units: both indexes were charged
    assert expected["GlobalSecondaryIndexes"]["byg"]["CapacityUnits"] >= 5.0
    assert expected["LocalSecondaryIndexes"]["byl"]["CapacityUnits"] >= 3.0
    total = ddb.batch_execute_statement(Statements=[
        {"Statement": f"UPDATE \"{pql}\" SET gk = 'g8' WHERE pk = 'p' AND sk = 'old'"}],
        ReturnConsumedCapacity="TOTAL")["ConsumedCapacity"]
    native_total = ddb.update_item(TableName=native, Key={"pk": {"S": "p"}, "sk": {"S": "old"}},
                                   UpdateExpression="SET gk = :g", ExpressionAttributeValues={":g": {"S": "g8"}},
                                   ReturnConsumedCapacity="TOTAL")["ConsumedCapacity"]
    assert total == [{**native_total, "TableName": pql}]
