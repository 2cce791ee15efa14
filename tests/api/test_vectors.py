"""Vector indexes and SearchVectors through boto3: definitions and their refusals, writes checked against the
index, every distance function against a brute-force reference computed here, search conditions, projections and
capacity (issue 31)."""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import pytest
from botocore.exceptions import ClientError

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
