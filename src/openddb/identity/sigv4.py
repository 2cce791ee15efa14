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
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Literal, NamedTuple
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
# The canonical request always ends with the body's SHA-256, whatever x-amz-content-sha256 says: a request signed
# over "UNSIGNED-PAYLOAD" in its place (a payload left out of the signature) gets MISMATCH, over HTTP and HTTPS.
# UNSIGNED-PAYLOAD is Amazon S3's: AWS documents it for S3 alone (S3 API Reference, "Signature Calculations for the
# Authorization Header: Transferring Payload in a Single Chunk"); botocore sends it only for operations modelled
# "v4-unsigned-body" (DynamoDB's model has none) and aws-sdk-go's v4 signer only for S3 or when told to; other
# services answer a request signed with it with a signature mismatch (apache/opendal-reqsign issue 346; an AWS Lambda
# function URL quoted in re:Post "POST request to presigned AWS Lambda Function URL with unsigned payload").
# best guess: DynamoDB's own answer to it is not captured in public; the mismatch is inferred from those.


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
    expires: int | None = None  # a presigned request's X-Amz-Expires (identity/presigned.py); None: a header's


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


class _Signing:
    """One Authorization header's part before its signature, parsed once (clients send the same one request after
    request, the signature alone changing), and what its requests share within a second, kept once a request
    signed with it passed: per (method, path and query, the signed headers' values as sent, X-Amz-Date where it is
    not among them) the secret it was made with, the time in epoch seconds, the SHA-256 state over the canonical
    request up to its payload hash, and the HMAC's inner and outer SHA-256 states over the string to sign up to the
    canonical request's hash (RFC 2104: the signing key's pads absorbed). Each state is copied per request."""

    __slots__ = ("dated", "kept", "key_id", "last", "scope", "values")

    def __init__(self, scope: _Scope) -> None:
        self.scope = scope
        self.key_id = scope.key_id
        # the signed headers' values, in one call (KeyError if one was not sent: then looked for one by one)
        self.values: Callable[[Mapping[bytes, bytes]], Any] = itemgetter(*scope.names)
        # X-Amz-Date among the signed headers: when it is sent, the time is part of their values (see `verify`)
        self.dated = b"x-amz-date" in scope.names
        self.kept: dict[tuple[Any, ...], _Kept] = {}
        # The last of `kept` a request used, and by what: a client's next request is most often alike (its
        # operation, its second), and told so by comparing, without hashing what the request sent.
        self.last: tuple[tuple[Any, ...], _Kept] | None = None


class _Kept(NamedTuple):
    """What requests alike within a second share (see `_Signing`)."""

    secret: str
    epoch: int
    head: Hash
    inner: Hash
    outer: Hash


class Verifier:
    """Checks requests against the credentials it knows: `keys` (the root's, by access key id), then those
    `lookup` finds (users' access keys and temporary credentials, from the identity store)."""

    def __init__(self, keys: Mapping[str, Credentials],
                 lookup: Callable[[str], Credentials | None] | None = None) -> None:
        self.keys = dict(keys)
        self.lookup = lookup
        self._signings: dict[bytes, _Signing] = {}  # an Authorization header up to "Signature=" -> its _Signing
        self._stamps: dict[bytes, int] = {}  # x-amz-date -> epoch seconds, for this second's requests
        self._keys: dict[tuple[str, bytes], bytes] = {}  # (secret, scope) -> signing key, derived once a day

    def credentials(self, key_id: str) -> Credentials | None:
        """The credentials of access key `key_id`: a root's given at start, else the identity store's, or None."""
        credentials = self.keys.get(key_id)
        if credentials is None and self.lookup is not None:
            credentials = self.lookup(key_id)
        return credentials

    def verify(self, authorization: bytes, request: SignedRequest) -> Credentials:
        """The credentials that signed `request` (whose Authorization header's form was checked before), or the
        error DynamoDB answers. (Every request: written for the common case, what it shares with the client's
        earlier requests found in one look-up.)"""
        cut = authorization.rfind(b"Signature=")
        signing = self._signings.get(authorization[:cut]) or self._parse(authorization, cut)
        credentials = self.keys.get(signing.key_id)
        if credentials is None and self.lookup is not None:
            credentials = self.lookup(signing.key_id)
        headers = request.headers
        token = headers.get(b"x-amz-security-token")
        if credentials is None or (token is None) != (credentials.token is None):
            # (a session token with a long-term key is no credential either, nor temporary keys without theirs)
            raise UnrecognizedClientException(UNKNOWN_KEY)
        if token is not None:
            self._check_session(credentials, token)
        stamp = headers.get(b"x-amz-date")
        dated = stamp is not None and signing.dated  # (the time is among the signed headers' values)
        stamp = _stamp_of(headers, authorization) if stamp is None else stamp.strip()
        try:
            alike: tuple[Any, ...] = (request.method, request.url, signing.values(headers))
        except KeyError:  # a signed header not sent (signed as an empty value)
            alike = (request.method, request.url, tuple(map(headers.get, signing.scope.names)))
        if not dated:  # (else a request timed by its Date header would be checked on an earlier one's time)
            alike += (stamp,)
        known = signing.last
        kept = known[1] if known is not None and known[0] == alike else signing.kept.get(alike)
        if kept is None or kept.secret != credentials.secret:
            shared = self._shared(credentials.secret, signing.scope, stamp, request)
        else:
            shared = kept
            now = int(clock.now())
            if not now - (request.expires or _SKEW_SECONDS) <= kept.epoch <= now + _SKEW_SECONDS:
                self._check_time(stamp, request.expires)  # (which raises)
        canonical = shared.head.copy()
        # (the body's hash as computed: a client's x-amz-content-sha256 that differs, UNSIGNED-PAYLOAD too, signs
        # another body; see UNSIGNED-PAYLOAD above)
        digest = _EMPTY_SHA256.copy()
        digest.update(request.body)
        canonical.update(digest.hexdigest().encode())
        inner = shared.inner.copy()
        inner.update(canonical.hexdigest().encode())
        outer = shared.outer.copy()
        outer.update(inner.digest())
        computed = outer.hexdigest().encode()
        given = authorization[cut + 10:]
        if not hmac.compare_digest(computed, given) and \
                not hmac.compare_digest(computed, given.split(b",", 1)[0].strip().lower()):
            raise InvalidSignatureException(MISMATCH)
        if shared is not kept:  # (kept once a request signed with it passed: no forger fills this)
            if len(signing.kept) > 256:
                signing.kept.clear()
            signing.kept[alike] = shared
        if known is None or known[1] is not shared:
            signing.last = (alike, shared)
        return credentials

    @staticmethod
    def _check_session(credentials: Credentials, token: bytes) -> None:
        """Temporary credentials: their own session token, and not past their expiry."""
        assert credentials.token is not None
        if not hmac.compare_digest(token.strip(), credentials.token.encode()):
            raise UnrecognizedClientException(UNKNOWN_KEY)
        if credentials.expires is not None and clock.now() >= credentials.expires:
            # best guess at the order: an expired token is refused before its signature is checked
            raise ExpiredTokenException()

    def _parse(self, authorization: bytes, cut: int) -> _Signing:
        credential = CREDENTIAL.search(authorization)
        signed = _SIGNED_HEADERS.search(authorization)
        assert credential is not None and signed is not None and cut > 0  # (its form was checked before)
        key_id, day, region, service = credential.groups()
        names = signed.group(1).lower()
        signing = _Signing(_Scope(key_id.decode("latin-1"), b"%s/%s/%s/aws4_request" % (day, region, service), day,
                                  region, service, tuple(names.split(b";")), names))
        if len(self._signings) > 4096:
            self._signings.clear()
        self._signings[authorization[:cut]] = signing
        return signing

    def _shared(self, secret: str, scope: _Scope, stamp: bytes, request: SignedRequest) -> _Kept:
        """What `request` shares with requests alike (see `_Signing`): the time of `stamp` (checked:
        InvalidSignatureException unless within 15 minutes of the server's clock), the canonical request's hashed
        head, and HMAC-SHA256 with the signing key of `secret` for `scope` over the string to sign up to the
        canonical request's hash, as its inner and outer SHA-256 states (RFC 2104); the signing key kept for the
        day."""
        epoch = self._check_time(stamp, request.expires)
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
        return _Kept(secret, epoch, _head(request, scope), inner, outer)

    def _check_time(self, stamp: bytes, expires: int | None = None) -> int:
        """The epoch seconds of `stamp`; InvalidSignatureException unless within 15 minutes of the server's clock
        (a presigned request's, `expires`: at most 15 minutes ahead and at most `expires` seconds behind)."""
        signed = self._stamps.get(stamp)
        if signed is None:
            signed = _epoch(stamp)
            if len(self._stamps) > 64:
                self._stamps.clear()
            self._stamps[stamp] = signed
        now = int(clock.now())
        if now - (expires or _SKEW_SECONDS) <= signed <= now + _SKEW_SECONDS:
            return signed
        text, current = stamp.decode(), datetime.fromtimestamp(now, UTC)
        if signed < now:
            # (best guess for a presigned request past its X-Amz-Expires: the header form's words, its seconds)
            window, said = (_SKEW, "15 min.") if expires is None else (timedelta(seconds=expires), f"{expires} sec.")
            raise InvalidSignatureException(
                f"Signature expired: {text} is now earlier than {(current - window).strftime(_AMZ_DATE)} "
                f"({current.strftime(_AMZ_DATE)} - {said})")
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
    body's SHA-256 (always: a value the client gives in x-amz-content-sha256 stands for the hash it computed, which
    must be the body's, and UNSIGNED-PAYLOAD is S3's, see above). (`Verifier.verify` builds the same text from parts
    it keeps.)"""
    url = request.url
    get = request.headers.get
    return b"%s\n%s\n%s\n%s\n%s" % (
        request.method, b"/\n" if url == b"/" else _canonical_path_and_query(url),
        header_lines(names, tuple(map(get, names))), b";".join(names), sha256_hex(request.body))


def _head(request: SignedRequest, scope: _Scope) -> Hash:
    """SHA-256 over `request`'s canonical request up to its payload hash: method, path and query, the signed headers'
    lines and names."""
    url = request.url
    head = _EMPTY_SHA256.copy()
    head.update(b"%s\n%s\n%s\n%s\n" % (request.method, b"/\n" if url == b"/" else _canonical_path_and_query(url),
                                        header_lines(scope.names, tuple(map(request.headers.get, scope.names))),
                                        scope.signed))
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
