"""Exact nearest-neighbour search over one search partition, vectorised with numpy.

A partition's vectors are loaded once into one float32 matrix (rows in no particular order) with their norms and
INLINE_FILTER columns, and kept in `PartitionCache` under the partition's state: its epoch (a random stamp given
when the store first holds the partition) and its change sequence, which every write that changes the partition's
entries raises by one in the same transaction, stamping the entries it writes with the new value and leaving a
tombstone (the key and that value) for each entry it removes. A search reads the state in its own snapshot and,
if the cached matrix is behind, reads only the entries and tombstones stamped after it (`Changes`) and applies
them in place (`apply`), so it never sees a vector whose item is gone nor misses one written before its snapshot.
A search whose snapshot may yet be rolled back (inside a write transaction) leaves the cache as it is and searches
the cached rows less the changed keys, plus the changed entries (`search_changed`). Tombstones older than
`RETAIN` changes may be purged by the writers, so a cache that far behind is reloaded whole.

A search is one matrix-vector product (numpy's einsum) over the rows its conditions leave (ranked in float32), a
partial selection of 2*TopK candidates, and their exact scores recomputed in float64 from the stored float32 values
(so the order is that of the scores returned).

This is the only module that imports numpy, and it is imported where a search first runs (see
`storage/sqlite_vectors.py`), so a server that never searches vectors never loads it (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

# One BLAS thread, set before numpy loads its BLAS: a server runs a worker per core already, and a search's one
# matrix-vector product is bound by memory, not arithmetic (100,000 x 256 on this 2-core machine under load: 28 ms
# median with one thread, 41 ms with two). A value set in the environment wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import numpy.typing as npt
import orjson

from openddb.model.schema import VectorDistance
from openddb.vectors.entries import RETAIN, Changes, EntryRow

Matrix = npt.NDArray[np.float32]
Key = tuple[bytes, bytes]
# Partitions a process keeps loaded; the least recently searched is dropped past this many.
MAX_PARTITIONS = 64


@dataclass(slots=True)
class Partition:
    """A partition's rows at (epoch, seq): the first `len(keys)` rows of each store are live, the rest spare room
    for rows a change adds."""

    epoch: int
    seq: int
    keys: list[Key]
    positions: dict[Key, int]
    store: Matrix
    filter_store: list[npt.NDArray[np.object_]]
    # What a search's first pass ranks on, beside the product with the search vector (float32: the pass is over
    # every row): each row's inverse norm (COSINE) and squared norm (EUCLIDEAN).
    inverse_store: Matrix
    squared_store: Matrix

    @property
    def matrix(self) -> Matrix:
        return self.store[:len(self.keys)]

    @property
    def filters(self) -> list[npt.NDArray[np.object_]]:
        return [column[:len(self.keys)] for column in self.filter_store]

    @property
    def inverse_norms(self) -> Matrix:
        return self.inverse_store[:len(self.keys)]

    @property
    def squared_norms(self) -> Matrix:
        return self.squared_store[:len(self.keys)]


def load(epoch: int, seq: int, rows: Iterable[EntryRow], dimensions: int, filter_count: int) -> Partition:
    keys: list[Key] = []
    vectors: list[bytes] = []
    columns: list[list[str | None]] = [[] for _ in range(filter_count)]
    for tpk, tsk, vector, filters in rows:
        keys.append((bytes(tpk), bytes(tsk)))
        vectors.append(bytes(vector))
        if filter_count:
            for column, value in zip(columns, orjson.loads(filters)):
                column.append(value)
    count = len(keys)
    capacity = count + max(64, count // 16)  # (room for rows added later without copying the matrix)
    store = np.empty((capacity, dimensions), dtype=np.float32)
    store[:count] = np.frombuffer(b"".join(vectors), dtype="<f4").reshape(count, dimensions)
    del vectors
    filter_store = []
    for column in columns:
        held = np.empty(capacity, dtype=object)
        held[:count] = column
        filter_store.append(held)
    partition = Partition(epoch, seq, keys, {key: n for n, key in enumerate(keys)}, store, filter_store,
                          np.zeros(capacity, dtype=np.float32), np.zeros(capacity, dtype=np.float32))
    _norms(partition, 0, count)
    return partition


def _norms(partition: Partition, start: int, stop: int) -> None:
    """The norms of rows start..stop (float32, no copy of the matrix)."""
    rows = partition.store[start:stop]
    squared = np.einsum("ij,ij->i", rows, rows)
    with np.errstate(divide="ignore"):
        inverse = np.where(squared > 0, 1.0 / np.sqrt(squared), 0.0).astype(np.float32)
    partition.squared_store[start:stop] = squared
    partition.inverse_store[start:stop] = inverse


def apply(partition: Partition, changes: Changes, seq: int) -> None:
    """Bring `partition` up to `seq` in place: removed keys' rows go (the last row takes each one's place), then
    each written entry replaces its key's row or is added."""
    keys, positions = partition.keys, partition.positions
    for key in changes.removed:
        row = positions.pop(key, None)
        if row is None:
            continue
        last = len(keys) - 1
        if row != last:
            moved = keys[last]
            keys[row], positions[moved] = moved, row
            for store in (partition.store, partition.inverse_store, partition.squared_store,
                          *partition.filter_store):
                store[row] = store[last]
        keys.pop()
    for tpk, tsk, vector, filters in changes.written:
        key = (bytes(tpk), bytes(tsk))
        row = positions.get(key, len(keys))
        if row == len(keys):
            _make_room(partition)
            keys.append(key)
            positions[key] = row
        partition.store[row] = np.frombuffer(bytes(vector), dtype="<f4")
        for column, value in zip(partition.filter_store, orjson.loads(filters) if partition.filter_store else ()):
            column[row] = value
        _norms(partition, row, row + 1)
    partition.seq = seq


def _make_room(partition: Partition) -> None:
    """One more row's room, growing the stores by a quarter when they are full."""
    count, capacity = len(partition.keys), partition.store.shape[0]
    if count < capacity:
        return
    grown = capacity + max(64, capacity // 4)
    store = np.empty((grown, partition.store.shape[1]), dtype=np.float32)
    store[:count] = partition.store[:count]
    partition.store = store
    partition.inverse_store = np.resize(partition.inverse_store, grown)
    partition.squared_store = np.resize(partition.squared_store, grown)
    partition.filter_store = [np.resize(column, grown) for column in partition.filter_store]


class PartitionCache:
    """Loaded partitions by (table id, index id, partition); index ids are never reused, so neither are keys."""

    def __init__(self) -> None:
        self._partitions: OrderedDict[tuple[int, int, bytes], Partition] = OrderedDict()

    def get(self, key: tuple[int, int, bytes]) -> Partition | None:
        found = self._partitions.get(key)
        if found is not None:
            self._partitions.move_to_end(key)
        return found

    def put(self, key: tuple[int, int, bytes], partition: Partition) -> None:
        self._partitions[key] = partition
        self._partitions.move_to_end(key)
        while len(self._partitions) > MAX_PARTITIONS:
            self._partitions.popitem(last=False)

    def drop(self, key: tuple[int, int, bytes]) -> None:
        self._partitions.pop(key, None)


@dataclass(slots=True)
class Wanted:
    """A search: its vector, how many results, the index's distance function, and (INLINE_FILTER column, value)
    pairs a row must all equal."""

    query: list[float]
    k: int
    distance: VectorDistance
    conditions: list[tuple[int, str]]


class Source(Protocol):
    """How an engine reads one partition in the search's snapshot."""

    def rows(self) -> Iterable[EntryRow]: ...

    def changes(self, after: int) -> Changes: ...


def find(cache: PartitionCache, key: tuple[int, int, bytes], state: tuple[int, int], source: Source,
         shape: tuple[int, int], wanted: Wanted, final: bool) -> list[tuple[Key, float]]:
    """The search of one partition at `state` (its epoch and seq in the search's snapshot), through the cache:
    reused as it is, brought up to date, or loaded whole. `shape`: the index's dimensions and INLINE_FILTER count.
    `final`: the snapshot holds committed changes only, so the cache may keep what it reads."""
    epoch, seq = state
    cached = cache.get(key)
    if cached is None or cached.epoch != epoch or not 0 <= seq - cached.seq < RETAIN:
        loaded = load(epoch, seq, source.rows(), *shape)
        if final:
            cache.put(key, loaded)
        return search(loaded, wanted)
    if cached.seq == seq:
        return search(cached, wanted)
    changes = source.changes(cached.seq)
    if not final:
        return search_changed(cached, changes, wanted, shape)
    try:
        apply(cached, changes, seq)
    except BaseException:
        cache.drop(key)  # (half applied)
        raise
    return search(cached, wanted)


def search_changed(partition: Partition, changes: Changes, wanted: Wanted,
                   shape: tuple[int, int]) -> list[tuple[Key, float]]:
    """A search over `partition` as `changes` leave it, without changing it: its rows less those of the changed
    keys, and the entries written since, ranked together."""
    written = load(0, 0, changes.written, *shape)
    stale = [partition.positions[key] for key in [*changes.removed, *written.keys] if key in partition.positions]
    merged = search(partition, wanted, stale) + search(written, wanted)
    merged.sort(key=lambda hit: (-hit[1] if wanted.distance == "DOT_PRODUCT" else hit[1], hit[0]))
    return merged[:wanted.k]


def search(partition: Partition, wanted: Wanted, excluded: list[int] | None = None) -> list[tuple[Key, float]]:
    """The `k` best rows (table key, score), best first: COSINE (1 - cosine similarity, 0 to 2) and EUCLIDEAN
    (the distance) smallest first, DOT_PRODUCT largest first (the API Reference, SearchVectors). Rows whose
    positions are `excluded` are left out. Ties are broken by table key."""
    rows: npt.NDArray[np.intp] | None = None
    if wanted.conditions or excluded:
        mask = np.ones(len(partition.keys), dtype=bool)
        filters = partition.filters
        for column, value in wanted.conditions:
            mask &= filters[column] == value
        if excluded:
            mask[excluded] = False
        rows = np.flatnonzero(mask)
    matrix = partition.matrix if rows is None else partition.matrix[rows]
    if matrix.shape[0] == 0:
        return []
    distance, k = wanted.distance, wanted.k
    q32 = np.asarray(wanted.query, dtype=np.float32)
    # (numpy's own SIMD loop: OpenBLAS's sgemv for a row-major matrix took twice as long here, 9 ms against 4.5
    # for 100,000 x 256, where einsum streams the matrix at memory speed)
    rough = _rough(partition, np.einsum("ij,j->i", matrix, q32), rows, distance)
    count = matrix.shape[0]
    chosen = np.argpartition(rough, 2 * k - 1)[:2 * k] if 2 * k < count else np.arange(count)
    picked = (position if rows is None else int(rows[position]) for position in chosen.tolist())
    return rescored(((partition.keys[row], partition.store[row]) for row in picked), wanted)


def rescored(candidates: Iterable[tuple[Key, Matrix]], wanted: Wanted) -> list[tuple[Key, float]]:
    """The `k` best of the candidates (table key, float32 vector) by their exact scores, recomputed in float64
    from the stored float32 values, best first; ties broken by table key."""
    distance = wanted.distance
    q64 = np.asarray(wanted.query, dtype=np.float32).astype(np.float64)
    q_norm = float(np.linalg.norm(q64))
    scored: list[tuple[float, Key]] = []
    for key, vector in candidates:
        score = _score(vector.astype(np.float64), q64, q_norm, distance)
        scored.append((-score if distance == "DOT_PRODUCT" else score, key))
    scored.sort()
    return [(key, -rank if distance == "DOT_PRODUCT" else rank) for rank, key in scored[:wanted.k]]


def unpacked(vector: bytes) -> Matrix:
    """A stored entry's packed little-endian float32 vector as an array (no copy)."""
    return np.frombuffer(vector, dtype="<f4")


def _rough(partition: Partition, products: Matrix, rows: npt.NDArray[np.intp] | None,
           distance: VectorDistance) -> Matrix:
    """The first pass's ranking values (smallest best), computed in place over the products."""
    if distance == "DOT_PRODUCT":
        return np.negative(products, out=products)
    if distance == "COSINE":  # (the query's norm is the same for every row)
        inverse = partition.inverse_norms if rows is None else partition.inverse_norms[rows]
        rough = np.multiply(products, inverse, out=products)
        return np.negative(rough, out=rough)
    # squared distance, less the query's own squared norm
    squared = partition.squared_norms if rows is None else partition.squared_norms[rows]
    return np.subtract(squared, np.multiply(products, 2.0, out=products), out=products)


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
