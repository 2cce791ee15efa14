"""Imports from a local directory in S3's place: ImportTable, DescribeImport, ListImports.

S3BucketSource names a bucket as exports do (backups_buckets.py: `file:///abs/dir`, an absolute
path, or a bucket name under $OPENDDB_EXPORT_ROOT) and S3KeyPrefix the objects to read, a raw prefix of their
keys (paths under the directory). ImportTable checks the request and answers IN_PROGRESS at once; the import runs
in the background (backups_import_runs.py), creating the table (CREATING) and filling it, then makes it ACTIVE
and the import COMPLETED, or FAILED: ItemValidationError if any record failed (the valid ones are kept, as on
DynamoDB), S3NoSuchBucket if the directory does not exist (no table made), TableAlreadyExists if the name was
taken meanwhile. The records live in the internal table `openddb/imports` (they outlive the table, as DynamoDB's
do). What DynamoDB writes to CloudWatch Logs (log group /aws-dynamodb/imports, stream `<import id>/error`) goes to
the server's log, logger `openddb.imports`, one JSON line an error in CloudWatch's shape."""

from __future__ import annotations

import copy
from typing import Any

from openddb import clock
from openddb.api import backups_records as records
from openddb.api import validation as v
from openddb.api.backups_import_runs import IMPORTS_TABLE, IN_PROGRESS_LIMIT, KIND, schedule_import
from openddb.api.backups_import_sources import zstd_readable
from openddb.api.backups_shapes import stamped_id
from openddb.api.context import RequestContext
from openddb.api.figures import epoch_millis
from openddb.api.table_shapes import CREATE_TABLE
from openddb.api.tables import new_table_meta
from openddb.errors import (
    ImportConflictException,
    ImportNotFoundException,
    LimitExceededException,
    ResourceInUseException,
    UnsupportedOperationException,
    ValidationException,
)

_CREATION_MEMBERS = ("TableName", "AttributeDefinitions", "KeySchema", "BillingMode", "ProvisionedThroughput",
                     "OnDemandThroughput", "SSESpecification", "GlobalSecondaryIndexes", "VectorIndexes")
# botocore's model: CsvDelimiter one of [,;:|\t ], CsvHeaderList 1-255 headers of printable ASCII but " and ,.
_CSV = v.Struct({
    "Delimiter": v.Str(min_len=1, max_len=1, pattern="[,;:|\\t ]"),
    "HeaderList": v.List(v.Str(min_len=1, max_len=65536, pattern="[\\x20-\\x21\\x23-\\x2B\\x2D-\\x7E]*"),
                         min_len=1, max_len=255),
})
IMPORT_TABLE = v.Struct({
    "ClientToken": v.Str(pattern="^[^\\$]+$"),
    # (S3Bucket's pattern is not checked: a bucket here may be a file:// URI or a path, as ExportTableToPointInTime
    # takes it; the SDKs do not check patterns)
    "S3BucketSource": v.Struct({"S3BucketOwner": v.Str(pattern="[0-9]{12}"),
                                "S3Bucket": v.Str(required=True, max_len=255),
                                "S3KeyPrefix": v.Str(max_len=1024)}, required=True),
    "InputFormat": v.Str(required=True, enum=("DYNAMODB_JSON", "ION", "CSV")),
    "InputFormatOptions": v.Struct({"Csv": _CSV}),
    "InputCompressionType": v.Str(enum=("GZIP", "ZSTD", "NONE")),
    "TableCreationParameters": v.Struct({name: CREATE_TABLE.fields[name] for name in _CREATION_MEMBERS},
                                        required=True),
})
DESCRIBE_IMPORT = v.Struct({"ImportArn": v.Str(required=True, min_len=37, max_len=1024)})
LIST_IMPORTS = v.Struct({
    "TableArn": v.Str(min_len=1, max_len=1024),
    "PageSize": v.Int(minimum=1, maximum=25, java="Integer"),
    "NextToken": v.Str(min_len=112, max_len=1024, pattern="([0-9a-f]{16})+"),
})
TOKEN_SECONDS = 8 * 3600.0  # "A client token is valid for 8 hours after the first request that uses it"
_LISTED_SECONDS = 90 * 86400.0  # ListImports: "Lists completed imports within the past 90 days."


def import_table(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(IMPORT_TABLE, request)
    _check_format(request)
    parameters = {name: copy.deepcopy(value) for name, value in request["TableCreationParameters"].items()
                  if name in _CREATION_MEMBERS}
    meta = new_table_meta(context, copy.deepcopy(parameters))
    token = request.get("ClientToken")
    if token is not None:
        earlier = _replayed(context, token, meta.name)
        if earlier is not None:
            return {"ImportTableDescription": earlier}
    if context.engine.get_table(meta.stored_name) is not None:
        # (ack-api-quirks' DynamoDB catalogue, DDB-IMPORT-019, and the Developer Guide's troubleshooting section)
        raise ResourceInUseException(f"Table already exists: {meta.name}")
    now = clock.now()
    if sum(d["Description"]["ImportStatus"] == "IN_PROGRESS" for d in _documents(context)) >= IN_PROGRESS_LIMIT:
        # best guess: the quotas page allows 50 concurrent imports; the refusal's wording is not recorded
        raise LimitExceededException(f"Too many concurrent imports: the limit is {IN_PROGRESS_LIMIT}")
    arn = f"{meta.arn}/import/{stamped_id(now)}"
    description = _description(context, request, parameters, arn, meta.arn, meta.uuid, now)
    with context.engine.session.serialized():  # (committed now, for the run's first step to find)
        records.save(context.engine, IMPORTS_TABLE, KIND, arn,
                     {"Description": description, "Table": meta.to_json().decode(), "Progress": {}})
        context.engine.commit()
    schedule_import(context.engine, arn)
    return {"ImportTableDescription": description}


def _check_format(request: dict[str, Any]) -> None:
    input_format = request["InputFormat"]
    if request.get("InputFormatOptions") is not None and input_format != "CSV":
        # (ack-api-quirks' DynamoDB catalogue, DDB-IMPORT-009)
        raise ValidationException(
            f"Invalid Request: Unsupported InputFormatOptions for the given input format: {input_format}.")
    if request.get("InputCompressionType") == "ZSTD" and not zstd_readable():
        raise UnsupportedOperationException(
            "ImportTable of ZSTD data", "ZSTD is read with the zstandard library, which is not installed here "
            "(pip install 'openddb[zstd]'); import uncompressed or GZIP")


def _description(context: RequestContext, request: dict[str, Any], parameters: dict[str, Any], arn: str,
                 table_arn: str, table_id: str, now: float) -> dict[str, Any]:
    """An ImportTableDescription as DescribeImport reports one just begun: the request echoed, S3BucketOwner and
    InputCompressionType filled in (ack-api-quirks' DynamoDB catalogue, DDB-IMPORT-003), the counts at 0."""
    source = {"S3BucketOwner": context.account, **request["S3BucketSource"]}
    description: dict[str, Any] = {
        "ImportArn": arn, "ImportStatus": "IN_PROGRESS", "TableArn": table_arn, "TableId": table_id,
        "S3BucketSource": source, "ErrorCount": 0,
        "CloudWatchLogGroupArn": f"arn:aws:logs:{context.region}:{context.account}:log-group:/aws-dynamodb/imports:*",
        "InputFormat": request["InputFormat"], "InputCompressionType": request.get("InputCompressionType") or "NONE",
        "TableCreationParameters": parameters, "StartTime": epoch_millis(now), "ProcessedSizeBytes": 0,
        "ProcessedItemCount": 0, "ImportedItemCount": 0}
    for member in ("ClientToken", "InputFormatOptions"):
        if request.get(member) is not None:
            description[member] = request[member]
    return description


def _replayed(context: RequestContext, token: str, table_name: str) -> dict[str, Any] | None:
    """The import an ImportTable with this ClientToken started within 8 hours, if any (ack-api-quirks' DynamoDB
    catalogue, DDB-IMPORT-017: the same request again answers that import; another TableName is a conflict; once
    it is over, its table still there is ResourceInUseException)."""
    now = clock.now()
    for document in _documents(context):
        earlier = document["Description"]
        if earlier.get("ClientToken") != token or earlier["StartTime"] < now - TOKEN_SECONDS:
            continue
        name = earlier["TableCreationParameters"]["TableName"]
        if name != table_name:
            raise ImportConflictException("Import conflict: Duplicate request detected with conflicting parameters")
        if earlier["ImportStatus"] != "IN_PROGRESS" and context.engine.get_table(context.stored(name)) is not None:
            raise ResourceInUseException(f"Table already exists: {name}")
        return earlier  # type: ignore[no-any-return]
    return None


def _documents(context: RequestContext) -> list[dict[str, Any]]:
    """The imports of the caller's namespace (their ARNs name the account and region)."""
    return [document for document in records.records(context.engine, IMPORTS_TABLE, KIND)
            if context.owns(document["Description"]["ImportArn"])]


def describe_import(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    v.validate(DESCRIBE_IMPORT, request)
    arn = request["ImportArn"]
    if ":table/" not in arn or "/import/" not in arn:
        # (ack-api-quirks' DynamoDB catalogue, DDB-IMPORT-010: a table's or an export's ARN)
        raise ValidationException("Invalid Import ARN")
    document = records.record(context.engine, IMPORTS_TABLE, KIND, arn)
    if document is None:
        # best guess: DynamoDB's wording (the API Reference says "The specified import was not found.")
        raise ImportNotFoundException(f"Import not found: {arn}")
    return {"ImportTableDescription": document["Description"]}


def list_imports(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
    """Imports of the past 90 days oldest first (of one table with TableArn), PageSize a page (25 by default),
    NextToken the last one's ARN in hexadecimal (the token's pattern is 16-digit groups of hex, 112 at least)."""
    v.validate(LIST_IMPORTS, request)
    since = clock.now() - _LISTED_SECONDS
    chosen = sorted((d["Description"] for d in _documents(context)
                     if request.get("TableArn") in (None, d["Description"]["TableArn"])
                     and d["Description"]["StartTime"] >= since),
                    key=lambda d: (d["StartTime"], d["ImportArn"]))
    token = request.get("NextToken")
    if token is not None:
        last = _untoken(token)
        after = next((i for i, d in enumerate(chosen) if d["ImportArn"] == last), None)
        if after is None:
            raise ValidationException("Invalid NextToken")  # best guess: the wording is not recorded
        chosen = chosen[after + 1:]
    limit = request.get("PageSize") or 25
    answer: dict[str, Any] = {"ImportSummaryList": [_summary(d) for d in chosen[:limit]]}
    if len(chosen) > limit:
        answer["NextToken"] = _token(chosen[limit - 1]["ImportArn"])
    return answer


def _summary(description: dict[str, Any]) -> dict[str, Any]:
    members = ("ImportArn", "ImportStatus", "TableArn", "S3BucketSource", "CloudWatchLogGroupArn", "InputFormat",
               "StartTime", "EndTime")
    return {member: description[member] for member in members if member in description}


def _token(arn: str) -> str:
    text = arn.encode().hex()
    length = max(112, len(text))
    return text.ljust(length + -length % 16, "0")


def _untoken(token: str) -> str:
    data = bytes.fromhex(token)
    return data.rstrip(b"\0").decode(errors="replace")


HANDLERS = {
    "ImportTable": import_table,
    "DescribeImport": describe_import,
    "ListImports": list_imports,
}
