"""Secondary index definitions: CreateTable's and UpdateTable's index parts, their descriptions, online creation.

Online creation (UpdateTable GlobalSecondaryIndexUpdates Create): the new index is committed to the catalog as
CREATING first, so from that moment every write maintains it (`Engine.write`); then existing items are backfilled
in chunks of `BACKFILL_CHUNK` rows, each chunk one short write transaction (`Engine.backfill_index`), scheduled
one after another with `loop.call_soon` on the server's event loop, so requests keep being served between chunks.
A chunk recomputes entries from the items' current state and is idempotent, so writes racing the backfill can
neither lose nor duplicate an entry. When a chunk finds no rows left the index becomes ACTIVE. A backfill cut
short (a restart) resumes from the start when the index is next described or read.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from typing import Any

from openddb.api import transient
from openddb.api import validation as v
from openddb.api.background_runs import Runs
from openddb.api.figures import counted
from openddb.api.throughput import ON_DEMAND_WARM, count_decrease, provisioned_units, throughput_description
from openddb.errors import LimitExceededException, ResourceNotFoundException, ValidationException, invalid
from openddb.model.schema import BillingMode, IndexMeta, KeyAttribute, ProjectionType, TableMeta
from openddb.storage.base import CatalogChanged, Engine, StorageKey, lease_holder

log = logging.getLogger("openddb.indexes")

MAX_GSIS = 20
MAX_LSIS = 5
MAX_PROJECTED_ATTRIBUTES = 100
MAX_KEY_ATTRIBUTES = 4  # per partition key and per sort key of a multi-attribute GSI key
BACKFILL_CHUNK = 256

KEY_ELEMENT = v.Struct({  # of tables and of indexes
    "AttributeName": v.Str(required=True, min_len=1, max_len=255),
    "KeyType": v.Str(required=True, enum=("HASH", "RANGE")),
}, type_name="KeySchemaElement")
THROUGHPUT = v.Struct({  # of tables and of indexes; DynamoDB reports the write member's violation first
    "WriteCapacityUnits": v.Int(required=True, minimum=1),
    "ReadCapacityUnits": v.Int(required=True, minimum=1),
})
_PROJECTION = v.Struct({
    "ProjectionType": v.Str(enum=("ALL", "KEYS_ONLY", "INCLUDE")),
    "NonKeyAttributes": v.List(v.Str(min_len=1, max_len=255), min_len=1, max_len=20),
}, required=True)
ON_DEMAND_MEMBERS = ("MaxReadRequestUnits", "MaxWriteRequestUnits")
ON_DEMAND = v.Struct({member: v.Int() for member in ON_DEMAND_MEMBERS})
WARM = v.Struct({"ReadUnitsPerSecond": v.Int(), "WriteUnitsPerSecond": v.Int()})
_INDEX_NAME = v.Str(required=True, min_len=3, max_len=255, pattern=v.TABLE_NAME_PATTERN)
# Multi-attribute keys: a GSI KeySchema may hold up to four HASH and four RANGE elements. The API gives the list
# no maximum length: a longer one is refused by the count of its HASH or RANGE elements (`_key_schema`).
GSI = v.Struct({
    "IndexName": _INDEX_NAME,
    "KeySchema": v.List(KEY_ELEMENT, required=True, min_len=1),
    "Projection": _PROJECTION,
    "ProvisionedThroughput": THROUGHPUT,
    "OnDemandThroughput": ON_DEMAND,
    "WarmThroughput": WARM,
})
LSI = v.Struct({
    "IndexName": _INDEX_NAME,
    "KeySchema": v.List(KEY_ELEMENT, required=True, min_len=1, max_len=2),
    "Projection": _PROJECTION,
})
GSI_UPDATES = v.List(v.Struct({
    "Create": GSI,
    "Update": v.Struct({"IndexName": _INDEX_NAME, "ProvisionedThroughput": THROUGHPUT,
                        "OnDemandThroughput": ON_DEMAND, "WarmThroughput": WARM}),
    "Delete": v.Struct({"IndexName": _INDEX_NAME}),
}))
ONE_ONLINE_INDEX = "Subscriber limit exceeded: Only 1 online index can be created or deleted simultaneously per table"


def require_support(engine: Engine) -> None:
    """Secondary indexes need an engine that keeps them."""
    if not engine.supports_indexes:
        raise ValidationException("Secondary indexes are not supported by this server's storage engine yet")


# --- throughput limits (OnDemandThroughput, WarmThroughput) of tables and of global secondary indexes -----------

_INITIAL = ("initial throughput for OnDemand. See: https://docs.aws.amazon.com/amazondynamodb/latest/"
            "developerguide/on-demand-capacity-mode.html#on-demand-capacity-mode-initial")
_CAPACITY = ("ReadCapacityUnits of ProvisionedThroughput", "WriteCapacityUnits of ProvisionedThroughput")
DECREASING = "current WarmThroughput, decreasing WarmThroughput is not supported"


def on_demand_request(requested: dict[str, int], billing_mode: BillingMode, *, clearing: bool,
                      index: str | None = None) -> dict[str, int]:
    """The OnDemandThroughput members requested of a table (or of the GSI `index`), checked: on-demand tables
    only; at least 1, or -1 (clearing a member) on UpdateTable. DynamoDB words each case a little differently
    for tables and indexes, and for CreateTable and UpdateTable (`clearing`)."""
    given = [member for member in ON_DEMAND_MEMBERS if requested.get(member) is not None]
    if given and billing_mode == "PROVISIONED":
        # (UpdateTable's spacing is "for index : X", CreateTable's "for index: X", both recorded.)
        of = "" if index is None else f" for index{' :' if clearing else ':'} {index}"
        when = "when the table BillingMode is PROVISIONED" if clearing else "when table BillingMode is PROVISIONED."
        raise invalid(f"{given[0]} for OnDemandThroughput{of} cannot be specified {when}")
    for member in ON_DEMAND_MEMBERS:
        value = requested.get(member)
        if value is not None and value < 1 and not (clearing and value == -1):
            of = "table" if index is None else f"index : {index}"
            raise invalid(f"Requested {member} for OnDemandThroughput for {of} is outside of valid range")
    return {member: int(requested[member]) for member in ON_DEMAND_MEMBERS if requested.get(member) is not None}


def merged_on_demand(current: dict[str, int], requested: dict[str, int]) -> dict[str, int]:
    """OnDemandThroughput members merge into those set before; -1 clears one."""
    merged = {**current, **requested}
    return {member: merged[member] for member in ON_DEMAND_MEMBERS if merged.get(member, -1) != -1}


def warm_request(requested: dict[str, int], floor: tuple[int, int], lower: tuple[str, str],
                 index: str | None = None) -> tuple[int, int]:
    """The WarmThroughput asked for (of a table, or of the GSI `index`): each member at least its `floor` (which
    `lower` names in the refusal); an absent member keeps the floor."""
    of = "table" if index is None else f"index {index}"
    wanted = []
    for member, least, named in zip(("ReadUnitsPerSecond", "WriteUnitsPerSecond"), floor, lower, strict=True):
        value = requested.get(member)
        if value is not None and value < least:
            raise invalid(f"Requested {member} for WarmThroughput for {of} is lower than {named}")
        wanted.append(least if value is None else int(value))
    return wanted[0], wanted[1]


def initial_warm(requested: dict[str, int], billing_mode: BillingMode, capacity: tuple[int, int],
                 index: str | None = None) -> tuple[int, int]:
    """The WarmThroughput a new table (or GSI) asks for: at least on-demand's initial throughput, or its
    provisioned capacity."""
    if billing_mode == "PAY_PER_REQUEST":
        return warm_request(requested, ON_DEMAND_WARM, (_INITIAL, _INITIAL), index)
    return warm_request(requested, capacity, _CAPACITY, index)


# --- definitions ---------------------------------------------------------------------------------------------


def _key_schema(name: str, schema: list[dict[str, str]], types: dict[str, str],
                local: bool) -> tuple[list[KeyAttribute], list[KeyAttribute]]:
    """An index KeySchema checked against AttributeDefinitions: HASH elements first, then RANGE elements."""
    if schema[0]["KeyType"] != "HASH":
        raise ValidationException("Invalid KeySchema: The first KeySchemaElement is not a HASH key type")
    hashes = [e for e in schema if e["KeyType"] == "HASH"]
    ranges = [e for e in schema if e["KeyType"] == "RANGE"]
    if schema != hashes + ranges:
        raise invalid("All HASH key attributes must precede RANGE key attributes in the KeySchema")
    if local and len(hashes) != 1:
        raise ValidationException("Invalid KeySchema: The second KeySchemaElement is not a RANGE key type")
    for kind, elements in (("HASH", hashes), ("RANGE", ranges)):
        if len(elements) > MAX_KEY_ATTRIBUTES:
            raise invalid(f"The KeySchema exceeds the maximum allowed number of {kind} key attributes")
    names = [e["AttributeName"] for e in schema]
    if len(set(names)) != len(names):
        if len(names) == 2:
            raise invalid("Both the Hash Key and the Range Key element in the KeySchema have the same name")
        raise ValidationException("The KeySchema contains multiple key attributes with the same name")
    for element in schema:
        if element["AttributeName"] not in types:
            raise ValidationException("Invalid KeySchema: Some index key attribute have no definition")
    return ([KeyAttribute(e["AttributeName"], types[e["AttributeName"]]) for e in hashes],
            [KeyAttribute(e["AttributeName"], types[e["AttributeName"]]) for e in ranges])


def _projection(projection: dict[str, Any]) -> tuple[ProjectionType, list[str]]:
    kind = projection.get("ProjectionType")
    non_key = projection.get("NonKeyAttributes")
    if kind is None:
        raise invalid("Unknown ProjectionType: null")
    if kind == "INCLUDE" and not non_key:
        raise invalid("ProjectionType is INCLUDE, but NonKeyAttributes is not specified")
    if kind != "INCLUDE" and non_key is not None:
        raise invalid(f"ProjectionType is {kind}, but NonKeyAttributes is specified")
    seen: set[str] = set()
    for name in non_key or []:
        if name in seen:
            raise invalid(f"Duplicate element in NonKeyAttributes: {name}")
        seen.add(name)
    return kind, list(non_key or [])


parse_projection = _projection  # (vector indexes' projections follow the same rules)


def _index_throughput(name: str, spec: dict[str, Any], billing_mode: BillingMode, *,
                      creating_table: bool = False) -> tuple[int, int]:
    throughput = spec.get("ProvisionedThroughput")
    if billing_mode == "PAY_PER_REQUEST":
        if throughput is not None:  # CreateTable and UpdateTable's Create action word this differently too
            if creating_table:
                raise invalid(f"ProvisionedThroughput should not be specified for index: {name} when BillingMode "
                              "is PAY_PER_REQUEST")
            raise invalid(f"Neither ReadCapacityUnits nor WriteCapacityUnits can be specified for index: {name} "
                          "when BillingMode is PAY_PER_REQUEST")
        return 0, 0
    if throughput is None:
        # CreateTable and UpdateTable's Create action word this differently.
        if creating_table:
            raise invalid(f"ProvisionedThroughput is not specified for index: {name}")
        raise invalid(f"Both ReadCapacityUnits and WriteCapacityUnits must be specified for index: {name}")
    return provisioned_units(throughput)


def _check_projected_total(indexes: list[IndexMeta]) -> None:
    """At most 100 NonKeyAttributes summed over every secondary index of a table."""
    projected = sum(len(index.non_key_attributes) for index in indexes)
    if projected > MAX_PROJECTED_ATTRIBUTES:
        raise invalid(f"Number of projected attributes in all indexes exceeds limit of {MAX_PROJECTED_ATTRIBUTES}, "
                      f"number of projected attributes: {projected}")  # best guess


def parse_gsi(spec: dict[str, Any], types: dict[str, str], billing_mode: BillingMode, index_id: int, *,
              creating_table: bool = False) -> IndexMeta:
    name = spec["IndexName"]
    hashes, ranges = _key_schema(name, spec["KeySchema"], types, local=False)
    kind, non_key = _projection(spec["Projection"])
    read, write = _index_throughput(name, spec, billing_mode, creating_table=creating_table)
    on_demand = on_demand_request(spec.get("OnDemandThroughput") or {}, billing_mode, clearing=False, index=name)
    warm = initial_warm(spec.get("WarmThroughput") or {}, billing_mode, (read, write), index=name)
    return IndexMeta(name, "GLOBAL", hashes, ranges, kind, non_key, "ACTIVE", read, write, index_id,
                     on_demand=on_demand, peak_read=warm[0], peak_write=warm[1])


def warm_units(meta: TableMeta, capacity: tuple[int, int], peak: tuple[int, int]) -> tuple[int, int]:
    """WarmThroughput of the table `meta` or of one of its GSIs: what it was asked for or the highest capacity it
    had (it never goes down), at least on-demand's initial throughput once the table has been on demand."""
    read, write = max(capacity[0], peak[0]), max(capacity[1], peak[1])
    if meta.billing_mode == "PAY_PER_REQUEST" or meta.billing_mode_updated_at is not None:
        read, write = max(read, ON_DEMAND_WARM[0]), max(write, ON_DEMAND_WARM[1])
    return read, write


def index_warm(meta: TableMeta, index: IndexMeta) -> tuple[int, int]:
    return warm_units(meta, (index.read_capacity, index.write_capacity), (index.peak_read, index.peak_write))


def create_table_indexes(request: dict[str, Any], types: dict[str, str], hash_key: KeyAttribute,
                         range_key: KeyAttribute | None, billing_mode: BillingMode) -> list[IndexMeta]:
    """The indexes a CreateTable request defines, validated as DynamoDB does (the shape already checked)."""
    gsis: list[dict[str, Any]] | None = request.get("GlobalSecondaryIndexes")
    lsis: list[dict[str, Any]] | None = request.get("LocalSecondaryIndexes")
    if gsis == []:
        raise invalid("List of GlobalSecondaryIndexes is empty")
    if lsis == []:
        raise invalid("List of LocalSecondaryIndexes is empty")
    gsis, lsis = gsis or [], lsis or []
    # An index key attribute without a definition is refused first, then an attribute defined but used by no key,
    # before any other index rule is looked at (both recorded against DynamoDB).
    used = [hash_key.name] + ([range_key.name] if range_key else [])
    for spec in lsis + gsis:
        used += [element["AttributeName"] for element in spec["KeySchema"]]
    for spec in request.get("VectorIndexes") or []:  # search-schema attributes are defined like index keys
        used += [element["AttributeName"] for element in spec.get("SearchSchema") or []]
    for spec in lsis + gsis:
        keys = [element["AttributeName"] for element in spec["KeySchema"]]
        if any(name not in types for name in keys):
            raise undefined_keys(keys, list(types))
    if set(types) - set(used):
        raise invalid(f"Some AttributeDefinitions are not used. AttributeDefinitions: [{', '.join(types)}], "
                      f"keys used: [{', '.join(java_hash_set_order(used))}]")
    if lsis and range_key is None:
        raise invalid("Table KeySchema does not have a range key, which is required when specifying a "
                      "LocalSecondaryIndex")
    if len(gsis) > MAX_GSIS:
        raise invalid(f"GlobalSecondaryIndex count exceeds the per-table limit of {MAX_GSIS}")
    if len(lsis) > MAX_LSIS:
        raise invalid(f"Number of LocalSecondaryIndexes exceeds per-table limit of {MAX_LSIS}")
    indexes: list[IndexMeta] = []
    seen: set[str] = set()
    for spec in lsis:
        name = spec["IndexName"]
        if name in seen:
            raise invalid(f"Duplicate index name: {name}")
        seen.add(name)
        hashes, ranges = _key_schema(name, spec["KeySchema"], types, local=True)
        if not ranges:
            raise invalid(f"Index KeySchema does not have a range key for index: {name}")
        if hashes[0].name != hash_key.name:
            raise invalid(f"Index KeySchema does not have the same leading hash key as table KeySchema for index: "
                          f"{name}. index hash key: {hashes[0].name}, table hash key: {hash_key.name}")
        kind, non_key = _projection(spec["Projection"])
        indexes.append(IndexMeta(name, "LOCAL", hashes, ranges, kind, non_key, index_id=len(indexes) + 1))
    for spec in gsis:
        if spec["IndexName"] in seen:
            raise invalid(f"Duplicate index name: {spec['IndexName']}")
        seen.add(spec["IndexName"])
        indexes.append(parse_gsi(spec, types, billing_mode, len(indexes) + 1, creating_table=True))
    _check_projected_total(indexes)
    return indexes


def undefined_keys(keys: list[str], defined: list[str]) -> ValidationException:
    """A key schema naming an attribute AttributeDefinitions lacks: both lists in Java HashSet order, as DynamoDB
    prints them (recorded: 'Keys: [user_id, created_at], AttributeDefinitions: [status_message, metadata, ...]')."""
    return invalid(f"Some index key attributes are not defined in AttributeDefinitions. Keys: "
                   f"[{', '.join(java_hash_set_order(keys))}], AttributeDefinitions: "
                   f"[{', '.join(java_hash_set_order(defined))}]")


def java_hash_set_order(names: list[str]) -> list[str]:
    """`names` without repeats in the order a java.util.HashSet filled with them iterates: DynamoDB's messages list
    some sets of attribute names so. Buckets are taken in order (the table doubles from 16 while more than three
    quarters full); names sharing a bucket keep the order they were added in."""
    distinct = list(dict.fromkeys(names))
    capacity = 16
    while len(distinct) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        code = v.java_string_hash(name)
        return (code ^ (code >> 16)) & (capacity - 1)

    return sorted(distinct, key=bucket)  # a stable sort: insertion order within a bucket


# --- descriptions --------------------------------------------------------------------------------------------


def describe_indexes(engine: Engine, meta: TableMeta, now: float, *, creating: bool = False, counts: bool = True,
                     warm: bool = True) -> dict[str, list[dict[str, Any]]]:
    """The GlobalSecondaryIndexes / LocalSecondaryIndexes members of a TableDescription by the clock `now`
    (`warm`: with each GSI's WarmThroughput, as the table's)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for index in meta.indexes:
        count, size = counted(engine, meta, index) if counts else (0, 0)
        description: dict[str, Any] = {
            "IndexName": index.name,
            "KeySchema": index.key_schema_wire(),
            "Projection": index.projection_wire(),
        }
        if index.is_global:
            status = "CREATING" if creating else transient.index_status(index, now)
            description["IndexStatus"] = status
            if status == "CREATING" and not creating:
                # Only an index UpdateTable adds shows Backfilling, and only until it is ACTIVE.
                description["Backfilling"] = True
            if index.status == "CREATING":
                schedule_backfill(engine, meta, index)  # resumes one a restart cut short; no-op if running
            description["ProvisionedThroughput"] = throughput_description(index)
            if index.on_demand:
                description["OnDemandThroughput"] = dict(index.on_demand)
            if warm:
                read, write = index_warm(meta, index)
                description["WarmThroughput"] = {
                    "ReadUnitsPerSecond": read, "WriteUnitsPerSecond": write,
                    "Status": status if status != "ACTIVE" else transient.warm_status(index.warm_until, now)}
        description["IndexSizeBytes"] = size
        description["ItemCount"] = count
        description["IndexArn"] = f"{meta.arn}/index/{index.name}"
        out.setdefault("GlobalSecondaryIndexes" if index.is_global else "LocalSecondaryIndexes", []).append(
            description)
    return out


# --- UpdateTable ---------------------------------------------------------------------------------------------


def _find(meta: TableMeta, name: str, action: str) -> IndexMeta:
    index = meta.index(name)
    if index is None:
        raise ResourceNotFoundException(f"Requested resource not found: Index {name} for table {meta.name}")
    if not index.is_global:
        raise ValidationException(f"Cannot {action} an index that is not a GlobalSecondaryIndex: {name}")
    return index


def apply_index_updates(meta: TableMeta, request: dict[str, Any], now: float,
                        billing_mode: BillingMode) -> tuple[list[IndexMeta], list[int]]:
    """Apply GlobalSecondaryIndexUpdates to `meta` (validated whole first): the indexes created, the ids dropped.
    `billing_mode` is the table's mode once the request is applied (it may switch it)."""
    updates: list[dict[str, Any]] = request["GlobalSecondaryIndexUpdates"]
    _check_index_actions(meta, updates, now)
    types = {d["AttributeName"]: d["AttributeType"] for d in meta.attribute_definitions}
    created: list[IndexMeta] = []
    dropped: list[int] = []
    for position, update in enumerate(updates, 1):
        if update.get("Create") is not None:
            created.append(_create(meta, request, update["Create"], types, billing_mode))
        elif update.get("Delete") is not None:
            dropped.append(_delete(meta, update["Delete"]["IndexName"]))
        else:
            _update(meta, update["Update"], billing_mode, position, now)
    return created, dropped


def _check_index_actions(meta: TableMeta, updates: list[dict[str, Any]], now: float) -> None:
    """One action per update, one update per index, one online creation or deletion at a time, and no change to
    an index whose last one is still under way."""
    for update in updates:
        actions = sum(1 for k in ("Create", "Update", "Delete") if update.get(k) is not None)
        if actions == 0:
            raise invalid("One of GlobalSecondaryIndexUpdate.Update, GlobalSecondaryIndexUpdate.Create, "
                          "GlobalSecondaryIndexUpdate.Delete must not be null")
        if actions > 1:
            raise invalid("Only one global secondary index action is allowed per GlobalSecondaryIndexUpdate object")
    named: set[str] = set()
    for update in updates:
        name = next(update[k]["IndexName"] for k in ("Create", "Update", "Delete") if update.get(k) is not None)
        if name in named:
            raise invalid(f"Only one global secondary index update per index is allowed simultaneously. Index: {name}")
        named.add(name)
    online = [u for u in updates if u.get("Create") is not None or u.get("Delete") is not None]
    building = {i.name for i in meta.indexes if transient.index_status(i, now) == "CREATING"}
    # "You can delete an index that is being created during the Backfilling phase" (the API Reference): only
    # deleting the index being built may be asked while it is; any other online change waits for it, and for
    # an index still being deleted.
    waiting = [u for u in online if u.get("Delete") is None or u["Delete"].get("IndexName") not in building]
    if len(online) > 1 or ((building or transient.dropping(meta, now)) and waiting):
        raise LimitExceededException(ONE_ONLINE_INDEX)
    for update in updates:
        index = meta.index(update["Update"].get("IndexName", "")) if update.get("Update") is not None else None
        if index is not None:
            transient.refuse_index_busy(meta, index, now)


def _delete(meta: TableMeta, name: str) -> int:
    """A Delete action: the index leaves `meta`, and so do the definitions of attributes no key uses any more."""
    index = _find(meta, name, "delete")
    meta.indexes.remove(index)
    drop_unused_definitions(meta)
    return index.index_id


def drop_unused_definitions(meta: TableMeta) -> None:
    """Keep the attribute definitions a key uses: the table's, an index's, a vector index's search schema's."""
    used = set(meta.key_names)
    for other in meta.indexes:
        used.update(other.key_names)
    for vector in meta.vector_indexes:  # (search-schema attributes are defined like keys)
        used.update(a.name for a in ([vector.hash_key] if vector.hash_key else []) + vector.filters)
    meta.attribute_definitions = [d for d in meta.attribute_definitions if d["AttributeName"] in used]


def _update(meta: TableMeta, spec: dict[str, Any], billing_mode: BillingMode, position: int, now: float) -> None:
    """An Update action: the index's throughput limits, and its provisioned capacity (increases and decreases
    counted against the index's own budget)."""
    index = _find(meta, spec["IndexName"], "update")
    _update_limits(meta, index, spec, billing_mode, position)
    if spec.get("ProvisionedThroughput") is None:
        return
    if billing_mode == "PAY_PER_REQUEST":
        raise invalid(f"The only Updates for index: {index.name} when TableThroughputMode is "
                      "PAY_PER_REQUEST can be to OnDemandThroughput, WarmThroughput")
    read, write = _index_throughput(index.name, spec, "PROVISIONED")
    if (read, write) == (index.read_capacity, index.write_capacity):
        raise ValidationException(
            f"The provisioned throughput for the index {index.name} will not change. The requested value "
            f"equals the current value. Current ReadCapacityUnits provisioned for index {index.name}: {read}. "
            f"Requested ReadCapacityUnits: {read}. Current WriteCapacityUnits provisioned for index "
            f"{index.name}: {write}. Requested WriteCapacityUnits: {write}. Refer to the Amazon DynamoDB "
            "Developer Guide for current limits and how to request higher limits.")
    if read > index.read_capacity or write > index.write_capacity:
        index.last_increase = now
    if read < index.read_capacity or write < index.write_capacity:
        count_decrease(index, now)  # each index has its own budget, apart from the table's
    index.peak_read, index.peak_write = index_warm(meta, index)  # warm throughput never goes down
    index.read_capacity, index.write_capacity = read, write


def _create(meta: TableMeta, request: dict[str, Any], spec: dict[str, Any], types: dict[str, str],
            billing_mode: BillingMode) -> IndexMeta:
    """A Create action: the new index added to `meta` as CREATING, its key attributes to the definitions."""
    if meta.index(spec["IndexName"]) is not None:
        raise ValidationException("Attempting to create an index which already exists")
    if sum(1 for i in meta.indexes if i.is_global) >= MAX_GSIS:
        raise LimitExceededException("Subscriber limit exceeded: Number of global secondary indexes exceeds "
                                     f"per-table limit of {MAX_GSIS}")
    if not request.get("AttributeDefinitions"):
        raise invalid(f"AttributeDefinitions is not specified for index: {spec['IndexName']}")
    defined = {d["AttributeName"]: d["AttributeType"] for d in request["AttributeDefinitions"]}
    keys = [e["AttributeName"] for e in spec["KeySchema"]]
    if any(k not in defined for k in keys):  # (as captured in 2019; CreateTable words it apart)
        raise ValidationException("Invalid KeySchema: Some index key attribute have no definition")
    check_redefined_keys(keys, defined, types)
    # An attribute the table already defines and the new index does not use keeps its type: DynamoDB ignores a
    # conflicting one in the request and goes on (captured in paritysuite/dynamodb-conformance issue 78).
    index = parse_gsi(spec, {**defined, **types}, billing_mode, meta.next_index_id)
    index.status = "CREATING"
    index.online = True
    meta.next_index_id += 1
    for name in keys:
        if name not in types:
            types[name] = defined[name]
            meta.attribute_definitions.append({"AttributeName": name, "AttributeType": defined[name]})
    meta.indexes.append(index)
    _check_projected_total(meta.indexes)
    return index


def check_redefined_keys(keys: list[str], defined: dict[str, str], types: dict[str, str]) -> None:
    """A new index may not key on an attribute the table (its key or another index's) already defines with another
    type: every item and index entry holding the attribute was checked against the stored type, which cannot
    change while anything uses it (issue 30 records DynamoDB refusing it)."""
    for name in keys:
        if name in types and defined[name] != types[name]:
            # Best guess at the wording: DynamoDB's text for this refusal is not quoted in public that we found.
            raise invalid(f"Cannot change the type of attribute {name} from {types[name]} to {defined[name]}: "
                          "it is part of a key schema of the table or of an index")


def _update_limits(meta: TableMeta, index: IndexMeta, spec: dict[str, Any], billing_mode: BillingMode,
                   position: int) -> None:
    """An Update action's OnDemandThroughput and WarmThroughput (it needs one of them or ProvisionedThroughput)."""
    if billing_mode == "PAY_PER_REQUEST" and spec.get("ProvisionedThroughput") is None and \
            not spec.get("OnDemandThroughput") and spec.get("WarmThroughput") is None:  # nothing it may change
        raise invalid(f"The only Updates for index: {index.name} when TableThroughputMode is PAY_PER_REQUEST can be "
                      "to OnDemandThroughput, WarmThroughput")
    if all(spec.get(k) is None for k in ("ProvisionedThroughput", "OnDemandThroughput", "WarmThroughput")):
        raise ValidationException(v.validation_message([
            f"Value null at 'globalSecondaryIndexUpdates.{position}.member.update.provisionedThroughput' failed to "
            "satisfy constraint: Member must not be null"]))
    requested = on_demand_request(spec.get("OnDemandThroughput") or {}, billing_mode, clearing=True,
                                  index=index.name)
    index.on_demand = merged_on_demand(index.on_demand, requested)
    warm = spec.get("WarmThroughput")
    if warm is not None:
        if not warm:
            raise invalid("WarmThroughput must have at least one of ReadUnitsPerSecond or WriteUnitsPerSecond "
                          f"specified for index: {index.name}")
        index.peak_read, index.peak_write = warm_request(warm, index_warm(meta, index), (DECREASING, DECREASING),
                                                         index.name)


def switch_index_billing(meta: TableMeta, request: dict[str, Any], billing_mode: BillingMode,
                         created: list[IndexMeta]) -> None:
    """The table switches billing mode: to on-demand, its GSIs drop their capacity; to provisioned, every GSI
    must be given capacity in the same request (an Update, or its Create)."""
    if billing_mode == "PAY_PER_REQUEST":
        for index in meta.indexes:
            index.peak_read, index.peak_write = index_warm(meta, index)
            index.read_capacity = index.write_capacity = 0
        return
    for index in meta.indexes:
        index.on_demand = {}  # a switch to provisioned capacity keeps no index's OnDemandThroughput
    given = {u["Update"]["IndexName"] for u in request.get("GlobalSecondaryIndexUpdates") or []
             if u.get("Update") is not None and u["Update"].get("ProvisionedThroughput") is not None}
    missing = [index.name for index in meta.indexes
               if index.is_global and index not in created and index.name not in given]
    if missing:  # every one named, comma-joined (quoted from DynamoDB, crossplane-contrib/provider-upjet-aws 1041)
        raise invalid(f"ProvisionedThroughput must be specified for index: {','.join(missing)}")


# --- online creation -----------------------------------------------------------------------------------------

_RUNNING: Runs[tuple[str, int]] = Runs()  # (table uuid, index id) of the backfills this process drives
# Who drives a backfill, across every worker and node sharing the store: the holder of its lease.
_LEASE_SECONDS = 10.0  # renewed every chunk; a stopped driver holds the backfill up this long


def resume_backfills(engine: Engine, *others: Callable[[Engine, TableMeta], None]) -> None:
    """Take up every index still CREATING, as after a restart that cut its backfill short (the lease makes one
    process drive each; `schedule_backfill` is a no-op for those this one already drives); `others` do the same
    for other kinds of index (vector indexes), in the same one walk over the tables."""
    for name in engine.list_tables():
        meta = engine.get_table(name)
        if meta is None:  # dropped meanwhile
            continue
        for index in meta.indexes:
            if index.status == "CREATING":
                schedule_backfill(engine, meta, index)
        for resume in others:
            resume(engine, meta)


def schedule_backfill(engine: Engine, meta: TableMeta, index: IndexMeta) -> None:
    """Start filling a CREATING index from the table's items (see the module docstring); no-op if running."""
    name, uuid, index_id = meta.stored_name, meta.uuid, index.index_id
    after: StorageKey | None = None
    filled = False

    def step() -> bool:
        """One chunk; True while more remain."""
        nonlocal after, filled
        current = engine.get_table(name)
        target = None if current is None or current.uuid != uuid else next(
            (i for i in current.indexes if i.index_id == index_id), None)
        if current is None or target is None or target.status != "CREATING" or current.restoring:
            return False  # (a restore still copying items starts its backfills once they are in)
        if not engine.try_lease(f"backfill:{uuid}:{index_id}", lease_holder(), _LEASE_SECONDS, time.time()):
            # Another process drives it; if that one dies, a later DescribeTable here takes over once the
            # lease expires (and starts over: a chunk is idempotent).
            return False
        if not filled:
            after = engine.backfill_index(current, target, after, BACKFILL_CHUNK)
            if after is not None:
                return True
            filled = True
        finished = copy.deepcopy(current)  # the cached description stays as it is until the change is stored
        for candidate in finished.indexes:
            if candidate.index_id == index_id:
                candidate.status = "ACTIVE"
        try:
            engine.update_table(finished)
        except CatalogChanged:
            return True  # the table changed meanwhile (a tag, TTL...): finish on its fresh description
        return False

    _RUNNING.start((uuid, index_id), step, f"backfill of index {index.name} of table {name}")

