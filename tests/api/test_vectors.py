"""Vector indexes and SearchVectors through boto3: definitions and their refusals, writes checked against the
index, every distance function against a brute-force reference computed here, search conditions, projections and
capacity (issue 31)."""

from __future__ import annotations

import json
import math
import random
import struct
import time
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.api.test_backups import wait_available
from tests.api.test_imports import start_import, wait_import
from tests.conftest import unique_name

DISTANCES = ("COSINE", "EUCLIDEAN", "DOT_PRODUCT")


def vec(values: list[float]) -> dict[str, Any]:
    return {"L": [{"N": repr(x)} for x in values]}


def query_vector(values: list[float]) -> list[dict[str, str]]:
    return [{"N": repr(x)} for x in values]


def f32(values: list[float]) -> list[float]:
    """The values as the index stores them: rounded to float32."""
    return list(struct.unpack(f"<{len(values)}f", struct.pack(f"<{len(values)}f", *values)))


def reference_scores(distance: str, stored: dict[str, list[float]], query: list[float]) -> list[tuple[str, float]]:
    """Every item's score computed in float64 from float32 values, best first (the documented score meanings)."""
    q = f32(query)
    scores = []
    for key, values in stored.items():
        x = f32(values)
        dot = sum(a * b for a, b in zip(x, q))
        if distance == "DOT_PRODUCT":
            score = dot
        elif distance == "EUCLIDEAN":
            score = math.sqrt(sum((a - b) ** 2 for a, b in zip(x, q)))
        else:
            score = 1 - dot / (math.sqrt(sum(a * a for a in x)) * math.sqrt(sum(b * b for b in q)))
        scores.append((key, score))
    return sorted(scores, key=lambda pair: -pair[1] if distance == "DOT_PRODUCT" else pair[1])


def vector_index(name: str = "byVec", *, attribute: str = "emb", dims: int = 4, distance: str = "COSINE",
                 schema: list[tuple[str, str]] | None = None,
                 projection: dict[str, Any] | None = None) -> dict[str, Any]:
    index: dict[str, Any] = {"IndexName": name, "VectorAttribute": {"AttributeName": attribute},
                             "Dimensions": dims, "DistanceFunction": distance,
                             "Projection": projection or {"ProjectionType": "ALL"}}
    if schema:
        index["SearchSchema"] = [{"AttributeName": a, "SearchSchemaElementType": t} for a, t in schema]
    return index


def make_table(ddb, indexes: list[dict[str, Any]], definitions: dict[str, str] | None = None,  # type: ignore[no-untyped-def]
               **extra: Any) -> str:
    name = unique_name("vec")
    defs = [{"AttributeName": "pk", "AttributeType": "S"}] + [
        {"AttributeName": a, "AttributeType": t} for a, t in (definitions or {}).items()]
    ddb.create_table(TableName=name, AttributeDefinitions=defs,
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     **({"BillingMode": "PAY_PER_REQUEST"} | extra), VectorIndexes=indexes)
    return name


def error_of(call, **kwargs: Any) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(ClientError) as raised:
        call(**kwargs)
    return raised.value.response["Error"]["Code"], raised.value.response["Error"]["Message"]


def search(ddb, table: str, values: list[float], k: int = 10, index: str = "byVec", **extra: Any):  # type: ignore[no-untyped-def]
    return ddb.search_vectors(TableName=table, IndexName=index, SearchVector=query_vector(values), TopK=k, **extra)


@pytest.mark.parametrize("distance", DISTANCES)
def test_results_equal_a_brute_force_reference(ddb, distance: str) -> None:  # type: ignore[no-untyped-def]
    """Exact search: the TopK items and their scores are the reference's, best first, for every distance."""
    rng = random.Random(31)
    table = make_table(ddb, [vector_index(dims=8, distance=distance)])
    stored = {f"k{n:03d}": [rng.uniform(-1, 1) for _ in range(8)] for n in range(150)}
    for key, values in stored.items():
        ddb.put_item(TableName=table, Item={"pk": {"S": key}, "emb": vec(values)})
    for _ in range(5):
        query = [rng.uniform(-1, 1) for _ in range(8)]
        answer = search(ddb, table, query, k=7)["SearchResults"]
        expected = reference_scores(distance, stored, query)[:7]
        assert [r["Item"]["pk"]["S"] for r in answer] == [key for key, _ in expected]
        for result, (_key, score) in zip(answer, expected):
            assert result["Score"] == pytest.approx(score, rel=1e-6, abs=1e-9)


@pytest.fixture(scope="module")
def products(ddb) -> str:  # type: ignore[no-untyped-def]
    """A table whose index is partitioned by category and filters on brand and year, COSINE over 3 dimensions."""
    table = make_table(ddb, [vector_index(dims=3, schema=[("category", "HASH"), ("brand", "INLINE_FILTER"),
                                                          ("year", "INLINE_FILTER")],
                                          projection={"ProjectionType": "INCLUDE", "NonKeyAttributes": ["title"]})],
                       {"category": "S", "brand": "S", "year": "N"})
    rows = [("p1", "shoes", "acme", 2024, [1, 0, 0]), ("p2", "shoes", "acme", 2025, [0.9, 0.1, 0]),
            ("p3", "shoes", "zeta", 2025, [0, 1, 0]), ("p4", "hats", "acme", 2025, [1, 0, 0]),
            ("p5", "shoes", "acme", 2025, [-1, 0, 0])]
    for pk, category, brand, year, values in rows:
        ddb.put_item(TableName=table, Item={"pk": {"S": pk}, "category": {"S": category}, "brand": {"S": brand},
                                            "year": {"N": str(year)}, "title": {"S": f"title {pk}"},
                                            "price": {"N": "10"}, "emb": vec([float(x) for x in values])})
    ddb.put_item(TableName=table, Item={"pk": {"S": "p6"}, "emb": vec([1.0, 0.0, 0.0])})  # no HASH: not indexed
    return table


def keys_of(answer: dict[str, Any]) -> list[str]:
    return [result["Item"]["pk"]["S"] for result in answer["SearchResults"]]


def test_hash_partitions_the_search_and_filters_narrow_it(ddb, products: str) -> None:  # type: ignore[no-untyped-def]
    """Only the HASH value's items are searched; INLINE_FILTER equalities (names through #placeholders) narrow them."""
    shoes = search(ddb, products, [1, 0, 0], SearchConditionExpression="category = :c",
                   ExpressionAttributeValues={":c": {"S": "shoes"}})
    assert keys_of(shoes) == ["p1", "p2", "p3", "p5"]
    assert shoes["SearchResults"][0]["Score"] == pytest.approx(0.0, abs=1e-7)
    assert shoes["SearchResults"][-1]["Score"] == pytest.approx(2.0)  # COSINE: opposite vectors score 2
    filtered = search(ddb, products, [1, 0, 0], SearchConditionExpression="(category = :c AND #b = :b) AND #y = :y",
                      ExpressionAttributeNames={"#b": "brand", "#y": "year"},
                      ExpressionAttributeValues={":c": {"S": "shoes"}, ":b": {"S": "acme"}, ":y": {"N": "2025"}})
    assert keys_of(filtered) == ["p2", "p5"]
    assert keys_of(search(ddb, products, [1, 0, 0], k=1, SearchConditionExpression=":c = category",
                          ExpressionAttributeValues={":c": {"S": "hats"}})) == ["p4"]
    assert search(ddb, products, [1, 0, 0], SearchConditionExpression="category = :c",
                  ExpressionAttributeValues={":c": {"S": "none"}})["SearchResults"] == []


def test_results_hold_what_the_index_projects(ddb, products: str) -> None:  # type: ignore[no-untyped-def]
    """INCLUDE projects the keys, the search schema, the vector and the named attributes; a ProjectionExpression
    picks among them, and asking for another attribute is refused."""
    answer = search(ddb, products, [1, 0, 0], k=1, SearchConditionExpression="category = :c",
                    ExpressionAttributeValues={":c": {"S": "shoes"}})
    assert set(answer["SearchResults"][0]["Item"]) == {"pk", "category", "brand", "year", "title", "emb"}
    # the stored attribute, numbers normalized as DynamoDB stores them
    assert answer["SearchResults"][0]["Item"]["emb"] == {"L": [{"N": "1"}, {"N": "0"}, {"N": "0"}]}
    picked = search(ddb, products, [1, 0, 0], k=1, SearchConditionExpression="category = :c",
                    ExpressionAttributeValues={":c": {"S": "shoes"}}, ProjectionExpression="title, #p",
                    ExpressionAttributeNames={"#p": "pk"})
    assert picked["SearchResults"][0]["Item"] == {"pk": {"S": "p1"}, "title": {"S": "title p1"}}
    code, message = error_of(ddb.search_vectors, TableName=products, IndexName="byVec", TopK=1,
                             SearchVector=query_vector([1, 0, 0]), SearchConditionExpression="category = :c",
                             ExpressionAttributeValues={":c": {"S": "shoes"}}, ProjectionExpression="price")
    assert code == "ValidationException" and "does not project [price]" in message


@pytest.mark.parametrize(("condition", "values"), [
    ("category <> :c", {":c": {"S": "shoes"}}),
    ("category = :c AND brand < :b", {":c": {"S": "shoes"}, ":b": {"S": "x"}}),
    ("category = :c OR brand = :b", {":c": {"S": "shoes"}, ":b": {"S": "x"}}),
    ("begins_with(category, :c)", {":c": {"S": "sh"}}),
    ("category IN (:c, :b)", {":c": {"S": "shoes"}, ":b": {"S": "x"}}),
    ("NOT category = :c", {":c": {"S": "shoes"}}),
])
def test_only_equality_is_a_search_condition(ddb, products: str, condition: str, values: dict) -> None:  # type: ignore[no-untyped-def, type-arg]
    """"Invalid comparator used in SearchConditionExpression" for anything but = joined by AND (Troubleshooting)."""
    assert error_of(ddb.search_vectors, TableName=products, IndexName="byVec", TopK=1,
                    SearchVector=query_vector([1, 0, 0]), SearchConditionExpression=condition,
                    ExpressionAttributeValues=values) == (
        "ValidationException", "Invalid comparator used in SearchConditionExpression")


def test_search_refusals(ddb, products: str) -> None:  # type: ignore[no-untyped-def]
    """The documented refusals (HASH value missing, TopK range, unknown index) and the others' best guesses."""
    base = {"TableName": products, "IndexName": "byVec", "SearchVector": query_vector([1, 0, 0]), "TopK": 3}
    cond = {"SearchConditionExpression": "category = :c", "ExpressionAttributeValues": {":c": {"S": "shoes"}}}
    assert error_of(ddb.search_vectors, **base) == (
        "ValidationException", "SearchConditionExpression must be provided when SearchSchema has a HASH key")
    assert error_of(ddb.search_vectors, **base, SearchConditionExpression="brand = :b",
                    ExpressionAttributeValues={":b": {"S": "acme"}})[1] == (
        "SearchConditionExpression must be provided when SearchSchema has a HASH key")
    assert error_of(ddb.search_vectors, **{**base, "TopK": 101}, **cond) == (
        "ValidationException", "Provided TopK value is out of valid range")
    assert error_of(ddb.search_vectors, **{**base, "IndexName": "nope"}, **cond) == (
        "ValidationException", "The table does not have the specified index: nope")
    code, message = error_of(ddb.search_vectors, **{**base, "SearchVector": query_vector([1, 0])}, **cond)
    assert code == "ValidationException" and "dimensions" in message
    code, message = error_of(ddb.search_vectors, **{**base, "SearchVector": [{"S": "1"}] * 3}, **cond)
    assert code == "ValidationException" and "element at index 0" in message
    code, message = error_of(ddb.search_vectors, **base, SearchConditionExpression="category = :c AND price = :p",
                             ExpressionAttributeValues={":c": {"S": "shoes"}, ":p": {"N": "10"}})
    assert code == "ValidationException" and "price is not in the SearchSchema" in message
    code, message = error_of(ddb.search_vectors, **base, SearchConditionExpression="category = :c",
                             ExpressionAttributeValues={":c": {"N": "1"}})
    assert message.endswith("Condition parameter type does not match schema type")
    assert error_of(ddb.search_vectors, **base, **cond, ExpressionAttributeNames={"#x": "x"})[1] == (
        "Value provided in ExpressionAttributeNames unused in expressions: keys: {#x}")
    assert error_of(ddb.search_vectors, **{**base, "TableName": "missing-table"}, **cond)[0] == (
        "ResourceNotFoundException")


def test_consumed_capacity_is_vector_search_bytes(ddb, products: str) -> None:  # type: ignore[no-untyped-def]
    """ReturnConsumedCapacity TOTAL or INDEXES answers VectorSearchRequestBytes (NONE: nothing)."""
    cond = {"SearchConditionExpression": "category = :c", "ExpressionAttributeValues": {":c": {"S": "shoes"}}}
    for mode in ("TOTAL", "INDEXES"):
        consumed = search(ddb, products, [1, 0, 0], ReturnConsumedCapacity=mode, **cond)["ConsumedCapacity"]
        assert set(consumed) == {"VectorSearchRequestBytes"} and consumed["VectorSearchRequestBytes"] > 12
    assert "ConsumedCapacity" not in search(ddb, products, [1, 0, 0], ReturnConsumedCapacity="NONE", **cond)


@pytest.mark.parametrize(("value", "detail"), [
    ({"S": "[1, 2, 3]"}, "got S"),
    ({"NS": ["1", "2", "3"]}, "got NS"),
    ({"N": "1"}, "got N"),
    ({"L": [{"N": "1"}, {"S": "2"}, {"N": "3"}]}, "element at index 1 is S"),
    ({"L": [{"N": "1"}, {"N": "2"}]}, "expected 3 dimensions, got 2"),
    ({"L": [{"N": "1"}, {"N": "1E+39"}, {"N": "3"}]}, "element at index 1 is out of the range"),
])
def test_writes_with_an_invalid_vector_are_refused(ddb, value: dict, detail: str) -> None:  # type: ignore[no-untyped-def, type-arg]
    """A vector attribute of the wrong type, members or dimensions is refused by every write path, and nothing is
    written (the Developer Guide's "Troubleshooting vector indexes")."""
    table = make_table(ddb, [vector_index(dims=3)])
    item = {"pk": {"S": "a"}, "emb": value}
    code, message = error_of(ddb.put_item, TableName=table, Item=item)
    assert code == "ValidationException" and detail in message and "IndexName: byVec" in message
    assert error_of(ddb.update_item, TableName=table, Key={"pk": {"S": "a"}}, UpdateExpression="SET emb = :v",
                    ExpressionAttributeValues={":v": value})[0] == "ValidationException"
    assert error_of(ddb.batch_write_item, RequestItems={table: [{"PutRequest": {"Item": item}}]})[0] == (
        "ValidationException")
    assert error_of(ddb.transact_write_items, TransactItems=[{"Put": {"TableName": table, "Item": item}}])[0] == (
        "ValidationException")
    assert "Item" not in ddb.get_item(TableName=table, Key={"pk": {"S": "a"}})


def test_a_search_schema_attribute_of_another_type_is_refused(ddb, products: str) -> None:  # type: ignore[no-untyped-def]
    code, message = error_of(ddb.put_item, TableName=products, Item={"pk": {"S": "bad"}, "category": {"N": "1"}})
    assert code == "ValidationException"
    assert message.endswith("Type mismatch for Index Key category Expected: S Actual: N IndexName: byVec")


def test_the_index_follows_every_write(ddb) -> None:  # type: ignore[no-untyped-def]
    """Updates, vector removal, partition moves and deletes show in the next search; items without the vector
    (or the HASH attribute) stay out."""
    table = make_table(ddb, [vector_index(dims=2, distance="EUCLIDEAN", schema=[("g", "HASH")])], {"g": "S"})
    put = ddb.put_item
    put(TableName=table, Item={"pk": {"S": "a"}, "g": {"S": "x"}, "emb": vec([0.0, 0.0])})
    put(TableName=table, Item={"pk": {"S": "b"}, "g": {"S": "x"}, "emb": vec([3.0, 4.0])})
    put(TableName=table, Item={"pk": {"S": "c"}, "g": {"S": "x"}})

    def found(group: str) -> list[tuple[str, float]]:
        answer = search(ddb, table, [0, 0], index="byVec", SearchConditionExpression="g = :g",
                        ExpressionAttributeValues={":g": {"S": group}})
        return [(r["Item"]["pk"]["S"], r["Score"]) for r in answer["SearchResults"]]

    assert found("x") == [("a", 0.0), ("b", 5.0)]
    ddb.update_item(TableName=table, Key={"pk": {"S": "a"}}, UpdateExpression="SET emb = :v",
                    ExpressionAttributeValues={":v": vec([6.0, 8.0])})
    assert found("x") == [("b", 5.0), ("a", 10.0)]
    ddb.update_item(TableName=table, Key={"pk": {"S": "a"}}, UpdateExpression="SET g = :g",
                    ExpressionAttributeValues={":g": {"S": "y"}})
    assert found("x") == [("b", 5.0)] and found("y") == [("a", 10.0)]
    ddb.update_item(TableName=table, Key={"pk": {"S": "b"}}, UpdateExpression="REMOVE emb")
    assert found("x") == []
    ddb.delete_item(TableName=table, Key={"pk": {"S": "a"}})
    assert found("y") == []
    ddb.batch_write_item(RequestItems={table: [
        {"PutRequest": {"Item": {"pk": {"S": f"n{n}"}, "g": {"S": "x"}, "emb": vec([float(n), 0.0])}}}
        for n in range(3)]})
    assert found("x") == [("n0", 0.0), ("n1", 1.0), ("n2", 2.0)]
    description = ddb.describe_table(TableName=table)["Table"]["VectorIndexes"][0]
    assert description["ItemCount"] == 3 and description["IndexSizeBytes"] > 0


def test_vectors_read_back_as_lists_in_partiql_and_streams(ddb) -> None:  # type: ignore[no-untyped-def]
    """A vector is an ordinary List of Numbers to every other reader: GetItem, PartiQL, the stream's images."""
    table = make_table(ddb, [vector_index(dims=2)],
                       StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"})
    value = vec([0.5, -2.25])
    ddb.put_item(TableName=table, Item={"pk": {"S": "a"}, "emb": value})
    rows = ddb.execute_statement(Statement=f'SELECT emb FROM "{table}" WHERE pk = ?', Parameters=[{"S": "a"}])
    assert rows["Items"] == [{"emb": value}]
    client = boto3.client("dynamodbstreams", endpoint_url=ddb.meta.endpoint_url, region_name="us-east-1",
                          aws_access_key_id="x", aws_secret_access_key="x")
    arn = ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    shards = client.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    images = []
    for shard in shards:
        iterator = client.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                             ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        images += [r["dynamodb"]["NewImage"] for r in client.get_records(ShardIterator=iterator)["Records"]]
    assert images == [{"pk": {"S": "a"}, "emb": value}]


def test_writes_report_vector_write_bytes_under_indexes(ddb) -> None:  # type: ignore[no-untyped-def]
    """A write that changes what a vector index holds reports VectorWriteRequestBytes for it under INDEXES (apart
    from the capacity units); one that changes no projected attribute, or TOTAL, reports none."""
    table = make_table(ddb, [vector_index(dims=2, projection={"ProjectionType": "KEYS_ONLY"})])
    item = {"pk": {"S": "a"}, "emb": vec([1.0, 2.0]), "note": {"S": "x"}}
    consumed = ddb.put_item(TableName=table, Item=item, ReturnConsumedCapacity="INDEXES")["ConsumedCapacity"]
    assert consumed["CapacityUnits"] == 1.0 and consumed["Table"] == {"CapacityUnits": 1.0}
    # The item as the index holds it (KEYS_ONLY: its key and vector), sized as DynamoDB sizes items: "pk" and "a",
    # "emb" and a list (3 bytes, 1 more per element) of two one-digit numbers (2 bytes each).
    held = (2 + 1) + 3 + 3 + 2 * (1 + 2)
    assert consumed["VectorIndexes"] == {"byVec": {"VectorWriteRequestBytes": held}}
    unchanged = ddb.update_item(TableName=table, Key={"pk": {"S": "a"}}, UpdateExpression="SET note = :n",
                                ExpressionAttributeValues={":n": {"S": "y"}}, ReturnConsumedCapacity="INDEXES")
    assert "VectorIndexes" not in unchanged["ConsumedCapacity"]
    total = ddb.put_item(TableName=table, Item={**item, "emb": vec([3.0, 4.0])}, ReturnConsumedCapacity="TOTAL")
    assert total["ConsumedCapacity"] == {"TableName": table, "CapacityUnits": 1.0}
    removed = ddb.delete_item(TableName=table, Key={"pk": {"S": "a"}}, ReturnConsumedCapacity="INDEXES")
    assert removed["ConsumedCapacity"]["VectorIndexes"]["byVec"]["VectorWriteRequestBytes"] > 0


def test_query_scan_and_partiql_do_not_read_a_vector_index(ddb) -> None:  # type: ignore[no-untyped-def]
    """"Vector indexes do not support Query or Scan operations" and "are not accessible through PartiQL" (the
    Developer Guide's "Requirements and limitations"): the index is not one of the table's for them."""
    table = make_table(ddb, [vector_index(dims=2)])
    expected = ("ValidationException", "The table does not have the specified index: byVec")
    assert error_of(ddb.query, TableName=table, IndexName="byVec", KeyConditionExpression="pk = :p",
                    ExpressionAttributeValues={":p": {"S": "a"}}) == expected
    assert error_of(ddb.scan, TableName=table, IndexName="byVec") == expected
    # (PartiQL's own words for an index the table lacks name none: see partiql/planner.py)
    assert error_of(ddb.execute_statement, Statement=f'SELECT * FROM "{table}"."byVec"') == (
        "ValidationException", "The table does not have the specified index")


def test_filtered_results_equal_the_reference_over_the_matching_items(ddb) -> None:  # type: ignore[no-untyped-def]
    """With a HASH value and an INLINE_FILTER equality, the TopK are the reference's over the items they leave."""
    rng = random.Random(5)
    table = make_table(ddb, [vector_index(dims=5, distance="EUCLIDEAN", schema=[("g", "HASH"),
                                                                                ("f", "INLINE_FILTER")])],
                       {"g": "S", "f": "N"})
    items = {f"k{n:03d}": (f"g{n % 2}", n % 3, [rng.uniform(-1, 1) for _ in range(5)]) for n in range(240)}
    for start in range(0, 240, 25):
        ddb.batch_write_item(RequestItems={table: [
            {"PutRequest": {"Item": {"pk": {"S": key}, "g": {"S": g}, "f": {"N": str(f)}, "emb": vec(values)}}}
            for key, (g, f, values) in list(items.items())[start:start + 25]]})
    query = [rng.uniform(-1, 1) for _ in range(5)]
    answer = search(ddb, table, query, k=4, SearchConditionExpression="g = :g AND f = :f",
                    ExpressionAttributeValues={":g": {"S": "g1"}, ":f": {"N": "2"}})
    matching = {key: values for key, (g, f, values) in items.items() if g == "g1" and f == 2}
    expected = reference_scores("EUCLIDEAN", matching, query)[:4]
    assert keys_of(answer) == [key for key, _ in expected]
    assert [r["Score"] for r in answer["SearchResults"]] == pytest.approx([score for _, score in expected])


def test_a_restored_table_searches_as_its_source(ddb) -> None:  # type: ignore[no-untyped-def]
    """A table restored from a backup (or to a point in time) has its vector indexes refilled from the restored
    items: CREATING while they fill, then the same answers as the source."""
    source = make_table(ddb, [vector_index()])
    for n in range(12):
        ddb.put_item(TableName=source, Item={"pk": {"S": f"k{n}"}, "emb": vec([1.0, float(n), 0.5, -0.25 * n])})
    expected = search(ddb, source, [1.0, 2.0, 0.0, 0.0], k=5)["SearchResults"]
    backup = ddb.create_backup(TableName=source, BackupName="vectors-backup")["BackupDetails"]["BackupArn"]
    wait_available(ddb, backup)  # (made in the background: restorable once AVAILABLE)
    restored = [unique_name("vec-restored"), unique_name("vec-pitr")]
    ddb.restore_table_from_backup(TargetTableName=restored[0], BackupArn=backup)
    ddb.update_continuous_backups(TableName=source,
                                  PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    ddb.restore_table_to_point_in_time(SourceTableName=source, TargetTableName=restored[1],
                                       UseLatestRestorableTime=True)
    for name in restored:
        deadline = time.monotonic() + 30
        while True:
            table = ddb.describe_table(TableName=name)["Table"]
            if table["TableStatus"] == "ACTIVE" and table["VectorIndexes"][0]["IndexStatus"] == "ACTIVE":
                break
            assert time.monotonic() < deadline, table
            time.sleep(0.05)
        assert search(ddb, name, [1.0, 2.0, 0.0, 0.0], k=5)["SearchResults"] == expected


def test_a_restore_keeps_the_vector_indexes_its_override_names(ddb) -> None:  # type: ignore[no-untyped-def]
    """VectorIndexOverride keeps the named vector indexes of the source (with their search schema's attribute
    definitions) and leaves out the others; a name the source lacks is refused."""
    source = make_table(ddb, [vector_index("byVec", schema=[("category", "HASH")]), vector_index("other")],
                        {"category": "S"})
    ddb.put_item(TableName=source, Item={"pk": {"S": "a"}, "category": {"S": "c"}, "emb": vec([1.0, 0.0, 0.0, 0.0])})
    backup = ddb.create_backup(TableName=source, BackupName="vector-override")["BackupDetails"]["BackupArn"]
    wait_available(ddb, backup)  # (made in the background: restorable once AVAILABLE)
    with pytest.raises(ClientError) as refused:
        ddb.restore_table_from_backup(TargetTableName=unique_name("vec-none"), BackupArn=backup,
                                      VectorIndexOverride=[vector_index("missing")])
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    target = unique_name("vec-kept")
    ddb.restore_table_from_backup(TargetTableName=target, BackupArn=backup,
                                  VectorIndexOverride=[vector_index("byVec", schema=[("category", "HASH")])])
    deadline = time.monotonic() + 30
    while (table := ddb.describe_table(TableName=target)["Table"])["TableStatus"] != "ACTIVE" or \
            table["VectorIndexes"][0]["IndexStatus"] != "ACTIVE":
        assert time.monotonic() < deadline, table
        time.sleep(0.05)
    assert [index["IndexName"] for index in table["VectorIndexes"]] == ["byVec"]
    assert {"AttributeName": "category", "AttributeType": "S"} in table["AttributeDefinitions"]
    found = search(ddb, target, [1.0, 0.0, 0.0, 0.0], k=1, SearchConditionExpression="category = :c",
                   ExpressionAttributeValues={":c": {"S": "c"}})["SearchResults"]
    assert [hit["Item"]["pk"] for hit in found] == [{"S": "a"}]


def test_an_import_builds_the_vector_indexes_its_table_creation_parameters_name(ddb, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """ImportTable's TableCreationParameters take VectorIndexes (botocore's model): the imported table's index
    holds the imported items and answers as the reference; an item whose vector breaks the index's rules is one
    error of the import, as any item PutItem would refuse."""
    rng = random.Random(3)
    stored = {f"k{n}": [rng.uniform(-1, 1) for _ in range(4)] for n in range(30)}
    lines = [{"Item": {"pk": {"S": key}, "category": {"S": "c"}, "emb": vec(values)}} for key, values in stored.items()]
    lines.append({"Item": {"pk": {"S": "wrong"}, "category": {"S": "c"}, "emb": vec([1.0, 2.0])}})
    (tmp_path / "vectors.json").write_bytes(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    target = unique_name("vec-imported")
    parameters = {"AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                                           {"AttributeName": "category", "AttributeType": "S"}],
                  "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}], "BillingMode": "PAY_PER_REQUEST",
                  "VectorIndexes": [vector_index(distance="DOT_PRODUCT", schema=[("category", "HASH")])]}
    done = wait_import(ddb, start_import(ddb, tmp_path, "vectors", target, parameters=parameters)["ImportArn"])
    assert (done["ImportedItemCount"], done["ErrorCount"]) == (30, 1)
    table = ddb.describe_table(TableName=target)["Table"]
    indexes = [(index["IndexName"], index["IndexStatus"], index["ItemCount"]) for index in table["VectorIndexes"]]
    assert indexes == [("byVec", "ACTIVE", 30)]
    query = [0.3, -0.2, 0.9, 0.1]
    answer = search(ddb, target, query, k=5, SearchConditionExpression="category = :c",
                    ExpressionAttributeValues={":c": {"S": "c"}})["SearchResults"]
    expected = reference_scores("DOT_PRODUCT", stored, query)[:5]
    assert [r["Item"]["pk"]["S"] for r in answer] == [key for key, _ in expected]
