"""Resource-based policies of tables and streams (PutResourcePolicy, GetResourcePolicy, DeleteResourcePolicy and
CreateTable's ResourcePolicy: api/resource_policies.py): where they are kept, and how they join a call's
authorization (identity/access.py).

Each is a record of the identity store (kind "policy", named by the resource's ARN): the document as given, its
RevisionId, and the id (uuid) of the table it belongs to. A table deleted and made again under its name has a new
uuid, so the policy of the former table no longer applies to it, as DynamoDB deletes a table's policy with it.

Evaluation within one account (IAM User Guide, "Policy evaluation logic" and "Cross account policy evaluation
logic", same account): a statement of a resource policy applies to a caller its Principal names: "*", the
caller's own ARN (a user's; an assumed role's session ARN or its role's ARN). An explicit Deny of either kind of
policy wins; then an Allow of either allows; else the default deny. (A Principal naming the account alone grants
nothing by itself here: it delegates to the identity policies, as IAM reads it.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from openddb.identity.policies import Statement, compiled
from openddb.identity.store import CACHE_SECONDS, Doc, IdentityStore
from openddb.model.schema import namespace_of_arn
from openddb.storage.base import Engine

# The policy's largest size, white space counted (API Reference, PutResourcePolicy: "20 KB").
MAX_POLICY_BYTES = 20 * 1024
NO_POLICY = "NO_POLICY"  # ExpectedRevisionId: attach only where no policy is attached (API Reference)
# ARN -> (until when it is trusted, the record): shared by every store of this process, so a change made here
# applies here at once, and one made by another worker or node within CACHE_SECONDS.
_CACHE: dict[str, tuple[float, Doc | None]] = {}


@dataclass(frozen=True, slots=True)
class Attached:
    """A resource's policy: its document and revision."""

    policy: str
    revision: str


def base_arn(resource: str) -> str:
    """The ARN whose policy governs `resource`: a table's for the table and its indexes (the Developer Guide: index
    permissions are in the table's policy), a stream's for the stream."""
    head, marker, _ = resource.partition("/index/")
    return head if marker else resource


def _record(engine_of: Callable[[], Engine], arn: str) -> Doc | None:
    now = time.monotonic()
    cached = _CACHE.get(arn)
    if cached is not None and cached[0] > now:
        return cached[1]
    record = IdentityStore(engine_of).get("policy", arn)
    if len(_CACHE) > 4096:
        _CACHE.clear()
    _CACHE[arn] = (now + CACHE_SECONDS, record)
    return record


def attached(engine_of: Callable[[], Engine], arn: str, table_uuid: str) -> Attached | None:
    """The policy attached to the resource `arn` of the table `table_uuid` (None: none)."""
    record = _record(engine_of, arn)
    if record is None or record["table"] != table_uuid:
        return None
    return Attached(record["policy"], record["revision"])


def statements_of(engine: Engine, resource: str, namespaced: bool = False) -> tuple[Statement, ...]:
    """The statements of the policy that governs `resource` (none if it has none, or its table is gone);
    `namespaced`: tables are kept by account and region, as the ARN names them."""
    arn = base_arn(resource)
    record = _record(lambda: engine, arn)
    if record is None:
        return ()
    name = arn.partition(":table/")[2].split("/", 1)[0]
    meta = engine.get_table(namespace_of_arn(arn, namespaced) + name)
    if meta is None or meta.uuid != record["table"]:
        return ()
    return compiled(record["policy"], "resource")


def write(engine: Engine, arn: str, table_uuid: str, change: Callable[[Attached | None], Attached | None]) -> None:
    """Change the policy of `arn` in one write of the store: `change(current) -> new` (None: removed; the current
    object itself: left as it is), which may raise to refuse."""
    def apply(old: Doc | None) -> Doc | None:
        current = None if old is None or old["table"] != table_uuid else Attached(old["policy"], old["revision"])
        new = change(current)
        if new is None:
            return None
        if new is current:
            return old
        return {"table": table_uuid, "policy": new.policy, "revision": new.revision}
    IdentityStore(lambda: engine).write([("policy", arn, apply)])
    _CACHE.pop(arn, None)


def new_revision(previous: str | None) -> str:
    """A RevisionId: the time in milliseconds, as DynamoDB's look (best guess at their make), past the former's."""
    stamp = int(time.time() * 1000)
    if previous is not None and previous.isdigit():
        stamp = max(stamp, int(previous) + 1)
    return str(stamp)
