"""Shard iterators and record rendering of the Streams API (streams/iterators.py, streams/records.py)."""

from __future__ import annotations

import base64

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from openddb.errors import ValidationException
from openddb.storage.base import StreamInfo, StreamRecord
from openddb.streams import iterators
from openddb.streams.iterators import Position
from openddb.streams.records import event_id, parse_sequence, render, sequence_text

ARN = "arn:aws:dynamodb:eu-west-1:000000000000:table/tbl/stream/2026-11-29T08:20:01.123"


@given(st.integers(1, 2**40), st.integers(0, 2**62), st.floats(0, 4e9))
def test_iterator_round_trip(stream_id: int, seq: int, issued: float) -> None:
    """An iterator gives back its stream, shard, position and issue time (to the millisecond)."""
    position = Position(stream_id, "shardId-00000001795940261305-17a34da1", seq, issued)
    arn, decoded = iterators.decode(iterators.encode(ARN, position))
    assert arn == ARN
    assert (decoded.stream_id, decoded.shard_id, decoded.seq) == (stream_id, position.shard_id, seq)
    assert abs(decoded.issued_at - issued) < 0.002


def test_damaged_iterators_are_refused() -> None:
    """A truncated, altered or foreign iterator is a ValidationException, never a read from elsewhere."""
    good = iterators.encode(ARN, Position(3, "shardId-00000001795940261305-17a34da1", 42, 1e9))
    token = good.rsplit("|", 1)[1]
    payload = base64.b64decode(token)
    forged = base64.b64encode(payload[:-9] + b"9" + payload[-8:]).decode()
    for bad in (good[:-4], good.replace("|1|", "|2|"), "x", f"{ARN}|1|{forged}", f"{ARN}|1|!!!!"):
        with pytest.raises(ValidationException):
            iterators.decode(bad)


def test_expiry_after_fifteen_minutes() -> None:
    position = Position(1, "s", 1, 1000.0)
    assert not iterators.expired(position, 1000.0 + 900)
    assert iterators.expired(position, 1000.0 + 900.5)


def test_sequence_numbers() -> None:
    """21 digits on the wire (the model's minimum length), read back as the integer."""
    assert sequence_text(42) == "000000000000000000042"
    assert parse_sequence(sequence_text(42)) == 42
    assert parse_sequence("12a") is None and parse_sequence("-1") is None


def test_render_per_view_type_and_ttl() -> None:
    """Images as the view type keeps them; SizeBytes counts keys and images; TTL deletions name the service."""
    keys, old = {"pk": {"S": "DynamoDB"}}, {"pk": {"S": "DynamoDB"}, "n": {"N": "100"}}
    record = StreamRecord(7, 1795940261.9, "REMOVE", "ttl", orjson.dumps(keys), orjson.dumps(old), None)
    stream = StreamInfo(1, ARN, "tbl", "2026-11-29T08:20:01.123", "KEYS_ONLY",
                        [{"AttributeName": "pk", "KeyType": "HASH"}], 0.0)
    rendered, size = render(record, stream, "shard", "eu-west-1")
    assert size == 10 and rendered["dynamodb"] == {
        "ApproximateCreationDateTime": 1795940261, "Keys": keys, "SequenceNumber": "000000000000000000007",
        "SizeBytes": 10, "StreamViewType": "KEYS_ONLY"}
    assert rendered["userIdentity"] == {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}
    assert rendered["eventID"] == event_id(ARN, "shard", 7) and len(rendered["eventID"]) == 32
    stream.view_type = "OLD_IMAGE"
    rendered, size = render(record, stream, "shard", "eu-west-1")
    # (an image goes out as the stored JSON: compare what is sent)
    assert orjson.loads(orjson.dumps(rendered))["dynamodb"]["OldImage"] == old and size == 10 + 10 + 1 + 2
    record.old_size = 99  # a size the engine kept is used as it is, not counted again
    assert render(record, stream, "shard", "eu-west-1")[1] == 10 + 99
