"""The request log: one line per API request on the `openddb.requests` logger, at INFO.

    2026-11-29 10:46:17,123 INFO openddb.requests: PutItem 200 0.21ms 2B id=<x-amzn-RequestId>
    2026-11-29 10:46:17,124 INFO openddb.requests: PutItem 400 ConditionalCheckFailedException 0.30ms 118B id=...

The server decides once, when it starts, whether the logger is enabled (`RequestLog.open`); when it is not, no
request pays for more than that decision. When it is, the lines of one event-loop pass are written together at
its end (`flush`), in the format of the stream handlers the logging set-up gave (`--log-level`'s): one write per
pass instead of a formatted record, a write and a flush per request, which cost a third of a small read's
throughput. Where logging goes anywhere else (a file handler a host application configured, say), each line is
an ordinary log record.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, TextIO

import orjson

if TYPE_CHECKING:
    from openddb.api.dispatch import Dispatcher
    from openddb.api.incoming import Incoming

log = logging.getLogger("openddb.requests")
# The format the command line's logging set-up uses (cli.py); lines written directly follow it.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class RequestLog:
    """The request log of one server: lines collected per event-loop pass, written at its end."""

    def __init__(self, streams: list[TextIO] | None) -> None:
        self._streams = streams  # None: each line goes through logging as a record of its own
        self._lines: list[str] = []
        self._second = -1
        self._stamp = ""

    @classmethod
    def open(cls) -> RequestLog | None:
        """The server's request log, or None if `openddb.requests` is not enabled at INFO."""
        if not log.isEnabledFor(logging.INFO):
            return None
        handlers = _handlers()
        direct = handlers and all(type(handler) is logging.StreamHandler and handler.formatter is not None
                                  and handler.formatter._fmt == LOG_FORMAT
                                  and handler.level <= logging.INFO for handler in handlers)
        return cls([handler.stream for handler in handlers] if direct else None)  # type: ignore[attr-defined]

    def handle(self, dispatcher: Dispatcher, incoming: Incoming) -> tuple[int, bytes]:
        """`dispatcher.handle(incoming)`, logging the answer (an answer of status 0, "try again", is not one)."""
        started = time.perf_counter()
        status, payload = dispatcher.handle(incoming)
        if status:
            elapsed = (time.perf_counter() - started) * 1000
            operation = incoming.target.rpartition(b".")[2].decode(errors="replace") or "-"
            message = (f"{operation} {status}{_error_type(status, payload)} {elapsed:.2f}ms {len(payload)}B "
                       f"id={incoming.request_id.decode()}")
            if self._streams is None:
                log.info("%s", message)
            else:
                self._lines.append(f"{self._timestamp()} INFO openddb.requests: {message}\n")
        return status, payload

    def flush(self) -> None:
        """Write the lines collected since the last flush (at the end of every event-loop pass)."""
        if not self._lines or self._streams is None:
            return
        text = "".join(self._lines)
        self._lines.clear()
        for stream in self._streams:
            try:
                stream.write(text)
                stream.flush()
            except (OSError, ValueError):  # a closed or broken stream loses its lines, as logging would
                pass

    def _timestamp(self) -> str:
        """logging's default asctime ("2026-11-29 10:46:17,123"), the seconds formatted once per second."""
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second = second
            self._stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
        return f"{self._stamp},{int((now - second) * 1000):03d}"


def _handlers() -> list[logging.Handler]:
    """The handlers a record of `openddb.requests` reaches (through its ancestors, until one stops it)."""
    found: list[logging.Handler] = []
    logger: logging.Logger | None = log
    while logger is not None:
        found += logger.handlers
        logger = logger.parent if logger.propagate else None
    return found


def _error_type(status: int, payload: bytes) -> str:
    """` ErrorName` for an error answer (its __type without the namespace), else nothing."""
    if status < 400:
        return ""
    try:
        kind = orjson.loads(payload).get("__type", "")
    except (orjson.JSONDecodeError, AttributeError):
        return ""
    return " " + str(kind).rpartition("#")[2] if kind else ""
