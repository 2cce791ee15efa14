"""Signature Version 4, verified (`openddb serve --auth verify`): the request's signature recomputed from the
secret of its access key, as AWS does it (IAM User Guide, "Create a signed AWS API request": the canonical
request, the string to sign, the signing key derived from the secret by date, region and service).

The Authorization header's form and scope were checked before this runs (api/dispatch.py, with or without
verification). Here, in AWS's order as far as it shows: the access key must be known (UnrecognizedClientException;
the root's, or a user's or temporary credentials' found in the identity store), a session token sent exactly with
temporary credentials and equal to theirs (UnrecognizedClientException), temporary credentials not expired
(ExpiredTokenException), the request's time within 15 minutes of the server's (InvalidSignatureException,
"Signature expired" / "not yet current"), and the signature equal to the one computed (InvalidSignatureException).
The messages are DynamoDB's, as public threads quote its answers (each cited at its constant).
"""

from __future__ import annotations

import calendar
import hashlib
import hmac
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal, NamedTuple
from urllib.parse import quote, unquote

from openddb import clock
from openddb.errors import (
    ExpiredTokenException,
    IncompleteSignatureException,
    InvalidSignatureException,
    UnrecognizedClientException,
)

if TYPE_CHECKING:
    from hashlib import _Hash as Hash

# For an access key DynamoDB does not know, byte for byte as a raw answer shows it (baopham/laravel-dynamodb issue
# 228, 2020; botocore prints the same in pynamodb/PynamoDB issue 603).
UNKNOWN_KEY = "The security token included in the request is invalid"
# The wrong secret, or a request changed after it was signed: the raw answer to a PutItem, 178 characters
# (ttsuruoka/php-simple-amazon-dynamodb issue 1, 2016).
MISMATCH = ("The request signature we calculated does not match the signature you provided. Check your AWS Secret "
            "Access Key and signing method. Consult the service documentation for details.")
# "Signature expired: 20240805T055512Z is now earlier than 20240805T061917Z (20240805T063417Z - 15 min.)" (a
# DynamoDB PutItem, praetorian-inc/chariot-ui issue 453, 2024); the mirror for a clock ahead, "Signature not yet
# current: 20190305T002809Z is still later than 20190304T214315Z (20190304T212815Z + 15 min.)" (a DynamoDB
# putItem, aws/aws-sdk-js issue 2565, 2019).
_SKEW = timedelta(minutes=15)
_AMZ_DATE = "%Y%m%dT%H%M%SZ"
_SIGNED_HEADERS = re.compile(rb"SignedHeaders=([^,\s]*)")
CREDENTIAL = re.compile(rb"Credential=([^/,\s]*)/(\d{8})/([^/,\s]*)/([^/,\s]*)/aws4_request")
_SPACES = re.compile(rb"\s+")


Source = Literal["root", "user", "role"]


@dataclass(frozen=True)
class Credentials:
    """An access key and its secret, and the account and principal it stands for; temporary credentials (STS)
    also carry their session token and expiry (epoch seconds)."""

    access_key_id: str
    secret: str
    account: str
    arn: str  # e.g. arn:aws:iam::000000000000:root, ...:user/name, arn:aws:sts::...:assumed-role/role/session
    user_id: str = ""  # GetCallerIdentity's UserId: the account (root), AIDA... (user), AROA...:session (role)
    token: str | None = None  # the session token of temporary credentials
    expires: float | None = None
    source: Source = "root"  # who the credentials stand for: the account's root, a user, an assumed role
    role: str | None = None  # the role name of an assumed role's credentials


class SignedRequest(NamedTuple):
    """What a signature covers: the method, the path and query as sent, every header (lower-case names; a header
    sent twice is its values joined by commas) and the body as sent (compressed, if it was). (A NamedTuple: the HTTP
    layer makes one per request, and a frozen dataclass's __init__ costs several times more.)"""

    method: bytes
    url: bytes
    headers: Mapping[bytes, bytes]
    body: bytes


@dataclass(frozen=True)
class _Scope:
    """What an Authorization header says before its signature: whose key, the scope, the signed headers."""

    key_id: str
    scope: bytes  # day/region/service/aws4_request
    day: bytes
    region: bytes
    service: bytes
    names: tuple[bytes, ...]  # the signed headers, lower case, in the header's order
    signed: bytes  # the same, joined by ";" as the canonical request lists them


class Verifier:
    """Checks requests against the credentials it knows: `keys` (the root's, by access key id), then those
    `lookup` finds (users' access keys and temporary credentials, from the identity store)."""

    def __init__(self, keys: Mapping[str, Credentials],
                 lookup: Callable[[str], Credentials | None] | None = None) -> None:
        self.keys = dict(keys)
        self.lookup = lookup
        # Clients send the same credential scope and signed headers request after request: parsed once.
        self._scopes: dict[bytes, _Scope] = {}
        self._stamps: dict[bytes, int] = {}  # x-amz-date -> epoch seconds, for this second's requests
        # What one client's requests share within a second is hashed once (a request's own part is its payload's
        # hash, and its canonical request's): (method, path and query, the signed headers' names, then their values
        # as sent) -> SHA-256 over its canonical request up to the payload hash; (secret, scope, X-Amz-Date) -> HMAC
        # with the signing key over its string to sign up to the canonical request's hash, as the pair of SHA-256
        # states HMAC runs (RFC 2104: the key's inner and outer pads absorbed). Each is copied per request.
        self._heads: dict[tuple[bytes | None, ...], Hash] = {}
        self._signers: dict[tuple[str, bytes, bytes], tuple[Hash, Hash]] = {}
        self._keys: dict[tuple[str, bytes], bytes] = {}  # (secret, scope) -> signing key, derived once a day

    def credentials(self, key_id: str) -> Credentials | None:
        """The credentials of access key `key_id`: a root's given at start, else the identity store's, or None."""
        credentials = self.keys.get(key_id)
        if credentials is None and self.lookup is not None:
            credentials = self.lookup(key_id)
        return credentials

    def verify(self, authorization: bytes, request: SignedRequest) -> Credentials:
        """The credentials that signed `request` (whose Authorization header's form was checked before), or the
        error DynamoDB answers."""
        cut = authorization.rfind(b"Signature=")
        scope = self._scopes.get(authorization[:cut]) or self._parse(authorization, cut)
        credentials = self.credentials(scope.key_id)
        headers = request.headers
        token = headers.get(b"x-amz-security-token")
        if credentials is None or (token is None) != (credentials.token is None):
            # (a session token with a long-term key is no credential either, nor temporary keys without theirs)
            raise UnrecognizedClientException(UNKNOWN_KEY)
        if credentials.token is not None:
            self._check_session(credentials, token)
        stamp = headers.get(b"x-amz-date")
        stamp = _stamp_of(headers, authorization) if stamp is None else stamp.strip()
        self._check_time(stamp)
        shared = (request.method, request.url, scope.signed, *map(headers.get, scope.names))
        head = self._heads.get(shared) or _head(shared, scope.names)
        signing = (credentials.secret, scope.scope, stamp)
        signer = self._signers.get(signing) or self._signer(credentials.secret, scope, stamp)
        canonical = head.copy()
        canonical.update(headers.get(b"x-amz-content-sha256") or sha256_hex(request.body))
        inner, outer = signer
        inner = inner.copy()
        inner.update(canonical.hexdigest().encode())
        outer = outer.copy()
        outer.update(inner.digest())
        given = authorization[cut + 10:].split(b",", 1)[0].strip().lower()
        if not hmac.compare_digest(outer.hexdigest().encode(), given):
            raise InvalidSignatureException(MISMATCH)
        if shared not in self._heads or signing not in self._signers:
            self._keep(shared, head, signing, signer)  # (once a request signed with them passed: no forger fills these)
        return credentials

    @staticmethod
    def _check_session(credentials: Credentials, token: bytes | None) -> None:
        """Temporary credentials: their own session token, and not past their expiry."""
        assert credentials.token is not None
        if token is None or not hmac.compare_digest(token.strip(), credentials.token.encode()):
            raise UnrecognizedClientException(UNKNOWN_KEY)
        if credentials.expires is not None and clock.now() >= credentials.expires:
            # best guess at the order: an expired token is refused before its signature is checked
            raise ExpiredTokenException()

    def _parse(self, authorization: bytes, cut: int) -> _Scope:
        credential = CREDENTIAL.search(authorization)
        signed = _SIGNED_HEADERS.search(authorization)
        assert credential is not None and signed is not None and cut > 0  # (its form was checked before)
        key_id, day, region, service = credential.groups()
        names = signed.group(1).lower()
        scope = _Scope(key_id.decode("latin-1"), b"%s/%s/%s/aws4_request" % (day, region, service), day, region,
                       service, tuple(names.split(b";")), names)
        if len(self._scopes) > 4096:
            self._scopes.clear()
        self._scopes[authorization[:cut]] = scope
        return scope

    def _keep(self, shared: tuple[bytes | None, ...], head: Hash, signing: tuple[str, bytes, bytes],
              signer: tuple[Hash, Hash]) -> None:
        """Keep the hashed head of the canonical request and the HMAC states of a verified request."""
        if len(self._heads) > 4096:
            self._heads.clear()
        if len(self._signers) > 4096:
            self._signers.clear()
        self._heads[shared] = head
        self._signers[signing] = signer

    def _signer(self, secret: str, scope: _Scope, stamp: bytes) -> tuple[Hash, Hash]:
        """HMAC-SHA256 with the signing key of `secret` for `scope`, over the string to sign up to the canonical
        request's hash, as its inner and outer SHA-256 states (RFC 2104); the signing key kept for the day."""
        key = self._keys.get((secret, scope.scope))
        if key is None:
            key = ("AWS4" + secret).encode()
            for part in (scope.day, scope.region, scope.service, b"aws4_request"):
                key = hmac.digest(key, part, "sha256")
            if len(self._keys) > 4096:
                self._keys.clear()
            self._keys[(secret, scope.scope)] = key
        padded = key.ljust(64, b"\0")  # (a SHA-256 key is 32 bytes: within the 64-byte block, so padded as is)
        inner, outer = _EMPTY_SHA256.copy(), _EMPTY_SHA256.copy()
        inner.update(padded.translate(_INNER_PAD))
        inner.update(b"AWS4-HMAC-SHA256\n%s\n%s\n" % (stamp, scope.scope))
        outer.update(padded.translate(_OUTER_PAD))
        return inner, outer

    def _check_time(self, stamp: bytes) -> None:
        """InvalidSignatureException unless `stamp` is within 15 minutes of the server's clock."""
        signed = self._stamps.get(stamp)
        if signed is None:
            signed = _epoch(stamp)
            if len(self._stamps) > 64:
                self._stamps.clear()
            self._stamps[stamp] = signed
        now = int(clock.now())
        if now - _SKEW_SECONDS <= signed <= now + _SKEW_SECONDS:
            return
        text, current = stamp.decode(), datetime.fromtimestamp(now, UTC)
        if signed < now:
            raise InvalidSignatureException(
                f"Signature expired: {text} is now earlier than {(current - _SKEW).strftime(_AMZ_DATE)} "
                f"({current.strftime(_AMZ_DATE)} - 15 min.)")
        raise InvalidSignatureException(
            f"Signature not yet current: {text} is still later than {(current + _SKEW).strftime(_AMZ_DATE)} "
            f"({current.strftime(_AMZ_DATE)} + 15 min.)")


_SKEW_SECONDS = 15 * 60


def _epoch(stamp: bytes) -> int:
    """Seconds since the epoch of an X-Amz-Date value (20260101T000000Z); InvalidSignatureException if it is none."""
    try:
        return calendar.timegm(time.strptime(stamp.decode("latin-1"), _AMZ_DATE))
    except ValueError:
        raise InvalidSignatureException(MISMATCH) from None  # best guess: a time that cannot be read


def _stamp_of(headers: Mapping[bytes, bytes], authorization: bytes) -> bytes:
    """Without X-Amz-Date, the request's time from its Date header (RFC 7231 form), as an X-Amz-Date value."""
    date = headers.get(b"date")
    if date is None:
        # best guess at the words: AWS's for a signed request without a time (IncompleteSignature family)
        raise IncompleteSignatureException("Authorization header requires existence of either a 'X-Amz-Date' or a "
                                           "'Date' header. Authorization=" + authorization.decode("latin-1"))
    try:
        parsed = time.strptime(date.decode("latin-1").strip(), "%a, %d %b %Y %H:%M:%S GMT")
    except ValueError:
        raise InvalidSignatureException(MISMATCH) from None  # best guess, as above
    return time.strftime(_AMZ_DATE, parsed).encode()


def canonical_request(request: SignedRequest, names: tuple[bytes, ...]) -> bytes:
    """SigV4's canonical request of `request` for the signed header `names` (lower case, in the header's order):
    method, path, query, each signed header `name:value` (trimmed, inner runs of spaces as one), the names, and the
    body's SHA-256 (or the x-amz-content-sha256 the client sent). (`Verifier.verify` builds the same text from
    parts it keeps.)"""
    url = request.url
    get = request.headers.get
    return b"%s\n%s\n%s\n%s\n%s" % (
        request.method, b"/\n" if url == b"/" else _canonical_path_and_query(url),
        header_lines(names, tuple(map(get, names))), b";".join(names),
        get(b"x-amz-content-sha256") or sha256_hex(request.body))


def _head(shared: tuple[bytes | None, ...], names: tuple[bytes, ...]) -> Hash:
    """SHA-256 over the canonical request up to its payload hash (`shared`: method, path and query, the signed
    headers' names joined, then their values)."""
    method, url, signed, *values = shared
    assert method is not None and url is not None and signed is not None
    head = _EMPTY_SHA256.copy()
    head.update(b"%s\n%s\n%s\n%s\n" % (method, b"/\n" if url == b"/" else _canonical_path_and_query(url),
                                        header_lines(names, tuple(values)), signed))
    return head


def header_lines(names: tuple[bytes, ...], values: tuple[bytes | None, ...]) -> bytes:
    """The canonical request's lines of the signed headers `names` whose values are `values` (None: not sent),
    each "name:value\n", the value trimmed and its inner runs of spaces made one."""
    lines = []
    for name, given in zip(names, values, strict=True):
        value = (given or b"").strip()
        if b"  " in value or b"\t" in value:
            value = _SPACES.sub(b" ", value)
        lines.append(name + b":" + value + b"\n")
    return b"".join(lines)


_EMPTY_SHA256 = hashlib.sha256()
# HMAC's pads (RFC 2104): each key byte XOR 0x36 (inner), XOR 0x5C (outer)
_INNER_PAD = bytes(byte ^ 0x36 for byte in range(256))
_OUTER_PAD = bytes(byte ^ 0x5C for byte in range(256))


def sha256_hex(data: bytes) -> bytes:
    """The SHA-256 of `data` in lower-case hex (a copy of an empty hash: cheaper than a new one under OpenSSL 3)."""
    digest = _EMPTY_SHA256.copy()
    digest.update(data)
    return digest.hexdigest().encode()


def _canonical_path_and_query(url: bytes) -> bytes:
    path, _, query = url.partition(b"?")
    return _canonical_path(path) + b"\n" + _canonical_query(query)


def _canonical_path(path: bytes) -> bytes:
    """The path, each segment URI-encoded (as every SDK signs a non-S3 service: encoded once more)."""
    if path in (b"", b"/"):
        return b"/"
    text = quote(path.decode("latin-1"), safe="/~")
    return text.encode("latin-1")


def _canonical_query(query: bytes) -> bytes:
    if not query:
        return b""
    pairs = []
    for part in query.split(b"&"):
        name, _, value = part.partition(b"=")
        pairs.append((quote(unquote(name.decode("latin-1")), safe="-_.~"),
                      quote(unquote(value.decode("latin-1")), safe="-_.~")))
    return "&".join(f"{name}={value}" for name, value in sorted(pairs)).encode("latin-1")
