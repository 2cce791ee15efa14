"""The DynamoDB Streams operations: ListStreams, DescribeStream, GetShardIterator and GetRecords.

Served on DynamoDB's port under the target prefix DynamoDBStreams_20120810 (boto3's `dynamodbstreams` client signs
for the service "dynamodb", so the same authorization check applies). Request shapes and limits are those of
DynamoDB Streams' service model; the upper limits of Limit (100 streams or shards, 1000 records) are the API
Reference's, checked as DynamoDB checks its other limits (a best guess: the public model states only the minimum).
"""

from __future__ import annotations

import re
from typing import Any

from openddb import clock
from openddb.api import validation as v
from openddb.api.context import RequestContext
from openddb.errors import (
    ExpiredIteratorException,
    LimitExceededException,
    ResourceNotFoundException,
    TrimmedDataAccessException,
    ValidationException,
)
from openddb.storage.base import Engine, ShardInfo, StreamInfo
from openddb.streams import iterators
from openddb.streams.iterators import Position
from openddb.streams.records import parse_sequence, region_of, render, sequence_text

_STREAM_ARN = v.Str(required=True, min_len=37, max_len=1024)
_SHARD_ID = v.Str(min_len=28, max_len=65)
LIST_STREAMS = v.Struct({
    "TableName": v.table_name(required=False),
    "Limit": v.Int(minimum=1, maximum=100, java="Integer"),
    "ExclusiveStartStreamArn": v.Str(min_len=37, max_len=1024),
})
DESCRIBE_STREAM = v.Struct({
    "StreamArn": _STREAM_ARN,
    "Limit": v.Int(minimum=1, maximum=100, java="Integer"),
    "ExclusiveStartShardId": _SHARD_ID,
    "ShardFilter": v.Struct({"Type": v.Str(required=True, enum=("CHILD_SHARDS",)),
                             "ShardId": v.Str(required=True, min_len=28, max_len=65)}),
})
ITERATOR_TYPES = ("TRIM_HORIZON", "LATEST", "AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER")
GET_SHARD_ITERATOR = v.Struct({
    "StreamArn": _STREAM_ARN,
    "ShardId": v.Str(required=True, min_len=28, max_len=65),
    "ShardIteratorType": v.Str(required=True, enum=ITERATOR_TYPES),
    "SequenceNumber": v.Str(min_len=21, max_len=40),
})
GET_RECORDS = v.Struct({
    "ShardIterator": v.Str(required=True, min_len=1, max_len=2048),
    "Limit": v.Int(minimum=1, java="Integer"),  # (above RECORDS_LIMIT: LimitExceededException, see get_records)
})
PAGE_LIMIT = 100  # streams or shards per page when no Limit is given (the API Reference's upper limit)
RECORDS_LIMIT = 1000
RECORDS_BYTES = 1024 * 1024  # GetRecords returns at most 1 MB of records (API Reference)
# A stream ARN: a table's ARN, then "/stream/" and the stream label (its creation time to the millisecond).
_ARN = re.compile(r"arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:\d{12}:table/[a-zA-Z0-9_.-]{3,255}"
                  r"/stream/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}")


# --- look-ups, in DynamoDB's words ----------------------------------------------------------------------------

def _check_arn(arn: str) -> None:
    # DynamoDB's text for an ARN that is not a stream's (quoted from the service in logstash-input-dynamodb
    # issue 18, "Invalid StreamArn (Service: AmazonDynamoDBStreams; ... Error Code: ValidationException").
    if not _ARN.fullmatch(arn):
        raise ValidationException("Invalid StreamArn")


def _stream(context: RequestContext, arn: str) -> StreamInfo:
    _check_arn(arn)
    stream = context.engine.get_stream(arn) if _in_region(context, arn) else None
    if stream is None:
        raise stream_not_found(arn)
    return stream


def _in_region(context: RequestContext, arn: str) -> bool:
    """Whether a stream ARN is of the caller's region where tables are kept by account and region (another region's
    stream is not found from this one; another account's is served if the authorize stage let the caller in)."""
    return not context.namespace or arn.split(":", 4)[3:4] == [context.region]


def stream_not_found(arn: str) -> ResourceNotFoundException:
    # The words of DynamoDB (Local) for a stream it does not know, quoted in localstack issues 1655 and 2543.
    return ResourceNotFoundException(f"Requested resource not found: Stream: {arn} not found")


def _shard(engine: Engine, stream: StreamInfo, shard_id: str) -> ShardInfo:
    for shard in engine.list_shards(stream.stream_id):
        if shard.shard_id == shard_id:
            return shard
    # DynamoDB's words, quoted from GetShardIterator in ironSource/node-dynamodb-stream issue 16 (2021) and
    # opensearch-project/data-prepper issue 4401 (2024).
    raise ResourceNotFoundException("Requested resource not found: Shard does not exist")


def _after(names: list[str], start: str | None) -> int:
    """Where a page starts: just after `start` if listed, else at the beginning (what `start` named has been
    trimmed since, and every entry left is newer)."""
    if start is not None and start in names:
        return names.index(start) + 1
    return 0


# --- ListStreams ------------------------------------------------------------------------------------------------

def list_streams(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(LIST_STREAMS, request)
    table = request.get("TableName")
    start = request.get("ExclusiveStartStreamArn")
    if start is not None:
        _check_arn(start)
    streams = [stream for stream in context.engine.list_streams(table) if context.owns(stream.arn)]
    if table is not None and not streams and context.engine.get_table(context.stored(table)) is None:
        # (best guess: the control plane's wording for a missing table)
        raise ResourceNotFoundException(f"Requested resource not found: Table: {table} not found")
    limit = request.get("Limit") or PAGE_LIMIT  # (null: not given)
    first = _after([stream.arn for stream in streams], start)
    page = streams[first:first + limit]
    response: dict[str, Any] = {"Streams": [
        {"StreamArn": stream.arn, "TableName": stream.table_name, "StreamLabel": stream.label} for stream in page]}
    if first + limit < len(streams):
        response["LastEvaluatedStreamArn"] = page[-1].arn
    return response


# --- DescribeStream ---------------------------------------------------------------------------------------------

def _shard_wire(shard: ShardInfo) -> dict[str, Any]:
    numbers = {"StartingSequenceNumber": sequence_text(shard.starting_seq)}
    if shard.ending_seq is not None:  # a closed shard: it takes no more records
        numbers["EndingSequenceNumber"] = sequence_text(max(shard.ending_seq, shard.starting_seq))
    wire: dict[str, Any] = {"ShardId": shard.shard_id, "SequenceNumberRange": numbers}
    if shard.parent_id is not None:
        wire["ParentShardId"] = shard.parent_id
    return wire


def describe_stream(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(DESCRIBE_STREAM, request)
    stream = _stream(context, request["StreamArn"])
    shards = context.engine.list_shards(stream.stream_id)
    shard_filter = request.get("ShardFilter")
    if shard_filter is not None:  # CHILD_SHARDS: the shards whose parent is the one named
        shards = [shard for shard in shards if shard.parent_id == shard_filter["ShardId"]]
    limit = request.get("Limit") or PAGE_LIMIT  # (null: not given)
    first = _after([shard.shard_id for shard in shards], request.get("ExclusiveStartShardId"))
    page = shards[first:first + limit]
    # ENABLING and DISABLING pass within the request that changes the stream here: the settled state is reported.
    description: dict[str, Any] = {
        "StreamArn": stream.arn, "StreamLabel": stream.label,
        "StreamStatus": "ENABLED" if stream.disabled_at is None else "DISABLED",
        "StreamViewType": stream.view_type, "CreationRequestDateTime": round(stream.created_at, 3),
        "TableName": stream.table_name, "KeySchema": stream.key_schema,
        "Shards": [_shard_wire(shard) for shard in page]}
    if first + limit < len(shards):
        description["LastEvaluatedShardId"] = page[-1].shard_id
    return {"StreamDescription": description}


# --- GetShardIterator -------------------------------------------------------------------------------------------

def get_shard_iterator(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(GET_SHARD_ITERATOR, request)
    kind, number = request["ShardIteratorType"], request.get("SequenceNumber")
    by_number = kind in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER")
    # (best guesses at DynamoDB's words: its texts for these are unrecorded)
    if by_number and number is None:
        raise ValidationException(f"Must specify a sequence number with iterator type {kind}")
    if not by_number and number is not None:
        raise ValidationException(f"Sequence number must not be specified with iterator type {kind}")
    engine = context.engine
    stream = _stream(context, request["StreamArn"])
    shard = _shard(engine, stream, request["ShardId"])
    if kind == "TRIM_HORIZON":
        seq = _oldest(shard)
    elif kind == "LATEST":
        seq = _end(engine, stream, shard)
    else:
        seq = _at_number(shard, str(number)) + (kind == "AFTER_SEQUENCE_NUMBER")
    position = Position(stream.stream_id, shard.shard_id, seq, clock.now())
    return {"ShardIterator": iterators.encode(stream.arn, position)}


def _oldest(shard: ShardInfo) -> int:
    """The sequence number of the shard's oldest record still kept (TRIM_HORIZON)."""
    return max(shard.starting_seq, shard.trimmed_seq)


def _end(engine: Engine, stream: StreamInfo, shard: ShardInfo) -> int:
    """Just after the shard's newest record (LATEST)."""
    if shard.ending_seq is not None:
        return max(shard.ending_seq + 1, _oldest(shard))
    return max(engine.shard_end(stream.stream_id, shard.shard_id), _oldest(shard))


def _at_number(shard: ShardInfo, text: str) -> int:
    """A SequenceNumber given for AT_/AFTER_SEQUENCE_NUMBER, which must lie in the shard's range."""
    seq = parse_sequence(text)
    if seq is None:  # (best guess at DynamoDB's words)
        raise ValidationException(f"Invalid SequenceNumber: {text}")
    if seq < shard.starting_seq or (shard.ending_seq is not None and seq > shard.ending_seq):
        raise ValidationException(  # (best guess at DynamoDB's words)
            f"Invalid SequenceNumber {text} for ShardId {shard.shard_id}: not a sequence number of this shard")
    if seq < shard.trimmed_seq:
        raise trimmed()
    return seq


def trimmed() -> TrimmedDataAccessException:
    # DynamoDB's text, quoted in ironSource/node-dynamodb-stream issue 13.
    return TrimmedDataAccessException("The data you are trying to access has been trimmed")


# --- GetRecords -------------------------------------------------------------------------------------------------

def get_records(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(GET_RECORDS, request)
    limit = request.get("Limit") or RECORDS_LIMIT  # (null: not given)
    if limit > RECORDS_LIMIT:
        # The service model's documentation of LimitExceededException names this case ("GetRecords was called
        # with a value of more than 1000 for the limit request parameter"); its message is a best guess.
        raise LimitExceededException(f"Limit {limit} exceeds the maximum of {RECORDS_LIMIT} records per request")
    arn, position = iterators.decode(request["ShardIterator"])
    now = clock.now()
    if iterators.expired(position, now):
        # DynamoDB's text, as its Kinesis adapter passes it on (spring-integration-aws pull request 59).
        raise ExpiredIteratorException("Shard iterator has expired")
    engine = context.engine
    stream = engine.get_stream(arn) if _ARN.fullmatch(arn) and _in_region(context, arn) else None
    if stream is None:
        raise stream_not_found(arn)
    if stream.stream_id != position.stream_id:  # an iterator of an earlier stream of that name, or altered
        raise ValidationException(iterators.INVALID_ITERATOR)
    shard = next((s for s in engine.list_shards(stream.stream_id) if s.shard_id == position.shard_id), None)
    if shard is None:  # (DynamoDB Local's words for a shard gone, quoted in localstack pull request 12036)
        raise ResourceNotFoundException("Invalid ShardId in ShardIterator")
    if position.seq < shard.trimmed_seq:
        raise trimmed()
    return _read(engine, stream, shard, position, limit, now)


def _read(engine: Engine, stream: StreamInfo, shard: ShardInfo, position: Position, limit: int,
          now: float) -> dict[str, Any]:
    """Up to `limit` records (and 1 MB) from the position, and the iterator that goes on from after them: none
    once a closed shard has nothing left to give."""
    closed = shard.ending_seq is not None  # (read before the records: a shard closed then gets no more)
    batch, after = engine.read_stream_on(stream.stream_id, shard.shard_id, position.seq, limit) \
        if not closed or position.seq <= (shard.ending_seq or 0) else ([], position.seq)
    region = region_of(stream.arn)
    records: list[dict[str, Any]] = []
    total = 0
    seq = position.seq
    for record in batch:
        rendered, size = render(record, stream, shard.shard_id, region)
        if records and total + size > RECORDS_BYTES:
            break
        records.append(rendered)
        total += size
        seq = record.seq + 1
    if len(records) == len(batch):  # (all taken: on from past what the engine passed over, too)
        seq = max(seq, after)
    response: dict[str, Any] = {"Records": records}
    drained = closed and (len(records) == len(batch) < limit or seq > (shard.ending_seq or 0))
    if not drained:
        response["NextShardIterator"] = iterators.encode(
            stream.arn, Position(stream.stream_id, shard.shard_id, seq, now))
    return response


HANDLERS = {
    "ListStreams": list_streams,
    "DescribeStream": describe_stream,
    "GetShardIterator": get_shard_iterator,
    "GetRecords": get_records,
}
