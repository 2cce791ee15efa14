"""Vector indexes as CreateTable's VectorIndexes and UpdateTable's VectorIndexUpdates define them, and as
DescribeTable describes them (the API Reference: VectorIndex, CreateVectorIndexAction, VectorIndexDescription;
the Developer Guide: "Creating and searching vector indexes", "Requirements and limitations", "Troubleshooting
vector indexes").

Limits the Developer Guide's quota page gives and this server could not read are marked `best guess` where set.
"""

from __future__ import annotations

from typing import Any

from openddb.api import indexes as ix
from openddb.api import validation as v
from openddb.api.context import RequestContext
from openddb.errors import ValidationException, invalid
from openddb.model.schema import BillingMode, KeyAttribute, TableMeta, VectorDistance, VectorIndexMeta

# best guess: SearchVectors takes at most 4,096 elements in SearchVector (botocore's SearchVectorList), and a
# search vector must have the index's dimensions, so no index can have more.
MAX_DIMENSIONS = 4096
# best guess: the per-table quota of vector indexes is on the quota page, which this server could not read.
MAX_VECTOR_INDEXES = 5

_SEARCH_SCHEMA_ELEMENT = v.Struct({
    "AttributeName": v.Str(required=True, min_len=1, max_len=255),
    "SearchSchemaElementType": v.Str(required=True, enum=("HASH", "INLINE_FILTER")),
})
VECTOR_INDEX = v.Struct({
    "IndexName": v.Str(required=True, min_len=3, max_len=255, pattern=v.TABLE_NAME_PATTERN),
    "VectorAttribute": v.Struct({"AttributeName": v.Str(required=True, min_len=1, max_len=255)}, required=True),
    "SearchSchema": v.List(_SEARCH_SCHEMA_ELEMENT, min_len=1),
    "Projection": ix.GSI.fields["Projection"],
    "Dimensions": v.Int(required=True, minimum=1),
    "DistanceFunction": v.Str(required=True, enum=("COSINE", "DOT_PRODUCT", "EUCLIDEAN")),
})
VECTOR_INDEX_UPDATES = v.List(v.Struct({
    "Create": VECTOR_INDEX,
    "Delete": v.Struct({"IndexName": VECTOR_INDEX.fields["IndexName"]}),
}))
_NOT_DEFINED = "One element in SearchSchema is not defined in attribute definitions"  # (Troubleshooting)


def search_schema_names(specs: list[dict[str, Any]] | None) -> list[str]:
    """The attributes the vector indexes' search schemas name: they must be in AttributeDefinitions, like GSI keys."""
    return [element["AttributeName"] for spec in specs or [] for element in spec.get("SearchSchema") or []]


def check_search_schemas_defined(request: dict[str, Any], types: dict[str, str]) -> None:
    """Every search-schema attribute of CreateTable's VectorIndexes has a definition: refused before the other
    AttributeDefinitions rules look at them (the refusal is the Troubleshooting page's)."""
    if any(name not in types for name in search_schema_names(request.get("VectorIndexes"))):
        raise ValidationException(_NOT_DEFINED)


def require_on_demand(billing_mode: BillingMode) -> None:
    """"Vector indexes are not supported on provisioned capacity tables" (Developer Guide, "Before you begin")."""
    if billing_mode != "PAY_PER_REQUEST":
        # best guess at the wording
        raise invalid("Vector indexes are supported only on tables with BillingMode PAY_PER_REQUEST")


def parse_vector_index(spec: dict[str, Any], types: dict[str, str], key_names: tuple[str, ...],
                       index_id: int) -> VectorIndexMeta:
    """One VectorIndex (shape already checked) against the table's attribute definitions."""
    name = spec["IndexName"]
    attribute = spec["VectorAttribute"]["AttributeName"]
    hash_key: KeyAttribute | None = None
    filters: list[KeyAttribute] = []
    for element in spec.get("SearchSchema") or []:
        element_name = element["AttributeName"]
        if element_name not in types:
            raise ValidationException(_NOT_DEFINED)
        if element_name == attribute or element_name in {a.name for a in filters} or \
                (hash_key is not None and hash_key.name == element_name):
            raise invalid(f"Duplicate attribute in SearchSchema: {element_name} for index: {name}")  # best guess
        if element["SearchSchemaElementType"] == "HASH":
            if hash_key is not None:
                raise invalid(f"SearchSchema has more than one HASH element for index: {name}")  # best guess
            hash_key = KeyAttribute(element_name, types[element_name])
        else:
            filters.append(KeyAttribute(element_name, types[element_name]))
    if attribute in key_names or attribute in types:
        # best guess: a key attribute (or any defined one) is S, N or B, never a List of Numbers
        raise invalid(f"Vector attribute {attribute} cannot be a key attribute or be defined in "
                      f"AttributeDefinitions for index: {name}")
    dimensions = int(spec["Dimensions"])
    if dimensions > MAX_DIMENSIONS:
        raise invalid(f"Dimensions {dimensions} exceeds the maximum of {MAX_DIMENSIONS} for vector index: "
                      f"{name}")  # best guess
    kind, non_key = ix.parse_projection(spec["Projection"])
    distance: VectorDistance = spec["DistanceFunction"]
    return VectorIndexMeta(name, attribute, dimensions, distance, hash_key, filters, kind, non_key,
                           index_id=index_id)


def check_table_vectors(meta: TableMeta) -> None:
    """Rules over all of a table's indexes: their count, unique names, one dimension count per vector attribute,
    and the 100 projected non-key attributes a table's indexes share (a vector index counts its vector attribute
    and each INLINE_FILTER element as one each: the API Reference, CreateTable's VectorIndexes)."""
    if len(meta.vector_indexes) > MAX_VECTOR_INDEXES:
        raise invalid(f"VectorIndex count exceeds the per-table limit of {MAX_VECTOR_INDEXES}")  # best guess
    names = [index.name for index in meta.indexes]
    dimensions: dict[str, int] = {}
    for index in meta.vector_indexes:
        if index.name in names:
            raise invalid(f"Duplicate index name: {index.name}")  # (the GSI and LSI wording)
        names.append(index.name)
        if dimensions.setdefault(index.attribute, index.dimensions) != index.dimensions:
            # best guess: the rule is the API Reference's ("they must all use the same number of dimensions")
            raise invalid(f"Vector indexes on attribute {index.attribute} must all use the same number of "
                          f"dimensions")
    projected = sum(len(index.non_key_attributes) for index in meta.indexes) + sum(
        len(index.non_key_attributes) + 1 + len(index.filters) for index in meta.vector_indexes)
    if projected > ix.MAX_PROJECTED_ATTRIBUTES:
        raise invalid(f"Number of projected attributes in all indexes exceeds limit of "
                      f"{ix.MAX_PROJECTED_ATTRIBUTES}, number of projected attributes: {projected}")  # best guess


def describe_vector_indexes(context: RequestContext, meta: TableMeta, counts: bool) -> list[dict[str, Any]]:
    """TableDescription's VectorIndexes. IndexSizeBytes and ItemCount are current here (DynamoDB updates them about
    every six hours); Backfilling appears only on an index UpdateTable added, while it is CREATING."""
    described = []
    for index in meta.vector_indexes:
        count, size = context.engine.vector_stats(meta, index) if counts else (0, 0)
        description: dict[str, Any] = {"IndexName": index.name}
        if index.hash_key is not None or index.filters:
            description["SearchSchema"] = index.search_schema_wire()
        description.update({
            "Projection": index.projection_wire(),
            "VectorAttribute": {"AttributeName": index.attribute},
            "Dimensions": index.dimensions,
            "DistanceFunction": index.distance,
            "IndexStatus": index.status,
        })
        if index.backfilling and index.status == "CREATING":
            description["Backfilling"] = True
        description.update({"IndexSizeBytes": size, "ItemCount": count,
                            "IndexArn": f"{meta.arn}/index/{index.name}"})
        described.append(description)
    return described


def create_table_vectors(context: RequestContext, request: dict[str, Any], types: dict[str, str],
                         key_names: tuple[str, ...], billing_mode: BillingMode,
                         first_id: int) -> list[VectorIndexMeta]:
    """The vector indexes a CreateTable request defines (its shape already checked)."""
    specs: list[dict[str, Any]] | None = request.get("VectorIndexes")
    if specs is None:
        return []
    if not specs:
        raise invalid("List of VectorIndexes is empty")  # best guess: the GSI list's wording
    if not context.engine.supports_vectors:
        raise invalid("Vector indexes are not supported by this storage engine")  # (OpenDDB's own)
    require_on_demand(billing_mode)
    return [parse_vector_index(spec, types, key_names, first_id + n) for n, spec in enumerate(specs)]
