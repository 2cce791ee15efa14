"""Stream records as DynamoDB's GetRecords renders them.

Shapes and member names follow DynamoDB Streams' service model (botocore's dynamodbstreams service-2.json): the
record's own members are lower camel case (eventID, eventName, ...), those of `dynamodb` and `userIdentity` upper
camel case. The Lambda event format (lower-case `userIdentity` members, `eventSourceARN`) is the trigger's concern.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson

from openddb.model.values import item_size
from openddb.storage.base import StreamInfo, StreamRecord

# DynamoDB's sequence numbers are decimal strings of 21 to 40 digits (the model's SequenceNumber shape); the
# API Reference's examples show 21 ("300000000000000499659"), so ours are zero-padded to 21.
SEQUENCE_DIGITS = 21
_SEQUENCE = re.compile(r"[0-9]{1,40}")
# The record format version DynamoDB writes today (Lambda's and the Developer Guide's samples show "1.1"; the
# API Reference's older example shows "1.0").
EVENT_VERSION = "1.1"
# What a TTL deletion's record names as its author (Developer Guide, "DynamoDB Streams and Time to Live").
TTL_IDENTITY = {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}
# The images each view type carries (Developer Guide, "StreamViewType").
_OLD_VIEWS = frozenset({"OLD_IMAGE", "NEW_AND_OLD_IMAGES"})
_NEW_VIEWS = frozenset({"NEW_IMAGE", "NEW_AND_OLD_IMAGES"})


def sequence_text(seq: int) -> str:
    return f"{seq:0{SEQUENCE_DIGITS}d}"


def parse_sequence(text: str) -> int | None:
    """The integer of a SequenceNumber, or None if it is not one of ours (digits only)."""
    return int(text) if _SEQUENCE.fullmatch(text) else None


def event_id(stream_arn: str, shard_id: str, seq: int) -> str:
    """32 hex digits naming one record, the same on every read (consumers deduplicate by it)."""
    return hashlib.blake2b(f"{stream_arn}|{shard_id}|{seq}".encode(), digest_size=16).hexdigest()


def region_of(arn: str) -> str:
    """The region field of an ARN (arn:partition:service:region:...)."""
    parts = arn.split(":", 4)
    return parts[3] if len(parts) > 4 else ""


def render(record: StreamRecord, stream: StreamInfo, shard_id: str, region: str) -> tuple[dict[str, Any], int]:
    """(the wire form of one record, its SizeBytes).

    SizeBytes is the DynamoDB size of the record's Keys plus the images it carries: the API Reference's
    KEYS_ONLY example (keys ForumName "DynamoDB", Subject "DynamoDB Thread 3") says 41, exactly its keys' size."""
    view = stream.view_type
    new = record.new if record.new is not None and view in _NEW_VIEWS else None
    old = record.old if record.old is not None and view in _OLD_VIEWS else None
    keys = record.key_item([element["AttributeName"] for element in stream.key_schema])
    size = item_size(keys)
    body: dict[str, Any] = {"ApproximateCreationDateTime": int(record.created_at), "Keys": keys}
    # The images go out as stored (JSON fragments, never parsed and written again); their sizes as the engine
    # kept them, or counted.
    if new is not None:
        body["NewImage"] = orjson.Fragment(new)
        size += record.new_size if record.new_size is not None else item_size(orjson.loads(new))
    if old is not None:
        body["OldImage"] = orjson.Fragment(old)
        size += record.old_size if record.old_size is not None else item_size(orjson.loads(old))
    body["SequenceNumber"] = sequence_text(record.seq)
    body["SizeBytes"] = size
    body["StreamViewType"] = view
    rendered: dict[str, Any] = {
        "eventID": event_id(stream.arn, shard_id, record.seq), "eventName": record.kind,
        "eventVersion": EVENT_VERSION, "eventSource": "aws:dynamodb", "awsRegion": region, "dynamodb": body}
    if record.origin == "ttl":
        rendered["userIdentity"] = dict(TTL_IDENTITY)
    return rendered, size
