"""Tokenizer shared by every expression kind.

Tokens keep their source span so a syntax error can quote DynamoDB's ``near:`` window: the source text
from the start of the previous token to the end of the next one.
"""

from __future__ import annotations

from .ast import ExpressionError

# Token kinds.
NAME = "NAME"  # bare identifier (attribute name, function name or keyword)
KEYWORD = "KEYWORD"  # AND OR NOT BETWEEN IN SET REMOVE ADD DELETE (text upper-cased in .value)
NAME_REF = "NAME_REF"  # #placeholder
VALUE_REF = "VALUE_REF"  # :placeholder
INTEGER = "INTEGER"  # digits (list indexes)
OP = "OP"  # punctuation and comparators
EOF = "EOF"
ERROR = "ERROR"  # a character no rule accepts; the parser reports it as a syntax error

KEYWORDS = frozenset({"AND", "OR", "NOT", "BETWEEN", "IN", "SET", "REMOVE", "ADD", "DELETE"})

# A name starts with a letter ("_x" is a syntax error at "_", as DynamoDB answers); placeholders may start with any
# word character.
_WORD_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_WORD = _WORD_START | frozenset("0123456789_")
_DIGITS = frozenset("0123456789")
_SPACE = frozenset(" \t\n\r")
_SINGLE = frozenset("=()[],.+-")


class Token:
    """One token: ``kind``, ``value`` (keywords upper-cased), and its ``start``/``end`` source span."""

    __slots__ = ("end", "kind", "start", "value")

    def __init__(self, kind: str, value: str, start: int, end: int) -> None:
        self.kind = kind
        self.value = value
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.value!r})"


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens, always ending with an EOF token; never raises."""
    tokens: list[Token] = []
    append = tokens.append
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c in _SPACE:
            i += 1
            continue
        start = i
        if c in _WORD_START:
            i += 1
            while i < n and text[i] in _WORD:
                i += 1
            word = text[start:i]
            upper = word.upper()
            if upper in KEYWORDS:
                append(Token(KEYWORD, upper, start, i))
            else:
                append(Token(NAME, word, start, i))
        elif c in _DIGITS:
            i += 1
            # A number token ends after a leading 0 (DynamoDB's answer to "#x-03" is near: "#x-0").
            while c != "0" and i < n and text[i] in _DIGITS:
                i += 1
            append(Token(INTEGER, text[start:i], start, i))
        elif c == "#" or c == ":":
            i += 1
            while i < n and text[i] in _WORD:
                i += 1
            if i == start + 1:
                # A lone '#' or ':' is not a placeholder; DynamoDB reports it as the bad token.
                append(Token(ERROR, c, start, i))
            else:
                append(Token(NAME_REF if c == "#" else VALUE_REF, text[start:i], start, i))
        elif c in _SINGLE:
            i += 1
            append(Token(OP, c, start, i))
        elif c == "<":
            if i + 1 < n and text[i + 1] in "=>":
                i += 2
            else:
                i += 1
            append(Token(OP, text[start:i], start, i))
        elif c == ">":
            i += 2 if i + 1 < n and text[i + 1] == "=" else 1
            append(Token(OP, text[start:i], start, i))
        else:
            i += 1
            append(Token(ERROR, c, start, i))
    append(Token(EOF, "<EOF>", n, n))
    return tokens


def syntax_error(text: str, tokens: list[Token], index: int) -> ExpressionError:
    """DynamoDB's syntax error for the token at ``index``: its text and the prev..next source window."""
    tok = tokens[index]
    start = tokens[index - 1].start if index > 0 else tok.start
    end = tokens[index + 1].end if index + 1 < len(tokens) else tok.end
    token_text = tok.value if tok.kind != KEYWORD else text[tok.start:tok.end]
    return ExpressionError(f'Syntax error; token: "{token_text}", near: "{text[start:end]}"')
