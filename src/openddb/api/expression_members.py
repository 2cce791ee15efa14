"""A request's expression members: ExpressionAttributeNames and ExpressionAttributeValues checked, and each
expression's text refused when empty or over-long, in DynamoDB's wording (parsing is the expressions package's)."""

from __future__ import annotations

import re
from contextvars import ContextVar
from typing import Any

from openddb.api import validation as v
from openddb.api.limits import MAX_EXPRESSION_BYTES, MAX_PLACEHOLDER_BYTES, MAX_SUBSTITUTION_BYTES
from openddb.errors import ValidationException
from openddb.expressions import ExpressionAttributes
from openddb.model import AttributeValue
from openddb.model.values import MSG_LONG_NAME, item_size, validate_item, validate_value

# A placeholder is '#' or ':' and then letters, digits or underscores (as the expression lexer reads one).
_NAME_KEY = re.compile(r"#[A-Za-z0-9_]+")
_VALUE_KEY = re.compile(r":[A-Za-z0-9_]+")

MSG_SUBSTITUTION_SIZE = "Expression attribute names and values size has exceeded the maximum allowed size"  # a guess
# The length of the request body being handled (set by the dispatcher; unknown, 0, outside a request).
REQUEST_BYTES: ContextVar[int] = ContextVar("request_bytes", default=0)


def expression_attributes(request: dict[str, Any], expression_members: tuple[str, ...], *,
                          compared_only: bool = False, name_missing: bool = True,
                          counted_values: bool = False) -> ExpressionAttributes:
    """Validate ExpressionAttributeNames/Values for a request whose expressions are `expression_members`.

    With `compared_only`, values may be nested deeper than an item (see `validate_value`): the caller refuses one
    that is written. `name_missing` false: values without an expression are refused without naming the missing
    ones (see `values_without_expression`). `counted_values`: an invalid value of the kinds UpdateItem counts is
    refused as "1 validation error detected: ..." without its placeholder (a value nested too deep: 31 of 33
    regions, 2026-10; an empty set: quoted from the AWS CLI, 2026-07)."""
    names = request.get("ExpressionAttributeNames")
    value_members = [m for m in expression_members if m != "ProjectionExpression"]
    # Reads whose only expression is a projection have no ExpressionAttributeValues member: ignored, as any
    # member an operation does not have.
    values = request.get("ExpressionAttributeValues") if value_members else None
    used_members = [m for m in expression_members if request.get(m) is not None]
    if names is not None:
        if not used_members:
            raise ValidationException("ExpressionAttributeNames can only be specified when using expressions")
        if not names:
            raise ValidationException("ExpressionAttributeNames must not be empty")
        for name, real in names.items():
            _check_placeholder_length("ExpressionAttributeNames", name)
            if not _NAME_KEY.fullmatch(name):
                raise ValidationException(f'ExpressionAttributeNames contains invalid key: Syntax error; key: "{name}"')
            if not real:
                raise ValidationException(f"ExpressionAttributeNames contains invalid value: Empty attribute name for "
                                          f"key {name}")
    validated: dict[str, AttributeValue] | None = None
    if values is not None:
        if not isinstance(values, dict):
            validate_item(values)  # raises the deserializer's error for a non-map
        if not any(request.get(m) is not None for m in value_members):
            raise v.values_without_expression(value_members, named=name_missing)
        if not values:
            raise ValidationException("ExpressionAttributeValues must not be empty")
        validated = {}
        for name, raw in values.items():
            _check_placeholder_length("ExpressionAttributeValues", name)
            if not _VALUE_KEY.fullmatch(name):
                raise ValidationException(
                    f'ExpressionAttributeValues contains invalid key: Syntax error; key: "{name}"')
            try:
                validated[name] = validate_value(raw, compared_only=compared_only)
            except ValidationException as error:
                if error.message == MSG_LONG_NAME:  # answered bare, as for an item (recorded against the service)
                    raise
                if counted_values and v.is_counted(error.message or "", nesting=True):
                    raise ValidationException(v.validation_message([error.message or ""])) from None
                raise invalid_value(name, error) from None
    # Their sum cannot pass the body's length: most requests are spared the count.
    if REQUEST_BYTES.get() > MAX_SUBSTITUTION_BYTES and (names or validated) and \
            _substitution_bytes(names, validated) > MAX_SUBSTITUTION_BYTES:
        raise ValidationException(MSG_SUBSTITUTION_SIZE)
    return ExpressionAttributes(names, validated)


def _substitution_bytes(names: dict[str, str] | None, values: dict[str, AttributeValue] | None) -> int:
    """The length of a request's substitution variables: each placeholder and what it stands for, in bytes (a
    value as an attribute's size)."""
    size = item_size(values) if values else 0
    for placeholder, name in (names or {}).items():
        text = placeholder + name
        size += len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return size


def invalid_value(name: str, error: ValidationException) -> ValidationException:
    """The refusal of expression attribute value `name`, whose own refusal is `error`."""
    return ValidationException(f"ExpressionAttributeValues contains invalid value: {error.message} for key {name}")


def _check_placeholder_length(member: str, key: str) -> None:
    """A placeholder longer than 255 bytes is refused, before its syntax is looked at (as reported of DynamoDB;
    its wording for this is not captured, so this one only follows the family's form)."""
    if len(key) > MAX_PLACEHOLDER_BYTES // 4 and len(key.encode("utf-8")) > MAX_PLACEHOLDER_BYTES:
        raise ValidationException(f"{member} contains invalid key: The key is longer than {MAX_PLACEHOLDER_BYTES} "
                                  f"bytes; key: \"{key}\"")


def expression_text(request: dict[str, Any], member: str, generated: bool = False) -> str | None:
    """An expression member's text, rejecting empty and over-long strings as DynamoDB does (a `generated` one,
    written from legacy parameters, has no size limit)."""
    text: str | None = request.get(member)  # a string: the request shape was validated
    if text is None:
        return None
    if not text:
        raise ValidationException(f"Invalid {member}: The expression can not be empty;")
    if len(text.encode("utf-8")) > MAX_EXPRESSION_BYTES and not generated:
        # Every kind's refusal ends with the size (issue 30; quoted from real responses for a ConditionExpression,
        # "expression size: 200004" (scylladb), and a Query's FilterExpression, "expression size: 5872").
        size = len(text.encode("utf-8"))
        raise ValidationException(f"Invalid {member}: Expression size has exceeded the maximum allowed size; "
                                  f"expression size: {size}")
    return text
