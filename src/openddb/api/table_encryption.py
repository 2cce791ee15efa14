"""A table's server-side encryption: CreateTable's and UpdateTable's SSESpecification, the KMS key's ARN, and the
SSEDescription."""

from __future__ import annotations

import re
import uuid
from typing import Any

from openddb.api.table_shapes import SSE_SPECIFICATION
from openddb.errors import (
    invalid,
)
from openddb.model.schema import (
    TableMeta,
)


def sse_of(request: dict[str, Any]) -> dict[str, Any] | None:
    """The request's SSESpecification checked as DynamoDB checks it, with only the members DynamoDB knows (it
    is kept in the table description)."""
    sse = request.get("SSESpecification")
    if sse is None:
        return None
    sse = {name: sse[name] for name in SSE_SPECIFICATION.fields if sse.get(name) is not None}
    if sse.get("Enabled") is False:
        for member in ("SSEType", "KMSMasterKeyId"):
            if member in sse:
                raise invalid(f"{member} can not be specified if Enabled is false")
    if sse.get("SSEType") == "AES256":
        raise invalid("SSEType AES256 is not supported")
    if "KMSMasterKeyId" in sse and sse.get("SSEType") != "KMS":
        raise invalid("SSEType KMS is required if KMSMasterKeyId is specified")
    return sse


def sse_enabled(sse: dict[str, Any]) -> bool:
    """Whether an SSESpecification asks for a KMS key: Enabled true, or SSEType KMS without Enabled."""
    return bool(sse.get("Enabled", sse.get("SSEType") == "KMS"))


_KEY_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32}")  # a KMS key id


def kms_key_arn(meta: TableMeta, sse: dict[str, Any] | None = None) -> str:
    """The ARN DynamoDB shows for a table's KMS key (or for the key of `sse`, a table's new SSESpecification).
    Without a KMS service here, a key id or alias maps to a stable made-up key id; the AWS managed key (no key
    given, or alias/aws/dynamodb) is one per account and region."""
    key = (sse or meta.sse or {}).get("KMSMasterKeyId") or "alias/aws/dynamodb"
    if key.startswith("arn:"):
        return str(key)
    if not _KEY_ID.fullmatch(key):
        key = str(uuid.uuid5(uuid.NAMESPACE_URL, f"kms:{meta.account}:{meta.region}:{key}"))
    return f"arn:aws:kms:{meta.region}:{meta.account}:key/{key}"


def sse_description(meta: TableMeta, encrypted: bool) -> dict[str, Any]:
    """The KMS encryption a table asked for, described as what it is here. Its Status is ENABLED, as DynamoDB's,
    only when the engine encrypts what it writes to disk (`encrypted`: the embedded store with a key); it is
    encrypted with the store's key then, which plays the part of the table's KMS key (whose ARN is kept and shown).
    Otherwise the data is plaintext as far as this server can tell, so DISABLED: a server that showed encryption it
    does not do would mislead the teams who test their encryption settings here."""
    return {"Status": "ENABLED" if encrypted else "DISABLED", "SSEType": "KMS", "KMSMasterKeyArn": kms_key_arn(meta)}


def plan_sse(meta: TableMeta, request: dict[str, Any]) -> dict[str, Any] | None:
    """UpdateTable's SSESpecification, checked against the table's encryption (applied once every other change
    is checked)."""
    sse = sse_of(request)
    if sse is not None and (sse.get("Enabled") is False or not sse) and meta.sse is None:
        raise invalid("Table is already encrypted by default")
    # Only the key's ARN itself re-sent is refused: its alias or key id starts a re-encryption (recorded).
    if sse is not None and "KMSMasterKeyId" in sse and meta.sse is not None and \
            sse["KMSMasterKeyId"] == kms_key_arn(meta):
        raise invalid("Table is already encrypted with given KMSMasterKeyId. Use KMSMasterKeyId parameter if you "
                      "want to change Master Key")
    return sse
