"""HTTP/1.1 keep-alive server for the DynamoDB JSON protocol: a raw asyncio protocol on httptools.

Each request is framed here and handed to `api.dispatch.Dispatcher.handle`, synchronously on the event-loop
thread: the embedded engine is in-process, so a thread hop would cost more than the work. Responses are written
in request order, which keeps pipelined requests correct.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import socket
import ssl
import time
import zlib
from collections import deque
from email.utils import formatdate
from typing import TYPE_CHECKING, NamedTuple

import httptools

from openddb.advisor.listener import Advisor
from openddb.identity import presigned
from openddb.identity.service import FORM_TYPE, query_target
from openddb.identity.sigv4 import SignedRequest
from openddb.observe import prometheus
from openddb.observe.metrics import Metrics
from openddb.server import cloudwatch_wire
from openddb.server.balance import BalancedServer, Shares
from openddb.server.codings import BadCoding, BodyTooLarge, chosen_coding, compress, decode_body
from openddb.server.connection_limits import SWEEP_SECONDS, ConnectionLimits
from openddb.server.cors import Cors
from openddb.server.passes import BACKGROUND_SECONDS, MAX_ATTEMPTS, ServerState
from openddb.server.requests_log import LogFormat

if TYPE_CHECKING:
    from openddb.api.dispatch import Dispatcher
    from openddb.console.pages import Console
    from openddb.server.control import Control

log = logging.getLogger("openddb.http")

# DynamoDB's request size ceiling is 16 MB of payload for the largest batch calls; allow framing slack.
MAX_BODY_BYTES = 16 * 1024 * 1024 + 64 * 1024
# Bytes received while a request line and headers are still arriving: a head this large is refused (400) and the
# connection closed, so an endless header cannot grow the parser's buffers without bound.
MAX_HEAD_BYTES = 1024 * 1024
# DynamoDB refuses a request whose headers (with its request line) exceed 16 KB (issue 30's measurement); how it
# answers is a best guess: 400 with no body, and the connection closed, as for other malformed HTTP.
MAX_HEADER_BYTES = 16 * 1024
# DynamoDB compresses a response only above a threshold, "if my memory is correct this is 4KB" (an AWS engineer in
# awslabs/dynamodb-cross-region-library issue 61; responses "larger than 4KB" came back gzipped in
# AllocZero/EfficientDynamoDb issue 259). Level 1: most of the gain on JSON for the least time on the event loop.
COMPRESS_ABOVE_BYTES = 4096
_COMPRESS_LEVEL = 1

_REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 408: b"Request Timeout",
            413: b"Request Entity Too Large", 500: b"Internal Server Error"}
_JSON_1_0 = b"application/x-amz-json-1.0"
# Byte for byte as DynamoDB answered a request in JSON 1.1 (quoted in rusoto issue 215).
_PAGE_NOT_FOUND = (b'<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" '
                   b'"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">\n'
                   b'<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">\n<head>\n'
                   b' <title>Page Not Found</title>\n</head>\n<body>Page Not Found</body>\n</html>')


class _DateCache:
    """The Date header text, recomputed at most once a second."""

    def __init__(self) -> None:
        self._second = 0
        self._value = b""

    def get(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._second = now
            self._value = formatdate(now, usegmt=True).encode()
        return self._value


_date = _DateCache()


class _RequestIds:
    """52-character request ids in DynamoDB's style (upper-case letters and digits).

    A random per-process prefix plus a counter: unique across processes and restarts, and far cheaper than
    fresh randomness per request. Forked workers re-seed the prefix."""

    def __init__(self) -> None:
        self._seed()
        os.register_at_fork(after_in_child=self._seed)

    def _seed(self) -> None:
        self._prefix = base64.b32hexencode(os.urandom(25))[:36] + b"%016X"  # 0-9A-V, as DynamoDB's ids
        self._counter = 0

    def next(self) -> bytes:
        self._counter += 1
        return self._prefix % self._counter


new_request_id = _RequestIds().next


def render_response(status: int, body: bytes, content_type: bytes, request_id: bytes, keep_alive: bool) -> bytes:
    # One formatting pass over a template: the fewest intermediate objects on every request's path.
    return _RESPONSE % (status, _REASONS.get(status, b"Error"), _date.get(), content_type, len(body),
                        b"keep-alive" if keep_alive else b"close", request_id, zlib.crc32(body), body)


_RESPONSE = (b"HTTP/1.1 %d %s\r\nServer: Server\r\nDate: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
             b"Connection: %s\r\nx-amzn-RequestId: %s\r\nx-amz-crc32: %d\r\n\r\n%s")


def render_extended(status: int, body: bytes, content_type: bytes, request_id: bytes, keep_alive: bool,
                    extra: bytes, coding: bytes | None) -> bytes:
    """`render_response` with more header lines (`extra`, each ending in CRLF: CORS), and the body compressed in
    `coding` when it is a success above DynamoDB's threshold. x-amz-crc32 is then the CRC32 of the compressed bytes,
    as DynamoDB computes it ("if the response is gzipped the checksum is of the gzipped response", aws-sdk-go-v2's
    DynamoDB customizations; botocore checks the bytes as received, undecoded). Errors stay uncompressed: DynamoDB
    was seen to label large error bodies gzip without compressing them (AllocZero/EfficientDynamoDb PR 281), a
    fault no client can read, so not copied."""
    if coding is not None and status == 200 and len(body) > COMPRESS_ABOVE_BYTES:
        body = compress(body, coding, _COMPRESS_LEVEL)
        extra += b"Content-Encoding: " + coding + b"\r\n"
    return _RESPONSE_EXTENDED % (status, _REASONS.get(status, b"Error"), _date.get(), content_type, len(body),
                                 b"keep-alive" if keep_alive else b"close", request_id, zlib.crc32(body), extra, body)


_RESPONSE_EXTENDED = _RESPONSE.replace(b"\r\n\r\n%s", b"\r\n%s\r\n%s")


class _Request(NamedTuple):
    target: bytes
    authorization: bytes | None
    body: bytes
    too_large: bool
    request_id: bytes
    content_type: bytes
    keep_alive: bool
    extra: bytes = b""  # more header lines for the answer (CORS)
    coding: bytes | None = None  # the coding the answer may be compressed in (from Accept-Encoding)
    host: bytes = b""  # the Host header: the address the client reached this server at
    signed: SignedRequest | None = None  # what its signature covers, when the server verifies signatures
    peer: str = ""  # the client's address, when the audit log records it

    def render(self, status: int, payload: bytes) -> bytes:
        if not self.extra and self.coding is None:  # (the usual SDK request: the shortest path)
            return render_response(status, payload, self.content_type, self.request_id, self.keep_alive)
        return render_extended(status, payload, self.content_type, self.request_id, self.keep_alive, self.extra,
                               self.coding)


def _media_type(content_type: bytes) -> bytes:
    """A Content-Type's media type, without parameters, in lower case."""
    return content_type.split(b";", 1)[0].strip().lower()


class _Ready(NamedTuple):
    """An answer the dispatcher does not give (health check, 404, malformed HTTP), waiting behind requests
    deferred on its connection."""

    response: bytes
    keep_alive: bool


def _decoded(body: bytes, content_encoding: bytes) -> tuple[bytes, bool]:
    """A compressed request's body decoded, and whether it is too large once decoded (the limit applies to the
    decoded body; decoding stops past it, so a small "bomb" cannot exhaust the memory). A body that is not valid
    for its coding, or in a coding not read here, becomes bytes that are not JSON: the dispatcher answers it in its
    turn (after the operation and signature checks) with a SerializationException, a best guess at DynamoDB's
    answer."""
    try:
        return decode_body(body, content_encoding, MAX_BODY_BYTES), False
    except BodyTooLarge:
        return b"", True
    except BadCoding:
        return _UNREADABLE, False


_UNREADABLE = b"\x00"


# A request that found the writer lock taken is tried again after this long (MAX_ATTEMPTS times, then it waits).
_RETRY_SECONDS = 0.001


class _Detached:
    """The parser a closed connection keeps: it refers to nothing (see `HttpProtocol.connection_lost`)."""


_DETACHED = httptools.HttpRequestParser(_Detached())


class HttpProtocol(asyncio.Protocol):
    """One client connection."""

    __slots__ = ("_attempts", "_body", "_body_size", "_budget_paused", "_counted", "_deferred", "_failed",
                 "_head_bytes", "_head_size", "_headers", "_last", "_peer_host", "_retry_due", "_since", "_too_large",
                 "_upgrade_body", "_url", "_write_paused", "busy", "dispatcher", "held", "mark", "parser", "server",
                 "transport")

    def __init__(self, dispatcher: Dispatcher, server: ServerState) -> None:
        self.dispatcher = dispatcher
        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self._url = b""
        self._headers: dict[bytes, bytes] = {}
        self._body: list[bytes | bytearray] = []
        self._body_size = 0
        self._too_large = False
        self.busy = False  # a request is being received or handled
        self.held = 0  # responses waiting for the group commit
        # Requests waiting for another worker to release the store's writer lock, in arrival order.
        self._deferred: deque[_Request | _Ready] = deque()
        self._attempts = 0
        # A request asking to switch protocols (Connection: Upgrade, as `curl --http2` sends) is served as plain
        # HTTP/1.1, which RFC 7230 6.7 allows: the parser hands over at the end of its headers, and its body (this
        # many bytes still to come) is read here, then a fresh parser goes on with the connection.
        self._upgrade_body: int | None = None
        self._head_bytes: int | None = None  # bytes received since a request began, until its headers were read
        self._head_size = 0  # the URL's and headers' bytes (counted when they may pass DynamoDB's 16 KB limit)
        # Bytes received since the last request ended, the whole piece it ended in included: at least the size of
        # the next request's head, so that head is counted exactly only when it may pass the limit.
        self._since = 0
        self._last = 0  # the size of the last piece received
        # The client is not reading its answers (the transport's buffer is past its high-water mark): requests
        # already received wait in `_deferred`, and nothing more is read, until it catches up.
        self._write_paused = False
        self._retry_due = False  # a `_retry` is scheduled
        self._failed = False  # malformed HTTP was answered: nothing more is read before the connection closes
        # Limits (see server/connection_limits.py): the sweep count when this connection last began or finished
        # receiving a request; the bytes of the arriving request counted in the worker's budget; whether reading
        # waits for room in that budget.
        self.mark = server.watch.count
        self._counted = 0
        self._budget_paused = False
        self._peer_host: str | None = None  # the client's address, once asked for (`_peer`)

    # --- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not self.server.watch.admit(self.server.connections):  # type: ignore[arg-type]
            transport.close()  # (every connection of this worker is busy, and there is no room for one more)
            return
        self.transport = transport  # type: ignore[assignment]
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        if self.server.connection_closed is not None:
            self.server.connection_closed()
        self.transport = None
        # What a half-sent request held goes now, not at the next garbage collection: the parser and this
        # protocol refer to each other.
        self._body = []
        self._headers = {}
        self.parser = _DETACHED
        budget = self.server.budget
        if self._budget_paused and self in budget.waiting:
            budget.waiting.remove(self)
        if self._counted:
            counted, self._counted = self._counted, 0
            budget.give_back(counted)

    # --- limits (server/connection_limits.py) --------------------------------------------------
    def receiving(self) -> bool:
        return self.busy

    def idle(self) -> bool:
        return not self.busy and not self.held and not self._deferred

    def time_out(self) -> None:
        self._fail(408)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def resume_reading_budget(self) -> None:
        self._budget_paused = False
        if not self._deferred:  # (else the retry of the deferred requests reads again when they are done)
            self._resume_reading()

    def pause_writing(self) -> None:
        self._write_paused = True
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._deferred:
            self._schedule_retry(0)
        else:
            self._resume_reading()

    def data_received(self, data: bytes) -> None:
        self._last = size = len(data)
        self._since += size
        if self._head_bytes is not None:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._fail(400)
                return
        if self._upgrade_body is not None:
            data = self._read_upgrade_body(data)
            if not data:
                return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            self._upgrade_body = self._content_length()
            if self._upgrade_body is None:  # a body of unknown length (chunked): cannot be served
                self._fail(400)
                return
            rest = data[upgrade.args[0]:] if upgrade.args else b""
            self.data_received(rest)
        except httptools.HttpParserError:
            self._fail(400)

    def _content_length(self) -> int | None:
        if self._headers.get(b"transfer-encoding") is not None:
            return None
        try:
            return max(0, int(self._headers.get(b"content-length", b"0")))
        except ValueError:
            return None

    def _read_upgrade_body(self, data: bytes) -> bytes:
        """Take the body of a request that asked for an upgrade (see `_upgrade_body`); once it is whole, answer the
        request and give back the bytes after it, for a fresh parser."""
        assert self._upgrade_body is not None
        taken = data[:self._upgrade_body]
        self._upgrade_body -= len(taken)
        if taken:
            self.on_body(taken)
        if self._upgrade_body:
            return b""
        self.on_message_complete()  # (with `_upgrade_body` 0: answered now, by the parser that read its headers)
        self._upgrade_body = None
        self.parser = httptools.HttpRequestParser(self)
        return data[len(taken):]

    # --- httptools callbacks ------------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._head_bytes = 0
        self._head_size = 0
        self._url = b""
        self._headers = {}
        self._body = []
        self._body_size = 0
        self._too_large = False
        self.busy = True
        self.mark = self.server.watch.count

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.lower()
        first = self._headers.setdefault(key, value)
        if first is not value:  # a header given twice is one list of values (RFC 9110 5.3: Accept-Encoding...)
            self._headers[key] = first + b"," + value

    def on_headers_complete(self) -> None:
        if self._since > MAX_HEADER_BYTES:
            self._head_size = len(self._url) + sum(len(name) + len(value) for name, value in self._headers.items())
        self._head_bytes = None
        # A client that asked to hear "100 Continue" before sending its body (curl does for large bodies) would
        # otherwise wait out its own timeout. Not while earlier answers of this connection are still due: an
        # interim answer must not overtake them (such a client waits, then sends the body anyway).
        expect = self._headers.get(b"expect")
        if expect is not None and expect.lower() == b"100-continue" and not self.held and not self._deferred \
                and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        size = len(body)
        self._body_size += size
        if not self._too_large:  # (the worker's budget of bytes held, see `_wait_for_room`; inline: every request)
            self._counted += size
            budget = self.server.budget
            budget.held += size
            if budget.held > budget.limit:
                self._wait_for_room()
        if self._body_size > MAX_BODY_BYTES:
            self._too_large = True
            self._body = []
        elif not self._too_large:
            parts = self._body
            if not parts:  # (the usual body comes in one piece, and is used as it is)
                parts.append(body)
            else:  # a body in many pieces (chunked, or split by the network) grows one buffer, not a list
                if type(parts[0]) is bytes:
                    parts[0] = bytearray(parts[0])
                parts[0] += body

    def _wait_for_room(self) -> None:
        """The worker holds more bytes of unfinished requests than its budget: read nothing more of this one until
        there is room (see server/connection_limits.py)."""
        if self.transport is not None and not self._budget_paused:
            self._budget_paused = True
            self.transport.pause_reading()
            self.server.budget.waiting.append(self)

    def on_message_complete(self) -> None:
        if self._upgrade_body is None and self.parser.should_upgrade():
            return  # its body follows the headers as "upgraded" data: answered once read (`_read_upgrade_body`)
        self._since = self._last
        try:
            self._respond()
        finally:
            self.busy = False
            self.mark = self.server.watch.count
            counted = self._counted
            if counted:
                self._counted = 0
                budget = self.server.budget
                budget.held -= counted
                if budget.waiting:
                    budget.give_back(0)  # (which reads again the connections that waited, while there is room)
            if self.server.closing:
                self.close_if_idle()

    # --- request handling ---------------------------------------------------------------------
    def _respond(self) -> None:
        transport = self.transport
        if transport is None or self._failed:
            return
        if self._head_size > MAX_HEADER_BYTES:
            self._fail(400)
            return
        keep_alive = self.parser.should_keep_alive() and not self.server.closing
        request_id = new_request_id()
        method = self.parser.get_method()
        headers = self._headers
        origin = headers.get(b"origin")
        extra = b"" if origin is None else self.server.cors.headers(origin) or b""
        if method != b"POST":
            self._respond_other(method, origin, extra, request_id, keep_alive)
            return
        content_type = headers.get(b"content-type")
        url = self._url
        if (url != b"/" and url.split(b"?", 1)[0] != b"/") or (content_type is not None and content_type != _JSON_1_0
                                                             and _media_type(content_type) != _JSON_1_0):
            # DynamoDB speaks AWS JSON 1.0 only: 1.1 (or anything else) finds no page (reported against the service
            # in rusoto #215 and taws #165). It serves its API at "/" only; that another path finds the same page is
            # a best guess (the same routing failure).
            if self.server.control is not None and url.startswith(b"/openddb/"):
                self._control(method, extra, request_id, keep_alive)
                return
            operation = cloudwatch_wire.operation_of(url)
            if operation is not None:  # CloudWatch's reads of the metrics (server/cloudwatch_wire.py)
                body = b"".join(self._body)
                signed = SignedRequest(method, url, headers, body) if self.server.verifying else None
                status, body, more = self.server.cloudwatch(operation, body, headers.get(b"authorization"), signed)
                self._answer(render_extended(status, body, cloudwatch_wire.CONTENT_TYPE, request_id, keep_alive,
                                             extra + more, None), keep_alive)
                return
            if content_type is not None and _media_type(content_type) == FORM_TYPE and url.split(b"?", 1)[0] == b"/":
                target = query_target(headers.get(b"authorization"))
                if target is not None:  # IAM or STS on the same port (identity/service.py)
                    self._respond_query(target, extra, request_id, keep_alive)
                    return
            self._answer(render_extended(404, _PAGE_NOT_FOUND, b"text/html", request_id, keep_alive, extra, None),
                         keep_alive)
            return
        body, too_large = b"".join(self._body), self._too_large
        authorization, signed = self._signature(method, url, body)  # (the body as sent: compressed, if it was)
        encoding = headers.get(b"content-encoding")
        if encoding is not None and not too_large:
            body, too_large = _decoded(body, encoding)
        accept = headers.get(b"accept-encoding")
        request = _Request(headers.get(b"x-amz-target", b""), authorization, body, too_large,
                           request_id, _JSON_1_0, keep_alive, extra,
                           None if accept is None or accept == b"identity" else chosen_coding(accept),  # (boto3's)
                           headers.get(b"host", b""), signed, self._peer() if self.server.auditing else "")
        if self._deferred or self._write_paused:  # keep this connection's answers in request order
            self._deferred.append(request)
        elif request.target in self.server.read_ahead_targets:  # run with the pass's other reads (server/passes.py)
            self._deferred.append(request)
            self.server.read_soon(self)
        elif not self._execute(request):
            self._defer(request)

    def _signature(self, method: bytes, url: bytes, body: bytes) -> tuple[bytes | None, SignedRequest | None]:
        """An API call's Authorization value and, with --auth verify, what its signature covers: from its header, or
        from its query string where it was presigned (identity/presigned.py)."""
        headers = self._headers
        authorization = headers.get(b"authorization")
        if authorization is None and presigned.is_presigned(url):
            authorization, in_query = presigned.from_query(method, url, headers, body)
            return authorization, in_query if self.server.verifying else None
        return authorization, SignedRequest(method, url, headers, body) if self.server.verifying else None

    def _respond_query(self, target: bytes, extra: bytes, request_id: bytes, keep_alive: bool) -> None:
        """Hand an IAM or STS call (AWS Query protocol: a form-encoded POST) to the dispatcher; answered in XML."""
        headers = self._headers
        body = b"".join(self._body)
        signed = SignedRequest(b"POST", self._url, headers, body) if self.server.verifying else None
        request = _Request(target, headers.get(b"authorization"), body, self._too_large, request_id, b"text/xml",
                           keep_alive, extra, None, headers.get(b"host", b""), signed,
                           self._peer() if self.server.auditing else "")
        if self._deferred or self._write_paused:
            self._deferred.append(request)
        elif not self._execute(request):
            self._defer(request)

    def _respond_other(self, method: bytes, origin: bytes | None, extra: bytes, request_id: bytes,
                       keep_alive: bool) -> None:
        """Answer what is not an API call: the health check, a CORS pre-flight, or no page (404)."""
        headers = self._headers
        path, _, query = self._url.partition(b"?")
        if method == b"GET" and path == b"/openddb/advisor":  # the advisor's report (docs/ADVISOR.md)
            # (signed as an API call under --auth verify: the dispatcher authenticates it)
            signed = SignedRequest(method, self._url, headers, b"") if self.server.verifying else None
            incoming = _Request(b"", headers.get(b"authorization"), b"", False, request_id, b"application/json",
                                keep_alive, extra, None, headers.get(b"host", b""), signed,
                                self._peer() if self.server.auditing else "")
            status, body = self.server.advisor_page(query, incoming)
            self._answer(render_extended(status, body, b"application/json", request_id, keep_alive, extra, None),
                         keep_alive)
            return
        if self.server.control is not None and self._url.startswith(b"/openddb/"):
            self._control(method, extra, request_id, keep_alive)
            return
        at_root = path == b"/"
        if method == b"GET" and path == b"/metrics":  # Prometheus' scrape (observe/prometheus.py; no signature)
            body = self.server.metrics_page()
            self._answer(render_extended(200, body, prometheus.CONTENT_TYPE, request_id, keep_alive, extra, None),
                         keep_alive)
            return
        if method in (b"GET", b"HEAD") and at_root:
            # DynamoDB's health check names the endpoint, a space after it: "healthy: dynamodb.us-east-1.amazonaws.com "
            # (issue 30; public captures of the endpoint's answer). Here, the address the client used.
            body = b"" if method == b"HEAD" else b"healthy: " + (headers.get(b"host") or self._local_address()) + b" "
            self._answer(render_extended(200, body, b"text/plain", request_id, keep_alive, extra, None), keep_alive)
            return
        console = self.server.console
        if console is not None and method in (b"GET", b"HEAD") and self._url.startswith(b"/console"):
            # The web console (console/pages.py): its own headers, and no CORS ones (it is not for other origins).
            page = console.respond(self._url)
            self._answer(render_extended(page.status, page.body if method == b"GET" else b"", page.content_type,
                                         request_id, keep_alive, page.headers, None), keep_alive)
            return
        if method == b"OPTIONS" and origin is not None:
            allowed = self.server.cors.preflight(origin, headers.get(b"access-control-request-method"),
                                                 headers.get(b"access-control-request-headers"))
            if allowed is not None:
                self._answer(render_extended(200, b"", b"text/plain", request_id, keep_alive, allowed, None),
                             keep_alive)
                return
        self._answer(render_extended(404, b"", b"text/plain", request_id, keep_alive, extra, None), keep_alive)

    def _control(self, method: bytes, extra: bytes, request_id: bytes, keep_alive: bool) -> None:
        """Answer a test-control request (`--dev` only: see server/control.py)."""
        assert self.server.control is not None
        status, body = self.server.control.respond(self.server, method, self._url, b"".join(self._body))
        self._answer(render_extended(status, body, b"application/json", request_id, keep_alive, extra, None),
                     keep_alive)

    def _peer(self) -> str:
        """The client's address (its host), "" where the transport has none; asked of the transport once per
        connection (uvloop makes a socket object for each ask)."""
        peer = self._peer_host
        if peer is None:
            name = self.transport.get_extra_info("peername") if self.transport is not None else None
            peer = self._peer_host = str(name[0]) if isinstance(name, tuple) else ""
        return peer

    def _local_address(self) -> bytes:
        """host:port of this end of the connection (for a request without a Host header, as HTTP/1.0 allows)."""
        name = self.transport.get_extra_info("sockname") if self.transport is not None else None
        if not isinstance(name, tuple):
            return b"localhost"
        host = f"[{name[0]}]" if ":" in str(name[0]) else str(name[0])
        return f"{host}:{name[1]}".encode()

    def _execute(self, request: _Request) -> bool:
        """Run one request and send (or hold) its answer; False if it must wait for the writer lock."""
        session = self.dispatcher.engine.session
        writes = session.request_began = session.writes
        try:
            status, payload = self.server.handle(request)
        finally:
            session.request_began = -1
        if status == 0:
            return False
        response = request.render(status, payload)
        if self.dispatcher.engine.reading:
            self.server.end_pass_soon()
        if session.pending or self.held:  # behind a held answer on this connection, wait too: answers stay in order
            self.held += 1
            self.server.hold(self, request, response, session.commits if session.writes != writes else None)
            return True
        if self.transport is not None:
            self.server.send_soon(self.transport, response, request.keep_alive)
        return True

    def _answer(self, response: bytes, keep_alive: bool) -> None:
        """Send an answer the dispatcher did not give (health check, 404, malformed HTTP) in its turn: after this
        connection's requests still deferred, and its answers still waiting for the group commit or the end of
        the pass."""
        if self._deferred or self._write_paused:
            self._deferred.append(_Ready(response, keep_alive))
            return
        self._answer_now(response, keep_alive)

    def _answer_now(self, response: bytes, keep_alive: bool) -> None:
        if self.held:
            self.held += 1
            self.server.hold(self, _Request(b"", None, b"", False, b"", b"text/plain", keep_alive), response, None)
        elif self.transport is not None:
            self.server.send_soon(self.transport, response, keep_alive)

    def _defer(self, request: _Request) -> None:
        """Another worker holds the writer lock: stop reading and try again shortly, instead of blocking the
        event loop (and every other connection of this worker) until it lets go."""
        self._deferred.append(request)
        if self.transport is not None:
            self.transport.pause_reading()
        self._schedule_retry(_RETRY_SECONDS)

    def _schedule_retry(self, delay: float) -> None:
        """Run `_retry` after `delay` seconds, unless it is already due (one retry loop per connection)."""
        if not self._retry_due:
            self._retry_due = True
            asyncio.get_running_loop().call_later(delay, self._retry)

    def _resume_reading(self) -> bool:
        """Read again, unless the client is behind on its answers or the connection waits to close; whether it
        does."""
        if self.transport is None or self._write_paused or self._failed or self._budget_paused:
            return False
        self.transport.resume_reading()
        return True

    def put_aside(self) -> list[_Request]:
        """The requests waiting on this connection (see `ServerState.read_soon`)."""
        return [request for request in self._deferred if isinstance(request, _Request)]

    def run_put_aside(self) -> None:
        """Run the requests waiting on this connection, in order (some may wait further: see `_defer`)."""
        if not self._retry_due:
            self._retry()

    def _retry(self) -> None:
        self._retry_due = False
        session = self.dispatcher.engine.session
        while self._deferred:
            if self._write_paused:  # `resume_writing` calls again
                return
            first = self._deferred[0]
            if isinstance(first, _Ready):
                self._deferred.popleft()
                self._answer_now(*first)
                continue
            self._attempts += 1
            # After a while, wait for the lock outright so that a busy neighbour cannot starve us.
            patient = self._attempts > MAX_ATTEMPTS
            with session.waiting(patient or session.wait):
                done = self._execute(first)
            if not done:
                self._schedule_retry(_RETRY_SECONDS)
                return
            self._deferred.popleft()
            self._attempts = 0
        if self._resume_reading() and self.server.closing:
            self.close_if_idle()

    def _fail(self, status: int) -> None:
        """Malformed HTTP: answer after the answers already given, then close; read nothing more meanwhile."""
        if self.transport is not None and not self.transport.is_closing():
            self._failed = True
            self.transport.pause_reading()
            self._answer(render_response(status, b"", b"text/plain", new_request_id(), False), False)

    def close_if_idle(self) -> None:
        """At shutdown: close unless a request is arriving or a response still waits for its commit."""
        if self.transport is not None and not self.busy and not self.held and not self._deferred:
            self.server.send_answers()  # answers of this pass go out before the close
            self.transport.close()


async def serve(dispatcher: Dispatcher, host: str, port: int, *, sock: socket.socket | None = None,
                ready: asyncio.Event | None = None, stop: asyncio.Event | None = None, cors: str = "*",
                control: Control | None = None, limits: ConnectionLimits | None = None,
                tls: ssl.SSLContext | None = None, console: Console | None = None, log_format: LogFormat = "text",
                metrics: Metrics | None = None, advisor: Advisor | None = None,
                balance: tuple[Shares, int] | None = None) -> None:
    """Serve until `stop` is set, then stop accepting, let in-flight requests finish and close connections;
    `cors`: the origins allowed to call from a browser page, comma-separated (`*`: any); `control`: the
    test-control endpoints (None: they do not exist); `limits`: on slow, idle and too many connections; `tls`:
    serve HTTPS with it (server/tls.py); `console`: the web console at /console (None: no such page);
    `log_format`: the request log's (server/requests_log.py); `metrics`: this worker's counts
    (observe/metrics.py; None: counted for this process alone); `advisor`: the standards advisor, told of every
    request (None: off); `balance`: the workers' shares and this worker's index, when workers share `sock` and
    spread their connections evenly (server/balance.py)."""
    loop = asyncio.get_running_loop()
    state = ServerState(dispatcher, Cors(cors), limits, log_format, metrics, advisor)
    state.control = control
    state.console = console
    server: asyncio.Server | BalancedServer
    if sock is not None and balance is not None:
        server = BalancedServer(loop, sock, balance[0], balance[1], lambda: HttpProtocol(dispatcher, state), tls)
        state.connection_closed = server.lost
        server.start()
    elif sock is not None:
        server = await loop.create_server(lambda: HttpProtocol(dispatcher, state), sock=sock, backlog=1024, ssl=tls)
    else:
        server = await loop.create_server(lambda: HttpProtocol(dispatcher, state), host, port, backlog=1024,
                                          reuse_address=True, ssl=tls)
    state.background = loop.call_later(BACKGROUND_SECONDS, state.run_background)
    state.sweeping = loop.call_later(SWEEP_SECONDS, state.sweep)
    if ready is not None:
        ready.set()
    stop = stop or asyncio.Event()
    await stop.wait()
    server.close()
    state.closing = True
    for timer in (state.background, state.sweeping):
        if timer is not None:
            timer.cancel()
    for connection in list(state.connections):
        connection.close_if_idle()
    deadline = loop.time() + 10
    while state.connections and loop.time() < deadline:
        await asyncio.sleep(0.01)
    await server.wait_closed()
