"""UpdateTable: the request's own rules (one kind of change per call), the planners applied to a copy of the
table's description, and the answer DynamoDB gives while the change is under way."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from openddb import clock
from openddb.api import indexes as ix
from openddb.api import transient
from openddb.api import validation as v
from openddb.api.context import RequestContext
from openddb.api.figures import epoch_millis
from openddb.api.table_capacity import CapacityPlan, plan_capacity, plan_table_class, throughput_mode_as_billing_mode
from openddb.api.table_descriptions import (
    class_summary,
    deleting_descriptions,
    describe,
    warm_throughput,
)
from openddb.api.table_encryption import plan_sse, sse_description
from openddb.api.table_shapes import UPDATE_TABLE
from openddb.api.table_streams import plan_stream
from openddb.api.throughput import (
    check_throughput_quota,
    throughput_description,
)
from openddb.errors import (
    UnsupportedOperationException,
    ValidationException,
    invalid,
)
from openddb.model.schema import (
    IndexMeta,
    TableMeta,
)
from openddb.vectors.updates import update_vector_indexes

# UpdateTable members whose change DynamoDB answers with TableStatus UPDATING (DeletionProtectionEnabled and
# SSESpecification complete with the table ACTIVE).
_UPDATING_MEMBERS = ("ProvisionedThroughput", "BillingMode", "TableClass", "StreamSpecification")


_THROUGHPUT_LIMITS = ("OnDemandThroughput", "WarmThroughput")


# The members UpdateTable's "At least one of ... is required" names, in its order (three are not in the SDKs).
_AT_LEAST_ONE = ("ProvisionedThroughput", "BillingMode", "UpdateStreamEnabled", "GlobalSecondaryIndexUpdates",
                 "SSESpecification", "ReplicaUpdates", "MultiAccountReplicaReady", "ReplicaTransitRoleArn",
                 "MultiRegionConsistency", "DeletionProtectionEnabled", "OnDemandThroughput", "WarmThroughput",
                 "TableClass")


_COUNTED_ABSENT = ("GlobalSecondaryIndexUpdates", *_THROUGHPUT_LIMITS)  # when empty: still named in that list


_TABLE_NAME = v.Struct({"TableName": v.table_name()})


# UpdateTable members that must come alone, in the order DynamoDB names them when several do.
_ALONE = (("SSESpecification", "Server-Side Encryption"), ("TableClass", "TableClass"),
          ("DeletionProtectionEnabled", "DeletionProtection"))


# UpdateTable's global-table members: operations on replicas, witnesses, settings replication and a replica's
# disassociation protection (botocore 1.44: "for the local replica of a multi-Region eventual consistency (MREC)
# global table"), which this server (one region, one account, no replicas) cannot carry out.
_GLOBAL_MEMBERS = ("ReplicaUpdates", "MultiRegionConsistency", "GlobalTableWitnessUpdates",
                   "GlobalTableSettingsReplicationMode", "DisassociationProtectionEnabled")


def _global_members(request: dict[str, Any]) -> list[str]:
    # MultiRegionConsistency alone asks for nothing (DynamoDB's recorded "At least one of ..." refusal).
    return [m for m in _GLOBAL_MEMBERS if request.get(m) is not None and m != "MultiRegionConsistency"]


def _check_one_concern(changes: list[str], request: dict[str, Any]) -> None:
    """UpdateTable makes one kind of change per call: encryption, table class, deletion protection and warm
    throughput each come alone (a global-table member beside them counts as another operation), OnDemandThroughput
    only with BillingMode, and capacity, stream and online index changes one at a time. The wording of every
    refusal: ack-api-quirks' DynamoDB catalogue (DDB-TABLE-442, 433 and 382: live probes in us-east-1 and us-west-2,
    2026-10), which also gives the order when several apply (SSE, TableClass, DeletionProtection, WarmThroughput)."""
    if len(changes) + len(_global_members(request)) > 1:
        for member, what in _ALONE:
            if member in changes:
                raise invalid(f"{what} modification must be the only operation in the request")
    _refuse_global_members(request)
    if len(changes) == 1:
        return
    if "OnDemandThroughput" in changes and set(changes) - {"OnDemandThroughput", "BillingMode"}:
        raise invalid("OnDemandThroughput can only be combined with BillingMode in an UpdateTable request")
    online = [update for update in request.get("GlobalSecondaryIndexUpdates") or []
              if isinstance(update, dict) and (update.get("Create") or update.get("Delete"))]
    if "WarmThroughput" in changes:
        if any(update.get("Create") for update in online):
            raise invalid("Create global secondary index cannot be specified when updating WarmThroughput")
        raise invalid("WarmThroughput must be the only operation in the request")
    if online and "ProvisionedThroughput" in changes:
        raise invalid("You cannot create or delete index while updating table IOPS")
    stream = request.get("StreamSpecification")
    if "ProvisionedThroughput" in changes and isinstance(stream, dict) and stream.get("StreamEnabled"):
        # (also quoted from DynamoDB in terraform-provider-aws issue 35673, 2024)
        raise invalid("You cannot modify stream status while updating table IOPS")
    if online and stream is not None:
        # Recorded for a stream being enabled; "changing stream status" is taken to cover disabling one too.
        raise invalid("You cannot create or delete index while changing stream status")


def _refuse_global_members(request: dict[str, Any]) -> None:
    """A table here never has replicas or a witness, and settings replication needs another account: a request
    for one of them is refused by name (once the table is found and the request's own rules are met), never
    answered as if it had been carried out."""
    if request.get("GlobalTableSettingsReplicationMode") == "ENABLED_WITH_OVERRIDES":
        # What DynamoDB answers for a regional table, as every table here is (ack-api-quirks' DynamoDB catalogue,
        # DDB-TABLE-442, 2026-10: no "1 validation error detected" envelope).
        raise ValidationException("Value 'ENABLED_WITH_OVERRIDES' at 'GlobalTableSettingsReplicationMode' failed to "
                                  "satisfy constraint: Only ENABLED and DISABLED settings replication are supported "
                                  "for a Regional Table.")
    for member in _global_members(request):
        raise UnsupportedOperationException(
            f"UpdateTable's {member}", "its tables have no replicas in other Regions or accounts")


def update_table(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    if request.get("VectorIndexUpdates") is not None:
        return update_vector_indexes(context, request)
    changes = _update_changes(request)
    before = context.described_table(request["TableName"])
    meta = copy.deepcopy(before)  # the engine's cached description stays untouched if the request is refused
    _check_one_concern(changes, request)
    now = clock.now()
    transient.refuse_if_busy(before, now)  # (an UpdateTable while the last one is under way)
    if "WarmThroughput" in changes:  # it only ever grows
        current = warm_throughput(meta)
        meta.peak_read, meta.peak_write = ix.warm_request(
            request["WarmThroughput"], (current["ReadUnitsPerSecond"], current["WriteUnitsPerSecond"]),
            (ix.DECREASING, ix.DECREASING))
    if request.get("StreamSpecification") is not None:
        plan_stream(meta, request["StreamSpecification"], now)
    sse = plan_sse(meta, request)
    plan = plan_capacity(context, meta, request, changes, now)
    if request.get("DeletionProtectionEnabled") is not None:
        meta.deletion_protection = bool(request["DeletionProtectionEnabled"])
    if request.get("TableClass") is not None:
        plan_table_class(meta, request["TableClass"], now)
    if sse is not None:
        meta.sse = sse if sse.get("Enabled", True) else None
    if any(request.get(k) is not None for k in ("ProvisionedThroughput", "BillingMode", "GlobalSecondaryIndexUpdates",
                                                 "OnDemandThroughput", "WarmThroughput")):
        check_throughput_quota(context.engine, meta, context.region, before)
    # Described before the change is stored: an engine may remove a dropped index's entries along with it.
    deleting = deleting_descriptions(context, before, [i for i in before.indexes if i.index_id in plan.dropped])
    if transient.delayed():
        _hold_statuses(request, changes, before, meta, plan, now)
    context.engine.update_table(meta)
    for index_id in plan.dropped:
        context.engine.drop_index(meta, index_id)
    for index in plan.created:
        ix.schedule_backfill(context.engine, meta, index)
    return {"TableDescription": _update_answer(context, request, changes, before, meta, plan, deleting, now)}


def _update_changes(request: dict[str, Any]) -> list[str]:
    """UpdateTable's request-only rules, checked before the table is looked up: the members that ask for a change
    (an empty WarmThroughput or OnDemandThroughput counts as absent, an empty GlobalSecondaryIndexUpdates is
    refused)."""
    v.validate_named(UPDATE_TABLE, request)
    throughput_mode_as_billing_mode(request)
    if not str(request["TableName"]).startswith("arn:"):  # a name, not an ARN: a table name's constraints, first
        v.validate(_TABLE_NAME, {"TableName": request["TableName"]})
    changes = [k for k in ("ProvisionedThroughput", "BillingMode", "StreamSpecification", "SSESpecification",
                           "TableClass", "DeletionProtectionEnabled", "GlobalSecondaryIndexUpdates",
                           "OnDemandThroughput", "WarmThroughput")
               if request.get(k) is not None and not (k in _THROUGHPUT_LIMITS and request[k] == {})]
    if request.get("GlobalSecondaryIndexUpdates") == [] and len(changes) > 1:
        raise invalid("List of GlobalSecondaryIndexUpdates is empty")
    if changes in ([], ["GlobalSecondaryIndexUpdates"]) and not request.get("GlobalSecondaryIndexUpdates") \
            and not _global_members(request):
        # The list leaves out a member the request carried to no effect (recorded for MultiRegionConsistency).
        named = [m for m in _AT_LEAST_ONE if request.get(m) is None or m in _COUNTED_ABSENT]
        raise ValidationException(f"At least one of {', '.join(named[:-1])} or {named[-1]} is required")
    for update in request.get("GlobalSecondaryIndexUpdates") or []:  # checked even before a missing table
        action = update.get("Update") if isinstance(update, dict) else None
        if isinstance(action, dict) and action.get("WarmThroughput") == {}:
            raise invalid("WarmThroughput must have at least one of ReadUnitsPerSecond or WriteUnitsPerSecond "
                          f"specified for index: {action.get('IndexName')}")
    return changes


def _update_answer(context: RequestContext, request: dict[str, Any], changes: list[str], before: TableMeta,
                   meta: TableMeta, plan: CapacityPlan, deleting: list[dict[str, Any]],
                   now: float) -> dict[str, Any]:
    """UpdateTable's TableDescription. DynamoDB answers while the change is still being applied: the throughput
    shown is the one before it (units and decreases counted), for the table and for each index an Update action
    changes (shown UPDATING); the times of the last increase and decrease are already the new ones."""
    updating = _table_updating(request, plan)
    to_on_demand = plan.switched and plan.billing_mode == "PAY_PER_REQUEST"
    description = describe(context, meta, status="UPDATING" if updating else None, fresh=to_on_demand)
    if deleting:
        description.setdefault("GlobalSecondaryIndexes", []).extend(deleting)
    # A switch from on-demand has no units before it: it answers the new ones (AWS CLI update-table, Example 1).
    if not plan.switched or to_on_demand:
        description["ProvisionedThroughput"] = _throughput_before(before, meta)
    if to_on_demand:  # the switch answers 0/0, stamped as a decrease (recorded)
        description["ProvisionedThroughput"].update(ReadCapacityUnits=0, WriteCapacityUnits=0,
                                                    LastDecreaseDateTime=epoch_millis(now))
    if "WarmThroughput" in changes:  # the warm throughput before the change, being raised
        description["WarmThroughput"] = {**warm_throughput(before), "Status": "UPDATING"}
    if request.get("TableClass") is not None:  # the class changes once the update settles
        description.pop("TableClassSummary", None)
        if before.table_class is not None:
            description["TableClassSummary"] = class_summary(before)
    _answer_index_updates(description, request, before, meta, plan.created)
    if request.get("SSESpecification") is not None:  # the change takes a while: the encryption before it is shown
        description["SSEDescription"] = {**(sse_description(before, context.engine.encrypted) if before.sse else {}),
                                         "Status": "UPDATING"}
    if plan.on_demand:  # a member just cleared is answered as -1
        shown = {**meta.on_demand, **plan.on_demand}
        description["OnDemandThroughput"] = {m: shown[m] for m in ix.ON_DEMAND_MEMBERS if m in shown}
    return description


def _table_updating(request: dict[str, Any], plan: CapacityPlan) -> bool:
    """Whether UpdateTable's change makes the table UPDATING (an index's own update leaves it ACTIVE)."""
    return any(request.get(k) is not None for k in _UPDATING_MEMBERS) or bool(plan.created or plan.dropped)


def _hold_statuses(request: dict[str, Any], changes: list[str], before: TableMeta, meta: TableMeta,
                   plan: CapacityPlan, now: float) -> None:
    """With --delay-transient-statuses, in the description stored with the change: the table UPDATING (for a change
    of its own), new GSIs CREATING, dropped ones DELETING, updated ones UPDATING, raised warm throughputs and a
    change of encryption UPDATING, for the delay."""
    end = transient.until(now)
    # An online index change answers UPDATING, but the table is soon ACTIVE again while the index is CREATING or
    # DELETING: that is when DynamoDB's "Only 1 online index ..." refusal is met.
    if any(request.get(k) is not None for k in _UPDATING_MEMBERS):
        meta.pending, meta.pending_until = "UPDATING", end
    if "WarmThroughput" in changes:
        meta.warm_until = end
    if "SSESpecification" in changes:
        meta.sse_until = end
    for index in plan.created:
        index.pending, index.pending_until = "CREATING", end
    meta.dropping = transient.dropping(meta, now) + [
        dataclasses.replace(index, pending="DELETING", pending_until=end)
        for index in before.indexes if index.index_id in plan.dropped]
    for update in request.get("GlobalSecondaryIndexUpdates") or []:
        action = update.get("Update")
        updated = meta.index(action["IndexName"]) if action else None
        if updated is None:
            continue
        if action.get("ProvisionedThroughput") is not None or action.get("OnDemandThroughput") is not None:
            updated.pending, updated.pending_until = "UPDATING", end
        elif action.get("WarmThroughput") is not None:
            updated.warm_until = end


def _answer_index_updates(description: dict[str, Any], request: dict[str, Any], before: TableMeta,
                          meta: TableMeta, created: list[IndexMeta]) -> None:
    """An index's capacity or on-demand limits change with the index UPDATING; its warm throughput grows with the
    index ACTIVE and only its WarmThroughput UPDATING; an index just created is not backfilling yet."""
    actions = {update["Update"]["IndexName"]: update["Update"]
               for update in request.get("GlobalSecondaryIndexUpdates") or [] if update.get("Update")}
    for entry in description.get("GlobalSecondaryIndexes", []):
        old = before.index(entry["IndexName"])
        action = actions.get(entry["IndexName"])
        if action is None or old is None:
            pass
        elif action.get("ProvisionedThroughput") is not None or action.get("OnDemandThroughput") is not None:
            entry["IndexStatus"] = "UPDATING"
            entry["ProvisionedThroughput"] = _throughput_before(old, meta.index(entry["IndexName"]) or old)
        elif "WarmThroughput" in entry:
            entry["WarmThroughput"]["Status"] = "UPDATING"
        if any(index.name == entry["IndexName"] for index in created):
            entry["Backfilling"] = False  # still being allocated: its backfill has not begun


def _throughput_before(before: TableMeta | IndexMeta, after: TableMeta | IndexMeta) -> dict[str, Any]:
    """UpdateTable's answer on a throughput change: units and decrease count as before it, times as after it."""
    shown = throughput_description(before)
    for member, value in throughput_description(after).items():
        if member.endswith("DateTime"):
            shown[member] = value
    return shown
