"""HTTPS (`serve --tls-cert/--tls-key`) with a pair from `openddb cert`: boto3 verifies the server against the
generated authority, a client that does not trust it is refused, plain HTTP on the TLS port gets nothing, and a
bad pair is one start-up line."""

from __future__ import annotations

import os
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, SSLError

from tests.conftest import ServerProcess, free_port, unique_name


def openddb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openddb", *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def pair() -> dict[str, str]:
    folder = os.path.join(tempfile.mkdtemp(), "tls")
    made = openddb("cert", "--out", folder, "--host", "openddb.test")
    assert made.returncode == 0, made.stderr
    return {name: os.path.join(folder, f"openddb-{name}.pem") for name in ("ca", "cert", "key")}


@pytest.fixture(scope="module")
def https(pair) -> Iterator[ServerProcess]:
    server = ServerProcess(None, "--workers", "1", "--tls-cert", pair["cert"], "--tls-key", pair["key"])
    try:
        yield server
    finally:
        server.finish()


def client(server: ServerProcess, verify: str | bool):  # type: ignore[no-untyped-def]
    return boto3.client("dynamodb", endpoint_url=f"https://localhost:{server.port}", region_name="us-east-1",
                        aws_access_key_id="AKIDTLS", aws_secret_access_key="secret", verify=verify,
                        config=Config(retries={"total_max_attempts": 1}))


def test_cert_writes_an_authority_a_chain_and_an_owner_only_key(pair):
    assert stat.S_IMODE(os.stat(pair["key"]).st_mode) == 0o600
    with open(pair["cert"]) as chain:
        assert chain.read().count("BEGIN CERTIFICATE") == 2  # the server's, then the authority's
    context = ssl.create_default_context(cafile=pair["ca"])
    assert context.cert_store_stats()["x509_ca"] == 1


def test_boto3_works_over_https_verifying_the_generated_authority(https, pair):
    ddb = client(https, pair["ca"])
    table = unique_name("tls")
    ddb.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
    ddb.put_item(TableName=table, Item={"pk": {"S": "a"}, "v": {"S": "x" * 10_000}})
    assert ddb.get_item(TableName=table, Key={"pk": {"S": "a"}})["Item"]["v"]["S"] == "x" * 10_000
    for _ in range(3):  # keep-alive over TLS (DescribeTable: ListTables pages a store other tests share)
        assert ddb.describe_table(TableName=table)["Table"]["TableStatus"] == "ACTIVE"


def test_the_certificate_names_the_hosts_asked_for(https, pair):
    context = ssl.create_default_context(cafile=pair["ca"])
    for name in ("localhost", "openddb.test"):
        with socket.create_connection(("127.0.0.1", https.port), timeout=10) as raw, \
                context.wrap_socket(raw, server_hostname=name) as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")
    with socket.create_connection(("127.0.0.1", https.port), timeout=10) as raw, \
            pytest.raises(ssl.SSLCertVerificationError), context.wrap_socket(raw, server_hostname="elsewhere.test"):
        pass


def test_a_client_that_does_not_trust_the_authority_is_refused(https):
    with pytest.raises(SSLError):
        client(https, True).list_tables()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tls_below_1_2_is_refused_by_the_server(https):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        context.set_ciphers("DEFAULT:@SECLEVEL=0")  # (so that this client offers TLS 1.1 at all)
        context.maximum_version = ssl.TLSVersion.TLSv1_1
        context.minimum_version = ssl.TLSVersion.TLSv1
    except (ValueError, ssl.SSLError):
        pytest.skip("this OpenSSL cannot offer TLS 1.1")
    with socket.create_connection(("127.0.0.1", https.port), timeout=10) as raw, \
            pytest.raises(ssl.SSLError) as refused, context.wrap_socket(raw, server_hostname="localhost"):
        pass
    if "NO_PROTOCOLS_AVAILABLE" in str(refused.value):
        pytest.skip("this OpenSSL cannot offer TLS 1.1")
    # (the server answers a version alert or just closes: either way no session)
    assert isinstance(refused.value, ssl.SSLEOFError) or "PROTOCOL_VERSION" in str(refused.value).upper()
    context.maximum_version = ssl.TLSVersion.TLSv1_2  # the same client, allowed TLS 1.2, is served
    with socket.create_connection(("127.0.0.1", https.port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        assert tls.version() == "TLSv1.2"


def test_plain_http_on_the_tls_port_gets_no_answer(https):
    with socket.create_connection(("127.0.0.1", https.port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        answer = b""
        try:
            while piece := sock.recv(4096):
                answer += piece
        except ConnectionResetError:
            pass
        assert b"healthy" not in answer and not answer.startswith(b"HTTP/1.1 200")


def test_the_health_command_checks_https_with_the_authority(https, pair):
    url = f"https://localhost:{https.port}/"
    assert openddb("health", "--endpoint", url, "--ca", pair["ca"]).returncode == 0
    assert openddb("health", "--endpoint", url).returncode == 1  # (the system's authorities do not know it)


@pytest.mark.parametrize("case", ["only-cert", "missing", "swapped"])
def test_a_pair_that_cannot_be_used_is_one_line_and_exit_code_2(pair, case):
    options = {"only-cert": ["--tls-cert", pair["cert"]],
               "missing": ["--tls-cert", pair["cert"] + ".none", "--tls-key", pair["key"]],
               "swapped": ["--tls-cert", pair["key"], "--tls-key", pair["cert"]]}[case]
    done = openddb("serve", "--in-memory", "--port", str(free_port()), *options)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("openddb: --tls-"), lines


def test_secure_transport_is_true_over_https(pair):
    """aws:SecureTransport is "true" for a call that came over TLS (and "false" over HTTP: test_fine_grained_access):
    a policy allowing only secure calls lets the user in, one allowing only plain ones keeps it out, for DynamoDB
    and IAM alike."""
    from tests.api.identity_helpers import ROOT_KEY, ROOT_SECRET, user_with_key

    server = ServerProcess(None, "--workers", "1", "--tls-cert", pair["cert"], "--tls-key", pair["key"], "--auth",
                           "verify", "--root-credentials", f"{ROOT_KEY}:{ROOT_SECRET}")
    try:
        def signed(service: str, key: str, secret: str):  # type: ignore[no-untyped-def]
            return boto3.client(service, endpoint_url=f"https://localhost:{server.port}", region_name="us-east-1",
                                aws_access_key_id=key, aws_secret_access_key=secret, verify=pair["ca"],
                                config=Config(retries={"total_max_attempts": 1}))

        def only(secure: str) -> dict[str, object]:
            return {"Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Action": ["dynamodb:ListTables", "iam:GetUser"], "Resource": "*",
                "Condition": {"Bool": {"aws:SecureTransport": secure}}}]}

        iam = signed("iam", ROOT_KEY, ROOT_SECRET)
        name, key = user_with_key(iam, only("true"))
        secure = (key["AccessKeyId"], key["SecretAccessKey"])
        assert "TableNames" in signed("dynamodb", *secure).list_tables()
        assert signed("iam", *secure).get_user()["User"]["UserName"] == name
        _, key = user_with_key(iam, only("false"))
        plain = signed("dynamodb", key["AccessKeyId"], key["SecretAccessKey"])
        with pytest.raises(ClientError) as refused:
            plain.list_tables()
        assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
        with pytest.raises(ClientError) as refused:
            signed("iam", key["AccessKeyId"], key["SecretAccessKey"]).get_user()
        assert refused.value.response["Error"]["Code"] == "AccessDenied"
    finally:
        server.finish()


def test_unsigned_payload_is_refused_over_https_too(pair):
    """botocore signs over "UNSIGNED-PAYLOAD" (and sends it as x-amz-content-sha256) when payload signing is turned
    off, which it does over HTTPS only: DynamoDB still checks the body's hash (identity/sigv4.py), so the call is a
    signature mismatch; the same client signing its payloads is answered."""
    from tests.api.identity_helpers import ROOT_KEY, ROOT_SECRET

    server = ServerProcess(None, "--workers", "1", "--tls-cert", pair["cert"], "--tls-key", pair["key"], "--auth",
                           "verify", "--root-credentials", f"{ROOT_KEY}:{ROOT_SECRET}")
    try:
        ddb = boto3.client("dynamodb", endpoint_url=f"https://localhost:{server.port}", region_name="us-east-1",
                           aws_access_key_id=ROOT_KEY, aws_secret_access_key=ROOT_SECRET, verify=pair["ca"],
                           config=Config(retries={"total_max_attempts": 1}))
        assert "TableNames" in ddb.list_tables()
        sent: list[bytes] = []

        def unsigned(request, **_):  # type: ignore[no-untyped-def]
            request.context["payload_signing_enabled"] = False  # (as for an operation modelled v4-unsigned-body)

        def seen(request, **_):  # type: ignore[no-untyped-def]
            sent.append(request.headers["X-Amz-Content-SHA256"])  # (as sent, signed)

        ddb.meta.events.register("before-sign.dynamodb.ListTables", unsigned)
        ddb.meta.events.register("before-send.dynamodb.ListTables", seen)
        with pytest.raises(ClientError) as refused:
            ddb.list_tables()
        assert sent == [b"UNSIGNED-PAYLOAD"]
        assert refused.value.response["Error"]["Code"] == "InvalidSignatureException"
        assert refused.value.response["Error"]["Message"].startswith("The request signature we calculated does not")
    finally:
        server.finish()
