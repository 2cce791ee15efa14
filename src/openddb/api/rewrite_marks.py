"""The marks a legacy rewrite (`legacy`) leaves on the request it rewrote, for the handlers and the expression
checks that word or limit a rewritten member differently; kept apart so that reading them needs no rewriter."""

from __future__ import annotations

from typing import Any

# Where a rewritten request records what it was written from: {"QueryFilter": (names...)} for a Query whose
# FilterExpression came from QueryFilter, {"AttributeUpdates": True} for an UpdateItem whose UpdateExpression
# came from AttributeUpdates, and under "generated" every expression member the rewriter wrote. Not a DynamoDB
# member: the request shapes ignore it, and the rewriters drop one a client sends.
LEGACY_MARK = "@legacy"


def legacy_origin(request: dict[str, Any], member: str) -> Any:
    """What ``member`` (QueryFilter, AttributeUpdates) contributed to a rewritten request, or None."""
    mark = request.get(LEGACY_MARK)
    return mark.get(member) if isinstance(mark, dict) else None


def generated(request: dict[str, Any], member: str) -> bool:
    """True if the expression ``member`` was written here from legacy members. The limits on expressions (size,
    operators) are not the legacy parameters' limits, so they do not apply to it."""
    return member in (legacy_origin(request, "generated") or ())
