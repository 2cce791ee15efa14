"""Table descriptions: the key schema and everything DescribeTable reports.

`TableMeta` is what the catalog stores (as JSON) and what every handler consults for a table. It is
engine-neutral; engines persist it with `to_json`/`from_json`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import orjson

from openddb.model import Item

# DynamoDB's enumerations a table description holds (the API Reference's TableStatus, IndexStatus, BillingMode,
# ProjectionType); an index's kind is which of a description's two index lists it is in.
TableStatus = Literal["CREATING", "UPDATING", "DELETING", "ACTIVE", "INACCESSIBLE_ENCRYPTION_CREDENTIALS",
                      "ARCHIVING", "ARCHIVED", "REPLICATION_NOT_AUTHORIZED"]
IndexStatus = Literal["CREATING", "UPDATING", "DELETING", "ACTIVE"]
BillingMode = Literal["PROVISIONED", "PAY_PER_REQUEST"]
ProjectionType = Literal["ALL", "KEYS_ONLY", "INCLUDE"]
IndexKind = Literal["GLOBAL", "LOCAL"]


def namespace_of_arn(arn: str, namespaced: bool) -> str:
    """The namespace a table's (or its index's, stream's, backup's, export's) ARN puts it in where tables are kept
    by account and region ("<account>/<region>/"), or the shared one ("")."""
    if not namespaced:
        return ""
    parts = arn.split(":", 5)
    return f"{parts[4]}/{parts[3]}/" if len(parts) == 6 else ""


def table_arn(region: str, account: str, name: str) -> str:
    """A table's ARN (the API Reference's TableArn)."""
    return f"arn:aws:dynamodb:{region}:{account}:table/{name}"


@dataclass(slots=True)
class KeyAttribute:
    name: str
    type: str  # "S", "N" or "B"


@dataclass(slots=True)
class IndexMeta:
    """A secondary index: its own key schema over the table's items, and its projection.

    A key may be made of several attributes (a GSI's multi-attribute keys, up to four each for the partition
    and the sort key, in KeySchema order); an LSI's partition key is the table's. `index_id` is unique within
    the table for its whole life (never reused), so entries of a dropped index can never be mistaken for a
    new one's."""

    name: str
    kind: IndexKind
    hash_keys: list[KeyAttribute]
    range_keys: list[KeyAttribute] = field(default_factory=list)
    projection_type: ProjectionType = "ALL"
    non_key_attributes: list[str] = field(default_factory=list)
    status: IndexStatus = "ACTIVE"  # CREATING: an online creation, backfilling
    read_capacity: int = 0
    write_capacity: int = 0
    index_id: int = 0
    last_increase: float | None = None
    last_decrease: float | None = None
    decreases_today: int = 0
    online: bool = False  # added by UpdateTable rather than with the table
    on_demand: dict[str, int] = field(default_factory=dict)  # a GSI's OnDemandThroughput members, if any were set
    peak_read: int = 0  # a GSI's WarmThroughput asked for, or the highest capacity it had: it never goes down
    peak_write: int = 0
    # A transient status shown until `pending_until` (epoch seconds; see api/transient.py), and when a raised
    # WarmThroughput stops being UPDATING.
    pending: IndexStatus | None = None
    pending_until: float = 0.0
    warm_until: float = 0.0

    @property
    def is_global(self) -> bool:
        return self.kind == "GLOBAL"

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.hash_keys) + tuple(a.name for a in self.range_keys)

    def key_schema_wire(self) -> list[dict[str, str]]:
        return ([{"AttributeName": a.name, "KeyType": "HASH"} for a in self.hash_keys]
                + [{"AttributeName": a.name, "KeyType": "RANGE"} for a in self.range_keys])

    def projection_wire(self) -> dict[str, Any]:
        projection: dict[str, Any] = {"ProjectionType": self.projection_type}
        if self.projection_type == "INCLUDE":
            projection["NonKeyAttributes"] = sorted(self.non_key_attributes)  # by name, as DynamoDB describes them
        return projection


VectorDistance = Literal["COSINE", "DOT_PRODUCT", "EUCLIDEAN"]


@dataclass(slots=True)
class VectorIndexMeta:
    """A vector index (CreateTable's VectorIndexes, UpdateTable's VectorIndexUpdates): the attribute holding each
    item's vector (a List of Numbers), its dimensions and distance function, the search schema (`hash_key`: the
    HASH element that partitions the search, `filters`: the INLINE_FILTER attributes) and the projection.
    `index_id` comes from the table's `next_index_id`, shared with the secondary indexes, so it is never reused.
    `backfilling`: created by UpdateTable on a table that may hold items, whose entries are still being computed
    (CREATING until done)."""

    name: str
    attribute: str
    dimensions: int
    distance: VectorDistance
    hash_key: KeyAttribute | None = None
    filters: list[KeyAttribute] = field(default_factory=list)
    projection_type: ProjectionType = "ALL"
    non_key_attributes: list[str] = field(default_factory=list)
    status: IndexStatus = "ACTIVE"
    index_id: int = 0
    backfilling: bool = False

    def search_schema_wire(self) -> list[dict[str, str]]:
        schema = [] if self.hash_key is None else [{"AttributeName": self.hash_key.name,
                                                     "SearchSchemaElementType": "HASH"}]
        return schema + [{"AttributeName": a.name, "SearchSchemaElementType": "INLINE_FILTER"}
                         for a in self.filters]

    def projection_wire(self) -> dict[str, Any]:
        projection: dict[str, Any] = {"ProjectionType": self.projection_type}
        if self.projection_type == "INCLUDE":
            projection["NonKeyAttributes"] = sorted(self.non_key_attributes)
        return projection


StreamViewType = Literal["KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"]


@dataclass(slots=True)
class StreamMeta:
    """A table's latest stream (DynamoDB Streams): kept after it is disabled, as DescribeTable still names it as
    LatestStreamArn/LatestStreamLabel. Re-enabling makes a new stream, with a new label. `stream_id` is assigned
    by the engine when the catalog change that created the stream is stored (0 until then)."""

    label: str  # LatestStreamLabel: the creation time, ISO 8601 to the millisecond, UTC ("2026-11-29T08:20:01.123")
    view_type: StreamViewType
    enabled: bool = True
    stream_id: int = 0
    created_at: float = 0.0


@dataclass(slots=True)
class TableMeta:
    name: str
    table_id: int
    uuid: str
    hash_key: KeyAttribute
    range_key: KeyAttribute | None
    attribute_definitions: list[dict[str, str]]
    created_at: float
    billing_mode: BillingMode = "PROVISIONED"
    read_capacity: int = 0
    write_capacity: int = 0
    last_increase: float | None = None
    last_decrease: float | None = None
    decreases_today: int = 0
    # The highest capacity ever provisioned or asked for as WarmThroughput: DynamoDB's warm throughput never goes
    # down.
    peak_read: int = 0
    peak_write: int = 0
    billing_mode_updated_at: float | None = None
    on_demand_switches: list[float] = field(default_factory=list)  # switches to on-demand within the last 24 hours
    status: TableStatus = "ACTIVE"
    tags: list[dict[str, str]] = field(default_factory=list)
    sse: dict[str, Any] | None = None
    table_class: str | None = None
    table_class_updates: list[float] = field(default_factory=list)  # when UpdateTable set a class, within 30 days
    deletion_protection: bool = False
    # OnDemandThroughput: the maximum read and write request units set (members not set, or cleared, are absent).
    on_demand: dict[str, int] = field(default_factory=dict)
    # Contributor Insights, by "" (the table) or a GSI's name: {"status": "ENABLED"|"DISABLED", "mode": ...,
    # "updated": epoch seconds of the last change, "created": of the enabling its rules are named after}.
    contributor_insights: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Time to Live: the attribute whose epoch seconds expire an item (None: disabled), and when it last changed.
    ttl_attribute: str | None = None
    ttl_updated_at: float | None = None
    indexes: list[IndexMeta] = field(default_factory=list)
    next_index_id: int = 1
    region: str = "us-east-1"
    account: str = "000000000000"
    stream: StreamMeta | None = None
    # Raised by every stored change: `Engine.update_table` replaces only the version a change was derived from.
    version: int = 0
    # A transient status (CREATING, UPDATING, DELETING: the table gone once it ends) shown until `pending_until`
    # (epoch seconds), when a raised WarmThroughput stops being UPDATING, and the GSIs being deleted, described as
    # DELETING until their own `pending_until` (see api/transient.py; engines ignore all of these).
    pending: TableStatus | None = None
    pending_until: float = 0.0
    warm_until: float = 0.0
    sse_until: float = 0.0  # (an SSESpecification change: SSEDescription UPDATING until then)
    dropping: list[IndexMeta] = field(default_factory=list)
    vector_indexes: list[VectorIndexMeta] = field(default_factory=list)
    # A restored table's RestoreSummary (SourceBackupArn, SourceTableArn, RestoreDateTime; see api/backups_restore)
    restore: dict[str, Any] | None = None
    # While a restore copies the table's items (before its indexes' backfill may start): see api/backups_runs.py
    restoring: bool = False
    # The namespace the table belongs to: "" (the shared one: every account and region), or "<account>/<region>/"
    # (docs/ACCOUNTS-AND-REGIONS.md). The engines keep it under `stored_name`; clients see `name`.
    namespace: str = ""

    @property
    def stored_name(self) -> str:
        """The table's name in the engine's catalog: its namespace, then its name ("/" is outside every name a
        client can give, so no client names a namespaced table by its stored name)."""
        return self.namespace + self.name

    @property
    def arn(self) -> str:
        return table_arn(self.region, self.account, self.name)

    @property
    def stream_arn(self) -> str | None:
        """LatestStreamArn: the ARN of the table's latest stream, enabled or not (None if it never had one)."""
        if self.stream is None:
            return None
        return f"{self.arn}/stream/{self.stream.label}"

    @property
    def streaming(self) -> StreamViewType | None:
        """The view type of the table's enabled stream, or None: every item change then writes a stream record."""
        stream = self.stream
        return stream.view_type if stream is not None and stream.enabled else None

    @property
    def key_names(self) -> tuple[str, ...]:
        if self.range_key is None:
            return (self.hash_key.name,)
        return (self.hash_key.name, self.range_key.name)

    def key_of(self, item: Item) -> Item:
        """The primary-key attributes of an item (which must have them)."""
        key = {self.hash_key.name: item[self.hash_key.name]}
        if self.range_key is not None:
            key[self.range_key.name] = item[self.range_key.name]
        return key

    def key_schema_wire(self) -> list[dict[str, str]]:
        schema = [{"AttributeName": self.hash_key.name, "KeyType": "HASH"}]
        if self.range_key is not None:
            schema.append({"AttributeName": self.range_key.name, "KeyType": "RANGE"})
        return schema

    def index(self, name: str) -> IndexMeta | None:
        for index in self.indexes:
            if index.name == name:
                return index
        return None

    def vector_index(self, name: str) -> VectorIndexMeta | None:
        for index in self.vector_indexes:
            if index.name == name:
                return index
        return None

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def from_json(cls, data: bytes | str) -> TableMeta:
        raw = orjson.loads(data)
        raw["hash_key"] = KeyAttribute(**raw["hash_key"])
        if raw["range_key"] is not None:
            raw["range_key"] = KeyAttribute(**raw["range_key"])
        raw["indexes"] = [_index_from(index) for index in raw.get("indexes", [])]
        raw["dropping"] = [_index_from(index) for index in raw.get("dropping", [])]
        if raw.get("stream") is not None:
            raw["stream"] = StreamMeta(**raw["stream"])
        raw["vector_indexes"] = [_vector_index_from(index) for index in raw.get("vector_indexes", [])]
        return cls(**raw)


def _index_from(raw: dict[str, Any]) -> IndexMeta:
    raw["hash_keys"] = [KeyAttribute(**a) for a in raw["hash_keys"]]
    raw["range_keys"] = [KeyAttribute(**a) for a in raw["range_keys"]]
    return IndexMeta(**raw)


def _vector_index_from(raw: dict[str, Any]) -> VectorIndexMeta:
    if raw["hash_key"] is not None:
        raw["hash_key"] = KeyAttribute(**raw["hash_key"])
    raw["filters"] = [KeyAttribute(**a) for a in raw["filters"]]
    return VectorIndexMeta(**raw)

