"""`serve --auth verify`: SigV4 signatures checked against the root credentials, with DynamoDB's errors for an
unknown key, a wrong secret, a changed request, and a clock out of the 15-minute window. Requests are signed by
botocore's own signer (SigV4Auth), through boto3 or sent raw where a test needs to change what was signed."""

from __future__ import annotations

import gzip
import http.client
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from hashlib import sha256

import boto3
import pytest
from botocore.auth import SIGV4_TIMESTAMP, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.conftest import ServerProcess, free_port, unique_name

KEY, SECRET = "AKIDOPENDDBROOT", "root-secret/with+symbols"
MISMATCH = ("The request signature we calculated does not match the signature you provided. Check your AWS Secret "
            "Access Key and signing method. Consult the service documentation for details.")


@pytest.fixture(scope="module")
def verifying() -> Iterator[ServerProcess]:
    server = ServerProcess(None, "--workers", "1", "--auth", "verify", "--root-credentials", f"{KEY}:{SECRET}")
    try:
        yield server
    finally:
        server.finish()


def client(server: ServerProcess, key: str = KEY, secret: str = SECRET, token: str | None = None):  # type: ignore[no-untyped-def]
    return boto3.client("dynamodb", endpoint_url=server.endpoint, region_name="eu-west-1", aws_access_key_id=key,
                        aws_secret_access_key=secret, aws_session_token=token,
                        config=Config(retries={"total_max_attempts": 1}))


def signed_post(server: ServerProcess, operation: str, body: bytes, *, when: datetime | None = None,
                headers: dict[str, str] | None = None, secret: str = SECRET, path: str = "/") -> AWSRequest:
    """A request signed by botocore's SigV4Auth (at `when`, as a client whose clock shows that time)."""
    request = AWSRequest("POST", f"http://127.0.0.1:{server.port}{path}", data=body, headers={
        "X-Amz-Target": f"DynamoDB_20120810.{operation}", "Content-Type": "application/x-amz-json-1.0",
        **(headers or {})})
    signer = SigV4Auth(Credentials(KEY, secret), "dynamodb", "eu-west-1")
    if when is None:
        signer.add_auth(request)
        return request
    request.context["timestamp"] = when.strftime(SIGV4_TIMESTAMP)
    signer._modify_request_before_signing(request)
    signature = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    signer._inject_signature_to_request(request, signature)
    return request


def send(server: ServerProcess, request: AWSRequest, body: bytes | None = None, path: str = "/") -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("POST", path, body=request.body if body is None else body, headers=dict(request.headers))
    response = connection.getresponse()
    answer = response.read()
    connection.close()
    return response.status, json.loads(answer) if answer else {}


def error_of(call) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(ClientError) as excinfo:
        call()
    return excinfo.value.response["Error"]["Code"], excinfo.value.response["Error"]["Message"]


def test_the_right_key_and_secret_work_through_boto3(verifying):
    ddb = client(verifying)
    table = unique_name("auth")
    ddb.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
    ddb.put_item(TableName=table, Item={"pk": {"S": "é ü ✓"}, "v": {"N": "1"}})
    assert ddb.get_item(TableName=table, Key={"pk": {"S": "é ü ✓"}})["Item"]["v"] == {"N": "1"}
    streams = boto3.client("dynamodbstreams", endpoint_url=verifying.endpoint, region_name="eu-west-1",
                           aws_access_key_id=KEY, aws_secret_access_key=SECRET)
    assert "Streams" in streams.list_streams()


def test_a_key_the_server_does_not_know_is_unrecognized(verifying):
    assert error_of(lambda: client(verifying, key="AKIDSOMEONEELSE").list_tables()) == (
        "UnrecognizedClientException", "The security token included in the request is invalid")


def test_a_session_token_with_a_long_term_key_is_unrecognized(verifying):
    code, _ = error_of(lambda: client(verifying, token="FwoGZXIvYXdzEJr").list_tables())
    assert code == "UnrecognizedClientException"


def test_the_wrong_secret_is_an_invalid_signature(verifying):
    assert error_of(lambda: client(verifying, secret="not-the-secret").list_tables()) == (
        "InvalidSignatureException", MISMATCH)


def test_a_body_changed_after_signing_is_an_invalid_signature(verifying):
    request = signed_post(verifying, "ListTables", b'{"Limit": 5}')
    assert send(verifying, request)[0] == 200
    status, answer = send(verifying, request, b'{"Limit": 6}')
    assert (status, answer["__type"].rsplit("#")[-1], answer["message"]) == (400, "InvalidSignatureException", MISMATCH)


def test_a_signed_header_changed_after_signing_is_an_invalid_signature(verifying):
    request = signed_post(verifying, "ListTables", b"{}")
    request.headers.replace_header("X-Amz-Target", "DynamoDB_20120810.DescribeLimits")
    status, answer = send(verifying, request)
    assert status == 400 and answer["message"] == MISMATCH


def test_a_signature_over_unsigned_payload_does_not_match(verifying):
    """UNSIGNED-PAYLOAD is S3's (identity/sigv4.py): signed over it in place of the body's hash, with the header sent
    and signed, a call is refused as a mismatch; the same call signed over its body's hash passes."""
    body = b'{"Limit": 4}'
    request = signed_post(verifying, "ListTables", body, headers={"X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"})
    assert "x-amz-content-sha256" in request.headers["Authorization"]  # (signed as a header too)
    status, answer = send(verifying, request)
    assert (status, answer["__type"].rsplit("#")[-1], answer["message"]) == (400, "InvalidSignatureException", MISMATCH)
    hashed = signed_post(verifying, "ListTables", body, headers={"X-Amz-Content-SHA256": sha256(body).hexdigest()})
    assert send(verifying, hashed)[0] == 200


def test_a_compressed_body_is_verified_as_it_was_sent(verifying):
    """A signature covers the body on the wire: for a gzip request, the compressed bytes."""
    body = gzip.compress(b'{"Limit": 3}')
    status, answer = send(verifying, signed_post(verifying, "ListTables", body, headers={"Content-Encoding": "gzip"}))
    assert status == 200 and "TableNames" in answer


def test_a_query_string_is_part_of_what_is_signed(verifying):
    path = "/?b=2&a=x%20y&c"
    assert send(verifying, signed_post(verifying, "ListTables", b"{}", path=path), path=path)[0] == 200
    status, answer = send(verifying, signed_post(verifying, "ListTables", b"{}", path=path), path="/?b=3&a=x%20y&c")
    assert status == 400 and answer["message"] == MISMATCH


def test_a_signature_older_than_15_minutes_has_expired(verifying):
    then = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=16)
    status, answer = send(verifying, signed_post(verifying, "ListTables", b"{}", when=then))
    assert status == 400 and answer["__type"].endswith("#InvalidSignatureException")
    match = re.fullmatch(r"Signature expired: (\d{8}T\d{6}Z) is now earlier than (\d{8}T\d{6}Z) "
                         r"\((\d{8}T\d{6}Z) - 15 min\.\)", answer["message"])
    assert match is not None, answer["message"]
    assert match.group(1) == then.strftime(SIGV4_TIMESTAMP)
    limit, now = (datetime.strptime(value, SIGV4_TIMESTAMP) for value in match.group(2, 3))
    assert now - limit == timedelta(minutes=15)


def test_a_signature_more_than_15_minutes_ahead_is_not_yet_current(verifying):
    ahead = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=20)
    status, answer = send(verifying, signed_post(verifying, "ListTables", b"{}", when=ahead))
    assert status == 400
    assert re.fullmatch(r"Signature not yet current: \d{8}T\d{6}Z is still later than \d{8}T\d{6}Z "
                        r"\(\d{8}T\d{6}Z \+ 15 min\.\)", answer["message"]), answer["message"]


def test_a_signature_a_few_minutes_off_still_works(verifying):
    for minutes in (-10, 10):
        when = datetime.now(UTC) + timedelta(minutes=minutes)
        assert send(verifying, signed_post(verifying, "ListTables", b"{}", when=when))[0] == 200


def test_without_verification_any_credentials_work():
    server = ServerProcess(None, "--workers", "1")
    try:
        assert "TableNames" in client(server, key="anything", secret="at all").list_tables()
    finally:
        server.finish()


def test_verify_without_root_credentials_is_one_line_and_exit_code_2():
    environment = {name: value for name, value in os.environ.items() if not name.startswith("OPENDDB_ROOT_")}
    done = subprocess.run([sys.executable, "-m", "openddb", "serve", "--in-memory", "--port", str(free_port()),
                           "--auth", "verify"], capture_output=True, text=True, timeout=30, env=environment)
    assert done.returncode == 2
    assert done.stderr.strip() == ("openddb: --auth verify needs --root-credentials ACCESS_KEY:SECRET (or "
                                   "OPENDDB_ROOT_ACCESS_KEY_ID and OPENDDB_ROOT_SECRET_ACCESS_KEY)")


def test_cloudwatch_calls_are_verified_as_dynamodbs_are(verifying):
    """CloudWatch on the same port checks its calls' signatures (service `monitoring`) with the same verifier:
    boto3's cloudwatch client with the right secret is answered; a wrong secret, an unknown key, a scope of another
    service and no signature are refused with CloudWatch's (Query-protocol) codes."""
    def cloudwatch(key: str = KEY, secret: str = SECRET):  # type: ignore[no-untyped-def]
        return boto3.client("cloudwatch", endpoint_url=verifying.endpoint, region_name="eu-west-1",
                            aws_access_key_id=key, aws_secret_access_key=secret,
                            config=Config(retries={"total_max_attempts": 1}))

    assert isinstance(cloudwatch().list_metrics(Namespace="AWS/DynamoDB")["Metrics"], list)
    assert error_of(lambda: cloudwatch(secret="forged").list_metrics()) == ("SignatureDoesNotMatch", MISMATCH)
    assert error_of(lambda: cloudwatch(key="AKIDUNKNOWN").list_metrics()) == (
        "InvalidClientTokenId", "The security token included in the request is invalid.")
    target = {"X-Amz-Target": "GraniteServiceVersion20100801.ListMetrics"}
    as_dynamodb = signed_post(verifying, "ListMetrics", b"{}", headers=target)  # (signed for `dynamodb`)
    status, answer = send(verifying, as_dynamodb)
    assert (status, answer["__type"].rsplit("#", 1)[1], answer["message"]) == (
        403, "SignatureDoesNotMatch", "Credential should be scoped to correct service: 'monitoring'. ")
    status, answer = send(verifying, AWSRequest("POST", verifying.endpoint, data=b"{}", headers={
        **target, "Content-Type": "application/x-amz-json-1.0"}))
    assert (status, answer["__type"].rsplit("#", 1)[1]) == (403, "MissingAuthenticationToken")


def test_cloudwatch_cbor_calls_are_verified(verifying):
    """The RPC v2 CBOR protocol's path too: a call signed for `monitoring` is answered, the same call with its
    signature forged is refused with the code header botocore reads (SignatureDoesNotMatch)."""
    path = "/service/GraniteServiceVersion20100801/operation/ListMetrics"
    headers = {"Content-Type": "application/cbor", "Accept": "application/cbor", "smithy-protocol": "rpc-v2-cbor"}
    body = b"\xa0"  # (an empty CBOR map)
    outcomes = []
    for secret in (SECRET, "forged"):
        request = AWSRequest("POST", f"http://127.0.0.1:{verifying.port}{path}", data=body, headers=headers)
        SigV4Auth(Credentials(KEY, secret), "monitoring", "eu-west-1").add_auth(request)
        connection = http.client.HTTPConnection("127.0.0.1", verifying.port, timeout=10)
        connection.request("POST", path, body=body, headers=dict(request.headers))
        response = connection.getresponse()
        response.read()
        outcomes.append((response.status, response.getheader("x-amzn-query-error")))
        connection.close()
    assert outcomes == [(200, None), (403, "SignatureDoesNotMatch;Sender")]
