"""Scan through boto3: filters, Select, Limit, 1 MB pages, ExclusiveStartKey and parallel scan segments."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.test_query import fails, pages, put_all, raw_error
from tests.conftest import create_table, unique_name


@pytest.fixture(scope="module")
def table(ddb: Any) -> str:
    """30 items: pk p0..p9, sk s0..s2, n = 3*i + j."""
    name = create_table(ddb)
    put_all(ddb, name, [{"pk": {"S": f"p{i}"}, "sk": {"S": f"s{j}"}, "n": {"N": str(3 * i + j)}}
                        for i in range(10) for j in range(3)])
    return name


def keys_of(got: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(item["pk"]["S"], item["sk"]["S"]) for page in got for item in page.get("Items", [])]


def test_scan_everything(ddb, table):
    """A Scan returns every item once, each partition's items together in sort order."""
    page = ddb.scan(TableName=table)
    keys = keys_of([page])
    assert sorted(keys) == [(f"p{i}", f"s{j}") for i in range(10) for j in range(3)]
    assert page["Count"] == page["ScannedCount"] == 30 and "LastEvaluatedKey" not in page
    for i in range(0, 30, 3):
        assert keys[i][0] == keys[i + 1][0] == keys[i + 2][0]
        assert [k[1] for k in keys[i:i + 3]] == ["s0", "s1", "s2"]


@pytest.mark.parametrize("limit", [1, 4, 7, 30])
def test_limit_pagination(ddb, table, limit):
    """Paging with Limit visits every item exactly once, in the same order as one big page."""
    got = pages(ddb.scan, TableName=table, Limit=limit)
    assert keys_of(got) == keys_of([ddb.scan(TableName=table)])
    assert all(page["ScannedCount"] == limit for page in got[:-1])


def test_filter_and_counts(ddb, table):
    """Scan filters may use key attributes; Limit counts items evaluated before the filter."""
    page = ddb.scan(TableName=table, FilterExpression="sk = :s AND n < :n",
                    ExpressionAttributeValues={":s": {"S": "s1"}, ":n": {"N": "10"}})
    assert sorted(keys_of([page])) == [("p0", "s1"), ("p1", "s1"), ("p2", "s1")]
    assert (page["Count"], page["ScannedCount"]) == (3, 30)
    page = ddb.scan(TableName=table, FilterExpression="n = :n", ExpressionAttributeValues={":n": {"N": "-1"}},
                    Limit=5)
    assert (page["Count"], page["ScannedCount"], page["Items"]) == (0, 5, [])
    assert "LastEvaluatedKey" in page


def test_select_and_projection(ddb, table):
    """COUNT drops Items; a projection keeps only its paths."""
    page = ddb.scan(TableName=table, Select="COUNT")
    assert "Items" not in page and page["Count"] == 30
    page = ddb.scan(TableName=table, ProjectionExpression="#n", ExpressionAttributeNames={"#n": "n"}, Limit=2)
    assert all(set(item) == {"n"} for item in page["Items"])


@pytest.mark.parametrize(("extra", "message"), [
    ({"Select": "ALL_ATTRIBUTES", "ProjectionExpression": "n"},
     "1 validation error detected: Cannot specify the ProjectionExpression when choosing to get ALL_ATTRIBUTES"),
    # Bare on a Scan, inside the envelope on a Query (captures of real DynamoDB).
    ({"Select": "SPECIFIC_ATTRIBUTES"}, "Must specify the AttributesToGet or ProjectionExpression when choosing to "
                                        "get SPECIFIC_ATTRIBUTES"),
    ({"Select": "ALL_PROJECTED_ATTRIBUTES"},
     "1 validation error detected: ALL_PROJECTED_ATTRIBUTES can be used only when Querying using an IndexName"),
    ({"IndexName": "idx"}, "The table does not have the specified index: idx"),
    ({"Segment": 1}, "The TotalSegments parameter is required but was not present in the request when Segment "
                     "parameter is present"),
    ({"TotalSegments": 2}, "The Segment parameter is required but was not present in the request when parameter "
                           "TotalSegments is present"),
    ({"Segment": 2, "TotalSegments": 2}, "The Segment parameter is zero-based and must be less than parameter "
                                         "TotalSegments: Segment: 2 is not less than TotalSegments: 2"),
    ({"FilterExpression": "n = :v"}, "Invalid FilterExpression: An expression attribute value used in expression "
                                     "is not defined; attribute value: :v"),
])
def test_parameter_validation(ddb, table, extra, message):
    """Invalid Select, index and segment combinations are rejected with DynamoDB's messages."""
    assert fails(ddb.scan, TableName=table, **extra) == ("ValidationException", message)


@pytest.mark.parametrize(("extra", "message"), [
    ({"TotalSegments": 0, "Segment": 0}, "1 validation error detected: Value '0' at 'totalSegments' failed to "
                                         "satisfy constraint: Member must have value greater than or equal to 1"),
    ({"TotalSegments": 1000001, "Segment": 0},
     "1 validation error detected: Value '1000001' at 'totalSegments' failed to satisfy constraint: Member must "
     "have value less than or equal to 1000000"),
    ({"TotalSegments": 2, "Segment": -1}, "1 validation error detected: Value '-1' at 'segment' failed to satisfy "
                                          "constraint: Member must have value greater than or equal to 0"),
    ({"Limit": 0}, "1 validation error detected: Value '0' at 'limit' failed to satisfy constraint: Member must "
                   "have value greater than or equal to 1"),
])
def test_range_validation(server, table, extra, message):
    """Segment, TotalSegments and Limit ranges (boto3 checks these too, so the requests go out raw)."""
    assert raw_error(server, "Scan", {"TableName": table, **extra}) == ("ValidationException", message)


def test_unknown_table(ddb):
    """A Scan of a missing table is ResourceNotFoundException."""
    assert fails(ddb.scan, TableName="missing-table") == ("ResourceNotFoundException", "Requested resource not found")


@pytest.mark.parametrize("start", [
    {"pk": {"S": "p1"}},
    {"pk": {"S": "p1"}, "sk": {"N": "1"}},
    {"pk": {"S": "p1"}, "sk": {"S": "s1"}, "n": {"N": "1"}},
])
def test_exclusive_start_key_schema(ddb, table, start):
    """A start key that does not match the key schema is rejected."""
    assert fails(ddb.scan, TableName=table, ExclusiveStartKey=start) == (
        "ValidationException", "The provided starting key is invalid: The provided key element does not match the "
                               "schema")


def test_exclusive_start_key_resumes(ddb, table):
    """Scan resumes strictly after any start key, even one naming no item."""
    full = keys_of([ddb.scan(TableName=table)])
    page = ddb.scan(TableName=table, ExclusiveStartKey={"pk": {"S": full[4][0]}, "sk": {"S": full[4][1]}})
    assert keys_of([page]) == full[5:]
    page = ddb.scan(TableName=table, ExclusiveStartKey={"pk": {"S": full[4][0]}, "sk": {"S": "s1a"}})
    assert keys_of([page]) == full[5:]


def test_one_megabyte_pages(ddb):
    """A Scan page stops once the items read reach 1 MB."""
    name = create_table(ddb, range_type=None)
    put_all(ddb, name, [{"pk": {"S": f"k{i:02d}"}, "d": {"S": "x" * 100_000}} for i in range(23)])
    got = pages(ddb.scan, TableName=name, ProjectionExpression="pk")
    assert [page["Count"] for page in got] == [11, 11, 1]
    assert sorted(k["pk"]["S"] for page in got for k in page["Items"]) == [f"k{i:02d}" for i in range(23)]


def segment_keys(ddb: Any, table: str, total: int, limit: int | None) -> list[list[str]]:
    """The keys of each segment of a parallel scan, every segment paginated on its own."""
    out = []
    for segment in range(total):
        kwargs: dict[str, Any] = {"TableName": table, "Segment": segment, "TotalSegments": total}
        if limit is not None:
            kwargs["Limit"] = limit
        out.append([item["pk"]["S"] for page in pages(ddb.scan, **kwargs) for item in page["Items"]])
    return out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.sets(st.text(min_size=1, max_size=6), min_size=0, max_size=30),
       total=st.sampled_from([1, 2, 3, 4, 7, 16]), limit=st.one_of(st.none(), st.integers(1, 5)))
def test_parallel_scan_completeness(ddb, keys, total, limit):
    """Segments are disjoint and together hold every item exactly once, however the table and split look."""
    name = create_table(ddb, unique_name("par"), range_type=None)
    try:
        put_all(ddb, name, [{"pk": {"S": k}} for k in keys])
        segments = segment_keys(ddb, name, total, limit)
        flat = [k for seg in segments for k in seg]
        assert len(flat) == len(set(flat)) and set(flat) == keys
    finally:
        ddb.delete_table(TableName=name)


def test_many_segments(ddb, table):
    """With a million segments, the items spread over distinct segments and each is found in its own."""
    everything = {k for k in keys_of([ddb.scan(TableName=table)])}
    found: set[tuple[str, str]] = set()
    for segment in (0, 1, 999_999):
        found |= set(keys_of([ddb.scan(TableName=table, Segment=segment, TotalSegments=1_000_000)]))
    assert found <= everything
    one = keys_of([ddb.scan(TableName=table, Segment=0, TotalSegments=1)])
    assert set(one) == everything


def test_exclusive_start_key_other_segment(ddb, table):
    """A start key outside the requested segment is rejected, naming the segment."""
    first = ddb.scan(TableName=table, Segment=0, TotalSegments=2, Limit=1)
    start = first["LastEvaluatedKey"]
    ddb.scan(TableName=table, Segment=0, TotalSegments=2, ExclusiveStartKey=start)
    assert fails(ddb.scan, TableName=table, Segment=1, TotalSegments=2, ExclusiveStartKey=start) == (
        "ValidationException", "The provided starting key is invalid: Invalid ExclusiveStartKey. Please use "
                               "ExclusiveStartKey with correct Segment. TotalSegments: 2 Segment: 1")
