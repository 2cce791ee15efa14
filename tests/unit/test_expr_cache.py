"""Compiled expressions are reused only for equal placeholder tables, and still count as using them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openddb.errors import ValidationException
from openddb.expressions import ExpressionAttributes, compile_condition, compile_projection, compile_update


def attrs(values: dict[str, Any] | None = None, names: dict[str, str] | None = None) -> ExpressionAttributes:
    return ExpressionAttributes(names, values)


@given(st.integers(-1000, 1000), st.integers(-1000, 1000))
def test_same_text_other_values_compiles_anew(first: int, second: int) -> None:
    """A repeated expression with different values answers with the new values, never the cached ones."""
    for amount in (first, second, first):
        update = compile_update("SET n = n + :v", attrs({":v": {"N": str(amount)}}))
        assert update.apply({"n": {"N": "10"}}) == {"n": {"N": str(10 + amount)}}
        condition = compile_condition("n = :v", attrs({":v": {"N": str(amount)}}))
        assert condition.evaluate({"n": {"N": str(first)}}) is (amount == first)


def test_same_text_other_names_compiles_anew() -> None:
    for name in ("a", "b", "a"):
        projection = compile_projection("#x", attrs(names={"#x": name}))
        assert projection.apply({"a": {"S": "A"}, "b": {"S": "B"}}) == {name: {"S": name.upper()}}


def test_a_cached_expression_still_marks_its_placeholders_used() -> None:
    for _ in range(3):
        shared = attrs({":one": {"N": "1"}, ":zero": {"N": "0"}}, {"#c": "c"})
        compile_update("SET #c = #c + :one", shared)
        compile_condition("#c >= :zero", shared)
        shared.check_all_used()


def test_a_cached_expression_does_not_hide_an_unused_placeholder() -> None:
    compile_update("SET c = c + :one", attrs({":one": {"N": "1"}}))  # now cached
    extra = attrs({":one": {"N": "1"}, ":spare": {"N": "2"}})
    compile_update("SET c = c + :one", extra)
    with pytest.raises(ValidationException) as info:
        extra.check_all_used()
    assert info.value.message == "Value provided in ExpressionAttributeValues unused in expressions: keys: {:spare}"


def test_errors_are_raised_every_time() -> None:
    for _ in range(2):
        with pytest.raises(ValidationException) as info:
            compile_update("SET c = :missing", attrs({":one": {"N": "1"}}))
        assert "An expression attribute value used in expression is not defined" in info.value.message


def test_the_caches_hold_a_bounded_amount_of_expression_text() -> None:
    """A stream of distinct long expressions (or of large placeholder tables) must not grow a worker without end:
    each cache empties itself before it would hold more than CACHE_CHARS of text."""
    from openddb.expressions import cache, compiler

    names = {f"#n{i}": f"{i:02}" + "a" * 60 for i in range(64)}  # ~4.5 K characters: compiled anew, never kept
    for i in range(400):
        text = " OR ".join(f"a{i}_{j} = :v" for j in range(150))  # ~2.4 K characters each, 960 K in all
        condition = compile_condition(text, attrs({":v": {"N": str(i)}}, {"#x": "x"}))
        assert condition.evaluate({f"a{i}_0": {"N": str(i)}})
        compile_projection("#n0, #n1", attrs(names=names))
        assert cache._CONDITIONS._held <= cache.CACHE_CHARS
        assert compiler._COMPILED._held <= cache.CACHE_CHARS
    assert all(len(key[2][0]) < 64 for key in compiler._COMPILED._store)


def test_a_bounded_cache_keeps_what_fits_and_starts_over_when_full() -> None:
    from openddb.expressions.cache import BoundedCache

    small: BoundedCache[str, int] = BoundedCache(entries=3, chars=10)
    small.put("a", 1, 4)
    small.put("b", 2, 4)
    assert small.get("a") == 1 and small.get("b") == 2
    small.put("c", 3, 4)  # 12 characters: starts over with this one
    assert small.get("a") is None and small.get("c") == 3
    small.put("huge", 4, 11)  # larger than the whole cache: not kept
    assert small.get("huge") is None
    for key in "defg":
        small.put(key, 0, 1)
    assert small.get("g") == 0 and small.get("c") is None  # entry count bounded too
