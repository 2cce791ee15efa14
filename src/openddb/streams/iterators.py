"""Shard iterators: an opaque string naming a position in one shard, valid for 15 minutes.

The form follows DynamoDB's own (the API Reference's GetShardIterator example): the stream ARN, a version and an
opaque token, joined by "|". The token is base64 of `stream id:shard id:next sequence number:issue time in ms`
and a short digest of those, so a truncated or garbled iterator is refused rather than read from a wrong place.

Why a plain digest, not an HMAC with a secret: an iterator grants nothing its holder could not get from
GetShardIterator (this server has no per-principal access to streams), so forging one gains nothing; what matters
is that a damaged one is told apart. A secret would also have to be shared by every worker and node and survive
restarts (a consumer's iterator stays valid across a server restart, as on DynamoDB), i.e. stored in the engine.
The issue time is in the token, so expiry needs no server state and holds across workers, nodes and restarts.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from openddb.errors import ValidationException

# A shard iterator expires 15 minutes after it is returned (API Reference, GetShardIterator).
ITERATOR_SECONDS = 15 * 60.0
_VERSION = "1"
_DIGEST_BYTES = 8
_DIGEST_KEY = b"openddb shard iterator v1"  # a fixed key: tells a damaged token apart (see the module's note)
# DynamoDB's text is unrecorded for a malformed iterator (best guess, in the style of its "Invalid StreamArn").
INVALID_ITERATOR = "Invalid ShardIterator"


@dataclass(slots=True, frozen=True)
class Position:
    """Where an iterator reads next: records of `shard_id` with sequence numbers >= `seq`."""

    stream_id: int
    shard_id: str
    seq: int
    issued_at: float  # epoch seconds: the iterator expires ITERATOR_SECONDS later


def _digest(payload: bytes) -> bytes:
    return hashlib.blake2b(payload, digest_size=_DIGEST_BYTES, key=_DIGEST_KEY).digest()


def encode(stream_arn: str, position: Position) -> str:
    """The iterator string for `position` in the stream `stream_arn`."""
    issued_ms = int(position.issued_at * 1000)
    payload = f"{position.stream_id}:{position.shard_id}:{position.seq}:{issued_ms}".encode()
    token = base64.b64encode(payload + _digest(payload)).decode("ascii")
    return f"{stream_arn}|{_VERSION}|{token}"


def decode(iterator: str) -> tuple[str, Position]:
    """(stream ARN, position) of an iterator made by `encode`; ValidationException if it is not one."""
    parts = iterator.rsplit("|", 2)
    if len(parts) != 3 or parts[1] != _VERSION:
        raise ValidationException(INVALID_ITERATOR)
    arn, _, token = parts
    try:
        raw = base64.b64decode(token.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ValidationException(INVALID_ITERATOR) from None
    payload, digest = raw[:-_DIGEST_BYTES], raw[-_DIGEST_BYTES:]
    if len(raw) <= _DIGEST_BYTES or _digest(payload) != digest:
        raise ValidationException(INVALID_ITERATOR)
    try:
        stream_id, rest = payload.decode().split(":", 1)
        shard_id, seq, issued_ms = rest.rsplit(":", 2)
        return arn, Position(int(stream_id), shard_id, int(seq), int(issued_ms) / 1000)
    except ValueError:  # (a digest that matches guards this; kept for a token made by another version)
        raise ValidationException(INVALID_ITERATOR) from None


def expired(position: Position, now: float) -> bool:
    return now - position.issued_at > ITERATOR_SECONDS
