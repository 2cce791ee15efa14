"""Amazon Ion exports and imports through boto3: ExportTableToPointInTime with ExportFormat ION (full and
incremental) writes DynamoDB's lines (`$ion_1_0 {Item:{...}}`, the Developer Guide's type mapping and its example
item written as the guide shows it), and ImportTable with InputFormat ION reads them back into an equal table;
records that are not items, values out of the mapping and text that is not Ion are counted as errors."""

from __future__ import annotations

import gzip
import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.api.test_backups import put
from tests.api.test_exports import changes_begin, wait_export
from tests.api.test_imports import scanned, start_import, wait_import
from tests.api.test_test_control import control
from tests.conftest import ServerProcess, create_table, make_client, unique_name

# The Developer Guide's example item ("DynamoDB table export output format", Amazon Ion) and its line there
GUIDE_ITEM = {
    "Authors": {"SS": ["Author1", "Author2"]}, "Dimensions": {"S": "8.5 x 11.0 x 1.5"},
    "ISBN": {"S": "333-3333333333"}, "Id": {"N": "103"}, "InPublication": {"BOOL": False},
    "PageCount": {"N": "600"}, "Price": {"N": "2000"}, "ProductCategory": {"S": "Book"},
    "Title": {"S": "Book 103 Title"}, "pk": {"S": "book"}}
GUIDE_LINE = ('$ion_1_0 {Item:{Authors:$dynamodb_SS::["Author1","Author2"],Dimensions:"8.5 x 11.0 x 1.5",'
              'ISBN:"333-3333333333",Id:103.,InPublication:false,PageCount:6d2,Price:2d3,ProductCategory:"Book",'
              'Title:"Book 103 Title",pk:"book"}}')
EVERY_TYPE = [
    GUIDE_ITEM,
    {"pk": {"S": "numbers"}, "big": {"N": "12345678901234567890123456789012345678"},
     "exact": {"N": "1234567890.1234567890123456789012345678"}, "tiny": {"N": "0.000000000000000000000000000001"},
     "huge": {"N": "9.9E+125"}, "negative": {"N": "-0.5"}, "zero": {"N": "0"}, "ns": {"NS": ["1", "-2.25", "3E+10"]}},
    {"pk": {"S": "binary"}, "b": {"B": bytes([0, 1, 2, 255])}, "empty": {"B": b""},
     "bs": {"BS": [b"\x00", b"\xff\xfe"]}},
    {"pk": {"S": "text \"quoted\" \\ é 😀\n\t"}, "null": {"S": "a keyword as a name"}, "a b": {"NULL": True},
     "$dollar": {"BOOL": True}, "é": {"SS": ["x", "y\nz"]}},
    {"pk": {"S": "nested"}, "l": {"L": [{"N": "1.5"}, {"NULL": True}, {"L": []}, {"M": {}},
                                        {"M": {"k": {"SS": ["s"]}, "n": {"N": "7"}}}]},
     "m": {"M": {"deep": {"M": {"deeper": {"L": [{"B": b"\x01"}]}}}}}},
]


def ion_lines(root: Path, manifest_key: str) -> tuple[dict[str, Any], list[str]]:
    """The summary manifest of an export and every line of its data files."""
    summary = json.loads((root / manifest_key).read_bytes())
    lines: list[str] = []
    for entry in (root / summary["manifestFilesS3Key"]).read_bytes().splitlines():
        key = json.loads(entry)["dataFileS3Key"]
        assert key.endswith(".ion.gz")
        found = gzip.decompress((root / key).read_bytes()).decode().splitlines()
        assert len(found) == json.loads(entry)["itemCount"]
        lines += found
    return summary, lines


def by_key(ddb: Any, name: str) -> dict[str, dict[str, Any]]:
    """A table's items by their key (equal whatever the order of their attributes)."""
    return {item["pk"]["S"]: item for item in scanned(ddb, name)}


def test_an_ion_export_of_every_type_imports_back_equal(ddb, tmp_path):
    name = create_table(ddb, range_type=None)
    arn = ddb.describe_table(TableName=name)["Table"]["TableArn"]
    ddb.update_continuous_backups(TableName=name,
                                  PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    for item in EVERY_TYPE:
        ddb.put_item(TableName=name, Item=item)
    begun = ddb.export_table_to_point_in_time(TableArn=arn, S3Bucket=str(tmp_path), S3Prefix="ion",
                                              ExportFormat="ION")["ExportDescription"]
    assert begun["ExportFormat"] == "ION"
    done = wait_export(ddb, begun["ExportArn"])
    assert (done["ExportStatus"], done["ExportFormat"], done["ItemCount"]) == ("COMPLETED", "ION", len(EVERY_TYPE))
    summary, lines = ion_lines(tmp_path, done["ExportManifest"])
    assert summary["outputFormat"] == "ION" and len(lines) == len(EVERY_TYPE)
    assert GUIDE_LINE in lines
    assert all(line.startswith("$ion_1_0 {Item:{") and line.endswith("}}") for line in lines)
    numbers = next(line for line in lines if 'pk:"numbers"' in line)
    for text in ("big:12345678901234567890123456789012345678.", "exact:1234567890.1234567890123456789012345678",
                 "tiny:1d-30", "huge:99d124", "negative:-0.5", "zero:0.", "ns:$dynamodb_NS::[1.,-2.25,3d10]"):
        assert text in numbers
    binary = next(line for line in lines if 'pk:"binary"' in line)
    assert 'b:{{AAEC/w==}}' in binary and "empty:{{}}" in binary and "bs:$dynamodb_BS::[{{AA==}},{{//4=}}]" in binary
    named = next(line for line in lines if '"a b":null' in line)
    assert '"$dollar":true' in named and '"null":"a keyword as a name"' in named
    export_id = done["ExportArn"].rsplit("/", 1)[1]
    target = unique_name("ion")
    imported = wait_import(ddb, start_import(ddb, tmp_path, f"ion/AWSDynamoDB/{export_id}/data/", target, "ION",
                                             InputCompressionType="GZIP")["ImportArn"])
    assert (imported["ImportStatus"], imported["InputFormat"], imported["ProcessedItemCount"],
            imported["ImportedItemCount"], imported["ErrorCount"]) == ("COMPLETED", "ION", 5, 5, 0)
    assert by_key(ddb, target) == by_key(ddb, name)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "items.ion").write_text("\n".join(lines) + "\n")
    again = unique_name("ion")
    imported = wait_import(ddb, start_import(ddb, plain, "items", again, "ION")["ImportArn"])
    assert (imported["ImportStatus"], imported["ImportedItemCount"]) == ("COMPLETED", 5)
    assert by_key(ddb, again) == by_key(ddb, name)


def test_an_incremental_ion_export(tmp_path):
    """INCREMENTAL_EXPORT in ION: the JSON form's members (Metadata, Keys, NewImage, OldImage) in Ion."""
    server = ServerProcess(None, "--dev")
    ddb = make_client(server.endpoint)
    try:
        name, arn, since = changes_begin(ddb, "abc")
        ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "v": {"N": "2.50"}, "b": {"B": b"\x01"}})
        ddb.delete_item(TableName=name, Key={"pk": {"S": "b"}})
        put(ddb, name, "d", v="new")
        control(server, "POST", "/openddb/clock", {"advance": 16 * 60})
        begun = ddb.export_table_to_point_in_time(
            TableArn=arn, S3Bucket=str(tmp_path), ExportType="INCREMENTAL_EXPORT", ExportFormat="ION",
            IncrementalExportSpecification={"ExportFromTime": datetime.fromtimestamp(since, UTC)})
        done = wait_export(ddb, begun["ExportDescription"]["ExportArn"])
        assert (done["ExportStatus"], done["ExportFormat"], done["ItemCount"]) == ("COMPLETED", "ION", 3)
        summary, lines = ion_lines(tmp_path, done["ExportManifest"])
        assert (summary["outputFormat"], summary["exportType"]) == ("ION", "INCREMENTAL_EXPORT")
        stamp = r"\$ion_1_0 \{Metadata:\{WriteTimestampMicros:(\d+)\.\},"
        expected = {
            "a": 'Keys:{pk:"a"},NewImage:{b:{{AQ==}},pk:"a",v:2.5},OldImage:{pk:"a",v:"1"}}',
            "b": 'Keys:{pk:"b"},OldImage:{pk:"b",v:"1"}}',
            "d": 'Keys:{pk:"d"},NewImage:{pk:"d",v:"new"}}'}
        found = {}
        for line in lines:
            match = re.fullmatch(stamp + "(.*)", line)
            assert match is not None, line
            assert since * 1e6 < int(match.group(1)) < time.time() * 1e6 + 17 * 60e6
            found[re.search(r'Keys:\{pk:"(.)"\}', line).group(1)] = match.group(2)  # type: ignore[union-attr]
        assert found == expected
    finally:
        server.finish()


def test_ion_records_that_fail_are_counted(ddb, tmp_path):
    """Error accounting as for DynamoDB JSON: a value out of the mapping (a float), or a record that is no item,
    is one error and the next is read; text that is not Ion is one error and ends its object. Both layouts of
    the import formats page are read: a line a record, and a list of records over many lines."""
    good = [f'$ion_1_0 {{Item:{{pk:"k{i}",n:6d2,m:1.50}}}}' for i in range(6)]
    (tmp_path / "odd.ion").write_text("\n".join([
        good[0], '$ion_1_0 {Item:{pk:"float",f:1e0}}', "$ion_1_0 {Other:{pk:\"x\"}}",
        "$ion_1_0", "[", '  {Item:{pk:"l1"}},', "  // a comment", '  {Item:{pk:"l2", t:2007-01-01T}},',
        '  {Item:{pk:"l3", s:' + "'''long''' '''string'''}}", "]", good[1]]) + "\n")
    (tmp_path / "bad.ion").write_text("\n".join([good[2], good[3], '$ion_1_0 {Item:{pk:"c" v:1}}', good[4]]) + "\n")
    for prefix, counts, kept in (("odd", (7, 4, 3), ["k0", "k1", "l1", "l3"]), ("bad", (3, 2, 1), ["k2", "k3"])):
        target = unique_name("ionbad")
        done = wait_import(ddb, start_import(ddb, tmp_path, prefix, target, "ION")["ImportArn"])
        assert (done["ImportStatus"], done["FailureCode"]) == ("FAILED", "ItemValidationError")
        assert (done["ProcessedItemCount"], done["ImportedItemCount"], done["ErrorCount"]) == counts
        items = scanned(ddb, target)
        assert sorted(item["pk"]["S"] for item in items) == kept
    numbered = ddb.get_item(TableName=target, Key={"pk": {"S": "k2"}})["Item"]
    assert (numbered["n"], numbered["m"]) == ({"N": "600"}, {"N": "1.5"})
