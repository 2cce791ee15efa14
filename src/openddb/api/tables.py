"""The control plane's table operations: CreateTable, DescribeTable, ListTables, DeleteTable, DescribeEndpoints and
DescribeLimits here; UpdateTable in table_updates.py. The table's description, stream, encryption and capacity
rules live in the table_* modules; its transient statuses in transient.py."""

from __future__ import annotations

import copy
import uuid
from typing import Any

from openddb import clock
from openddb.api import indexes as ix
from openddb.api import quotas, transient
from openddb.api import validation as v
from openddb.api.backups_runs import system_backup
from openddb.api.context import RequestContext
from openddb.api.resource_policies import attach_created, check_policy
from openddb.api.table_capacity import provisioned_request, throughput_mode_as_billing_mode
from openddb.api.table_descriptions import describe, warm_throughput
from openddb.api.table_encryption import sse_enabled, sse_of
from openddb.api.table_shapes import CREATE_TABLE, DELETE_TABLE, DESCRIBE_TABLE, LIST_TABLES
from openddb.api.table_streams import created_stream
from openddb.api.table_updates import update_table
from openddb.api.tags import check_tags, with_tags
from openddb.api.throughput import check_throughput_quota
from openddb.errors import (
    LimitExceededException,
    ResourceInUseException,
    ValidationException,
    invalid,
)
from openddb.model.schema import (
    BillingMode,
    KeyAttribute,
    TableMeta,
)
from openddb.vectors import definitions as vd


def _key_schema(schema: list[dict[str, str]], types: dict[str, str]) -> tuple[KeyAttribute, KeyAttribute | None]:
    """Check a KeySchema against AttributeDefinitions as CreateTable does."""
    if schema[0]["KeyType"] != "HASH":
        raise ValidationException("Invalid KeySchema: The first KeySchemaElement is not a HASH key type")
    if len(schema) == 2:
        if schema[1]["KeyType"] != "RANGE":
            raise ValidationException("Invalid KeySchema: The second KeySchemaElement is not a RANGE key type")
        if schema[0]["AttributeName"] == schema[1]["AttributeName"]:
            raise invalid("Both the Hash Key and the Range Key element in the KeySchema have the same name")
    keys = [element["AttributeName"] for element in schema]
    if any(name not in types for name in keys):
        if len(types) < len(schema):
            raise ValidationException("Invalid KeySchema: Some index key attribute have no definition")
        raise ix.undefined_keys(keys, list(types))
    hash_key = KeyAttribute(schema[0]["AttributeName"], types[schema[0]["AttributeName"]])
    range_key = None
    if len(schema) == 2:
        range_key = KeyAttribute(schema[1]["AttributeName"], types[schema[1]["AttributeName"]])
    return hash_key, range_key


def create_table(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_named(CREATE_TABLE, request)
    meta = new_table_meta(context, request)
    now = meta.created_at
    _clear_name(context, meta.name, now)
    _check_table_count(context)
    if transient.delayed():
        meta.pending, meta.pending_until = "CREATING", transient.until(now)
        if request.get("WarmThroughput"):
            meta.warm_until = meta.pending_until
    meta = context.engine.create_table(meta)
    if request.get("ResourcePolicy") is not None:
        attach_created(context, meta, request["ResourcePolicy"])
    description = describe(context, meta, status="CREATING", counts=False, fresh=True, warm=False)
    if request.get("WarmThroughput"):  # asked for: answered as being set up
        description["WarmThroughput"] = {**warm_throughput(meta), "Status": "UPDATING"}
    return {"TableDescription": description}


def new_table_meta(context: RequestContext, request: dict[str, Any]) -> TableMeta:
    """The description of the table a validated CreateTable request (or ImportTable's TableCreationParameters, a
    subset of it) asks for, every rule of CreateTable's checked; nothing is stored."""
    throughput_mode_as_billing_mode(request)
    definitions = request["AttributeDefinitions"]
    types: dict[str, str] = {}
    for definition in definitions:
        name = definition["AttributeName"]
        if name in types:
            raise ValidationException(f"Attribute Name is duplicated: {name}")
        types[name] = definition["AttributeType"]
    hash_key, range_key = _key_schema(request["KeySchema"], types)
    vd.check_search_schemas_defined(request, types)
    billing_mode: BillingMode = request.get("BillingMode") or "PROVISIONED"
    indexes = []
    if request.get("LocalSecondaryIndexes") is not None or request.get("GlobalSecondaryIndexes") is not None:
        ix.require_support(context.engine)
        indexes = ix.create_table_indexes(request, types, hash_key, range_key, billing_mode)
    else:
        used = {hash_key.name} | ({range_key.name} if range_key else set())
        used |= set(vd.search_schema_names(request.get("VectorIndexes")))
        if len(types) != len(used):
            raise invalid("Number of attributes in KeySchema does not exactly match number of attributes defined "
                          "in AttributeDefinitions")
    key_names = (hash_key.name, range_key.name) if range_key else (hash_key.name,)
    vectors = vd.create_table_vectors(context, request, types, key_names, billing_mode, len(indexes) + 1)
    read, write = provisioned_request(request, billing_mode)
    on_demand = ix.on_demand_request(request.get("OnDemandThroughput") or {}, billing_mode, clearing=False)
    warm = ix.initial_warm(request.get("WarmThroughput") or {}, billing_mode, (read, write))
    now = clock.now()
    stream = created_stream(context, request["TableName"], request.get("StreamSpecification"), now)
    tags = request.get("Tags") or []
    check_tags(tags)
    sse = sse_of(request)
    if request.get("ResourcePolicy") is not None:
        check_policy(request["ResourcePolicy"])
    meta = TableMeta(
        name=request["TableName"], table_id=0, uuid=str(uuid.uuid4()), hash_key=hash_key, range_key=range_key,
        attribute_definitions=[{"AttributeName": d["AttributeName"], "AttributeType": d["AttributeType"]}
                               for d in definitions],
        created_at=now, billing_mode=billing_mode, read_capacity=read, write_capacity=write,
        peak_read=warm[0], peak_write=warm[1],
        billing_mode_updated_at=now if billing_mode == "PAY_PER_REQUEST" else None,
        tags=with_tags([], tags), sse=sse if sse and sse_enabled(sse) else None,
        table_class=request.get("TableClass"),
        deletion_protection=bool(request.get("DeletionProtectionEnabled", False)), on_demand=on_demand,
        indexes=indexes, next_index_id=len(indexes) + len(vectors) + 1, region=context.region,
        account=context.account, stream=stream, vector_indexes=vectors, namespace=context.namespace)
    vd.check_table_vectors(meta)
    check_throughput_quota(context.engine, meta, context.region)
    return meta


def _clear_name(context: RequestContext, name: str, now: float) -> None:
    """CreateTable's name must be free: a table still CREATING or DELETING under it is refused by its status (one
    in any other status by the engine, as existing); one whose deletion is over is removed now."""
    existing = context.engine.get_table(context.stored(name))
    if existing is None or existing.pending is None:
        return
    if transient.gone(existing, now):
        context.engine.delete_table(existing.stored_name, existing)
    elif transient.table_status(existing, now) in ("CREATING", "DELETING"):
        transient.refuse_if_busy(existing, now)


def _check_table_count(context: RequestContext) -> None:
    """The account's quota of tables in the region (2,500 by default; api/quotas.py), counted as the store holds
    them (tables being created or deleted included, as they are not yet or still there)."""
    configured = quotas.current()
    if not configured.applied:
        return
    held = sum(1 for name in context.table_names() if context.find_table(name)[1] is not None)
    if held >= configured.tables:
        # DynamoDB's words, recorded when the quota was 256: "Subscriber limit exceeded: There is a limit of 256
        # tables per subscriber" (CreateTable's answer quoted in hashicorp/terraform PR 14571 and
        # hashicorp/terraform-provider-aws PR 2274, 2017); the number is the quota in force.
        raise LimitExceededException(f"Subscriber limit exceeded: There is a limit of {configured.tables} tables per "
                                     f"subscriber")


def describe_table(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_named(DESCRIBE_TABLE, request)
    meta = context.described_table(request["TableName"])
    return {"Table": describe(context, meta)}


def list_tables(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(LIST_TABLES, request)
    start = request.get("ExclusiveStartTableName")
    limit = int(request.get("Limit") or 100)
    # A table whose delayed deletion is over is left out; only the names of this page (and the next one, which
    # says whether there is a next page) are looked up.
    names = []
    for name in context.table_names():
        if (start is None or name > start) and context.find_table(name)[1] is not None:
            names.append(name)
            if len(names) > limit:
                break
    response: dict[str, Any] = {"TableNames": names[:limit]}
    if len(names) > limit:
        response["LastEvaluatedTableName"] = names[limit - 1]
    return response


_NOT_IN_DELETE_ANSWER = frozenset({"KeySchema", "AttributeDefinitions", "CreationDateTime", "LocalSecondaryIndexes"})


def delete_table(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate_named(DELETE_TABLE, request)
    meta = context.described_table(request["TableName"])
    now = clock.now()
    # "If table is already in the DELETING state, no error is returned" (the API Reference, DeleteTable).
    deleting = transient.table_status(meta, now) == "DELETING"
    if meta.deletion_protection:
        raise ValidationException("Resource cannot be deleted as it is currently protected against deletion. "
                                  "Disable deletion protection first.")
    if not deleting:
        transient.refuse_if_busy(meta, now)  # "If a table is in CREATING or UPDATING states" (the same)
    if any(transient.index_status(index, now) != "ACTIVE" for index in meta.indexes) or transient.dropping(meta, now):
        raise ResourceInUseException("Attempt to change a resource which is still in use: Cannot delete table while "
                                     "indexes are being created, updated, or deleted.")
    # DynamoDB's answer leaves out the key schema, the attribute definitions, the creation time and the local
    # indexes (captured in 2016 and in 2023).
    description = {member: value for member, value in describe(context, meta, status="DELETING").items()
                   if member not in _NOT_IN_DELETE_ANSWER}
    if deleting:
        return {"TableDescription": description}
    if context.engine.recovery_window(meta) is not None:  # (its instant before the rows go)
        system_backup(context.engine, meta)
    # Only the version checked here: protected, or deleted, by another worker meanwhile, it runs again.
    if transient.delayed():  # the table stays, DELETING, for the delay (then the background duty removes it)
        held = copy.deepcopy(meta)
        held.pending, held.pending_until = "DELETING", transient.until(now)
        context.engine.update_table(held)
    else:
        context.engine.delete_table(meta.stored_name, meta)
    return {"TableDescription": description}


def describe_endpoints(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    """DynamoDB answers with the address of its regional endpoint (`dynamodb.<region>.amazonaws.com`); here the
    address that reaches this server is the one the client used (its Host header, port included), so a client that
    follows the answer stays local. Without a Host header (HTTP/1.0), the regional name, as DynamoDB gives it."""
    host = context.host
    address = host.decode("latin-1") if host else f"dynamodb.{context.region}.amazonaws.com"
    return {"Endpoints": [{"Address": address, "CachePeriodInMinutes": 1440}]}


def describe_limits(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    """The account's capacity quotas as configured (api/quotas.py), whether or not `--quotas off` lifts them."""
    configured = quotas.current()
    return {"AccountMaxReadCapacityUnits": configured.account_max_read,
            "AccountMaxWriteCapacityUnits": configured.account_max_write,
            "TableMaxReadCapacityUnits": configured.table_max_read,
            "TableMaxWriteCapacityUnits": configured.table_max_write}


HANDLERS = {
    "CreateTable": create_table,
    "DescribeTable": describe_table,
    "ListTables": list_tables,
    "UpdateTable": update_table,
    "DeleteTable": delete_table,
    "DescribeEndpoints": describe_endpoints,
    "DescribeLimits": describe_limits,
}
