"""The account's quotas: `--quota NAME=VALUE` sets them as Service Quotas would (DescribeLimits reports them,
CreateTable and UpdateTable hold tables to them, the number of tables included), `--quotas off` lifts them for test
suites that resize tables more than an account may, and a quota that cannot be read stops the server at start."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.conftest import ServerProcess, one_try_client, unique_name

_HIGHER = " Refer to the Amazon DynamoDB Developer Guide for current limits and how to request higher limits."


@pytest.fixture(scope="module")
def configured() -> Iterator[ServerProcess]:
    process = ServerProcess(None, "--quota", "TableMaxReadCapacityUnits=100", "--quota",
                            "AccountMaxWriteCapacityUnits=50", "--quota", "TablesPerRegion=1")
    yield process
    process.finish()


@pytest.fixture(scope="module")
def lifted() -> Iterator[ServerProcess]:
    process = ServerProcess(None, "--quotas", "off", "--quota", "TableMaxReadCapacityUnits=10")
    yield process
    process.finish()


def _create(ddb: Any, name: str, read: int = 0, write: int = 0) -> None:
    capacity = {"ProvisionedThroughput": {"ReadCapacityUnits": read, "WriteCapacityUnits": write}} if read else {
        "BillingMode": "PAY_PER_REQUEST"}
    ddb.create_table(TableName=name, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}], **capacity)


def _refusal(ddb: Any, name: str, read: int = 0, write: int = 0) -> tuple[str, str]:
    with pytest.raises(ClientError) as excinfo:
        _create(ddb, name, read, write)
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


def test_describe_limits_reports_the_configured_quotas(configured: ServerProcess, server: ServerProcess) -> None:
    assert {k: v for k, v in one_try_client(configured).describe_limits().items() if k != "ResponseMetadata"} == {
        "AccountMaxReadCapacityUnits": 80000, "AccountMaxWriteCapacityUnits": 50,
        "TableMaxReadCapacityUnits": 100, "TableMaxWriteCapacityUnits": 40000}
    # A server started without --quota reports DynamoDB's defaults for a new account.
    assert {k: v for k, v in one_try_client(server).describe_limits().items() if k != "ResponseMetadata"} == {
        "AccountMaxReadCapacityUnits": 80000, "AccountMaxWriteCapacityUnits": 80000,
        "TableMaxReadCapacityUnits": 40000, "TableMaxWriteCapacityUnits": 40000}


def test_configured_capacity_quotas_hold_tables_to_them(configured: ServerProcess) -> None:
    ddb = one_try_client(configured)
    name = unique_name("quota")
    assert _refusal(ddb, name, 101, 1) == (
        "LimitExceededException", "The requested ReadCapacityUnits, 101, is above the per table maximum for the "
        "account in us-east-1. Per table maximum: 100." + _HIGHER)
    kind, message = _refusal(ddb, name, 1, 60)  # (whatever else the store holds, 60 is over an account's 50)
    assert kind == "LimitExceededException"
    assert message.startswith("This request would have caused the WriteCapacityUnits limit to be exceeded for the "
                              "account in us-east-1. Current WriteCapacityUnits reserved by the account: ")
    assert message.endswith(". Limit: 50. Requested: 60"), message
    assert not _exists(ddb, name)


def test_the_number_of_tables_is_held_to_its_quota(configured: ServerProcess) -> None:
    """One table allowed: the second is refused (on a shared store the first may be refused too, by the tables
    others made)."""
    ddb = one_try_client(configured)
    first, second = unique_name("one"), unique_name("two")
    try:
        try:
            _create(ddb, first)
        except ClientError:
            assert os.environ.get("OPENDDB_TEST_ENGINE"), "an empty store refused its first table"
        assert _refusal(ddb, second) == (
            "LimitExceededException", "Subscriber limit exceeded: There is a limit of 1 tables per subscriber")
        assert not _exists(ddb, second)
    finally:
        if _exists(ddb, first):
            ddb.delete_table(TableName=first)


def test_quotas_off_lifts_capacity_maximums_and_the_decrease_budget(lifted: ServerProcess) -> None:
    """With --quotas off even a configured 10-unit table maximum refuses nothing, and a table's capacity comes down
    a fifth time in a day (the budget is four, then one an hour); DescribeLimits still reports what is configured."""
    ddb = one_try_client(lifted)
    name = unique_name("lifted")
    _create(ddb, name, 20, 1)
    try:
        for units in (19, 18, 17, 16, 15):
            ddb.update_table(TableName=name, ProvisionedThroughput={"ReadCapacityUnits": units,
                                                                    "WriteCapacityUnits": 1})
        described = ddb.describe_table(TableName=name)["Table"]["ProvisionedThroughput"]
        assert (described["ReadCapacityUnits"], described["NumberOfDecreasesToday"]) == (15, 5)
        assert ddb.describe_limits()["TableMaxReadCapacityUnits"] == 10
    finally:
        ddb.delete_table(TableName=name)


def _exists(ddb: Any, name: str) -> bool:
    try:
        ddb.describe_table(TableName=name)
    except ddb.exceptions.ResourceNotFoundException:
        return False
    return True


@pytest.mark.parametrize(("spec", "expected"), [
    ("TablesPerAccount=5", "--quota TablesPerAccount=5: the quotas are AccountMaxReadCapacityUnits, "),
    ("TablesPerRegion=0", "--quota TablesPerRegion=0: the value is a whole number, at least 1"),
    ("TableMaxReadCapacityUnits", "--quota TableMaxReadCapacityUnits: the value is a whole number, at least 1"),
])
def test_a_quota_that_cannot_be_read_stops_the_server(spec: str, expected: str) -> None:
    done = subprocess.run([sys.executable, "-m", "openddb", "serve", "--in-memory", "--port", "0", "--quota", spec],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr.startswith(f"openddb: {expected}"), done.stderr


def test_the_table_count_is_per_account_and_region_where_tables_are_kept_so() -> None:
    """With --namespaces account-region, TablesPerRegion counts the caller's region's tables: a region at its quota
    refuses the next table, another region still takes one. (Regions no other test uses, emptied afterwards: the
    suite may share one store.)"""
    import boto3

    process = ServerProcess(None, "--namespaces", "account-region", "--quota", "TablesPerRegion=1")
    clients = [boto3.client("dynamodb", endpoint_url=process.endpoint, region_name=region,
                            aws_access_key_id="test", aws_secret_access_key="test")
               for region in ("me-central-1", "af-south-1")]
    try:
        for ddb in clients:
            _create(ddb, unique_name("quota"))
            assert _refusal(ddb, unique_name("quota"))[0] == "LimitExceededException"
    finally:
        for ddb in clients:
            for name in ddb.list_tables()["TableNames"]:
                ddb.delete_table(TableName=name)
        process.finish()
