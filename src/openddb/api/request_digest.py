"""Digests of request members that compare as DynamoDB compares them (member order ignored): duplicate keys in a
batch, a transaction's request behind its ClientRequestToken."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson


def canonical_digest(value: Any) -> bytes:
    """A digest of a JSON value that ignores member order (DynamoDB compares requests and keys, not bytes), for a
    value of any depth: one nested deeper than orjson writes is walked without recursion."""
    try:
        return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).digest()
    except TypeError:
        return _deep_digest(value)


def _deep_digest(value: Any) -> bytes:
    digest = hashlib.sha256()
    pending: list[Any] = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            digest.update(b"{%d" % len(node))
            for key in sorted(node, reverse=True):
                pending.append(node[key])
                pending.append(("key", key))
        elif isinstance(node, list):
            digest.update(b"[%d" % len(node))
            pending.extend(reversed(node))
        else:
            digest.update(orjson.dumps(node[1] if isinstance(node, tuple) else node) + b",")
    return digest.digest()
