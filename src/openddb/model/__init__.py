"""The DynamoDB value model: attribute values, numbers, key encoding and table schemas."""

from __future__ import annotations

from typing import Any

# An attribute value in DynamoDB's wire form: a dict with exactly one type key ("S", "N", "B", "BOOL",
# "NULL", "M", "L", "SS", "NS", "BS"). After validation N is normalized and B is canonical base64
# (see docs/ARCHITECTURE.md, "Values inside the server").
AttributeValue = dict[str, Any]
Item = dict[str, AttributeValue]
