"""The console's route over raw HTTP: what it serves, the headers that keep it to its own origin, that it writes
nothing itself, and `--console off`."""

from __future__ import annotations

import http.client

import pytest

from tests.conftest import ServerProcess


def fetch(server: ServerProcess, method: str, path: str, body: bytes | None = None,
          headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize(("path", "kind", "marker"), [
    ("/console", "text/html", b'<script src="/console/console.js" defer></script>'),
    ("/console/", "text/html", b'<main id="main"'),
    ("/console/console.js", "text/javascript", b"DynamoDB_20120810"),
    ("/console/sigv4.js", "text/javascript", b"AWS4-HMAC-SHA256"),
    ("/console/console.css", "text/css", b":focus-visible"),
])
def test_files_come_from_the_package(console_server: ServerProcess, path: str, kind: str, marker: bytes) -> None:
    """Each of the console's files is served with its type, whatever query string follows."""
    status, headers, body = fetch(console_server, "GET", path + "?v=1")
    assert status == 200
    assert headers["content-type"].startswith(kind)
    assert marker in body


def test_headers_keep_the_page_to_its_origin(console_server: ServerProcess) -> None:
    """No CORS grant even to a request with an Origin (another site cannot read the page), no framing, no inline
    script, calls to its own origin only."""
    status, headers, _ = fetch(console_server, "GET", "/console", headers={"Origin": "https://elsewhere.example"})
    assert status == 200
    assert not any(name.startswith("access-control-") for name in headers)
    policy = headers["content-security-policy"]
    for directive in ("default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'",
                      "form-action 'none'"):
        assert directive in policy
    assert headers["x-frame-options"] == "DENY"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["cross-origin-resource-policy"] == "same-origin"


def test_head_and_unknown_paths(console_server: ServerProcess) -> None:
    status, headers, body = fetch(console_server, "HEAD", "/console")
    assert (status, body) == (200, b"")
    assert headers["content-type"].startswith("text/html")
    assert fetch(console_server, "GET", "/console/missing.js")[0] == 404
    assert fetch(console_server, "GET", "/consoles")[0] == 404


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_a_form_from_another_site_writes_nothing(console_server: ServerProcess, content_type: str) -> None:
    """The console has no write endpoint of its own, and the API refuses what an HTML form can send (its three
    content types, no X-Amz-Target): a cross-site form post cannot create a table."""
    body = b'{"TableName": "forged", "KeySchema": []}'
    for path in ("/console", "/console/", "/"):
        status, _, _ = fetch(console_server, "POST", path, body, {"Content-Type": content_type,
                                                          "Origin": "https://elsewhere.example"})
        assert status == 404
    status, _, listed = fetch(console_server, "POST", "/", b"{}", {"Content-Type": "application/x-amz-json-1.0",
                                                           "X-Amz-Target": "DynamoDB_20120810.ListTables",
                                                           "Authorization": _AUTHORIZATION})
    assert status == 200 and b"forged" not in listed


_AUTHORIZATION = ("AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, "
                  "SignedHeaders=host;x-amz-date, Signature=00")


def test_console_off() -> None:
    """`--console off`: the paths do not exist, and the API is unchanged."""
    process = ServerProcess(None, "--console", "off")
    try:
        for path in ("/console", "/console/console.js"):
            assert fetch(process, "GET", path)[0] == 404
        assert fetch(process, "GET", "/")[0] == 200
    finally:
        process.finish()
