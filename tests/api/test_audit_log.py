"""`serve --audit-log FILE`: a JSON line per control-plane call (made or refused) and per call refused for who
made it, in CloudTrail's management-event shape; data-plane calls are not in it; two workers' lines never mix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.conftest import ServerProcess, free_port, unique_name

KEY, SECRET = "AKIDAUDITROOT", "audit-secret"


def client(server: ServerProcess, key: str = KEY, secret: str = SECRET):  # type: ignore[no-untyped-def]
    once = Config(retries={"total_max_attempts": 1})
    return boto3.client("dynamodb", endpoint_url=server.endpoint, region_name="eu-central-1",
                        aws_access_key_id=key, aws_secret_access_key=secret, config=once)


def events(path: str, count: int) -> list[dict]:
    """The log's events, once it has at least `count` lines (they are written as the calls are answered)."""
    deadline = time.monotonic() + 5
    while True:
        with open(path) as log:
            lines = log.read().splitlines()
        if len(lines) >= count or time.monotonic() > deadline:
            return [json.loads(line) for line in lines]
        time.sleep(0.05)


def create(ddb, name: str) -> None:  # type: ignore[no-untyped-def]
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])


def test_changes_and_refused_callers_are_recorded_data_plane_calls_are_not():
    path = os.path.join(tempfile.mkdtemp(), "audit.jsonl")
    server = ServerProcess(None, "--workers", "1", "--auth", "verify", "--root-credentials", f"{KEY}:{SECRET}",
                           "--audit-log", path)
    try:
        ddb = client(server)
        table = unique_name("audited")
        create(ddb, table)
        ddb.put_item(TableName=table, Item={"pk": {"S": "a"}})  # data plane: not recorded
        ddb.get_item(TableName=table, Key={"pk": {"S": "a"}})
        ddb.describe_table(TableName=table)  # read-only control plane: not recorded
        arn = ddb.describe_table(TableName=table)["Table"]["TableArn"]
        ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "team", "Value": "data"}])
        with pytest.raises(ClientError):
            ddb.delete_table(TableName=table + "-missing")
        with pytest.raises(ClientError):
            client(server, secret="wrong").put_item(TableName=table, Item={"pk": {"S": "b"}})
        ddb.delete_table(TableName=table)
        log = events(path, 5)
    finally:
        server.finish()
    assert [event["eventName"] for event in log] == ["CreateTable", "TagResource", "DeleteTable", "PutItem",
                                                     "DeleteTable"]
    created, tagged, missing, refused, deleted = log
    for event in log:
        assert event["eventSource"] == "dynamodb.amazonaws.com" and event["managementEvent"] is True
        assert event["sourceIPAddress"] == "127.0.0.1" and len(event["requestID"]) == 52
        assert event["eventTime"].endswith("Z")
    assert created["userIdentity"] == {"type": "Root", "arn": "arn:aws:iam::000000000000:root",
                                       "accountId": "000000000000", "accessKeyId": KEY}
    assert created["awsRegion"] == "eu-central-1" and "errorCode" not in created
    assert created["resources"] == [{"ARN": f"arn:aws:dynamodb:eu-central-1:000000000000:table/{table}",
                                     "type": "AWS::DynamoDB::Table"}]
    assert tagged["resources"][0]["ARN"] == arn
    assert missing["errorCode"] == "ResourceNotFoundException" and missing["errorMessage"]
    assert refused["errorCode"] == "InvalidSignatureException" and refused["userIdentity"] == {
        "type": "Unknown", "accessKeyId": KEY}
    assert refused["awsRegion"] is None and "resources" not in refused
    assert "errorCode" not in deleted


def test_calls_refused_by_policies_are_recorded():
    """A data-plane call refused by the caller's policies is recorded, with the user and the refusal."""
    path = os.path.join(tempfile.mkdtemp(), "audit.jsonl")
    server = ServerProcess(None, "--workers", "1", "--auth", "verify", "--root-credentials", f"{KEY}:{SECRET}",
                           "--audit-log", path)
    try:
        table = unique_name("audited")
        create(client(server), table)
        iam = boto3.client("iam", endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id=KEY,
                           aws_secret_access_key=SECRET)
        name = unique_name("u")
        user = iam.create_user(UserName=name)["User"]["Arn"]
        key = iam.create_access_key(UserName=name)["AccessKey"]
        with pytest.raises(ClientError):
            client(server, key["AccessKeyId"], key["SecretAccessKey"]).get_item(TableName=table,
                                                                             Key={"pk": {"S": "a"}})
        refused = [event for event in events(path, 4) if event["eventName"] == "GetItem"]
        assert len(refused) == 1 and refused[0]["errorCode"] == "AccessDeniedException"
        assert refused[0]["userIdentity"]["arn"] == user and refused[0]["errorMessage"].startswith(f"User: {user} ")
        assert refused[0]["resources"][0]["ARN"].endswith(f":table/{table}")
    finally:
        server.finish()


def test_two_workers_write_whole_lines():
    path = os.path.join(tempfile.mkdtemp(), "audit.jsonl")
    server = ServerProcess(tempfile.mkdtemp(), "--workers", "2", "--audit-log", path)
    try:
        ddbs = [client(server) for _ in range(4)]
        names = [unique_name("w") for _ in range(24)]
        for n, name in enumerate(names):
            create(ddbs[n % 4], name)
        log = events(path, len(names))
    finally:
        server.finish()
    assert sorted(event["resources"][0]["ARN"].rsplit("/", 1)[1] for event in log) == sorted(names)
    assert all(event["userIdentity"]["type"] == "Unknown" for event in log)  # (--auth off: the key, unverified)
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"


def test_an_audit_log_that_cannot_be_written_is_one_line_and_exit_code_2():
    done = subprocess.run([sys.executable, "-m", "openddb", "serve", "--in-memory", "--port", str(free_port()),
                           "--audit-log", "/nonexistent-dir/audit.jsonl"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr.strip() == "openddb: --audit-log /nonexistent-dir/audit.jsonl: No such file or directory"
