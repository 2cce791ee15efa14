"""Exact nearest-neighbour search over one search partition, vectorised with numpy.

A partition's vectors are loaded once into one float32 matrix (rows in the order the engine read them) with their
norms and INLINE_FILTER columns, and kept in `PartitionCache` under the partition's version: every write that
changes a partition's entries raises its version in the same transaction, so a search that reads the version in
its own snapshot either reuses the matrix or reloads it, and never sees a vector whose item is gone. A search is
one matrix-vector product over the rows its conditions leave (ranked in float32), a partial selection of 2*TopK
candidates, and their exact scores recomputed in float64 from the stored float32 values (so the order is that of
the scores returned).

This is the only module that imports numpy, and it is imported where a search first runs (see
`storage/sqlite_vectors.py`), so a server that never searches vectors never loads it (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

# One BLAS thread, set before numpy loads its BLAS: a server runs a worker per core already, and a search's one
# matrix-vector product is bound by memory, not arithmetic (100,000 x 256 on this 2-core machine under load: 28 ms
# median with one thread, 41 ms with two). A value set in the environment wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import numpy.typing as npt
import orjson

from openddb.model.schema import VectorDistance

Matrix = npt.NDArray[np.float32]
# Rows an engine reads for a partition: (table partition key, table sort key, packed vector, filters JSON).
EntryRow = tuple[bytes, bytes, bytes, bytes]
# Partitions a process keeps loaded; the least recently searched is dropped past this many.
MAX_PARTITIONS = 64


@dataclass(slots=True)
class Partition:
    version: int
    keys: list[tuple[bytes, bytes]]
    matrix: Matrix
    filters: list[npt.NDArray[np.object_]]
    # What a search's first pass ranks on, beside the product with the search vector (float32: the pass is over
    # every row): each row's inverse norm (COSINE) and squared norm (EUCLIDEAN).
    inverse_norms: Matrix
    squared_norms: Matrix


def load(version: int, rows: Iterable[EntryRow], dimensions: int, filter_count: int) -> Partition:
    keys: list[tuple[bytes, bytes]] = []
    vectors: list[bytes] = []
    columns: list[list[str | None]] = [[] for _ in range(filter_count)]
    for tpk, tsk, vector, filters in rows:
        keys.append((bytes(tpk), bytes(tsk)))
        vectors.append(bytes(vector))
        if filter_count:
            for column, value in zip(columns, orjson.loads(filters)):
                column.append(value)
    matrix = np.frombuffer(b"".join(vectors), dtype="<f4").reshape(len(keys), dimensions)
    squared = np.einsum("ij,ij->i", matrix, matrix)  # (float32, no copy of the matrix: the first pass only)
    with np.errstate(divide="ignore"):
        inverse = np.where(squared > 0, 1.0 / np.sqrt(squared), 0.0).astype(np.float32)
    return Partition(version, keys, matrix, [np.array(column, dtype=object) for column in columns], inverse,
                     squared)


class PartitionCache:
    """Loaded partitions by (table id, index id, partition); index ids are never reused, so neither are keys."""

    def __init__(self) -> None:
        self._partitions: OrderedDict[tuple[int, int, bytes], Partition] = OrderedDict()

    def get(self, key: tuple[int, int, bytes], version: int) -> Partition | None:
        found = self._partitions.get(key)
        if found is None or found.version != version:
            return None
        self._partitions.move_to_end(key)
        return found

    def put(self, key: tuple[int, int, bytes], partition: Partition) -> None:
        self._partitions[key] = partition
        self._partitions.move_to_end(key)
        while len(self._partitions) > MAX_PARTITIONS:
            self._partitions.popitem(last=False)


def search(partition: Partition, query: list[float], k: int, distance: VectorDistance,
           conditions: list[tuple[int, str]]) -> list[tuple[int, float]]:
    """The `k` best rows (index into the partition, score), best first: COSINE (1 - cosine similarity, 0 to 2)
    and EUCLIDEAN (the distance) smallest first, DOT_PRODUCT largest first (the API Reference, SearchVectors).
    `conditions`: (INLINE_FILTER column, value) pairs a row must all equal. Ties are broken by table key."""
    rows: npt.NDArray[np.intp] | None = None
    if conditions:
        mask = np.ones(len(partition.keys), dtype=bool)
        for column, value in conditions:
            mask &= partition.filters[column] == value
        rows = np.flatnonzero(mask)
    matrix = partition.matrix if rows is None else partition.matrix[rows]
    if matrix.shape[0] == 0:
        return []
    q32 = np.asarray(query, dtype=np.float32)
    products = matrix @ q32
    if distance == "DOT_PRODUCT":
        rough = np.negative(products, out=products)
    elif distance == "COSINE":  # (the query's norm is the same for every row)
        inverse = partition.inverse_norms if rows is None else partition.inverse_norms[rows]
        rough = np.multiply(products, inverse, out=products)
        np.negative(rough, out=rough)
    else:  # squared distance, less the query's own squared norm
        squared = partition.squared_norms if rows is None else partition.squared_norms[rows]
        rough = np.subtract(squared, np.multiply(products, 2.0, out=products), out=products)
    wanted = min(matrix.shape[0], 2 * k)
    chosen = np.argpartition(rough, wanted - 1)[:wanted] if wanted < matrix.shape[0] else np.arange(wanted)
    q64 = q32.astype(np.float64)
    q_norm = float(np.linalg.norm(q64))
    scored: list[tuple[float, tuple[bytes, bytes], int]] = []
    for position in chosen.tolist():
        row = position if rows is None else int(rows[position])
        score = _score(partition.matrix[row].astype(np.float64), q64, q_norm, distance)
        rank = -score if distance == "DOT_PRODUCT" else score
        scored.append((rank, partition.keys[row], row))
    scored.sort()
    return [(row, -rank if distance == "DOT_PRODUCT" else rank) for rank, _key, row in scored[:k]]


def _score(vector: npt.NDArray[np.float64], query: npt.NDArray[np.float64], q_norm: float,
           distance: VectorDistance) -> float:
    """A row's exact score, in float64 from its stored float32 values."""
    if distance == "DOT_PRODUCT":
        return float(vector @ query)
    if distance == "EUCLIDEAN":
        return float(np.linalg.norm(vector - query))
    norm = float(np.linalg.norm(vector))
    if norm == 0.0 or q_norm == 0.0:
        return 1.0  # best guess: a zero vector has no direction, so it is scored as orthogonal to every vector
    return float(1.0 - (vector @ query) / (norm * q_norm))
