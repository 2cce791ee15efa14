"""One round trip to PostgreSQL for several statements: libpq's pipeline mode driven directly.

psycopg's pipeline polls, sends and receives once per statement it queues (its `execute` talks to the server
before returning), which was a large share of the node's CPU per write (45% of a PutItem's samples in py-spy; a
single-item write sent seven statements); see docs/SCALE-OUT.md, "Round trips and CPU per request". Here the
statements of one round trip are queued in libpq's buffer and go out in one send; the answers are read as they
arrive, with one poll per wait. Every statement is prepared once per connection (named by its text), parameters
and results travel in binary.

Parameters: `int` (int8), `float` (float8), `bytes` (bytea), `str` (text) or None (NULL); a statement whose
parameters may be NULL names its parameter types (`types`) so they do not depend on the first values seen.
Results come back as tuples of Python values for the column types the engine reads (int8, int4, float8, bytea,
text, varchar); an error is raised as psycopg raises it (`psycopg.errors.UniqueViolation`...), after the rest of
the round trip was read, so the connection is left ready for its next statement (or closed, if the answers could
not all be read: the engine then reconnects).
"""

from __future__ import annotations

import select
import struct
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import psycopg
from psycopg import errors as pgerrors
from psycopg import pq

INT8, INT4, FLOAT8, BYTEA, TEXT, VARCHAR = 20, 23, 701, 17, 25, 1043
_INT8 = struct.Struct(">q")
_INT4 = struct.Struct(">i")
_FLOAT8 = struct.Struct(">d")

Param = int | float | bytes | str | None
Rows = list[tuple[Any, ...]]


class Sent(NamedTuple):
    """A round trip sent and not yet answered: per result expected, the position of its statement (negative
    for a preparation's), and the statements prepared by it."""

    positions: list[int]
    prepared: list[str]


def _type_of(value: Param) -> int:
    if isinstance(value, int):
        return INT8
    if isinstance(value, float):
        return FLOAT8
    if isinstance(value, str):
        return TEXT
    return BYTEA  # (bytes; None: the server takes a NULL of a bytea parameter as of any other type)


def _encode(value: Param) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, int):
        return _INT8.pack(value)
    if isinstance(value, float):
        return _FLOAT8.pack(value)
    return value.encode()


def _decoder(oid: int) -> Callable[[bytes], Any]:
    if oid == BYTEA:
        return bytes
    if oid == INT8:
        return lambda raw: _INT8.unpack(raw)[0]
    if oid == INT4:
        return lambda raw: _INT4.unpack(raw)[0]
    if oid == FLOAT8:
        return lambda raw: _FLOAT8.unpack(raw)[0]
    if oid in (TEXT, VARCHAR):
        return lambda raw: raw.decode()
    raise TypeError(f"no binary decoder here for type oid {oid}")


def _rows(result: pq.abc.PGresult) -> Rows:
    fields = result.nfields
    if not fields:
        return []
    decoders = [_decoder(result.ftype(column)) for column in range(fields)]
    rows = []
    for row in range(result.ntuples):
        values = []
        for column, decode in enumerate(decoders):
            raw = result.get_value(row, column)
            values.append(None if raw is None else decode(raw))
        rows.append(tuple(values))
    return rows


class Pipeline:
    """The statements of the next round trip on one connection (queued by `add`, sent and answered by `run`)."""

    def __init__(self, conn: psycopg.Connection[Any], on_notify: Callable[[], None]) -> None:
        self.conn = conn
        self._pgconn = conn.pgconn
        self._on_notify = on_notify
        self._names: dict[str, bytes] = {}  # statements prepared on this connection, by text
        self._prepared = 0
        self.tags: list[str] = []  # the command tag of each statement of the last round trip ('COMMIT'...)
        # the position in its round trip of the statement whose error `run` raised last (-1: none, or the
        # connection failed)
        self.failed_at = -1
        # (statement, parameters (None: a command sent unprepared), parameter types if named)
        self._queue: list[tuple[str, Sequence[Param] | None, Sequence[int] | None]] = []
        self._poll = select.poll()
        self._poll.register(self._pgconn.socket, select.POLLIN)

    def __len__(self) -> int:
        return len(self._queue)

    def clear(self) -> None:
        """Forget the statements queued (not sent)."""
        self._queue.clear()

    def take_commands(self) -> list[str] | None:
        """The queued statements, taken off the queue, if none has parameters (so psycopg can send them as they
        are); else None, and the queue is left as it was."""
        if any(params is not None for _sql, params, _types in self._queue):
            return None
        commands = [sql for sql, _params, _types in self._queue]
        self._queue.clear()
        return commands

    def insert_after(self, last: str, command: str) -> None:
        """Put `command` after the last command `last` queued (before every statement queued if none is)."""
        at = max((n + 1 for n, (sql, params, _types) in enumerate(self._queue) if sql == last and params is None),
                 default=0)
        self._queue.insert(at, (command, None, None))

    def add(self, sql: str, params: Sequence[Param] = (), types: Sequence[int] | None = None) -> None:
        """Queue a statement (`%s` placeholders, as psycopg writes them); one without parameters (BEGIN,
        SAVEPOINT...) is sent unprepared."""
        self._queue.append((sql, params or None, types))

    def run(self) -> list[Rows]:
        """Send the queued statements in one round trip; the rows of each (an empty list for a command)."""
        return self.receive(self.send())

    def send(self) -> Sent:
        """Send the queued statements in one round trip, leaving their answers to `receive` (which may be called
        on another thread: nothing else may use the connection meanwhile)."""
        queue, self._queue = self._queue, []
        pgconn = self._pgconn
        self.failed_at = -1
        sent = Sent([], [])
        pgconn.enter_pipeline_mode()
        try:
            for position, (sql, params, types) in enumerate(queue):
                if params is None:
                    pgconn.send_query_params(sql.encode(), None, result_format=pq.Format.BINARY)
                    sent.positions.append(position)
                    continue
                name = self._names.get(sql)
                if name is None:
                    name = self._names[sql] = b"odb_%d" % self._prepared
                    self._prepared += 1
                    sent.prepared.append(sql)
                    pgconn.send_prepare(name, _numbered(sql), types or [_type_of(value) for value in params])
                    sent.positions.append(-1 - position)
                encoded = [value if value.__class__ is bytes or value is None else _encode(value) for value in params]
                pgconn.send_query_prepared(name, encoded, (1,) * len(params), pq.Format.BINARY)
                sent.positions.append(position)
            pgconn.pipeline_sync()
            self._send()
        except BaseException:
            self._abandon()
            raise
        return sent

    def receive(self, sent: Sent) -> list[Rows]:
        """The answers of the round trip `send` sent: the rows of each statement; raises its first error."""
        try:
            answers, error = self._answers(sent.positions)
        except BaseException:
            self._abandon()
            raise
        self._end_pipeline()
        if error is not None:
            for sql in sent.prepared:  # (perhaps never prepared: the next use prepares it anew, under a new name)
                self._names.pop(sql, None)
            raise error
        return answers

    def _abandon(self) -> None:
        # (the answers were not all read: the connection's state is unknown, so it is not used again; a broken
        # connection's caller reconnects)
        self.conn.close()
        self._end_pipeline()

    def _end_pipeline(self) -> None:
        pgconn = self._pgconn
        if pgconn.pipeline_status != pq.PipelineStatus.OFF and pgconn.status == pq.ConnStatus.OK:
            pgconn.exit_pipeline_mode()

    def _send(self) -> None:
        pgconn = self._pgconn
        while pgconn.flush():  # (the rest did not fit in the socket's buffer: wait until it drains)
            select.select([], [pgconn.socket], [])

    def _answers(self, positions: list[int]) -> tuple[list[Rows], psycopg.Error | None]:
        """Read every result up to the pipeline's sync: the rows of each execution, and the first error."""
        answers: list[Rows] = []
        self.tags = []
        error: psycopg.Error | None = None
        for position in positions:
            result = self._next_result()
            status = result.status
            if status == pq.ExecStatus.FATAL_ERROR and error is None:
                error = pgerrors.error_from_result(result, encoding=self.conn.info.encoding)
                self.failed_at = position if position >= 0 else -1 - position
                if isinstance(error, pgerrors.InvalidSqlStatementName):  # (someone ran DEALLOCATE ALL)
                    self._names.clear()
            if position >= 0:
                answers.append(_rows(result) if status == pq.ExecStatus.TUPLES_OK else [])
                self.tags.append((result.command_status or b"").decode())
            # (PIPELINE_ABORTED: a statement after a failed one, not run)
            if self._next_result(end=True) is not None:
                raise psycopg.InterfaceError("PostgreSQL answered a statement of a pipeline twice")
        if self._next_result().status != pq.ExecStatus.PIPELINE_SYNC:
            raise psycopg.InterfaceError("PostgreSQL's answers did not end with the pipeline's sync")
        # Notifications that came in with the answers (an idle connection's poll only sees new bytes)
        while self._pgconn.notifies() is not None:
            self._on_notify()
        return answers, error

    def _next_result(self, end: bool = False) -> Any:
        """The next result (None: the end of a statement's, if `end`), waiting for it."""
        pgconn = self._pgconn
        while pgconn.is_busy():
            self._poll.poll()
            pgconn.consume_input()
            while pgconn.notifies() is not None:
                self._on_notify()
        result = pgconn.get_result()
        if result is None and not end:
            raise psycopg.OperationalError(pgconn.get_error_message() or "the connection to PostgreSQL was lost")
        return result


def _numbered(sql: str) -> bytes:
    """psycopg's `%s` placeholders as PostgreSQL's `$1`, `$2`..."""
    parts = sql.split("%s")
    out = [parts[0]]
    for number, part in enumerate(parts[1:], 1):
        out.append(f"${number}{part}")
    return "".join(out).encode()
