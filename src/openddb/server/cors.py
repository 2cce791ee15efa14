"""Cross-origin resource sharing: the headers that let a browser page call the server.

DynamoDB answers a request with an Origin header with `Access-Control-Allow-Origin: *` and exposes
`x-amzn-RequestId,x-amzn-ErrorType,x-amzn-ErrorMessage,Date` (the list recorded from DynamoDB in ScyllaDB's
Alternator, scylladb/scylladb issue 8025; aws-sdk-js issue 1614 confirms x-amz-crc32 is not exposed). A pre-flight
OPTIONS is answered with the method and headers it asked for. DynamoDB Local's `-cors` takes a comma-separated
list of allowed origins, `*` (every origin) by default (DynamoDB Local's documentation).
"""

from __future__ import annotations

_EXPOSED = b"Access-Control-Expose-Headers: x-amzn-RequestId,x-amzn-ErrorType,x-amzn-ErrorMessage,Date\r\n"
_ANY_ORIGIN = b"Access-Control-Allow-Origin: *\r\n" + _EXPOSED
# How long a browser may keep a pre-flight answer: two days, as DynamoDB answers (its pre-flight recorded against
# dynamodb.us-east-1.amazonaws.com and streams.dynamodb.us-east-1.amazonaws.com in AllanZhengYP/cors-test,
# output.md, 2020-10-15: "Access-Control-Max-Age: 172800", beside the same Expose-Headers list as above).
MAX_AGE_SECONDS = 172800


class Cors:
    """Which origins may call the server, and the header lines that tell a browser so."""

    __slots__ = ("_origins",)

    def __init__(self, origins: str = "*") -> None:
        allowed = [origin.strip() for origin in origins.split(",") if origin.strip()]
        # None: every origin ("*" anywhere in the list); otherwise the origins named, as the browser sends them.
        self._origins = None if "*" in allowed else frozenset(origin.encode() for origin in allowed)

    def headers(self, origin: bytes) -> bytes | None:
        """Header lines (each ending in CRLF) for a request from `origin`; None if that origin is not allowed."""
        if self._origins is None:
            return _ANY_ORIGIN
        if origin not in self._origins:
            return None
        # Naming one origin, the answer differs by origin: caches must keep them apart (Fetch standard, CORS).
        return b"Access-Control-Allow-Origin: " + origin + b"\r\nVary: Origin\r\n" + _EXPOSED

    def preflight(self, origin: bytes, method: bytes | None, headers: bytes | None) -> bytes | None:
        """Header lines answering a pre-flight OPTIONS: the method and headers it asked for are allowed."""
        lines = self.headers(origin)
        if lines is None:
            return None
        if method is not None:
            lines += b"Access-Control-Allow-Methods: " + method + b"\r\n"
        if headers is not None:
            lines += b"Access-Control-Allow-Headers: " + headers + b"\r\n"
        return lines + b"Access-Control-Max-Age: %d\r\n" % MAX_AGE_SECONDS
