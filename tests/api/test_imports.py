"""ImportTable, DescribeImport and ListImports from a local directory in S3's place, through boto3: an export
imported into a new table holds the same items, CSV and DynamoDB JSON sources, the error accounting of bad
records, the failures DynamoDB reports after answering, the refusals, and an import cut by kill -9 resumed."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import zstandard  # (the test extra installs the zstd extra's library)

from tests.api.test_backups import aws, items_of, refusal
from tests.api.test_exports import wait_export, wait_over
from tests.conftest import ServerProcess, create_table, make_client, unique_name

STRING_KEY = {"AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
              "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}], "BillingMode": "PAY_PER_REQUEST"}


def wait_import(ddb: Any, arn: str) -> dict[str, Any]:
    """The import's description once it is over (COMPLETED or FAILED)."""
    return wait_over(lambda: ddb.describe_import(ImportArn=arn)["ImportTableDescription"])


def start_import(ddb: Any, bucket: Path, prefix: str, table: str, input_format: str = "DYNAMODB_JSON",
                 parameters: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return ddb.import_table(  # type: ignore[no-any-return]
        S3BucketSource={"S3Bucket": f"file://{bucket}", "S3KeyPrefix": prefix}, InputFormat=input_format,
        TableCreationParameters={"TableName": table, **(parameters or STRING_KEY)}, **extra)["ImportTableDescription"]


def scanned(ddb: Any, name: str) -> list[dict[str, Any]]:
    """Every item of a table, in a fixed order (items holding binary values, which JSON cannot sort by)."""
    found: list[dict[str, Any]] = []
    page: dict[str, Any] = {"TableName": name}
    while True:
        answer = ddb.scan(**page)
        found += answer["Items"]
        if "LastEvaluatedKey" not in answer:
            return sorted(found, key=repr)
        page["ExclusiveStartKey"] = answer["LastEvaluatedKey"]


def import_refusal(*arguments: Any, **extra: Any) -> tuple[str, str]:
    """The error code and message of an ImportTable `start_import` sends with these arguments."""
    return refusal(lambda: start_import(*arguments, **extra))


def json_lines(*items: Any) -> bytes:
    return b"".join(json.dumps(item).encode() + b"\n" for item in items)


def test_an_export_imported_into_a_new_table_holds_its_items(ddb, tmp_path):
    """The round trip: a table with every kind of value exported, then imported from the export's data/ folder
    (GZIP, as DynamoDB needs it) into a new table with a GSI: the same items, the index answering queries."""
    name = create_table(ddb, range_type="N")
    ddb.update_continuous_backups(TableName=name,
                                  PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    for i in range(120):
        ddb.put_item(TableName=name, Item={
            "pk": {"S": f"p{i % 7}"}, "sk": {"N": str(i)}, "g": {"S": f"g{i % 4}"}, "b": {"B": bytes([i, 0, 255])},
            "m": {"M": {"l": {"L": [{"N": "1.5"}, {"NULL": True}, {"BOOL": i % 2 == 0}]}, "ss": {"SS": ["a", "b"]}}},
            "ns": {"NS": ["1", str(i + 2)]}})
    arn = ddb.describe_table(TableName=name)["Table"]["TableArn"]
    export = wait_export(ddb, ddb.export_table_to_point_in_time(TableArn=arn, S3Bucket=str(tmp_path),
                                                                S3Prefix="exports")["ExportDescription"]["ExportArn"])
    assert export["ExportStatus"] == "COMPLETED"
    export_id = export["ExportArn"].rsplit("/", 1)[1]
    target = unique_name("imp")
    parameters = {
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                                 {"AttributeName": "sk", "AttributeType": "N"},
                                 {"AttributeName": "g", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        "BillingMode": "PAY_PER_REQUEST",
        "GlobalSecondaryIndexes": [{"IndexName": "by-g", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                    "Projection": {"ProjectionType": "ALL"}}]}
    begun = start_import(ddb, tmp_path, f"exports/AWSDynamoDB/{export_id}/data/", target,
                         parameters=parameters, InputCompressionType="GZIP")
    assert begun["ImportStatus"] == "IN_PROGRESS" and begun["ImportArn"].startswith(f"{begun['TableArn']}/import/")
    done = wait_import(ddb, begun["ImportArn"])
    assert (done["ImportStatus"], done["ProcessedItemCount"], done["ImportedItemCount"], done["ErrorCount"]) == (
        "COMPLETED", 120, 120, 0)
    assert done["ProcessedSizeBytes"] > 0 and done["EndTime"] >= done["StartTime"]
    assert done["CloudWatchLogGroupArn"] == "arn:aws:logs:us-east-1:000000000000:log-group:/aws-dynamodb/imports:*"
    assert (done["InputCompressionType"], done["S3BucketSource"]["S3BucketOwner"]) == ("GZIP", "000000000000")
    table = ddb.describe_table(TableName=target)["Table"]
    assert table["TableStatus"] == "ACTIVE" and table["TableId"] == done["TableId"]
    assert scanned(ddb, target) == scanned(ddb, name)
    by_g = ddb.query(TableName=target, IndexName="by-g", KeyConditionExpression="g = :g",
                     ExpressionAttributeValues={":g": {"S": "g1"}})["Items"]
    assert len(by_g) == 30
    listed = ddb.list_imports(TableArn=done["TableArn"])["ImportSummaryList"]
    assert [(s["ImportArn"], s["ImportStatus"], s["InputFormat"]) for s in listed] == [
        (done["ImportArn"], "COMPLETED", "DYNAMODB_JSON")]


def test_zstd_objects_of_several_frames_and_one_that_is_not_zstd(ddb, tmp_path):
    """InputCompressionType ZSTD: an object of two frames (as `zstd` writes concatenated inputs) is read whole; an
    object that is not ZSTD is one error (the import FAILED with ItemValidationError), the other's items kept."""
    compress = zstandard.ZstdCompressor().compress
    (tmp_path / "z").mkdir()
    (tmp_path / "z" / "a.json.zst").write_bytes(
        compress(json_lines(*({"Item": {"pk": {"S": f"a{i}"}, "n": {"N": str(i)}}} for i in range(3))))
        + compress(json_lines({"Item": {"pk": {"S": "a3"}, "n": {"N": "3"}}})))
    (tmp_path / "z" / "b.json.zst").write_bytes(json_lines({"Item": {"pk": {"S": "plain"}}}))
    target = unique_name("zst")
    done = wait_import(ddb, start_import(ddb, tmp_path, "z/", target, parameters=STRING_KEY,
                                         InputCompressionType="ZSTD")["ImportArn"])
    assert (done["ImportStatus"], done["FailureCode"], done["InputCompressionType"], done["ImportedItemCount"],
            done["ErrorCount"]) == ("FAILED", "ItemValidationError", "ZSTD", 4, 1)
    assert sorted(item["pk"]["S"] for item in scanned(ddb, target)) == ["a0", "a1", "a2", "a3"]


def test_csv_with_its_header_or_a_header_list(ddb, tmp_path):
    """CSV: the key attributes of the table and its indexes take their defined types, every other column is a
    string; the first row is the header unless HeaderList is given; Delimiter is honoured; an empty cell is no
    attribute."""
    (tmp_path / "people").mkdir()
    (tmp_path / "people" / "a.csv").write_text('id,age,name,note\n1,30,"Doe, Jane",\n2,41,Roe,"say ""hi"""\n')
    (tmp_path / "people" / "b.csv").write_text("3;52;Poe;x\n")
    parameters = {"AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "N"},
                                           {"AttributeName": "age", "AttributeType": "N"}],
                  "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}], "BillingMode": "PAY_PER_REQUEST",
                  "GlobalSecondaryIndexes": [{"IndexName": "by-age",
                                              "KeySchema": [{"AttributeName": "age", "KeyType": "HASH"}],
                                              "Projection": {"ProjectionType": "ALL"}}]}
    first, second = unique_name("csv"), unique_name("csv")
    plain = wait_import(ddb, start_import(ddb, tmp_path, "people/a", first, "CSV", parameters)["ImportArn"])
    assert (plain["ImportStatus"], plain["ImportedItemCount"]) == ("COMPLETED", 2) and "InputFormatOptions" not in plain
    assert sorted(items_of(ddb, first), key=lambda item: item["id"]["N"]) == [
        {"id": {"N": "1"}, "age": {"N": "30"}, "name": {"S": "Doe, Jane"}},
        {"id": {"N": "2"}, "age": {"N": "41"}, "name": {"S": "Roe"}, "note": {"S": 'say "hi"'}}]
    options = {"Csv": {"Delimiter": ";", "HeaderList": ["id", "age", "name", "note"]}}
    listed = wait_import(ddb, start_import(ddb, tmp_path, "people/b", second, "CSV", parameters,
                                           InputFormatOptions=options)["ImportArn"])
    assert (listed["ImportStatus"], listed["InputFormatOptions"]) == ("COMPLETED", options)
    assert ddb.query(TableName=second, IndexName="by-age", KeyConditionExpression="age = :a",
                     ExpressionAttributeValues={":a": {"N": "52"}})["Items"] == [
        {"id": {"N": "3"}, "age": {"N": "52"}, "name": {"S": "Poe"}, "note": {"S": "x"}}]


def test_bad_records_are_counted_and_the_valid_ones_kept(ddb, tmp_path):
    """As DynamoDB (ack-api-quirks' catalogue, DDB-IMPORT-013): an item that breaks a rule is one error and the
    next line is read; a line that is no JSON ends its object; either way the import ends FAILED
    (ItemValidationError) with the valid items in the ACTIVE table."""
    good = [{"Item": {"pk": {"S": f"k{i}"}}} for i in range(10)]
    (tmp_path / "bad-key.json").write_bytes(json_lines(*good[:4], {"Item": {"other": {"S": "x"}}}, *good[4:9]))
    (tmp_path / "garbage.json").write_bytes(json_lines(*good[:5]) + b"{not json\n" + json_lines(*good[5:]))
    for prefix, counts in (("bad-key", (10, 9, 1)), ("garbage", (6, 5, 1))):
        target = unique_name("bad")
        done = wait_import(ddb, start_import(ddb, tmp_path, prefix, target)["ImportArn"])
        assert (done["ImportStatus"], done["FailureCode"]) == ("FAILED", "ItemValidationError")
        assert done["FailureMessage"] == ("Some of the items failed validation checks and were not imported. Please "
                                          "check CloudWatch error logs for more details.")
        assert (done["ProcessedItemCount"], done["ImportedItemCount"], done["ErrorCount"]) == counts
        assert ddb.describe_table(TableName=target)["Table"]["TableStatus"] == "ACTIVE"
        assert len(items_of(ddb, target)) == counts[1]


def test_failures_after_the_answer(ddb, tmp_path):
    """A bucket that does not exist: FAILED S3NoSuchBucket and no table; a prefix matching nothing: COMPLETED
    with an empty table (DDB-IMPORT-012); GZIP on an object that is not: one error (DDB-IMPORT-015)."""
    missing = unique_name("nob")
    done = wait_import(ddb, start_import(ddb, tmp_path / "no-such-dir", "", missing)["ImportArn"])
    assert (done["ImportStatus"], done["FailureCode"], done["ProcessedItemCount"]) == ("FAILED", "S3NoSuchBucket", 0)
    assert refusal(ddb.describe_table, TableName=missing)[0] == "ResourceNotFoundException"
    empty = unique_name("empty")
    done = wait_import(ddb, start_import(ddb, tmp_path, "nothing-here", empty)["ImportArn"])
    assert (done["ImportStatus"], done["ProcessedItemCount"]) == ("COMPLETED", 0)
    assert ddb.describe_table(TableName=empty)["Table"]["ItemCount"] == 0
    (tmp_path / "plain.json").write_bytes(json_lines({"Item": {"pk": {"S": "a"}}}))
    (tmp_path / "packed.json.gz").write_bytes(gzip.compress(json_lines({"Item": {"pk": {"S": "b"}}})))
    unpacked = unique_name("gz")
    done = wait_import(ddb, start_import(ddb, tmp_path, "p", unpacked, InputCompressionType="GZIP")["ImportArn"])
    assert (done["ImportStatus"], done["ProcessedItemCount"], done["ImportedItemCount"], done["ErrorCount"]) == (
        "FAILED", 2, 1, 1)
    assert items_of(ddb, unpacked) == [{"pk": {"S": "b"}}]


def test_import_refusals_and_client_tokens(ddb, tmp_path):
    (tmp_path / "one.json").write_bytes(json_lines({"Item": {"pk": {"S": "a"}}}))
    existing = create_table(ddb, range_type=None)
    assert import_refusal(ddb, tmp_path, "one", existing) == ("ResourceInUseException",
                                                                    f"Table already exists: {existing}")
    assert import_refusal(ddb, tmp_path, "one", unique_name(),
                   InputFormatOptions={"Csv": {"Delimiter": ";"}}) == (
        "ValidationException", "Invalid Request: Unsupported InputFormatOptions for the given input format: "
                               "DYNAMODB_JSON.")
    code, message = import_refusal(ddb, tmp_path, "one", unique_name(), "CSV",
                            InputFormatOptions={"Csv": {"Delimiter": ";;"}})
    assert code == "ValidationException" and message.startswith("2 validation errors detected: Value ';;' at "
                                                                "'inputFormatOptions.csv.delimiter'")
    provisioned = {**STRING_KEY, "BillingMode": "PROVISIONED"}
    assert import_refusal(ddb, tmp_path, "one", unique_name(), parameters=provisioned) == (
        "ValidationException", "One or more parameter values were invalid: ReadCapacityUnits and WriteCapacityUnits "
                               "must both be specified when BillingMode is PROVISIONED")
    token, target = unique_name("token"), unique_name("tok")
    first = start_import(ddb, tmp_path, "one", target, ClientToken=token)
    wait_import(ddb, first["ImportArn"])  # (over: the same request again finds its table there)
    assert import_refusal(ddb, tmp_path, "one", target, ClientToken=token) == ("ResourceInUseException",
                                                                              f"Table already exists: {target}")
    unknown = f"{first['TableArn']}/import/01700000000000-00000000"
    assert refusal(ddb.describe_import, ImportArn=unknown) == ("ImportNotFoundException",
                                                               f"Import not found: {unknown}")
    assert refusal(ddb.describe_import, ImportArn=first["TableArn"] + "/x" * 10) == ("ValidationException",
                                                                                   "Invalid Import ARN")


def test_a_client_token_while_the_import_runs(tmp_path, monkeypatch):
    """While the import runs (kept running by the pause between chunks index backfills take, on a server of its
    own), the same request with its ClientToken answers the same import, and the token with another TableName is
    ImportConflictException (ack-api-quirks' DynamoDB catalogue, DDB-IMPORT-017)."""
    (tmp_path / "one.json").write_bytes(json_lines({"Item": {"pk": {"S": "a"}}}))
    monkeypatch.setenv("OPENDDB_BACKFILL_PAUSE", "60")
    server = ServerProcess(str(tmp_path / "data"))
    ddb = make_client(server.endpoint)
    try:
        token, target = unique_name("token"), unique_name("tok")
        first = start_import(ddb, tmp_path, "one", target, ClientToken=token)
        again = start_import(ddb, tmp_path, "one", target, ClientToken=token)
        assert (again["ImportArn"], again["ImportStatus"]) == (first["ImportArn"], "IN_PROGRESS")
        assert import_refusal(ddb, tmp_path, "one", unique_name(), ClientToken=token) == (
            "ImportConflictException", "Import conflict: Duplicate request detected with conflicting parameters")
    finally:
        server.finish()


def test_list_imports_pages(ddb, tmp_path):
    (tmp_path / "one.json").write_bytes(json_lines({"Item": {"pk": {"S": "a"}}}))
    arns = [start_import(ddb, tmp_path, "one", unique_name("page"))["ImportArn"] for _ in range(3)]
    for arn in arns:
        wait_import(ddb, arn)
    seen: list[str] = []
    page: dict[str, Any] = {"PageSize": 1}
    while True:
        answer = ddb.list_imports(**page)
        seen += [summary["ImportArn"] for summary in answer["ImportSummaryList"]]
        if "NextToken" not in answer:
            break
        assert len(answer["NextToken"]) >= 112
        page["NextToken"] = answer["NextToken"]
    assert [arn for arn in seen if arn in arns] == arns


def test_an_import_cut_by_kill_9_is_resumed(tmp_path):
    """kill -9 while an import runs: after a restart it goes on from its last chunk and ends COMPLETED with
    every item and exact counts (each chunk's items and progress commit together)."""
    source = tmp_path / "bucket"
    source.mkdir()
    for part in range(3):
        (source / f"part-{part}.json").write_bytes(json_lines(*(
            {"Item": {"pk": {"S": f"k{part}-{i}"}, "v": {"S": "x" * 100}}} for i in range(4000))))
    server = ServerProcess(str(tmp_path / "data"))
    ddb = make_client(server.endpoint)
    target = unique_name("kill")
    arn = start_import(ddb, source, "part", target)["ImportArn"]
    time.sleep(0.3)
    server.stop(kill=True)
    server.log.close()
    server = ServerProcess(str(tmp_path / "data"))
    ddb = make_client(server.endpoint)
    try:
        done = wait_import(ddb, arn)
        assert (done["ImportStatus"], done["ProcessedItemCount"], done["ImportedItemCount"], done["ErrorCount"]) == (
            "COMPLETED", 12000, 12000, 0)
        assert done["ProcessedSizeBytes"] == sum(os.path.getsize(path) for path in source.iterdir())
        assert len(scanned(ddb, target)) == 12000
    finally:
        server.finish()


def test_fifty_imports_at_once(tmp_path, monkeypatch):
    """Up to 50 imports run at once (the quotas page); the 51st is LimitExceededException. The imports are kept
    IN_PROGRESS by a pause between their chunks (the knob index backfills take too), on a server of its own: on the
    shared store of OPENDDB_TEST_ENGINE the other tests' imports would count, so it does not run there."""
    if os.environ.get("OPENDDB_TEST_ENGINE"):
        pytest.skip("the limit counts every import of the store: not on a store shared with other tests")
    (tmp_path / "one.json").write_bytes(json_lines({"Item": {"pk": {"S": "a"}}}))
    monkeypatch.setenv("OPENDDB_BACKFILL_PAUSE", "60")
    server = ServerProcess(str(tmp_path / "data"))
    ddb = make_client(server.endpoint)
    try:
        for _ in range(50):
            assert start_import(ddb, tmp_path, "one", unique_name("many"))["ImportStatus"] == "IN_PROGRESS"
        assert import_refusal(ddb, tmp_path, "one", unique_name("many")) == (
            "LimitExceededException", "Too many concurrent imports: the limit is 50")
    finally:
        server.finish()


@pytest.mark.skipif(importlib.util.find_spec("awscli") is None, reason="awscli is not installed")
def test_aws_cli_export_then_import(server, ddb, tmp_path):
    """`aws dynamodb export-table-to-point-in-time`, `describe-export`, `import-table`, `describe-import` and
    `list-imports` as the README shows them: the imported table holds the exported items."""
    name = create_table(ddb, range_type=None)
    for key in "abc":
        ddb.put_item(TableName=name, Item={"pk": {"S": key}, "n": {"N": "1"}})
    e = server.endpoint
    aws(e, "update-continuous-backups", "--table-name", name, "--point-in-time-recovery-specification",
        "PointInTimeRecoveryEnabled=true")
    arn = ddb.describe_table(TableName=name)["Table"]["TableArn"]
    # (an absolute path: the CLI reads an argument starting with file:// as a parameter file)
    export = aws(e, "export-table-to-point-in-time", "--table-arn", arn, "--s3-bucket", str(tmp_path),
                 "--s3-prefix", "nightly")["ExportDescription"]
    wait_export(ddb, export["ExportArn"])  # (polled through boto3: each CLI call starts a process)
    done = aws(e, "describe-export", "--export-arn", export["ExportArn"])["ExportDescription"]
    assert done["ExportStatus"] == "COMPLETED"
    target = unique_name("cli")
    export_id = export["ExportArn"].rsplit("/", 1)[1]
    begun = aws(e, "import-table", "--input-format", "DYNAMODB_JSON", "--input-compression-type", "GZIP",
                "--s3-bucket-source", f"S3Bucket=file://{tmp_path},S3KeyPrefix=nightly/AWSDynamoDB/{export_id}/data/",
                "--table-creation-parameters", json.dumps({"TableName": target, **STRING_KEY}))
    arn = begun["ImportTableDescription"]["ImportArn"]
    wait_import(ddb, arn)
    imported = aws(e, "describe-import", "--import-arn", arn)["ImportTableDescription"]
    assert (imported["ImportStatus"], imported["ImportedItemCount"]) == ("COMPLETED", 3)
    assert items_of(ddb, target) == items_of(ddb, name)
    listed = aws(e, "list-imports", "--table-arn", imported["TableArn"])["ImportSummaryList"]
    assert [summary["ImportArn"] for summary in listed] == [arn]
