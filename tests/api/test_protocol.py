"""The wire protocol through raw HTTP: framing, headers, CRC32 and protocol-level errors."""

from __future__ import annotations

import http.client
import json
import re
import time
import zlib

import pytest

from tests.conftest import create_table

AUTH = ("AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=00")


def call(server, body: bytes | str, target: str | None = "DynamoDB_20120810.ListTables",
         auth: str | None = AUTH, content_type: str | None = "application/x-amz-json-1.0", method: str = "POST"):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    headers = {} if content_type is None else {"Content-Type": content_type}
    if target is not None:
        headers["X-Amz-Target"] = target
    if auth is not None:
        headers["Authorization"] = auth
    connection.request(method, "/", body=body, headers=headers)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response, data


def test_success_has_request_id_and_crc32(server):
    """botocore checks x-amz-crc32 against the body; every response carries a request id."""
    response, data = call(server, "{}")
    assert response.status == 200
    assert int(response.getheader("x-amz-crc32")) == zlib.crc32(data)
    assert re.fullmatch(r"[0-9A-V]{52}", response.getheader("x-amzn-RequestId"))  # DynamoDB's ids' alphabet
    assert response.getheader("Content-Type") == "application/x-amz-json-1.0"
    assert "TableNames" in json.loads(data)


@pytest.mark.parametrize("content_type", ["application/x-amz-json-1.1", "application/graphql; charset=utf-8"])
def test_other_content_types_find_no_page(server, content_type):
    """DynamoDB speaks AWS JSON 1.0 only: a request in 1.1 (or anything else) gets a 404 'Page Not Found' page, as
    reported against the service; 1.0 with parameters, or no Content-Type, is served."""
    response, data = call(server, "{}", content_type=content_type)
    assert response.status == 404 and data == (  # byte for byte as quoted from DynamoDB (rusoto issue 215)
        b'<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" '
        b'"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">\n<html xmlns="http://www.w3.org/1999/xhtml" '
        b'xml:lang="en" lang="en">\n<head>\n <title>Page Not Found</title>\n</head>\n<body>Page Not Found</body>\n'
        b'</html>')
    for accepted in ("application/x-amz-json-1.0; charset=utf-8", None):
        response, data = call(server, "{}", content_type=accepted)
        assert response.status == 200 and response.getheader("Content-Type") == "application/x-amz-json-1.0"


@pytest.mark.parametrize("service", ["iam", "dynamodb_streams"])
def test_credential_scoped_to_another_service(server, service):
    """DynamoDB checks the credential scope's service (quoted from its answers in sigv4 #15 and ex_aws #306)."""
    auth = AUTH.replace("/dynamodb/aws4_request", f"/{service}/aws4_request")
    response, data = call(server, "{}", auth=auth)
    assert response.status == 400
    assert json.loads(data) == {"__type": "com.amazon.coral.service#InvalidSignatureException",
                                "message": "Credential should be scoped to correct service: 'dynamodb'. "}


@pytest.mark.parametrize("signed", ["content-type;x-amz-date", "hostname;x-amz-date"])
def test_host_must_be_signed(server, signed):
    """The host must be among the signed headers (quoted from DynamoDB in aws-sdk-php #2469); any case of the
    name will do, as HTTP header names have none."""
    signed_now = "SignedHeaders=content-type;host;x-amz-date;x-amz-target"
    auth = AUTH.replace(signed_now, f"SignedHeaders={signed}")
    assert signed_now in AUTH and auth != AUTH
    for _ in range(2):  # refused alike once the credential scope is known
        response, data = call(server, "{}", auth=auth)
        assert response.status == 400
        assert json.loads(data) == {"__type": "com.amazon.coral.service#InvalidSignatureException",
                                    "message": "'Host' or ':authority' must be a 'SignedHeader' in the AWS "
                                               "Authorization."}
        assert call(server, "{}")[0].status == 200
    response, _ = call(server, "{}", auth=AUTH.replace(signed_now, "SignedHeaders=content-type;Host"))
    assert response.status == 200


def test_authorization_parameter_without_equal_sign(server):
    """A space inside a parameter's value leaves a piece that is no key=value pair (DynamoDB's words, quoted in
    fhir-works-on-aws-deployment #379), also once the credential scope is known."""
    for auth in (AUTH.replace("Credential=test/", "Credential=test /"), AUTH + " junk", AUTH + ", junk"):
        call(server, "{}")
        response, data = call(server, "{}", auth=auth)
        piece = "/20260101/us-east-1/dynamodb/aws4_request" if "test /" in auth else "junk"
        assert response.status == 400
        assert json.loads(data) == {"__type": "com.amazon.coral.service#IncompleteSignatureException",
                                    "message": f"'{piece}' not a valid key=value pair (missing equal-sign) in "
                                               f"Authorization header: '{auth}'."}


def test_member_named_type_is_not_deserialized(server, ddb):
    """DynamoDB's deserializer reads a JSON member "__type" as a type name: an attribute so named, even in a
    map, is a SerializationException (aws-sdk-js #1547); the text "__type" as a value is only text."""
    name = create_table(ddb, range_type=None)
    for item in ({"pk": {"S": "a"}, "m": {"M": {"__type": {"S": "Date"}}}}, {"pk": {"S": "b"}, "__type": {"S": "x"}}):
        response, data = call(server, json.dumps({"TableName": name, "Item": item}), "DynamoDB_20120810.PutItem")
        assert response.status == 400
        assert json.loads(data) == {"__type": "com.amazon.coral.service#SerializationException",
                                    "Message": "No assembly name on stack!"}
    escaped = '{"TableName": "' + name + '", "Item": {"pk": {"S": "c"}, "\\u005f_type": {"S": "x"}}}'
    response, data = call(server, escaped, "DynamoDB_20120810.PutItem")  # the name once the JSON is read
    assert (response.status, json.loads(data)["Message"]) == (400, "No assembly name on stack!")
    ddb.put_item(TableName=name, Item={"pk": {"S": "__type"}, "v": {"S": "__type"}})
    assert [i["pk"]["S"] for i in ddb.scan(TableName=name)["Items"]] == ["__type"]


def test_unknown_operation(server):
    """An X-Amz-Target naming no operation is UnknownOperationException."""
    response, data = call(server, "{}", target="DynamoDB_20120810.Frobnicate")
    assert response.status == 400
    assert json.loads(data) == {"__type": "com.amazon.coral.service#UnknownOperationException",
                                "message": "Unknown operation exception"}


def test_missing_target(server):
    """A POST without X-Amz-Target is an unknown operation too."""
    response, data = call(server, "{}", target=None)
    assert response.status == 400
    assert json.loads(data)["__type"] == "com.amazon.coral.service#UnknownOperationException"


def test_missing_authorization(server):
    """Unsigned requests are refused with DynamoDB's MissingAuthenticationTokenException."""
    response, data = call(server, "{}", auth=None)
    assert response.status == 400
    assert json.loads(data) == {"__type": "com.amazon.coral.service#MissingAuthenticationTokenException",
                                "message": "Request is missing Authentication Token"}


def test_incomplete_signature(server):
    """An Authorization header without the SigV4 parts is an IncompleteSignatureException."""
    response, data = call(server, "{}", auth="AWS4-HMAC-SHA256 Credential=x")
    assert response.status == 400
    body = json.loads(data)
    assert body["__type"] == "com.amazon.coral.service#IncompleteSignatureException"
    assert "Authorization header requires 'Signature' parameter." in body["message"]


@pytest.mark.parametrize("body", [b"{", b"not json", b'{"a":}'])
def test_malformed_json(server, body):
    """A body that is not JSON is a SerializationException."""
    response, data = call(server, body)
    assert response.status == 400
    assert json.loads(data)["__type"] == "com.amazon.coral.service#SerializationException"


def test_wrong_json_type(server):
    """A member of the wrong JSON type is a SerializationException, not a 500."""
    response, data = call(server, '{"TableName": 5}', target="DynamoDB_20120810.DescribeTable")
    assert response.status == 400
    assert json.loads(data) == {"__type": "com.amazon.coral.service#SerializationException",
                                "Message": "NUMBER_VALUE cannot be converted to String"}


@pytest.mark.parametrize(("target", "body", "message"), [
    ("Scan", '{"TableName": "any-table", "Limit": "10"}', "STRING_VALUE cannot be converted to Integer"),
    ("Scan", '{"TableName": "any-table", "ConsistentRead": "true"}', "STRING_VALUE cannot be converted to Boolean"),
    ("Scan", '{"TableName": "any-table", "ConsistentRead": 1}', "NUMBER_VALUE cannot be converted to Boolean"),
    ("Scan", '{"TableName": "any-table", "Segment": true, "TotalSegments": 2}',
     "TRUE_VALUE cannot be converted to Integer"),
    ("ListTables", '{"Limit": "5"}', "STRING_VALUE cannot be converted to Integer"),
])
def test_scalar_of_the_wrong_json_type(server, target, body, message):
    """A scalar member sent as another JSON type is named by its JSON token and the member's Java type, as
    DynamoDB words it."""
    response, data = call(server, body, target=f"DynamoDB_20120810.{target}")
    assert response.status == 400
    assert json.loads(data) == {"__type": "com.amazon.coral.service#SerializationException", "Message": message}


@pytest.mark.parametrize(("target", "body", "message"), [
    ("CreateTable", '{"TableName": "huge-on-demand", "BillingMode": "PAY_PER_REQUEST", '
     '"AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}], '
     '"KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}], '
     '"OnDemandThroughput": {"MaxReadRequestUnits": 9223372036854775808}}',
     "class java.math.BigInteger can not be converted to an Long"),
    ("CreateTable", '{"TableName": "huge-warm", "BillingMode": "PAY_PER_REQUEST", '
     '"AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}], '
     '"KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}], '
     '"WarmThroughput": {"ReadUnitsPerSecond": 1e30}}',
     "class java.math.BigDecimal can not be converted to an Long"),
    ("Scan", '{"TableName": "any-table", "Limit": 2147483648}',
     "class java.math.BigInteger can not be converted to an Integer"),
])
def test_integer_beyond_its_java_type(server, target, body, message):
    """A number beyond the member's Java type (Long or Integer) is a SerializationException, never a 500 (an
    OnDemandThroughput of 2^64 once failed only when the table description was stored); nothing is created."""
    response, data = call(server, body, target=f"DynamoDB_20120810.{target}")
    assert response.status == 400
    assert json.loads(data) == {"__type": "com.amazon.coral.service#SerializationException", "Message": message}
    response, data = call(server, "{}")
    assert b"huge-" not in data


def test_json_array_body(server):
    """A JSON array where an object is expected is a SerializationException."""
    response, data = call(server, "[]")
    assert response.status == 400
    assert json.loads(data)["__type"] == "com.amazon.coral.service#SerializationException"


def test_health_check(server):
    """GET / answers 200 so load balancers can check the server."""
    response, data = call(server, b"", method="GET")
    assert response.status == 200
    assert b"healthy" in data


def test_keep_alive_serves_many_requests(server):
    """One connection serves many requests in turn (HTTP/1.1 keep-alive)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "DynamoDB_20120810.ListTables",
               "Authorization": AUTH}
    for _ in range(20):
        connection.request("POST", "/", body="{}", headers=headers)
        response = connection.getresponse()
        assert response.status == 200
        response.read()
    connection.close()


def test_oversized_body_is_refused(server):
    """A body over the 16 MB request ceiling is refused with a 413, not buffered without end."""
    body = b'{"TableName":"' + b"a" * (17 * 1024 * 1024) + b'"}'
    response, data = call(server, body)
    assert response.status == 413
    assert json.loads(data)["__type"] == "com.amazon.coral.service#RequestEntityTooLargeException"


def framed_request(target: str, body: dict) -> bytes:
    payload = json.dumps(body).encode()
    return (f"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.0\r\n"
            f"X-Amz-Target: DynamoDB_20120810.{target}\r\nAuthorization: {AUTH}\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n").encode() + payload


def _answers(sock, count: int) -> list[dict]:
    """Read `count` framed answers off a raw connection, in the order they arrive."""
    received = b""
    bodies: list[dict] = []
    while len(bodies) < count:
        chunk = sock.recv(65536)
        assert chunk, "connection closed early"
        received += chunk
        while b"\r\n\r\n" in received:
            head, rest = received.split(b"\r\n\r\n", 1)
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            if len(rest) < length:
                break
            bodies.append(json.loads(rest[:length]))
            received = rest[length:]
    return bodies


def test_pipelined_answers_stay_in_request_order(server, ddb):
    """Requests sent back to back on one connection are answered in order, even when a write's answer waits for
    its group commit and the next request (a CreateTable) commits on its own."""
    import socket

    from tests.conftest import create_table, unique_name

    table = create_table(ddb, unique_name("pipe"), range_type=None)
    new_table = unique_name("pipe")
    stream = framed_request("PutItem", {"TableName": table, "Item": {"pk": {"S": "a"}}}) + framed_request(
        "CreateTable", {"TableName": new_table, "BillingMode": "PAY_PER_REQUEST",
                        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}]}) + framed_request(
        "ListTables", {"ExclusiveStartTableName": new_table[:-1], "Limit": 1})  # (a shared store holds many)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(stream)
        bodies = _answers(sock, 3)
    assert bodies[0] == {}
    assert bodies[1]["TableDescription"]["TableName"] == new_table
    assert bodies[2]["TableNames"] == [new_table]


def test_reads_arriving_together_answer_their_own_keys(server, ddb):
    """GetItem and Query requests arriving in one moment on many connections (which an engine may read ahead, all
    in one round trip: see `Engine.read_ahead`) each answer their own key, in each connection's order, and see
    every write acknowledged before they were sent."""
    import socket

    from tests.conftest import create_table, unique_name

    table = create_table(ddb, unique_name("ahead"))
    connections = 6

    def key(c: int, sk: str) -> dict:
        return {"pk": {"S": f"p{c}"}, "sk": {"S": sk}}

    def get(c: int, sk: str) -> bytes:
        return framed_request("GetItem", {"TableName": table, "Key": key(c, sk), "ConsistentRead": c % 2 == 0})

    def query(c: int) -> bytes:
        return framed_request("Query", {"TableName": table, "KeyConditionExpression": "pk = :p",
                                        "ExpressionAttributeValues": {":p": {"S": f"p{c}"}}})

    for c in range(connections):
        for sk in ("a", "b"):
            ddb.put_item(TableName=table, Item={**key(c, sk), "n": {"N": str(c)}})
    for step in range(3):
        sockets = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(connections)]
        try:
            for c, sock in enumerate(sockets):
                sock.sendall(get(c, "a") + query(c) + get(c, "missing") + framed_request(
                    "UpdateItem", {"TableName": table, "Key": key(c, "a"), "UpdateExpression": "SET n = n + :one",
                                   "ExpressionAttributeValues": {":one": {"N": "1"}}}) + get(c, "b"))
            for c, sock in enumerate(sockets):
                first, other = {**key(c, "a"), "n": {"N": str(c + step)}}, {**key(c, "b"), "n": {"N": str(c)}}
                assert _answers(sock, 5) == [{"Item": first}, {"Items": [first, other], "Count": 2, "ScannedCount": 2},
                                             {}, {}, {"Item": other}]
        finally:
            for sock in sockets:
                sock.close()


def test_batch_gets_index_queries_later_pages_and_scans_arriving_together(server, ddb):
    """BatchGetItem, an index Query, a Query from a start key and a Scan segment arriving in one moment on many
    connections (which an engine may read ahead in one round trip: see `Engine.read_ahead`) each answer their own
    reads, in each connection's order, seeing every write acknowledged before they were sent (each step's
    UpdateItem before the next step)."""
    import socket

    from tests.conftest import create_table, unique_name

    table, still = create_table(ddb, unique_name("ahead")), create_table(ddb, unique_name("still"))
    ddb.update_table(TableName=table, AttributeDefinitions=[{"AttributeName": "g", "AttributeType": "S"},
                                                            {"AttributeName": "sk", "AttributeType": "S"}],
                     GlobalSecondaryIndexUpdates=[{"Create": {
                         "IndexName": "by-g", "Projection": {"ProjectionType": "ALL"},
                         "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"},
                                       {"AttributeName": "sk", "KeyType": "RANGE"}]}}])
    while ddb.describe_table(TableName=table)["Table"]["GlobalSecondaryIndexes"][0]["IndexStatus"] != "ACTIVE":
        time.sleep(0.05)
    connections = 6

    def key(c: int, sk: str) -> dict:
        return {"pk": {"S": f"p{c}"}, "sk": {"S": sk}}

    def batch(c: int, *sks: str) -> bytes:
        return framed_request("BatchGetItem", {"RequestItems": {table: {"Keys": [key(c, sk) for sk in sks]}}})

    for c in range(connections):
        for sk in ("a", "b", "c"):
            ddb.put_item(TableName=table, Item={**key(c, sk), "g": {"S": f"g{c}"}, "n": {"N": str(c)}})
            ddb.put_item(TableName=still, Item={**key(c, sk), "n": {"N": str(c)}})
    segments = [ddb.scan(TableName=still, Segment=s, TotalSegments=3, ConsistentRead=True)["Items"] for s in range(3)]
    for step in range(3):
        sockets = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(connections)]
        try:
            for c, sock in enumerate(sockets):
                sock.sendall(batch(c, "a", "b", "missing") + framed_request("Query", {
                    "TableName": table, "IndexName": "by-g", "KeyConditionExpression": "g = :g",
                    "ExpressionAttributeValues": {":g": {"S": f"g{c}"}}}) + framed_request("Query", {
                        "TableName": table, "KeyConditionExpression": "pk = :p", "ExclusiveStartKey": key(c, "a"),
                        "ExpressionAttributeValues": {":p": {"S": f"p{c}"}}}) + framed_request("Scan", {
                            "TableName": still, "Segment": c % 3, "TotalSegments": 3}) + framed_request(
                    "UpdateItem", {"TableName": table, "Key": key(c, "a"), "UpdateExpression": "SET n = n + :one",
                                   "ExpressionAttributeValues": {":one": {"N": "1"}}}) + batch(c, "c", "b"))
            for c, sock in enumerate(sockets):
                items = {sk: {**key(c, sk), "g": {"S": f"g{c}"}, "n": {"N": str(c + step * (sk == "a"))}}
                         for sk in ("a", "b", "c")}
                got, index, later, scanned, updated, again = _answers(sock, 6)
                assert sorted(got["Responses"][table], key=lambda item: item["sk"]["S"]) == [items["a"], items["b"]]
                assert got["UnprocessedKeys"] == {}
                assert index["Items"] == [items["a"], items["b"], items["c"]]
                assert later["Items"] == [items["b"], items["c"]]
                assert scanned["Items"] == segments[c % 3]
                assert updated == {}
                assert sorted(again["Responses"][table], key=lambda item: item["sk"]["S"]) == [items["b"], items["c"]]
        finally:
            for sock in sockets:
                sock.close()


def test_pipelined_reads_and_writes_stay_in_request_order(server, ddb):
    """Reads answered at once and writes answered after their group commit, interleaved on one connection and
    across connections in the same moment: every connection gets its answers in the order it asked."""
    import socket

    from tests.conftest import create_table, unique_name

    table = create_table(ddb, unique_name("pipe"), range_type=None)
    ddb.put_item(TableName=table, Item={"pk": {"S": "k"}, "n": {"N": "0"}})

    def stream(step: int, write_first: bool) -> tuple[bytes, list[object]]:
        """Alternating reads and writes; each answer names which request it belongs to."""
        requests, expected = [], []
        for i in range(6):
            if i % 2 != write_first:
                requests.append(framed_request("PutItem", {"TableName": table, "ReturnValues": "ALL_OLD",
                                                    "Item": {"pk": {"S": f"w{step}-{i}"}, "n": {"N": str(i)}}}))
                expected.append({})
            else:
                requests.append(framed_request("DescribeTable", {"TableName": table}) if i == 2 else
                                 framed_request("GetItem", {"TableName": table, "Key": {"pk": {"S": "k"}},
                                                     "ProjectionExpression": "n"}))
                expected.append("Table" if i == 2 else {"Item": {"n": {"N": "0"}}})
        return b"".join(requests), expected

    for step in range(5):
        sockets = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(4)]
        try:
            streams = [stream(step * 10 + n, n % 2 == 0) for n in range(len(sockets))]
            for sock, (data, _) in zip(sockets, streams):
                sock.sendall(data)
            for sock, (_, expected) in zip(sockets, streams):
                bodies = _answers(sock, len(expected))
                for body, want in zip(bodies, expected):
                    if want == "Table":
                        assert body["Table"]["TableName"] == table
                    else:
                        assert body == want
        finally:
            for sock in sockets:
                sock.close()


def _read_until_closed(sock) -> bytes:
    received = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return received
        received += chunk


def test_malformed_http_after_a_good_request_is_answered_in_turn_then_closed(server):
    """A request, then bytes that are not HTTP, in one send: the request's answer first, then a 400, then the
    server closes the connection."""
    import socket

    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(framed_request("ListTables", {}) + b"NOT HTTP AT ALL\r\n\r\n")
        received = _read_until_closed(sock)
    assert re.findall(rb"HTTP/1\.1 (\d{3}) ", received) == [b"200", b"400"]
    assert b'"TableNames"' in received.split(b"HTTP/1.1 400")[0]


def test_connection_close_is_answered_then_closed(server):
    """`Connection: close`: the answer is sent in full, then the server closes the connection."""
    import socket

    request = framed_request("ListTables", {}).replace(b"Host: x\r\n", b"Host: x\r\nConnection: close\r\n")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request + framed_request("ListTables", {}))  # the second is never read
        received = _read_until_closed(sock)
    head, body = received.split(b"\r\n\r\n", 1)  # one answer, complete: nothing after its body
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"\r\nConnection: close\r\n" in head
    assert b"\r\nContent-Length: %d\r\n" % len(body) in head
    assert "TableNames" in json.loads(body)


def test_expect_100_continue(server):
    """A client that sends `Expect: 100-continue` hears `100 Continue` before it sends the body, then the
    answer."""
    import socket

    request = framed_request("ListTables", {}).replace(b"Host: x\r\n", b"Host: x\r\nExpect: 100-continue\r\n")
    head, _, body = request.partition(b"\r\n\r\n")
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(head + b"\r\n\r\n")
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        answer = b""
        while b"TableNames" not in answer:
            chunk = sock.recv(65536)
            assert chunk
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_deeply_nested_ignored_members(server):
    """An unknown member nested deeper than a JSON writer goes (300 levels) is ignored, not a 500: in an
    idempotent transaction (whose request digest once tried to write it) and in an SSESpecification (which
    was once stored with it)."""
    from tests.conftest import unique_name

    table = unique_name("deep-junk")  # (a shared database may keep an earlier run's tables)
    response, _ = call(server, json.dumps({
        "TableName": table, "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}]})[:-1]
        + f', "SSESpecification": {{"Enabled": true, "Junk": {_deep(300)}}}}}',
        target="DynamoDB_20120810.CreateTable")
    assert response.status == 200
    response, data = call(server, json.dumps({"TableName": table}), target="DynamoDB_20120810.DescribeTable")
    assert response.status == 200
    assert json.loads(data)["Table"]["SSEDescription"]["SSEType"] == "KMS"
    put = json.dumps({"TableName": table, "Item": {"pk": {"S": "x"}}})[:-1] + f', "Junk": {_deep(300)}}}'
    transaction = f'{{"ClientRequestToken": "{table}", "TransactItems": [{{"Put": {put}}}]}}'
    for _ in range(2):  # the second is a replay of the first: the same answer
        response, data = call(server, transaction, target="DynamoDB_20120810.TransactWriteItems")
        assert (response.status, json.loads(data)) == (200, {})
    response, data = call(server, json.dumps({"TableName": table, "Key": {"pk": {"S": "x"}}}),
                          target="DynamoDB_20120810.GetItem")
    assert json.loads(data) == {"Item": {"pk": {"S": "x"}}}


def test_a_request_asking_for_an_upgrade_is_served_as_http_1_1(server, ddb):
    """`Connection: Upgrade` (as `curl --http2` sends) is ignored, as RFC 7230 allows: the request is served once,
    with its body, and the connection goes on (it got a second, unasked-for 400 and was closed)."""
    import socket

    from tests.conftest import create_table, unique_name

    table = create_table(ddb, unique_name("upgrade"), range_type=None)

    def put(key: str) -> bytes:
        return framed_request("PutItem", {"TableName": table, "Item": {"pk": {"S": key}, "v": {"N": "1"}}})

    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        for n, back in enumerate((5, -10)):  # the body split across reads; then whole, with the next request's start
            upgraded = put(f"up{n}").replace(b"Host: x\r\n", b"Host: x\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                                                           b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIA\r\n")
            stream = upgraded + put(f"next{n}")
            sock.sendall(stream[:len(upgraded) - back])
            time.sleep(0.05)
            sock.sendall(stream[len(upgraded) - back:])
            assert _answers(sock, 2) == [{}, {}]
            for key in (f"up{n}", f"next{n}"):
                assert ddb.get_item(TableName=table, Key={"pk": {"S": key}})["Item"]["v"] == {"N": "1"}
        sock.sendall(b"CONNECT x:80 HTTP/1.1\r\nHost: x\r\n\r\n" + framed_request("ListTables", {}))
        received = b""
        while b"TableNames" not in received:
            chunk = sock.recv(65536)
            assert chunk, "connection closed early"
            received += chunk
        assert received.startswith(b"HTTP/1.1 404") and b"400 Bad Request" not in received


def test_an_endless_request_head_is_refused(server):
    """A request line and headers of more than 1 MiB get a 400 and the connection closes, however they arrive;
    the server does not buffer them without bound."""
    import socket

    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Padding: ")
        try:
            for _ in range(40):
                sock.sendall(b"a" * 65536)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while sending: refused
        try:
            assert _read_until_closed(sock).startswith(b"HTTP/1.1 400")
        except ConnectionResetError:
            pass  # closed with our last bytes unread, which TCP reports as a reset: refused all the same
    response, _ = call(server, "{}")  # the server goes on serving
    assert response.status == 200


def test_a_chunked_body_in_many_small_pieces(server, ddb):
    """A body sent with Transfer-Encoding: chunked, in 3-byte chunks each sent on its own, is put back together
    whole (one growing buffer on the server, not one object per piece)."""
    import socket

    from tests.conftest import unique_name

    table = create_table(ddb, unique_name("chunk"), range_type=None)
    payload = json.dumps({"TableName": table, "Item": {"pk": {"S": "c"}, "text": {"S": "é" * 2000}}}).encode()
    head = (f"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.0\r\n"
            f"X-Amz-Target: DynamoDB_20120810.PutItem\r\nAuthorization: {AUTH}\r\n"
            f"Transfer-Encoding: chunked\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(head)
        for start in range(0, len(payload), 3):
            piece = payload[start:start + 3]
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        sock.sendall(b"0\r\n\r\n")
        assert _answers(sock, 1) == [{}]
    item = ddb.get_item(TableName=table, Key={"pk": {"S": "c"}}, ConsistentRead=True)["Item"]
    assert item["text"]["S"] == "é" * 2000
