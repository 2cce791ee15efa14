"""Operand rules of the expression functions, checked on the parsed tree (before any placeholder value or item is
looked at), long attribute names behind placeholders, and REMOVE of nested paths with and without an item."""

from __future__ import annotations

from typing import Any

import pytest

from openddb.errors import ValidationException
from openddb.expressions import ExpressionAttributes, compile_condition, compile_projection, compile_update
from openddb.expressions.ast import ExpressionError
from openddb.expressions.cache import condition_tree, update_tree
from openddb.expressions.update import INVALID_PATH
from openddb.expressions.validate import NOT_THIS_WAY

ANY_TYPE = "{S,SS,N,NS,B,BS,BOOL,NULL,L,M,HD,DOUBLE,FLOAT,HDS,FS,DOUBLESET,DICT,DECIMAL,INT,DECIMALSET,INTSET}"
TYPE_PATH = f"Incorrect operand type for operator or function; operator or function: attribute_type, operand type: " \
            f"{ANY_TYPE}"


def tree_error(parse: Any, text: str) -> str:
    with pytest.raises(ExpressionError) as info:
        parse(text)
    return info.value.message


@pytest.mark.parametrize("text", ["attribute_type(a, b)", "attribute_type(a, #t)", "attribute_type(:v, b.c[0])",
                                  "NOT attribute_type(a, b)"])
def test_attribute_type_needs_a_value_for_its_type(text: str) -> None:
    """The type operand may not be a path: refused from the tree alone, whatever the values and items."""
    assert tree_error(condition_tree, text) == TYPE_PATH


def test_attribute_type_takes_a_value_or_a_path_first() -> None:
    """`attribute_type(:v, :t)` tests the value's own type."""
    condition_tree("attribute_type(a, :t)")
    condition = compile_condition("attribute_type(:v, :t)",
                                  ExpressionAttributes(None, {":v": {"SS": ["x"]}, ":t": {"S": "SS"}}))
    assert condition.evaluate(None) is True
    condition = compile_condition("attribute_type(:v, :t)",
                                  ExpressionAttributes(None, {":v": {"SS": ["x"]}, ":t": {"S": "S"}}))
    assert condition.evaluate({"a": {"S": "x"}}) is False


def test_path_first_functions_still_need_a_path() -> None:
    """attribute_exists, attribute_not_exists and if_not_exists keep their document-path rule."""
    for text in ("attribute_exists(:v)", "attribute_not_exists(:v)"):
        assert tree_error(condition_tree, text).startswith("Operator or function requires a document path")
    assert tree_error(update_tree, "SET a = if_not_exists(:v, :w)").startswith(
        "Operator or function requires a document path")


@pytest.mark.parametrize("text", ["SET a = list_append(list_append(a, :v), :w)",
                                  "SET a = list_append(:v, list_append(a, :w))",
                                  "SET a = if_not_exists(a, list_append(list_append(a, :v), :w))"])
def test_list_append_inside_list_append_is_refused(text: str) -> None:
    assert tree_error(update_tree, text) == NOT_THIS_WAY.format("list_append")


@pytest.mark.parametrize("text", ["SET a = list_append(if_not_exists(a, :v), :w)",
                                  "SET a = if_not_exists(a, list_append(b, :w))"])
def test_other_nestings_of_update_functions_are_allowed(text: str) -> None:
    update_tree(text)


def test_long_names_are_refused_wherever_they_are_used() -> None:
    """A name past 65,535 UTF-8 bytes is refused in a projection and a condition too, not only as an update's
    target; 65,535 bytes is still allowed, counted in bytes rather than characters."""
    long_name = {"#n": "x" * 65536}
    for compile_one in (lambda attrs: compile_projection("#n", attrs),
                        lambda attrs: compile_condition("attribute_exists(#n)", attrs),
                        lambda attrs: compile_update("REMOVE #n", attrs)):
        with pytest.raises(ValidationException) as info:
            compile_one(ExpressionAttributes(long_name, None))
        assert str(info.value.message).endswith("Attribute name is too large, must be less than 65536 bytes")
    compile_projection("#n", ExpressionAttributes({"#n": "x" + "é" * 32767}, None))
    with pytest.raises(ValidationException):
        compile_projection("#n", ExpressionAttributes({"#n": "xx" + "é" * 32767}, None))


KEY: dict[str, Any] = {"pk": {"S": "k"}}


def test_remove_of_a_nested_path_on_a_missing_item_removes_nothing() -> None:
    """No item: REMOVE a.b and a[0] are no-ops; on an item without `a`, the same paths are invalid."""
    update = compile_update("REMOVE a.b, c[0], top", ExpressionAttributes(None, None))
    assert update.apply(dict(KEY), missing=True) == KEY
    assert update.apply(None) == {}
    with pytest.raises(ValidationException) as info:
        update.apply(dict(KEY))
    assert info.value.message == INVALID_PATH


def test_set_of_a_nested_path_on_a_missing_item_stays_invalid() -> None:
    update = compile_update("SET a.b = :v REMOVE x.y", ExpressionAttributes(None, {":v": {"S": "v"}}))
    with pytest.raises(ValidationException) as info:
        update.apply(dict(KEY), missing=True)
    assert info.value.message == INVALID_PATH


def test_remove_on_an_item_applies_every_path() -> None:
    """An existing item with the parents in place: nested members and list elements go."""
    item: dict[str, Any] = {**KEY, "a": {"M": {"b": {"S": "x"}, "k": {"S": "y"}}}, "c": {"L": [{"S": "0"}]}}
    update = compile_update("REMOVE a.b, c[0]", ExpressionAttributes(None, None))
    assert update.apply(item) == {**KEY, "a": {"M": {"k": {"S": "y"}}}, "c": {"L": []}}
