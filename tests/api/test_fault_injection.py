"""`serve --inject-errors SPEC`: a fraction of matching calls refused with a throttle (as DynamoDB words it for
the table's billing mode, with ThrottlingReasons), a 500 or a 503, before they run; SDK retries see them."""

from __future__ import annotations

import subprocess
import sys

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.conftest import ServerProcess, free_port, unique_name


def client(server: ServerProcess, attempts: int = 1):  # type: ignore[no-untyped-def]
    """boto3 making at most `attempts` attempts a call (botocore's `max_attempts` counts retries, so one of 1 would
    still retry once: `total_max_attempts` counts them all)."""
    retries = Config(retries={"total_max_attempts": attempts, "mode": "standard"})
    return boto3.client("dynamodb", endpoint_url=server.endpoint, region_name="us-west-2", aws_access_key_id="a",
                        aws_secret_access_key="b", config=retries)


def create(ddb, name: str, provisioned: bool) -> None:  # type: ignore[no-untyped-def]
    throughput = ({"BillingMode": "PROVISIONED",
                   "ProvisionedThroughput": {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}}
                  if provisioned else {"BillingMode": "PAY_PER_REQUEST"})
    ddb.create_table(TableName=name, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}], **throughput)


def refusal(call) -> dict:  # type: ignore[no-untyped-def]
    with pytest.raises(ClientError) as excinfo:
        call()
    return excinfo.value.response


def test_throttles_follow_the_tables_billing_mode_and_name_their_reason():
    provisioned, on_demand, calm = unique_name("hot-p"), unique_name("hot-o"), unique_name("calm")
    server = ServerProcess(None, "--workers", "1", "--inject-errors", f"1:throttle@{provisioned},{on_demand}")
    try:
        ddb = client(server)
        create(ddb, provisioned, provisioned=True)
        create(ddb, on_demand, provisioned=False)
        create(ddb, calm, provisioned=False)
        answer = refusal(lambda: ddb.put_item(TableName=provisioned, Item={"pk": {"S": "a"}}))
        assert answer["Error"]["Code"] == "ProvisionedThroughputExceededException"
        assert answer["Error"]["Message"].startswith("The level of configured provisioned throughput for the table")
        assert answer["ThrottlingReasons"] == [{
            "reason": "TableWriteProvisionedThroughputExceeded",
            "resource": f"arn:aws:dynamodb:us-west-2:000000000000:table/{provisioned}"}]
        answer = refusal(lambda: ddb.get_item(TableName=on_demand, Key={"pk": {"S": "a"}}))
        assert answer["Error"]["Code"] == "ThrottlingException"
        assert answer["Error"]["Message"].startswith("Throughput exceeds the current capacity of your table or index.")
        assert answer["throttlingReasons"][0]["reason"] == "TableReadKeyRangeThroughputExceeded"
        ddb.put_item(TableName=calm, Item={"pk": {"S": "a"}})  # another table is not refused
        # a refused call changed nothing: the writes above did not happen
        assert "Items" in ddb.scan(TableName=calm) and ddb.scan(TableName=calm)["Count"] == 1
    finally:
        server.finish()


def test_a_rate_refuses_about_that_share_and_only_the_operations_named():
    server = ServerProcess(None, "--workers", "1", "--inject-errors", "0.5:internal,unavailable@PutItem")
    try:
        ddb = client(server)
        table = unique_name("share")
        create(ddb, table, provisioned=False)
        codes: dict[str, int] = {}
        stored = []
        for n in range(300):
            try:
                ddb.put_item(TableName=table, Item={"pk": {"S": str(n)}})
                stored.append(str(n))
            except ClientError as error:
                code = error.response["Error"]["Code"]
                codes[code] = codes.get(code, 0) + 1
                status = error.response["ResponseMetadata"]["HTTPStatusCode"]
                assert (code, status) in (("InternalServerError", 500), ("ServiceUnavailable", 503))
        refused = sum(codes.values())
        assert 100 <= refused <= 200, codes  # (binomial, 300 tries at 0.5: outside this, one in a million)
        assert set(codes) == {"InternalServerError", "ServiceUnavailable"}
        for _ in range(20):  # GetItem is not named: never refused
            ddb.get_item(TableName=table, Key={"pk": {"S": "0"}})
        pages = ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
        assert sorted(item["pk"]["S"] for page in pages for item in page["Items"]) == sorted(stored)
    finally:
        server.finish()


def test_the_sdks_retries_ride_over_injected_throttles():
    server = ServerProcess(None, "--workers", "1", "--inject-errors", "0.3")
    try:
        setup = client(server, attempts=10)
        table = unique_name("retry")
        create(setup, table, provisioned=False)
        ddb = client(server, attempts=10)
        for n in range(40):
            ddb.put_item(TableName=table, Item={"pk": {"S": str(n)}})
        assert ddb.scan(TableName=table, ConsistentRead=True)["Count"] == 40
    finally:
        server.finish()


@pytest.mark.parametrize("spec", ["0", "2", "x", "0.5:slow", "0.1:throttle,boom@PutItem"])
def test_a_spec_that_cannot_be_read_is_one_line_and_exit_code_2(spec):
    done = subprocess.run([sys.executable, "-m", "openddb", "serve", "--in-memory", "--port", str(free_port()),
                           "--inject-errors", spec], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"openddb: --inject-errors {spec}: "), lines
