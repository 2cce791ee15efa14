"""Key conditions and paging keys on multi-attribute GSI keys, and paging keys of the wrong types (issue 30)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_indexes import defs, schema
from tests.api.test_query import fails
from tests.conftest import unique_name

# The RANGE-side wording is DynamoDB's (quoted in issue 30); the HASH side is its counterpart (a best guess).
GAP = ("{} key attributes {} must have equality conditions specified in the query because a condition is present "
       "on key attribute {}")
START_INVALID = "The provided starting key is invalid"
START_SCHEMA = START_INVALID + ": The provided key element does not match the schema"


@pytest.fixture(scope="module")
def wide(ddb: Any) -> str:
    """A table with a GSI keyed on two HASH and three RANGE attributes, and a few items in it."""
    name = unique_name("wide")
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=defs(id="S", h1="S", h2="N", a="S", b="S", c="N"),
                     KeySchema=schema("id", ranges=0),
                     GlobalSecondaryIndexes=[{"IndexName": "multi", "Projection": {"ProjectionType": "ALL"},
                                              "KeySchema": schema("h1", "h2", "a", "b", "c", ranges=3)}])
    rows = [("x", "1", "a1", "b1", "1"), ("x", "1", "a1", "b1", "2"), ("x", "1", "a1", "b2", "1"),
            ("x", "1", "a2", "b1", "1"), ("x", "2", "a1", "b1", "1")]
    for n, (h1, h2, a, b, c) in enumerate(rows):
        ddb.put_item(TableName=name, Item={"id": {"S": f"i{n}"}, "h1": {"S": h1}, "h2": {"N": h2}, "a": {"S": a},
                                           "b": {"S": b}, "c": {"N": c}})
    return name


VALUES = {":h1": {"S": "x"}, ":h2": {"N": "1"}, ":a": {"S": "a1"}, ":b": {"S": "b1"}, ":c": {"N": "1"}}


def query(ddb: Any, table: str, condition: str, **extra: Any) -> dict[str, Any]:
    used = {k: v for k, v in VALUES.items() if k in condition}
    return ddb.query(TableName=table, IndexName="multi", KeyConditionExpression=condition,  # type: ignore[no-any-return]
                     ExpressionAttributeValues=used, **extra)


def refused(ddb: Any, table: str, condition: str) -> tuple[str, str]:
    used = {k: v for k, v in VALUES.items() if k in condition}
    return fails(ddb.query, TableName=table, IndexName="multi", KeyConditionExpression=condition,
                 ExpressionAttributeValues=used)


def ids(result: dict[str, Any]) -> list[str]:
    return sorted(item["id"]["S"] for item in result["Items"])


def test_left_prefixes_are_served(ddb, wide):
    """Equality on every HASH attribute and on a gap-free left prefix of the RANGE ones, a range only last."""
    assert ids(query(ddb, wide, "h1 = :h1 AND h2 = :h2")) == ["i0", "i1", "i2", "i3"]
    assert ids(query(ddb, wide, "h2 = :h2 AND h1 = :h1 AND a = :a")) == ["i0", "i1", "i2"]
    assert ids(query(ddb, wide, "h1 = :h1 AND h2 = :h2 AND a = :a AND b > :b")) == ["i2"]
    assert ids(query(ddb, wide, "h1 = :h1 AND h2 = :h2 AND a = :a AND b = :b AND c > :c")) == ["i1"]
    assert ids(query(ddb, wide, "h1 = :h1 AND h2 = :h2 AND begins_with(a, :a)")) == ["i0", "i1", "i2"]


@pytest.mark.parametrize(("condition", "message"), [
    # A gap in the RANGE attributes names the first one skipped and the attribute after it with a condition.
    ("h1 = :h1 AND h2 = :h2 AND b = :b", GAP.format("RANGE", "a", "b")),
    ("h1 = :h1 AND h2 = :h2 AND a = :a AND c = :c", GAP.format("RANGE", "b", "c")),
    ("h1 = :h1 AND h2 = :h2 AND c > :c", GAP.format("RANGE", "a", "c")),
    # A range condition before the last RANGE attribute named.
    ("h1 = :h1 AND h2 = :h2 AND a > :a AND b = :b", GAP.format("RANGE", "a", "b")),
    ("h1 = :h1 AND h2 = :h2 AND a = :a AND begins_with(b, :b) AND c = :c", GAP.format("RANGE", "b", "c")),
    # A HASH attribute missing, or compared other than by =.
    ("h1 = :h1", GAP.format("HASH", "h2", "h1")),
    ("h2 = :h2 AND a = :a", GAP.format("HASH", "h1", "h2")),
    ("h1 = :h1 AND a = :a", GAP.format("HASH", "h2", "h1")),
    ("h1 > :h1 AND h2 = :h2", GAP.format("HASH", "h1", "h2")),
    ("a = :a", GAP.format("HASH", "h1", "a")),
])
def test_gaps_refused_with_dynamodbs_message(ddb, wide, condition, message):
    """Violations of the multi-attribute rules get DynamoDB's messages, not the single-key 'missed key schema
    element' one."""
    assert refused(ddb, wide, condition) == ("ValidationException", message)


def test_single_key_wording_kept_where_no_gap(ddb, wide):
    """A condition on no key attribute, or on another attribute beside a gap-free key prefix, is worded as for a
    single-attribute key."""
    assert refused(ddb, wide, "id = :a") == ("ValidationException", "Query condition missed key schema element: h1")
    assert refused(ddb, wide, "h1 = :h1 AND h2 = :h2 AND a = :a AND id = :b") == (
        "ValidationException", "Query condition missed key schema element: b")


def test_one_hash_attribute_with_range_keys(ddb):
    """An index with one HASH and two RANGE attributes: the same rules for its RANGE side; a lone partition
    condition other than = keeps the single-key wording."""
    name = unique_name("onehash")
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=defs(id="S", h="S", r="S",
                                                                                               s="S"),
                     KeySchema=schema("id", ranges=0),
                     GlobalSecondaryIndexes=[{"IndexName": "multi", "Projection": {"ProjectionType": "ALL"},
                                              "KeySchema": schema("h", "r", "s", ranges=2)}])
    values = {":h": {"S": "x"}, ":s": {"S": "y"}}

    def run(condition: str) -> tuple[str, str]:
        return fails(ddb.query, TableName=name, IndexName="multi", KeyConditionExpression=condition,
                     ExpressionAttributeValues={k: v for k, v in values.items() if k in condition})

    assert run("h = :h AND s = :s") == ("ValidationException", GAP.format("RANGE", "r", "s"))
    assert run("h > :h AND s = :s") == ("ValidationException", GAP.format("HASH", "h", "s"))
    assert run("h > :h") == ("ValidationException", "Query key condition not supported")


def test_legacy_key_conditions(ddb, wide):
    """KeyConditions (which DynamoDB accepts on multi-attribute keys, per scylladb issue 31393) follow the same
    rules and messages."""
    def conditions(**ops: tuple[str, str]) -> dict[str, Any]:
        return {name: {"ComparisonOperator": op, "AttributeValueList": [VALUES[f":{value}"]]}
                for name, (op, value) in ops.items()}

    result = ddb.query(TableName=wide, IndexName="multi", KeyConditions=conditions(
        h1=("EQ", "h1"), h2=("EQ", "h2"), a=("EQ", "a"), b=("GT", "b")))
    assert ids(result) == ["i2"]
    assert fails(ddb.query, TableName=wide, IndexName="multi", KeyConditions=conditions(
        h1=("EQ", "h1"), h2=("EQ", "h2"), b=("EQ", "b"))) == ("ValidationException", GAP.format("RANGE", "a", "b"))
    assert fails(ddb.query, TableName=wide, IndexName="multi", KeyConditions=conditions(h1=("EQ", "h1"))) == (
        "ValidationException", GAP.format("HASH", "h2", "h1"))


def select(ddb: Any, table: str, where: str) -> list[str]:
    """The ids a PartiQL SELECT of the multi-attribute index finds, in the index's order, descending (an ORDER BY,
    which a SELECT planned as a Scan would be refused: so each of these is a Query)."""
    statement = f'SELECT id FROM "{table}"."multi" WHERE {where} ORDER BY a DESC'
    return [item["id"]["S"] for item in ddb.execute_statement(Statement=statement)["Items"]]


def test_partiql_select_filters_what_the_key_condition_cannot_take(ddb, wide):
    """A SELECT on a multi-attribute key is a Query whose key condition takes a gap-free prefix of the RANGE
    attributes (and at most one range, last); a condition past a gap or after a range is its filter, so the
    statement is answered where the native Query with the same key condition is refused."""
    base = "h1 = 'x' AND h2 = 1"
    assert select(ddb, wide, f"{base} AND b = 'b1'") == ["i3", "i1", "i0"]  # a gap: b filters
    assert select(ddb, wide, f"{base} AND a > 'a0' AND b = 'b1'") == ["i3", "i1", "i0"]  # after a range
    assert select(ddb, wide, f"{base} AND c = 1 AND a = 'a1'") == ["i2", "i0"]  # past a gap (b)
    assert select(ddb, wide, f"{base} AND a = 'a1' AND b = 'b1' AND c > 1") == ["i1"]  # the whole key
    assert select(ddb, wide, f"{base} AND a > 'a1' AND a = 'a1'") == []  # the equality is key, the range filter
    assert refused(ddb, wide, "h1 = :h1 AND h2 = :h2 AND b = :b") == (
        "ValidationException", GAP.format("RANGE", "a", "b"))


def test_paging_through_a_multi_attribute_key(ddb, wide):
    """LastEvaluatedKey names the table key and every index key attribute, and resumes where it stopped."""
    seen: list[str] = []
    start = None
    while True:
        extra = {"Limit": 1} | ({"ExclusiveStartKey": start} if start else {})
        page = query(ddb, wide, "h1 = :h1 AND h2 = :h2 AND a = :a", **extra)
        seen += ids(page)
        start = page.get("LastEvaluatedKey")
        if start is None:
            break
        assert set(start) == {"id", "h1", "h2", "a", "b", "c"}
    assert sorted(seen) == ["i0", "i1", "i2"]


START = {"id": {"S": "i0"}, "h1": {"S": "x"}, "h2": {"N": "1"}, "a": {"S": "a1"}, "b": {"S": "b1"}, "c": {"N": "1"}}


@pytest.mark.parametrize(("change", "query_message", "scan_message"), [
    ({"h2": None}, START_INVALID, START_SCHEMA),  # an index key attribute missing
    ({"x": {"S": "y"}}, START_INVALID, START_SCHEMA),  # an attribute of no key
    ({"h2": {"S": "1"}}, START_SCHEMA, START_SCHEMA),  # the second HASH attribute of the wrong type
    ({"c": {"S": "1"}}, START_SCHEMA, START_SCHEMA),  # the last RANGE attribute of the wrong type
])
def test_start_key_on_a_multi_attribute_index(ddb, wide, change, query_message, scan_message):
    """An ExclusiveStartKey for a multi-attribute index holds every attribute of both keys, typed as defined."""
    start = {k: v for k, v in ({**START, **change}).items() if v is not None}
    assert fails(ddb.query, TableName=wide, IndexName="multi", KeyConditionExpression="h1 = :h1 AND h2 = :h2",
                 ExpressionAttributeValues={":h1": VALUES[":h1"], ":h2": VALUES[":h2"]},
                 ExclusiveStartKey=start) == ("ValidationException", query_message)
    assert fails(ddb.scan, TableName=wide, IndexName="multi", ExclusiveStartKey=start) == (
        "ValidationException", scan_message)


def test_start_key_outside_the_multi_attribute_condition(ddb, wide):
    """A start key in another partition (any HASH attribute differing) or outside the RANGE prefix is refused."""
    kwargs = {"TableName": wide, "IndexName": "multi", "KeyConditionExpression": "h1 = :h1 AND h2 = :h2 AND a = :a",
              "ExpressionAttributeValues": {k: VALUES[k] for k in (":h1", ":h2", ":a")}}
    assert fails(ddb.query, **kwargs, ExclusiveStartKey={**START, "h2": {"N": "2"}}) == (
        "ValidationException", "The provided starting key is outside query boundaries based on provided condition")
    assert fails(ddb.query, **kwargs, ExclusiveStartKey={**START, "a": {"S": "a2"}}) == (
        "ValidationException", "The provided starting key does not match the range key predicate")


@pytest.fixture(scope="module")
def tables(ddb: Any) -> dict[str, str]:
    """A table keyed on its partition key alone with a GSI, and one with a sort key, an LSI and a GSI."""
    hash_only, composite = unique_name("hashonly"), unique_name("composite")
    ddb.create_table(TableName=hash_only, BillingMode="PAY_PER_REQUEST", AttributeDefinitions=defs(pk="S", g="N"),
                     KeySchema=schema("pk", ranges=0), GlobalSecondaryIndexes=[{
                         "IndexName": "byG", "KeySchema": schema("g", ranges=0),
                         "Projection": {"ProjectionType": "ALL"}}])
    ddb.create_table(TableName=composite, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=defs(pk="S", sk="N", l="S", g="S"), KeySchema=schema("pk", "sk"),
                     LocalSecondaryIndexes=[{"IndexName": "byL", "KeySchema": schema("pk", "l"),
                                             "Projection": {"ProjectionType": "ALL"}}],
                     GlobalSecondaryIndexes=[{"IndexName": "byG", "KeySchema": schema("g", ranges=0),
                                              "Projection": {"ProjectionType": "ALL"}}])
    return {"hash_only": hash_only, "composite": composite}


# (table, index, key condition, its values, start key, Query's message, Scan's message)
PAGING_CASES = [
    # Wrong types: the key's attributes are all there, so the key element does not match the schema.
    ("composite", None, "pk = :p", {":p": {"S": "p"}}, {"pk": {"S": "p"}, "sk": {"S": "1"}}, START_SCHEMA,
     START_SCHEMA),
    ("composite", None, "pk = :p", {":p": {"S": "p"}}, {"pk": {"N": "1"}, "sk": {"N": "1"}}, START_SCHEMA,
     START_SCHEMA),
    ("composite", None, "pk = :p", {":p": {"S": "p"}}, {"pk": {"SS": ["p"]}, "sk": {"N": "1"}}, START_SCHEMA,
     START_SCHEMA),
    ("hash_only", None, "pk = :p", {":p": {"S": "p"}}, {"pk": {"B": b"p"}}, START_SCHEMA, START_SCHEMA),
    ("composite", "byL", "pk = :p", {":p": {"S": "p"}}, {"pk": {"S": "p"}, "sk": {"N": "1"}, "l": {"N": "1"}},
     START_SCHEMA, START_SCHEMA),
    ("composite", "byG", "g = :g", {":g": {"S": "g"}}, {"pk": {"S": "p"}, "sk": {"N": "1"}, "g": {"N": "1"}},
     START_SCHEMA, START_SCHEMA),
    ("hash_only", "byG", "g = :g", {":g": {"N": "1"}}, {"pk": {"S": "p"}, "g": {"S": "1"}}, START_SCHEMA,
     START_SCHEMA),
    # A sort key the table (or index) does not have: other attributes than the key's.
    ("hash_only", None, "pk = :p", {":p": {"S": "p"}}, {"pk": {"S": "p"}, "sk": {"S": "s"}}, START_INVALID,
     START_SCHEMA),
    ("hash_only", "byG", "g = :g", {":g": {"N": "1"}}, {"pk": {"S": "p"}, "g": {"N": "1"}, "sk": {"S": "s"}},
     START_INVALID, START_SCHEMA),
]


@pytest.mark.parametrize(("table", "index", "condition", "values", "start", "query_message", "scan_message"),
                         PAGING_CASES)
def test_paging_key_refusals(ddb, tables, table, index, condition, values, start, query_message, scan_message):
    """Query and Scan, on tables, LSIs and GSIs, refuse start keys of the wrong types or naming a sort key that
    is not there."""
    where = {"TableName": tables[table]} | ({"IndexName": index} if index else {})
    assert fails(ddb.query, **where, KeyConditionExpression=condition, ExpressionAttributeValues=values,
                 ExclusiveStartKey=start) == ("ValidationException", query_message)
    assert fails(ddb.scan, **where, ExclusiveStartKey=start) == ("ValidationException", scan_message)
