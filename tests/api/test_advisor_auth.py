"""The advisor's report under --auth verify (docs/ADVISOR.md, Accounts and regions): GET /openddb/advisor is
signed as an API call is and answers its caller's own account and region alone; a user or role reads the tables
its policies let it describe. (With --auth off it stays open: tests/api/test_advisor.py reads it unsigned.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from tests.conftest import ServerProcess

FIRST, SECOND = "111111111111", "222222222222"
ROOTS = {FIRST: ("AKIDADVISORONE", "secret-one"), SECOND: ("AKIDADVISORTWO", "secret-two")}
REGION = "eu-west-1"


@pytest.fixture(scope="module")
def verifying(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    config = tmp_path_factory.mktemp("advisor") / "advisor.json"
    config.write_text(json.dumps({"thresholds": {"observe_budget": 1}}))
    roots = [option for account, (key, secret) in ROOTS.items()
             for option in ("--root-credentials", f"{key}:{secret}@{account}")]
    process = ServerProcess(None, "--auth", "verify", "--namespaces", "account-region", *roots,
                            "--advisor-config", str(config))
    try:
        yield process
    finally:
        process.finish()


def service(process: ServerProcess, name: str, key: str, secret: str) -> Any:
    return boto3.client(name, endpoint_url=process.endpoint, region_name=REGION, aws_access_key_id=key,
                        aws_secret_access_key=secret, config=Config(retries={"max_attempts": 1}))


def signed_get(process: ServerProcess, query: str, key: str | None, secret: str = "",
               service_name: str = "dynamodb") -> tuple[int, dict[str, Any]]:
    """GET /openddb/advisor?query signed by botocore with (key, secret) (None: unsigned): status and JSON body."""
    url = f"{process.endpoint}/openddb/advisor" + (f"?{query}" if query else "")
    headers: dict[str, str] = {}
    if key is not None:
        request = AWSRequest(method="GET", url=url)
        SigV4Auth(Credentials(key, secret), service_name, REGION).add_auth(request)
        headers = dict(request.headers.items())
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


def root_report(process: ServerProcess, account: str, query: str = "") -> dict[str, Any]:
    status, body = signed_get(process, query, *ROOTS[account])
    assert status == 200, body
    return body


def scanned_table(ddb: Any, name: str, scans: int = 5) -> None:
    """A table with point-in-time recovery on, one item, and `scans` Scans filtering on its key."""
    ddb.create_table(TableName=name, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     BillingMode="PAY_PER_REQUEST")
    ddb.update_continuous_backups(TableName=name, PointInTimeRecoverySpecification={
        "PointInTimeRecoveryEnabled": True})
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}})
    for _ in range(scans):
        ddb.scan(TableName=name, FilterExpression="pk = :v", ExpressionAttributeValues={":v": {"S": "a"}})


def test_each_account_reads_its_own_findings(verifying: ServerProcess) -> None:
    """Two accounts' tables of one name are two tables to the advisor: the first account's Scans give it findings,
    the second account's Queries none. Each root's signed report holds its own account's tables alone, whatever
    `account=` it asks for; `openddb advise` signs with the environment's credentials and reads the same."""
    name = f"shared-name-{uuid.uuid4().hex[:8]}"
    first, second = (service(verifying, "dynamodb", *ROOTS[account]) for account in (FIRST, SECOND))
    scanned_table(first, name)
    second.create_table(TableName=name, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                        BillingMode="PAY_PER_REQUEST")
    for _ in range(5):
        second.query(TableName=name, KeyConditionExpression="pk = :v", ExpressionAttributeValues={":v": {"S": "a"}})
    mine = root_report(verifying, FIRST, f"table={name}")
    assert [(f["table"], f["account"], f["region"], f["evidence"]["scans"]) for f in mine["findings"]
            if f["rule"] == "scan-hot-path"] == [(name, FIRST, REGION, 5)]
    assert {f.get("account") for f in mine["findings"] + mine["not_checked"] if f["table"]} == {FIRST}
    assert {(row["account"], row["operation"]) for row in mine["access_patterns"]} >= {(FIRST, "Scan")}
    assert {row["account"] for row in mine["access_patterns"]} == {FIRST}
    assert mine["window"]["tables"] == [f"{FIRST}/{REGION}/{name}"]
    theirs = root_report(verifying, SECOND, f"table={name}&account={FIRST}")  # (its own account's, all the same)
    assert [f for f in theirs["findings"] if f["rule"] == "scan-hot-path"] == []
    assert {(row["account"], row["operation"]) for row in theirs["access_patterns"]} == {(SECOND, "Query")}
    assert theirs["window"]["tables"] == [f"{SECOND}/{REGION}/{name}"]
    environment = {**os.environ, "AWS_ACCESS_KEY_ID": ROOTS[FIRST][0], "AWS_SECRET_ACCESS_KEY": ROOTS[FIRST][1],
                   "AWS_DEFAULT_REGION": REGION}
    environment.pop("AWS_SESSION_TOKEN", None)
    junit = subprocess.run([sys.executable, "-m", "openddb", "advise", "--endpoint", verifying.endpoint, "--table",
                            name, "--format", "junit"], capture_output=True, text=True, timeout=60, env=environment)
    assert junit.returncode == 0, junit.stderr
    suites = [suite.get("name") for suite in ElementTree.fromstring(junit.stdout).iter("testsuite")]
    assert suites == [f"{FIRST}/{REGION}/{name}"]


def test_unsigned_and_wrongly_signed_reads_are_refused(verifying: ServerProcess, tmp_path: Path) -> None:
    """DynamoDB's answers to an API call so sent: no signature, an unknown key, the wrong secret, a scope of another
    service. `openddb advise` with no credentials to sign with says the server refused it (exit status 2)."""
    key, secret = ROOTS[FIRST]
    refusals = [signed_get(verifying, "", None), signed_get(verifying, "", "AKIDNOBODYKNOWS", "x"),
                signed_get(verifying, "", key, "not-the-secret"),
                signed_get(verifying, "", key, secret, "monitoring")]
    assert [(status, body["__type"].rpartition("#")[2]) for status, body in refusals] == [
        (400, "MissingAuthenticationTokenException"), (400, "UnrecognizedClientException"),
        (400, "InvalidSignatureException"), (400, "InvalidSignatureException")]
    assert refusals[1][1]["message"] == "The security token included in the request is invalid"
    assert refusals[2][1]["message"].startswith("The request signature we calculated does not match")
    assert refusals[3][1]["message"] == "Credential should be scoped to correct service: 'dynamodb'. "
    for _, body in refusals:
        assert "findings" not in body and "window" not in body
    environment = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    environment.update(HOME=str(tmp_path), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
                       AWS_CONFIG_FILE=str(tmp_path / "none"))
    unsigned = subprocess.run([sys.executable, "-m", "openddb", "advise", "--endpoint", verifying.endpoint],
                              capture_output=True, text=True, timeout=60, env=environment)
    assert unsigned.returncode == 2 and "MissingAuthenticationTokenException" in unsigned.stderr


def test_a_user_reads_the_tables_it_may_describe(verifying: ServerProcess, tmp_path: Path) -> None:
    """A user whose policy allows dynamodb:DescribeTable on one table reads that table's findings, not another's
    of its account (asking for that one by name is AccessDeniedException), nor the account's IAM policies
    (least-privilege: not checked for it). Its account's root reads both tables and the broad grant another user
    has; the other account's root reads neither. `openddb advise` signs with a profile of the credentials file."""
    root = service(verifying, "dynamodb", *ROOTS[FIRST])
    allowed, hidden = (f"advised-{kind}-{uuid.uuid4().hex[:8]}" for kind in ("allowed", "hidden"))
    scanned_table(root, allowed)
    scanned_table(root, hidden)
    iam = service(verifying, "iam", *ROOTS[FIRST])
    reader, broad = (f"advisor-{kind}-{uuid.uuid4().hex[:6]}" for kind in ("reader", "broad"))
    for user, statement in ((reader, {"Effect": "Allow", "Action": "dynamodb:DescribeTable",
                                      "Resource": f"arn:aws:dynamodb:{REGION}:{FIRST}:table/{allowed}"}),
                            (broad, {"Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"})):
        iam.create_user(UserName=user)
        iam.put_user_policy(UserName=user, PolicyName="p", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [statement]}))
    created = iam.create_access_key(UserName=reader)["AccessKey"]
    status, seen = signed_get(verifying, "", created["AccessKeyId"], created["SecretAccessKey"])
    assert status == 200
    tables = {f["table"] for f in seen["findings"] + seen["not_checked"] if f["table"]}
    assert allowed in tables and hidden not in tables
    assert [f["rule"] for f in seen["findings"] if f["table"] == allowed].count("scan-hot-path") == 1
    assert {row["table"] for row in seen["access_patterns"]} == {allowed}
    assert [f for f in seen["findings"] if f["rule"] == "least-privilege"] == []
    assert [f["reason"] for f in seen["not_checked"] if f["rule"] == "least-privilege"] == [
        "the account's IAM policies are read for its root alone"]
    status, denied = signed_get(verifying, f"table={hidden}", created["AccessKeyId"], created["SecretAccessKey"])
    assert status == 400 and denied["__type"].endswith("AccessDeniedException")
    assert "dynamodb:DescribeTable" in denied["message"] and hidden in denied["message"]
    whole = root_report(verifying, FIRST)
    scanned = {f["table"] for f in whole["findings"] if f["rule"] == "scan-hot-path"}
    assert {allowed, hidden} <= scanned
    assert any(f["evidence"]["principal"] == f"user {broad}" for f in whole["findings"]
               if f["rule"] == "least-privilege")
    other = root_report(verifying, SECOND)
    assert not {allowed, hidden} & {f["table"] for f in other["findings"] + other["not_checked"]}
    assert not any(f["evidence"].get("principal") == f"user {broad}" for f in other["findings"])
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[reader]\naws_access_key_id = {created['AccessKeyId']}\n"
                           f"aws_secret_access_key = {created['SecretAccessKey']}\n")
    environment = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    environment.update(AWS_SHARED_CREDENTIALS_FILE=str(credentials), AWS_PROFILE="reader",
                       AWS_CONFIG_FILE=str(tmp_path / "none"))
    printed = subprocess.run([sys.executable, "-m", "openddb", "advise", "--endpoint", verifying.endpoint,
                              "--region", REGION, "--format", "json"], capture_output=True, text=True, timeout=60,
                             env=environment)
    assert printed.returncode == 0, printed.stderr
    assert {row["table"] for row in json.loads(printed.stdout)["access_patterns"]} == {allowed}
