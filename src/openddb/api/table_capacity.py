"""UpdateTable's capacity planners (billing mode, provisioned and on-demand throughput, table class, index updates)
and the quotas on how often they may change; CreateTable's provisioned units."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from openddb.api import indexes as ix
from openddb.api import quotas
from openddb.api.context import RequestContext
from openddb.api.throughput import (
    count_decrease,
    provisioned_units,
)
from openddb.errors import (
    LimitExceededException,
    ValidationException,
    invalid,
)
from openddb.model.schema import (
    BillingMode,
    IndexMeta,
    TableMeta,
)


def provisioned_request(request: dict[str, Any], billing_mode: BillingMode) -> tuple[int, int]:
    """The (read, write) units a request provisions under `billing_mode` (0, 0 on demand), refused as DynamoDB does
    when given where not allowed or missing where required."""
    throughput = request.get("ProvisionedThroughput")
    if billing_mode == "PAY_PER_REQUEST":
        if throughput is not None:
            raise invalid("Neither ReadCapacityUnits nor WriteCapacityUnits can be specified when BillingMode "
                          "is PAY_PER_REQUEST")
        return 0, 0
    if throughput is None:
        # The same wording whether BillingMode PROVISIONED was sent or defaulted.
        raise invalid("ReadCapacityUnits and WriteCapacityUnits must both be specified when BillingMode "
                      "is PROVISIONED")
    return provisioned_units(throughput)


def throughput_mode_as_billing_mode(request: dict[str, Any]) -> None:
    """TableThroughputMode, a member outside the SDKs' models that DynamoDB honours (measured with raw requests,
    ExtendDB PR 320, 2026-08): once its value is checked, it stands for BillingMode when that is absent."""
    mode = request.pop("TableThroughputMode", None)
    if mode is not None and request.get("BillingMode") is None:
        request["BillingMode"] = mode


@dataclasses.dataclass(slots=True)
class CapacityPlan:
    """What UpdateTable's capacity members change: indexes created and dropped, the billing mode (`switched` if
    it changes), and the OnDemandThroughput members asked for (-1 clearing one)."""

    created: list[IndexMeta]
    dropped: list[int]
    billing_mode: BillingMode
    switched: bool
    on_demand: dict[str, int]


def plan_capacity(context: RequestContext, meta: TableMeta, request: dict[str, Any], changes: list[str],
                   now: float) -> CapacityPlan:
    """BillingMode, ProvisionedThroughput, OnDemandThroughput and index updates, applied to `meta`."""
    created: list[IndexMeta] = []
    dropped: list[int] = []
    billing_mode: BillingMode = request.get("BillingMode") or meta.billing_mode
    switched = billing_mode != meta.billing_mode
    # Members merge into those set before; -1 clears one (the answer still shows the -1, the table then lacks it).
    # A table switched to provisioned capacity keeps none.
    on_demand = ix.on_demand_request(request.get("OnDemandThroughput") or {}, billing_mode, clearing=True)
    meta.on_demand = ix.merged_on_demand(meta.on_demand, on_demand) if billing_mode == "PAY_PER_REQUEST" else {}
    if request.get("GlobalSecondaryIndexUpdates") is not None:
        ix.require_support(context.engine)
        created, dropped = ix.apply_index_updates(meta, request, now, billing_mode)
    if billing_mode == "PROVISIONED" and request.get("ProvisionedThroughput") is None and (
            meta.billing_mode == "PAY_PER_REQUEST" or request.get("BillingMode") is not None):
        raise invalid("ProvisionedThroughput must be specified when BillingMode is PROVISIONED")
    if switched:
        ix.switch_index_billing(meta, request, billing_mode, created)
    if billing_mode == "PAY_PER_REQUEST":
        _plan_on_demand(meta, request, now)
    elif request.get("ProvisionedThroughput") is not None:
        _plan_provisioned(meta, request, changes, now)
    return CapacityPlan(created, dropped, billing_mode, switched, on_demand)


def _plan_on_demand(meta: TableMeta, request: dict[str, Any], now: float) -> None:
    """An on-demand table stays so, or a provisioned one switches (counted against the daily switches)."""
    if request.get("ProvisionedThroughput") is not None:
        if request.get("BillingMode") == "PAY_PER_REQUEST":
            raise invalid("ProvisionedThroughput cannot be specified when BillingMode is PAY_PER_REQUEST")
        raise invalid("Neither ReadCapacityUnits nor WriteCapacityUnits can be specified when BillingMode "
                      "is PAY_PER_REQUEST")
    if meta.billing_mode != "PAY_PER_REQUEST":
        _count_on_demand_switch(meta, now)
        meta.billing_mode, meta.read_capacity, meta.write_capacity = "PAY_PER_REQUEST", 0, 0
        meta.billing_mode_updated_at = now


def _plan_provisioned(meta: TableMeta, request: dict[str, Any], changes: list[str], now: float) -> None:
    """New provisioned units for the table: increases and decreases counted, the same units alone refused."""
    read, write = provisioned_request(request, "PROVISIONED")
    if (meta.billing_mode == "PROVISIONED" and read == meta.read_capacity
            and write == meta.write_capacity and set(changes) <= {"ProvisionedThroughput", "BillingMode"}):
        raise ValidationException(
            "The provisioned throughput for the table will not change. The requested value equals the "
            f"current value. Current ReadCapacityUnits provisioned for the table: {meta.read_capacity}. "
            f"Requested ReadCapacityUnits: {read}. Current WriteCapacityUnits provisioned for the table: "
            f"{meta.write_capacity}. Requested WriteCapacityUnits: {write}. Refer to the Amazon DynamoDB "
            "Developer Guide for current limits and how to request higher limits.")
    if meta.billing_mode == "PROVISIONED":
        if read > meta.read_capacity or write > meta.write_capacity:
            meta.last_increase = now
        if read < meta.read_capacity or write < meta.write_capacity:
            count_decrease(meta, now)
    else:  # from on-demand: the units provisioned count as an increase (AWS CLI update-table, Example 1)
        meta.last_increase = now
    meta.billing_mode, meta.read_capacity, meta.write_capacity = "PROVISIONED", read, write
    meta.peak_read, meta.peak_write = max(meta.peak_read, read), max(meta.peak_write, write)


def plan_table_class(meta: TableMeta, table_class: str, now: float) -> None:
    _count_class_update(meta, now, same=table_class == (meta.table_class or "STANDARD"))
    # STANDARD on a table that never had a class set leaves it without one (no TableClassSummary), as on DynamoDB.
    if not (table_class == "STANDARD" and meta.table_class is None):
        meta.table_class = table_class


_CLASS_UPDATES, _CLASS_UPDATE_DAYS = 2, 30


def _count_class_update(meta: TableMeta, now: float, *, same: bool) -> None:
    """A table's class may change twice in 30 days (DynamoDB's recorded refusal). The class in use re-sent is
    free, but refused like a change once the two are spent (both recorded)."""
    meta.table_class_updates = [t for t in meta.table_class_updates if now - t < _CLASS_UPDATE_DAYS * 86400]
    if len(meta.table_class_updates) >= _CLASS_UPDATES and quotas.current().applied:
        raise LimitExceededException(f"Subscriber limit exceeded: Updates to TableClass are limited to "
                                     f"{_CLASS_UPDATES} times in {_CLASS_UPDATE_DAYS} day(s).")
    if not same:
        meta.table_class_updates.append(now)


_ON_DEMAND_SWITCHES = 4


def _count_on_demand_switch(meta: TableMeta, now: float) -> None:
    """A table may switch to on-demand four times in a rolling 24 hours (the Developer Guide's quota). The refusal
    keeps the form DynamoDB gave when the quota was once a day, with Java's Date.toString times."""
    meta.on_demand_switches = [t for t in meta.on_demand_switches if now - t < 86400]
    if len(meta.on_demand_switches) >= _ON_DEMAND_SWITCHES and quotas.current().applied:
        raise LimitExceededException(
            f"Subscriber limit exceeded: Update to PayPerRequest mode are limited to {_ON_DEMAND_SWITCHES} times in "
            f"1 day(s). Last update at {_java_date(meta.on_demand_switches[-1])}. Next update can be made at "
            f"{_java_date(meta.on_demand_switches[0] + 86400)}")
    meta.on_demand_switches.append(now)


def _java_date(seconds: float) -> str:
    """A UTC time as Java's Date.toString prints it: Sat Feb 23 03:07:45 UTC 2019."""
    return time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(seconds))
