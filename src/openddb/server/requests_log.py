"""The request log: one line per API request on the `openddb.requests` logger, at INFO (`--log-level info` or
`debug`; `warning` and `error` write none), as text or JSON (`--log-format`):

    2026-11-29 10:46:17,123 INFO openddb.requests: POST PutItem Orders 200 0.21ms rcu=0 wcu=1 2B client=127.0.0.1 id=<x>
    2026-11-29 10:46:17,124 INFO openddb.requests: POST PutItem Orders 400 ConditionalCheckFailedException 0.30ms ...
    {"time":"2026-11-29T10:46:17.123Z","level":"INFO","method":"POST","operation":"PutItem","table":"Orders",
     "status":200,"error":null,"latency_ms":0.21,"read_units":0.0,"write_units":1.0,"bytes":2,"client":"127.0.0.1",
     "request_id":"<x>"}                                                                      (one line, in JSON)

Fields: the HTTP method (every API call is a POST), the operation, the table (the first the request names; "-"
for none), the status, the error type (none on success), the latency (from the dispatcher's start to its answer),
the read and write capacity units consumed (indexes included, whether or not the client asked for them), the
answer's size, the client's address and the request id (x-amzn-RequestId); where tables are kept by account and
region (`--namespaces account-region`), the caller's account and region last (`account=... region=...`).

A listener of the request record (observe/record.py). The server decides once, when it starts, whether the logger
is enabled (`RequestLog.open`); when it is not, no request pays for more than that decision. When it is, the lines
of one event-loop pass are written together at its end (`flush`), in the format of the stream handlers the logging
set-up gave: one write per pass instead of a formatted record, a write and a flush per request, which cost a third
of a small read's throughput. Where logging goes anywhere else (a file handler a host application configured, say),
each line is an ordinary log record.
"""

from __future__ import annotations

import logging
import time
from typing import Literal, TextIO

import orjson

from openddb.observe.record import RequestRecord

log = logging.getLogger("openddb.requests")
# The format the command line's logging set-up uses (cli.py); lines written directly follow it.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LogFormat = Literal["text", "json"]


class RequestLog:
    """The request log of one server: lines collected per event-loop pass, written at its end."""

    def __init__(self, streams: list[TextIO] | None, form: LogFormat = "text") -> None:
        self._streams = streams  # None: each line goes through logging as a record of its own
        self._json = form == "json"
        self._lines: list[str] = []
        self._second = -1
        self._stamp = ""

    @classmethod
    def open(cls, form: LogFormat = "text") -> RequestLog | None:
        """The server's request log, or None if `openddb.requests` is not enabled at INFO."""
        if not log.isEnabledFor(logging.INFO):
            return None
        handlers = _handlers()
        direct = handlers and all(type(handler) is logging.StreamHandler and handler.formatter is not None
                                  and handler.formatter._fmt == LOG_FORMAT
                                  and handler.level <= logging.INFO for handler in handlers)
        return cls([handler.stream for handler in handlers] if direct else None, form)  # type: ignore[attr-defined]

    def observe(self, record: RequestRecord) -> None:
        """Log one answered request (a Listener: see observe/record.py)."""
        if self._json:
            line = self._json_line(record)
            if self._streams is None:
                log.info("%s", line)
            else:
                self._lines.append(line + "\n")
            return
        message = _text(record)
        if self._streams is None:
            log.info("%s", message)
        else:
            self._lines.append(f"{self._timestamp()} INFO openddb.requests: {message}\n")

    def _json_line(self, record: RequestRecord) -> str:
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int((now % 1) * 1000):03d}Z"
        return orjson.dumps({
            "time": stamp, "level": "INFO", "method": "POST", "operation": record.operation,
            "table": _table(record), "status": record.status, "error": record.error or None,
            "latency_ms": round(record.latency * 1000, 3), "read_units": record.units(write=False),
            "write_units": record.units(write=True), "bytes": record.response_bytes, "client": record.client or None,
            "request_id": record.request_id.decode(), "throttled": [reason for reason, _, _ in record.throttled],
            **_account_region(record),
        }).decode()

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


def _table(record: RequestRecord) -> str | None:
    """The first table the request charged or named."""
    if record.charges:
        return record.charges[0].table
    return record.tables[0] if record.tables else None


def _text(record: RequestRecord) -> str:
    read = write = 0.0
    for charge in record.charges:  # (one pass for both sums: this runs on every request)
        if charge.write:
            write += charge.units
        else:
            read += charge.units
    error = f" {record.error}" if record.error else ""
    where = "".join(f" {name}={value}" for name, value in _account_region(record).items())
    return (f"POST {record.operation} {_table(record) or '-'} {record.status}{error} {record.latency * 1000:.2f}ms "
            f"rcu={read:g} wcu={write:g} {record.response_bytes}B client={record.client or '-'} "
            f"id={record.request_id.decode()}{where}")


def _account_region(record: RequestRecord) -> dict[str, str]:
    """The account and region whose table the request named, where tables are kept by account and region
    (`--namespaces account-region`): two accounts' tables of one name are told apart. None in one namespace."""
    if not record.namespace:
        return {}
    account, region, _ = record.namespace.split("/", 2)
    return {"account": account, "region": region}


def _handlers() -> list[logging.Handler]:
    """The handlers a record of `openddb.requests` reaches (through its ancestors, until one stops it)."""
    found: list[logging.Handler] = []
    logger: logging.Logger | None = log
    while logger is not None:
        found += logger.handlers
        logger = logger.parent if logger.propagate else None
    return found
