"""A table's DynamoDB stream as CreateTable and UpdateTable set it (StreamSpecification), and the stream members of
its description."""

from __future__ import annotations

import calendar
import dataclasses
import time
from typing import Any

from openddb.api.context import RequestContext
from openddb.errors import (
    ValidationException,
    invalid,
)
from openddb.model.schema import (
    StreamMeta,
    StreamViewType,
    TableMeta,
)


def created_stream(context: RequestContext, name: str, spec: dict[str, Any] | None,
                    now: float) -> StreamMeta | None:
    """CreateTable's StreamSpecification, with DynamoDB's wording: the stream the new table starts with, if any."""
    if spec is None:
        return None
    enabled, view = spec.get("StreamEnabled"), spec.get("StreamViewType")
    if enabled and view is None:
        raise invalid("Table is being created with a stream enabled, UpdateViewType is required")
    if not enabled and view is not None:
        raise invalid("Table is being created with a stream disabled, UpdateViewType should not be specified")
    if not enabled:
        return None
    # A table of the same name deleted moments ago may have left a stream, still readable: its ARN must not be
    # the new one's.
    return _new_stream(spec["StreamViewType"], now, max(_readable_labels(context, name), default=None))


def _readable_labels(context: RequestContext, name: str) -> list[str]:
    """The labels of a table name's streams still readable (of a table deleted and re-created, or disabled)."""
    try:
        return [info.label for info in context.engine.list_streams(name)]
    except NotImplementedError:  # an engine without streams keeps none that could clash
        return []


def _new_stream(view_type: StreamViewType, now: float, after: str | None) -> StreamMeta:
    """A stream created at `now`, labelled with its creation time as DynamoDB labels one (ISO 8601 UTC to the
    millisecond). Its label must differ from the table's earlier streams', so a stream created within the same
    millisecond as the previous one (or on a clock that went back) is labelled one millisecond after it."""
    millis = int(now * 1000)
    if after is not None:
        millis = max(millis, _label_millis(after) + 1)
    label = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(millis // 1000)) + f".{millis % 1000:03d}"
    return StreamMeta(label=label, view_type=view_type, enabled=True, stream_id=0, created_at=millis / 1000)


def _label_millis(label: str) -> int:
    seconds = calendar.timegm(time.strptime(label[:19], "%Y-%m-%dT%H:%M:%S"))
    return seconds * 1000 + int(label[20:23])


def plan_stream(meta: TableMeta, spec: dict[str, Any], now: float) -> None:
    """UpdateTable's StreamSpecification, applied to `meta` (a copy of the table's description): enabling makes
    a new stream (the engine creates it when `meta` is stored), disabling marks the latest one disabled (the
    engine closes its shards; it stays readable for 24 hours and DescribeTable still names it)."""
    enabled, view = spec.get("StreamEnabled"), spec.get("StreamViewType")
    if enabled and view is None:
        raise invalid("If stream is being enabled then UpdateViewType is required")
    if not enabled and view is not None:
        raise invalid("If stream is being disabled, then UpdateViewType must not be specified")
    if enabled:
        if meta.streaming is not None:
            # The same refusal for another view type: it only changes by disabling first (DynamoDB's text,
            # quoted in scylladb/scylladb issue 6939, 2020).
            raise ValidationException(f"Table already has an enabled stream: TableName: {meta.name}")
        meta.stream = _new_stream(spec["StreamViewType"], now, meta.stream.label if meta.stream is not None else None)
        return
    if meta.stream is None or not meta.stream.enabled:
        raise ValidationException(f"Table has no stream to disable: TableName: {meta.name}")
    meta.stream = dataclasses.replace(meta.stream, enabled=False)


def stream_description(meta: TableMeta) -> dict[str, Any]:
    """The stream members of a table description: StreamSpecification while a stream is enabled (DynamoDB leaves
    it out once disabled: scylladb/scylladb PR 31553, checked against DynamoDB, 2026), the latest stream's ARN
    and label as long as the table ever had one."""
    stream = meta.stream
    if stream is None:
        return {}
    members: dict[str, Any] = {}
    if stream.enabled:
        members["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream.view_type}
    members["LatestStreamLabel"] = stream.label
    members["LatestStreamArn"] = meta.stream_arn
    return members
