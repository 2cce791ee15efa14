"""How `openddb advise` signs its request for a server with --auth verify: the credentials the AWS SDKs find first
(the environment's AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, else the profile AWS_PROFILE
or "default" of the shared credentials file, then of the config file), and Signature Version 4 for service
"dynamodb" (IAM User Guide, "Create a signed AWS API request"), its canonical request built as the server's
verifier builds it (identity/sigv4.py). No credentials found: the request goes unsigned (a server with --auth off
reads none)."""

from __future__ import annotations

import configparser
import hashlib
import hmac
import os
import time
from dataclasses import dataclass
from pathlib import Path

from openddb.identity.sigv4 import SignedRequest, canonical_request, sha256_hex


@dataclass(frozen=True, slots=True)
class Signer:
    access_key: str
    secret: str
    token: str | None = None


def found_signer() -> Signer | None:
    """The credentials of the environment, else of the profile's section of the shared files (None: none)."""
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        return Signer(key, secret, os.environ.get("AWS_SESSION_TOKEN") or None)
    profile = os.environ.get("AWS_PROFILE") or os.environ.get("AWS_DEFAULT_PROFILE") or "default"
    for section in _profile_sections(profile):
        key, secret = section.get("aws_access_key_id"), section.get("aws_secret_access_key")
        if key and secret:
            return Signer(key, secret, section.get("aws_session_token") or None)
    return None


def found_region() -> str:
    """The region the SDKs would sign for: AWS_REGION, AWS_DEFAULT_REGION, the profile's, else us-east-1."""
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        return region
    profile = os.environ.get("AWS_PROFILE") or os.environ.get("AWS_DEFAULT_PROFILE") or "default"
    for section in _profile_sections(profile):
        if section.get("region"):
            return section["region"]
    return "us-east-1"


def _profile_sections(profile: str) -> list[dict[str, str]]:
    """The profile's section of the credentials file, then of the config file ("[profile NAME]" there, but for
    the default one), each present."""
    home = Path.home() / ".aws"
    files = ((os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or str(home / "credentials"), profile),
             (os.environ.get("AWS_CONFIG_FILE") or str(home / "config"),
              profile if profile == "default" else f"profile {profile}"))
    sections = []
    for path, name in files:
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError):
            continue
        if parser.has_section(name):
            sections.append(dict(parser.items(name)))
    return sections


def signed_headers(signer: Signer, region: str, host: str, path_and_query: str,
                   now: float | None = None) -> dict[str, str]:
    """The headers of a signed GET of `path_and_query` on `host` (the Host header the client will send)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    headers = {"host": host, "x-amz-date": stamp}
    if signer.token is not None:
        headers["x-amz-security-token"] = signer.token
    names = tuple(sorted(name.encode() for name in headers))
    request = SignedRequest(b"GET", path_and_query.encode("latin-1"),
                            {name.encode(): value.encode() for name, value in headers.items()}, b"")
    scope = f"{stamp[:8]}/{region}/dynamodb/aws4_request"
    to_sign = b"AWS4-HMAC-SHA256\n%s\n%s\n%s" % (stamp.encode(), scope.encode(),
                                                  sha256_hex(canonical_request(request, names)))
    key = ("AWS4" + signer.secret).encode()
    for part in (stamp[:8], region, "dynamodb", "aws4_request"):
        key = hmac.digest(key, part.encode(), "sha256")
    signature = hmac.new(key, to_sign, hashlib.sha256).hexdigest()
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={signer.access_key}/{scope}, "
                                f"SignedHeaders={b';'.join(names).decode()}, Signature={signature}")
    del headers["host"]  # (urllib sends it)
    return headers
