"""What the advisor reads from a request and its values: the shape of its key condition (placeholders as "?"), the
attributes a filter compares for equality, the projection's size, the attributes an update appends to, and the
kinds of values (time formats, naming styles, secrets, blobs). Shapes of an expression are computed once per
distinct expression text and kept (as the expression cache does), so a request pays a dictionary lookup."""

from __future__ import annotations

import re
from typing import Any

_CACHE_MAX = 4096
_NAME = re.compile(r"#[A-Za-z0-9_]+")
_VALUE = re.compile(r":[A-Za-z0-9_]+")
_SPACES = re.compile(r"\s+")
_EQUALITY = re.compile(r"([#A-Za-z_][#\w.\[\]]*)\s*=\s*:\w+|:\w+\s*=\s*([#A-Za-z_][#\w.\[\]]*)")
_APPEND = re.compile(r"([#A-Za-z_][#\w.\[\]]*)\s*=\s*list_append\s*\(", re.IGNORECASE)
_CLAUSE = re.compile(r"\b(SET|REMOVE|ADD|DELETE)\b", re.IGNORECASE)
_KEYWORDS = re.compile(r"\b(and|between|begins_with|or|not)\b", re.IGNORECASE)

_shapes: dict[str, str] = {}
_equalities: dict[str, tuple[str, ...]] = {}
_appends: dict[str, tuple[str, ...]] = {}


def resolved(text: str, names: dict[str, str] | None) -> str:
    """`text` with its #name placeholders replaced by the names they stand for."""
    if not names or "#" not in text:
        return text
    return _NAME.sub(lambda match: names.get(match.group(0), match.group(0)), text)


def key_condition_shape(expression: str, names: dict[str, str] | None) -> str:
    """"pk = ? AND begins_with(sk, ?)": the key condition with its values as "?", spaces and keywords normalized."""
    shape = _shapes.get(expression)
    if shape is None:
        shape = _SPACES.sub(" ", _VALUE.sub("?", expression)).strip()
        shape = _KEYWORDS.sub(lambda match: match.group(0).upper() if match.group(0).lower() != "begins_with"
                              else "begins_with", shape)
        if len(_shapes) < _CACHE_MAX:
            _shapes[expression] = shape
    return resolved(shape, names)


def equality_attributes(expression: str, names: dict[str, str] | None) -> tuple[str, ...]:
    """The attributes a filter compares with a value by "=" (the top-level name of a path)."""
    found = _equalities.get(expression)
    if found is None:
        found = tuple(left or right for left, right in _EQUALITY.findall(expression))
        if len(_equalities) < _CACHE_MAX:
            _equalities[expression] = found
    return tuple(resolved(path, names).split(".")[0].split("[")[0] for path in found)


def appended_attributes(expression: str, names: dict[str, str] | None) -> tuple[str, ...]:
    """The attributes an update expression grows: SET a = list_append(...), and ADD's targets."""
    found = _appends.get(expression)
    if found is None:
        targets = [path for path in _APPEND.findall(expression)]
        parts = _CLAUSE.split(expression)
        for keyword, body in zip(parts[1::2], parts[2::2], strict=False):
            if keyword.upper() == "ADD":
                targets += [action.split()[0] for action in body.split(",") if action.split()]
        found = tuple(targets)
        if len(_appends) < _CACHE_MAX:
            _appends[expression] = found
    return tuple(resolved(path, names) for path in found)


def projected(request: dict[str, Any]) -> int:
    """How many attributes a read projects (-1: all of them)."""
    expression = request.get("ProjectionExpression")
    if isinstance(expression, str) and expression:
        return expression.count(",") + 1
    listed = request.get("AttributesToGet")
    if isinstance(listed, list) and listed:
        return len(listed)
    if request.get("Select") == "COUNT":
        return 0
    return -1


# --- values --------------------------------------------------------------------------------------------------------

_TIME_NAME = re.compile(r"(^|_|-)(at|on|time|ts|timestamp|date|datetime)$|[a-z0-9](At|On|Time|Ts|Timestamp|Date)$"
                        r"|^(ts|timestamp|date|time|created|updated|modified|expires|expiry)$", re.IGNORECASE)
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$")


def time_named(name: str) -> bool:
    return _TIME_NAME.search(name) is not None


def time_format(value: dict[str, Any]) -> str:
    """The format of a time held in `value`: epoch-seconds, -milliseconds or -microseconds (a Number, or digits
    in a String: "-string" added), iso8601-date, iso8601-with-zone, iso8601-without-zone, or other."""
    if "N" in value:
        return _epoch(value["N"])
    text = value.get("S")
    if not isinstance(text, str):
        return "other"
    if text.isdigit():
        return _epoch(text) + "-string"
    match = _ISO.match(text)
    if match is None:
        return "other"
    if match.group(1) is None:
        return "iso8601-date"
    return "iso8601-with-zone" if match.group(4) else "iso8601-without-zone"


def _epoch(number: str) -> str:
    digits = len(number.split(".")[0].lstrip("-"))
    if digits >= 15:
        return "epoch-microseconds"
    if digits >= 12:
        return "epoch-milliseconds"
    return "epoch-seconds" if digits >= 9 else "other"


def ttl_problem(value: dict[str, Any] | None) -> str | None:
    """Why a TTL attribute's value would never expire the item as intended (None: a Number of epoch seconds)."""
    if value is None:
        return "missing"
    if "N" not in value:
        return "not a Number (" + next(iter(value), "?") + ")"
    kind = _epoch(value["N"])
    return kind if kind in ("epoch-milliseconds", "epoch-microseconds") else None


def naming_style(name: str) -> str | None:
    """snake_case, kebab-case, camelCase or PascalCase (None: one word, any style)."""
    if "_" in name.strip("_"):
        return "snake_case"
    if "-" in name:
        return "kebab-case"
    rest = name[1:]
    if any(char.isupper() for char in rest) and any(char.islower() for char in name):
        return "PascalCase" if name[0].isupper() else "camelCase"
    return None


def concept(name: str) -> str:
    """The words of a name, whatever its style: createdAt, created_at and CreatedAt are one concept."""
    return name.replace("_", "").replace("-", "").lower()


_SECRET_NAME = re.compile(r"password|passwd|secret|api_?key|apikey|access_?token|refresh_?token|auth_?token"
                          r"|^token$|_token$|^ssn$|social_?security|card_?number|credit_?card|^cvv$|^pin$",
                          re.IGNORECASE)
_HASHED = re.compile(r"^(\$2[aby]?\$|\$argon2|\$pbkdf2|pbkdf2[_:$]|\$scrypt|\$6\$|\$5\$|sha(256|512)[:$]|enc:|kms:"
                     r"|vault:)|^[0-9a-f]{40,}$|^[A-Za-z0-9+/=_-]{44,}$")


def secret_named(name: str) -> bool:
    return _SECRET_NAME.search(name) is not None


def plaintext(value: dict[str, Any]) -> bool:
    """A String that does not look hashed or encrypted (a hash's prefix, long hex or base64): a secret in clear."""
    text = value.get("S")
    return isinstance(text, str) and bool(text) and _HASHED.search(text) is None


_BASE64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")


def blob_size(value: dict[str, Any]) -> int:
    """The size of a Binary value, or of a String that looks base64-encoded (0: neither)."""
    if "B" in value:
        encoded = str(value["B"])
        return len(encoded) * 3 // 4 - encoded[-2:].count("=")
    text = value.get("S")
    if isinstance(text, str) and len(text) >= 1024 and _BASE64.match(text[:512]) and " " not in text[-64:]:
        return len(text)
    return 0


_EPHEMERAL = re.compile(r"session|token|invitation|invite|otp|cache|lock|expires|expiry|expiration|ttl|temp",
                        re.IGNORECASE)


def ephemeral(name: str) -> bool:
    return _EPHEMERAL.search(name) is not None


_COMPOSITE = re.compile(r"^[^#|:]+[#|:][^#|:]*[#|:]")


def composite(value: str) -> bool:
    """A key value made of parts, as USER#1#ORDER#7 (two separators or more)."""
    return _COMPOSITE.match(value) is not None
