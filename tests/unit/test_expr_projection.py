"""ProjectionExpression: nested structure, list compaction, overlaps."""

from __future__ import annotations

from typing import Any

import pytest

from openddb.errors import ValidationException
from openddb.expressions import ExpressionAttributes, compile_projection

ITEM: dict[str, Any] = {
    "pk": {"S": "p"},
    "l": {"L": [{"S": "zero"}, {"S": "one"}, {"S": "two"}]},
    "lm": {"L": [{"M": {"v": {"S": "a0"}, "x": {"S": "x0"}}}, {"M": {"x": {"S": "x1"}}}]},
    "m": {"M": {"t": {"S": "T"}, "u": {"S": "U"}, "n": {"M": {"d": {"N": "1"}}}}},
}


def project(text: str, names: dict[str, str] | None = None) -> dict[str, Any]:
    return compile_projection(text, ExpressionAttributes(names, None)).apply(ITEM)


def test_top_level_and_missing() -> None:
    """Top-level names are copied; names absent from the item select nothing."""
    assert project("pk, absent") == {"pk": {"S": "p"}}


def test_nested_map_keeps_structure() -> None:
    """m.t and m.n.d keep only the selected keys inside their maps."""
    assert project("m.t, m.n.d") == {"m": {"M": {"t": {"S": "T"}, "n": {"M": {"d": {"N": "1"}}}}}}


def test_list_elements_compacted_in_index_order() -> None:
    """l[2], l[0] yields [zero, two]: ordered by index, not by expression."""
    assert project("l[2], l[0]") == {"l": {"L": [{"S": "zero"}, {"S": "two"}]}}


def test_path_through_list_keeps_map_wrapper() -> None:
    """lm[0].v returns the map around v inside a one-element list; lm[1].v selects nothing."""
    assert project("lm[0].v, lm[1].v") == {"lm": {"L": [{"M": {"v": {"S": "a0"}}}]}}


def test_wrong_type_steps_select_nothing() -> None:
    """An index into a map or a key into a list is not an error, just empty."""
    assert project("m[0], l.x") == {}


def test_placeholders_and_top_level_names() -> None:
    """#names resolve; top_level_names lists the resolved first steps."""
    projection = compile_projection("#k, m.t", ExpressionAttributes({"#k": "pk"}, None))
    assert projection.top_level_names == {"pk", "m"}
    assert projection.apply(ITEM) == {"pk": {"S": "p"}, "m": {"M": {"t": {"S": "T"}}}}


@pytest.mark.parametrize(
    ("text", "names", "tail"),
    [
        ("a, a.b", None, "overlap with each other; must remove or rewrite one of these paths; "
                         "path one: [a], path two: [a, b]"),
        ("a.b, a", None, "overlap with each other; must remove or rewrite one of these paths; "
                         "path one: [a, b], path two: [a]"),
        ("pk, pk", None, "overlap with each other; must remove or rewrite one of these paths; "
                         "path one: [pk], path two: [pk]"),
        ("#a, #b", {"#a": "pk", "#b": "pk"}, "path one: [pk], path two: [pk]"),
        ("a[0], a.b", None, "conflict with each other; must remove or rewrite one of these paths; "
                            "path one: [a, [0]], path two: [a, b]"),
    ],
)
def test_overlapping_paths_rejected(text: str, names: dict[str, str] | None, tail: str) -> None:
    """Duplicate, parent/child and map-vs-list paths are rejected with DynamoDB's message."""
    with pytest.raises(ValidationException) as info:
        compile_projection(text, ExpressionAttributes(names, None))
    assert info.value.message is not None
    assert info.value.message.startswith("Invalid ProjectionExpression: Two document paths ")
    assert info.value.message.endswith(tail)


def test_reserved_word_needs_alias() -> None:
    """Projection names are checked against the reserved words too."""
    with pytest.raises(ValidationException, match="reserved keyword: name"):
        compile_projection("name", ExpressionAttributes(None, None))
