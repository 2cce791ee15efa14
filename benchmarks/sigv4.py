"""AWS Signature Version 4 for the DynamoDB JSON protocol, as the benchmark clients send it.

The algorithm is the one AWS documents ("Create a signed AWS API request"): a canonical request (method, path,
query, the signed headers, the payload's SHA-256), a string to sign over its SHA-256, and an HMAC chain from the
secret through date, region and service. OpenDDB parses signatures without verifying them yet, but a benchmark
client pays what a real SDK pays: the signature is computed for every request. The signing key is derived once a
day and the date-dependent prefixes once a second, so a request costs two SHA-256 and one HMAC.
"""

from __future__ import annotations

import hashlib
import hmac
import time

CONTENT_TYPE = "application/x-amz-json-1.0"
SIGNED_HEADERS = "content-type;host;x-amz-date;x-amz-target"


class Signer:
    def __init__(self, host: str, access_key: str = "bench", secret: str = "bench", region: str = "us-east-1",
                 service: str = "dynamodb") -> None:
        self.host, self.access_key, self.secret = host, access_key, secret
        self.region, self.service = region, service
        self._second = -1
        self._day = ""
        self._key = b""

    def _refresh(self, second: int) -> None:
        self._second = second
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(second))
        day = stamp[:8]
        if day != self._day:
            self._day = day
            key = hmac.digest(("AWS4" + self.secret).encode(), day.encode(), "sha256")
            for part in (self.region, self.service, "aws4_request"):
                key = hmac.digest(key, part.encode(), "sha256")
            self._key = key
        scope = f"{day}/{self.region}/{self.service}/aws4_request"
        self._canonical_head = (f"POST\n/\n\ncontent-type:{CONTENT_TYPE}\nhost:{self.host}\nx-amz-date:{stamp}\n"
                                "x-amz-target:").encode()
        self._canonical_tail = f"\n\n{SIGNED_HEADERS}\n".encode()
        self._to_sign_head = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n".encode()
        self._lines = (f"X-Amz-Date: {stamp}\r\nAuthorization: AWS4-HMAC-SHA256 Credential={self.access_key}/"
                       f"{scope}, SignedHeaders={SIGNED_HEADERS}, Signature=").encode()

    def sig_lines(self, target: bytes, body: bytes) -> bytes:
        """The X-Amz-Date and Authorization header lines (CRLF-terminated) for a POST / with `target` as its
        X-Amz-Target and `body` as its payload."""
        second = int(time.time())
        if second != self._second:
            self._refresh(second)
        canonical = self._canonical_head + target + self._canonical_tail + hashlib.sha256(body).hexdigest().encode()
        to_sign = self._to_sign_head + hashlib.sha256(canonical).hexdigest().encode()
        return self._lines + hmac.digest(self._key, to_sign, "sha256").hex().encode() + b"\r\n"
