"""Authorization of DynamoDB and DynamoDB Streams calls (`--auth verify`): what a call asks to do (its IAM actions
and resources, its condition keys) and whether the caller's identity policies allow it (identity/policies.py).

The dispatcher's authorize stage (api/dispatch.py) runs `Access.authorize` once a call is authenticated and parsed,
for every caller but the account's root (which may do anything in its account, as on AWS). A call on tables,
streams, backups or the account is decided there, on the resources its request names. A call on items (GetItem,
PutItem, UpdateItem, DeleteItem, Query, Scan, the batches and transactions) is decided where its operation objects
are built (api/items.py, reads.py, batch.py, transactions.py), because the fine-grained condition keys come from
them (Developer Guide, "Using IAM policy conditions for fine-grained access control"):

- dynamodb:LeadingKeys: the partition key values the operation touches (a Query's: its key condition's);
- dynamodb:Attributes: the top-level attributes it reads or writes (a read's projection; a Put's item; an Update's
  key and updated attributes; a Delete's key; a condition's attributes); absent when a read names none (it returns
  every attribute: the policies of the Guide pair this key with dynamodb:Select);
- dynamodb:Select (the request's, else SPECIFIC_ATTRIBUTES for a read with a projection, else ALL_ATTRIBUTES,
  or for an index read ALL_PROJECTED_ATTRIBUTES: the values Query and Scan default to), dynamodb:ReturnValues and
  dynamodb:ReturnConsumedCapacity (the request's, absent if not sent).

Each table of a batch or transaction is checked, each item with its own keys; a transaction's actions are checked
as the item actions they are (TransactWriteItems needs dynamodb:PutItem, UpdateItem, DeleteItem or
ConditionCheckItem; TransactGetItems dynamodb:GetItem), as the Service Authorization Reference lists them.

A refusal is AccessDeniedException in AWS's words: "User: <principal ARN> is not authorized to perform:
<action> on resource: <ARN> because no identity-based policy allows the <action> action", or "... with an
explicit deny in an identity-based policy" (the wordings AWS has used since 2021: quoted from DynamoDB answers in
AntonShuvaev/intellij-dynamodb issue 29, 2023; the explicit-deny form is IAM's, as identity/service.py answers it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from openddb.errors import AccessDeniedException
from openddb.identity.policies import Context, PolicySet, Statement, decide, epoch_text, principal_names
from openddb.identity.sigv4 import Credentials
from openddb.model import schema

if TYPE_CHECKING:
    from openddb.model.schema import TableMeta

# Calls decided where their operations are built (see the module's note), not in the authorize stage.
ITEM_CALLS = frozenset({"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem",
                        "BatchWriteItem", "TransactGetItems", "TransactWriteItems", "ExecuteStatement",
                        "BatchExecuteStatement", "ExecuteTransaction"})
# Calls on no resource but the account: their Resource is "*" (Service Authorization Reference).
ACCOUNT_CALLS = frozenset({"ListTables", "DescribeLimits", "DescribeEndpoints", "ListBackups", "ListGlobalTables",
                           "ListExports", "ListImports", "ListContributorInsights", "ListStreams",
                           "ListBulkOperations"})
# The action an item call's refusal names before its operations are known (a transaction's, a statement's first
# possible one: best guess, the per-operation check names the action of each).
_ITEM_ACTIONS = {"TransactGetItems": "GetItem", "TransactWriteItems": "PutItem", "ExecuteStatement": "PartiQLSelect",
                 "BatchExecuteStatement": "PartiQLSelect", "ExecuteTransaction": "PartiQLSelect"}
# A request's members that name the resource a call acts on, in the order they are looked for.
_RESOURCE_MEMBERS = ("ResourceArn", "StreamArn", "BackupArn", "TableArn", "ExportArn", "ImportArn")


# (access key, peer, region, second, over TLS) -> its global condition keys: a client's calls share them within a
# second.
_CONTEXTS: dict[tuple[str, str, str, int, bool], Context] = {}


def principal_context(credentials: Credentials, now: float, peer: str, region: str, secure: bool = False) -> Context:
    """The global condition keys of a caller's request (see `_principal_context`), made once a second per caller,
    address and region; never to be changed by who receives them. `secure`: the request came over TLS."""
    cached = (credentials.access_key_id, peer, region, int(now), secure)
    context = _CONTEXTS.get(cached)
    if context is None:
        if len(_CONTEXTS) > 1024:
            _CONTEXTS.clear()
        context = _CONTEXTS[cached] = _principal_context(credentials, now, peer, region, secure)
    return context


def _principal_context(credentials: Credentials, now: float, peer: str, region: str, secure: bool) -> Context:
    """The global condition keys of a caller's request (IAM User Guide, "AWS global condition context keys"):
    aws:username (a user's), aws:userid, aws:PrincipalAccount, aws:PrincipalArn (an assumed role's: the role's
    ARN), aws:PrincipalType, aws:CurrentTime, aws:EpochTime, aws:SourceIp (when known), aws:RequestedRegion,
    aws:SecureTransport ("true" for a request sent over TLS: a server started with --tls-cert serves nothing
    else; "false" over plain HTTP)."""
    context: dict[str, tuple[str, ...]] = {
        "aws:userid": (credentials.user_id or credentials.account,),
        "aws:principalaccount": (credentials.account,),
        "aws:currenttime": (epoch_text(now),),
        "aws:epochtime": (str(int(now)),),
        "aws:requestedregion": (region,),
        "aws:securetransport": ("true" if secure else "false",),
    }
    if credentials.source == "user":
        context["aws:username"] = (credentials.arn.rpartition("/")[2],)
        context["aws:principaltype"] = ("User",)
        context["aws:principalarn"] = (credentials.arn,)
    elif credentials.source == "role":
        context["aws:principaltype"] = ("AssumedRole",)
        context["aws:principalarn"] = (f"arn:aws:iam::{credentials.account}:role/{credentials.role}",)
    else:
        context["aws:principaltype"] = ("Account",)
        context["aws:principalarn"] = (credentials.arn,)
    if peer:
        context["aws:sourceip"] = (peer,)
    return context


def table_arn(region: str, account: str, name_or_arn: str) -> str:
    """The ARN of a table named by its name or its ARN (an ARN as given)."""
    return name_or_arn if name_or_arn.startswith("arn:") else schema.table_arn(region, account, name_or_arn)


def _arns_named(request: Mapping[str, Any]) -> list[str]:
    """The table ARNs an item call names: its TableName, a batch's RequestItems, a transaction's items (the JSON
    as sent: this runs before validation)."""
    names: list[Any] = [request.get("TableName")]
    items = request.get("RequestItems")
    if isinstance(items, dict):
        names.extend(items)
    actions = request.get("TransactItems")
    for action in actions if isinstance(actions, list) else ():
        for body in action.values() if isinstance(action, dict) else ():
            if isinstance(body, dict):
                names.append(body.get("TableName"))
    return [name.split("/index/", 1)[0] for name in names if isinstance(name, str) and name.startswith("arn:")]


def key_text(value: Mapping[str, Any]) -> str:
    """A key attribute's value as dynamodb:LeadingKeys holds it: the string, the number as written, the binary's
    base64 text."""
    for text in value.values():
        return str(text)
    return ""


def _request_keys(request: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = {}
    for member, key in (("ReturnValues", "dynamodb:returnvalues"),
                        ("ReturnConsumedCapacity", "dynamodb:returnconsumedcapacity")):
        value = request.get(member)
        if isinstance(value, str):
            found[key] = (value,)
    return found


class ItemKeys(NamedTuple):
    """The fine-grained condition keys of one operation on items. (NamedTuples, this and ItemAccess: one or more are
    made per call, and a frozen dataclass's __init__ costs several times more.)"""

    leading: tuple[str, ...]  # partition key values
    attributes: frozenset[str] | None  # None: the operation names none (a read of every attribute)
    select: str | None = None


class ItemAccess(NamedTuple):
    """One operation on items: its action, its table (and index), and how to find its condition keys (asked only
    where a policy has conditions)."""

    action: str  # e.g. dynamodb:GetItem
    table: TableMeta
    keys: Callable[[], ItemKeys]
    index_name: str | None = None


class Access:
    """One call's authorization: the caller, its policies and the request's condition keys."""

    __slots__ = ("account", "arn", "conditional", "context", "namespaced", "policies", "region", "resource_policy")

    def __init__(self, credentials: Credentials, policies: PolicySet, context: Context, region: str,
                 request: Mapping[str, Any], resource_policy: Callable[[str], tuple[Statement, ...]] | None = None,
                 namespaced: bool = False) -> None:
        self.arn = credentials.arn
        self.account = credentials.account
        # Tables are kept by account and region: another account's resource is reached across accounts.
        self.namespaced = namespaced
        self.policies = policies
        # Whether any identity policy has a condition (else the fine-grained keys are never looked for).
        self.conditional = policies.conditional
        self.region = region
        keys = _request_keys(request)
        self.context: Context = {**context, **keys} if keys else context
        self.resource_policy = resource_policy  # the statements of the policy governing a resource

    @property
    def names(self) -> frozenset[str]:
        """How a resource policy's Principal may name the caller: "*", its own ARN, an assumed role's role ARN; and,
        for a Deny, its account too (see identity/resource_policies.py)."""
        return frozenset({"*", self.arn, *self.context.get("aws:principalarn", ())})

    def require(self, action: str, resource: str, extra: Context | None = None,
                statements: tuple[Statement, ...] | None = None) -> None:
        """AccessDeniedException unless the identity policies or the resource's policy allow `action` on
        `resource` and neither denies it (`statements`: the resource's policy, if the caller looked it up)."""
        context: Context = self.context if extra is None else {**self.context, **extra}
        if self.namespaced and resource != "*" and resource.split(":", 5)[4:5] != [self.account]:
            self._require_across(action, resource, context)
            return
        decision = self.policies.decide(action, resource, context)
        denied_by = "an identity-based policy"
        attached = () if decision == "deny" or self.resource_policy is None or resource == "*" else \
            statements if statements is not None else self.resource_policy(resource)
        if attached:
            granted = decide([self._naming_caller(attached)], action, resource, context)
            if granted == "deny":
                decision, denied_by = "deny", "a resource-based policy"
            elif granted == "allow":
                decision = "allow"
        if decision == "allow":
            return
        reason = (f"with an explicit deny in {denied_by}" if decision == "deny"
                  else f"because no identity-based policy allows the {action} action")
        raise AccessDeniedException(f"User: {self.arn} is not authorized to perform: {action} on resource: "
                                    f"{resource} {reason}")

    def _require_across(self, action: str, resource: str, context: Context) -> None:
        """Another account's resource (IAM User Guide, "Cross-account policy evaluation logic"; the Developer
        Guide, "Cross-account access with resource-based policies in DynamoDB"): the caller's identity policies
        (the root's: everything) and the resource's policy must both allow, and neither deny. The resource policy's
        Principal may name the caller, or its account (which then leaves the rest to the identity policies)."""
        own = self.policies.decide(action, resource, context)
        statements = () if self.resource_policy is None else self.resource_policy(resource)
        account, names = (self.account, f"arn:aws:iam::{self.account}:root"), self.names
        by_name = [statement for statement in statements
                   if any(name in names for name in principal_names(statement.principal))]
        by_account = [statement for statement in statements
                      if any(name in account for name in principal_names(statement.principal))]
        granted = decide([by_name, by_account], action, resource, context)
        if own == "allow" and granted == "allow":
            return
        if own == "deny":
            reason = "with an explicit deny in an identity-based policy"
        elif granted == "deny":
            reason = "with an explicit deny in a resource-based policy"
        elif granted == "allow" and decide([by_name], action, resource, context) == "allow":
            reason = f"because no identity-based policy allows the {action} action"
        else:
            # best guess: AWS words a cross-account refusal so unless the resource policy names the caller itself
            # (the cases observed from Secrets Manager, DevelopersIO (Classmethod) 2021, on access-denied messages
            # naming the policy type; DynamoDB's own cross-account answer is not recorded in public)
            reason = f"because no resource-based policy allows the {action} action"
        raise AccessDeniedException(f"User: {self.arn} is not authorized to perform: {action} on resource: "
                                    f"{resource} {reason}")

    def denied_by(self, statements: tuple[Statement, ...], action: str, resource: str) -> bool:
        """Whether a resource policy's `statements` would deny the caller `action` on `resource` explicitly."""
        return decide([self._naming_caller(statements)], action, resource, self.context) == "deny"

    def _naming_caller(self, statements: tuple[Statement, ...]) -> list[Statement]:
        """The statements of a resource policy that apply to the caller."""
        account = (self.account, f"arn:aws:iam::{self.account}:root")
        names = self.names
        return [statement for statement in statements
                if any(name in names or (statement.effect == "Deny" and name in account)
                       for name in principal_names(statement.principal))]

    def authorize(self, operation: str, request: Mapping[str, Any]) -> None:
        """The authorize stage's decision for a call on tables, streams, backups or the account (an item call is
        decided per operation: `items`)."""
        if operation in ITEM_CALLS:
            if self.namespaced:
                self._reachable(operation, request)
            return
        action = "dynamodb:" + operation
        for resource in self._resources(operation, request):
            self.require(action, resource)
            if operation == "CreateTable" and request.get("ResourcePolicy") is not None:
                self.require("dynamodb:PutResourcePolicy", resource)  # (the API Reference: both are needed)

    def _reachable(self, operation: str, request: Mapping[str, Any]) -> None:
        """A call on items of another account's table is refused here, before the table is looked for (so the
        refusal tells nothing of whether it exists), unless the table's policy names the caller or its account at
        all; the operations are then decided as any (`items`), across accounts."""
        account = (self.account, f"arn:aws:iam::{self.account}:root")
        for arn in _arns_named(request):
            if arn.split(":", 5)[4:5] == [self.account]:
                continue
            statements = () if self.resource_policy is None else self.resource_policy(arn)
            names = self.names
            if not any(name in names or name in account
                       for statement in statements for name in principal_names(statement.principal)):
                action = f"dynamodb:{_ITEM_ACTIONS.get(operation, operation)}"
                raise AccessDeniedException(f"User: {self.arn} is not authorized to perform: {action} on resource: "
                                            f"{arn} because no resource-based policy allows the {action} action")

    def _resources(self, operation: str, request: Mapping[str, Any]) -> list[str]:
        if operation in ACCOUNT_CALLS:
            return ["*"]
        found = []
        if operation == "GetRecords":
            iterator = request.get("ShardIterator")
            if isinstance(iterator, str) and "|" in iterator:  # (the stream's ARN opens it: streams/iterators.py)
                found.append(iterator.split("|", 1)[0])
        for member in _RESOURCE_MEMBERS:
            value = request.get(member)
            if isinstance(value, str) and value:
                found.append(value)
        for member in ("TableName", "TargetTableName", "GlobalTableName"):
            value = request.get(member)
            if isinstance(value, str) and value:
                found.append(table_arn(self.region, self.account, value))
        return found or ["*"]

    def items(self, touched: Iterable[ItemAccess]) -> None:
        """AccessDeniedException unless each operation on items is allowed, with its own condition keys (found
        only where a policy that could apply has conditions: otherwise no condition reads them)."""
        for item in touched:
            # (where tables are kept by account and region, the table's own ARN: it may be another account's)
            resource = item.table.arn if self.namespaced else table_arn(self.region, self.account, item.table.name)
            if item.index_name is not None:
                resource += "/index/" + item.index_name
            # (the resource's policy looked up once, for its conditions and for the decision)
            statements = () if self.resource_policy is None else self.resource_policy(resource)
            if not self.conditional and not any(statement.condition is not None for statement in statements):
                self.require(item.action, resource, statements=statements)
                continue
            keys = item.keys()
            extra: dict[str, tuple[str, ...]] = {"dynamodb:leadingkeys": keys.leading}
            if keys.attributes is not None:
                extra["dynamodb:attributes"] = tuple(sorted(keys.attributes))
            if keys.select is not None:
                extra["dynamodb:select"] = (keys.select,)
            self.require(item.action, resource, extra, statements)
