"""Vector index definitions (CreateTable VectorIndexes, UpdateTable VectorIndexUpdates) and their descriptions:
every setting, every refusal, online creation on a populated table (issue 31)."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.api.test_vectors import error_of, keys_of, make_table, reference_scores, search, vec, vector_index
from tests.conftest import ServerProcess, make_client, unique_name


def create(ddb, indexes: list[dict[str, Any]], definitions: dict[str, str] | None = None,  # type: ignore[no-untyped-def]
           **extra: Any) -> tuple[str, str]:
    """The refusal of a CreateTable (code, message)."""
    defs = [{"AttributeName": "pk", "AttributeType": "S"}] + [
        {"AttributeName": a, "AttributeType": t} for a, t in (definitions or {}).items()]
    return error_of(ddb.create_table, TableName=unique_name("vec"), AttributeDefinitions=defs,  # type: ignore[no-any-return]
                    KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                    **({"BillingMode": "PAY_PER_REQUEST"} | extra), VectorIndexes=indexes)


def test_describe_table_reports_every_setting(ddb) -> None:  # type: ignore[no-untyped-def]
    """Each VectorIndexDescription member, for every distance function and projection type; the search-schema
    attributes are among the table's AttributeDefinitions."""
    table = make_table(ddb, [
        vector_index("cos", dims=4, distance="COSINE", schema=[("g", "HASH"), ("f", "INLINE_FILTER")]),
        vector_index("euc", attribute="other", dims=8, distance="EUCLIDEAN",
                     projection={"ProjectionType": "KEYS_ONLY"}),
        vector_index("dot", dims=4, distance="DOT_PRODUCT",
                     projection={"ProjectionType": "INCLUDE", "NonKeyAttributes": ["z", "a"]}),
    ], {"g": "S", "f": "N"})
    described = ddb.describe_table(TableName=table)["Table"]
    assert {d["AttributeName"] for d in described["AttributeDefinitions"]} == {"pk", "g", "f"}
    by_name = {d["IndexName"]: d for d in described["VectorIndexes"]}
    cos = by_name["cos"]
    assert cos["SearchSchema"] == [{"AttributeName": "g", "SearchSchemaElementType": "HASH"},
                                   {"AttributeName": "f", "SearchSchemaElementType": "INLINE_FILTER"}]
    assert cos["VectorAttribute"] == {"AttributeName": "emb"} and cos["Dimensions"] == 4
    assert cos["DistanceFunction"] == "COSINE" and cos["IndexStatus"] == "ACTIVE" and "Backfilling" not in cos
    assert cos["IndexArn"] == f"{described['TableArn']}/index/cos"
    assert cos["ItemCount"] == 0 and cos["IndexSizeBytes"] == 0
    assert by_name["euc"]["Projection"] == {"ProjectionType": "KEYS_ONLY"} and "SearchSchema" not in by_name["euc"]
    assert by_name["euc"]["DistanceFunction"] == "EUCLIDEAN" and by_name["euc"]["Dimensions"] == 8
    assert by_name["dot"]["Projection"] == {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["a", "z"]}
    assert by_name["dot"]["DistanceFunction"] == "DOT_PRODUCT"


def test_keys_only_results_hold_the_keys_schema_and_vector(ddb) -> None:  # type: ignore[no-untyped-def]
    table = make_table(ddb, [vector_index(dims=2, schema=[("f", "INLINE_FILTER")],
                                          projection={"ProjectionType": "KEYS_ONLY"})], {"f": "S"})
    ddb.put_item(TableName=table, Item={"pk": {"S": "a"}, "f": {"S": "x"}, "extra": {"S": "y"},
                                        "emb": vec([1.0, 2.0])})
    assert search(ddb, table, [1, 2])["SearchResults"][0]["Item"] == {
        "pk": {"S": "a"}, "f": {"S": "x"}, "emb": {"L": [{"N": "1"}, {"N": "2"}]}}
    code, message = error_of(ddb.search_vectors, TableName=table, IndexName="byVec", TopK=1,
                             SearchVector=[{"N": "1"}, {"N": "2"}], ProjectionExpression="extra")
    assert code == "ValidationException" and "does not project [extra]" in message


@pytest.mark.parametrize(("indexes", "definitions", "extra", "expected"), [
    ([vector_index(schema=[("g", "HASH")])], {}, {},
     "One element in SearchSchema is not defined in attribute definitions"),
    ([vector_index()], {}, {"BillingMode": "PROVISIONED",
                            "ProvisionedThroughput": {"ReadCapacityUnits": 1, "WriteCapacityUnits": 1}},
     "supported only on tables with BillingMode PAY_PER_REQUEST"),
    ([vector_index(dims=4097)], {}, {}, "exceeds the maximum of 4096"),
    ([vector_index(schema=[("g", "HASH"), ("h", "HASH")])], {"g": "S", "h": "S"}, {}, "more than one HASH"),
    ([vector_index(schema=[("g", "HASH"), ("g", "INLINE_FILTER")])], {"g": "S"}, {}, "Duplicate attribute"),
    ([vector_index("aaa"), vector_index("aaa")], {}, {}, "Duplicate index name: aaa"),
    ([vector_index("aaa", dims=3), vector_index("bbb", dims=4)], {}, {}, "must all use the same number of dimensions"),
    ([vector_index(f"idx{n}", attribute=f"v{n}") for n in range(6)], {}, {}, "VectorIndex count exceeds"),
    ([vector_index(attribute="pk")], {}, {}, "cannot be a key attribute"),
    ([], {}, {}, "List of VectorIndexes is empty"),
    ([vector_index(projection={"ProjectionType": "INCLUDE", "NonKeyAttributes": [f"a{n}" for n in range(20)]},
                   attribute=f"v{m}", name=f"idx{m}") for m in range(5)], {}, {}, "exceeds limit of 100"),
])
def test_create_table_refusals(ddb, indexes, definitions, extra, expected: str) -> None:  # type: ignore[no-untyped-def]
    code, message = create(ddb, indexes, definitions, **extra)
    assert code == "ValidationException" and expected in message


def test_create_table_shape_refusals(server) -> None:  # type: ignore[no-untyped-def]
    """Dimensions below 1 and an unknown distance function are the request shape's violations (sent past boto3's
    own checks of the same constraints)."""
    unchecked = Config(parameter_validation=False, retries={"max_attempts": 0})
    ddb = boto3.client("dynamodb", endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id="x",
                       aws_secret_access_key="x", config=unchecked)
    assert create(ddb, [vector_index(dims=0)])[1] == (
        "1 validation error detected: Value '0' at 'vectorIndexes.1.member.dimensions' failed to satisfy "
        "constraint: Member must have value greater than or equal to 1")
    assert "Member must satisfy enum value set" in create(ddb, [vector_index(distance="MANHATTAN")])[1]
    defined_unused = create(ddb, [vector_index()], {"g": "S"})
    assert "Number of attributes in KeySchema does not exactly match" in defined_unused[1]


def wait_vector_active(ddb, table: str, name: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for description in ddb.describe_table(TableName=table)["Table"].get("VectorIndexes", []):
            if description["IndexName"] == name and description["IndexStatus"] == "ACTIVE":
                return description  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError("vector index never became ACTIVE")


def test_online_creation_on_a_populated_table_then_deletion(ddb) -> None:  # type: ignore[no-untyped-def]
    """UpdateTable adds a vector index CREATING (Backfilling) over 600 existing items, which becomes ACTIVE with
    every item indexed (results equal the reference); deleting it answers DELETING and drops it."""
    rng = random.Random(7)
    table = unique_name("vec")
    ddb.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
    stored = {f"k{n:04d}": [rng.uniform(-1, 1) for _ in range(6)] for n in range(600)}
    keys = list(stored)
    for start in range(0, len(keys), 25):
        ddb.batch_write_item(RequestItems={table: [
            {"PutRequest": {"Item": {"pk": {"S": key}, "g": {"S": "a" if n % 2 else "b"}, "emb": vec(stored[key])}}}
            for n, key in enumerate(keys[start:start + 25], start)]})
    answer = ddb.update_table(TableName=table, AttributeDefinitions=[{"AttributeName": "g", "AttributeType": "S"}],
                              VectorIndexUpdates=[{"Create": vector_index(dims=6, distance="EUCLIDEAN",
                                                                          schema=[("g", "HASH")])}])
    created = answer["TableDescription"]["VectorIndexes"][0]
    assert created["IndexStatus"] in ("CREATING", "ACTIVE")
    if created["IndexStatus"] == "CREATING":
        assert created["Backfilling"] is True
    assert {d["AttributeName"] for d in answer["TableDescription"]["AttributeDefinitions"]} == {"pk", "g"}
    described = wait_vector_active(ddb, table, "byVec")
    assert described["ItemCount"] == 600 and "Backfilling" not in described
    query = [rng.uniform(-1, 1) for _ in range(6)]
    in_a = {key: stored[key] for n, key in enumerate(keys) if n % 2}
    result = search(ddb, table, query, k=10, SearchConditionExpression="g = :g",
                    ExpressionAttributeValues={":g": {"S": "a"}})
    assert keys_of(result) == [key for key, _ in reference_scores("EUCLIDEAN", in_a, query)[:10]]
    deleted = ddb.update_table(TableName=table, VectorIndexUpdates=[{"Delete": {"IndexName": "byVec"}}])
    assert [(d["IndexName"], d["IndexStatus"]) for d in deleted["TableDescription"]["VectorIndexes"]] == [
        ("byVec", "DELETING")]
    after = ddb.describe_table(TableName=table)["Table"]
    assert "VectorIndexes" not in after and [d["AttributeName"] for d in after["AttributeDefinitions"]] == ["pk"]
    assert error_of(ddb.search_vectors, TableName=table, IndexName="byVec", TopK=1,
                    SearchVector=[{"N": "0"}] * 6, SearchConditionExpression="g = :g",
                    ExpressionAttributeValues={":g": {"S": "a"}})[1] == (
        "The table does not have the specified index: byVec")


def test_update_table_refusals(ddb) -> None:  # type: ignore[no-untyped-def]
    table = make_table(ddb, [vector_index()])
    two = [{"Create": vector_index("xyz", attribute="v2")}, {"Delete": {"IndexName": "byVec"}}]
    assert "Only one vector index" in error_of(ddb.update_table, TableName=table, VectorIndexUpdates=two)[1]
    assert "already exists" in error_of(ddb.update_table, TableName=table,
                                        VectorIndexUpdates=[{"Create": vector_index()}])[1]
    assert error_of(ddb.update_table, TableName=table, VectorIndexUpdates=[{"Delete": {"IndexName": "nope"}}])[0] == (
        "ResourceNotFoundException")
    assert "must be the only operation" in error_of(ddb.update_table, TableName=table, DeletionProtectionEnabled=True,
                                                    VectorIndexUpdates=[{"Delete": {"IndexName": "byVec"}}])[1]
    assert "same number of dimensions" in error_of(
        ddb.update_table, TableName=table, VectorIndexUpdates=[{"Create": vector_index("other", dims=5)}])[1]
    provisioned = unique_name("vec")
    ddb.create_table(TableName=provisioned, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1})
    assert "PAY_PER_REQUEST" in error_of(ddb.update_table, TableName=provisioned,
                                         VectorIndexUpdates=[{"Create": vector_index()}])[1]


def test_a_server_start_does_not_load_numpy() -> None:
    """numpy (about 55 ms to import) is loaded by the first vector search, not by every server start."""
    code = ("import sys; from openddb import cli; from openddb.api import dispatch; dispatch._implemented(); "
            "print('numpy' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


@pytest.fixture
def slow_backfill(monkeypatch) -> Iterator[ServerProcess]:  # type: ignore[no-untyped-def]
    """A server of its own whose backfills pause 0.3 s between chunks of 256 items."""
    monkeypatch.setenv("OPENDDB_BACKFILL_PAUSE", "0.3")
    process = ServerProcess(None)
    try:
        yield process
    finally:
        process.finish()


def test_writes_racing_the_backfill_are_indexed_once(slow_backfill: ServerProcess) -> None:
    """While the index is CREATING (Backfilling) a search is refused ("Cannot search backfilling vector index");
    items written, changed and deleted meanwhile are in the ACTIVE index exactly as they stand."""
    ddb = make_client(slow_backfill.endpoint)
    rng = random.Random(11)
    table = unique_name("vec")
    ddb.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
    stored = {f"k{n:04d}": [rng.uniform(-1, 1) for _ in range(4)] for n in range(1000)}
    keys = list(stored)
    for start in range(0, len(keys), 25):
        ddb.batch_write_item(RequestItems={table: [{"PutRequest": {"Item": {"pk": {"S": k}, "emb": vec(stored[k])}}}
                                                   for k in keys[start:start + 25]]})
    answer = ddb.update_table(TableName=table, VectorIndexUpdates=[{"Create": vector_index(distance="DOT_PRODUCT")}])
    assert answer["TableDescription"]["VectorIndexes"][0]["IndexStatus"] == "CREATING"
    assert ddb.describe_table(TableName=table)["Table"]["VectorIndexes"][0]["Backfilling"] is True
    assert error_of(ddb.search_vectors, TableName=table, IndexName="byVec", TopK=1,
                    SearchVector=[{"N": "1"}] * 4) == ("ValidationException",
                                                      "Cannot search backfilling vector index: byVec")
    for key in keys[::7]:  # changed, removed and added while the backfill runs
        stored[key] = [rng.uniform(-1, 1) for _ in range(4)]
        ddb.put_item(TableName=table, Item={"pk": {"S": key}, "emb": vec(stored[key])})
    for key in keys[3::11]:
        del stored[key]
        ddb.delete_item(TableName=table, Key={"pk": {"S": key}})
    for n in range(1000, 1050):
        stored[f"k{n:04d}"] = [rng.uniform(-1, 1) for _ in range(4)]
        ddb.put_item(TableName=table, Item={"pk": {"S": f"k{n:04d}"}, "emb": vec(stored[f"k{n:04d}"])})
    assert wait_vector_active(ddb, table, "byVec")["ItemCount"] == len(stored)
    query = [rng.uniform(-1, 1) for _ in range(4)]
    assert keys_of(search(ddb, table, query, k=25)) == [k for k, _ in reference_scores("DOT_PRODUCT", stored,
                                                                                       query)[:25]]


def test_one_online_creation_at_a_time_and_the_one_backfilling_may_be_deleted(slow_backfill: ServerProcess) -> None:
    """While a vector index backfills, another creation is refused (LimitExceededException, the GSIs' rule), and the
    index being created may be deleted: it is gone, and its backfill stops."""
    ddb = make_client(slow_backfill.endpoint)
    table = unique_name("vec")
    ddb.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
    for start in range(0, 1000, 25):
        ddb.batch_write_item(RequestItems={table: [
            {"PutRequest": {"Item": {"pk": {"S": f"k{n}"}, "emb": vec([1.0, float(n), 0.0, 0.0])}}}
            for n in range(start, start + 25)]})
    ddb.update_table(TableName=table, VectorIndexUpdates=[{"Create": vector_index()}])
    assert error_of(ddb.update_table, TableName=table,
                    VectorIndexUpdates=[{"Create": vector_index("second", attribute="other")}])[0] == (
        "LimitExceededException")
    answer = ddb.update_table(TableName=table, VectorIndexUpdates=[{"Delete": {"IndexName": "byVec"}}])
    assert [d["IndexStatus"] for d in answer["TableDescription"]["VectorIndexes"]] == ["DELETING"]
    time.sleep(1.0)  # (the backfill's next chunks find the index gone and stop)
    assert "VectorIndexes" not in ddb.describe_table(TableName=table)["Table"]
    ddb.update_table(TableName=table, VectorIndexUpdates=[{"Create": vector_index("again")}])
    assert wait_vector_active(ddb, table, "again")["ItemCount"] == 1000
