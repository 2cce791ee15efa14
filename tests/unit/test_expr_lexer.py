"""Tokenizer and syntax-error message construction."""

from __future__ import annotations

import pytest

from openddb.expressions.ast import ExpressionError
from openddb.expressions.lexer import EOF, ERROR, INTEGER, KEYWORD, NAME, NAME_REF, OP, VALUE_REF, tokenize
from openddb.expressions.parser import parse_condition, parse_update


def kinds(text: str) -> list[tuple[str, str]]:
    return [(t.kind, t.value) for t in tokenize(text)]


def test_token_kinds() -> None:
    """Every token class is recognised, keywords case-insensitively."""
    assert kinds("a.#b[12] <= :v and Not") == [
        (NAME, "a"), (OP, "."), (NAME_REF, "#b"), (OP, "["), (INTEGER, "12"), (OP, "]"),
        (OP, "<="), (VALUE_REF, ":v"), (KEYWORD, "AND"), (KEYWORD, "NOT"), (EOF, "<EOF>"),
    ]


def test_comparators_are_single_tokens() -> None:
    """<> and >= must not split into two tokens."""
    assert [v for _, v in kinds("<> >= > < =")][:-1] == ["<>", ">=", ">", "<", "="]


def test_lone_colon_and_unknown_character_are_error_tokens() -> None:
    """A ':' without a name and characters like '$' are reported as the offending token."""
    assert kinds(": $")[:2] == [(ERROR, ":"), (ERROR, "$")]


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        # The four samples below are real DynamoDB messages quoted in public issue threads.
        (parse_update, "ADD hits : incr", 'Syntax error; token: ":", near: "hits : incr"'),
        (parse_update, "INVALID SYNTAX HERE", 'Syntax error; token: "INVALID", near: "INVALID SYNTAX"'),
        (parse_condition, "attribute_exists(car_id) AND NOT #has_air_conditioner",
         'Syntax error; token: "<EOF>", near: "#has_air_conditioner"'),
        (parse_condition, "#articleId attribute_not_exists :ckpst",
         'Syntax error; token: "attribute_not_exists", near: "#articleId attribute_not_exists :ckpst"'),
        (parse_update, "SET #as, #b = :v", 'Syntax error; token: ",", near: "#as, #b"'),
        (parse_condition, "a-b = :v", 'Syntax error; token: "-", near: "a-b"'),
        (parse_condition, "a[x] = :v", 'Syntax error; token: "x", near: "[x]"'),
        (parse_condition, "a = :v and", 'Syntax error; token: "<EOF>", near: "and"'),
    ],
)
def test_syntax_error_messages(parse, text: str, message: str) -> None:  # type: ignore[no-untyped-def]
    """The token and its prev..next source window match DynamoDB's wording."""
    with pytest.raises(ExpressionError) as info:
        parse(text)
    assert info.value.message == message
