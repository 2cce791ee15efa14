"""PartiQL tokens as DynamoDB reads them: keywords (any case), identifiers bare or in double quotes, strings in
single quotes ('' for a quote), numbers, `?` parameters, punctuation and the set brackets `<<` `>>`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from openddb.errors import ValidationException

TokenKind = Literal["word", "quoted", "string", "number", "param", "punct", "end"]

# The envelope of DynamoDB's parse errors (quoted from real responses: "Statement wasn't well formed, can't be
# processed: Expected data manipulation", aws-sdk-for-javascript-v3 issue 98; "...: Unexpected keyword",
# PyDynamoDB issue 26).
MALFORMED = "Statement wasn't well formed, can't be processed: "

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<word>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<quoted>"(?:[^"]|"")*")
  | (?P<string>'(?:[^']|'')*')
  | (?P<param>\?)
  | (?P<punct><<|>>|<=|>=|<>|!=|[-+*/(),.\[\]{}:=<>])
""", re.VERBOSE)


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokenKind
    text: str  # a word as written; a quoted identifier or string without its quotes, unescaped
    position: int

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.text.upper() in words


def malformed(detail: str) -> ValidationException:
    return ValidationException(MALFORMED + detail)


def tokenize(statement: str) -> list[Token]:
    tokens: list[Token] = []
    position = 0
    while position < len(statement):
        match = _TOKEN.match(statement, position)
        if match is None:
            # best guess: DynamoDB's detail for a character it cannot read is not recorded
            raise malformed(f"Unexpected character '{statement[position]}'")
        kind = match.lastgroup
        text = match.group()
        if kind == "quoted":
            tokens.append(Token("quoted", text[1:-1].replace('""', '"'), position))
        elif kind == "string":
            tokens.append(Token("string", text[1:-1].replace("''", "'"), position))
        elif kind in ("number", "word", "param", "punct"):
            tokens.append(Token(kind, text, position))  # type: ignore[arg-type]
        position = match.end()
    tokens.append(Token("end", "", position))
    return tokens
