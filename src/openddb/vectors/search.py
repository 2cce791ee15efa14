"""SearchVectors: the TopK items of a vector index nearest to a search vector (the API Reference, SearchVectors; the
Developer Guide, "Searching with SearchVectors" and "Troubleshooting vector indexes", whose error texts are quoted
here where it gives them).

The request is checked (its shape, TopK, the expressions and their placeholders) before the table is looked up;
then the index, the search vector's dimensions and the condition against the index's search schema. The engine
searches one search partition exactly (`Engine.vector_search`) and returns the stored items, which are projected
here: to what the index projects, then to the ProjectionExpression.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from openddb.api import validation as v
from openddb.api.context import RequestContext
from openddb.api.expression_members import expression_attributes, expression_text
from openddb.errors import ValidationException, invalid
from openddb.expressions import ExpressionAttributes, Projection, compile_projection
from openddb.expressions.ast import And, Compare, Cond, ExpressionError, Path, ValueRef
from openddb.expressions.cache import condition_tree
from openddb.expressions.compiler import invalid as invalid_expression
from openddb.model import AttributeValue, Item
from openddb.model.schema import TableMeta, VectorIndexMeta
from openddb.model.values import item_size
from openddb.vectors.definitions import MAX_DIMENSIONS
from openddb.vectors.entries import canonical, part_of, projected_names

MAX_TOP_K = 100  # "TopK was outside 1 to 100" (Troubleshooting vector indexes)

SEARCH_VECTORS = v.Struct({
    "TableName": v.table_name_or_arn(),
    "IndexName": v.Str(required=True, min_len=3, max_len=255, pattern=v.TABLE_NAME_PATTERN),
    "ReturnConsumedCapacity": v.RETURN_CONSUMED_CAPACITY,
    "ExpressionAttributeNames": v.EXPRESSION_NAMES,
    "ExpressionAttributeValues": v.EXPRESSION_VALUES,
    "ProjectionExpression": v.Str(),
    "SearchVector": v.List(v.Any_(), required=True, min_len=1, max_len=MAX_DIMENSIONS),
    "SearchConditionExpression": v.Str(),
    "TopK": v.Int(required=True, java="Integer"),
})
_EXPRESSIONS = ("SearchConditionExpression", "ProjectionExpression")
# Quoted from the Developer Guide's "Troubleshooting vector indexes".
_TOP_K_RANGE = "Provided TopK value is out of valid range"
_HASH_REQUIRED = "SearchConditionExpression must be provided when SearchSchema has a HASH key"
_COMPARATOR = "Invalid comparator used in SearchConditionExpression"


@dataclass(slots=True)
class _Conditions:
    """A search condition resolved against the index: the HASH value, and (filter position, value) pairs."""

    part: AttributeValue | None
    filters: list[tuple[int, str]]
    empty: bool  # two different values asked of one attribute: nothing can match


def search_vectors(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(SEARCH_VECTORS, request)
    top_k = int(request["TopK"])
    if not 1 <= top_k <= MAX_TOP_K:
        raise ValidationException(_TOP_K_RANGE)
    attrs = expression_attributes(request, _EXPRESSIONS)
    condition = _condition_tree(request)
    projection_text = expression_text(request, "ProjectionExpression")
    projection = None if projection_text is None else compile_projection(projection_text, attrs)
    meta = context.table(request["TableName"])
    index = meta.vector_index(request["IndexName"])
    if index is None:
        raise ValidationException(f"The table does not have the specified index: {request['IndexName']}")
    if index.status != "ACTIVE":
        raise ValidationException(f"Cannot search backfilling vector index: {index.name}")
    query = _search_vector(request["SearchVector"], index)
    conditions = _resolve(condition, attrs, index)
    attrs.check_all_used()
    if projection is not None:
        _check_projected(meta, index, projection)
    part = part_of(conditions.part) if index.hash_key is not None else b""
    filters = [(position, value) for position, value in conditions.filters]
    hits = [] if conditions.empty else context.engine.vector_search(meta, index, part, query, top_k, filters)
    items = []
    for hit in hits:
        item = _projected(meta, index, hit.item)
        items.append(item if projection is None else projection.apply(item))
    response: dict[str, Any] = {"SearchResults": [{"Item": item, "Score": hit.score}
                                                  for item, hit in zip(items, hits)]}
    if request.get("ReturnConsumedCapacity") in ("TOTAL", "INDEXES"):  # (the items' sizes: only when asked)
        returned = sum(item_size(item) for item in items)
        response["ConsumedCapacity"] = {"VectorSearchRequestBytes": _search_bytes(index, top_k, returned)}
    return response


def _condition_tree(request: dict[str, Any]) -> Cond | None:
    text = expression_text(request, "SearchConditionExpression")
    if text is None:
        return None
    try:
        return condition_tree(text)
    except ExpressionError as error:
        raise invalid_expression("SearchConditionExpression", error) from None


def _search_vector(elements: list[Any], index: VectorIndexMeta) -> list[float]:
    """SearchVector as floats: a list of Numbers, as many as the index's dimensions."""
    if len(elements) != index.dimensions:
        # best guess at the wording
        raise invalid(f"SearchVector has {len(elements)} dimensions, but vector index {index.name} has "
                      f"{index.dimensions}")
    values = []
    for position, element in enumerate(elements):
        text = element.get("N") if isinstance(element, dict) and len(element) == 1 else None
        try:
            value = float(text) if isinstance(text, str) else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or abs(value) > 3.4028234663852886e38:
            # best guess at the wording: each element is "a 32-bit IEEE-754 floating point number"
            raise invalid(f"SearchVector element at index {position} is not a valid 32-bit floating point Number")
        values.append(value)
    return values


def _resolve(tree: Cond | None, attrs: ExpressionAttributes, index: VectorIndexMeta) -> _Conditions:
    """The condition's equalities against the search schema (only `=`, joined by AND, on top-level HASH and
    INLINE_FILTER attributes: the API Reference, SearchConditionExpression)."""
    resolved = _Conditions(None, [], False)
    positions = {attribute.name: n for n, attribute in enumerate(index.filters)}
    for name, value in _equalities(tree, attrs) if tree is not None else []:
        if index.hash_key is not None and name == index.hash_key.name:
            expected = index.hash_key.type
        elif name in positions:
            expected = index.filters[positions[name]].type
        else:
            # best guess at the wording
            raise invalid(f"SearchConditionExpression can only reference attributes of the index's SearchSchema: "
                          f"{name} is not in the SearchSchema of index: {index.name}")
        if expected not in value:
            raise invalid("Condition parameter type does not match schema type")  # best guess: Query's wording
        if name in positions:
            resolved.filters.append((positions[name], canonical(value)))
        elif resolved.part is not None and resolved.part != value:
            resolved.empty = True
        else:
            resolved.part = value
    if index.hash_key is not None and resolved.part is None:
        raise ValidationException(_HASH_REQUIRED)
    return resolved


def _equalities(tree: Cond, attrs: ExpressionAttributes) -> list[tuple[str, AttributeValue]]:
    if isinstance(tree, And):
        return _equalities(tree.left, attrs) + _equalities(tree.right, attrs)
    if not isinstance(tree, Compare) or tree.op != "=":
        raise ValidationException(_COMPARATOR)
    left, right = tree.left, tree.right
    if isinstance(right, Path) and isinstance(left, ValueRef):
        left, right = right, left
    if not isinstance(left, Path) or not isinstance(right, ValueRef):
        raise ValidationException(_COMPARATOR)  # best guess: an equality of two paths or two values
    try:
        path = attrs.path(left)
        value = attrs.value(right.name)
    except ExpressionError as error:
        raise invalid_expression("SearchConditionExpression", error) from None
    if len(path) != 1:
        # best guess at the wording ("You can reference only top-level attributes from the search schema")
        raise invalid("SearchConditionExpression can reference only top-level attributes")
    return [(str(path[0]), value)]


def _projected(meta: TableMeta, index: VectorIndexMeta, item: Item) -> Item:
    names = projected_names(meta, index)
    return item if names is None else {name: value for name, value in item.items() if name in names}


def _check_projected(meta: TableMeta, index: VectorIndexMeta, projection: Projection) -> None:
    """"Only attributes projected into the vector index can be retrieved" (the API Reference)."""
    held = projected_names(meta, index)
    if held is not None:
        missing = [name for name in dict.fromkeys(str(path[0]) for path in projection.paths) if name not in held]
        if missing:
            # best guess: the GSI's wording
            raise invalid(f"Vector index {index.name} does not project [{', '.join(missing)}]")


def _search_bytes(index: VectorIndexMeta, top_k: int, returned: int) -> float:
    """VectorSearchRequestBytes: "scales with the size of the vector data the search examines and returns"
    (Developer Guide, "Monitoring vector index capacity"). best guess at the arithmetic: the vectors an
    approximate search examines (TopK of them, and its search vector) plus the items returned."""
    return float(4 * index.dimensions * (top_k + 1) + returned)


HANDLERS = {"SearchVectors": search_vectors}
