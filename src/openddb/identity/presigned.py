"""Signature Version 4 in the query string (a presigned request): the signature, its credential, signed headers and
time sent as query parameters instead of an Authorization header (IAM User Guide, "Create a signed AWS API
request": "add the signature to the request ... either in the Authorization header or as a query string parameter";
the query form's parameters: X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date, X-Amz-Expires, X-Amz-SignedHeaders,
X-Amz-Security-Token, X-Amz-Signature).

The HTTP layer turns such a request into the form every other stage reads (`from_query`): an Authorization value
made of its parameters, so the scope is checked as a header's is (api/dispatch.py), and the request as signed: its
URL without X-Amz-Signature (the canonical query string holds every parameter but the signature), X-Amz-Date and
X-Amz-Security-Token where the verifier reads them (identity/sigv4.py), and X-Amz-Expires, the seconds for which
the signature holds from X-Amz-Date (1 to 604,800: seven days), in place of the header form's 15 minutes either
way. Only a request without an Authorization header is read so, so a header-signed request pays nothing for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import unquote_to_bytes

from openddb.identity.sigv4 import SignedRequest

MAX_EXPIRES = 604_800  # seven days: the largest X-Amz-Expires SigV4 takes
_AUTHORIZATION_PARTS = ((b"X-Amz-Credential", b"Credential="), (b"X-Amz-SignedHeaders", b"SignedHeaders="),
                        (b"X-Amz-Signature", b"Signature="))


def is_presigned(url: bytes) -> bool:
    """Whether the query of `url` carries a SigV4 signature or credential."""
    query = url.partition(b"?")[2]
    return b"X-Amz-Signature=" in query or b"X-Amz-Credential=" in query


def from_query(method: bytes, url: bytes, headers: Mapping[bytes, bytes],
               body: bytes) -> tuple[bytes, SignedRequest]:
    """The Authorization value a presigned request stands for and what it signed (see the module docstring). A
    parameter missing from the query is missing from the value, where the dispatcher reports it as it would a
    header's (IncompleteSignatureException); an X-Amz-Expires that is no whole number from 1 to MAX_EXPIRES leaves
    the 15 minutes of the header form (best guess: what DynamoDB answers to one is not recorded)."""
    path, _, query = url.partition(b"?")
    fields: dict[bytes, bytes] = {}
    kept: list[bytes] = []
    for part in query.split(b"&"):
        name, _, value = part.partition(b"=")
        name = unquote_to_bytes(name)
        fields[name] = unquote_to_bytes(value)
        if name != b"X-Amz-Signature":
            kept.append(part)
    given = [label + fields[name] for name, label in _AUTHORIZATION_PARTS if name in fields]
    authorization = fields.get(b"X-Amz-Algorithm", b"") + b" " + b", ".join(given)
    signed_headers = dict(headers)
    for name, header in ((b"X-Amz-Date", b"x-amz-date"), (b"X-Amz-Security-Token", b"x-amz-security-token")):
        if name in fields:
            signed_headers[header] = fields[name]
    expires = fields.get(b"X-Amz-Expires", b"")
    seconds = int(expires) if expires.isdigit() and 1 <= int(expires) <= MAX_EXPIRES else None
    signed_url = path + b"?" + b"&".join(kept) if kept else path
    return authorization, SignedRequest(method, signed_url, signed_headers, body, seconds)
