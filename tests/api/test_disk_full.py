"""A full disk under the embedded store: writes get a retryable 503 and keep nothing, reads go on, and once room
is freed writes succeed again without a restart. The data dir is a small tmpfs mounted for the test (root only:
skipped where mounting is not allowed)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Iterator

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.conftest import ServerProcess

pytestmark = pytest.mark.skipif(bool(os.environ.get("OPENDDB_TEST_ENGINE")), reason="the embedded store's disk")


@pytest.fixture
def small_disk() -> Iterator[str]:
    mount = tempfile.mkdtemp(prefix="openddb-full-")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs", mount], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", mount], check=False)
        os.rmdir(mount)


def fill(path: str) -> int:
    """Write a file until the disk is full; the bytes written."""
    chunk, written = b"\0" * (256 * 1024), 0
    with open(path, "wb") as ballast:
        try:
            while True:
                ballast.write(chunk)
                ballast.flush()
                written += len(chunk)
        except OSError:
            pass
    return written


def test_a_full_disk_refuses_writes_with_503_keeps_reads_and_recovers_when_room_is_freed(small_disk):
    server = ServerProcess(os.path.join(small_disk, "data"), "--workers", "1", "--disk-reserve-mb", "4")
    try:
        ddb = boto3.client("dynamodb", endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id="a",
                           aws_secret_access_key="b", config=Config(retries={"total_max_attempts": 1}))
        ddb.create_table(TableName="full", BillingMode="PAY_PER_REQUEST",
                         AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                         KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
        reserve = os.path.join(small_disk, "data", "openddb.reserve")
        assert os.path.getsize(reserve) == 4 << 20
        ballast = os.path.join(small_disk, "ballast")
        fill(ballast)
        stored, refused = [], []
        for n in range(400):  # the reserve is given up at the first refusal: writes go on in its room, then stop
            key = f"k{n}"
            try:
                ddb.put_item(TableName="full", Item={"pk": {"S": key}, "v": {"S": "x" * 40_000}})
                stored.append(key)
            except ClientError as error:
                assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 503, error.response
                assert error.response["Error"]["Code"] == "ServiceUnavailable"
                refused.append(key)
                if len(refused) >= 3 and not os.path.exists(reserve):
                    break
        assert refused and not os.path.exists(reserve)
        assert stored, "the reserve's room took writes after the first refusal"
        for key in stored[:5] + stored[-5:]:  # reads go on
            assert "Item" in ddb.get_item(TableName="full", Key={"pk": {"S": key}})
        assert ddb.describe_table(TableName="full")["Table"]["TableStatus"] == "ACTIVE"

        os.truncate(ballast, max(0, os.path.getsize(ballast) - (12 << 20)))  # free 12 MB
        deadline = time.monotonic() + 15
        while True:
            try:
                ddb.put_item(TableName="full", Item={"pk": {"S": "after"}, "v": {"S": "y" * 1000}})
                break
            except ClientError as error:
                assert error.response["Error"]["Code"] == "ServiceUnavailable"
                assert time.monotonic() < deadline, "writes did not recover once room was freed"
                time.sleep(0.2)
        deadline = time.monotonic() + 10
        while not os.path.exists(reserve):  # taken back by the background duty
            assert time.monotonic() < deadline, "the reserve was not taken back"
            time.sleep(0.2)
        pages = ddb.get_paginator("scan").paginate(TableName="full", ConsistentRead=True, ProjectionExpression="pk")
        present = {item["pk"]["S"] for page in pages for item in page["Items"]}
        assert set(stored) | {"after"} <= present  # every acknowledged write is there...
        assert not present & set(refused)  # ...and nothing of a refused one
    finally:
        output = server.finish()
    assert "the disk is full" in output and "the disk has room again" in output
