"""The AWS Query protocol that IAM and STS speak: a form-encoded POST (`Action=...&Version=...&Name=value`) in,
XML out (`<{Action}Response><{Action}Result>...</{Action}Result><ResponseMetadata>...`), and errors as
`<ErrorResponse><Error><Type>Sender</Type><Code>...</Code><Message>...</Message></Error><RequestId>`, the shapes
botocore's `query` parser reads (service models iam 2010-05-08 and sts 2011-06-15).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape

# A value of an answer: text, a number, a flag, a structure (its members in order) or a list (`<member>` items).
Value = str | int | bool | Mapping[str, "Value | None"] | Sequence["Value"]

IAM_NAMESPACE = "https://iam.amazonaws.com/doc/2010-05-08/"
STS_NAMESPACE = "https://sts.amazonaws.com/doc/2011-06-15/"


class QueryError(Exception):
    """An error answered in the Query protocol's form: its Code, message and HTTP status (botocore's service
    models give each modelled error's code and status), and whether the sender is at fault."""

    def __init__(self, code: str, message: str, status: int = 400, sender: bool = True) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.sender = sender


def validation_error(member: str, value: object, constraint: str) -> QueryError:
    """IAM's and STS's ValidationError for one member, in their wording ("1 validation error detected: Value 'x'
    at 'userName' failed to satisfy constraint: Member must ..."; the member in lower camel case)."""
    shown = "null" if value is None else f"'{value}'"
    name = member[:1].lower() + member[1:]
    return QueryError("ValidationError",
                      f"1 validation error detected: Value {shown} at '{name}' failed to satisfy constraint: "
                      f"Member must {constraint}")


def parse_form(body: bytes) -> dict[str, str]:
    """The parameters of a form-encoded body (a name given twice: the last value)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise QueryError("MalformedQueryString", "The request body is not valid UTF-8") from None  # best guess
    return dict(parse_qsl(text, keep_blank_values=True))


def timestamp(epoch: float) -> str:
    """An ISO 8601 time as IAM and STS write them (2026-01-01T00:00:00Z)."""
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def render_result(action: str, namespace: str, result: Mapping[str, Value | None] | None, request_id: str) -> bytes:
    """An action's answer; `result` None for an action whose output is empty (no Result element)."""
    parts = [f'<{action}Response xmlns="{namespace}">']
    if result is not None:
        parts.append(f"<{action}Result>")
        _members(result, parts)
        parts.append(f"</{action}Result>")
    parts.append(f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata></{action}Response>")
    return "".join(parts).encode()


def render_error(error: QueryError, namespace: str, request_id: str) -> bytes:
    kind = "Sender" if error.sender else "Receiver"
    return (f'<ErrorResponse xmlns="{namespace}"><Error><Type>{kind}</Type><Code>{error.code}</Code>'
            f"<Message>{escape(error.message)}</Message></Error><RequestId>{request_id}</RequestId>"
            f"</ErrorResponse>").encode()


def _members(structure: Mapping[str, Value | None], parts: list[str]) -> None:
    for name, value in structure.items():
        if value is not None:
            parts.append(f"<{name}>")
            _value(value, parts)
            parts.append(f"</{name}>")


def _value(value: Value, parts: list[str]) -> None:
    if isinstance(value, bool):
        parts.append("true" if value else "false")
    elif isinstance(value, int):
        parts.append(str(value))
    elif isinstance(value, str):
        parts.append(escape(value))
    elif isinstance(value, Mapping):
        _members(value, parts)
    else:
        for item in value:
            parts.append("<member>")
            _value(item, parts)
            parts.append("</member>")


@dataclass(frozen=True)
class Action:
    """One call: its Action name and its other parameters."""

    name: str
    params: dict[str, str]

    def text(self, member: str, *, required: bool = False, low: int = 1, high: int = 0,
             pattern: str | None = None) -> str | None:
        """A string member checked as the service model states it (length, pattern), or ValidationError."""
        value = self.params.get(member)
        if value is None:
            if required:
                raise validation_error(member, None, "not be null")
            return None
        if len(value) < low:
            raise validation_error(member, value, f"have length greater than or equal to {low}")
        if high and len(value) > high:
            raise validation_error(member, value, f"have length less than or equal to {high}")
        if pattern is not None and not _matches(pattern, value):
            raise validation_error(member, value, f"satisfy regular expression pattern: {pattern}")
        return value

    def number(self, member: str, low: int, high: int) -> int | None:
        """An integer member within [low, high], or ValidationError."""
        value = self.params.get(member)
        if value is None:
            return None
        try:
            number = int(value)
        except ValueError:
            # best guess: the words of a value the protocol cannot read as an integer
            raise validation_error(member, value, "be an integer") from None
        if number < low:
            raise validation_error(member, number, f"have value greater than or equal to {low}")
        if number > high:
            raise validation_error(member, number, f"have value less than or equal to {high}")
        return number


def _matches(pattern: str, value: str) -> bool:
    return PATTERNS[pattern].fullmatch(value) is not None


# The service models' patterns (the text shown in ValidationError), compiled.
NAME_PATTERN = r"[\w+=,.@-]+"
PATH_PATTERN = r"(\u002F)|(\u002F[\u0021-\u007E]+\u002F)"
PATH_PREFIX_PATTERN = r"\u002F[\u0021-\u007F]*"
ACCESS_KEY_PATTERN = r"[\w]+"
SESSION_NAME_PATTERN = r"[\w+=,.@-]*"
POLICY_PATTERN = r"[\u0009\u000A\u000D\u0020-\u00FF]+"
PATTERNS = {pattern: re.compile(pattern) for pattern in (
    NAME_PATTERN, PATH_PATTERN, PATH_PREFIX_PATTERN, ACCESS_KEY_PATTERN, SESSION_NAME_PATTERN, POLICY_PATTERN)}
