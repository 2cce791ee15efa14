"""CloudWatch's metric math for GetMetricData's `Expression` queries (observe/cloudwatch.py), the subset of the
CloudWatch User Guide's "Metric math syntax and functions" this server evaluates:

- numbers, the Ids of the request's other queries (a metric's or another expression's), parentheses;
- the arithmetic operators + - * / ^ (and unary minus): between two time series on the timestamps both have,
  between a time series and a scalar on each of its values, on an array of time series member by member; a
  division by zero leaves that data point out (best guess: CloudWatch's graphs show no point there);
- SUM, AVG, MIN and MAX: of one time series, a scalar over its values; of an array of time series, one time series
  whose value at each timestamp is over the values the members have there; of a scalar, that scalar;
- METRICS(): the array of the request's metrics (its MetricStat queries), in the request's order.

Anything else (other functions, METRICS with a filter, two arrays in one operation) is refused with the words
marked as best guesses, not approximated.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TimeSeries = dict[int, float]  # timestamp (epoch seconds) -> value


@dataclass
class Array:
    """An array of time series: (label, series) each."""

    members: list[tuple[str, TimeSeries]]


Value = float | TimeSeries | Array
_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)|([A-Za-z_][A-Za-z0-9_]*)|(\S))")
_FUNCTIONS = ("SUM", "AVG", "MIN", "MAX", "METRICS")


class MathError(Exception):
    """An expression this server cannot evaluate (the caller answers it as CloudWatch's invalid parameter)."""


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) of each token: "number", "name" or "symbol"; then ("end", "")."""
    found, position = [], 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise MathError(f"Unexpected character at position {position + 1}")  # best guess
        number, name, symbol = match.groups()
        found.append(("number", number) if number else ("name", name) if name else ("symbol", symbol))
        position = match.end()
    found.append(("end", ""))
    return found


class _Parser:
    """Recursive descent over the tokens, evaluating as it goes (precedence: ^, then unary -, then * /, then
    + -)."""

    def __init__(self, text: str, lookup: Callable[[str], Value], metrics: Callable[[], Array]) -> None:
        self._tokens = _tokens(text)
        self._at = 0
        self._lookup = lookup
        self._metrics = metrics

    def parse(self) -> Value:
        value = self._sum()
        if self._peek() != ("end", ""):
            raise MathError(f"Unexpected token {self._peek()[1]!r}")  # best guess
        return value

    def _peek(self) -> tuple[str, str]:
        return self._tokens[self._at]

    def _take(self, symbol: str) -> None:
        if self._peek() != ("symbol", symbol):
            raise MathError(f"Expected {symbol!r} but found {self._peek()[1] or 'the end'!r}")  # best guess
        self._at += 1

    def _sum(self) -> Value:
        return self._left(("+", "-"), self._product)

    def _product(self) -> Value:
        return self._left(("*", "/"), self._unary)

    def _left(self, operators: tuple[str, str], operand: Callable[[], Value]) -> Value:
        """Operands joined by left-associative `operators`."""
        value = operand()
        while self._peek()[0] == "symbol" and self._peek()[1] in operators:
            operator = self._peek()[1]
            self._at += 1
            value = combine(operator, value, operand())
        return value

    def _unary(self) -> Value:
        if self._peek() == ("symbol", "-"):  # (binds looser than ^: -m1 ^ 2 is -(m1 ^ 2))
            self._at += 1
            return combine("*", -1.0, self._unary())
        return self._power()

    def _power(self) -> Value:
        base = self._atom()
        if self._peek() == ("symbol", "^"):
            self._at += 1
            return combine("^", base, self._unary())  # (right-associative)
        return base

    def _atom(self) -> Value:
        kind, text = self._peek()
        self._at += 1
        if kind == "number":
            return float(text)
        if kind == "symbol" and text == "(":
            value = self._sum()
            self._take(")")
            return value
        if kind == "name" and self._peek() == ("symbol", "("):
            return self._call(text)
        if kind == "name":
            return self._lookup(text)
        raise MathError(f"Unexpected token {text or 'at the end'!r}")  # best guess

    def _call(self, name: str) -> Value:
        if name not in _FUNCTIONS:
            raise MathError(f"This server evaluates no function {name}")  # best guess
        self._take("(")
        if name == "METRICS":
            self._take(")")  # (METRICS with a filter string is not evaluated)
            return self._metrics()
        argument = self._sum()
        self._take(")")
        return aggregate(name, argument)


def evaluate(expression: str, lookup: Callable[[str], Value], metrics: Callable[[], Array]) -> Value:
    """The value of `expression`; `lookup` gives an Id's value, `metrics` the request's metrics (METRICS())."""
    return _Parser(expression, lookup, metrics).parse()


def _apply(operator: str, a: float, b: float) -> float | None:
    try:
        if operator == "+":
            result = a + b
        elif operator == "-":
            result = a - b
        elif operator == "*":
            result = a * b
        elif operator == "/":
            result = a / b
        else:
            result = a ** b
    except (ZeroDivisionError, OverflowError):
        return None
    return result if isinstance(result, float) and math.isfinite(result) else None


def combine(operator: str, a: Value, b: Value) -> Value:
    """`a operator b` as metric math applies it to scalars, time series and arrays (see the module's doc)."""
    if isinstance(a, Array) and isinstance(b, Array):
        raise MathError("An operation between two arrays of time series is not evaluated")  # best guess
    if isinstance(a, Array):
        return Array([(label, _series(combine(operator, series, b))) for label, series in a.members])
    if isinstance(b, Array):
        return Array([(label, _series(combine(operator, a, series))) for label, series in b.members])
    if isinstance(a, float) and isinstance(b, float):
        result = _apply(operator, a, b)
        return math.nan if result is None else result
    if isinstance(a, dict) and isinstance(b, dict):
        pairs = [(at, a[at], b[at]) for at in a if at in b]
    elif isinstance(a, dict):
        assert isinstance(b, float)
        pairs = [(at, value, b) for at, value in a.items()]
    else:
        assert isinstance(a, float) and isinstance(b, dict)
        pairs = [(at, a, value) for at, value in b.items()]
    found = {at: _apply(operator, x, y) for at, x, y in pairs}
    return {at: value for at, value in found.items() if value is not None}


def _series(value: Value) -> TimeSeries:
    assert isinstance(value, dict)
    return value


_REDUCERS: dict[str, Callable[[list[float]], float]] = {
    "SUM": math.fsum, "AVG": lambda values: math.fsum(values) / len(values), "MIN": min, "MAX": max}


def aggregate(name: str, value: Value) -> Value:
    """SUM, AVG, MIN or MAX of a scalar (itself), a time series (a scalar) or an array (a time series)."""
    reduce = _REDUCERS[name]
    if isinstance(value, float):
        return value
    if isinstance(value, dict):
        return reduce(list(value.values())) if value else math.nan
    by_time: dict[int, list[float]] = {}
    for _, series in value.members:
        for at, point in series.items():
            by_time.setdefault(at, []).append(point)
    return {at: reduce(points) for at, points in by_time.items()}


class Expressions:
    """The values of a GetMetricData request's queries: its metrics' time series (`stats`: Id -> (label, series),
    found before), and its Expressions evaluated when first needed, each once."""

    def __init__(self, queries: list[dict[str, Any]], stats: dict[str, tuple[str, TimeSeries]]) -> None:
        self._queries = {str(query.get("Id")): query for query in queries}
        self._stats = stats
        self._values: dict[str, Value] = {}
        self._evaluating: set[str] = set()
        # (a scalar answered as a time series: on the timestamps of the request's metrics)
        self._times = sorted({at for _, series in stats.values() for at in series})

    def value(self, name: str) -> Value:
        """The value of the query with Id `name` (MathError for an unknown Id or a circular reference)."""
        if name in self._stats:
            return self._stats[name][1]
        if name in self._values:
            return self._values[name]
        query = self._queries.get(name)
        if query is None or not isinstance(query.get("Expression"), str):
            raise MathError(f"Unrecognized id {name}")  # best guess
        if name in self._evaluating:
            raise MathError(f"The expression {name} refers to itself")  # best guess
        self._evaluating.add(name)
        try:
            found = self._values[name] = evaluate(query["Expression"], self.value, self._metrics)
        finally:
            self._evaluating.discard(name)
        return found

    def _metrics(self) -> Array:
        return Array([self._stats[name] for name in self._queries if name in self._stats])

    def results(self, query: dict[str, Any]) -> list[tuple[str, TimeSeries]]:
        """A query's results, (label, time series) each: one, or one per member of an array."""
        name = str(query.get("Id"))
        label = str(query.get("Label") or (self._stats[name][0] if name in self._stats else name))
        value = self.value(name)
        if isinstance(value, float):
            return [(label, {at: value for at in self._times} if math.isfinite(value) else {})]
        if isinstance(value, dict):
            return [(label, value)]
        return [(f"{label} {member}", series) for member, series in value.members]
