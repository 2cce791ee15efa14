"""What the HTTP layer hands the dispatcher for one API call (`Incoming`), and who made the call (`Caller`).

The HTTP layer frames the request and keeps what later stages need: the target, the Authorization header, the
body (decoded), whether it was too large, the request id, the Host header, what the signature covers (only when
signatures are verified) and the peer's address. `Frame` is that contract as a plain tuple, for callers other
than the HTTP server (tests, tools); the server's own request object has the same fields.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from openddb.identity.sigv4 import Credentials, SignedRequest


class Incoming(Protocol):
    @property
    def target(self) -> bytes: ...  # X-Amz-Target

    @property
    def authorization(self) -> bytes | None: ...

    @property
    def body(self) -> bytes: ...

    @property
    def too_large(self) -> bool: ...

    @property
    def request_id(self) -> bytes: ...

    @property
    def host(self) -> bytes: ...

    @property
    def signed(self) -> SignedRequest | None: ...

    @property
    def peer(self) -> str: ...  # the client's address ("" where unknown)


class Frame(NamedTuple):
    target: bytes
    authorization: bytes | None
    body: bytes
    too_large: bool = False
    request_id: bytes = b"00000000000000000000000000000000000000000000000000AA"
    host: bytes = b""
    signed: SignedRequest | None = None
    peer: str = ""


class Caller(NamedTuple):
    """Who made a call, as authentication found it: the region and account of its credential scope, its access
    key, and its principal's ARN and credentials once its signature was verified (None: not verified,
    `--auth off`); the namespace its tables are in ("" shared, else "<account>/<region>/")."""

    region: str
    account: str
    access_key: str
    principal: str | None = None
    identity: Credentials | None = None
    namespace: str = ""
