"""HTTP content codings: compressed request bodies (Content-Encoding) and compressed responses (Accept-Encoding).

DynamoDB takes request bodies compressed with gzip or deflate (scylladb/scylladb PRs 27080 and 27917 record both
working against DynamoDB; AWS's SDK guide, docs.aws.amazon.com/sdkref/latest/guide/feature-compression.html,
names gzip), and compresses a response above a threshold when the client accepts it.
"""

from __future__ import annotations

import zlib

# The codings this server reads in a request body and writes in a response; "x-gzip" is gzip's old name (RFC 9110
# 8.4.1.3).
_GZIP = b"gzip"
_DEFLATE = b"deflate"
_GZIP_WBITS = 31  # zlib: a gzip header and trailer
_ZLIB_WBITS = 15  # zlib: the zlib wrapper HTTP's "deflate" means (RFC 9110 8.4.1.2)
_RAW_WBITS = -15  # zlib: bare deflate, which some clients send as "deflate" all the same


class BodyTooLarge(Exception):
    """The body decodes to more than the limit (decoding stopped there: a small bomb cannot fill the memory)."""


class BadCoding(Exception):
    """The body is not valid for its declared coding, or the coding is not one this server reads."""


def decode_body(body: bytes, content_encoding: bytes, limit: int) -> bytes:
    """The body with its content codings undone, last applied first (RFC 9110 8.4); BodyTooLarge past `limit`
    decoded bytes, BadCoding if a coding is unknown or the bytes are not valid for it.

    An empty body stays empty whatever its declared coding (a best guess at DynamoDB's answer: nothing to decode,
    so the request is read as any empty body is)."""
    codings = [coding.strip().lower() for coding in content_encoding.split(b",")]
    for coding in reversed(codings):
        if coding in (b"", b"identity") or not body:
            continue
        if coding in (_GZIP, b"x-gzip"):
            body = _inflate_members(body, limit)
        elif coding == _DEFLATE:
            body = _inflate_deflate(body, limit)
        else:
            raise BadCoding(coding.decode("latin-1"))
    return body


def _inflate(data: bytes, wbits: int, limit: int) -> tuple[bytes, bytes]:
    """One compressed stream's bytes (at most `limit`) and the bytes after its end."""
    stream = zlib.decompressobj(wbits)
    try:
        out = stream.decompress(data, limit + 1)  # (one byte past the limit tells "too large" from "just fits")
    except zlib.error as error:
        raise BadCoding(str(error)) from None
    if len(out) > limit:
        raise BodyTooLarge()
    if not stream.eof:  # cut short: the stream's end (and a gzip member's CRC and length) never came
        raise BadCoding("truncated")
    return out, stream.unused_data


def _inflate_members(data: bytes, limit: int) -> bytes:
    """gzip: one member or several concatenated (RFC 1952 2.2), their contents joined."""
    parts: list[bytes] = []
    size = 0
    while data:
        out, data = _inflate(data, _GZIP_WBITS, limit - size)
        parts.append(out)
        size += len(out)
    return b"".join(parts)


def _inflate_deflate(data: bytes, limit: int) -> bytes:
    """deflate: the zlib format HTTP names so, or (as some clients send it) a bare deflate stream."""
    try:
        out, rest = _inflate(data, _ZLIB_WBITS, limit)
    except BadCoding:
        out, rest = _inflate(data, _RAW_WBITS, limit)
    if rest:
        raise BadCoding("bytes after the end of the stream")
    return out


_CHOSEN: dict[bytes, bytes | None] = {}  # Accept-Encoding header -> the coding chosen (clients repeat theirs)


def chosen_coding(accept_encoding: bytes) -> bytes | None:
    """The coding to compress a response with, of those the client accepts: the highest q-value, gzip before
    deflate on a tie (issue 30: "gzip first"); None if neither is acceptable (RFC 9110 12.5.3)."""
    chosen = _CHOSEN.get(accept_encoding, b"")
    if chosen != b"":
        return chosen
    weights: dict[bytes, float] = {}
    for part in accept_encoding.split(b","):
        name, _, parameters = part.partition(b";")
        weights[name.strip().lower()] = _weight(parameters)
    if b"x-gzip" in weights and _GZIP not in weights:
        weights[_GZIP] = weights[b"x-gzip"]
    anything = weights.get(b"*", 0.0)
    gzip_weight, deflate_weight = weights.get(_GZIP, anything), weights.get(_DEFLATE, anything)
    best = max(gzip_weight, deflate_weight)
    result = None if best <= 0 else _GZIP if gzip_weight == best else _DEFLATE
    if len(_CHOSEN) < 256:
        _CHOSEN[accept_encoding] = result
    return result


def _weight(parameters: bytes) -> float:
    """The q-value among a coding's parameters (1 if none; 0 if it is not a number, so a bad one is refused)."""
    for parameter in parameters.split(b";"):
        key, _, value = parameter.partition(b"=")
        if key.strip().lower() == b"q":
            try:
                return float(value.strip())
            except ValueError:
                return 0.0
    return 1.0


def compress(body: bytes, coding: bytes, level: int) -> bytes:
    """The body in `coding` (gzip or deflate, as `chosen_coding` names them)."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, _GZIP_WBITS if coding == _GZIP else _ZLIB_WBITS)
    return compressor.compress(body) + compressor.flush()
