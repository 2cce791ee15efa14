"""CBOR (RFC 8949), the subset the Smithy RPC v2 CBOR protocol carries: what botocore's `smithy-rpc-v2-cbor`
serializer writes and its parser reads (CloudWatch's protocol in botocore's current service model).

Decoded: unsigned and negative integers, byte and text strings (definite or indefinite length), arrays and maps
(either), tag 1 (epoch-seconds timestamps, decoded to a float of seconds) and other tags (their content), half,
single and double floats, true, false, null and undefined (None). Encoded: dict, list or tuple, str, bytes, bool,
None, int, float, and `Timestamp` (tag 1, seconds as a double).
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple


class CborError(ValueError):
    """A body that is not the CBOR this decoder reads."""


class Timestamp(NamedTuple):
    """Epoch seconds, encoded as CBOR tag 1 (a timestamp member of a Smithy shape)."""

    seconds: float


_BREAK = object()
_HALF = struct.Struct(">e")
_SINGLE = struct.Struct(">f")
_DOUBLE = struct.Struct(">d")


def decode(data: bytes) -> Any:
    """The one data item `data` holds; CborError if it is not CBOR or holds more."""
    value, end = _item(memoryview(data), 0)
    if value is _BREAK or end != len(data):
        raise CborError("not one CBOR data item")
    return value


def _argument(data: memoryview, at: int, info: int) -> tuple[int | None, int]:
    """An item's argument (None: indefinite length) and where its content starts."""
    if info < 24:
        return info, at
    if info == 31:
        return None, at
    size = {24: 1, 25: 2, 26: 4, 27: 8}.get(info)
    if size is None or at + size > len(data):
        raise CborError("a CBOR argument cut short or reserved")
    return int.from_bytes(data[at:at + size], "big"), at + size


def _item(data: memoryview, at: int) -> tuple[Any, int]:
    if at >= len(data):
        raise CborError("CBOR cut short")
    head = data[at]
    major, info = head >> 5, head & 31
    if major == 7:
        return _simple(data, at + 1, info)
    argument, at = _argument(data, at + 1, info)
    if major == 0:
        return _definite(argument), at
    if major == 1:
        return -1 - _definite(argument), at
    if major in (2, 3):
        return _string(data, at, argument, major)
    if major == 4:
        return _sequence(data, at, argument)
    if major == 5:
        return _map(data, at, argument)
    content, at = _item(data, at)  # major 6: a tag; tag 1's content is the epoch seconds
    return (float(content) if _definite(argument) == 1 else content), at


def _definite(argument: int | None) -> int:
    if argument is None:
        raise CborError("an indefinite length where none is allowed")
    return argument


def _string(data: memoryview, at: int, length: int | None, major: int) -> tuple[Any, int]:
    if length is None:  # chunks of the same kind until a break
        chunks = []
        while True:
            chunk, at = _item(data, at)
            if chunk is _BREAK:
                break
            chunks.append(chunk)
        return ("" if major == 3 else b"").join(chunks), at
    if at + length > len(data):
        raise CborError("a CBOR string cut short")
    raw = bytes(data[at:at + length])
    if major == 2:
        return raw, at + length
    try:
        return raw.decode("utf-8"), at + length
    except UnicodeDecodeError:
        raise CborError("a CBOR text string that is not UTF-8") from None


def _sequence(data: memoryview, at: int, count: int | None) -> tuple[list[Any], int]:
    """`count` items (None: up to a break)."""
    items: list[Any] = []
    while count is None or len(items) < count:
        item, at = _item(data, at)
        if item is _BREAK:
            if count is not None:
                raise CborError("a break inside a CBOR array or map of known size")
            break
        items.append(item)
    return items, at


def _map(data: memoryview, at: int, count: int | None) -> tuple[dict[Any, Any], int]:
    items, at = _sequence(data, at, None if count is None else 2 * count)
    keys, values = items[0::2], items[1::2]
    if len(keys) != len(values) or any(isinstance(key, dict | list) for key in keys):
        raise CborError("a CBOR map entry without a value or with a structured key")
    return dict(zip(keys, values, strict=True)), at


def _simple(data: memoryview, at: int, info: int) -> tuple[Any, int]:
    if info in (20, 21):
        return info == 21, at
    if info in (22, 23):
        return None, at
    if info == 31:
        return _BREAK, at
    form = {25: _HALF, 26: _SINGLE, 27: _DOUBLE}.get(info)
    if form is None or at + form.size > len(data):
        raise CborError("an unknown or cut short CBOR simple value")
    return form.unpack_from(data, at)[0], at + form.size


def encode(value: Any) -> bytes:
    out = bytearray()
    _encode(value, out)
    return bytes(out)


def _head(major: int, argument: int, out: bytearray) -> None:
    if argument < 24:
        out.append(major << 5 | argument)
    elif argument < 1 << 8:
        out += bytes((major << 5 | 24, argument))
    elif argument < 1 << 16:
        out.append(major << 5 | 25)
        out += argument.to_bytes(2, "big")
    elif argument < 1 << 32:
        out.append(major << 5 | 26)
        out += argument.to_bytes(4, "big")
    else:
        out.append(major << 5 | 27)
        out += argument.to_bytes(8, "big")


def _encode(value: Any, out: bytearray) -> None:
    if value is None:
        out.append(0xF6)
    elif value is True or value is False:
        out.append(0xF5 if value else 0xF4)
    elif isinstance(value, Timestamp):
        out.append(0xC1)  # tag 1
        out.append(0xFB)
        out += _DOUBLE.pack(float(value.seconds))
    elif isinstance(value, int):
        _head(0, value, out) if value >= 0 else _head(1, -1 - value, out)
    elif isinstance(value, float):
        out.append(0xFB)
        out += _DOUBLE.pack(value)
    elif isinstance(value, str):
        raw = value.encode("utf-8")
        _head(3, len(raw), out)
        out += raw
    elif isinstance(value, bytes):
        _head(2, len(value), out)
        out += value
    elif isinstance(value, dict):
        _head(5, len(value), out)
        for key, member in value.items():
            _encode(key, out)
            _encode(member, out)
    elif isinstance(value, list | tuple):
        _head(4, len(value), out)
        for member in value:
            _encode(member, out)
    else:
        raise TypeError(f"no CBOR form for {type(value).__name__}")
