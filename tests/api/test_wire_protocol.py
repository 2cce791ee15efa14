"""The wire protocol beyond framing: compressed requests and responses, CORS, HTTP limits, the health check and
DescribeEndpoints, through raw HTTP and boto3."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import zlib
from collections.abc import Iterator

import boto3
import botocore.session
import pytest
from botocore.config import Config

from tests.conftest import ServerProcess, create_table, make_client, unique_name

AUTH = ("AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=00")
EXPOSED = "x-amzn-RequestId,x-amzn-ErrorType,x-amzn-ErrorMessage,Date"


def call(port: int, body: bytes, target: str = "ListTables", headers: dict[str, str] | None = None,
         method: str = "POST", path: str = "/") -> tuple[http.client.HTTPResponse, bytes]:
    """One request over a fresh connection; the body as received, undecoded."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    sent = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"DynamoDB_20120810.{target}",
            "Authorization": AUTH}
    sent.update(headers or {})
    connection.request(method, path, body=body, headers=sent)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response, data


def put_body(table: str, key: str, size: int = 10) -> bytes:
    return json.dumps({"TableName": table, "Item": {"pk": {"S": key}, "v": {"S": "x" * size}}}).encode()


@pytest.fixture(scope="module")
def table(ddb) -> str:  # type: ignore[no-untyped-def]
    return create_table(ddb, unique_name("wire"), range_type=None)


# --- compressed requests ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("coding", ["gzip", "x-gzip", "deflate", "raw-deflate", "gzip-members", "identity, gzip"])
def test_compressed_request_is_decoded_first(server, ddb, table, coding):
    """A body compressed with gzip or deflate (DynamoDB reads both: scylladb PRs 27080, 27917), one gzip member or
    several concatenated, is decoded before anything else: the item is written (it was a SerializationException)."""
    key = f"c-{coding}"
    plain = put_body(table, key, 3000)
    if coding in ("gzip", "x-gzip", "identity, gzip"):
        body = gzip.compress(plain)
    elif coding == "deflate":
        body = zlib.compress(plain)
    elif coding == "raw-deflate":
        squeezer = zlib.compressobj(6, zlib.DEFLATED, -15)
        body = squeezer.compress(plain) + squeezer.flush()
    else:  # three members, each a piece of the JSON
        body = b"".join(gzip.compress(plain[i:i + 1000]) for i in range(0, len(plain), 1000))
    encoding = {"raw-deflate": "deflate", "gzip-members": "gzip"}.get(coding, coding)
    response, data = call(server.port, body, "PutItem", {"Content-Encoding": encoding})
    assert (response.status, json.loads(data)) == (200, {})
    item = ddb.get_item(TableName=table, Key={"pk": {"S": key}}, ConsistentRead=True)["Item"]
    assert item["v"]["S"] == "x" * 3000


@pytest.mark.parametrize(("encoding", "body"), [
    ("gzip", b"this is not gzip"),
    ("gzip", gzip.compress(b'{"TableName": "t"}', mtime=0)[:-6]),  # cut short: no CRC and length
    ("deflate", b"\xff\xfe not deflate"),
    ("br", b"{}"),  # a coding this server does not read
    ("zstd", b"{}"),
])
def test_body_not_valid_for_its_coding(server, encoding, body):
    """A body its declared coding cannot decode, or in a coding not read here, is refused like a body that is not
    JSON (a best guess at DynamoDB's answer), after the operation and signature checks."""
    response, data = call(server.port, body, headers={"Content-Encoding": encoding})
    assert response.status == 400
    assert json.loads(data) == {"__type": "com.amazon.coral.service#SerializationException"}
    response, data = call(server.port, body, "Frobnicate", {"Content-Encoding": encoding})
    assert json.loads(data)["__type"] == "com.amazon.coral.service#UnknownOperationException"


def test_empty_compressed_body_is_an_empty_body(server):
    """An empty body declared gzip has nothing to decode: it is read as any empty body (best guess)."""
    response, data = call(server.port, b"", headers={"Content-Encoding": "gzip"})
    assert response.status == 200 and "TableNames" in json.loads(data)


def test_size_limit_applies_to_the_decoded_body(server, table):
    """16 MB is the limit of the decoded request: a small gzip body that decodes past it (a "bomb") is refused
    with DynamoDB's 413, and the server stops decoding at the limit (it goes on serving)."""
    plain = put_body(table, "bomb")[:-1] + b" " * (17 * 1024 * 1024) + b"}"
    body = gzip.compress(plain, 9)
    assert len(body) < 100_000
    response, data = call(server.port, body, "PutItem", {"Content-Encoding": "gzip"})
    assert response.status == 413
    assert json.loads(data) == {"__type": "com.amazon.coral.service#RequestEntityTooLargeException",
                                "message": "Request payload size exceeds the limit"}
    assert call(server.port, b"{}")[0].status == 200


def _compressing_client(endpoint: str) -> object:
    """A boto3 client that gzips its request bodies as botocore's own request compression does (it compresses
    before signing and says so in Content-Encoding); botocore does it by itself only for operations its model marks
    `requestcompression`, and no DynamoDB operation is marked."""
    client = make_client(endpoint)

    def compress(params, **_):  # type: ignore[no-untyped-def]
        params["body"] = gzip.compress(params["body"] if isinstance(params["body"], bytes)
                                       else params["body"].encode())
        params["headers"]["Content-Encoding"] = "gzip"

    client.meta.events.register("before-call.dynamodb", compress)  # type: ignore[attr-defined]
    return client


def test_boto3_compressed_requests(server, ddb, table):
    """boto3 with request_min_compression_size_bytes set sends DynamoDB requests uncompressed (no operation of
    the model allows compression); a client that compresses them all the same is served in full."""
    model = botocore.session.get_session().get_service_model("dynamodb")
    assert not [name for name in model.operation_names if model.operation_model(name).request_compression]
    configured = boto3.client("dynamodb", endpoint_url=server.endpoint, region_name="us-east-1",
                              aws_access_key_id="test", aws_secret_access_key="test",
                              config=Config(request_min_compression_size_bytes=1, disable_request_compression=False))
    configured.put_item(TableName=table, Item={"pk": {"S": "cfg"}, "v": {"S": "y" * 5000}})
    assert configured.get_item(TableName=table, Key={"pk": {"S": "cfg"}})["Item"]["v"]["S"] == "y" * 5000
    squeezing = _compressing_client(server.endpoint)
    squeezing.put_item(TableName=table, Item={"pk": {"S": "gz"}, "v": {"S": "z" * 5000}})  # type: ignore[attr-defined]
    squeezing.batch_write_item(RequestItems={table: [  # type: ignore[attr-defined]
        {"PutRequest": {"Item": {"pk": {"S": f"gz{i}"}}}} for i in range(5)]})
    assert ddb.get_item(TableName=table, Key={"pk": {"S": "gz"}}, ConsistentRead=True)["Item"]["v"]["S"] == "z" * 5000
    assert "Item" in squeezing.get_item(TableName=table, Key={"pk": {"S": "gz4"}})  # type: ignore[attr-defined]


# --- compressed responses --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def big_table(ddb) -> str:  # type: ignore[no-untyped-def]
    """A table whose Scan answers with about 20 KB of JSON, well above DynamoDB's 4 KB threshold."""
    name = create_table(ddb, unique_name("wire-big"), range_type=None)
    for i in range(10):
        ddb.put_item(TableName=name, Item={"pk": {"S": f"k{i}"}, "v": {"S": "abc" * 700}})
    return name


def scan(port: int, table: str, accept: list[str] | None) -> tuple[http.client.HTTPResponse, bytes]:
    """A Scan with the Accept-Encoding headers given (several headers if several), the body as received."""
    request = json.dumps({"TableName": table, "ConsistentRead": True}).encode()
    head = ["POST / HTTP/1.1", "Host: localhost", "Content-Type: application/x-amz-json-1.0",
            "X-Amz-Target: DynamoDB_20120810.Scan", f"Authorization: {AUTH}", f"Content-Length: {len(request)}"]
    head += [f"Accept-Encoding: {value}" for value in accept or []]
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall("\r\n".join(head).encode() + b"\r\n\r\n" + request)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response, response.read()


@pytest.mark.parametrize(("accept", "coding"), [
    (["gzip"], "gzip"),
    (["deflate"], "deflate"),
    (["gzip, deflate"], "gzip"),
    (["deflate, gzip"], "gzip"),  # equal weights: gzip first
    (["deflate;q=1.0, gzip;q=0.5"], "deflate"),
    (["gzip;q=0, deflate;q=0.1"], "deflate"),
    (["deflate", "gzip"], "gzip"),  # two headers are one list
    (["*"], "gzip"),
    (["br, *;q=0.2, gzip;q=0"], "deflate"),
    (["identity"], None),
    (["gzip;q=0"], None),
    (["br"], None),
    (None, None),
])
def test_large_response_compressed_in_an_accepted_coding(server, big_table, accept, coding):
    """Above 4 KB, a response is compressed in the accepted coding of highest q-value (gzip first on a tie) and
    says so; x-amz-crc32 is then the CRC32 of the compressed bytes, as DynamoDB computes it."""
    response, data = scan(server.port, big_table, accept)
    assert response.status == 200
    assert response.getheader("Content-Encoding") == coding
    assert int(response.getheader("x-amz-crc32")) == zlib.crc32(data)
    plain = {"gzip": gzip.decompress, "deflate": zlib.decompress, None: bytes}[coding](data)
    assert json.loads(plain)["Count"] == 10
    if coding is not None:
        assert len(data) < len(plain) / 4


def test_small_responses_and_errors_stay_uncompressed(server, table):
    """Below the threshold, and for errors, the body is sent as it is, without Content-Encoding."""
    response, data = call(server.port, b"{}", headers={"Accept-Encoding": "gzip"})
    assert response.getheader("Content-Encoding") is None and "TableNames" in json.loads(data)
    long_name = json.dumps({"TableName": "t" * 6000}).encode()
    response, data = call(server.port, long_name, "DescribeTable", {"Accept-Encoding": "gzip"})
    assert response.status == 400 and response.getheader("Content-Encoding") is None
    assert int(response.getheader("x-amz-crc32")) == zlib.crc32(data)
    assert json.loads(data)["__type"].endswith("ValidationException")


def test_boto3_reads_compressed_responses(server, big_table):
    """boto3 asks for no compression (Accept-Encoding: identity) and gets none; a boto3 client that asks for gzip
    and decodes the body itself passes botocore's CRC32 check, made on the bytes as received."""
    plain = make_client(server.endpoint)
    assert plain.scan(TableName=big_table)["Count"] == 10  # type: ignore[attr-defined]
    client = boto3.client("dynamodb", endpoint_url=server.endpoint, region_name="us-east-1",
                          aws_access_key_id="test", aws_secret_access_key="test",
                          config=Config(retries={"max_attempts": 1}))
    seen: list[str | None] = []

    def ask(request, **_):  # type: ignore[no-untyped-def]
        request.headers["Accept-Encoding"] = "gzip"

    def decode(response_dict, **_):  # type: ignore[no-untyped-def]
        seen.append(response_dict["headers"].get("content-encoding"))
        if seen[-1] == "gzip":
            response_dict["body"] = gzip.decompress(response_dict["body"])

    client.meta.events.register("before-send.dynamodb", ask)
    client.meta.events.register("before-parse.dynamodb", decode)
    assert client.scan(TableName=big_table)["Count"] == 10
    assert seen == ["gzip"]  # (a wrong CRC32 would have raised botocore's ChecksumError: no retries here)


# --- CORS ------------------------------------------------------------------------------------------------------

def _cors(response: http.client.HTTPResponse) -> dict[str, str]:
    return {name: value for name, value in response.getheaders() if name.lower().startswith("access-control-")
            or name.lower() == "vary"}


def test_cors_headers_by_default_for_any_origin(server):
    """With an Origin header, every answer (success, error, health check) allows any origin and exposes the
    headers DynamoDB exposes; without one, no CORS header."""
    want = {"Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": EXPOSED}
    origin = {"Origin": "https://app.example"}
    assert _cors(call(server.port, b"{}", headers=origin)[0]) == want
    assert _cors(call(server.port, b"{", headers=origin)[0]) == want  # an error: a page can read it too
    assert _cors(call(server.port, b"", method="GET", headers=origin)[0]) == want
    assert _cors(call(server.port, b"{}")[0]) == {}


def test_cors_preflight(server):
    """A pre-flight OPTIONS is answered 200, allowing the method and headers it asked for, for two days (DynamoDB's
    172800 s, recorded from its us-east-1 endpoint)."""
    response, data = call(server.port, b"", method="OPTIONS", headers={
        "Origin": "https://app.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type,x-amz-date,x-amz-target"})
    assert (response.status, data) == (200, b"")
    assert _cors(response) == {
        "Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": EXPOSED,
        "Access-Control-Allow-Methods": "POST",
        "Access-Control-Allow-Headers": "authorization,content-type,x-amz-date,x-amz-target",
        "Access-Control-Max-Age": "172800"}
    assert call(server.port, b"", method="OPTIONS")[0].status == 404  # no Origin: not a pre-flight


@pytest.fixture(scope="module")
def listed_origins() -> Iterator[ServerProcess]:
    process = ServerProcess(None, "--cors", "https://a.example, https://b.example")
    try:
        yield process
    finally:
        process.finish()


def test_cors_option_lists_the_allowed_origins(listed_origins):
    """`--cors ORIGINS`, as DynamoDB Local's -cors: a listed origin is named back (and caches told the answer
    varies by origin); another origin gets no CORS header, nor a pre-flight answer."""
    port = listed_origins.port
    response, _ = call(port, b"{}", headers={"Origin": "https://b.example"})
    assert _cors(response) == {"Access-Control-Allow-Origin": "https://b.example", "Vary": "Origin",
                               "Access-Control-Expose-Headers": EXPOSED}
    response, data = call(port, b"{}", headers={"Origin": "https://evil.example"})
    assert response.status == 200 and "TableNames" in json.loads(data) and _cors(response) == {}
    preflight = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    response, _ = call(port, b"", method="OPTIONS", headers=preflight)
    assert response.status == 404 and _cors(response) == {}
    response, _ = call(port, b"", method="OPTIONS", headers={**preflight, "Origin": "https://a.example"})
    assert response.status == 200 and response.getheader("Access-Control-Allow-Origin") == "https://a.example"


# --- HTTP limits, health check, DescribeEndpoints --------------------------------------------------------------

def _raw(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(head)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def test_headers_over_16_kb_are_refused(server):
    """Headers of more than 16 KB in all are refused (400, then the connection closes); just under is served."""
    def request(padding: int) -> bytes:
        return (f"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.0\r\n"
                f"X-Amz-Target: DynamoDB_20120810.ListTables\r\nAuthorization: {AUTH}\r\nConnection: close\r\n"
                f"X-Pad-1: {'a' * (padding // 2)}\r\nX-Pad-2: {'b' * (padding - padding // 2)}\r\n"
                f"Content-Length: 2\r\n\r\n{{}}").encode()

    base = len("/") + sum(len(n) + len(v) for n, v in [
        ("Host", "x"), ("Content-Type", "application/x-amz-json-1.0"),
        ("X-Amz-Target", "DynamoDB_20120810.ListTables"), ("Authorization", AUTH), ("Connection", "close"),
        ("X-Pad-1", ""), ("X-Pad-2", ""), ("Content-Length", "2")])
    assert _raw(server.port, request(16 * 1024 - base)).startswith(b"HTTP/1.1 200 OK")
    assert _raw(server.port, request(16 * 1024 - base + 1)).startswith(b"HTTP/1.1 400 Bad Request")
    assert call(server.port, b"{}")[0].status == 200
    big_body = json.dumps({"ExclusiveStartTableName": "a" * 200, "Limit": 1, "Junk": "j" * 60_000}).encode()
    assert call(server.port, big_body)[0].status == 200  # a large body with a small head: the body does not count


@pytest.mark.parametrize("path", ["/foo", "/dynamodb", "//", "/foo?x=1"])
def test_post_to_another_path_finds_no_page(server, path):
    """DynamoDB serves its API at "/": a POST elsewhere finds no page (DynamoDB's 'Page Not Found' page, as for a
    wrong Content-Type: a best guess); a query string on "/" is still "/"."""
    response, data = call(server.port, b"{}", path=path)
    assert response.status == 404 and b"<title>Page Not Found</title>" in data
    assert call(server.port, b"{}", path="/?x=1")[0].status == 200


def test_health_check_names_the_host_used(server):
    """GET / answers as DynamoDB's endpoint does, "healthy: <endpoint> " (a space at the end), naming the address
    the client used."""
    response, data = call(server.port, b"", method="GET")
    assert (response.status, data) == (200, f"healthy: 127.0.0.1:{server.port} ".encode())
    assert int(response.getheader("x-amz-crc32")) == zlib.crc32(data)
    response, data = call(server.port, b"", method="GET", headers={"Host": "dynamodb.us-east-1.amazonaws.com"})
    assert data == b"healthy: dynamodb.us-east-1.amazonaws.com "
    received = _raw(server.port, b"GET / HTTP/1.0\r\n\r\n")  # no Host header: this end's address
    assert received.endswith(f"healthy: 127.0.0.1:{server.port} ".encode())


def test_describe_endpoints_names_the_address_used(server, ddb):
    """DescribeEndpoints answers with the host and port the client used, so a client following it stays here."""
    assert ddb.describe_endpoints()["Endpoints"] == [{"Address": f"127.0.0.1:{server.port}",
                                                      "CachePeriodInMinutes": 1440}]
    _, data = call(server.port, b"{}", "DescribeEndpoints", {"Host": "localhost:4566"})
    assert json.loads(data)["Endpoints"][0]["Address"] == "localhost:4566"
