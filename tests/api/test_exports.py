"""ExportTableToPointInTime to a local directory in S3's export layout, DescribeExport and ListExports, through
boto3: the files hold the table as it stood at ExportTime."""

from __future__ import annotations

import gzip
import json
import math
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.api.test_backups import items_of, load, put, refusal
from tests.api.writers import kill_during
from tests.conftest import ServerProcess, create_table, make_client, unique_name


def exported_items(root: str, manifest_key: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The summary manifest of an export and every item of its data files, as a reader of an S3 export finds them."""
    with open(os.path.join(root, manifest_key), "rb") as summary_file:
        summary = json.load(summary_file)
    items: list[dict[str, Any]] = []
    with open(os.path.join(root, summary["manifestFilesS3Key"]), "rb") as files:
        for line in files:
            entry = json.loads(line)
            with gzip.open(os.path.join(root, entry["dataFileS3Key"]), "rb") as data:
                found = [json.loads(item)["Item"] for item in data.read().splitlines()]
            assert len(found) == entry["itemCount"]
            items += found
    return summary, sorted(items, key=lambda item: json.dumps(item, sort_keys=True))


def wait_over(describe: Any, timeout: float = 60.0) -> dict[str, Any]:
    """What `describe()` answers (an export's or an import's description) once its status is no longer
    IN_PROGRESS."""
    deadline = time.monotonic() + timeout
    while True:
        described = describe()
        if described.get("ExportStatus", described.get("ImportStatus")) != "IN_PROGRESS" or \
                time.monotonic() > deadline:
            return described  # type: ignore[no-any-return]
        time.sleep(0.05)


def wait_export(ddb: Any, arn: str) -> dict[str, Any]:
    """The export's description once it is over (COMPLETED or FAILED)."""
    return wait_over(lambda: ddb.describe_export(ExportArn=arn)["ExportDescription"])


def recovered_table(data: Path, items: int) -> tuple[ServerProcess, Any, str, str]:
    """A server on `data` and a table of `items` items with point-in-time recovery on: (server, client, table
    name, table ARN)."""
    server = ServerProcess(str(data))
    ddb = make_client(server.endpoint)
    name = create_table(ddb, range_type=None)
    ddb.update_continuous_backups(TableName=name,
                                  PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    load(ddb, name, items)
    return server, ddb, name, ddb.describe_table(TableName=name)["Table"]["TableArn"]


def test_an_export_holds_the_table_at_export_time(ddb, tmp_path):
    name = create_table(ddb, range_type=None)
    arn = ddb.describe_table(TableName=name)["Table"]["TableArn"]
    ddb.update_continuous_backups(TableName=name,
                                  PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    for i in range(30):
        put(ddb, name, f"k{i}", v=str(i))
    ddb.delete_item(TableName=name, Key={"pk": {"S": "k3"}})
    chosen = math.ceil(time.time() + 0.05)
    expected = items_of(ddb, name)
    time.sleep(max(0.0, chosen + 0.3 - time.time()))
    put(ddb, name, "k0", v="changed")
    put(ddb, name, "later")
    bucket = f"file://{tmp_path}"
    begun = ddb.export_table_to_point_in_time(TableArn=arn, S3Bucket=bucket, S3Prefix="nightly",
                                              ExportTime=datetime.fromtimestamp(chosen, UTC))["ExportDescription"]
    assert (begun["ExportStatus"], begun["ExportFormat"], begun["ExportType"]) == (
        "IN_PROGRESS", "DYNAMODB_JSON", "FULL_EXPORT")
    answer = wait_export(ddb, begun["ExportArn"])
    assert (answer["ExportStatus"], answer["ItemCount"]) == ("COMPLETED", 29)
    export_id = answer["ExportArn"].rsplit("/", 1)[1]
    assert answer["ExportArn"] == f"{arn}/export/{export_id}"
    assert answer["ExportManifest"] == f"nightly/AWSDynamoDB/{export_id}/manifest-summary.json"
    assert os.path.exists(tmp_path / "nightly" / "AWSDynamoDB" / export_id / "_started")
    summary, items = exported_items(str(tmp_path), answer["ExportManifest"])
    assert items == expected
    assert (summary["exportArn"], summary["itemCount"], summary["outputFormat"]) == (answer["ExportArn"], 29,
                                                                                    "DYNAMODB_JSON")
    now = wait_export(ddb, ddb.export_table_to_point_in_time(TableArn=arn, S3Bucket=str(tmp_path))[
        "ExportDescription"]["ExportArn"])
    assert exported_items(str(tmp_path), now["ExportManifest"])[1] == items_of(ddb, name)
    first = ddb.list_exports(TableArn=arn, MaxResults=1)
    assert [e["ExportArn"] for e in first["ExportSummaries"]] == [answer["ExportArn"]]
    rest = ddb.list_exports(TableArn=arn, MaxResults=1, NextToken=first["NextToken"])
    assert [e["ExportArn"] for e in rest["ExportSummaries"]] == [now["ExportArn"]] and "NextToken" not in rest
    assert not any(table.startswith("openddb/") for table in ddb.list_tables()["TableNames"])


def test_export_errors(ddb, tmp_path):
    name = create_table(ddb, range_type=None)
    arn = ddb.describe_table(TableName=name)["Table"]["TableArn"]
    assert refusal(ddb.export_table_to_point_in_time, TableArn=arn, S3Bucket=str(tmp_path)) == (
        "PointInTimeRecoveryUnavailableException", f"Point in time recovery is not enabled for table '{name}'")
    ddb.update_continuous_backups(TableName=name,
                                  PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    assert refusal(ddb.export_table_to_point_in_time, TableArn=arn, S3Bucket=str(tmp_path),
                   ExportTime=datetime(2020, 1, 1, tzinfo=UTC)) == (
        "InvalidExportTimeException", "The specified ExportTime is outside of the point in time recovery window.")
    assert refusal(ddb.export_table_to_point_in_time, TableArn=arn, S3Bucket=str(tmp_path),
                   ExportType="INCREMENTAL_EXPORT")[0] == "UnsupportedOperationException"
    missing = arn.replace(name, unique_name())
    assert refusal(ddb.export_table_to_point_in_time, TableArn=missing, S3Bucket=str(tmp_path))[0] == \
        "TableNotFoundException"
    unknown = f"{arn}/export/01700000000000-00000000"
    assert refusal(ddb.describe_export, ExportArn=unknown) == ("ExportNotFoundException",
                                                              f"Export not found: {unknown}")


def test_an_export_cut_short_by_kill_9_ends_failed(tmp_path):
    """kill -9 while an export writes: after a restart the table is intact and the export is either COMPLETED
    (its files holding every item) or, once its lease has run out, FAILED with no manifest written, never left
    IN_PROGRESS; no snapshot table is left visible."""
    data, bucket = tmp_path / "data", tmp_path / "bucket"
    server, ddb, name, arn = recovered_table(data, 4000)
    kill_during(server, lambda: ddb.export_table_to_point_in_time(TableArn=arn, S3Bucket=str(bucket)), 0.05)
    server = ServerProcess(str(data))
    ddb = make_client(server.endpoint)
    try:
        assert len(items_of(ddb, name)) == 4000
        for summary in ddb.list_exports(TableArn=arn)["ExportSummaries"]:
            described = wait_export(ddb, summary["ExportArn"])
            if described["ExportStatus"] == "COMPLETED":
                assert len(exported_items(str(bucket), described["ExportManifest"])[1]) == 4000
            else:
                export_id = summary["ExportArn"].rsplit("/", 1)[1]
                assert described["ExportStatus"] == "FAILED" and "ExportManifest" not in described
                assert not (bucket / "AWSDynamoDB" / export_id / "manifest-summary.json").exists()
        assert not any(table.startswith("openddb/") for table in ddb.list_tables()["TableNames"])
    finally:
        server.finish()


def test_an_export_a_restart_cut_short_is_failed(tmp_path, monkeypatch):
    """Deterministically cut short: the export has answered IN_PROGRESS and taken its snapshot, and waits between
    its chunks (the pause index backfills take), when the server is killed. After a restart it is recorded FAILED
    once its lease runs out, its directory holding no manifest; the table is intact."""
    data, bucket = tmp_path / "data", tmp_path / "bucket"
    monkeypatch.setenv("OPENDDB_BACKFILL_PAUSE", "60")
    server, ddb, name, arn = recovered_table(data, 300)
    begun = ddb.export_table_to_point_in_time(TableArn=arn, S3Bucket=str(bucket))["ExportDescription"]
    assert begun["ExportStatus"] == "IN_PROGRESS"
    time.sleep(0.5)
    assert ddb.describe_export(ExportArn=begun["ExportArn"])["ExportDescription"]["ExportStatus"] == "IN_PROGRESS"
    server.stop(kill=True)
    server.log.close()
    monkeypatch.delenv("OPENDDB_BACKFILL_PAUSE")
    server = ServerProcess(str(data))
    ddb = make_client(server.endpoint)
    try:
        described = wait_export(ddb, begun["ExportArn"])
        assert (described["ExportStatus"], described["FailureCode"]) == ("FAILED", "InternalServerError")
        export_id = begun["ExportArn"].rsplit("/", 1)[1]
        assert (bucket / "AWSDynamoDB" / export_id / "_started").exists()
        assert not (bucket / "AWSDynamoDB" / export_id / "manifest-summary.json").exists()
        assert len(items_of(ddb, name)) == 300
    finally:
        server.finish()
