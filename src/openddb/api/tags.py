"""TagResource, UntagResource and ListTagsOfResource, and the tag rules CreateTable shares.

DynamoDB checks tags by hand and words the refusals itself, tag by tag, key before value: a key of 1-128 and a
value of up to 256 letters, digits and spaces of any script or _ . : / = + - @ ('The Tag Key provided is invalid,
Key: ...', 'Key: null' when it is missing; the same for values), no 'aws:' prefix, no key twice in one request, at
most 50 per table. The texts for lengths and missing members are as DynamoDB answered in October 2026 (recorded
in aws-controllers-k8s/dynamodb-controller's api-quirks, DDB-TABLE-107, 110 and 457); in 2024 an empty key was
still refused as a constraint violation of 'tags.1.member.key' (scylladb issue 16904)."""

from __future__ import annotations

import copy
import unicodedata
from typing import Any

from openddb.api import validation as v
from openddb.api.context import RequestContext
from openddb.errors import ResourceNotFoundException, ValidationException, invalid
from openddb.model.schema import TableMeta

TAGS = v.List(v.Struct({"Key": v.Str(), "Value": v.Str()}))  # (their presence and lengths: `check_tags`)
MAX_TAGS = 50
_TAG_PUNCTUATION = frozenset("_.:/=+-@")

# TagResource and UntagResource have no output shape (botocore's model; the only operations without one): on success
# DynamoDB "sends back an HTTP 200 response with an empty HTTP body" (API Reference), not `{}` (erlcloud PR 502 had
# to learn to read it). A handler's None answer is that empty body (the dispatcher's Handler type).

TAG_RESOURCE = v.Struct({"ResourceArn": v.Str(required=True, min_len=1, max_len=1283),
                         "Tags": v.List(TAGS.member, required=True)})
UNTAG_RESOURCE = v.Struct({"ResourceArn": v.Str(required=True, min_len=1, max_len=1283),
                           "TagKeys": v.List(v.Str(), required=True)})
LIST_TAGS = v.Struct({"ResourceArn": v.Str(required=True, min_len=1, max_len=1283),
                      "NextToken": v.Str()})


def _table_for_arn(context: RequestContext, arn: str) -> TableMeta:
    """The table a tag request's ResourceArn names, refused in DynamoDB's words when it names none."""
    if not arn.startswith("arn:"):
        raise invalid(f"ARNs must start with 'arn:': {arn}")
    parts = arn.split(":", 5)
    resource = parts[5].split("/") if len(parts) == 6 else []
    if parts[2:3] != ["dynamodb"] or len(resource) < 2 or resource[0] != "table" or resource[2:3] == ["backup"]:
        raise invalid(f"Provided Arn is not a DynamoDB resource arn: {arn}")
    if resource[2:3] == ["index"]:
        raise invalid(f"Invalid resource arn provided, only table or stream is accepted. Provided resource arn: {arn}")
    if parts[3] != context.region:
        raise ValidationException(f"Invalid TableArn: Invalid ResourceArn provided as input {arn}")
    # (no streams here; looked up in the namespace of the account the ARN names, authorized before)
    meta = context.find_table(f"{':'.join(parts[:5])}:table/{resource[1]}")[1] if len(resource) == 2 else None
    if meta is None:
        raise ResourceNotFoundException(f"Requested resource not found: ResourceArn: {arn} not found")
    return meta


def tag_resource(context: RequestContext, request: dict[str, Any]) -> None:
    v.validate(TAG_RESOURCE, request)
    if not request["Tags"]:
        raise ValidationException("Atleast one Tag needs to be provided as Input.")
    check_tags(request["Tags"])
    meta = copy.deepcopy(_table_for_arn(context, request["ResourceArn"]))
    meta.tags = with_tags(meta.tags, request["Tags"])
    context.engine.update_table(meta)
    return None


def untag_resource(context: RequestContext, request: dict[str, Any]) -> None:
    v.validate(UNTAG_RESOURCE, request)
    if not request["TagKeys"]:
        raise ValidationException("Atleast one Tag Key needs to be provided as Input.")
    for key in request["TagKeys"]:
        _check_tag_key(key)
    if len(request["TagKeys"]) > MAX_TAGS:
        raise ValidationException("Number of Tags exceed the current limit for the provided ResourceArn")
    meta = copy.deepcopy(_table_for_arn(context, request["ResourceArn"]))
    removed = set(request["TagKeys"])
    meta.tags = [tag for tag in meta.tags if tag["Key"] not in removed]
    context.engine.update_table(meta)
    return None


def _tag_text(text: str, shortest: int, longest: int) -> bool:
    """A tag key or value DynamoDB accepts: `shortest` to `longest` characters, each a letter, digit or space of
    any script, or one of _ . : / = + - @."""
    return shortest <= len(text) <= longest and all(
        ch.isalnum() or ch in _TAG_PUNCTUATION or unicodedata.category(ch).startswith("Z") for ch in text)


def _check_tag_key(key: str | None) -> None:
    if key is None or not _tag_text(key, 1, 128):
        raise ValidationException(f"The Tag Key provided is invalid, Key: {'null' if key is None else key}")
    if key[:4].lower() == "aws:":
        raise ValidationException(f"Tag Key cannot be prefixed with aws:, Key: {key}")


def check_tags(tags: list[dict[str, str]]) -> None:
    """Each tag as DynamoDB checks it, and no key twice."""
    for tag in tags:
        _check_tag_key(tag.get("Key"))
        value = tag.get("Value")
        if value is None or not _tag_text(value, 0, 256):
            raise ValidationException(f"The Tag Value provided is invalid, Value: {'null' if value is None else value}")
    seen: set[str] = set()
    for tag in tags:
        if tag["Key"] in seen:
            raise ValidationException(f"Duplicate Tag Keys provided as input: Duplicate Tag Key found {tag['Key']}")
        seen.add(tag["Key"])


def with_tags(kept: list[dict[str, str]], tags: list[dict[str, str]]) -> list[dict[str, str]]:
    """`kept` with `tags` added, a key given again taking its new value (a table holds one tag per key); at most
    50 in all."""
    values = {tag["Key"]: tag["Value"] for tag in kept + tags}
    if len(values) > MAX_TAGS:
        raise ValidationException("Number of Tags exceed the current limit for the provided ResourceArn")
    return [{"Key": key, "Value": value} for key, value in values.items()]


def list_tags_of_resource(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(LIST_TAGS, request)
    meta = _table_for_arn(context, request["ResourceArn"])
    return {"Tags": meta.tags}


HANDLERS = {
    "TagResource": tag_resource,
    "UntagResource": untag_resource,
    "ListTagsOfResource": list_tags_of_resource,
}
