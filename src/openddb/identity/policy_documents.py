"""IAM policy documents: the checks IAM makes when one is stored (MalformedPolicyDocument, in IAM's words where
they are public), and the one question this server asks of a trust policy: does it let a principal assume the
role. (Evaluating identity policies for DynamoDB calls is not done here: see README, Identity.)

IAM User Guide, "IAM JSON policy element reference": a policy is a JSON object with Version "2012-10-17" or
"2008-10-17" (optional) and Statement, one statement or a list of them; each statement has Effect (Allow or Deny),
Action or NotAction, and, in an identity policy, Resource or NotResource and no Principal; a role's trust policy
names Principal or NotPrincipal and no Resource.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Any, Literal

import orjson

from openddb.identity.query import QueryError

PolicyKind = Literal["identity", "trust"]
Decision = Literal["allow", "deny", "none"]
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
    else:
        if resource:
            raise _malformed("Has prohibited field Resource")  # (IAM's words for a trust policy's Resource)
        if not principal:
            raise _malformed("AssumeRolepolicy contains an invalid principal")  # best guess at the words


def _values(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


def _names_action(statement: dict[str, Any], action: str) -> bool:
    if "Action" in statement:
        return any(fnmatch.fnmatchcase(action.lower(), pattern.lower()) for pattern in _values(statement["Action"]))
    return not any(fnmatch.fnmatchcase(action.lower(), pattern.lower())
                   for pattern in _values(statement["NotAction"]))


def _names_principal(statement: dict[str, Any], account: str, arn: str) -> bool:
    """Whether the statement's Principal names the caller: "*", {"AWS": "*"}, its account (the id, or the
    account's root ARN) or its ARN."""
    principal = statement.get("Principal")
    if principal == "*":
        return True
    if not isinstance(principal, dict):
        return False
    names = _values(principal.get("AWS"))
    return any(name in ("*", account, f"arn:aws:iam::{account}:root", arn) for name in names)


def trusts(text: str, account: str, arn: str, action: str = "sts:AssumeRole") -> bool:
    """Whether a role's trust policy lets the principal `arn` of `account` assume it: some Allow statement names
    the action and the principal, and no Deny statement does (IAM User Guide, "Policy evaluation logic": an
    explicit deny wins). Conditions are not evaluated: a statement with one does not allow."""
    allowed = False
    for statement in statements(text, "trust"):
        if not _names_action(statement, action) or not _names_principal(statement, account, arn):
            continue
        if statement["Effect"] == "Deny":
            return False
        allowed = allowed or "Condition" not in statement
    return allowed


def size_without_whitespace(text: str) -> int:
    """A policy's size as IAM counts it against its quotas: characters, white space not counted."""
    return sum(1 for character in text if not character.isspace())


def _names_resource(statement: dict[str, Any], resource: str) -> bool:
    if "Resource" in statement:
        return any(fnmatch.fnmatchcase(resource, pattern) for pattern in _values(statement["Resource"]))
    return not any(fnmatch.fnmatchcase(resource, pattern) for pattern in _values(statement["NotResource"]))


def decide(documents: Iterable[str], action: str, resource: str) -> Decision:
    """What identity policies say of `action` on `resource`: "deny" (an explicit Deny names both), "allow" (an
    Allow does, and no Deny), "none" (nothing allows it: denied by default). Conditions are not evaluated: a Deny
    with one still denies, an Allow with one does not allow."""
    allowed = False
    for text in documents:
        for statement in statements(text, "identity"):
            if not _names_action(statement, action) or not _names_resource(statement, resource):
                continue
            if statement["Effect"] == "Deny":
                return "deny"
            allowed = allowed or "Condition" not in statement
    return "allow" if allowed else "none"
