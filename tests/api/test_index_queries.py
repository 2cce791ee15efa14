"""Query and Scan on secondary indexes through boto3: key conditions, projections, paging, capacity."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tests.api.test_indexes import INVALID, defs, error_of, gsi, schema
from tests.conftest import unique_name


@pytest.fixture(scope="module")
def shop(ddb) -> str:  # type: ignore[no-untyped-def]
    """Orders by customer (pk) and id (sk); a KEYS_ONLY GSI, an INCLUDE GSI and an INCLUDE LSI."""
    name = unique_name("shop")
    ddb.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=defs(pk="S", sk="S", status="S", amt="N", placed="S"),
        KeySchema=schema("pk", "sk"),
        GlobalSecondaryIndexes=[
            gsi("byStatus", "status", "amt", projection={"ProjectionType": "KEYS_ONLY"}),
            gsi("byStatusInc", "status", "amt", projection={"ProjectionType": "INCLUDE",
                                                              "NonKeyAttributes": ["note"]}),
        ],
        LocalSecondaryIndexes=[{"IndexName": "byPlaced", "KeySchema": schema("pk", "placed"),
                                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["note"]}}])
    for n in range(10):
        ddb.put_item(TableName=name, Item={
            "pk": {"S": "c1" if n < 6 else "c2"}, "sk": {"S": f"o{n}"}, "status": {"S": "open" if n % 2 else "done"},
            "amt": {"N": str(n * 10)}, "placed": {"S": f"2024-01-{10 - n:02d}"}, "note": {"S": f"n{n}"},
            "big": {"S": "x" * 100}})
    return name


def values(**kwargs: str) -> dict:  # type: ignore[type-arg]
    return {f":{k}": ({"N": v[1:]} if v.startswith("#") else {"S": v}) for k, v in kwargs.items()}


def test_query_gsi_keys_only(ddb, shop):
    """A KEYS_ONLY GSI returns table and index keys only, in index sort order, both directions."""
    result = ddb.query(TableName=shop, IndexName="byStatus", KeyConditionExpression="#s = :s AND amt > :t",
                       ExpressionAttributeNames={"#s": "status"}, ExpressionAttributeValues=values(s="open", t="#20"))
    assert [i["amt"]["N"] for i in result["Items"]] == ["30", "50", "70", "90"]
    assert set(result["Items"][0]) == {"pk", "sk", "status", "amt"}
    backwards = ddb.query(TableName=shop, IndexName="byStatus", KeyConditionExpression="#s = :s",
                          ExpressionAttributeNames={"#s": "status"}, ExpressionAttributeValues=values(s="open"),
                          ScanIndexForward=False)
    assert [i["amt"]["N"] for i in backwards["Items"]] == ["90", "70", "50", "30", "10"]


def test_include_projection_and_projection_expression(ddb, shop):
    """INCLUDE returns the keys plus its attributes; a ProjectionExpression on a GSI may name only those."""
    result = ddb.query(TableName=shop, IndexName="byStatusInc", KeyConditionExpression="#s = :s AND amt = :t",
                       ExpressionAttributeNames={"#s": "status"}, ExpressionAttributeValues=values(s="done", t="#40"))
    assert result["Items"] == [{"pk": {"S": "c1"}, "sk": {"S": "o4"}, "status": {"S": "done"}, "amt": {"N": "40"},
                                "note": {"S": "n4"}}]
    projected = ddb.query(TableName=shop, IndexName="byStatusInc", KeyConditionExpression="#s = :s AND amt = :t",
                          ExpressionAttributeNames={"#s": "status"}, ProjectionExpression="note, pk",
                          ExpressionAttributeValues=values(s="done", t="#40"))
    assert projected["Items"] == [{"note": {"S": "n4"}, "pk": {"S": "c1"}}]
    expression = {"KeyConditionExpression": "#s = :s", "ExpressionAttributeNames": {"#s": "status"},
                  "ExpressionAttributeValues": values(s="done"), "ProjectionExpression": "note, big.x, zz9"}
    legacy = {"KeyConditions": {"status": {"ComparisonOperator": "EQ", "AttributeValueList": [{"S": "done"}]}},
              "AttributesToGet": ["note", "big", "zz9"]}
    for request in (expression, legacy):
        with pytest.raises(ClientError) as excinfo:
            ddb.query(TableName=shop, IndexName="byStatusInc", **request)
        assert error_of(excinfo) == ("ValidationException",
                                     INVALID + "Global secondary index byStatusInc does not project [big, zz9]")
    with pytest.raises(ClientError) as excinfo:
        ddb.scan(TableName=shop, IndexName="byStatusInc", ProjectionExpression="big")
    assert error_of(excinfo) == ("ValidationException",
                                 INVALID + "Global secondary index byStatusInc does not project [big]")


def test_gsi_refusals(ddb, shop):
    """ConsistentRead and Select ALL_ATTRIBUTES on a partial GSI, and unknown indexes, are refused."""
    base = {"TableName": shop, "KeyConditionExpression": "#s = :s", "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": values(s="open")}
    with pytest.raises(ClientError) as excinfo:
        ddb.query(IndexName="byStatus", ConsistentRead=True, **base)
    assert error_of(excinfo) == ("ValidationException", "Consistent reads are not supported on global secondary "
                                 "indexes")
    with pytest.raises(ClientError) as excinfo:
        ddb.query(IndexName="byStatus", Select="ALL_ATTRIBUTES", **base)
    assert error_of(excinfo) == ("ValidationException", INVALID + "Select type ALL_ATTRIBUTES is not supported for "
                                 "global secondary index byStatus because its projection type is not ALL")
    with pytest.raises(ClientError) as excinfo:
        ddb.query(IndexName="nope", **base)
    assert error_of(excinfo) == ("ValidationException", "The table does not have the specified index: nope")
    with pytest.raises(ClientError) as excinfo:
        ddb.scan(TableName=shop, IndexName="byStatus", ConsistentRead=True)
    assert error_of(excinfo)[1] == "Consistent reads are not supported on global secondary indexes"


def test_second_condition_beside_a_partition_only_index_key(ddb):
    """A GSI keyed on its partition key alone, queried with a second condition on another attribute (the table's
    sort key): 'Query key condition not supported', as DynamoDB answered (moto issue 8655, 2025)."""
    name = unique_name("threads")
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=defs(ForumName="S", Subject="S", Author="S"),
                     KeySchema=schema("ForumName", "Subject"),
                     GlobalSecondaryIndexes=[gsi("Author", "Author", ranges=0)])
    with pytest.raises(ClientError) as excinfo:
        ddb.query(TableName=name, IndexName="Author", KeyConditionExpression="Author = :a AND Subject = :s",
                  ExpressionAttributeValues=values(a="x", s="y"))
    assert error_of(excinfo) == ("ValidationException", "Query key condition not supported")


def test_gsi_query_filter_on_unprojected_attributes_refused(ddb, shop):
    """A GSI cannot fetch from the table, so its Query may filter only on what it projects (as recorded from
    DynamoDB's answers); projected attributes and the table's key filter as usual."""
    base = {"TableName": shop, "KeyConditionExpression": "#s = :s", "ExpressionAttributeValues": values(s="open"),
            "ExpressionAttributeNames": {"#s": "status"}}
    for index, condition, missing in (("byStatus", "note = :n", "note"), ("byStatusInc", "big = :n OR sk = :n", "big"),
                                      ("byStatus", "zz = :n AND big = :n", "big, zz")):
        with pytest.raises(ClientError) as excinfo:
            ddb.query(IndexName=index, FilterExpression=condition, **{
                **base, "ExpressionAttributeValues": values(s="open", n="n1")})
        assert error_of(excinfo) == ("ValidationException", INVALID + f"Secondary index {index} does not project one "
                                     f"or more filter attributes: [{missing}]")
    found = ddb.query(IndexName="byStatusInc", FilterExpression="note = :n OR sk = :o",
                      **{**base, "ExpressionAttributeValues": values(s="open", n="n1", o="o3")})
    assert sorted(item["sk"]["S"] for item in found["Items"]) == ["o1", "o3"]


def test_gsi_query_with_an_empty_key_value(ddb, shop):
    """Named as a secondary index key, as DynamoDB words it (quoted from its answer to such a Query)."""
    with pytest.raises(ClientError) as excinfo:
        ddb.query(TableName=shop, IndexName="byStatus", KeyConditionExpression="#s = :s",
                  ExpressionAttributeNames={"#s": "status"}, ExpressionAttributeValues=values(s=""))
    assert error_of(excinfo) == ("ValidationException", "One or more parameter values are not valid. A value specified "
                                 "for a secondary index key is not supported. The AttributeValue for a key attribute "
                                 "cannot contain an empty string value. IndexName: byStatus, IndexKey: status")
    with pytest.raises(ClientError) as excinfo:  # an index's sort-key operand likewise
        ddb.query(TableName=shop, IndexName="byPlaced", KeyConditionExpression="pk = :p AND placed > :e",
                  ExpressionAttributeValues=values(p="c1", e=""))
    assert error_of(excinfo)[1].endswith("empty string value. IndexName: byPlaced, IndexKey: placed")


def test_lsi_query_fetches_from_table(ddb, shop):
    """An LSI serves its projection, allows ConsistentRead, and fetches whole items for ALL_ATTRIBUTES."""
    projected = ddb.query(TableName=shop, IndexName="byPlaced", KeyConditionExpression="pk = :p AND placed < :d",
                          ExpressionAttributeValues=values(p="c1", d="2024-01-07"), ConsistentRead=True)
    assert [i["sk"]["S"] for i in projected["Items"]] == ["o5", "o4"]
    assert "big" not in projected["Items"][0] and projected["Items"][0]["note"] == {"S": "n5"}
    full = ddb.query(TableName=shop, IndexName="byPlaced", KeyConditionExpression="pk = :p AND placed < :d",
                     ExpressionAttributeValues=values(p="c1", d="2024-01-07"), Select="ALL_ATTRIBUTES",
                     ReturnConsumedCapacity="INDEXES")
    assert full["Items"][0]["big"] == {"S": "x" * 100}
    capacity = full["ConsumedCapacity"]
    assert capacity["Table"]["CapacityUnits"] == 1.0  # two fetches of 0.5
    assert capacity["LocalSecondaryIndexes"] == {"byPlaced": {"CapacityUnits": 0.5}}
    assert capacity["CapacityUnits"] == 1.5


def test_lsi_fetched_items_count_toward_the_page(ddb):
    """A page of an LSI read that fetches from the table ends at 1 MB of entries and fetched items together, and
    the pages still cover every item once."""
    name = unique_name("lsifetch")
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=defs(pk="S", sk="S", l="S"),
                     KeySchema=schema("pk", "sk"), LocalSecondaryIndexes=[{
                         "IndexName": "byl", "KeySchema": schema("pk", "l"),
                         "Projection": {"ProjectionType": "KEYS_ONLY"}}])
    for n in range(25):
        ddb.put_item(TableName=name, Item={"pk": {"S": "p"}, "sk": {"S": f"s{n:02d}"}, "l": {"S": f"l{n:02d}"},
                                           "d": {"S": "x" * 100_000}})
    request = {"TableName": name, "IndexName": "byl", "KeyConditionExpression": "pk = :p",
               "ExpressionAttributeValues": {":p": {"S": "p"}}, "Select": "ALL_ATTRIBUTES"}
    seen, pages = [], []
    while True:
        page = ddb.query(**request)
        pages.append(page["Count"])
        seen.extend(item["sk"]["S"] for item in page["Items"])
        if "LastEvaluatedKey" not in page:
            break
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    assert seen == [f"s{n:02d}" for n in range(25)]
    assert pages[0] == 11  # 11 items of ~100 KB reach 1 MB; the entries alone would fit all 25 in one page
    projected = ddb.query(**{k: v for k, v in request.items() if k not in ("Select", "ExclusiveStartKey")})
    assert projected["Count"] == 25 and "LastEvaluatedKey" not in projected


def test_lsi_fetched_items_count_in_4kb_blocks(ddb):
    """Toward the 1 MB of a page that fetches from the table, each fetched item counts as its size rounded up to
    4 KB, and the entries as theirs in all (the Developer Guide, local secondary indexes, read capacity units): 400
    items of ~300 bytes make more than one page, each within 1 MB of such blocks."""
    name = unique_name("lsiblocks")
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=defs(pk="S", sk="S", l="S"),
                     KeySchema=schema("pk", "sk"), LocalSecondaryIndexes=[{
                         "IndexName": "byl", "KeySchema": schema("pk", "l"),
                         "Projection": {"ProjectionType": "KEYS_ONLY"}}])
    for start in range(0, 400, 25):
        ddb.batch_write_item(RequestItems={name: [{"PutRequest": {"Item": {
            "pk": {"S": "p"}, "sk": {"S": f"s{n:03d}"}, "l": {"S": f"l{n:03d}"}, "d": {"S": "x" * 280}}}}
            for n in range(start, start + 25)]})
    for operation, request in (("query", {"KeyConditionExpression": "pk = :p",
                                          "ExpressionAttributeValues": {":p": {"S": "p"}}}), ("scan", {})):
        request = {"TableName": name, "IndexName": "byl", "Select": "ALL_ATTRIBUTES",
                   "ReturnConsumedCapacity": "INDEXES", **request}
        seen, pages = [], []
        while True:
            page = getattr(ddb, operation)(**request)
            pages.append(page["Count"])
            assert page["ConsumedCapacity"]["Table"]["CapacityUnits"] <= 128  # 256 blocks, read eventually consistent
            seen.extend(item["sk"]["S"] for item in page["Items"])
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        assert seen == [f"s{n:03d}" for n in range(400)]
        assert 250 <= pages[0] <= 255 and sum(pages) == 400, pages  # 4 KB of entries (or a little more) + n x 4 KB


def test_index_start_key_inside_the_sort_condition(ddb):
    """An index Query's ExclusiveStartKey outside its sort-key condition is refused as a table's is; one on a
    closed bound is taken (index sort keys repeat: entries may follow it), so paging one entry at a time through
    equal sort keys reads them all."""
    name = unique_name("idxstart")
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=defs(pk="S", g="S", gs="N"),
                     KeySchema=schema("pk", ranges=0), GlobalSecondaryIndexes=[gsi("byg", "g", "gs")])
    for n in range(6):
        ddb.put_item(TableName=name, Item={"pk": {"S": f"p{n}"}, "g": {"S": "G"}, "gs": {"N": str(n // 2)}})
    values = {":g": {"S": "G"}, ":b": {"N": "1"}}
    for condition, start in (("g = :g AND gs >= :b", "0"), ("g = :g AND gs > :b", "1"), ("g = :g AND gs < :b", "2")):
        with pytest.raises(ClientError) as excinfo:
            ddb.query(TableName=name, IndexName="byg", KeyConditionExpression=condition,
                      ExpressionAttributeValues=values,
                      ExclusiveStartKey={"pk": {"S": "p0"}, "g": {"S": "G"}, "gs": {"N": start}})
        assert error_of(excinfo) == ("ValidationException",
                                     "The provided starting key does not match the range key predicate")
    for forward in (True, False):
        request = {"TableName": name, "IndexName": "byg", "KeyConditionExpression": "g = :g AND gs <= :b",
                   "ExpressionAttributeValues": values, "Limit": 1, "ScanIndexForward": forward}
        seen = []
        while True:
            page = ddb.query(**request)
            seen.extend(item["pk"]["S"] for item in page["Items"])
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        assert sorted(seen) == ["p0", "p1", "p2", "p3"]


def test_index_start_key_values_checked_like_a_tables(ddb, shop):
    start = {"pk": {"S": "c1"}, "sk": {"S": "o1"}, "status": {"S": ""}, "amt": {"N": "10"}}
    with pytest.raises(ClientError) as excinfo:
        ddb.scan(TableName=shop, IndexName="byStatus", ExclusiveStartKey=start)
    assert error_of(excinfo) == ("ValidationException", "The provided starting key is invalid: One or more parameter "
                                 "values are not valid. The AttributeValue for a key attribute cannot contain an "
                                 "empty string value. Key: status")
    with pytest.raises(ClientError) as excinfo:
        ddb.scan(TableName=shop, IndexName="byStatus", ExclusiveStartKey={**start, "status": {"S": "s" * 2049}})
    assert error_of(excinfo)[1] == ("The provided starting key is invalid: One or more parameter values were invalid: "
                                    "Size of hashkey has exceeded the maximum size limit of2048 bytes")
    with pytest.raises(ClientError) as excinfo:
        ddb.scan(TableName=shop, IndexName="byStatus", ExclusiveStartKey={**start, "status": {"S": "x"},
                                                                          "pk": {"S": ""}})
    assert error_of(excinfo)[1].endswith("cannot contain an empty string value. Key: pk")


def test_lsi_filter_on_unprojected_attribute_still_returns_the_projection(ddb, shop):
    """A filter naming an attribute the LSI does not hold is evaluated on the fetched item, but the items come
    back as the index projects them (Select ALL_PROJECTED_ATTRIBUTES, the default for an index)."""
    held = {"pk", "sk", "placed", "note"}
    for select in ({}, {"Select": "ALL_PROJECTED_ATTRIBUTES"}):
        result = ddb.query(TableName=shop, IndexName="byPlaced", KeyConditionExpression="pk = :p",
                           FilterExpression="amt >= :a", ExpressionAttributeValues=values(p="c1", a="#30"), **select)
        assert sorted(i["sk"]["S"] for i in result["Items"]) == ["o3", "o4", "o5"]
        assert all(set(item) == held for item in result["Items"])
        scanned = ddb.scan(TableName=shop, IndexName="byPlaced", FilterExpression="big = :b",
                           ExpressionAttributeValues={":b": {"S": "x" * 100}}, **select)
        assert scanned["Count"] == 10 and all(set(item) == held for item in scanned["Items"])


def test_paging_carries_index_and_table_keys(ddb, shop):
    """LastEvaluatedKey holds the table and index keys; paging visits every entry once."""
    seen, start, pages = [], None, 0
    while True:
        kwargs = {"ExclusiveStartKey": start} if start else {}
        page = ddb.query(TableName=shop, IndexName="byStatus", KeyConditionExpression="#s = :s", Limit=2,
                         ExpressionAttributeNames={"#s": "status"}, ExpressionAttributeValues=values(s="done"),
                         **kwargs)
        pages += 1
        seen.extend(i["sk"]["S"] for i in page["Items"])
        start = page.get("LastEvaluatedKey")
        if start is None:
            break
        assert set(start) == {"pk", "sk", "status", "amt"}
    assert seen == ["o0", "o2", "o4", "o6", "o8"] and pages == 3


@pytest.mark.parametrize("index", ["byStatus", "byPlaced"])
def test_start_key_without_the_index_key(ddb, shop, index):
    """A start key holding only the table key: a Query says the key is invalid, a Scan adds why (DynamoDB words
    the two differently, as for a table)."""
    start = {"pk": {"S": "c1"}, "sk": {"S": "o1"}}
    condition = ("#s = :s", {":s": {"S": "open"}}) if index == "byStatus" else ("#s = :s", {":s": {"S": "c1"}})
    names = {"#s": "status" if index == "byStatus" else "pk"}
    with pytest.raises(ClientError) as excinfo:
        ddb.query(TableName=shop, IndexName=index, KeyConditionExpression=condition[0], ExclusiveStartKey=start,
                  ExpressionAttributeNames=names, ExpressionAttributeValues=condition[1])
    assert excinfo.value.response["Error"]["Message"] == "The provided starting key is invalid"
    with pytest.raises(ClientError) as excinfo:
        ddb.scan(TableName=shop, IndexName=index, ExclusiveStartKey=start)
    assert excinfo.value.response["Error"]["Message"] == ("The provided starting key is invalid: The provided key "
                                                          "element does not match the schema")


def test_scan_index_parallel(ddb, shop):
    """Parallel segments of an index scan partition its entries."""
    found = []
    for segment in range(3):
        result = ddb.scan(TableName=shop, IndexName="byStatus", Segment=segment, TotalSegments=3)
        found.extend(i["sk"]["S"] for i in result["Items"])
    assert sorted(found) == [f"o{n}" for n in range(10)]


def test_filter_on_index_key_refused(ddb, shop):
    """A Query filter may not name the index's key attributes."""
    with pytest.raises(ClientError) as excinfo:
        ddb.query(TableName=shop, IndexName="byStatus", KeyConditionExpression="#s = :s", FilterExpression="amt > :t",
                  ExpressionAttributeNames={"#s": "status"}, ExpressionAttributeValues=values(s="open", t="#1"))
    assert error_of(excinfo) == ("ValidationException", "Filter Expression can only contain non-primary key "
                                 "attributes: Primary key attribute: amt")


def test_read_capacity_counts_projected_size(ddb, shop):
    """Index reads are charged on projected entries and reported per index with INDEXES."""
    result = ddb.query(TableName=shop, IndexName="byStatus", KeyConditionExpression="#s = :s",
                       ExpressionAttributeNames={"#s": "status"}, ExpressionAttributeValues=values(s="open"),
                       ReturnConsumedCapacity="INDEXES")
    assert result["ConsumedCapacity"] == {"TableName": shop, "CapacityUnits": 0.5, "Table": {"CapacityUnits": 0.0},
                                          "GlobalSecondaryIndexes": {"byStatus": {"CapacityUnits": 0.5}}}


def test_write_capacity_per_index(ddb):
    """Writes report index units: a put into an index, a key change as delete plus put, none when untouched."""
    name = unique_name()
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=defs(pk="S", a="S", b="S"),
                     KeySchema=schema("pk", ranges=0),
                     GlobalSecondaryIndexes=[gsi("byA", "a", ranges=0), gsi("byB", "b", ranges=0)])
    put = ddb.put_item(TableName=name, Item={"pk": {"S": "1"}, "a": {"S": "x"}}, ReturnConsumedCapacity="INDEXES")
    assert put["ConsumedCapacity"] == {"TableName": name, "CapacityUnits": 2.0, "Table": {"CapacityUnits": 1.0},
                                       "GlobalSecondaryIndexes": {"byA": {"CapacityUnits": 1.0}}}
    moved = ddb.update_item(TableName=name, Key={"pk": {"S": "1"}}, UpdateExpression="SET a = :y",
                            ExpressionAttributeValues={":y": {"S": "y"}}, ReturnConsumedCapacity="INDEXES")
    assert moved["ConsumedCapacity"]["GlobalSecondaryIndexes"] == {"byA": {"CapacityUnits": 2.0}}
    other = ddb.update_item(TableName=name, Key={"pk": {"S": "1"}}, UpdateExpression="SET c = :y",
                            ExpressionAttributeValues={":y": {"S": "y"}}, ReturnConsumedCapacity="TOTAL")
    assert other["ConsumedCapacity"] == {"TableName": name, "CapacityUnits": 2.0}  # ALL projection: byA rewritten
    gone = ddb.delete_item(TableName=name, Key={"pk": {"S": "1"}}, ReturnConsumedCapacity="INDEXES")
    assert gone["ConsumedCapacity"]["GlobalSecondaryIndexes"] == {"byA": {"CapacityUnits": 1.0}}
    # An entry changed in place costs the larger of its sizes (measured: a 3 KB attribute shrunk to 18 bytes
    # costs the index 3 units, as it costs the table).
    ddb.put_item(TableName=name, Item={"pk": {"S": "2"}, "a": {"S": "x"}, "d": {"S": "d" * 3000}})
    shrunk = ddb.update_item(TableName=name, Key={"pk": {"S": "2"}}, UpdateExpression="SET d = :v",
                             ExpressionAttributeValues={":v": {"S": "y" * 18}}, ReturnConsumedCapacity="INDEXES")
    assert shrunk["ConsumedCapacity"]["Table"] == {"CapacityUnits": 3.0}
    assert shrunk["ConsumedCapacity"]["GlobalSecondaryIndexes"] == {"byA": {"CapacityUnits": 3.0}}


HASH_GAP = ("HASH key attributes {} must have equality conditions specified in the query because a condition is "
            "present on key attribute {}")


def test_multi_attribute_keys(ddb):
    """A GSI whose partition and sort keys are several attributes, queried left to right."""
    name = unique_name()
    ddb.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=defs(id="S", tournament="S", rgn="S", round="S", bracket="N"),
        KeySchema=schema("id", ranges=0),
        GlobalSecondaryIndexes=[{"IndexName": "matches", "Projection": {"ProjectionType": "ALL"},
                                 "KeySchema": schema("tournament", "rgn", "round", "bracket", ranges=2)}])
    described = ddb.describe_table(TableName=name)["Table"]["GlobalSecondaryIndexes"][0]["KeySchema"]
    assert [e["KeyType"] for e in described] == ["HASH", "HASH", "RANGE", "RANGE"]
    rows = [("w24", "eu", "final", 1), ("w24", "eu", "semi", 2), ("w24", "eu", "semi", 1), ("w24", "na", "semi", 1)]
    for n, (t, r, rnd, b) in enumerate(rows):
        ddb.put_item(TableName=name, Item={"id": {"S": f"m{n}"}, "tournament": {"S": t}, "rgn": {"S": r},
                                           "round": {"S": rnd}, "bracket": {"N": str(b)}})
    ddb.put_item(TableName=name, Item={"id": {"S": "sparse"}, "tournament": {"S": "w24"}, "rgn": {"S": "eu"}})

    def query(condition: str, **vals: str) -> list[str]:
        result = ddb.query(TableName=name, IndexName="matches", KeyConditionExpression=condition,
                           ExpressionAttributeNames={"#r": "round"}, ExpressionAttributeValues=values(**vals))
        return [i["id"]["S"] for i in result["Items"]]

    assert query("tournament = :t AND rgn = :g AND #r = :r", t="w24", g="eu", r="semi") == ["m2", "m1"]
    assert query("tournament = :t AND rgn = :g AND #r = :r AND bracket > :b", t="w24", g="eu", r="semi",
                 b="#1") == ["m1"]
    assert query("tournament = :t AND rgn = :g AND #r >= :r", t="w24", g="eu", r="semi") == ["m2", "m1"]
    with pytest.raises(ClientError) as excinfo:
        query("tournament = :t AND #r = :r", t="w24", r="semi")
    assert error_of(excinfo) == ("ValidationException", HASH_GAP.format("rgn", "tournament"))

    def refused(condition: str, **vals: str) -> tuple[str, str]:  # (no #r: each request has one problem only)
        with pytest.raises(ClientError) as excinfo:
            ddb.query(TableName=name, IndexName="matches", KeyConditionExpression=condition,
                      ExpressionAttributeValues=values(**vals))
        return error_of(excinfo)

    # A partition attribute compared other than by =, or missing, is refused with DynamoDB's multi-attribute
    # wording (before a value's wrong type); a condition on a non-key attribute names the sort-key attribute it
    # should have been, as with one-attribute keys (more in test_key_conditions_multi.py).
    assert refused("tournament > :t AND rgn = :g AND id = :r", t="w24", g="eu", r="m1") == (
        "ValidationException", HASH_GAP.format("tournament", "rgn"))
    assert refused("tournament = :t", t="#1") == ("ValidationException", HASH_GAP.format("rgn", "tournament"))
    assert refused("tournament = :t AND rgn = :g AND id = :r", t="w24", g="eu", r="m1") == (
        "ValidationException", "Query condition missed key schema element: round")
    # Every partition attribute is held to the 2048-byte limit, not only the first.
    assert refused("tournament = :t AND rgn = :g", t="w24", g="g" * 2049) == (
        "ValidationException", "One or more parameter values were invalid: Size of hashkey has exceeded the maximum "
                               "size limit of2048 bytes")
    # The API sets no length for a GSI KeySchema: nine elements break the four-RANGE rule, not a list length.
    with pytest.raises(ClientError) as excinfo:
        ddb.create_table(
            TableName=unique_name(), BillingMode="PAY_PER_REQUEST", AttributeDefinitions=defs(
                id="S", a="S", b="S", c="S", d="S", e="S", f="S", g="S", h="S", i="S"),
            KeySchema=schema("id", ranges=0),
            GlobalSecondaryIndexes=[{"IndexName": "wide", "Projection": {"ProjectionType": "ALL"},
                                     "KeySchema": schema("a", "b", "c", "d", "e", "f", "g", "h", "i", ranges=5)}])
    assert error_of(excinfo) == ("ValidationException", "One or more parameter values were invalid: The KeySchema "
                                 "exceeds the maximum allowed number of RANGE key attributes")


def test_transaction_capacity_per_index(ddb):
    """TransactWriteItems charges the table at the transactional rate and each index as outside a transaction (as
    checked against DynamoDB), per index, with INDEXES."""
    name = unique_name()
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=defs(pk="S", a="S"),
                     KeySchema=schema("pk", ranges=0), GlobalSecondaryIndexes=[gsi("byA", "a", ranges=0)])
    result = ddb.transact_write_items(TransactItems=[{"Put": {"TableName": name, "Item": {
        "pk": {"S": "1"}, "a": {"S": "x"}}}}], ReturnConsumedCapacity="INDEXES")
    (consumed,) = result["ConsumedCapacity"]
    assert consumed["CapacityUnits"] == 3.0 and consumed["Table"]["CapacityUnits"] == 2.0
    assert consumed["GlobalSecondaryIndexes"] == {"byA": {"CapacityUnits": 1.0, "WriteCapacityUnits": 1.0}}
