"""DynamoDB's legacy (pre-expression) parameters, rewritten into expressions before a handler runs.

Each rewriter validates the legacy members as DynamoDB does (request shape, mixing with expression members,
placeholders without expressions, ConditionalOperator, per-condition operand counts and types) and then replaces
them by the equivalent expression members: every attribute name goes through a generated ``#n`` placeholder
(legacy names may be reserved words or contain any character) and every value through a ``:n`` placeholder,
merged into ExpressionAttributeNames/Values. The handler then sees an ordinary expression request, so one parser
and one evaluator serve both forms. A request without legacy members is returned untouched after one membership
test per member.

Checks that need the table's key schema stay with the handlers. For those whose wording differs between the
legacy and the expression form, a rewriter answers with the rewritten request a ``LegacyOrigin`` (what it wrote
from what), which the dispatcher hands the handler on its ``RequestContext``: the request stays DynamoDB's own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from openddb.api import batch, items, reads
from openddb.api import validation as v
from openddb.api.context import LegacyOrigin
from openddb.errors import ValidationException
from openddb.model import AttributeValue
from openddb.model.values import compare_values, type_of, validate_value

# rewrite(request) -> (the request using only expression parameters, what was rewritten; None if nothing was).
Rewriter = Callable[[dict[str, Any]], tuple[dict[str, Any], LegacyOrigin | None]]

_INVALID = "One or more parameter values were invalid: "
# DynamoDB lists the enum members in this (hash-set) order in its validation messages.
COMPARISON_OPERATORS = ("IN", "NULL", "BETWEEN", "LT", "NOT_CONTAINS", "EQ", "GT", "NOT_NULL", "NE", "LE",
                        "BEGINS_WITH", "GE", "CONTAINS")
_CONDITION = v.Struct({
    "AttributeValueList": v.List(v.Any_()),
    "ComparisonOperator": v.Str(required=True, enum=COMPARISON_OPERATORS),
})
_EXPECTED_VALUE = v.Struct({
    "Value": v.Any_(),
    "Exists": v.Bool(),
    "ComparisonOperator": v.Str(enum=COMPARISON_OPERATORS),
    "AttributeValueList": v.List(v.Any_()),
})
_ATTRIBUTE_UPDATE = v.Struct({"Value": v.Any_(), "Action": v.Str(enum=("ADD", "PUT", "DELETE"))})
ATTRIBUTES_TO_GET = v.List(v.Str(max_len=65535), min_len=1)
# The request shapes of the legacy members; the rewriters validate them inside the operation's own shape.
_NAME_KEY = (None, 65535)  # each map is keyed by attribute names of at most 65535 characters
SHAPES: dict[str, v.Shape] = {
    "AttributesToGet": ATTRIBUTES_TO_GET,
    "Expected": v.Map(_EXPECTED_VALUE, key_len=_NAME_KEY),
    "AttributeUpdates": v.Map(_ATTRIBUTE_UPDATE, key_len=_NAME_KEY),
    "KeyConditions": v.Map(_CONDITION, key_len=_NAME_KEY),
    "QueryFilter": v.Map(_CONDITION, key_len=_NAME_KEY),
    "ScanFilter": v.Map(_CONDITION, key_len=_NAME_KEY),
    "ConditionalOperator": v.Str(enum=("OR", "AND")),
}

_EXPRESSIONS = ("UpdateExpression", "ConditionExpression", "KeyConditionExpression", "FilterExpression",
                "ProjectionExpression")

# Operand count per operator (None: one or more) and the operand types allowed (None: any type).
_ARGUMENTS: dict[str, int | None] = {
    "EQ": 1, "NE": 1, "LE": 1, "LT": 1, "GE": 1, "GT": 1, "NOT_NULL": 0, "NULL": 0, "CONTAINS": 1,
    "NOT_CONTAINS": 1, "BEGINS_WITH": 1, "IN": None, "BETWEEN": 2,
}  # fmt: skip
_SCALARS = frozenset({"S", "N", "B"})
_OPERAND_TYPES: dict[str, frozenset[str]] = {
    "LE": _SCALARS, "LT": _SCALARS, "GE": _SCALARS, "GT": _SCALARS, "CONTAINS": _SCALARS,
    "NOT_CONTAINS": _SCALARS, "BEGINS_WITH": frozenset({"S", "B"}), "IN": _SCALARS, "BETWEEN": _SCALARS,
}  # fmt: skip
_COMPARATORS = {"EQ": "=", "NE": "<>", "LE": "<=", "LT": "<", "GE": ">=", "GT": ">"}
# KeyConditions accept only the operators a key range read can serve.
_NOT_INDEXABLE = frozenset({"NULL", "NOT_NULL", "NE", "CONTAINS", "NOT_CONTAINS", "IN"})
_SETS = frozenset({"SS", "NS", "BS"})
_ADDABLE = frozenset({"N", "SS", "NS", "BS", "L"})
# The expression language caps IN at 100 operands; longer legacy IN lists are split into ORed INs.
_IN_CHUNK = 100


def _invalid(detail: str) -> ValidationException:
    return ValidationException(_INVALID + detail)


def _invalid_entry(detail: str) -> ValidationException:
    """An Expected entry whose members do not go together: DynamoDB words these as a validation error of the request
    ("1 validation error detected: One or more parameter values were invalid: Value must be provided when Exists is
    true for Attribute: a", verified against DynamoDB in floci-io/floci PR 2125, 2026)."""
    return ValidationException(v.validation_message([_INVALID + detail]))


# --- request shape -------------------------------------------------------------------------------------


_SHAPE_CACHE: dict[str, v.Struct] = {}
# Operation -> (its request shape, legacy members it accepts).
_SHAPE_SOURCES: dict[str, tuple[v.Struct, tuple[str, ...]]] = {
    "PutItem": (items.PUT_ITEM, ("Expected", "ConditionalOperator")),
    "UpdateItem": (items.UPDATE_ITEM, ("AttributeUpdates", "Expected", "ConditionalOperator")),
    "DeleteItem": (items.DELETE_ITEM, ("Expected", "ConditionalOperator")),
    "GetItem": (items.GET_ITEM, ("AttributesToGet",)),
    "Query": (reads.QUERY, ("AttributesToGet", "KeyConditions", "QueryFilter", "ConditionalOperator")),
    "Scan": (reads.SCAN, ("AttributesToGet", "ScanFilter", "ConditionalOperator")),
}


def _shape(operation: str) -> v.Struct:
    """The operation's request shape with the legacy members' full shapes substituted in.

    Validating the whole request here keeps DynamoDB's order: shape errors (all of them, in one message)
    before any semantic check of the legacy members."""
    shape = _SHAPE_CACHE.get(operation)
    if shape is None:
        base, members = _SHAPE_SOURCES[operation]
        fields: dict[str, v.Shape] = dict(base.fields)
        for member in members:
            fields[member] = SHAPES[member]
        shape = _SHAPE_CACHE[operation] = v.Struct(fields)
    return shape


def _batch_get_shape() -> v.Struct:
    """BatchGetItem's request shape with the legacy AttributesToGet shape inside each table's entry."""
    shape = _SHAPE_CACHE.get("BatchGetItem")
    if shape is None:
        fields: dict[str, v.Shape] = dict(batch.BATCH_GET_ITEM.fields)
        tables = fields.get("RequestItems")
        if isinstance(tables, v.Map) and isinstance(tables.value, v.Struct):
            entry = v.Struct({**tables.value.fields, "AttributesToGet": ATTRIBUTES_TO_GET})
            fields["RequestItems"] = v.Map(entry, required=tables.required, min_len=tables.min_len,
                                           max_len=tables.max_len)
        else:
            fields["RequestItems"] = v.Map(v.Struct({"AttributesToGet": ATTRIBUTES_TO_GET}))
        shape = _SHAPE_CACHE["BatchGetItem"] = v.Struct(fields)
    return shape


# --- checks shared by every operation ------------------------------------------------------------------


def _present(request: dict[str, Any], members: Iterable[str]) -> list[str]:
    return [m for m in members if request.get(m) is not None]


def _check_not_mixed(request: dict[str, Any], legacy: Iterable[str], expressions: Iterable[str]) -> None:
    old, new = _present(request, legacy), _present(request, expressions)
    if old and new:
        raise ValidationException(
            "Can not use both expression and non-expression parameters in the same request: "
            f"Non-expression parameters: {{{', '.join(old)}}} Expression parameters: {{{', '.join(new)}}}")


def _check_placeholders(request: dict[str, Any], expressions: tuple[str, ...],
                        value_expressions: tuple[str, ...], *, name_missing: bool = True) -> None:
    """ExpressionAttributeNames/Values sent along with legacy members but no expression to use them."""
    if request.get("ExpressionAttributeNames") is not None and not _present(request, expressions):
        raise ValidationException("ExpressionAttributeNames can only be specified when using expressions")
    # (An operation with no value expression has no ExpressionAttributeValues member: ignored, as any unknown one.)
    if request.get("ExpressionAttributeValues") is not None and value_expressions and \
            not _present(request, value_expressions):
        raise v.values_without_expression(value_expressions, named=name_missing)


def _check_conditional_operator(request: dict[str, Any], conditions: Any) -> None:
    if request.get("ConditionalOperator") is None:
        return
    if conditions is None:
        raise ValidationException("ConditionalOperator cannot be used without Filter or Expected")
    if len(conditions) < 2:
        raise ValidationException("ConditionalOperator can only be used when Filter or Expected has two or "
                                  "more elements")


class _Placeholders:
    """Generated placeholders for one request, merged with (and never clashing with) the client's own."""

    __slots__ = ("_names_of", "_next_name", "_next_value", "names", "values")

    def __init__(self, request: dict[str, Any]) -> None:
        names, values = request.get("ExpressionAttributeNames"), request.get("ExpressionAttributeValues")
        # Shapes the operation's validation rejects; checked here too because they must be merged.
        errors: list[str] = []
        if names is not None:
            v.EXPRESSION_NAMES.check(names, "expressionAttributeNames", errors)
        if values is not None:
            v.EXPRESSION_VALUES.check(values, "expressionAttributeValues", errors)
        if errors:
            raise ValidationException(v.validation_message(errors))
        self.names: dict[str, str] = dict(names or {})
        self.values: dict[str, Any] = dict(values or {})
        self._names_of: dict[str, str] = {}
        self._next_name = 0
        self._next_value = 0

    def name(self, attribute: str) -> str:
        ref = self._names_of.get(attribute)
        if ref is None:
            ref = f"#{self._next_name}"
            while ref in self.names:
                self._next_name += 1
                ref = f"#{self._next_name}"
            self._next_name += 1
            self.names[ref] = attribute
            self._names_of[attribute] = ref
        return ref

    def value(self, av: AttributeValue) -> str:
        ref = f":{self._next_value}"
        while ref in self.values:
            self._next_value += 1
            ref = f":{self._next_value}"
        self._next_value += 1
        self.values[ref] = av
        return ref

    def store(self, request: dict[str, Any]) -> None:
        if self.names:
            request["ExpressionAttributeNames"] = self.names
        if self.values:
            request["ExpressionAttributeValues"] = self.values


# --- conditions (Expected, KeyConditions, QueryFilter, ScanFilter) -------------------------------------


def _operands(operator: str, raw: list[Any]) -> list[AttributeValue]:
    """The validated AttributeValueList of one condition, checked against the operator's rules."""
    values = [validate_value(item) for item in raw]
    wanted = _ARGUMENTS[operator]
    if (len(values) != wanted) if wanted is not None else not values:
        raise _invalid(f"Invalid number of argument(s) for the {operator} ComparisonOperator")
    allowed = _OPERAND_TYPES.get(operator)
    if allowed is not None:
        for value in values:
            kind = type_of(value)
            if kind not in allowed:
                raise _invalid(f"ComparisonOperator {operator} is not valid for {kind} AttributeValue type")
        if operator in ("BETWEEN", "IN") and len({type_of(value) for value in values}) > 1:
            raise _invalid("AttributeValues inside AttributeValueList must be of same type")
        if operator == "BETWEEN" and (compare_values(values[0], values[1]) or 0) > 0:
            # Worded so in DynamoDB's answer quoted in Cbsoftware/pressureNET-server #78.
            raise ValidationException("The BETWEEN condition was provided a range where the lower bound is "
                                      "bigger than the upper bound")
    return values


def _compare(refs: _Placeholders, attribute: str, operator: str, values: list[AttributeValue]) -> str:
    """Condition-expression text equivalent to one legacy comparison."""
    path = refs.name(attribute)
    if operator == "NULL":
        return f"attribute_not_exists({path})"
    if operator == "NOT_NULL":
        return f"attribute_exists({path})"
    operands = [refs.value(value) for value in values]
    if operator in _COMPARATORS:
        return f"{path} {_COMPARATORS[operator]} {operands[0]}"
    if operator == "CONTAINS":
        return f"contains({path}, {operands[0]})"
    if operator == "NOT_CONTAINS":
        return f"NOT contains({path}, {operands[0]})"
    if operator == "BEGINS_WITH":
        return f"begins_with({path}, {operands[0]})"
    if operator == "BETWEEN":
        return f"{path} BETWEEN {operands[0]} AND {operands[1]}"
    chunks = [f"{path} IN ({','.join(operands[i:i + _IN_CHUNK])})" for i in range(0, len(operands), _IN_CHUNK)]
    return chunks[0] if len(chunks) == 1 else "(" + " OR ".join(chunks) + ")"


def _validate_conditions(conditions: dict[str, Any], member: str) -> list[tuple[str, str, list[AttributeValue]]]:
    """(attribute, operator, operands) of each entry of a KeyConditions/QueryFilter/ScanFilter map."""
    checked = []
    for attribute, condition in conditions.items():
        operator = (condition or {}).get("ComparisonOperator")
        if operator is None:
            # A null condition slips past the map's shape check; DynamoDB reports its missing operator.
            raise ValidationException(v.validation_message([
                f"Value null at '{member}.{attribute}.member.comparisonOperator' failed to satisfy constraint: "
                "Member must not be null"]))
        checked.append((attribute, operator, _operands(operator, condition.get("AttributeValueList") or [])))
    return checked


def _validate_expected(expected: dict[str, Any]) -> list[tuple[str, str, list[AttributeValue]]]:
    """(attribute, operator, operands) of each Expected entry; ``Value`` alone means EQ, ``Exists: false`` NULL."""
    checked = []
    for attribute, condition in expected.items():
        condition = condition or {}
        value = condition.get("Value")
        values = condition.get("AttributeValueList")
        operator = condition.get("ComparisonOperator")
        exists = condition.get("Exists")
        if value is not None and values is not None:
            raise _invalid_entry(f"Value and AttributeValueList cannot be used together for Attribute: {attribute}")
        if operator is not None:
            if exists is not None:
                raise _invalid_entry("Exists and ComparisonOperator cannot be used together for Attribute: "
                                     f"{attribute}")
            if values is None and value is None and operator not in ("NULL", "NOT_NULL"):
                raise _invalid_entry(f"Value or AttributeValueList must be used with ComparisonOperator: {operator} "
                               f"for Attribute: {attribute}")
            raw = values if values is not None else [value] if value is not None else []
            checked.append((attribute, operator, _operands(operator, raw)))
        elif values is not None:
            raise _invalid_entry("AttributeValueList can only be used with a ComparisonOperator for Attribute: "
                                 f"{attribute}")
        elif exists is None or exists:
            if value is None:
                raise _invalid_entry(f"Value must be provided when Exists is {'null' if exists is None else 'true'} "
                               f"for Attribute: {attribute}")
            checked.append((attribute, "EQ", [validate_value(value)]))
        else:
            if value is not None:
                raise _invalid_entry(f"Value cannot be used when Exists is false for Attribute: {attribute}")
            checked.append((attribute, "NULL", []))
    return checked


def _condition_text(refs: _Placeholders, checked: list[tuple[str, str, list[AttributeValue]]],
                    conditional_operator: str | None) -> str | None:
    if not checked:
        return None
    joiner = " OR " if conditional_operator == "OR" else " AND "
    return joiner.join(_compare(refs, attribute, operator, values) for attribute, operator, values in checked)


# --- projections and updates ---------------------------------------------------------------------------


def _projection(refs: _Placeholders, names: list[str]) -> str:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise _invalid(f"Duplicate value in attribute name: {name}")
        seen.add(name)
    return ",".join(refs.name(name) for name in names if name is not None)


def _check_select(request: dict[str, Any]) -> None:
    select = request.get("Select")
    if select in ("ALL_ATTRIBUTES", "ALL_PROJECTED_ATTRIBUTES", "COUNT"):
        wanted = "only the Count" if select == "COUNT" else select
        raise ValidationException(f"Cannot specify the AttributesToGet when choosing to get {wanted}")


def _update_text(refs: _Placeholders, updates: dict[str, Any]) -> str | None:
    """UpdateExpression text for AttributeUpdates: PUT -> SET, DELETE -> REMOVE or DELETE, ADD -> ADD (numbers,
    sets) or a list append (lists)."""
    clauses: dict[str, list[str]] = {"SET": [], "REMOVE": [], "ADD": [], "DELETE": []}
    for attribute, update in updates.items():
        update = update or {}
        action = update.get("Action") or "PUT"
        raw = update.get("Value")
        value = validate_value(raw) if raw is not None else None
        if value is None:
            if action != "DELETE":
                raise _invalid("Only DELETE action is allowed when no attribute value is specified")
            clauses["REMOVE"].append(refs.name(attribute))
            continue
        kind = type_of(value)
        if action == "DELETE" and kind not in _SETS:
            raise _invalid(f"DELETE action with value is not supported for the type {kind}")
        if action == "ADD" and kind not in _ADDABLE:
            raise _invalid(f"ADD action is not supported for the type {kind}")
        path = refs.name(attribute)
        if action == "PUT":
            clauses["SET"].append(f"{path} = {refs.value(value)}")
        elif action == "ADD" and kind == "L":
            empty = refs.value({"L": []})
            clauses["SET"].append(f"{path} = list_append(if_not_exists({path}, {empty}), {refs.value(value)})")
        else:
            clauses[action].append(f"{path} {refs.value(value)}")
    text = " ".join(f"{clause} {', '.join(actions)}" for clause, actions in clauses.items() if actions)
    return text or None


# --- rewriters -----------------------------------------------------------------------------------------


def _write_rewriter(operation: str, updates: bool) -> Rewriter:
    """PutItem/DeleteItem (Expected) and UpdateItem (Expected, AttributeUpdates)."""
    legacy = ("AttributeUpdates", "Expected", "ConditionalOperator") if updates else ("Expected", "ConditionalOperator")
    expressions = ("UpdateExpression", "ConditionExpression") if updates else ("ConditionExpression",)

    def rewrite(request: dict[str, Any]) -> tuple[dict[str, Any], LegacyOrigin | None]:
        if "Expected" not in request and "ConditionalOperator" not in request and (
                not updates or "AttributeUpdates" not in request):
            return request, None
        if not _present(request, legacy):
            return request, None
        v.validate_item_request(_shape(operation), request, update=updates)
        try:
            return _rewritten(request)
        except ValidationException as error:
            if operation in ("PutItem", "UpdateItem"):  # (their request checks are counted: see the handlers)
                raise v.counted_request_error(error) from None
            raise

    def _rewritten(request: dict[str, Any]) -> tuple[dict[str, Any], LegacyOrigin]:
        _check_not_mixed(request, legacy, expressions)
        _check_placeholders(request, expressions, expressions, name_missing=operation != "PutItem")
        expected = request.get("Expected")
        _check_conditional_operator(request, expected)
        refs = _Placeholders(request)
        out = {k: val for k, val in request.items() if k not in legacy}
        origin = LegacyOrigin()
        if updates and request.get("AttributeUpdates") is not None:
            text = _update_text(refs, request["AttributeUpdates"])
            if text is not None:
                out["UpdateExpression"] = text
                origin = LegacyOrigin(attribute_updates=True)
        if expected is not None:
            text = _condition_text(refs, _validate_expected(expected), request.get("ConditionalOperator"))
            if text is not None:
                out["ConditionExpression"] = text
        refs.store(out)
        return out, origin

    return rewrite


def _attributes_to_get(entry: dict[str, Any]) -> dict[str, Any]:
    """A GetItem request or BatchGetItem table entry with AttributesToGet turned into ProjectionExpression."""
    _check_not_mixed(entry, ("AttributesToGet",), ("ProjectionExpression",))
    _check_placeholders(entry, ("ProjectionExpression",), ())
    refs = _Placeholders(entry)
    out = {k: val for k, val in entry.items() if k != "AttributesToGet"}
    out["ProjectionExpression"] = _projection(refs, entry["AttributesToGet"])
    refs.store(out)
    return out


def _get_item(request: dict[str, Any]) -> tuple[dict[str, Any], LegacyOrigin | None]:
    if request.get("AttributesToGet") is None:
        return request, None
    v.validate_item_request(_shape("GetItem"), request)
    return _attributes_to_get(request), LegacyOrigin()


def _query(request: dict[str, Any]) -> tuple[dict[str, Any], LegacyOrigin | None]:
    if ("KeyConditions" not in request and "QueryFilter" not in request and "AttributesToGet" not in request
            and "ConditionalOperator" not in request):
        return request, None
    legacy = ["AttributesToGet", "QueryFilter", "ConditionalOperator"]
    if request.get("KeyConditionExpression") is not None:
        # KeyConditions mix with FilterExpression/ProjectionExpression; only KeyConditionExpression excludes it.
        legacy.append("KeyConditions")
    if not _present(request, ("AttributesToGet", "QueryFilter", "ConditionalOperator", "KeyConditions")):
        return request, None
    v.validate(_shape("Query"), request)
    expressions = ("ProjectionExpression", "FilterExpression", "KeyConditionExpression")
    _check_not_mixed(request, legacy, expressions)
    _check_placeholders(request, expressions, ("FilterExpression", "KeyConditionExpression"))
    query_filter = request.get("QueryFilter")
    _check_conditional_operator(request, query_filter)
    attributes = request.get("AttributesToGet")
    if attributes is not None:
        _check_select(request)
    refs = _Placeholders(request)
    out = {k: val for k, val in request.items()
           if k not in ("AttributesToGet", "QueryFilter", "ConditionalOperator", "KeyConditions")}
    origin = LegacyOrigin()
    key_conditions = request.get("KeyConditions")
    if key_conditions is not None:
        checked = _validate_conditions(key_conditions, "keyConditions")
        if any(operator in _NOT_INDEXABLE for _, operator, _ in checked):
            raise ValidationException("Attempted conditional constraint is not an indexable operation")
        text = _condition_text(refs, checked, None)
        if text is not None:
            out["KeyConditionExpression"] = text
    if query_filter is not None:
        checked = _validate_conditions(query_filter, "queryFilter")
        text = _condition_text(refs, checked, request.get("ConditionalOperator"))
        if text is not None:
            out["FilterExpression"] = text
            origin = LegacyOrigin(query_filter=tuple(query_filter))
    if attributes is not None:
        out["ProjectionExpression"] = _projection(refs, attributes)
    refs.store(out)
    return out, origin


def _scan(request: dict[str, Any]) -> tuple[dict[str, Any], LegacyOrigin | None]:
    if "ScanFilter" not in request and "AttributesToGet" not in request and "ConditionalOperator" not in request:
        return request, None
    legacy = ("AttributesToGet", "ScanFilter", "ConditionalOperator")
    if not _present(request, legacy):
        return request, None
    v.validate(_shape("Scan"), request)
    expressions = ("ProjectionExpression", "FilterExpression")
    _check_not_mixed(request, legacy, expressions)
    _check_placeholders(request, expressions, ("FilterExpression",))
    scan_filter = request.get("ScanFilter")
    _check_conditional_operator(request, scan_filter)
    attributes = request.get("AttributesToGet")
    if attributes is not None:
        _check_select(request)
    refs = _Placeholders(request)
    out = {k: val for k, val in request.items() if k not in legacy}
    if scan_filter is not None:
        checked = _validate_conditions(scan_filter, "scanFilter")
        text = _condition_text(refs, checked, request.get("ConditionalOperator"))
        if text is not None:
            out["FilterExpression"] = text
    if attributes is not None:
        out["ProjectionExpression"] = _projection(refs, attributes)
    refs.store(out)
    return out, LegacyOrigin()


def _batch_get_item(request: dict[str, Any]) -> tuple[dict[str, Any], LegacyOrigin | None]:
    tables = request.get("RequestItems")
    if not isinstance(tables, dict):
        return request, None
    if not any(isinstance(entry, dict) and entry.get("AttributesToGet") is not None for entry in tables.values()):
        return request, None
    v.validate(_batch_get_shape(), request)
    # One table's AttributesToGet and another's ProjectionExpression mix the two forms in one request too
    # (captured against DynamoDB, ExtendDB PR 178).
    members = ("AttributesToGet", "ProjectionExpression")
    _check_not_mixed({m: True for m in members if any(entry.get(m) is not None for entry in tables.values())},
                     members[:1], members[1:])
    rewritten = {table: _attributes_to_get(entry) if entry.get("AttributesToGet") is not None else entry
                 for table, entry in tables.items()}
    return {**request, "RequestItems": rewritten}, LegacyOrigin()


def _marked(rewrite: Rewriter) -> Rewriter:
    """`rewrite`, its origin naming the expression members it wrote (see `LegacyOrigin.generated`)."""
    def run(request: dict[str, Any]) -> tuple[dict[str, Any], LegacyOrigin | None]:
        out, origin = rewrite(request)
        if origin is None:  # no legacy members: the common case costs one call
            return out, None
        written = frozenset(m for m in _EXPRESSIONS if m not in request and m in out)
        return out, dataclasses.replace(origin, generated=written)

    return run


# Operation name -> rewrite(request) -> request using only expression parameters.
REWRITERS: dict[str, Rewriter] = {name: _marked(rewrite) for name, rewrite in {
    "PutItem": _write_rewriter("PutItem", updates=False),
    "UpdateItem": _write_rewriter("UpdateItem", updates=True),
    "DeleteItem": _write_rewriter("DeleteItem", updates=False),
    "GetItem": _get_item,
    "Query": _query,
    "Scan": _scan,
    "BatchGetItem": _batch_get_item,
}.items()}
