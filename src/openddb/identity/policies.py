"""Policy evaluation, as IAM evaluates policies within one account (IAM User Guide, "Policy evaluation logic"):
an explicit Deny in any policy wins, else an Allow in any policy allows, else the request is denied by default.

A statement applies to a request when its Action (or NotAction) names the action, its Resource (or NotResource)
names the resource, and every condition of its Condition block holds for the request context. The one evaluator
of the server: IAM's own actions (identity/service.py) and every DynamoDB and Streams call (identity/access.py)
are decided here.

- Action patterns match case-insensitively, Resource patterns case-sensitively; `*` matches any run of characters
  (across ARN segments and "/") and `?` any one character (IAM User Guide, "IAM JSON policy elements: Resource").
- Policy variables `${aws:username}`, `${aws:userid}`, `${aws:PrincipalAccount}`... (any key of the request context)
  are replaced in Resource and in condition values of a policy whose Version is 2012-10-17; `${*}`, `${?}` and
  `${$}` stand for the characters themselves; `${key, 'default'}` gives a default. A variable with no value makes
  the pattern match nothing (IAM: "the policy element is not matched").
- Conditions: the operator families String*, Numeric*, Date*, Bool, BinaryEquals, IpAddress/NotIpAddress, Arn*,
  Null; the `...IfExists` suffix; the `ForAllValues:`/`ForAnyValue:` set prefixes (IAM User Guide, "IAM JSON
  policy elements: Condition operators" and "Multivalued context keys"). Operators in a block, and keys under an
  operator, must all hold; several values of one key are alternatives. A key missing from the context fails a
  positive operator and satisfies a negated one (StringNotEquals, NotIpAddress...); IfExists satisfies either;
  ForAllValues holds for a missing or empty key, ForAnyValue does not.
"""

from __future__ import annotations

import calendar
import ipaddress
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal

import orjson

from openddb.identity.policy_documents import PolicyKind, statements

Decision = Literal["allow", "deny", "none"]
# The request context: condition keys (lower case) -> their values (a single-valued key has one).
Context = Mapping[str, tuple[str, ...]]
_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_SET_PREFIXES = ("forallvalues:", "foranyvalue:")


@lru_cache(maxsize=4096)
def _pattern(text: str, ignore_case: bool) -> re.Pattern[str]:
    """An IAM wildcard pattern (`*`, `?`) as a regular expression."""
    parts = ["." if char == "?" else ".*" if char == "*" else re.escape(char) for char in text]
    return re.compile("".join(parts), re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL)


def _one_of(patterns: Iterable[str], ignore_case: bool) -> re.Pattern[str]:
    """One expression matching what any of the wildcard `patterns` matches."""
    flags = re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL
    return re.compile("|".join(f"(?:{_pattern(text, ignore_case).pattern})" for text in patterns) or "(?!)", flags)


def wildcard_match(pattern: str, value: str, ignore_case: bool = False) -> bool:
    return _pattern(pattern, ignore_case).fullmatch(value) is not None


def _strings(value: Any) -> list[str]:
    """A policy value (string, number, boolean or a list of them) as strings; booleans as IAM writes them."""
    items = value if isinstance(value, list) else [value]
    return [("true" if item else "false") if isinstance(item, bool) else str(item) for item in items
            if isinstance(item, str | int | float | bool)]


def substitute(text: str, context: Context) -> str | None:
    """`text` with its policy variables replaced from the context; None if one has no value (nor a default)."""
    if "${" not in text:
        return text
    missing = False

    def value(match: re.Match[str]) -> str:
        nonlocal missing
        inner = match.group(1)
        if inner in ("*", "?", "$"):
            return inner
        name, _, default = inner.partition(",")
        found = context.get(name.strip().lower())
        if found and len(found) == 1:
            return found[0]
        default = default.strip()
        if len(default) >= 2 and default[0] == default[-1] == "'":
            return default[1:-1]
        missing = True
        return ""
    result = _VARIABLE.sub(value, text)
    return None if missing else result


# --- condition operators -------------------------------------------------------------------------------------------
def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _date(text: str) -> float | None:
    """Epoch seconds of an ISO 8601 time or of an epoch number."""
    number = _number(text)
    if number is not None:
        return number
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return float(calendar.timegm(parsed.timetuple()))
    return parsed.timestamp()


def _ordered(convert: Callable[[str], float | None], compare: Callable[[float, float], bool]) -> _Compare:
    def check(given: str, wanted: str) -> bool:
        left, right = convert(given), convert(wanted)
        return left is not None and right is not None and compare(left, right)
    return check


def _in_network(given: str, wanted: str) -> bool:
    try:
        return ipaddress.ip_address(given) in ipaddress.ip_network(wanted, strict=False)
    except ValueError:
        return False


def _arn_like(given: str, wanted: str) -> bool:
    # (each of the six colon-separated parts matched on its own, the last one with the rest of the ARN)
    parts, patterns = given.split(":", 5), wanted.split(":", 5)
    return len(parts) == len(patterns) == 6 and all(
        wildcard_match(pattern, part) for pattern, part in zip(patterns, parts, strict=True))


_Compare = Callable[[str, str], bool]
# Each positive operator (lower case) -> how one context value is compared with one policy value.
_POSITIVE: dict[str, _Compare] = {
    "stringequals": lambda given, wanted: given == wanted,
    "stringequalsignorecase": lambda given, wanted: given.lower() == wanted.lower(),
    "stringlike": lambda given, wanted: wildcard_match(wanted, given),
    "numericequals": _ordered(_number, lambda a, b: a == b),
    "numericlessthan": _ordered(_number, lambda a, b: a < b),
    "numericlessthanequals": _ordered(_number, lambda a, b: a <= b),
    "numericgreaterthan": _ordered(_number, lambda a, b: a > b),
    "numericgreaterthanequals": _ordered(_number, lambda a, b: a >= b),
    "dateequals": _ordered(_date, lambda a, b: a == b),
    "datelessthan": _ordered(_date, lambda a, b: a < b),
    "datelessthanequals": _ordered(_date, lambda a, b: a <= b),
    "dategreaterthan": _ordered(_date, lambda a, b: a > b),
    "dategreaterthanequals": _ordered(_date, lambda a, b: a >= b),
    "bool": lambda given, wanted: given.lower() == wanted.lower(),
    "binaryequals": lambda given, wanted: given == wanted,
    "ipaddress": _in_network,
    "arnequals": _arn_like,  # (ArnEquals and ArnLike behave alike: IAM's operator table)
    "arnlike": _arn_like,
}
# Each negated operator -> the positive one it negates.
_NEGATED = {"stringnotequals": "stringequals", "stringnotequalsignorecase": "stringequalsignorecase",
            "stringnotlike": "stringlike", "numericnotequals": "numericequals", "datenotequals": "dateequals",
            "notipaddress": "ipaddress", "arnnotequals": "arnequals", "arnnotlike": "arnlike"}


def _operator_holds(operator: str, key: str, wanted: list[str], context: Context) -> bool:
    """One operator's test of one condition key (the policy's values given)."""
    name = operator.lower()
    prefix = next((prefix for prefix in _SET_PREFIXES if name.startswith(prefix)), "")
    name = name[len(prefix):]
    if_exists = name.endswith("ifexists") and name != "null"
    if if_exists:
        name = name[:-8]
    given = context.get(key.lower())
    if name == "null":
        return any((given is None or not given) == (value.lower() == "true") for value in wanted)
    negated = name in _NEGATED
    compare = _POSITIVE.get(_NEGATED.get(name, name))
    if compare is None:
        return False  # an operator IAM does not have matches nothing
    if not given:  # (missing, or an empty set of values)
        if if_exists:
            return True
        return prefix == "forallvalues:" if prefix else negated
    matches = [any(compare(value, policy) for policy in wanted) != negated for value in given]
    if prefix == "forallvalues:":
        return all(matches)
    if prefix == "foranyvalue:":
        return any(matches)
    return all(matches) if negated else any(matches)


def _conditions_hold(block: Any, context: Context) -> bool:
    if not isinstance(block, dict):
        return False
    for operator, tests in block.items():
        if not isinstance(tests, dict):
            return False
        for key, raw in tests.items():
            values = [text for text in (substitute(value, context) for value in _strings(raw)) if text is not None]
            if not _operator_holds(str(operator), str(key), values, context):
                return False
    return True


# --- statements ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Statement:
    """One statement of a policy, as evaluation reads it."""

    effect: Literal["Allow", "Deny"]
    actions: tuple[str, ...]
    not_actions: bool  # the patterns are NotAction's
    resources: tuple[str, ...] | None  # None: a statement without Resource (a trust or resource policy's)
    not_resources: bool
    condition: dict[str, Any] | None
    variables: bool  # the policy's Version lets variables be replaced (2012-10-17)
    principal: Any = None  # a resource-based policy's Principal (None: an identity policy's statement)
    # The patterns as one expression each, made once (resources: unless a policy variable is to be replaced).
    action_match: re.Pattern[str] | None = None
    resource_match: re.Pattern[str] | None = None

    def names_action(self, action: str) -> bool:
        if self.action_match is not None:
            return (self.action_match.fullmatch(action) is not None) != self.not_actions
        named = any(wildcard_match(pattern, action, ignore_case=True) for pattern in self.actions)
        return named != self.not_actions

    def names_resource(self, resource: str, context: Context) -> bool:
        if self.resources is None:
            return True
        if self.resource_match is not None:
            return (self.resource_match.fullmatch(resource) is not None) != self.not_resources
        named = False
        for pattern in self.resources:
            text = substitute(pattern, context) if self.variables else pattern
            if text is not None and wildcard_match(text, resource):
                named = True
                break
        return named != self.not_resources

    def applies(self, action: str, resource: str, context: Context) -> bool:
        return (self.names_action(action) and self.names_resource(resource, context)
                and (self.condition is None or _conditions_hold(self.condition, context)))


@lru_cache(maxsize=1024)
def compiled(text: str, kind: PolicyKind = "identity") -> tuple[Statement, ...]:
    """A stored policy document's statements (it passed IAM's checks when it was stored), parsed once."""
    checked = statements(text, kind)
    document = orjson.loads(text)  # (`statements` found it an object; variables need Version 2012-10-17)
    variables = document.get("Version") == "2012-10-17"
    found = []
    for raw in checked:
        actions = _strings(raw.get("Action", raw.get("NotAction")))
        resource = raw.get("Resource", raw.get("NotResource"))
        condition = raw.get("Condition")
        resources = None if resource is None else tuple(_strings(resource))
        fixed = resources is not None and not (variables and any("${" in text for text in resources))
        found.append(Statement(raw["Effect"], tuple(actions), "Action" not in raw, resources, "Resource" not in raw,
                               condition if isinstance(condition, dict) else None, variables,
                               raw.get("Principal", raw.get("NotPrincipal")), _one_of(actions, ignore_case=True),
                               _one_of(resources or (), ignore_case=False) if fixed else None))
    return tuple(found)


def decide(policies: Iterable[Iterable[Statement]], action: str, resource: str, context: Context) -> Decision:
    """What the policies say of `action` on `resource` in `context`: "deny" (an explicit Deny applies), "allow"
    (an Allow applies and no Deny does), "none" (nothing allows it: denied by default)."""
    allowed = False
    for policy in policies:
        for statement in policy:
            if statement.applies(action, resource, context):
                if statement.effect == "Deny":
                    return "deny"
                allowed = True
    return "allow" if allowed else "none"


class PolicySet:
    """A principal's identity policies, as every call of its evaluates them: whether any statement has a condition
    (else no condition key need be looked for), and, where no statement has a condition or a policy variable in its
    Resource, each decision made (it then depends on the action and the resource alone, not on the request), so a
    caller's repeated calls are decided by one dict look-up. Iterates as its policies."""

    __slots__ = ("_decisions", "conditional", "policies")

    def __init__(self, policies: tuple[tuple[Statement, ...], ...]) -> None:
        self.policies = policies
        statements = [statement for policy in policies for statement in policy]
        self.conditional = any(statement.condition is not None for statement in statements)
        fixed = not self.conditional and all(statement.resources is None or statement.resource_match is not None
                                              for statement in statements)
        self._decisions: dict[tuple[str, str], Decision] | None = {} if fixed else None

    def __iter__(self) -> Iterator[tuple[Statement, ...]]:
        return iter(self.policies)

    def decide(self, action: str, resource: str, context: Context) -> Decision:
        """`decide` over these policies."""
        decisions = self._decisions
        if decisions is None:
            return decide(self.policies, action, resource, context)
        decision = decisions.get((action, resource))
        if decision is None:
            decision = decide(self.policies, action, resource, context)
            if len(decisions) < _DECISIONS_KEPT:
                decisions[(action, resource)] = decision
        return decision


_DECISIONS_KEPT = 1024  # per PolicySet: a caller's actions on its tables and indexes


def principal_names(principal: Any) -> list[str]:
    """The AWS principals a Principal element names ({"AWS": a name or names}; "*" stands for ["*"])."""
    if principal == "*":
        return ["*"]
    return _strings(principal.get("AWS")) if isinstance(principal, dict) else []


def trusts(text: str, account: str, names: Iterable[str], context: Context,
           action: str = "sts:AssumeRole") -> Literal["principal", "account"] | None:
    """How a role's trust policy lets a principal of `account`, known by `names` (its ARN, an assumed role's role
    ARN), assume it: "principal" where an Allow statement names it itself ("*" or one of `names`) and its
    conditions hold, "account" where only statements naming its account (the id or the account's root ARN) allow
    (the account then leaves the decision to the principal's identity policies: see sts.py); None where none
    allows, or a statement naming it either way denies."""
    own = frozenset(("*", *names))
    by_account = (account, f"arn:aws:iam::{account}:root")
    direct: list[Statement] = []
    applying: list[Statement] = []
    for statement in compiled(text, "trust"):
        named = principal_names(statement.principal)
        if any(name in own for name in named):
            direct.append(statement)
            applying.append(statement)
        elif any(name in by_account for name in named):
            applying.append(statement)
    if decide([applying], action, "", context) != "allow":
        return None
    return "principal" if decide([direct], action, "", context) == "allow" else "account"


def epoch_text(epoch: float) -> str:
    """aws:CurrentTime's value: an ISO 8601 time."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
