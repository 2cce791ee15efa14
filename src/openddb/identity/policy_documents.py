"""IAM policy documents: the checks IAM makes when one is stored (MalformedPolicyDocument, in IAM's words where
they are public). Evaluation is identity/policies.py's.

IAM User Guide, "IAM JSON policy element reference": a policy is a JSON object with Version "2012-10-17" or
"2008-10-17" (optional) and Statement, one statement or a list of them; each statement has Effect (Allow or Deny),
Action or NotAction, and, in an identity policy, Resource or NotResource and no Principal; a role's trust policy
names Principal or NotPrincipal and no Resource; a resource-based policy (DynamoDB's) names both.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson

from openddb.identity.query import QueryError

PolicyKind = Literal["identity", "trust", "resource"]
_VERSIONS = ("2012-10-17", "2008-10-17")
_EFFECTS = ("Allow", "Deny")
_STATEMENT_KEYS = frozenset({"Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction", "Resource",
                             "NotResource", "Condition"})


def _malformed(message: str) -> QueryError:
    return QueryError("MalformedPolicyDocument", message, 400)


def statements(text: str, kind: PolicyKind) -> list[dict[str, Any]]:
    """The statements of a policy document, once it passes IAM's checks for its kind; else
    MalformedPolicyDocument."""
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise _malformed("This policy contains invalid Json") from None  # (IAM's words)
    if not isinstance(document, dict):
        raise _malformed("This policy contains invalid Json")
    if "Version" in document and document["Version"] not in _VERSIONS:
        raise _malformed("The policy failed legacy parsing")  # (IAM's words for an unknown Version)
    found = document.get("Statement")
    listed: list[dict[str, Any]] = [item for item in (found if isinstance(found, list) else [found])
                                    if isinstance(item, dict)]
    if not listed or len(listed) != (len(found) if isinstance(found, list) else 1):
        raise _malformed("Syntax errors in policy.")  # (IAM's words)
    for statement in listed:
        _check_statement(statement, kind)
    return listed


def _check_statement(statement: dict[str, Any], kind: PolicyKind) -> None:
    if statement.keys() - _STATEMENT_KEYS or statement.get("Effect") not in _EFFECTS:
        raise _malformed("Syntax errors in policy.")
    if "Action" not in statement and "NotAction" not in statement:
        raise _malformed("Policy statement must contain actions.")  # (IAM's words)
    principal = "Principal" in statement or "NotPrincipal" in statement
    resource = "Resource" in statement or "NotResource" in statement
    if kind == "identity":
        if principal:
            raise _malformed("Policy document should not specify a principal.")  # (IAM's words)
        if not resource:
            raise _malformed("Policy statement must contain resources.")  # (IAM's words)
    elif kind == "trust":
        if resource:
            raise _malformed("Has prohibited field Resource")  # (IAM's words for a trust policy's Resource)
        if not principal:
            raise _malformed("AssumeRolepolicy contains an invalid principal")  # best guess at the words
    elif not principal or not resource:  # a resource-based policy names both (best guess at the words)
        raise _malformed("Policy statement must contain " + ("a principal." if not principal else "resources."))


def size_without_whitespace(text: str) -> int:
    """A policy's size as IAM counts it against its quotas: characters, white space not counted."""
    return sum(1 for character in text if not character.isspace())
