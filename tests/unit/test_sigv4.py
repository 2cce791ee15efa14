"""The SigV4 verifier (identity/sigv4.py) against botocore's signer: what it keeps from one request for the next (the
canonical request's hashed head per method, path, signed headers and their values; the HMAC states per key, scope
and second) must never let a request through that differs from what was signed, however many like it came before."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime

import pytest
from botocore.auth import SIGV4_TIMESTAMP, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials

from openddb import clock
from openddb.errors import InvalidSignatureException, UnrecognizedClientException
from openddb.identity.sigv4 import Credentials, SignedRequest, Verifier, canonical_request

KEY, SECRET, OTHER = "AKIDUNITROOT", "unit-secret/with+symbols", "AKIDUNITOTHER"
WHEN = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _clock_at_when() -> None:  # type: ignore[misc]
    clock.set_offset(WHEN.timestamp() - clock._real())
    yield
    clock.set_offset(0)


def signed(target: str = "GetItem", body: bytes = b'{"TableName":"t"}', *, path: str = "/",
           headers: dict[str, str] | None = None, secret: str = SECRET, key: str = KEY,
           region: str = "eu-west-1") -> tuple[bytes, SignedRequest]:
    """A request botocore signs at WHEN: its Authorization header, and what the verifier is handed."""
    request = AWSRequest("POST", f"http://127.0.0.1:8000{path}", data=body, headers={
        "X-Amz-Target": f"DynamoDB_20120810.{target}", "Content-Type": "application/x-amz-json-1.0",
        **(headers or {})})
    signer = SigV4Auth(BotoCredentials(key, secret), "dynamodb", region)
    request.context["timestamp"] = WHEN.strftime(SIGV4_TIMESTAMP)
    signer._modify_request_before_signing(request)
    signature = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    signer._inject_signature_to_request(request, signature)
    sent = {name.lower().encode(): str(value).encode() for name, value in request.headers.items()}
    sent[b"host"] = b"127.0.0.1:8000"
    return sent.pop(b"authorization"), SignedRequest(b"POST", path.encode(), sent, body)


def verifier() -> Verifier:
    return Verifier({KEY: Credentials(KEY, SECRET, "000000000000", "arn:aws:iam::000000000000:root"),
                     OTHER: Credentials(OTHER, "other-secret", "111111111111", "arn:aws:iam::111111111111:root")})


def changed(request: SignedRequest, **members: object) -> SignedRequest:
    return request._replace(**members)  # type: ignore[arg-type]


def test_what_botocore_signs_is_verified_request_after_request() -> None:
    # (the same verifier each time: the second and later requests are checked from what it kept)
    check = verifier()
    for target, body in [("GetItem", b'{"a":1}'), ("GetItem", b'{"a":2}'), ("PutItem", b'{"a":1}'),
                         ("GetItem", b'{"a":1}')]:
        authorization, request = signed(target, body)
        assert check.verify(authorization, request).access_key_id == KEY


def test_a_request_changed_after_signing_is_refused_after_the_same_request_passed() -> None:
    check = verifier()
    authorization, request = signed("GetItem", b'{"a":1}')
    check.verify(authorization, request)
    headers = dict(request.headers)
    for tampered in (changed(request, body=b'{"a":2}'),
                     changed(request, headers={**headers, b"x-amz-target": b"DynamoDB_20120810.DeleteItem"}),
                     changed(request, headers={**headers, b"host": b"127.0.0.1:8001"}),
                     changed(request, url=b"/?x=1"), changed(request, method=b"PUT")):
        with pytest.raises(InvalidSignatureException):
            check.verify(authorization, tampered)
    check.verify(authorization, request)  # (and the request as signed still passes)


def test_the_signing_key_is_the_secrets_and_the_scopes() -> None:
    check = verifier()
    authorization, request = signed()
    check.verify(authorization, request)
    wrong_secret, same = signed(secret="not-the-secret")
    with pytest.raises(InvalidSignatureException):
        check.verify(wrong_secret, same)
    # another key's request, same second, same headers: its own secret
    other, request = signed(key=OTHER, secret="other-secret")
    assert check.verify(other, request).account == "111111111111"
    with pytest.raises(UnrecognizedClientException):
        check.verify(*signed(key="AKIDNOBODY"))
    # the region is part of the scope: one signed for another region verifies too (with its own key), and a
    # header naming the other region with this signature does not
    authorization, request = signed(region="us-west-2")
    check.verify(authorization, request)
    with pytest.raises(InvalidSignatureException):
        check.verify(authorization.replace(b"/us-west-2/", b"/eu-west-1/"), request)


def test_paths_queries_spaces_and_a_payload_hash_header_are_canonical_as_botocore_makes_them() -> None:
    check = verifier()
    payload = hashlib.sha256(b"{}").hexdigest()
    for authorization, request in (signed(path="/some%20path/x"), signed(path="/?b=2&a=1&c=%2F"),
                                   signed(headers={"X-Amz-Meta": "  two   spaces  "}),
                                   signed(body=b"{}", headers={"X-Amz-Content-SHA256": payload})):
        check.verify(authorization, request)


def test_a_payload_hash_header_is_checked_against_the_body() -> None:
    # (x-amz-content-sha256 is the hash the client computed: a body that differs from it is not the one signed,
    # before or after the same request passed)
    check = verifier()
    payload = hashlib.sha256(b'{"a":1}').hexdigest()
    authorization, request = signed(body=b'{"a":1}', headers={"X-Amz-Content-SHA256": payload})
    for _ in range(2):
        with pytest.raises(InvalidSignatureException):
            check.verify(authorization, changed(request, body=b'{"a":2}'))
        check.verify(authorization, request)
    lying, request = signed(body=b'{"a":2}', headers={"X-Amz-Content-SHA256": payload})
    with pytest.raises(InvalidSignatureException):  # (signed with a hash that is not its body's)
        check.verify(lying, request)


def test_unsigned_payload_is_s3s_and_signs_nothing_here() -> None:
    # (a signature over "UNSIGNED-PAYLOAD" in place of the body's hash, as S3 takes it: DynamoDB's canonical request
    # always ends with the body's hash, so it does not match, before or after a signed request of the same kind)
    check = verifier()
    body = b'{"a":3}'
    unsigned, request = signed(body=body, headers={"X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"})
    assert canonical_request(request, (b"host", b"x-amz-content-sha256", b"x-amz-date")).endswith(
        hashlib.sha256(body).hexdigest().encode())
    for _ in range(2):
        with pytest.raises(InvalidSignatureException):
            check.verify(unsigned, request)
        hashed, same = signed(body=body, headers={"X-Amz-Content-SHA256": hashlib.sha256(body).hexdigest()})
        check.verify(hashed, same)


def test_a_missing_signed_header_is_signed_empty_and_checked() -> None:
    check = verifier()
    authorization, request = signed()
    headers = dict(request.headers)
    del headers[b"content-type"]
    with pytest.raises(InvalidSignatureException):
        check.verify(authorization, changed(request, headers=headers))
    check.verify(authorization, request)
    with pytest.raises(InvalidSignatureException):
        check.verify(authorization, changed(request, headers=headers))


def test_the_canonical_request_is_the_one_signed() -> None:
    # (the verifier hashes it in two parts; canonical_request writes it whole: both must be what was signed)
    authorization, request = signed("PutItem", b'{"x":"y"}')
    names = tuple(authorization.split(b"SignedHeaders=")[1].split(b",")[0].split(b";"))
    canonical = canonical_request(request, names)
    scope = b"20260301/eu-west-1/dynamodb/aws4_request"
    to_sign = b"AWS4-HMAC-SHA256\n%s\n%s\n%s" % (request.headers[b"x-amz-date"], scope,
                                                 hashlib.sha256(canonical).hexdigest().encode())
    key = ("AWS4" + SECRET).encode()
    for part in (b"20260301", b"eu-west-1", b"dynamodb", b"aws4_request"):
        key = hmac.digest(key, part, "sha256")
    assert authorization.endswith(b"Signature=" + hmac.digest(key, to_sign, "sha256").hex().encode())


def test_only_verified_requests_leave_anything_kept() -> None:
    # (a caller who knows an access key id but not its secret must not fill the verifier's memory)
    check = verifier()
    for n in range(50):
        forged, request = signed(body=b'{"n":%d}' % n, headers={"X-Amz-Meta": "x" * n}, secret="guessed")
        with pytest.raises(InvalidSignatureException):
            check.verify(forged, request)
    assert not any(signing.kept for signing in check._signings.values())
    check.verify(*signed())
    assert sum(len(signing.kept) for signing in check._signings.values()) == 1


def test_only_a_verified_request_is_remembered_as_the_last_and_its_likes_are_still_checked_in_full() -> None:
    # (a request alike to the last one finds what it shares by comparing: that memory too is filled only once a
    # request passed, and a request found through it still has its body hashed and its signature checked)
    check = verifier()
    authorization, request = signed()
    forged, same = signed(secret="guessed")
    with pytest.raises(InvalidSignatureException):
        check.verify(forged, same)
    assert all(signing.last is None for signing in check._signings.values())
    check.verify(authorization, request)
    assert [signing.last is not None for signing in check._signings.values()] == [True]
    for refused in ((authorization, changed(request, body=b'{"TableName":"u"}')), (forged, same)):
        with pytest.raises(InvalidSignatureException):
            check.verify(*refused)
    assert check.verify(authorization, request).access_key_id == KEY


@pytest.mark.parametrize("seconds, error", [(0, None), (900.5, None), (-900, None), (901.2, "Signature expired"),
                                            (-900.5, "Signature not yet current")])
def test_the_skew_window_is_the_same_for_a_kept_request_and_a_new_one(seconds: float, error: str | None) -> None:
    # (at the window's edges: int(now) - 15 min <= X-Amz-Date <= int(now) + 15 min, however what it shares was kept)
    authorization, request = signed()
    kept = verifier()
    kept.verify(authorization, request)  # (what it shares kept, at WHEN)
    clock.set_offset(WHEN.timestamp() + seconds - clock._real())
    for check in (kept, verifier(), kept):
        if error is None:
            check.verify(authorization, request)
        else:
            with pytest.raises(InvalidSignatureException, match=error):
                check.verify(authorization, request)


def test_a_request_timed_by_its_date_header_is_kept_by_that_time() -> None:
    # (X-Amz-Date signed but not sent: the time is the Date header's, which nothing else in what is kept holds, so
    # a replay with a fresh Date must be checked as a new request would be, not passed on the first one's time)
    _, request = signed()
    headers = {name: value for name, value in request.headers.items() if name != b"x-amz-date"}

    def timed(at: datetime) -> tuple[bytes, SignedRequest]:
        dated = changed(request, headers={**headers, b"date": at.strftime("%a, %d %b %Y %H:%M:%S GMT").encode()})
        authorization, _ = signed()
        names = tuple(authorization.split(b"SignedHeaders=")[1].split(b",")[0].split(b";"))
        assert b"x-amz-date" in names and b"date" not in names
        scope = b"20260301/eu-west-1/dynamodb/aws4_request"
        to_sign = b"AWS4-HMAC-SHA256\n%s\n%s\n%s" % (WHEN.strftime(SIGV4_TIMESTAMP).encode(), scope,
                                                     hashlib.sha256(canonical_request(dated, names)).hexdigest()
                                                     .encode())
        key = ("AWS4" + SECRET).encode()
        for part in (b"20260301", b"eu-west-1", b"dynamodb", b"aws4_request"):
            key = hmac.digest(key, part, "sha256")
        head = authorization[:authorization.rfind(b"Signature=") + 10]
        return head + hmac.digest(key, to_sign, "sha256").hex().encode(), dated

    check = verifier()
    assert check.verify(*timed(WHEN)).access_key_id == KEY
    later = datetime.fromtimestamp(WHEN.timestamp() + 1200, UTC)
    clock.set_offset(later.timestamp() - clock._real())
    replayed = (timed(WHEN)[0], timed(later)[1])  # (the signature made at WHEN, a Date of now)
    for fresh in (verifier(), check):
        with pytest.raises(InvalidSignatureException):
            fresh.verify(*replayed)
