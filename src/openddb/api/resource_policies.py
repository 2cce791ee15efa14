"""PutResourcePolicy, GetResourcePolicy and DeleteResourcePolicy: resource-based policies of tables and streams
(API Reference; kept and evaluated by identity/resource_policies.py), and CreateTable's ResourcePolicy.

- ResourceArn names a table or its latest stream; a missing one is ResourceNotFoundException.
- A policy is JSON whose statements name Effect, Action, Principal and Resource, at most 20 KB counting white
  space (API Reference, PutResourcePolicy).
- PutResourcePolicy of the very document attached answers its RevisionId again (the API Reference: idempotent);
  another gets a new one. ExpectedRevisionId makes a Put or Delete conditional: on that revision, or with
  "NO_POLICY" on no policy; otherwise PolicyNotFoundException.
- ConfirmRemoveSelfResourceAccess: a caller whose new policy would deny itself PutResourcePolicy on the resource
  must confirm so (a user or role; the root is not held to policies here).
- DeleteResourcePolicy of a resource without a policy answers without a RevisionId ("This value will be empty if
  you make a request against a resource without a policy", the API Reference's output shape).
The words of the refusals are not recorded in public: each is marked a best guess.
"""

from __future__ import annotations

from typing import Any

from openddb.api import validation as v
from openddb.api.context import RequestContext
from openddb.errors import PolicyNotFoundException, ResourceNotFoundException, ValidationException
from openddb.identity.policies import compiled
from openddb.identity.query import QueryError
from openddb.identity.resource_policies import (
    MAX_POLICY_BYTES,
    NO_POLICY,
    Attached,
    attached,
    new_revision,
    write,
)
from openddb.model.schema import TableMeta

_ARN = v.Str(required=True, min_len=1, max_len=1283)
_REVISION = v.Str(min_len=1, max_len=255)
PUT_RESOURCE_POLICY = v.Struct({"ResourceArn": _ARN, "Policy": v.Str(required=True),
                                "ExpectedRevisionId": _REVISION, "ConfirmRemoveSelfResourceAccess": v.Bool()})
GET_RESOURCE_POLICY = v.Struct({"ResourceArn": _ARN})
DELETE_RESOURCE_POLICY = v.Struct({"ResourceArn": _ARN, "ExpectedRevisionId": _REVISION})


def _resource(context: RequestContext, arn: str) -> TableMeta:
    """The table whose ARN, or whose latest stream's ARN, `arn` is."""
    parts = arn.split(":", 5)
    path = parts[5].split("/") if len(parts) == 6 and parts[2] == "dynamodb" else []
    if len(path) not in (2, 4) or path[0] != "table" or (len(path) == 4 and path[2] != "stream"):
        # best guess at the words (those TagResource answers an ARN of no table or stream with)
        raise ValidationException(f"Invalid resource arn provided, only table or stream is accepted. Provided "
                                  f"resource arn: {arn}")
    # (looked up in the namespace of the account the ARN names: another account's is authorized before)
    meta = context.find_table(f"{':'.join(parts[:5])}:table/{path[1]}")[1] if parts[3] == context.region else None
    if meta is None or (len(path) == 4 and meta.stream_arn != arn) or (len(path) == 2 and meta.arn != arn):
        # best guess: the words TagResource answers a missing resource with
        raise ResourceNotFoundException(f"Requested resource not found: ResourceArn: {arn} not found")
    return meta


def check_policy(text: str) -> None:
    """ValidationException unless `text` is a resource-based policy DynamoDB would keep."""
    if len(text.encode()) > MAX_POLICY_BYTES:  # best guess at the words
        raise ValidationException(f"Policy document size exceeds the maximum allowed size of {MAX_POLICY_BYTES} "
                                  "bytes")
    try:
        compiled(text, "resource")
    except QueryError as error:  # best guess at the words (IAM's check, DynamoDB's error type)
        raise ValidationException(f"Invalid policy document: {error.message}") from None


def _not_found(arn: str) -> PolicyNotFoundException:  # best guess at the words
    return PolicyNotFoundException(f"Resource-based policy not found for the provided ResourceArn: {arn}")


def _expected(current: Attached | None, expected: str | None, arn: str) -> None:
    """PolicyNotFoundException unless the policy attached is the one ExpectedRevisionId names."""
    if expected is None:
        return
    if (current is None) != (expected == NO_POLICY) or (current is not None and current.revision != expected):
        raise _not_found(arn)


def put_resource_policy(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(PUT_RESOURCE_POLICY, request)
    arn, text = request["ResourceArn"], request["Policy"]
    meta = _resource(context, arn)
    check_policy(text)
    access = context.access
    if (access is not None and not request.get("ConfirmRemoveSelfResourceAccess")
            and access.denied_by(compiled(text, "resource"), "dynamodb:PutResourcePolicy", arn)):
        # best guess at the words
        raise ValidationException("The policy would remove your access to change the policy of this resource; set "
                                  "ConfirmRemoveSelfResourceAccess to true to confirm")
    made: list[str] = []

    def change(current: Attached | None) -> Attached:
        _expected(current, request.get("ExpectedRevisionId"), arn)
        if current is not None and current.policy == text:
            made.append(current.revision)
            return current
        new = Attached(text, new_revision(None if current is None else current.revision))
        made.append(new.revision)
        return new
    write(context.engine, arn, meta.uuid, change)
    return {"RevisionId": made[-1]}


def get_resource_policy(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(GET_RESOURCE_POLICY, request)
    arn = request["ResourceArn"]
    found = attached(lambda: context.engine, arn, _resource(context, arn).uuid)
    if found is None:
        raise _not_found(arn)
    return {"Policy": found.policy, "RevisionId": found.revision}


def delete_resource_policy(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(DELETE_RESOURCE_POLICY, request)
    arn = request["ResourceArn"]
    meta = _resource(context, arn)
    removed: list[str] = []

    def change(current: Attached | None) -> None:
        _expected(current, request.get("ExpectedRevisionId"), arn)
        if current is not None:
            removed.append(current.revision)
    write(context.engine, arn, meta.uuid, change)
    return {"RevisionId": removed[0]} if removed else {}


def attach_created(context: RequestContext, meta: TableMeta, text: str) -> None:
    """CreateTable's ResourcePolicy (checked by `check_policy` before the table was made), attached to it."""
    write(context.engine, meta.arn, meta.uuid, lambda current: Attached(text, new_revision(None)))


HANDLERS = {
    "PutResourcePolicy": put_resource_policy,
    "GetResourcePolicy": get_resource_policy,
    "DeleteResourcePolicy": delete_resource_policy,
}
