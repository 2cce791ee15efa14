"""Order-preserving byte encoding of key values, and the partition hash.

Each encoded key is a whole column value compared with memcmp (SQLite BLOB, PostgreSQL bytea), so no
escaping or terminators between columns are needed; within one key type, unsigned byte order equals
DynamoDB's order: S by UTF-8 bytes, B by unsigned bytes, N numerically.

Number layout (the value is ``0.d1d2d3... * 10**(e+1)`` with ``e`` the exponent of the first digit):

    zero      0x01
    positive  0x02, e+130, pairs...
    negative  0x00, 125-e, complemented pairs..., 0xFF

``e`` lies in [-130, 125], so the biased exponent fits one byte. Digits are packed two per byte (value
0-99, an odd count padded with a 0 on the right); normalized digits never end in 0, so packing is unique.
For positives a shorter pair string that is a prefix of a longer one is the smaller number, which is memcmp's
order too. Negatives complement each pair (0xFE - p, 155..254) and end with 0xFF, above every complemented
pair, so a smaller magnitude (a prefix) sorts after a larger one, as it must.
"""

from __future__ import annotations

import hashlib

from openddb.model import AttributeValue
from openddb.model.numbers import MIN_ADJUSTED_EXPONENT
from openddb.model.values import decode_binary, encode_binary

_NEGATIVE, _ZERO, _POSITIVE = 0x00, 0x01, 0x02
_EXPONENT_BIAS = -MIN_ADJUSTED_EXPONENT  # 130
_NEGATIVE_END = 0xFF
_COMPLEMENT = 0xFE


def _digits_and_exponent(normalized: str) -> tuple[bool, str, int]:
    """Split a normalized number into (negative, significant digits, exponent of the first digit)."""
    negative = normalized[:1] == "-"
    body = normalized[1:] if negative else normalized
    whole, _, frac = body.partition(".")
    if whole != "0":
        digits = (whole + frac).rstrip("0")
        return negative, digits, len(whole) - 1
    stripped = frac.lstrip("0")
    return negative, stripped, len(stripped) - len(frac) - 1


def encode_number(normalized: str) -> bytes:
    """Order-preserving bytes for a normalized DynamoDB number."""
    if normalized == "0":
        return bytes((_ZERO,))
    negative, digits, exponent = _digits_and_exponent(normalized)
    if len(digits) % 2:
        digits += "0"
    pairs = [int(digits[i : i + 2]) for i in range(0, len(digits), 2)]
    if negative:
        return bytes((_NEGATIVE, 255 - (exponent + _EXPONENT_BIAS), *(_COMPLEMENT - p for p in pairs), _NEGATIVE_END))
    return bytes((_POSITIVE, exponent + _EXPONENT_BIAS, *pairs))


def decode_number(data: bytes) -> str:
    """Inverse of ``encode_number``: the normalized number text."""
    sign = data[0]
    if sign == _ZERO:
        return "0"
    if sign == _POSITIVE:
        exponent = data[1] - _EXPONENT_BIAS
        pairs = data[2:]
    else:
        exponent = 255 - data[1] - _EXPONENT_BIAS
        pairs = bytes(_COMPLEMENT - p for p in data[2:-1])
    digits = "".join(f"{p:02d}" for p in pairs).rstrip("0")
    point = exponent + 1  # digits before the decimal point
    if point >= len(digits):
        body = digits + "0" * (point - len(digits))
    elif point > 0:
        body = digits[:point] + "." + digits[point:]
    else:
        body = "0." + "0" * -point + digits
    return "-" + body if sign == _NEGATIVE else body


def encode_key(value: AttributeValue) -> bytes:
    """Order-preserving bytes for a validated S, N or B key value."""
    for kind, inner in value.items():
        if kind == "S":
            encoded: bytes = inner.encode("utf-8")
            return encoded
        if kind == "N":
            return encode_number(inner)
        if kind == "B":
            return decode_binary(inner)
    raise ValueError(f"not a key value: {value!r}")


def decode_key(key_type: str, data: bytes) -> AttributeValue:
    """Inverse of ``encode_key`` for a key of type ``key_type`` ("S", "N" or "B"), in normalized wire form."""
    if key_type == "S":
        return {"S": data.decode("utf-8")}
    if key_type == "N":
        return {"N": decode_number(data)}
    if key_type == "B":
        return {"B": encode_binary(data)}
    raise ValueError(f"not a key type: {key_type!r}")


_HASHES: dict[bytes, int] = {}  # recent short keys' hashes: a dict hit is several times cheaper than BLAKE2b
_HASHES_MAX = 65536
_HASHED_KEY_MAX = 64  # bytes: bounds the memory the remembered keys take


def partition_hash(encoded_partition_key: bytes) -> int:
    """Stable unsigned 32-bit hash of an encoded partition key (BLAKE2b, 4-byte digest, big-endian).

    Orders a table's rows for Scan and splits parallel-scan segments, so it must never change between
    processes or versions (unlike ``hash()``, which is salted per process).
    """
    found = _HASHES.get(encoded_partition_key)
    if found is not None:
        return found
    value = int.from_bytes(hashlib.blake2b(encoded_partition_key, digest_size=4).digest(), "big")
    if len(encoded_partition_key) <= _HASHED_KEY_MAX:
        if len(_HASHES) >= _HASHES_MAX:
            _HASHES.clear()
        _HASHES[encoded_partition_key] = value
    return value
