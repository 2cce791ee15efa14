"""ExportTableToPointInTime to a local directory in S3's export layout, DescribeExport and ListExports, through
boto3: the files hold the table as it stood at ExportTime."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import math
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.api.test_backups import items_of, load, put, refusal
from tests.api.test_test_control import control
from tests.api.writers import kill_during
from tests.conftest import ServerProcess, create_table, make_client, unique_name


def exported_lines(root: str, manifest_key: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The summary manifest of an export and every line of its data files, as a reader of an S3 export finds
    them."""
    with open(os.path.join(root, manifest_key), "rb") as summary_file:
        summary = json.load(summary_file)
    lines: list[dict[str, Any]] = []
    with open(os.path.join(root, summary["manifestFilesS3Key"]), "rb") as files:
        for line in files:
            entry = json.loads(line)
            with gzip.open(os.path.join(root, entry["dataFileS3Key"]), "rb") as data:
                found = [json.loads(item) for item in data.read().splitlines()]
            assert len(found) == entry["itemCount"]
            lines += found
    return summary, lines


def exported_items(root: str, manifest_key: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The summary manifest of a full export and every item of its data files."""
    summary, lines = exported_lines(root, manifest_key)
    return summary, sorted((line["Item"] for line in lines), key=lambda item: json.dumps(item, sort_keys=True))


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


def changes_begin(ddb: Any, keys: str) -> tuple[str, str, float]:
    """A table with point-in-time recovery on and an item of each key (v "1"): (its name, its ARN, a time after
    those writes, before any next one)."""
    name = create_table(ddb, range_type=None)
    arn = ddb.describe_table(TableName=name)["Table"]["TableArn"]
    ddb.update_continuous_backups(TableName=name,
                                  PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    for key in keys:
        put(ddb, name, key, v="1")
    time.sleep(0.05)
    since = time.time()
    time.sleep(0.05)
    return name, arn, since


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
    missing = arn.replace(name, unique_name())
    assert refusal(ddb.export_table_to_point_in_time, TableArn=missing, S3Bucket=str(tmp_path))[0] == \
        "TableNotFoundException"
    unknown = f"{arn}/export/01700000000000-00000000"
    assert refusal(ddb.describe_export, ExportArn=unknown) == ("ExportNotFoundException",
                                                              f"Export not found: Export not found: {unknown}")
    imported = f"{arn}/import/01700000000000-00000000"
    assert refusal(ddb.describe_export, ExportArn=imported) == ("ValidationException", "Invalid Export ARN")


def test_an_export_cut_short_by_kill_9_ends_whole(tmp_path):
    """kill -9 while an export writes: after a restart the table is intact and the export, taken up again once
    its lease has run out, is COMPLETED (its files holding every item once) or FAILED with no manifest written,
    never left IN_PROGRESS; no snapshot table is left visible."""
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
                items = exported_items(str(bucket), described["ExportManifest"])[1]
                assert len(items) == len({item["pk"]["S"] for item in items}) == 4000
            else:
                export_id = summary["ExportArn"].rsplit("/", 1)[1]
                assert described["ExportStatus"] == "FAILED" and "ExportManifest" not in described
                assert not (bucket / "AWSDynamoDB" / export_id / "manifest-summary.json").exists()
        assert not any(table.startswith("openddb/") for table in ddb.list_tables()["TableNames"])
    finally:
        server.finish()


def test_an_export_a_restart_cut_short_is_taken_up_again(tmp_path, monkeypatch):
    """Deterministically cut short: the export has answered IN_PROGRESS and begun its snapshot, and waits between
    its chunks (the pause index backfills take), when the server is killed. After a
    restart it is taken up where it was once its lease runs out, and ends COMPLETED with every item exactly once,
    its snapshot dropped; the table is intact."""
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
        put(ddb, name, "later")  # (after the export's time: not in it)
        described = wait_export(ddb, begun["ExportArn"])
        assert (described["ExportStatus"], described["ItemCount"]) == ("COMPLETED", 300)
        items = exported_items(str(bucket), described["ExportManifest"])[1]
        assert len(items) == 300 and len({item["pk"]["S"] for item in items}) == 300
        assert not any(table.startswith("openddb/") for table in ddb.list_tables()["TableNames"])
        assert len(items_of(ddb, name)) == 301
    finally:
        server.finish()


def test_an_export_killed_between_its_writes_goes_on_from_its_last(tmp_path, monkeypatch):
    """kill -9 once the export has written its first EXPORT_CHUNK (5,000) items and before its next chunk (a pause
    of half a second between chunks): after a restart it goes on from the last key written and ends COMPLETED, every
    item of the table at its time once, in data files whose manifest counts and checksums match."""
    data, bucket = tmp_path / "data", tmp_path / "bucket"
    monkeypatch.setenv("OPENDDB_BACKFILL_PAUSE", "0.5")
    server, ddb, name, arn = recovered_table(data, 5200)
    begun = ddb.export_table_to_point_in_time(TableArn=arn, S3Bucket=str(bucket))["ExportDescription"]
    files = bucket / "AWSDynamoDB" / begun["ExportArn"].rsplit("/", 1)[1] / "data"
    deadline = time.monotonic() + 60
    while not (files.exists() and any(files.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.02)
    server.stop(kill=True)
    server.log.close()
    written = [path.stat().st_size for path in files.iterdir()]
    assert len(written) == 1 and written[0] > 0
    monkeypatch.delenv("OPENDDB_BACKFILL_PAUSE")
    server = ServerProcess(str(data))
    ddb = make_client(server.endpoint)
    try:
        described = wait_export(ddb, begun["ExportArn"])
        assert (described["ExportStatus"], described["ItemCount"]) == ("COMPLETED", 5200)
        items = exported_items(str(bucket), described["ExportManifest"])[1]
        assert sorted(item["pk"]["S"] for item in items) == sorted(f"i{i}" for i in range(5200))
        assert len(items_of(ddb, name)) == 5200
        manifest = (bucket / described["ExportManifest"]).read_bytes()
        for line in (bucket / json.loads(manifest)["manifestFilesS3Key"]).read_bytes().splitlines():
            entry = json.loads(line)
            content = (bucket / entry["dataFileS3Key"]).read_bytes()
            assert entry["md5Checksum"] == base64.b64encode(hashlib.md5(content).digest()).decode()
    finally:
        server.finish()


def test_an_incremental_export_holds_the_changes_of_its_span(tmp_path):
    """INCREMENTAL_EXPORT: one line per key changed in the span (from the recovery log), with the time of its last
    change, its key, its image at ExportToTime (none once deleted) and at ExportFromTime (none if inserted; only
    for NEW_AND_OLD_IMAGES); a key inserted and deleted inside the span, or not changed, has none. The span must be
    15 minutes at least: the clock of --dev is moved ahead after the writes."""
    server = ServerProcess(None, "--dev")
    ddb = make_client(server.endpoint)
    try:
        name, arn, since = changes_begin(ddb, "abcd")
        put(ddb, name, "a", v="2")
        ddb.delete_item(TableName=name, Key={"pk": {"S": "d"}})
        put(ddb, name, "e", v="new")
        put(ddb, name, "f", v="brief")
        ddb.delete_item(TableName=name, Key={"pk": {"S": "f"}})
        put(ddb, name, "c", v="2")
        put(ddb, name, "c", v="1")
        control(server, "POST", "/openddb/clock", {"advance": 16 * 60})
        lines = {}
        for view in ("NEW_AND_OLD_IMAGES", "NEW_IMAGE"):
            begun = ddb.export_table_to_point_in_time(
                TableArn=arn, S3Bucket=str(tmp_path), ExportType="INCREMENTAL_EXPORT",
                IncrementalExportSpecification={"ExportFromTime": datetime.fromtimestamp(since, UTC),
                                                "ExportViewType": view})["ExportDescription"]
            done = wait_export(ddb, begun["ExportArn"])
            assert (done["ExportStatus"], done["ExportType"], done["ItemCount"]) == (
                "COMPLETED", "INCREMENTAL_EXPORT", 4)
            assert "ExportTime" not in done and done["IncrementalExportSpecification"]["ExportViewType"] == view
            summary, found = exported_lines(str(tmp_path), done["ExportManifest"])
            assert summary["exportType"] == "INCREMENTAL_EXPORT"
            lines[view] = {line["Keys"]["pk"]["S"]: line for line in found}
        both, new = lines["NEW_AND_OLD_IMAGES"], lines["NEW_IMAGE"]
        assert sorted(both) == sorted(new) == ["a", "c", "d", "e"]
        assert {key: (line.get("NewImage"), line.get("OldImage")) for key, line in both.items()} == {
            "a": ({"pk": {"S": "a"}, "v": {"S": "2"}}, {"pk": {"S": "a"}, "v": {"S": "1"}}),
            "c": ({"pk": {"S": "c"}, "v": {"S": "1"}}, {"pk": {"S": "c"}, "v": {"S": "1"}}),
            "d": (None, {"pk": {"S": "d"}, "v": {"S": "1"}}),
            "e": ({"pk": {"S": "e"}, "v": {"S": "new"}}, None)}
        assert new["a"]["NewImage"] == both["a"]["NewImage"] and "OldImage" not in new["a"]
        assert set(new["d"]) == {"Metadata", "Keys"}
        stamps = [int(line["Metadata"]["WriteTimestampMicros"]["N"]) for line in both.values()]
        assert all(since * 1e6 < stamp < time.time() * 1e6 + 17 * 60e6 for stamp in stamps)
    finally:
        server.finish()


def test_incremental_export_refusals(ddb):
    """The couplings of ExportType and IncrementalExportSpecification, and its span, in DynamoDB's words
    (ack-api-quirks' DynamoDB catalogue, DDB-EXPORT-003 and -004)."""
    name = create_table(ddb, range_type=None)
    arn = ddb.describe_table(TableName=name)["Table"]["TableArn"]
    ddb.update_continuous_backups(TableName=name,
                                  PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    start = datetime.fromtimestamp(time.time() + 1, UTC)
    span = {"ExportFromTime": start}

    def refused(**request: Any) -> tuple[str, str]:
        return refusal(ddb.export_table_to_point_in_time, TableArn=arn, S3Bucket="/tmp/never-written", **request)

    assert refused(IncrementalExportSpecification=span) == (
        "ValidationException", "Invalid Request: Export Type expected to be Incremental Export when incremental "
                               "export specification is provided")
    assert refused(ExportType="FULL_EXPORT", IncrementalExportSpecification=span) == (
        "ValidationException", "Invalid Request: When Export Type is Full Export , Incremental Export Specification "
                               "should not be provided")
    assert refused(ExportType="INCREMENTAL_EXPORT") == (
        "ValidationException", "Invalid Request: Incremental Export Specification expected when export type is set "
                               "as Incremental Export")
    assert refused(ExportType="INCREMENTAL_EXPORT", IncrementalExportSpecification={}) == (
        "ValidationException", "Invalid Request: ExportFromTime must be provided in IncrementalExportSpecification")
    time.sleep(max(0.0, start.timestamp() + 0.1 - time.time()))
    assert refused(ExportType="INCREMENTAL_EXPORT", IncrementalExportSpecification=span) == (
        "InvalidExportTimeException", "Difference between export period from time and export period to time is less "
                                      "than 15 minutes")
    before = datetime(2020, 1, 1, tzinfo=UTC)
    assert refused(ExportType="INCREMENTAL_EXPORT", IncrementalExportSpecification={"ExportFromTime": before}) == (
        "InvalidExportTimeException", "Incremental export period from time cannot be less than the table creation "
                                      "time : 2020-01-01T00:00:00Z")
    later = datetime.fromtimestamp(time.time() + 3600, UTC)
    assert refused(ExportType="INCREMENTAL_EXPORT", IncrementalExportSpecification={**span, "ExportToTime": later})[
        0] == "InvalidExportTimeException"


def test_an_export_client_token(ddb, tmp_path):
    """The same request with its ClientToken answers the same export; the token with another prefix or format is
    ExportConflictException (ack-api-quirks' DynamoDB catalogue, DDB-EXPORT-009); without a token, a new export."""
    name = create_table(ddb, range_type=None)
    arn = ddb.describe_table(TableName=name)["Table"]["TableArn"]
    ddb.update_continuous_backups(TableName=name,
                                  PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    request = {"TableArn": arn, "S3Bucket": str(tmp_path), "S3Prefix": "a", "ClientToken": unique_name("token")}
    first = ddb.export_table_to_point_in_time(**request)["ExportDescription"]
    assert ddb.export_table_to_point_in_time(**request)["ExportDescription"]["ExportArn"] == first["ExportArn"]
    conflict = ("ExportConflictException", "Export conflict: Duplicate request detected with conflicting parameters")
    assert refusal(ddb.export_table_to_point_in_time, **{**request, "S3Prefix": "b"}) == conflict
    assert refusal(ddb.export_table_to_point_in_time, **{**request, "ExportFormat": "DYNAMODB_JSON",
                                                         "ExportType": "INCREMENTAL_EXPORT",
                                                         "IncrementalExportSpecification": {
                                                             "ExportFromTime": datetime(2020, 1, 1, tzinfo=UTC)}}) \
        == conflict
    without = {key: value for key, value in request.items() if key != "ClientToken"}
    assert ddb.export_table_to_point_in_time(**without)["ExportDescription"]["ExportArn"] != first["ExportArn"]
    wait_export(ddb, first["ExportArn"])
