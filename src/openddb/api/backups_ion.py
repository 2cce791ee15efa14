"""Amazon Ion text as DynamoDB exports and imports it: a writer of DynamoDB's lines and a reader of the subset of
Ion text that maps to DynamoDB's types (no dependency: see docs/ARCHITECTURE.md, "Dependencies").

The mapping (Developer Guide, "DynamoDB table export output format", Amazon Ion, and "Amazon S3 import formats for
DynamoDB", Amazon Ion): S string, BOOL bool, N decimal, B blob, SS/NS/BS a list annotated `$dynamodb_SS`,
`$dynamodb_NS` or `$dynamodb_BS`, L list, M struct. NULL, which neither table lists, is Ion's `null` (best guess).
Each line of an export is the version marker and a struct, `$ion_1_0 {Item:{...}}`; numbers as the guide's example
writes them: `Id:103.`, `PageCount:6d2` (600), `Price:2d3` (2000): the digits without their trailing zeros, then
`.` or a `d` exponent (a negative exponent as a decimal point, `1.5`, or `12d-10` past six leading zeros: best
guess); field names sorted as in the guide's examples, unquoted where Ion allows it. An incremental export's
line carries the DynamoDB JSON form's members (Metadata, Keys, NewImage, OldImage) the same way, its
WriteTimestampMicros a decimal as the JSON form's {"N": ...} is (best guess: the guide shows only the JSON form).

The reader takes Ion text: the version marker, structs, lists, strings (short and long, every escape), decimals,
bools, `null`/`null.null`, blobs, annotations, comments. An import's record is a struct `{Item:{...}}` at the top
level, or each such struct of a top-level list (the import formats page shows both). Ion ints are read as numbers
(exact, best guess: the page maps only decimals). Not read, each an error of its record (`problem`): floats,
`nan`/`inf`, timestamps, symbols as values, clobs, typed nulls, other annotations, a struct naming a field twice.
Text that is not Ion (or an s-expression) is `IonSyntaxError`: the caller ends the object there, as for DynamoDB
JSON."""

from __future__ import annotations

import binascii
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from openddb.model.numbers import parse_number

VERSION_MARKER = "$ion_1_0"
_SETS = {"SS": "$dynamodb_SS", "NS": "$dynamodb_NS", "BS": "$dynamodb_BS"}
_SET_OF = {annotation: (kind, kind[0]) for kind, annotation in _SETS.items()}
_KEYWORDS = frozenset(("null", "true", "false", "nan"))
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_SPACE = re.compile(r"(?:[ \t\n\r\v\f]+|//[^\n]*|/\*(?:[^*]|\*(?!/))*\*/)*")
_PLAIN_SHORT = re.compile(r'"([^"\\\n\r]*)"')
_TOKEN = re.compile(r"[^ \t\n\r\v\f,\]}){\[(/\"']+")
_DECIMAL = re.compile(r"(-?)(0|[1-9](?:_?[0-9])*)(?:\.((?:[0-9](?:_?[0-9])*)?))?(?:[dD]([+-]?[0-9]+))?")
_INT = re.compile(r"-?(?:0|[1-9](?:_?[0-9])*)")
_ESCAPES = {"a": "\a", "b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", "v": "\v", "?": "?", "0": "\0",
            "'": "'", '"': '"', "/": "/", "\\": "\\", "\n": "", "\r": ""}
_PLAIN_DECIMAL = re.compile(r"-?(?:[1-9](?:[0-9]*[1-9])?|[1-9][0-9]*\.[0-9]*[1-9]|0\.0{0,5}[1-9](?:[0-9]*[1-9])?)")
_NOT_SYMBOL = frozenset('"{[(-0123456789')  # (what starts no annotation)
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")


# --- writing -----------------------------------------------------------------------------------------------------
def item_line(data: bytes) -> bytes:
    """A full export's line for the stored item `data` (DynamoDB JSON): `$ion_1_0 {Item:{...}}`."""
    return f"{VERSION_MARKER} {{Item:{_struct(orjson.loads(data))}}}\n".encode()


def change_line(micros: int, keys: dict[str, Any], new: bytes | None, old: bytes | None) -> bytes:
    """An incremental export's line: Metadata, Keys, NewImage (if any), OldImage (if any), as the JSON form."""
    parts = [f"Metadata:{{WriteTimestampMicros:{micros}.}}", f"Keys:{_struct(keys)}"]
    if new is not None:
        parts.append(f"NewImage:{_struct(orjson.loads(new))}")
    if old is not None:
        parts.append(f"OldImage:{_struct(orjson.loads(old))}")
    return f"{VERSION_MARKER} {{{','.join(parts)}}}\n".encode()


def _struct(attributes: dict[str, Any]) -> str:
    return "{" + ",".join(f"{_name(name)}:{_value(attributes[name])}" for name in sorted(attributes)) + "}"


def _name(name: str) -> str:
    """A field name: an identifier as it is (not a keyword, nor `$...`, which Ion keeps for its own symbols), any
    other name as a string (Ion takes strings as field names)."""
    if name[:1] != "$" and name not in _KEYWORDS and _IDENTIFIER.fullmatch(name):
        return name
    return orjson.dumps(name).decode()  # (JSON's escapes are Ion's)


def _value(value: dict[str, Any]) -> str:
    ((kind, inner),) = value.items()
    if kind == "S":
        return orjson.dumps(inner).decode()
    if kind == "N":
        return decimal_text(inner)
    if kind == "B":
        return "{{" + str(inner) + "}}"
    if kind == "BOOL":
        return "true" if inner else "false"
    if kind == "NULL":
        return "null"
    if kind == "L":
        return "[" + ",".join(map(_value, inner)) + "]"
    if kind == "M":
        return _struct(inner)
    member = kind[0]
    elements = (_value({member: element}) for element in inner)
    return f"{_SETS[kind]}::[{','.join(elements)}]"


def decimal_text(number: str) -> str:
    """A DynamoDB number as an Ion decimal, in the guide's form (`103.`, `6d2`, `1.5`)."""
    if _PLAIN_DECIMAL.fullmatch(number):
        return number if "." in number else number + "."  # (the common cases, written as they are)
    sign, digits, exponent = parse_number(number).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).lstrip("0") or "0"
    if text == "0":
        return "0."
    stripped = text.rstrip("0")
    exponent += len(text) - len(stripped)
    minus = "-" if sign else ""
    if exponent == 0:
        return f"{minus}{stripped}."
    if exponent > 0 or len(stripped) - 1 + exponent < -6:
        return f"{minus}{stripped}d{exponent}"
    point = len(stripped) + exponent
    whole = stripped[:point] if point > 0 else "0"
    return f"{minus}{whole}.{'0' * max(0, -point)}{stripped[max(0, point):]}"


# --- reading -----------------------------------------------------------------------------------------------------
class IonSyntaxError(ValueError):
    """Text that is not Ion (of the subset read); `incomplete` if it ended inside a value."""

    def __init__(self, message: str, incomplete: bool = False) -> None:
        super().__init__(message)
        self.incomplete = incomplete


@dataclass(slots=True)
class Record:
    """A top-level value read: an item (DynamoDB JSON), or why it is none; `end`, where its text ends."""

    item: dict[str, Any] | None
    error: str | None
    end: int


def records(text: str) -> Iterator[Record]:
    """The records of Ion text, in order: raises IonSyntaxError where the text stops being Ion."""
    reader = _Reader(text)
    while True:
        reader.space()
        if reader.at >= len(text):
            return
        if text.startswith(VERSION_MARKER, reader.at) and not _continues(text, reader.at + len(VERSION_MARKER)):
            reader.at += len(VERSION_MARKER)
            continue
        if text[reader.at] != "[":
            yield reader.record()
            continue
        reader.at += 1  # (a top-level list: each of its values a record)
        while not reader.closed("]"):
            yield reader.record()
            reader.separator("]")


def _continues(text: str, at: int) -> bool:
    return at < len(text) and (text[at].isalnum() or text[at] in "_$")


def _record(value: dict[str, Any], end: int) -> Record:
    fields = value.get("M")
    if fields is None or set(fields) != {"Item"} or "M" not in fields["Item"]:
        # best guess: the wording of a record that is not an item is not recorded
        return Record(None, "The Ion value is not an item: {Item:{...}} expected", end)
    return Record(fields["Item"]["M"], None, end)


class _Reader:
    """A recursive-descent reader of one Ion text, values as DynamoDB JSON attribute values; `problem` notes the
    first value out of the mapping (the reading goes on to the value's end)."""

    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0
        self.problem: str | None = None

    def record(self) -> Record:
        self.problem = None
        value = self.value()
        return Record(None, self.problem, self.at) if self.problem is not None else _record(value, self.at)

    def fail(self, message: str) -> IonSyntaxError:
        return IonSyntaxError(message, incomplete=self.at >= len(self.text))

    def refuse(self, what: str) -> dict[str, Any]:
        if self.problem is None:
            # best guess: DynamoDB's wording of an Ion value out of its mapping is not recorded
            self.problem = f"Unsupported Ion value: {what}"
        return {"NULL": True}

    def space(self) -> None:
        if self.at < len(self.text) and self.text[self.at] not in " \t\n\r\v\f/":
            return  # (the common case: nothing to skip)
        match = _SPACE.match(self.text, self.at)
        assert match is not None
        self.at = match.end()
        if self.text.startswith("/*", self.at):
            raise IonSyntaxError("Unterminated comment", incomplete=True)

    def value(self) -> dict[str, Any]:
        self.space()
        annotations = self.annotations()
        if self.at >= len(self.text):
            raise self.fail("Unexpected end of the text")
        char = self.text[self.at]
        if annotations:
            if char != "[" or len(annotations) > 1 or annotations[0] not in _SET_OF:
                self.refuse(f"the annotation {'::'.join(annotations)}")
                self.plain(char)
                return {"NULL": True}
            return self.set_of(annotations[0])
        return self.plain(char)

    def plain(self, char: str) -> dict[str, Any]:
        if char == "{":
            return self.lob() if self.text.startswith("{{", self.at) else self.struct()
        if char == "[":
            return {"L": self.sequence()}
        if char == '"':
            return {"S": self.short_string()}
        if char == "'":
            if self.text.startswith("'''", self.at):
                return {"S": self.long_strings()}
            self.quoted_symbol()
            return self.refuse("a symbol")
        if char == "(":
            raise self.fail("S-expressions are not read")
        return self.token()

    def annotations(self) -> list[str]:
        found: list[str] = []
        if self.at < len(self.text) and self.text[self.at] in _NOT_SYMBOL:
            return found
        while True:
            start = self.at
            if self.at < len(self.text) and self.text[self.at] == "'" and not self.text.startswith("'''", self.at):
                symbol = self.quoted_symbol()
            else:
                match = _IDENTIFIER.match(self.text, self.at)
                if match is None:
                    return found
                symbol, self.at = match.group(), match.end()
            self.space()
            if not self.text.startswith("::", self.at):
                self.at = start
                return found
            self.at += 2
            self.space()
            found.append(symbol)

    def struct(self) -> dict[str, Any]:
        self.at += 1
        fields: dict[str, Any] = {}
        while not self.closed("}"):
            name = self.field_name()
            self.space()
            if not self.text.startswith(":", self.at) or self.text.startswith("::", self.at):
                raise self.fail("Expected ':' after a field name")
            self.at += 1
            value = self.value()
            if name in fields:
                self.refuse(f"the field {name!r} named twice")
            fields[name] = value
            self.separator("}")
        return {"M": fields}

    def closed(self, closing: str) -> bool:
        """Past the `closing` character that ends a container here (True), or at its next value (False)."""
        self.space()
        if self.at >= len(self.text):
            raise self.fail("Unterminated container")
        if self.text[self.at] != closing:
            return False
        self.at += 1
        return True

    def field_name(self) -> str:
        char = self.text[self.at]
        if char == '"':
            return self.short_string()
        if char == "'":
            return self.long_strings() if self.text.startswith("'''", self.at) else self.quoted_symbol()
        match = _IDENTIFIER.match(self.text, self.at)
        if match is None or match.group() in _KEYWORDS:
            raise self.fail("Expected a field name")
        self.at = match.end()
        return match.group()

    def separator(self, closing: str) -> None:
        self.space()
        if self.at >= len(self.text):
            raise self.fail("Unterminated container")
        if self.text[self.at] == ",":
            self.at += 1
        elif self.text[self.at] != closing:
            raise self.fail(f"Expected ',' or '{closing}'")

    def sequence(self) -> list[dict[str, Any]]:
        self.at += 1
        elements: list[dict[str, Any]] = []
        while not self.closed("]"):
            elements.append(self.value())
            self.separator("]")
        return elements

    def set_of(self, annotation: str) -> dict[str, Any]:
        kind, member = _SET_OF[annotation]
        elements = self.sequence()
        if any(set(element) != {member} for element in elements):
            return self.refuse(f"an element of a {annotation} list that is not of its type")
        return {kind: [element[member] for element in elements]}

    def lob(self) -> dict[str, Any]:
        self.at += 2
        while self.at < len(self.text) and self.text[self.at] in " \t\n\r\v\f":  # (no comments: base64 has "/")
            self.at += 1
        if self.at < len(self.text) and self.text[self.at] in "\"'":
            if self.text[self.at] == '"':
                self.short_string()
            else:
                self.long_strings()
            self.at = _BASE64.match(self.text, self.at).end()  # type: ignore[union-attr]
            self.closing_braces()
            return self.refuse("a clob")
        match = _BASE64.match(self.text, self.at)
        assert match is not None
        self.at = match.end()
        self.closing_braces()
        try:
            data = binascii.a2b_base64("".join(match.group().split()), strict_mode=True)
        except binascii.Error as error:
            raise IonSyntaxError(f"Invalid blob: {error}") from None
        return {"B": binascii.b2a_base64(data, newline=False).decode("ascii")}

    def closing_braces(self) -> None:
        if not self.text.startswith("}}", self.at):
            raise self.fail("Expected '}}'")
        self.at += 2

    def short_string(self) -> str:
        plain = _PLAIN_SHORT.match(self.text, self.at)
        if plain is not None:
            self.at = plain.end()
            return plain.group(1)
        return self.escaped_text('"', True)

    def long_strings(self) -> str:
        parts = [self.escaped_text("'''", False)]
        while True:
            before = self.at
            self.space()
            if not self.text.startswith("'''", self.at):
                self.at = before
                return "".join(parts)
            parts.append(self.escaped_text("'''", False))

    def quoted_symbol(self) -> str:
        return self.escaped_text("'", True)

    def escaped_text(self, quote: str, short: bool) -> str:
        """Text between `quote`s from here, its escapes decoded (no raw newline in a short one)."""
        text, at = self.text, self.at + len(quote)
        out: list[str] = []
        while True:
            if at >= len(text):
                self.at = at
                raise self.fail("Unterminated string")
            char = text[at]
            if text.startswith(quote, at):
                self.at = at + len(quote)
                return _joined(out)
            if short and char in "\n\r":
                self.at = at
                raise self.fail("A newline in a short string")
            if char != "\\":
                out.append(char)
                at += 1
                continue
            at = self.escape(at + 1, out)

    def escape(self, at: int, out: list[str]) -> int:
        text = self.text
        if at >= len(text):
            self.at = at
            raise self.fail("Unterminated escape")
        char = text[at]
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
            return at + 2 if char == "\r" and text.startswith("\n", at + 1) else at + 1
        width = {"x": 2, "u": 4, "U": 8}.get(char)
        digits = text[at + 1:at + 1 + width] if width else ""
        if width is None or len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
            self.at = at
            raise self.fail(f"Invalid escape \\{char}")
        code = int(digits, 16)
        if code > 0x10FFFF:
            raise IonSyntaxError("Invalid code point")
        out.append(chr(code))
        return at + 1 + width

    def token(self) -> dict[str, Any]:
        """A number, a keyword or a symbol."""
        match = _TOKEN.match(self.text, self.at)
        if match is None:
            raise self.fail(f"Unexpected {self.text[self.at]!r}")
        word, self.at = match.group(), match.end()
        if word in ("true", "false"):
            return {"BOOL": word == "true"}
        if word in ("null", "null.null"):
            return {"NULL": True}
        number = _DECIMAL.fullmatch(word)
        if number is not None and (number.group(3) is not None or number.group(4) is not None):
            return {"N": _number(number)}
        if _INT.fullmatch(word):
            return {"N": word.replace("_", "")}
        if word[:1].isdigit() or word[:1] in "+-" or word.startswith("null.") or word == "nan":
            return self.refuse(f"{word!r} (floats, timestamps, infinities, typed nulls and radix ints are not read)")
        if _IDENTIFIER.fullmatch(word):
            return self.refuse("a symbol")
        raise IonSyntaxError(f"Unexpected {word!r}")


def _number(match: re.Match[str]) -> str:
    """An Ion decimal's text as a DynamoDB number (`6d2` is 6E2: the store keeps 600)."""
    sign, whole, fraction, exponent = match.groups()
    text = sign + whole.replace("_", "")
    if fraction:
        text += "." + fraction.replace("_", "")
    return text + (f"E{exponent}" if exponent else "")


def _joined(parts: list[str]) -> str:
    """Decoded text; a surrogate pair written as two escapes made one character; a lone one refused (DynamoDB's
    strings are UTF-8)."""
    text = "".join(parts)
    if not any("\ud800" <= char <= "\udfff" for char in text):
        return text
    try:
        return text.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:
        raise IonSyntaxError("A lone surrogate in a string") from None
