"""UpdateExpression compile checks, pure apply semantics and UPDATED_OLD/NEW projections."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openddb.errors import ValidationException
from openddb.expressions import ExpressionAttributes, compile_update, updated_values

VALUES: dict[str, Any] = {
    ":one": {"N": "1"},
    ":s": {"S": "x"},
    ":l": {"L": [{"S": "new"}]},
    ":ss": {"SS": ["c"]},
    ":ns": {"NS": ["2"]},
}


def run(text: str, item: dict[str, Any] | None, values: dict[str, Any] | None = None,
        names: dict[str, str] | None = None) -> dict[str, Any]:
    attrs = ExpressionAttributes(names, values if values is not None else VALUES)
    return compile_update(text, attrs).apply(item)


def compile_error(text: str, values: dict[str, Any] | None = None) -> str:
    with pytest.raises(ValidationException) as info:
        compile_update(text, ExpressionAttributes(None, values if values is not None else VALUES))
    return str(info.value.message)


def apply_error(text: str, item: dict[str, Any] | None) -> str:
    with pytest.raises(ValidationException) as info:
        run(text, item)
    return str(info.value.message)


def test_set_creates_and_overwrites() -> None:
    """SET adds new attributes and overwrites existing ones."""
    assert run("SET a = :s, b = :one", {"a": {"N": "3"}}) == {"a": {"S": "x"}, "b": {"N": "1"}}


def test_set_arithmetic_and_functions() -> None:
    """+, -, if_not_exists and list_append compute from the old item."""
    item = {"n": {"N": "10"}, "l": {"L": [{"S": "old"}]}}
    out = run("SET n = n - :one, m = if_not_exists(m, :one), k = if_not_exists(n, :s), "
              "l = list_append(l, :l), z = list_append(:l, l)", item)
    assert out["n"] == {"N": "9"} and out["m"] == {"N": "1"} and out["k"] == {"N": "10"}
    assert out["l"] == {"L": [{"S": "old"}, {"S": "new"}]}
    assert out["z"] == {"L": [{"S": "new"}, {"S": "old"}]}


def test_all_actions_see_the_old_item() -> None:
    """SET a = b, b = a swaps: both right-hand sides read the item before the update."""
    assert run("SET a = b, b = a", {"a": {"S": "1"}, "b": {"S": "2"}}) == {"a": {"S": "2"}, "b": {"S": "1"}}


def test_nested_set_and_list_index() -> None:
    """SET on nested map keys and list elements; an index past the end appends."""
    item = {"m": {"M": {"l": {"L": [{"N": "0"}]}}}}
    out = run("SET m.k = :s, m.l[0] = :one, m.l[7] = :s", item)
    assert out == {"m": {"M": {"l": {"L": [{"N": "1"}, {"S": "x"}]}, "k": {"S": "x"}}}}


def test_remove_attributes_and_list_elements() -> None:
    """REMOVE drops attributes (missing ones silently) and list elements by their old positions."""
    item = {"a": {"S": "1"}, "l": {"L": [{"N": "0"}, {"N": "1"}, {"N": "2"}, {"N": "3"}]}}
    assert run("REMOVE a, nope, l[1], l[3], l[9]", item) == {"l": {"L": [{"N": "0"}, {"N": "2"}]}}


def test_add_numbers_and_sets() -> None:
    """ADD increments numbers, unions sets, and creates missing attributes."""
    item = {"n": {"N": "1.5"}, "s": {"SS": ["a", "c"]}}
    out = run("ADD n :one, s :ss, t :ns, c :one", item)
    assert out == {"n": {"N": "2.5"}, "s": {"SS": ["a", "c"]}, "t": {"NS": ["2"]}, "c": {"N": "1"}}


def test_delete_from_set_removes_emptied_attribute() -> None:
    """DELETE subtracts set members; an emptied set disappears; a missing attribute is a no-op."""
    values = {":x": {"SS": ["a", "b"]}, ":y": {"SS": ["a"]}}
    item = {"s": {"SS": ["a", "b"]}, "t": {"SS": ["a", "z"]}}
    assert run("DELETE s :x, t :y, u :y", item, values) == {"t": {"SS": ["z"]}}


def test_no_item_starts_empty() -> None:
    """apply(None) builds the item from nothing (UpdateItem on a new key)."""
    assert run("SET a = :s ADD n :one", None) == {"a": {"S": "x"}, "n": {"N": "1"}}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SET a = :s + :one", "Invalid UpdateExpression: Incorrect operand type for operator or function; "
                              "operator or function: +, operand type: S"),
        ("SET a = list_append(a, :s)", "Invalid UpdateExpression: Incorrect operand type for operator or "
                                       "function; operator or function: list_append, operand type: S"),
        ("ADD a :s", "Invalid UpdateExpression: Incorrect operand type for operator or function; "
                     "operator: ADD, operand type: STRING, typeSet: ALLOWED_FOR_ADD_OPERAND"),
        ("DELETE a :one", "Invalid UpdateExpression: Incorrect operand type for operator or function; "
                          "operator: DELETE, operand type: NUMBER, typeSet: ALLOWED_FOR_DELETE_OPERAND"),
        ("SET a = :s REMOVE a", "Invalid UpdateExpression: Two document paths overlap with each other; must "
                                "remove or rewrite one of these paths; path one: [a], path two: [a]"),
        ("SET a.b = :s, a = :s", "Invalid UpdateExpression: Two document paths overlap with each other; must "
                                 "remove or rewrite one of these paths; path one: [a, b], path two: [a]"),
        ("SET a.b = :s, a[1] = :s", "Invalid UpdateExpression: Two document paths conflict with each other; "
                                    "must remove or rewrite one of these paths; path one: [a, b], "
                                    "path two: [a, [1]]"),
        ("SET a = :nope", "Invalid UpdateExpression: An expression attribute value used in expression is not "
                          "defined; attribute value: :nope"),
        ("  ", "Invalid UpdateExpression: The expression can not be empty;"),
    ],
)
def test_compile_errors(text: str, message: str) -> None:
    """Errors found from the expression and its values alone, before any item is read."""
    assert compile_error(text) == message


def test_placeholders_resolving_to_same_path_overlap() -> None:
    """#a and #b naming the same attribute overlap just like writing it twice."""
    attrs = ExpressionAttributes({"#a": "x", "#b": "x"}, {":s": {"S": "v"}})
    with pytest.raises(ValidationException, match=r"path one: \[x\], path two: \[x\]"):
        compile_update("SET #a = :s, #b = :s", attrs)


@pytest.mark.parametrize(
    ("text", "item", "message"),
    [
        ("SET a.b = :s", {}, "The document path provided in the update expression is invalid for update"),
        ("SET a.b = :s", {"a": {"S": "str"}},
         "The document path provided in the update expression is invalid for update"),
        ("SET a[0] = :s", {"a": {"M": {}}},
         "The document path provided in the update expression is invalid for update"),
        ("SET a = b + :one", {}, "The provided expression refers to an attribute that does not exist in the item"),
        ("SET a = b + :one", {"b": {"S": "x"}}, "An operand in the update expression has an incorrect data type"),
        ("SET a = list_append(b, :l)", {"b": {"S": "x"}},
         "An operand in the update expression has an incorrect data type"),
        ("ADD a :one", {"a": {"S": "x"}}, "An operand in the update expression has an incorrect data type"),
        ("ADD a :ss", {"a": {"NS": ["1"]}}, "An operand in the update expression has an incorrect data type"),
        ("DELETE a :ss", {"a": {"NS": ["1"]}}, "An operand in the update expression has an incorrect data type"),
    ],
)
def test_runtime_errors(text: str, item: dict[str, Any], message: str) -> None:
    """Errors that depend on the stored item carry no 'Invalid UpdateExpression' prefix."""
    assert apply_error(text, item) == message


def test_top_level_names_and_updated_values() -> None:
    """The API needs the touched top-level names and the UPDATED_OLD/NEW projections."""
    update = compile_update("SET m.a = :s, n = :one REMOVE r", ExpressionAttributes(None, VALUES))
    assert update.assigned_top_level_names == {"m", "n", "r"} == update.updated_top_level_names()
    old = {"m": {"M": {"a": {"S": "o"}, "b": {"S": "keep"}}}, "r": {"N": "1"}, "other": {"S": "z"}}
    new = update.apply(old)
    assert updated_values(update, old) == {"m": {"M": {"a": {"S": "o"}}}, "r": {"N": "1"}}
    assert updated_values(update, new) == {"m": {"M": {"a": {"S": "x"}}}, "n": {"N": "1"}}


# --- purity property ---------------------------------------------------------------------------------

leaf = st.one_of(st.text(max_size=3).map(lambda s: {"S": s}), st.integers(-9, 9).map(lambda i: {"N": str(i)}))
values_st = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: {"L": xs}),
        st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3).map(lambda m: {"M": m}),
    ),
    max_leaves=8,
)
items = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), values_st, max_size=4)
expressions = st.sampled_from([
    "SET a.b = :s, c[0] = :s REMOVE d",
    "SET a[0].b = :s REMOVE c[1], c[0]",
    "REMOVE a.b, a.c, b[0]",
    "SET d = a, a.c = :s",
    "ADD d :one",
    "SET b[5] = :s, c.a.b = :s",
])


@given(items, expressions)
def test_apply_never_mutates_its_input(item: dict[str, Any], text: str) -> None:
    """apply is pure: whatever happens (result or runtime error), the input item is unchanged."""
    before = copy.deepcopy(item)
    try:
        run(text, item)
    except ValidationException:
        pass
    assert item == before
