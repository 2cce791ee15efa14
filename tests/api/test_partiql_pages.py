"""PartiQL SELECT pages bounded at 1 MB read, as DynamoDB bounds a Query's or a Scan's page: a SELECT of several
partitions (IN, OR on the partition key) reads 1 MB in all per page, not 1 MB per partition, and NextToken resumes
exactly where the page stopped. Items of about 200 KB make the line fall inside a partition."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import unique_name

PAD = 200_000  # bytes of padding per item: five items stay under 1 MB (1,048,576 bytes), the sixth crosses it


@pytest.fixture(scope="module")
def big(ddb: Any) -> str:
    """Three partitions p0..p2 of four items of about 200 KB each, and a global index `byg` on `g` (g0..g2, as
    the partition) projecting every attribute."""
    name = unique_name("pqlmb")
    ddb.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": attribute, "AttributeType": kind}
                              for attribute, kind in (("pk", "S"), ("sk", "N"), ("g", "S"))],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[{"IndexName": "byg", "Projection": {"ProjectionType": "ALL"}, "KeySchema": [
            {"AttributeName": "g", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]}])
    for p in range(3):
        for s in range(4):
            ddb.put_item(TableName=name, Item={"pk": {"S": f"p{p}"}, "sk": {"N": str(s)}, "g": {"S": f"g{p}"},
                                               "pad": {"S": "x" * PAD}})
    return name


def _pages(ddb: Any, statement: str, **options: Any) -> list[dict[str, Any]]:
    pages = []
    token = None
    while True:
        page = ddb.execute_statement(Statement=statement, **options, **({"NextToken": token} if token else {}))
        pages.append(page)
        token = page.get("NextToken")
        if token is None:
            return pages


def _keys(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(item["pk"]["S"], item["sk"]["N"]) for item in items]


def _partition(ddb: Any, table: str, key: str, value: str, index: str | None) -> list[tuple[str, str]]:
    where = {"IndexName": index} if index else {}
    return _keys(ddb.query(TableName=table, KeyConditionExpression=f"{key} = :p", **where,
                           ExpressionAttributeValues={":p": {"S": value}})["Items"])


@pytest.mark.parametrize(("source", "where"), [
    ("", "pk IN ['p0', 'p1', 'p2']"),
    ("", "pk = 'p0' OR pk = 'p1' OR pk = 'p2'"),
    ('."byg"', "g IN ['g0', 'g1', 'g2']"),
])
def test_a_page_of_several_partitions_reads_1_mb_in_all(ddb, big, source, where):
    """The first page holds the first partition's four items and the second's first two (the sixth item crosses
    1 MB and ends the page, as a Query's crossing item does); the next resumes with the second partition's third
    item. Bounds per partition would have given ten items on the first page. A table's partitions and an index's
    alike."""
    pages = _pages(ddb, f'SELECT pk, sk FROM "{big}"{source} WHERE {where}', ReturnConsumedCapacity="TOTAL")
    index = "byg" if source else None
    first, second, third = (_partition(ddb, big, "g" if index else "pk", f"{'g' if index else 'p'}{n}", index)
                            for n in range(3))
    assert _keys(pages[0]["Items"]) == first + second[:2]
    assert _keys(pages[1]["Items"]) == second[2:] + third
    assert [_keys(page["Items"]) for page in pages[2:]] in ([], [[]])
    # each page is charged for what it read: six items of about 200 KB in 4 KB units, eventually consistent
    for page in pages[:2]:
        assert page["ConsumedCapacity"]["CapacityUnits"] == pytest.approx(6 * PAD / 4096 / 2, abs=2)


def test_a_scan_backed_page_is_the_scans_page(ddb, big):
    """A SELECT that scans stops at 1 MB as the Scan does (six items: the sixth crosses the line), and its pages
    follow the native Scan's page for page, to the same twelve items."""
    pages = _pages(ddb, f'SELECT pk, sk FROM "{big}" WHERE sk >= 0')
    native, start = [], None
    while True:
        page = ddb.scan(TableName=big, ProjectionExpression="pk, sk", FilterExpression="sk >= :z",
                        ExpressionAttributeValues={":z": {"N": "0"}},
                        **({"ExclusiveStartKey": start} if start else {}))
        native.append(page["Items"])
        start = page.get("LastEvaluatedKey")
        if start is None:
            break
    assert [page["Items"] for page in pages] == native
    assert len(pages[0]["Items"]) == 6
    assert sorted(_keys([item for page in pages for item in page["Items"]])) == sorted(
        (f"p{p}", str(s)) for p in range(3) for s in range(4))
