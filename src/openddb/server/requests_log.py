"""The request log: one line per API request on the `openddb.requests` logger, at INFO.

    PutItem 200 0.21ms 2B id=<x-amzn-RequestId>
    PutItem 400 ConditionalCheckFailedException 0.30ms 118B id=...

The server decides once, when it starts, whether the logger is enabled (`enabled()`), and when it is not, no
request pays for more than that decision.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:
    from openddb.api.dispatch import Dispatcher

log = logging.getLogger("openddb.requests")


def enabled() -> bool:
    return log.isEnabledFor(logging.INFO)


def handle_logged(dispatcher: Dispatcher, target: bytes, authorization: bytes | None, body: bytes, too_large: bool,
                  request_id: bytes, host: bytes) -> tuple[int, bytes]:
    """`dispatcher.handle(...)`, logging the answer (an answer of status 0, "try again", is not one)."""
    started = time.perf_counter()
    status, payload = dispatcher.handle(target, authorization, body, too_large, request_id, host)
    if status:
        elapsed = (time.perf_counter() - started) * 1000
        operation = target.rpartition(b".")[2].decode(errors="replace") or "-"
        log.info("%s %d%s %.2fms %dB id=%s", operation, status, _error_type(status, payload), elapsed, len(payload),
                 request_id.decode())
    return status, payload


def _error_type(status: int, payload: bytes) -> str:
    """` ErrorName` for an error answer (its __type without the namespace), else nothing."""
    if status < 400:
        return ""
    try:
        kind = orjson.loads(payload).get("__type", "")
    except (orjson.JSONDecodeError, AttributeError):
        return ""
    return " " + str(kind).rpartition("#")[2] if kind else ""
