"""Query through boto3: key conditions, sort order, filters, Select, Limit, pages, ExclusiveStartKey."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.api.test_protocol import call
from tests.conftest import create_table

PK = {":p": {"S": "p"}}


def error_of(excinfo: Any) -> tuple[str, str]:
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


def fails(call: Any, **kwargs: Any) -> tuple[str, str]:
    """The (code, message) of a call that must fail."""
    with pytest.raises(ClientError) as excinfo:
        call(**kwargs)
    return error_of(excinfo)


def raw_error(server: Any, operation: str, body: dict[str, Any]) -> tuple[str, str]:
    """(code, message) of a request sent without boto3's client-side validation."""
    response, data = call(server, json.dumps(body), target=f"DynamoDB_20120810.{operation}")
    assert response.status == 400
    error = json.loads(data)
    return error["__type"].rpartition("#")[2], error["message"]


def pages(call: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """Every page of a Query or Scan, following LastEvaluatedKey."""
    out = []
    while True:
        page = call(**kwargs)
        out.append(page)
        if "LastEvaluatedKey" not in page:
            return out
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def put_all(ddb: Any, table: str, items: list[dict[str, Any]]) -> None:
    for start in range(0, len(items), 25):
        ddb.batch_write_item(RequestItems={table: [{"PutRequest": {"Item": i}} for i in items[start:start + 25]]})


@pytest.fixture(scope="module")
def table(ddb: Any) -> str:
    """Partition 'p' holds sk k00..k09 with n = index; partition 'q' holds one item."""
    name = create_table(ddb)
    items = [{"pk": {"S": "p"}, "sk": {"S": f"k{i:02d}"}, "n": {"N": str(i)}, "x": {"S": "y"}} for i in range(10)]
    items.append({"pk": {"S": "q"}, "sk": {"S": "k00"}})
    put_all(ddb, name, items)
    return name


def sks(page: dict[str, Any]) -> list[str]:
    return [item["sk"]["S"] for item in page["Items"]]


def test_partition_only(ddb, table):
    """A hash-only condition returns the whole partition in ascending sort order, nothing from others."""
    page = ddb.query(TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues=PK)
    assert sks(page) == [f"k{i:02d}" for i in range(10)]
    assert page["Count"] == page["ScannedCount"] == 10
    assert "LastEvaluatedKey" not in page


@pytest.mark.parametrize(("condition", "values", "expected"), [
    ("sk = :a", {":a": "k03"}, [3]),
    ("sk < :a", {":a": "k03"}, [0, 1, 2]),
    ("sk <= :a", {":a": "k03"}, [0, 1, 2, 3]),
    ("sk > :a", {":a": "k07"}, [8, 9]),
    ("sk >= :a", {":a": "k07"}, [7, 8, 9]),
    (":a < sk", {":a": "k07"}, [8, 9]),
    ("sk BETWEEN :a AND :b", {":a": "k02", ":b": "k04"}, [2, 3, 4]),
    ("begins_with(sk, :a)", {":a": "k0"}, list(range(10))),
    ("begins_with(sk, :a)", {":a": "k05"}, [5]),
    ("begins_with(sk, :a)", {":a": "x"}, []),
])
def test_sort_key_conditions(ddb, table, condition, values, expected):
    """Every sort-key operator selects exactly its range, in both directions."""
    attribute_values = {**PK, **{k: {"S": val} for k, val in values.items()}}
    for forward in (True, False):
        page = ddb.query(TableName=table, KeyConditionExpression=f"pk = :p AND {condition}",
                         ExpressionAttributeValues=attribute_values, ScanIndexForward=forward)
        want = [f"k{i:02d}" for i in expected]
        assert sks(page) == (want if forward else want[::-1])


def test_two_conditions_on_one_key(ddb, table):
    """Refused with no "Invalid KeyConditionExpression: " prefix (DynamoDB's answers captured in 2023 and 2024)."""
    for condition in ("pk = :p AND sk > :a AND sk < :b", "pk = :p AND pk = :p"):
        with pytest.raises(ClientError) as excinfo:
            ddb.query(TableName=table, KeyConditionExpression=condition,
                      ExpressionAttributeValues={":p": {"S": "p"}, ":a": {"S": "a"}, ":b": {"S": "b"}}
                      if ":a" in condition else {":p": {"S": "p"}})
        assert excinfo.value.response["Error"]["Message"] == \
            "KeyConditionExpressions must only contain one condition per key"


def test_names_in_key_condition(ddb, table):
    """Expression attribute names work in key conditions."""
    page = ddb.query(TableName=table, KeyConditionExpression="#h = :p AND #r > :a",
                     ExpressionAttributeNames={"#h": "pk", "#r": "sk"},
                     ExpressionAttributeValues={**PK, ":a": {"S": "k08"}})
    assert sks(page) == ["k09"]


def test_string_order_is_utf8(ddb):
    """S sort keys order by UTF-8 bytes (U+FFFF before U+10000, unlike UTF-16)."""
    name = create_table(ddb)
    values = ["a", "B", "é", "\uffff", "\U00010000", "z", "Z", "aa", "\u00ff", "\u0100"]
    put_all(ddb, name, [{"pk": {"S": "p"}, "sk": {"S": s}} for s in values])
    page = ddb.query(TableName=name, KeyConditionExpression="pk = :p", ExpressionAttributeValues=PK)
    assert sks(page) == sorted(values, key=lambda s: s.encode())


NUMBERS = ["-9.9999999999999999999999999999999999999E+125", "-1e125", "-100", "-99.5", "-1", "-0.5",
           "-1E-130", "0", "1E-130", "0.001", "0.5", "1", "1.5", "10", "1E+2", "100.5",
           "12345678901234567890123456789012345678", "99999999999999999999999999999999999999", "1e125",
           "9.9999999999999999999999999999999999999E+125"]


def test_number_order(ddb):
    """N sort keys order numerically: negatives, exponents, 38 significant digits, tiny and huge magnitudes."""
    name = create_table(ddb, range_type="N")
    put_all(ddb, name, [{"pk": {"S": "p"}, "sk": {"N": n}} for n in NUMBERS])
    expected = sorted(NUMBERS, key=Decimal)
    for forward in (True, False):
        got = pages(ddb.query, TableName=name, KeyConditionExpression="pk = :p", ExpressionAttributeValues=PK,
                    ScanIndexForward=forward, Limit=3)
        keys = [Decimal(item["sk"]["N"]) for page in got for item in page["Items"]]
        assert keys == [Decimal(n) for n in (expected if forward else expected[::-1])]
    page = ddb.query(TableName=name, KeyConditionExpression="pk = :p AND sk BETWEEN :a AND :b",
                     ExpressionAttributeValues={**PK, ":a": {"N": "-1"}, ":b": {"N": "1e2"}})
    assert [Decimal(i["sk"]["N"]) for i in page["Items"]] == [Decimal(n) for n in expected if -1 <= Decimal(n) <= 100]


BINARIES = [b"", b"\x00", b"\x00\x00", b"\x01", b"\x7f", b"\x80", b"\xfe", b"\xff", b"\xff\x00", b"\xff\xff"]


def test_binary_order_and_prefix(ddb):
    """B sort keys order as unsigned bytes; begins_with works on B, including 0xFF prefixes."""
    name = create_table(ddb, range_type="B")
    values = [b for b in BINARIES if b]
    put_all(ddb, name, [{"pk": {"S": "p"}, "sk": {"B": b}} for b in values])
    page = ddb.query(TableName=name, KeyConditionExpression="pk = :p", ExpressionAttributeValues=PK)
    assert [i["sk"]["B"] for i in page["Items"]] == sorted(values)
    for prefix in (b"\x00", b"\xff", b"\xff\xff", b"\x7f"):
        page = ddb.query(TableName=name, KeyConditionExpression="pk = :p AND begins_with(sk, :b)",
                         ExpressionAttributeValues={**PK, ":b": {"B": prefix}})
        assert [i["sk"]["B"] for i in page["Items"]] == sorted(b for b in values if b.startswith(prefix))


def test_number_and_binary_partition_keys(ddb):
    """N and B partition keys are matched by value (1e3 is 1000)."""
    name = create_table(ddb, hash_type="N", range_type=None)
    ddb.put_item(TableName=name, Item={"pk": {"N": "1000"}})
    page = ddb.query(TableName=name, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"N": "1e3"}})
    assert page["Items"] == [{"pk": {"N": "1000"}}]
    name = create_table(ddb, hash_type="B", range_type=None)
    ddb.put_item(TableName=name, Item={"pk": {"B": b"\x00\xff"}})
    page = ddb.query(TableName=name, KeyConditionExpression="pk = :p",
                     ExpressionAttributeValues={":p": {"B": b"\x00\xff"}})
    assert page["Count"] == 1


def test_filter_counts(ddb, table):
    """Count is after the filter, ScannedCount before it; Limit counts items evaluated, not matched."""
    page = ddb.query(TableName=table, KeyConditionExpression="pk = :p", FilterExpression="n >= :m",
                     ExpressionAttributeValues={**PK, ":m": {"N": "7"}})
    assert (page["Count"], page["ScannedCount"], sks(page)) == (3, 10, ["k07", "k08", "k09"])
    page = ddb.query(TableName=table, KeyConditionExpression="pk = :p", FilterExpression="n >= :m",
                     ExpressionAttributeValues={**PK, ":m": {"N": "7"}}, Limit=5)
    assert (page["Count"], page["ScannedCount"], page["Items"]) == (0, 5, [])
    assert page["LastEvaluatedKey"] == {"pk": {"S": "p"}, "sk": {"S": "k04"}}


def test_filter_on_key_rejected(ddb, table):
    """A Query filter may not name a primary-key attribute."""
    assert fails(ddb.query, TableName=table, KeyConditionExpression="pk = :p", FilterExpression="#s > :a",
                 ExpressionAttributeNames={"#s": "sk"}, ExpressionAttributeValues={**PK, ":a": {"S": "k"}}) == (
        "ValidationException",
        "Filter Expression can only contain non-primary key attributes: Primary key attribute: sk")
    # With both keys in the filter, the refusal names the partition key, whatever the order (it once followed
    # the hash order of a set, and so changed from one server start to the next).
    for text in ("sk = :a AND pk = :b", "pk = :b AND sk = :a"):
        assert fails(ddb.query, TableName=table, KeyConditionExpression="pk = :p", FilterExpression=text,
                     ExpressionAttributeValues={**PK, ":a": {"S": "k"}, ":b": {"S": "p"}}) == (
            "ValidationException",
            "Filter Expression can only contain non-primary key attributes: Primary key attribute: pk")


def test_projection_and_select(ddb, table):
    """ProjectionExpression trims items; Select COUNT returns no Items; SPECIFIC_ATTRIBUTES with a projection."""
    page = ddb.query(TableName=table, KeyConditionExpression="pk = :p AND sk = :s", ProjectionExpression="n, nope",
                     ExpressionAttributeValues={**PK, ":s": {"S": "k01"}})
    assert page["Items"] == [{"n": {"N": "1"}}]
    page = ddb.query(TableName=table, KeyConditionExpression="pk = :p AND sk = :s", ProjectionExpression="#x",
                     Select="SPECIFIC_ATTRIBUTES", ExpressionAttributeNames={"#x": "x"},
                     ExpressionAttributeValues={**PK, ":s": {"S": "k01"}})
    assert page["Items"] == [{"x": {"S": "y"}}]
    page = ddb.query(TableName=table, KeyConditionExpression="pk = :p", Select="COUNT", ExpressionAttributeValues=PK)
    assert "Items" not in page and page["Count"] == 10
    page = ddb.query(TableName=table, KeyConditionExpression="pk = :p", Select="ALL_ATTRIBUTES", Limit=1,
                     ExpressionAttributeValues=PK)
    assert page["Items"] == [{"pk": {"S": "p"}, "sk": {"S": "k00"}, "n": {"N": "0"}, "x": {"S": "y"}}]


@pytest.mark.parametrize(("extra", "message"), [
    ({"Select": "ALL_ATTRIBUTES", "ProjectionExpression": "n"},
     "1 validation error detected: Cannot specify the ProjectionExpression when choosing to get ALL_ATTRIBUTES"),
    ({"Select": "COUNT", "ProjectionExpression": "n"},
     "1 validation error detected: Cannot specify the ProjectionExpression when choosing to get only the Count"),
    ({"Select": "ALL_PROJECTED_ATTRIBUTES", "ProjectionExpression": "n"},
     "1 validation error detected: Cannot specify the ProjectionExpression when choosing to get "
     "ALL_PROJECTED_ATTRIBUTES"),
    ({"Select": "SPECIFIC_ATTRIBUTES"}, "1 validation error detected: Must specify the AttributesToGet or "
                                        "ProjectionExpression when choosing to get SPECIFIC_ATTRIBUTES"),
    ({"Select": "ALL_PROJECTED_ATTRIBUTES"},
     "1 validation error detected: ALL_PROJECTED_ATTRIBUTES can be used only when Querying using an IndexName"),
    ({"IndexName": "nope"}, "The table does not have the specified index: nope"),
])
def test_parameter_validation(ddb, table, extra, message):
    """Incompatible Select/projection combinations, a zero Limit and an unknown index are rejected."""
    assert fails(ddb.query, TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues=PK,
                 **extra) == ("ValidationException", message)


def test_limit_zero(server, table):
    """Limit is at least 1 (boto3 checks this too, so the request goes out raw)."""
    assert raw_error(server, "Query", {"TableName": table, "KeyConditionExpression": "pk = :p",
                                       "ExpressionAttributeValues": PK, "Limit": 0}) == (
        "ValidationException", "1 validation error detected: Value '0' at 'limit' failed to satisfy constraint: "
                               "Member must have value greater than or equal to 1")


def test_select_enum(ddb, table):
    """Select outside its enum is a validation error listing the allowed values."""
    code, message = fails(ddb.query, TableName=table, KeyConditionExpression="pk = :p",
                          ExpressionAttributeValues=PK, Select="all")
    assert code == "ValidationException"
    assert message == ("1 validation error detected: Value 'all' at 'select' failed to satisfy constraint: Member "
                       "must satisfy enum value set: [SPECIFIC_ATTRIBUTES, COUNT, ALL_ATTRIBUTES, "
                       "ALL_PROJECTED_ATTRIBUTES]")


@pytest.mark.parametrize(("condition", "values", "message"), [
    ("pk = :p", {":p": {"N": "1"}}, "One or more parameter values were invalid: Condition parameter type does not "
                                    "match schema type"),
    ("pk = :p AND sk > :a", {":p": {"S": "p"}, ":a": {"N": "1"}},
     "One or more parameter values were invalid: Condition parameter type does not match schema type"),
    ("pk = :p AND begins_with(sk, :a)", {":p": {"S": "p"}, ":a": {"B": b"x"}},
     "One or more parameter values were invalid: Condition parameter type does not match schema type"),
    ("sk = :p", {":p": {"S": "p"}}, "Query condition missed key schema element: pk"),
    ("pk = :p AND sk <> :p", {":p": {"S": "p"}}, "Invalid operator used in "
                                                 "KeyConditionExpression: <>"),
    ("pk = :p", {":p": {"S": ""}}, "One or more parameter values are not valid. The AttributeValue for a key "
                                   "attribute cannot contain an empty string value. Key: pk"),
])
def test_key_condition_validation(ddb, table, condition, values, message):
    """Key conditions are checked against the schema, with DynamoDB's messages."""
    assert fails(ddb.query, TableName=table, KeyConditionExpression=condition,
                 ExpressionAttributeValues=values) == ("ValidationException", message)


def test_missing_key_condition(ddb, table):
    """A Query needs a key condition."""
    assert fails(ddb.query, TableName=table) == (
        "ValidationException",
        "Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.")


def test_unknown_table(ddb):
    """A Query of a missing table is ResourceNotFoundException."""
    assert fails(ddb.query, TableName="nope-missing", KeyConditionExpression="pk = :p",
                 ExpressionAttributeValues=PK) == ("ResourceNotFoundException", "Requested resource not found")


@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("limit", [1, 3, 10])
def test_limit_pagination(ddb, table, forward, limit):
    """Paging with Limit visits every item once in order, in both directions; a full last page still has a key."""
    got = pages(ddb.query, TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues=PK,
                Limit=limit, ScanIndexForward=forward)
    keys = [sk for page in got for sk in sks(page)]
    want = [f"k{i:02d}" for i in (range(10) if forward else range(9, -1, -1))]
    assert keys == want
    assert [page["Count"] for page in got] == [limit] * (10 // limit) + [10 % limit]
    if 10 % limit == 0:
        # Limit reached on the very last item still returns LastEvaluatedKey; the page after it is empty.
        assert got[-2]["LastEvaluatedKey"]["sk"]["S"] == want[-1]


def test_exclusive_start_key_mid_range(ddb, table):
    """A hand-made ExclusiveStartKey resumes strictly after it, with or without an item under it."""
    page = ddb.query(TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues=PK,
                     ExclusiveStartKey={"pk": {"S": "p"}, "sk": {"S": "k05x"}})
    assert sks(page) == ["k06", "k07", "k08", "k09"]
    page = ddb.query(TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues=PK,
                     ExclusiveStartKey={"pk": {"S": "p"}, "sk": {"S": "k05"}}, ScanIndexForward=False)
    assert sks(page) == ["k04", "k03", "k02", "k01", "k00"]


@pytest.mark.parametrize(("start", "message"), [
    ({"pk": {"S": "p"}}, "The provided starting key is invalid"),
    ({"pk": {"S": "p"}, "sk": {"S": "k"}, "x": {"S": "y"}}, "The provided starting key is invalid"),
    # The key's attributes with a value of the wrong type: the schema mismatch is named (issue 30).
    ({"pk": {"S": "p"}, "sk": {"N": "1"}},
     "The provided starting key is invalid: The provided key element does not match the schema"),
    ({"pk": {"S": "p"}, "other": {"S": "k"}}, "The provided starting key is invalid"),
    ({"pk": {"S": "q"}, "sk": {"S": "k01"}},
     "The provided starting key is outside query boundaries based on provided condition"),
])
def test_exclusive_start_key_invalid(ddb, table, start, message):
    """A malformed or foreign ExclusiveStartKey is a ValidationException."""
    assert fails(ddb.query, TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues=PK,
                 ExclusiveStartKey=start) == ("ValidationException", message)


@pytest.mark.parametrize(("condition", "value", "start", "forward", "ok"), [
    ("sk >= :a", "k05", "k05", True, True),
    ("sk >= :a", "k05", "k04", True, False),
    ("sk >= :a", "k05", "k05", False, False),
    ("sk >= :a", "k05", "k09", False, True),
    ("sk <= :a", "k05", "k05", False, True),
    ("sk <= :a", "k05", "k05", True, False),
    ("sk > :a", "k05", "k05", True, True),
    ("sk < :a", "k05", "k05", False, True),
    ("sk = :a", "k05", "k05", True, False),
    ("begins_with(sk, :a)", "k0", "k03", True, True),
    ("begins_with(sk, :a)", "k0", "j", True, False),
])
def test_exclusive_start_key_range_predicate(ddb, table, condition, value, start, forward, ok):
    """The start key must leave a non-empty part of the sort-key range to read, in the read's direction."""
    kwargs = {"TableName": table, "KeyConditionExpression": f"pk = :p AND {condition}",
              "ExpressionAttributeValues": {**PK, ":a": {"S": value}},
              "ExclusiveStartKey": {"pk": {"S": "p"}, "sk": {"S": start}}, "ScanIndexForward": forward}
    if ok:
        ddb.query(**kwargs)
    else:
        assert fails(ddb.query, **kwargs) == ("ValidationException",
                                              "The provided starting key does not match the range key predicate")


@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize(("condition", "values", "expected"), [
    ("sk = :a", {":a": "k05"}, ["k05"]),
    ("sk <= :a", {":a": "k02"}, ["k00", "k01", "k02"]),
    ("sk >= :a", {":a": "k07"}, ["k07", "k08", "k09"]),
    ("sk BETWEEN :a AND :b", {":a": "k03", ":b": "k05"}, ["k03", "k04", "k05"]),
    ("begins_with(sk, :a)", {":a": "k0"}, [f"k{i:02d}" for i in range(10)]),
])
def test_pages_end_on_a_closed_bound(ddb, table, condition, values, expected, forward):
    """Paging one item at a time through a sort range with a closed end: every LastEvaluatedKey is a start key
    the next request accepts (a page stopping on the closed end itself has none: nothing can follow it)."""
    paginator = ddb.get_paginator("query")
    pages = list(paginator.paginate(
        TableName=table, KeyConditionExpression=f"pk = :p AND {condition}", ScanIndexForward=forward,
        ExpressionAttributeValues={**PK, **{name: {"S": value} for name, value in values.items()}},
        PaginationConfig={"PageSize": 1}))
    found = [item["sk"]["S"] for page in pages for item in page["Items"]]
    assert found == (expected if forward else expected[::-1])
    closed_end = ("sk = :a", "sk BETWEEN :a AND :b", "sk <= :a" if forward else "sk >= :a")
    if condition in closed_end:  # the last item read is the range's end: no key, so no empty page after it
        assert len(pages) == len(expected) and "LastEvaluatedKey" not in pages[-1]


@pytest.fixture(scope="module")
def big_partition(ddb: Any) -> str:
    """25 items of ~100 KB in one partition (2.5 MB), plus a neighbour partition."""
    name = create_table(ddb, range_type="N")
    blob = "x" * 100_000
    put_all(ddb, name, [{"pk": {"S": "p"}, "sk": {"N": str(i)}, "d": {"S": blob}} for i in range(25)])
    ddb.put_item(TableName=name, Item={"pk": {"S": "o"}, "sk": {"N": "0"}, "d": {"S": blob}})
    return name


@pytest.mark.parametrize("forward", [True, False])
def test_one_megabyte_pages(ddb, big_partition, forward):
    """Pages stop once the items read reach 1 MB, each with a LastEvaluatedKey, in both directions."""
    got = pages(ddb.query, TableName=big_partition, KeyConditionExpression="pk = :p", ExpressionAttributeValues=PK,
                ScanIndexForward=forward)
    counts = [page["ScannedCount"] for page in got]
    assert counts == [11, 11, 3]
    assert all("LastEvaluatedKey" in page for page in got[:-1])
    keys = [int(item["sk"]["N"]) for page in got for item in page["Items"]]
    assert keys == (list(range(25)) if forward else list(range(24, -1, -1)))


def test_one_megabyte_measured_before_filter(ddb, big_partition):
    """A filter that drops everything still pages at 1 MB read: empty pages with LastEvaluatedKey."""
    got = pages(ddb.query, TableName=big_partition, KeyConditionExpression="pk = :p",
                FilterExpression="attribute_not_exists(d)", ExpressionAttributeValues=PK)
    assert [(page["Count"], page["ScannedCount"]) for page in got] == [(0, 11), (0, 11), (0, 3)]
    assert got[0]["LastEvaluatedKey"] == {"pk": {"S": "p"}, "sk": {"N": "10"}}


def test_one_megabyte_with_projection_and_count(ddb, big_partition):
    """The page limit counts whole items even when a projection or COUNT returns less."""
    got = pages(ddb.query, TableName=big_partition, KeyConditionExpression="pk = :p", ExpressionAttributeValues=PK,
                Select="COUNT")
    assert [page["Count"] for page in got] == [11, 11, 3]
    got = pages(ddb.query, TableName=big_partition, KeyConditionExpression="pk = :p", ExpressionAttributeValues=PK,
                ProjectionExpression="sk", Limit=4)
    assert [page["Count"] for page in got] == [4] * 6 + [1]
    assert got[0]["Items"][0] == {"sk": {"N": "0"}}


def test_binary_keys_round_trip_in_last_evaluated_key(ddb):
    """LastEvaluatedKey carries binary keys back exactly, so pagination resumes where it stopped."""
    name = create_table(ddb, hash_type="B", range_type="B")
    values = [b for b in BINARIES if b]
    put_all(ddb, name, [{"pk": {"B": b"\xff"}, "sk": {"B": b}} for b in values])
    got = pages(ddb.query, TableName=name, KeyConditionExpression="pk = :p",
                ExpressionAttributeValues={":p": {"B": b"\xff"}}, Limit=2)
    assert [i["sk"]["B"] for page in got for i in page["Items"]] == sorted(values)


@pytest.mark.parametrize("condition", ["sk = :e", "sk > :e", "begins_with(sk, :e)", "sk BETWEEN :e AND :a"])
def test_empty_sort_key_operand_is_refused(ddb, table, condition):
    """An empty string as a sort-key operand is refused as an empty key value is (DynamoDB refuses it when it reads
    the key condition); the partition key's emptiness is reported first."""
    values = {":p": {"S": "p"}, ":e": {"S": ""}, ":a": {"S": "a"}}
    assert fails(ddb.query, TableName=table, KeyConditionExpression=f"pk = :p AND {condition}",
                 ExpressionAttributeValues={n: v for n, v in values.items() if n in f":p {condition}"}) == (
        "ValidationException", "One or more parameter values are not valid. The AttributeValue for a key attribute "
                               "cannot contain an empty string value. Key: sk")
    used = {name: value for name, value in values.items() if name in condition}
    assert fails(ddb.query, TableName=table, KeyConditionExpression=f"pk = :e AND {condition}",
                 ExpressionAttributeValues=used)[1].endswith("Key: pk")
