"""A search partition cached by one server process is brought up to date from what other processes changed since
(entries and tombstones stamped with the partition's change sequence): two processes on one store, writes through
one and searches through the other, each answer equal to a brute-force reference over the items as they are; and
after a kill -9 of the writer, the searcher's answers hold every acknowledged write (issue 31)."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.test_vectors import make_table, reference_scores, search, vec, vector_index
from tests.conftest import ServerProcess, make_client

DIMS = 6
GROUPS = ("a", "b")
COLORS = ("red", "blue")


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Two server processes of one worker each on one store (on PostgreSQL, two nodes of one database)."""
    first = ServerProcess(str(tmp_path), "--workers", "1")
    second = ServerProcess(str(tmp_path), "--workers", "1")
    try:
        yield first, second
    finally:
        for process in (first, second):
            process.stop()
            output = process.output()
            process.log.close()
            assert "Traceback" not in output, output


class Model:
    """The items as the test wrote them: key -> (group, color, vector or None)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.items: dict[str, tuple[str, str, list[float] | None]] = {}

    def vector(self) -> list[float]:
        return [self.rng.uniform(-1, 1) for _ in range(DIMS)]

    def expected(self, query: list[float], group: str, color: str | None) -> list[tuple[str, float]]:
        stored = {key: values for key, (g, c, values) in self.items.items()
                  if values is not None and g == group and color in (None, c)}
        return reference_scores("EUCLIDEAN", stored, query)


def put(ddb: Any, table: str, model: Model, key: str, group: str, color: str, values: list[float] | None) -> None:
    """(The model first: if the call fails, the model holds what it meant to write.)"""
    item = {"pk": {"S": key}, "g": {"S": group}, "color": {"S": color}}
    if values is not None:
        item["emb"] = vec(values)
    model.items[key] = (group, color, values)
    ddb.put_item(TableName=table, Item=item)


def change(ddb: Any, table: str, model: Model) -> None:
    """One random write of the kinds that change a partition: a new item, a new vector, a move to the other
    group, a new filter value, the vector removed, the item deleted."""
    rng = model.rng
    kind = rng.choice(("new", "new", "vector", "move", "color", "unvector", "delete"))
    keys = sorted(model.items)
    if kind == "new" or not keys:
        put(ddb, table, model, f"k{len(keys)}-{rng.randrange(10**9)}", rng.choice(GROUPS), rng.choice(COLORS),
            model.vector())
        return
    key = rng.choice(keys)
    group, color, values = model.items[key]
    if kind == "delete":
        del model.items[key]
        ddb.delete_item(TableName=table, Key={"pk": {"S": key}})
    elif kind == "vector":
        put(ddb, table, model, key, group, color, model.vector())
    elif kind == "move":
        put(ddb, table, model, key, GROUPS[1 - GROUPS.index(group)], color, values)
    elif kind == "color":
        put(ddb, table, model, key, group, COLORS[1 - COLORS.index(color)], values)
    else:
        put(ddb, table, model, key, group, color, None)


def check(ddb: Any, table: str, model: Model) -> None:
    """Every partition, with and without a filter, searched for all its items, and for the best one (whose
    candidates come from the first, float32 pass): the reference's keys and scores."""
    query = model.vector()
    for group, color, k in [(g, c, k) for g in GROUPS for c in (None, *COLORS) for k in (100, 1)]:
        condition = "g = :g" + ("" if color is None else " AND color = :c")
        values = {":g": {"S": group}} | ({} if color is None else {":c": {"S": color}})
        answer = search(ddb, table, query, k=k, SearchConditionExpression=condition,
                        ExpressionAttributeValues=values)["SearchResults"]
        expected = model.expected(query, group, color)[:k]
        assert [r["Item"]["pk"]["S"] for r in answer] == [key for key, _ in expected], (group, color, k)
        for result, (_key, score) in zip(answer, expected):
            assert result["Score"] == pytest.approx(score, rel=1e-6, abs=1e-9)


def vector_table(ddb: Any) -> str:
    return make_table(ddb, [vector_index(dims=DIMS, distance="EUCLIDEAN",
                                         schema=[("g", "HASH"), ("color", "INLINE_FILTER")])],
                      {"g": "S", "color": "S"})


def test_a_search_applies_what_another_process_changed(two_servers: tuple[ServerProcess, ServerProcess]) -> None:
    """Each process caches the partitions it searches; after every few writes through one of them, the other's
    next search (and its own) answers as the reference over the items as they now are."""
    first, second = (make_client(process.endpoint) for process in two_servers)
    table = vector_table(first)
    model = Model(7)
    for n in range(40):
        put(first, table, model, f"seed{n}", GROUPS[n % 2], COLORS[n % 3 % 2], model.vector())
    check(second, table, model)
    check(first, table, model)
    for round_number in range(12):
        writer, searcher = (first, second) if round_number % 2 == 0 else (second, first)
        for _ in range(1 + round_number % 4):
            change(writer, table, model)
        check(searcher, table, model)
        if round_number % 3 == 0:
            check(writer, table, model)


def test_after_a_kill_9_of_the_writer_every_acknowledged_write_is_searched(tmp_path: Path) -> None:
    """Writes through one process until it is killed with SIGKILL: the other process's next searches hold every
    write acknowledged before the kill (and no write that was not), and so does a process started again."""
    searcher = ServerProcess(str(tmp_path), "--workers", "1")
    writer = ServerProcess(str(tmp_path), "--workers", "1")
    again: ServerProcess | None = None
    try:
        reader, client = make_client(searcher.endpoint), make_client(writer.endpoint)
        table = vector_table(reader)
        model = Model(11)
        for n in range(20):
            put(reader, table, model, f"seed{n}", GROUPS[n % 2], COLORS[n % 2], model.vector())
        check(reader, table, model)  # (cached)
        started = threading.Event()
        stop = threading.Event()
        # The items as the acknowledged writes left them, and with the write the kill cut short (which may or may
        # not be in the store).
        outcomes: list[dict[str, tuple[str, str, list[float] | None]]] = [dict(model.items)]

        def write_until_killed() -> None:
            shadow = Model(12)
            shadow.items = dict(model.items)
            while not stop.is_set():
                try:
                    change(client, table, shadow)
                except Exception:  # (the kill, seen by the client however it shows)
                    outcomes.append(dict(shadow.items))
                    return
                outcomes[0] = dict(shadow.items)
                started.set()

        thread = threading.Thread(target=write_until_killed)
        thread.start()
        assert started.wait(20)
        threading.Event().wait(1.0)  # (writes under way)
        writer.stop(kill=True)
        stop.set()
        thread.join(30)
        assert any(_answers_as(reader, table, outcome) for outcome in outcomes)
        again = ServerProcess(str(tmp_path), "--workers", "1")
        assert any(_answers_as(make_client(again.endpoint), table, outcome) for outcome in outcomes)
    finally:
        for process in (searcher, writer, again):
            if process is not None:
                process.stop()
                process.log.close()


def _answers_as(ddb: Any, table: str, items: dict[str, tuple[str, str, list[float] | None]]) -> bool:
    probe = Model(13)
    probe.items = items
    try:
        check(ddb, table, probe)
    except AssertionError:
        return False
    return True
