"""Declarative request validation with DynamoDB's wording.

Each operation declares its request shape once (`Struct`, `Str`, `Int`, ...). `validate(shape, request)` first
checks JSON types, raising `SerializationException` as DynamoDB's deserializer does, then gathers every
constraint violation into one `ValidationException`:
``2 validation errors detected: Value 'ab' at 'tableName' failed to satisfy constraint: Member must have length
greater than or equal to 3; Value null at 'keySchema' failed to satisfy constraint: Member must not be null``.
Semantic checks that need more than one field live with the operation.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from openddb.errors import SerializationException, ValidationException
from openddb.model.values import MSG_NESTING, raise_first_shape_error

# DynamoDB changed the words of its item operations' request checks region by region through 2026: the changes
# below (an empty TableName named alone, the "1 validation error detected" envelope on set, number, NULL and
# expression refusals) reached 31 of 33 regions by 2026-10 (paritysuite's sweeps), after a time when us-east-1 and
# ap-southeast-2 still gave the earlier words and eu-west-2 and eu-central-1 the new ones (martinhicks.dev, "I
# watched DynamoDB change under my conformance suite", 2026). The latest words are the default; OPENDDB_WORDING=2025
# in the server's environment gives the earlier ones, for users whose region still does.
EARLIER_WORDING = os.environ.get("OPENDDB_WORDING") == "2025"


def _type_error(expected: str, value: Any) -> SerializationException:
    if isinstance(value, bool):
        token = "TRUE_VALUE" if value else "FALSE_VALUE"
    elif isinstance(value, int | float):
        token = "NUMBER_VALUE"
    elif isinstance(value, str):
        token = "STRING_VALUE"
    elif isinstance(value, dict):
        return SerializationException("Start of structure or map found where not expected.")
    else:
        return SerializationException("Start of list found where not expected")
    # The JSON token and the member's Java type, for every scalar member: "STRING_VALUE cannot be converted to
    # Integer" for a Limit sent as a string (quoted from DynamoDB in dynamodb-toolbox issue 502, 2023); before
    # that DynamoDB said "class java.lang.String can not be converted to an Integer".
    return SerializationException(f"{token} cannot be converted to {expected}")


def render(value: Any, shape: Shape | None = None) -> str:
    """A value as DynamoDB prints it inside "Value '...' at ..." messages. A structure whose shape names its
    type prints as that type does (`KeySchemaElement(attributeName=pk, keyType=HASH)`: every member in
    declaration order, absent ones as null); other maps print as `{key=value, ...}`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        member = shape.member if isinstance(shape, List) else None
        return "[" + ", ".join(render(v, member) for v in value) + "]"
    if isinstance(value, dict):
        if isinstance(shape, Struct) and shape.type_name is not None:
            members = ", ".join(f"{wire_name}={render(value.get(name), member_shape)}"
                                for name, wire_name, member_shape in shape._members)
            return f"{shape.type_name}({members})"
        inner = shape.value if isinstance(shape, Map) else None
        return "{" + ", ".join(f"{k}={render(v, inner)}" for k, v in value.items()) + "}"
    return str(value)


class Shape:
    required: bool = False

    def check(self, value: Any, path: str, errors: list[str]) -> None:
        raise NotImplementedError


def _violation(value: Any, path: str, constraint: str, shape: Shape | None = None) -> str:
    shown = "null" if value is None else f"'{render(value, shape)}'"
    return f"Value {shown} at '{path}' failed to satisfy constraint: {constraint}"


def _check_length(value: Any, path: str, length: int, min_len: int | None, max_len: int | None,
                  errors: list[str], shape: Shape | None = None) -> None:
    if min_len is not None and length < min_len:
        errors.append(_violation(value, path, f"Member must have length greater than or equal to {min_len}", shape))
    if max_len is not None and length > max_len:
        errors.append(_violation(value, path, f"Member must have length less than or equal to {max_len}", shape))


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, wrapping at 32 bits): DynamoDB's messages list sets in
    orders that follow it."""
    value = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        value = (31 * value + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return value


# The API model's order of the enumerations whose values share a bucket in `enum_message_order` (botocore's
# service-2.json): within a bucket the order depends on it.
_MODEL_ORDER = {frozenset(values): values for values in (
    ("NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES", "KEYS_ONLY"),
    ("EQ", "NE", "IN", "LE", "LT", "GE", "GT", "BETWEEN", "NOT_NULL", "NULL", "CONTAINS", "NOT_CONTAINS",
     "BEGINS_WITH"),
)}


def enum_message_order(values: tuple[str, ...]) -> list[str]:
    """An enumeration's values in the order DynamoDB lists them in "Member must satisfy enum value set: [...]":
    the order of a 32-bucket hash set indexed by the low five bits of String.hashCode (no bit spreading), values
    sharing a bucket latest-declared first. Inferred from, and checked against, every recorded text: [B, N, S]
    (aws/aws-sdk-js issue 979, aws/aws-sdk-go issue 333), [INDEXES, TOTAL, NONE], [SIZE, NONE], [ALL_OLD, NONE],
    [OR, AND], [PROVISIONED, PAY_PER_REQUEST], [HASH, RANGE], [ALL, INCLUDE, KEYS_ONLY], [ALL_NEW, UPDATED_OLD,
    ALL_OLD, NONE, UPDATED_NEW], [SPECIFIC_ATTRIBUTES, COUNT, ALL_ATTRIBUTES, ALL_PROJECTED_ATTRIBUTES], [OLD_IMAGE,
    KEYS_ONLY, NEW_AND_OLD_IMAGES, NEW_IMAGE] and the 13 ComparisonOperators (captured against DynamoDB and quoted
    in public repositories); AWS's own DAX client lists AttributeAction as [ADD, DELETE, PUT], as the rule does.
    Unrecorded enumerations (TableClass, SSEType, MultiRegionConsistency, ...) follow the rule: a best guess."""
    declared = _MODEL_ORDER.get(frozenset(values), values)
    position = {value: index for index, value in enumerate(declared)}
    return sorted(values, key=lambda value: (java_string_hash(value) & 31, -position[value]))


@dataclass
class Str(Shape):
    required: bool = False
    min_len: int | None = None
    max_len: int | None = None
    pattern: str | None = None
    enum: tuple[str, ...] | None = None
    enum_violation: str | None = None  # how a value outside `enum` is reported, where DynamoDB words it apart
    _regex: re.Pattern[str] | None = field(default=None, init=False, repr=False)

    _enum_text: str = field(default="", init=False, repr=False)

    def __post_init__(self) -> None:
        if self.pattern is not None:
            self._regex = re.compile(self.pattern)
        if self.enum is not None:
            self._enum_text = f"Member must satisfy enum value set: [{', '.join(enum_message_order(self.enum))}]"

    def check(self, value: Any, path: str, errors: list[str]) -> None:
        if not isinstance(value, str):
            raise _type_error("String", value)
        if self.enum is not None and value not in self.enum:
            errors.append(self.enum_violation or _violation(value, path, self._enum_text))
            return
        _check_length(value, path, len(value), self.min_len, self.max_len, errors)
        if self._regex is not None and not self._regex.fullmatch(value):
            errors.append(_violation(value, path,
                                     f"Member must satisfy regular expression pattern: {self.pattern}"))


@dataclass
class Int(Shape):
    required: bool = False
    minimum: int | None = None
    maximum: int | None = None
    java: str = "Long"

    def check(self, value: Any, path: str, errors: list[str]) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _type_error(self.java, value)
        if isinstance(value, float):
            if not value.is_integer():
                raise SerializationException(f"class java.math.BigDecimal can not be converted to an {self.java}")
            source, value = "BigDecimal", int(value)
        else:
            source = "BigInteger"
        bits = 31 if self.java == "Integer" else 63
        if not -(1 << bits) <= value < 1 << bits:  # beyond the Java type (wording extrapolated from the above)
            raise SerializationException(f"class java.math.{source} can not be converted to an {self.java}")
        if self.minimum is not None and value < self.minimum:
            errors.append(_violation(value, path, f"Member must have value greater than or equal to {self.minimum}"))
        if self.maximum is not None and value > self.maximum:
            errors.append(_violation(value, path, f"Member must have value less than or equal to {self.maximum}"))


@dataclass
class Bool(Shape):
    required: bool = False

    def check(self, value: Any, path: str, errors: list[str]) -> None:
        if not isinstance(value, bool):
            raise _type_error("Boolean", value)


@dataclass
class Any_(Shape):
    """A member whose content is validated elsewhere (attribute values, items)."""

    required: bool = False
    kind: str = "map"  # "map" or "list": the JSON container the deserializer insists on

    def check(self, value: Any, path: str, errors: list[str]) -> None:
        if self.kind == "map" and not isinstance(value, dict):
            raise SerializationException("Unexpected field type") if not isinstance(value, list) else \
                SerializationException("Start of list found where not expected")
        if self.kind == "list" and not isinstance(value, list):
            raise SerializationException(f"Unrecognized collection type class java.lang.{_java_name(value)}")


def _java_name(value: Any) -> str:
    if isinstance(value, bool):
        return "Boolean"
    if isinstance(value, str):
        return "String"
    if isinstance(value, dict):
        return "Object"
    return "Integer"


@dataclass
class List(Shape):
    member: Shape
    required: bool = False
    min_len: int | None = None
    max_len: int | None = None

    def check(self, value: Any, path: str, errors: list[str]) -> None:
        if not isinstance(value, list):
            raise SerializationException(f"Unrecognized collection type class java.lang.{_java_name(value)}")
        structs = isinstance(self.member, Struct)
        for index, element in enumerate(value, 1):
            if element is None:
                if not structs:  # a list of names or values holds no nulls: they would reach the operation
                    errors.append(_violation(None, f"{path}.{index}.member", "Member must not be null"))
                    continue
                element = value[index - 1] = {}  # a null structure reads as an empty one, as in DynamoDB
            self.member.check(element, f"{path}.{index}.member", errors)
        _check_length(value, path, len(value), self.min_len, self.max_len, errors, self)


@dataclass
class Map(Shape):
    value: Shape
    required: bool = False
    min_len: int | None = None
    max_len: int | None = None
    key_len: tuple[int | None, int] | None = None  # the shortest (if limited) and longest key
    value_len: tuple[int, int] | None = None  # the shortest and longest list a value may be

    def check(self, value: Any, path: str, errors: list[str]) -> None:
        if not isinstance(value, dict):
            raise SerializationException("Unexpected field type") if not isinstance(value, list) else \
                SerializationException("Start of list found where not expected")
        structs = isinstance(self.value, Struct)
        for key, element in value.items():
            if element is None:
                if not structs:
                    continue
                element = value[key] = {}  # (see List.check)
            self.value.check(element, f"{path}.{key}.member", errors)
        _check_length(value, path, len(value), self.min_len, self.max_len, errors, self)
        if self.key_len is not None:
            shortest, longest = self.key_len
            if any(not (shortest or 0) <= len(key) <= longest for key in value):
                rules = [f"Member must have length less than or equal to {longest}"]
                if shortest is not None:
                    rules.append(f"Member must have length greater than or equal to {shortest}")
                errors.append(_violation(value, path, f"Map keys must satisfy constraint: [{', '.join(rules)}]", self))
        if self.value_len is not None:
            shortest, longest = self.value_len
            if any(element is not None and not shortest <= len(element) <= longest for element in value.values()):
                errors.append(_violation(value, path, "Map value must satisfy constraint: [Member must have length "
                                         f"less than or equal to {longest}, Member must have length greater than "
                                         f"or equal to {shortest}]", self))


@dataclass
class Struct(Shape):
    fields: dict[str, Shape]
    required: bool = False
    type_name: str | None = None  # how messages print a value of it, where DynamoDB's printing is known
    # (member, its name in messages, shape), worked out once: this runs on every request.
    _members: tuple[tuple[str, str, Shape], ...] = field(default=(), init=False, repr=False)

    def __post_init__(self) -> None:
        self._members = tuple((name, name[0].lower() + name[1:], shape) for name, shape in self.fields.items())

    def check(self, value: Any, path: str, errors: list[str]) -> None:
        if not isinstance(value, dict):
            if isinstance(value, list):
                raise SerializationException("Start of list found where not expected")
            raise SerializationException("Unexpected field type")
        get = value.get
        for name, wire_name, shape in self._members:
            member = get(name)
            if member is None:
                if shape.required:
                    errors.append(_violation(None, f"{path}.{wire_name}" if path else wire_name,
                                             "Member must not be null"))
                continue
            shape.check(member, f"{path}.{wire_name}" if path else wire_name, errors)


def validate(shape: Struct, request: dict[str, Any]) -> None:
    """Raise SerializationException or ValidationException if `request` does not fit `shape`."""
    errors: list[str] = []
    shape.check(request, "", errors)
    if errors:
        raise ValidationException(validation_message(errors))


def validate_named(shape: Struct, request: dict[str, Any], member: str = "TableName") -> None:
    """`validate` for the control-plane operations that name their table before anything else is checked (CreateTable,
    DescribeTable, UpdateTable, DeleteTable, the continuous-backup and Time to Live operations): without it,
    whatever else is wrong, the request is refused in this form alone (DescribeTable: aws/aws-sdk-java issue 977,
    2017; CreateTable: captured against DynamoDB since 2013 and in 2026 conformance recordings). The item and read
    operations report it as "Value null at 'tableName'" in the envelope instead (Netflix-Skunkworks/iep-apps PR 527,
    2024). For the continuous-backup and Time to Live operations the form is the control-plane family's, inferred:
    their own answer without TableName is not recorded (RestoreTableToPointInTime's is this one, ack-api-quirks'
    DynamoDB catalogue, 2026-10). A value of the wrong JSON type is still a SerializationException first."""
    try:
        validate(shape, request)
    except ValidationException:
        if request.get(member) is None:
            raise ValidationException(f"The parameter '{member}' is required but was not present in the request") \
                from None
        raise


# The request checks of the item operations DynamoDB moved to in 2026 (31 of 33 regions by 2026-10, as captured
# in paritysuite's sweeps): an empty TableName is reported alone, without the value and with the member's own
# name; an UpdateItem ReturnValues outside the enum, with at most ReturnConsumedCapacity also wrong, is reported
# alone, in this wording (its typo and order too).
EMPTY_TABLE_NAME = ("1 validation error detected: Value at 'TableName' failed to satisfy constraint: Member must "
                    "have length greater than or equal to 1")
RETURN_VALUES_VIOLATION = ("Failed to satisfy constraint: Member must satisfy enum value set: [ALL_OLD, UPDATED_OLD, "
                           "ALL_NEW, UPDATE_NEW, NONE]")
UPDATE_RETURN_VALUES = "1 validation error detected: " + RETURN_VALUES_VIOLATION
ReturnValue = Literal["NONE", "ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW"]
RETURN_VALUES: tuple[ReturnValue, ...] = ("ALL_NEW", "UPDATED_OLD", "ALL_OLD", "NONE", "UPDATED_NEW")


def validate_item_request(shape: Struct, request: dict[str, Any], *, update: bool = False) -> None:
    """`validate` for GetItem, PutItem, UpdateItem (`update`) and DeleteItem, whose requests (legacy members
    included) report some violations on their own (see `EMPTY_TABLE_NAME`)."""
    try:
        validate(shape, request)
    except ValidationException:
        if EARLIER_WORDING:
            raise
        if request.get("TableName") == "":
            raise ValidationException(EMPTY_TABLE_NAME) from None
        values = request.get("ReturnValues")
        if update and isinstance(values, str) and values not in RETURN_VALUES:
            rest = {k: v for k, v in request.items() if k not in ("ReturnValues", "ReturnConsumedCapacity")}
            report_alone(shape, rest, UPDATE_RETURN_VALUES)
        raise


def report_alone(shape: Struct, mended: dict[str, Any], message: str) -> None:
    """Raise `message` if `mended`, the request with one violation taken out, passes `shape`: some of DynamoDB's
    2026 checks report a violation alone in their own words, but only when it is the request's one (with others,
    the usual message lists them all)."""
    try:
        validate(shape, mended)
    except ValidationException:
        return
    raise ValidationException(message) from None


# PutItem's and UpdateItem's request checks whose refusals DynamoDB counts as "1 validation error detected: ..."
# (all four regions of paritysuite's 2026-09-20 cross-region recording, us-east-1 among them, and 31 of 33 on
# 2026-10-07): empty and duplicate sets, a NULL that is not true, numbers that do not parse, expressions (syntax,
# placeholders, redundant parentheses, distinct operands) and expression members misused. Key, size and
# data-dependent refusals stay bare.
_ENVELOPED = ("Can not use both expression and non-expression parameters", "ExpressionAttributeValues can only be",
              "ExpressionAttributeNames can only be", "ExpressionAttributeNames must not be empty",
              "ExpressionAttributeValues must not be empty", "Invalid ConditionExpression: ",
              "Invalid UpdateExpression: ", "Value provided in ExpressionAttributeNames unused",
              "Value provided in ExpressionAttributeValues unused", "The parameter cannot be converted to a numeric",
              "One or more parameter values were invalid: Input collection",
              "One or more parameter values were invalid: Binary sets should not be empty",
              "One or more parameter values were invalid: Null attribute value types")


def counted_request_error(error: ValidationException) -> ValidationException:
    """`error` as PutItem and UpdateItem word it, counted when it is one of the request checks they count."""
    message = error.message or ""
    return ValidationException(validation_message([message])) if is_counted(message) else error


def is_counted(message: str, *, nesting: bool = False) -> bool:
    """Whether a refusal is one of PutItem's and UpdateItem's counted request checks (see `_ENVELOPED`; `nesting`:
    a value nested too deep is one too). None is, in the earlier wording."""
    if EARLIER_WORDING:
        return False
    if nesting and message == MSG_NESTING:
        return True
    return message.startswith(_ENVELOPED) or (message.startswith("One or more parameter values were invalid: An ")
                                              and message.endswith(" set  may not be empty"))


def values_without_expression(expressions: list[str] | tuple[str, ...], *, named: bool = True) -> ValidationException:
    """ExpressionAttributeValues sent with none of `expressions` to use them, naming the missing ones; PutItem
    (`named` false) no longer names them (recorded in every region of paritysuite's 2026-09-20 run)."""
    message = "ExpressionAttributeValues can only be specified when using expressions"
    if named:
        message += f": {' and '.join(expressions)} {'is' if len(expressions) == 1 else 'are'} null"
    return ValidationException(message)


def validation_message(errors: list[str]) -> str:
    count = len(errors)
    noun = "error" if count == 1 else "errors"
    return f"{count} validation {noun} detected: " + "; ".join(errors)


# --- shapes shared by many operations --------------------------------------------------------------

TABLE_NAME_PATTERN = "[a-zA-Z0-9_.-]+"


def table_name(required: bool = True) -> Str:
    return Str(required=required, min_len=3, max_len=255, pattern=TABLE_NAME_PATTERN)


def table_name_or_arn(required: bool = True) -> Str:
    """Item and read operations accept a table name or ARN (1-1024 characters)."""
    return Str(required=required, min_len=1, max_len=1024)


@dataclass
class ItemTableName(Str):
    """An item operation's TableName: an ARN of 1-1024 characters, or a name held to a table name's constraints
    (3-255 characters of the pattern), as DynamoDB checks it (PutItem, in every region of paritysuite's
    2026-09-20 recording)."""

    def check(self, value: Any, path: str, errors: list[str]) -> None:
        if isinstance(value, str) and value and not value.startswith("arn:"):
            _NAME.check(value, path, errors)
        else:
            super().check(value, path, errors)


_NAME = table_name(required=False)


RETURN_CONSUMED_CAPACITY = Str(enum=("INDEXES", "TOTAL", "NONE"))
RETURN_ITEM_COLLECTION_METRICS = Str(enum=("SIZE", "NONE"))
EXPRESSION_NAMES = Map(Str())
EXPRESSION_VALUES = Any_()


# --- attribute values nested in a request ---------------------------------------------------------------------

# Members holding AttributeValues: maps of them, lists of such maps, and the legacy conditions and updates (whose
# entries hold them under Value and AttributeValueList).
_VALUE_MAPS = frozenset({"Item", "Key", "ExclusiveStartKey", "ExpressionAttributeValues"})
_LEGACY_MAPS = frozenset({"Expected", "KeyConditions", "QueryFilter", "ScanFilter", "AttributeUpdates"})
_CONTAINER_DEPTH = 6  # RequestItems -> table -> [request] -> PutRequest -> Item is the deepest path to a value map


def attribute_value_error(request: dict[str, Any]) -> SerializationException | None:
    """The SerializationException DynamoDB's deserializer raises for the first mis-shaped AttributeValue (or
    invalid base64) anywhere in a request, or None. DynamoDB deserializes a whole request before it validates
    anything or looks a table up, so such an error wins over every other; here the values are checked where
    they are validated, and the handler's other refusals are traded for this one afterwards (see dispatch)."""
    try:
        _walk_values(request, 0)
    except SerializationException as error:
        return error
    return None


def _walk_values(node: Any, depth: int) -> None:
    if depth > _CONTAINER_DEPTH:
        return
    if isinstance(node, list):
        for element in node:
            _walk_values(element, depth + 1)
        return
    if not isinstance(node, dict):
        return
    for name, member in node.items():
        if name == "RequestItems" and isinstance(member, dict):  # keyed by table name: any name, even "Item"
            for requests in member.values():
                _walk_values(requests, depth + 1)
        elif name in _VALUE_MAPS and isinstance(member, dict):
            for value in member.values():
                raise_first_shape_error(value)
        elif name == "Keys" and isinstance(member, list):
            for key in member:
                for value in key.values() if isinstance(key, dict) else ():
                    raise_first_shape_error(value)
        elif name in _LEGACY_MAPS and isinstance(member, dict):
            for entry in member.values():
                if isinstance(entry, dict):
                    raise_first_shape_error(entry.get("Value"))
                    values = entry.get("AttributeValueList")
                    for value in values if isinstance(values, list) else ():
                        raise_first_shape_error(value)
        elif isinstance(member, dict | list):
            _walk_values(member, depth + 1)
