"""DynamoDB's TableDescription of a table (DescribeTable, and the answers of CreateTable, UpdateTable and
DeleteTable), with the transient statuses of api/transient.py."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from openddb import clock
from openddb.api import indexes as ix
from openddb.api import transient
from openddb.api.context import RequestContext
from openddb.api.figures import counted, epoch_millis
from openddb.api.table_encryption import sse_description
from openddb.api.table_streams import stream_description
from openddb.api.throughput import (
    throughput_description,
)
from openddb.model.schema import (
    IndexMeta,
    TableMeta,
    TableStatus,
)
from openddb.vectors.definitions import describe_vector_indexes


def warm_throughput(meta: TableMeta, now: float = 0.0) -> dict[str, Any]:
    """The table's WarmThroughput: the highest capacity it ever had (12000/4000 once it has been on demand); it
    never goes down when capacity is lowered. UPDATING until a raise is over (by the clock `now`)."""
    read, write = ix.warm_units(meta, (meta.read_capacity, meta.write_capacity), (meta.peak_read, meta.peak_write))
    return {"ReadUnitsPerSecond": read, "WriteUnitsPerSecond": write,
            "Status": transient.warm_status(meta.warm_until, now)}


def class_summary(meta: TableMeta) -> dict[str, Any]:
    summary: dict[str, Any] = {"TableClass": meta.table_class}
    if meta.table_class_updates:
        summary["LastUpdateDateTime"] = epoch_millis(meta.table_class_updates[-1])
    return summary


def describe(context: RequestContext, meta: TableMeta, *, status: TableStatus | None = None,
             counts: bool = True, fresh: bool = False, warm: bool = True) -> dict[str, Any]:
    """DynamoDB's TableDescription of a table.

    `fresh`: answering a CreateTable or a switch to on-demand, which lack LastUpdateToPayPerRequestDateTime until
    the change settles. `warm`: include WarmThroughput, which a CreateTable response lacks."""
    item_count, size = counted(context.engine, meta) if counts else (0, 0)
    now = clock.now()
    status = status or transient.table_status(meta, now)
    description: dict[str, Any] = {
        # Sorted by name, as DynamoDB answers whatever order they were given in.
        "AttributeDefinitions": sorted(meta.attribute_definitions, key=lambda d: d["AttributeName"]),
        "TableName": meta.name,
        "KeySchema": meta.key_schema_wire(),
        "TableStatus": status,
        "CreationDateTime": epoch_millis(meta.created_at),
        "ProvisionedThroughput": throughput_description(meta),
        "TableSizeBytes": size,
        "ItemCount": item_count,
        "TableArn": meta.arn,
        "TableId": meta.uuid,
    }
    # Absent for a table that was always provisioned; once on-demand, it keeps the time of the last switch.
    if meta.billing_mode == "PAY_PER_REQUEST" or meta.billing_mode_updated_at is not None:
        summary: dict[str, Any] = {"BillingMode": meta.billing_mode}
        if not fresh:
            summary["LastUpdateToPayPerRequestDateTime"] = epoch_millis(meta.billing_mode_updated_at
                                                                        or meta.created_at)
        description["BillingModeSummary"] = summary
        # DynamoDB repeats it under the undocumented name of the mode (ExtendDB PR 320, measured 2026-08); that it
        # follows BillingModeSummary's presence exactly is inferred.
        description["TableThroughputModeSummary"] = {
            "TableThroughputMode" if member == "BillingMode" else member: value for member, value in summary.items()}
    description.update(stream_description(meta))
    if now < meta.sse_until:  # a change of encryption still under way (--delay-transient-statuses)
        description["SSEDescription"] = {**(sse_description(meta, context.engine.encrypted) if meta.sse else {}),
                                         "Status": "UPDATING"}
    elif meta.sse is not None:
        description["SSEDescription"] = sse_description(meta, context.engine.encrypted)
    if meta.table_class is not None:
        description["TableClassSummary"] = class_summary(meta)
    description["DeletionProtectionEnabled"] = meta.deletion_protection
    if meta.restore is not None:
        description["RestoreSummary"] = {**meta.restore, "RestoreInProgress": status == "CREATING"}
    if meta.on_demand:
        description["OnDemandThroughput"] = dict(meta.on_demand)
    if warm:
        description["WarmThroughput"] = warm_throughput(meta, now)
    if meta.indexes:
        description.update(ix.describe_indexes(context.engine, meta, now, creating=status == "CREATING",
                                               counts=counts, warm=warm))
    deleting = deleting_descriptions(context, meta, transient.dropping(meta, now), counts=False)
    if deleting:
        description.setdefault("GlobalSecondaryIndexes", []).extend(deleting)
    if meta.vector_indexes:
        description["VectorIndexes"] = describe_vector_indexes(context, meta, counts)
    return description


def deleting_descriptions(context: RequestContext, meta: TableMeta, indexes: list[IndexMeta], *,
                           counts: bool = True) -> list[dict[str, Any]]:
    """Descriptions of `meta`'s GSIs `indexes` as DELETING: UpdateTable's answer still lists a dropped index (as
    described before its entries go), and DescribeTable does while its deletion takes time."""
    if not indexes:
        return []
    gone = copy.copy(meta)
    gone.indexes = [dataclasses.replace(index, status="DELETING", pending=None) for index in indexes]
    deleting: list[dict[str, Any]] = ix.describe_indexes(context.engine, gone, clock.now(), counts=counts).get(
        "GlobalSecondaryIndexes", [])
    return deleting
