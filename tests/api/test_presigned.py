"""SigV4 in the query string (a presigned request: X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date, X-Amz-Expires,
X-Amz-SignedHeaders, X-Amz-Signature): verified under `--auth verify` as the header form is, the signature holding
for X-Amz-Expires seconds; read for its scope with `--auth off`. Signed by botocore's own SigV4QueryAuth, the JSON
body kept as the body (botocore would move a form body into the query; DynamoDB's is JSON)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.auth import SIGV4_TIMESTAMP, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.api.test_auth_verify import KEY, MISMATCH, SECRET, client
from tests.conftest import ServerProcess, unique_name


@pytest.fixture(scope="module")
def verifying() -> Iterator[ServerProcess]:
    server = ServerProcess(None, "--auth", "verify", "--root-credentials", f"{KEY}:{SECRET}")
    try:
        yield server
    finally:
        server.finish()


class _JsonQueryAuth(SigV4QueryAuth):
    """botocore's query signer, the JSON body left where it is (and signed by its SHA-256, as a header's is)."""

    def _modify_request_before_signing(self, request: AWSRequest) -> None:
        body, request.data = request.data, b""
        super()._modify_request_before_signing(request)
        request.data = body


def presigned(server: ServerProcess, operation: str, payload: dict[str, Any], *, expires: int = 60,
              when: datetime | None = None, secret: str = SECRET,
              region: str = "eu-west-1") -> tuple[str, bytes, dict[str, str]]:
    """The path and query, body and headers of `operation` presigned (at `when`), valid for `expires` seconds."""
    body = json.dumps(payload).encode()
    request = AWSRequest("POST", f"http://127.0.0.1:{server.port}/", data=body, headers={
        "X-Amz-Target": f"DynamoDB_20120810.{operation}", "Content-Type": "application/x-amz-json-1.0"})
    signer = _JsonQueryAuth(Credentials(KEY, secret), "dynamodb", region, expires=expires)
    request.context["timestamp"] = (when or datetime.now(UTC)).strftime(SIGV4_TIMESTAMP)
    signer._modify_request_before_signing(request)
    signature = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    signer._inject_signature_to_request(request, signature)
    parts = urlsplit(request.url)
    assert "Authorization" not in request.headers
    return f"{parts.path}?{parts.query}", body, dict(request.headers)


def post(server: ServerProcess, target: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("POST", target, body=body, headers=headers)
    response = connection.getresponse()
    answer = response.read()
    connection.close()
    return response.status, json.loads(answer) if answer else {}


def refused(status_and_answer: tuple[int, dict[str, Any]]) -> tuple[int, str, str]:
    status, answer = status_and_answer
    return status, answer.get("__type", "").rsplit("#", 1)[-1], answer.get("message", answer.get("Message", ""))


def test_a_presigned_request_is_verified_and_answered(verifying):
    name = unique_name("pre")
    client(verifying).create_table(TableName=name, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                                   KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                                   BillingMode="PAY_PER_REQUEST")
    item = {"pk": {"S": "a"}, "v": {"N": "1"}}
    status, answer = post(verifying, *presigned(verifying, "PutItem", {"TableName": name, "Item": item}))
    assert (status, answer) == (200, {})
    status, answer = post(verifying, *presigned(verifying, "GetItem", {"TableName": name, "Key": {"pk": {"S": "a"}}}))
    assert (status, answer) == (200, {"Item": item})


def test_what_a_presigned_request_signed_counts(verifying):
    """The body, a signed header and the query's own parameters are signed; the wrong secret is refused."""
    target, body, headers = presigned(verifying, "ListTables", {})
    assert refused(post(verifying, target, b'{"Limit": 1}', headers)) == (400, "InvalidSignatureException", MISMATCH)
    changed = {**headers, "X-Amz-Target": "DynamoDB_20120810.DescribeLimits"}
    assert refused(post(verifying, target, body, changed)) == (400, "InvalidSignatureException", MISMATCH)
    longer = target.replace("X-Amz-Expires=60", "X-Amz-Expires=600")
    assert longer != target
    assert refused(post(verifying, longer, body, headers)) == (400, "InvalidSignatureException", MISMATCH)
    assert refused(post(verifying, *presigned(verifying, "ListTables", {}, secret="not-the-secret"))) == (
        400, "InvalidSignatureException", MISMATCH)
    assert post(verifying, target, body, headers)[0] == 200


def test_a_presigned_request_holds_for_its_expires_seconds(verifying):
    """Signed 20 minutes ago: past the header form's 15 minutes, within an X-Amz-Expires of an hour; expired with
    one of 10 minutes."""
    before = datetime.now(UTC) - timedelta(minutes=20)
    assert post(verifying, *presigned(verifying, "ListTables", {}, expires=3600, when=before))[0] == 200
    status, kind, message = refused(post(verifying, *presigned(verifying, "ListTables", {}, expires=600,
                                                                when=before)))
    assert (status, kind) == (400, "InvalidSignatureException")
    assert message.startswith(f"Signature expired: {before.strftime(SIGV4_TIMESTAMP)} is now earlier than ")
    assert message.endswith(" - 600 sec.)")
    ahead = datetime.now(UTC) + timedelta(minutes=20)
    status, kind, message = refused(post(verifying, *presigned(verifying, "ListTables", {}, when=ahead)))
    assert (kind, message.startswith("Signature not yet current: ")) == ("InvalidSignatureException", True)


def test_a_presigned_request_without_its_signature_is_incomplete(verifying):
    target, body, headers = presigned(verifying, "ListTables", {})
    unsigned = "&".join(part for part in target.split("&") if not part.startswith("X-Amz-Signature="))
    status, kind, message = refused(post(verifying, unsigned, body, headers))
    assert (status, kind) == (400, "IncompleteSignatureException")
    assert "requires 'Signature' parameter" in message


def test_without_verification_a_presigned_request_is_read_for_its_region():
    """--auth off: the query's credential scope chooses the region as a header's does (under account-region
    namespaces, its table is the region's)."""
    server = ServerProcess(None, "--namespaces", "account-region")
    try:
        name = unique_name("pre")
        client(server).create_table(TableName=name,
                                    AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                                    KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                                    BillingMode="PAY_PER_REQUEST")
        status, answer = post(server, *presigned(server, "ListTables", {}))
        assert status == 200 and name in answer["TableNames"]
        status, answer = post(server, *presigned(server, "ListTables", {}, region="us-east-1"))
        assert status == 200 and name not in answer["TableNames"]
    finally:
        server.finish()
