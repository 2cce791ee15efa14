"""STS on DynamoDB's port (boto3's `sts` client): who calls (root, user, assumed role), temporary credentials from
GetSessionToken and AssumeRole signing DynamoDB calls with their session token, the trust policy and duration
limits, and expiry (moved ahead with the `--dev` clock) refused as DynamoDB and STS refuse it."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from tests.api.identity_helpers import (
    ACCOUNT,
    allow,
    client,
    error_of,
    trust,
    user_with_key,
    verifying_server,
    with_credentials,
)
from tests.conftest import ServerProcess, create_table, unique_name


def _seconds_left(credentials: dict[str, Any]) -> float:
    expiration: datetime = credentials["Expiration"]
    return expiration.timestamp() - time.time()


def _role(iam: Any, *principals: str, **extra: Any) -> dict[str, Any]:
    """A new role trusting `principals`, whose own policy allows every DynamoDB action."""
    role: dict[str, Any] = iam.create_role(RoleName=unique_name("r"), AssumeRolePolicyDocument=trust(*principals),
                                           **extra)["Role"]
    iam.put_role_policy(RoleName=role["RoleName"], PolicyName="all", PolicyDocument=json.dumps(allow("dynamodb:*")))
    return role


def test_get_caller_identity_of_root_and_user(identity_server, iam):
    assert client(identity_server, "sts").get_caller_identity() | {"ResponseMetadata": None} == {
        "UserId": ACCOUNT, "Account": ACCOUNT, "Arn": f"arn:aws:iam::{ACCOUNT}:root", "ResponseMetadata": None}
    name, key = user_with_key(iam)
    user = iam.get_user(UserName=name)["User"]
    identity = with_credentials(identity_server, "sts", key).get_caller_identity()
    assert (identity["UserId"], identity["Account"], identity["Arn"]) == (user["UserId"], ACCOUNT, user["Arn"])


def test_session_tokens_of_a_user_sign_dynamodb_calls(identity_server, iam):
    name, key = user_with_key(iam, allow("dynamodb:*"))
    credentials = with_credentials(identity_server, "sts", key).get_session_token(DurationSeconds=900)["Credentials"]
    assert credentials["AccessKeyId"].startswith("ASIA") and len(credentials["AccessKeyId"]) == 20
    assert 880 < _seconds_left(credentials) <= 900 and credentials["SessionToken"]
    session_sts = with_credentials(identity_server, "sts", credentials)
    assert session_sts.get_caller_identity()["Arn"] == f"arn:aws:iam::{ACCOUNT}:user/{name}"
    ddb = with_credentials(identity_server, "dynamodb", credentials)
    # (named to sort after other tests' tables: some look for theirs in the first page of ListTables)
    table = create_table(ddb, unique_name("z-identity"))
    ddb.put_item(TableName=table, Item={"pk": {"S": "a"}, "sk": {"S": "b"}})
    assert ddb.get_item(TableName=table, Key={"pk": {"S": "a"}, "sk": {"S": "b"}})["Item"]["sk"] == {"S": "b"}
    assert error_of(session_sts.get_session_token) == (
        "AccessDenied", "Cannot call GetSessionToken with session credentials", 403)


def test_temporary_credentials_need_their_own_session_token(identity_server, iam):
    _, key = user_with_key(iam)
    credentials = with_credentials(identity_server, "sts", key).get_session_token()["Credentials"]
    assert 43100 < _seconds_left(credentials) <= 43200  # (12 hours by default)
    invalid = ("UnrecognizedClientException", "The security token included in the request is invalid", 400)
    forged = {**credentials, "SessionToken": "forged"}
    assert error_of(with_credentials(identity_server, "dynamodb", forged).list_tables) == invalid
    without = {name: value for name, value in credentials.items() if name != "SessionToken"}
    assert error_of(with_credentials(identity_server, "dynamodb", without).list_tables) == invalid
    assert error_of(client(identity_server, "dynamodb", token="a-token").list_tables) == invalid  # (a long-term key)


def test_session_token_durations(identity_server, iam):
    sts = client(identity_server, "sts")
    assert 3500 < _seconds_left(sts.get_session_token(DurationSeconds=7200)["Credentials"]) <= 3600  # (root: 1 h)
    code, message, status = error_of(sts.get_session_token, DurationSeconds=129601)
    assert (code, status) == ("ValidationError", 400)
    assert message == ("1 validation error detected: Value '129601' at 'durationSeconds' failed to satisfy "
                       "constraint: Member must have value less than or equal to 129600")


def test_assume_role_gives_credentials_of_the_role(identity_server, iam):
    name, key = user_with_key(iam)
    role = _role(iam, f"arn:aws:iam::{ACCOUNT}:user/{name}")
    answer = with_credentials(identity_server, "sts", key).assume_role(RoleArn=role["Arn"], RoleSessionName="session-1")
    assumed = answer["AssumedRoleUser"]
    assert assumed == {"AssumedRoleId": f"{role['RoleId']}:session-1",
                       "Arn": f"arn:aws:sts::{ACCOUNT}:assumed-role/{role['RoleName']}/session-1"}
    credentials = answer["Credentials"]
    assert credentials["AccessKeyId"].startswith("ASIA") and 3500 < _seconds_left(credentials) <= 3600
    identity = with_credentials(identity_server, "sts", credentials).get_caller_identity()
    assert (identity["UserId"], identity["Arn"]) == (assumed["AssumedRoleId"], assumed["Arn"])
    ddb = with_credentials(identity_server, "dynamodb", credentials)
    # (named to sort after other tests' tables: some look for theirs in the first page of ListTables)
    table = create_table(ddb, unique_name("z-identity"))
    assert ddb.describe_table(TableName=table)["Table"]["TableName"] == table


def _may_assume(*role_arns: str) -> dict[str, Any]:
    """An identity policy allowing sts:AssumeRole on `role_arns`."""
    return {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": list(role_arns)}]}


def test_assume_role_asks_the_trust_policy(identity_server, iam):
    trusting_account = _role(iam, ACCOUNT)
    name, key = user_with_key(iam, _may_assume(trusting_account["Arn"]))
    sts = with_credentials(identity_server, "sts", key)
    assert sts.assume_role(RoleArn=trusting_account["Arn"], RoleSessionName="s1")["Credentials"]["AccessKeyId"]
    other = _role(iam, f"arn:aws:iam::{ACCOUNT}:user/someone-else")
    assert error_of(sts.assume_role, RoleArn=other["Arn"], RoleSessionName="s1") == (
        "AccessDenied", f"User: arn:aws:iam::{ACCOUNT}:user/{name} is not authorized to perform: sts:AssumeRole "
        f"on resource: {other['Arn']}", 403)
    missing = f"arn:aws:iam::{ACCOUNT}:role/{unique_name('none')}"
    assert error_of(sts.assume_role, RoleArn=missing, RoleSessionName="s1")[0] == "AccessDenied"
    denying = iam.create_role(RoleName=unique_name("r"), AssumeRolePolicyDocument=json.dumps({"Statement": [
        {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"},
        {"Effect": "Deny", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/{name}"}, "Action": "sts:*"}]}))
    assert error_of(sts.assume_role, RoleArn=denying["Role"]["Arn"], RoleSessionName="s1")[0] == "AccessDenied"
    root_sts = client(identity_server, "sts")
    assert error_of(root_sts.assume_role, RoleArn=trusting_account["Arn"], RoleSessionName="s1") == (
        "AccessDenied", "Roles may not be assumed by root accounts.", 403)


def test_a_trust_policy_naming_the_account_needs_the_callers_identity_policy_too(identity_server, iam):
    """In one account, a trust policy naming the caller itself is enough; one naming only the account (its id or
    its root ARN) leaves the decision to the caller's identity policies, which must allow sts:AssumeRole on the role
    (IAM User Guide, "Policy evaluation logic": role trust policies must explicitly allow the principal); an
    identity policy's Deny refuses either way."""
    name, key = user_with_key(iam)
    user_arn = f"arn:aws:iam::{ACCOUNT}:user/{name}"
    sts = with_credentials(identity_server, "sts", key)
    by_id, by_root, by_arn = _role(iam, ACCOUNT), _role(iam, f"arn:aws:iam::{ACCOUNT}:root"), _role(iam, user_arn)
    for role in (by_id, by_root):
        assert error_of(sts.assume_role, RoleArn=role["Arn"], RoleSessionName="s1") == (
            "AccessDenied", f"User: {user_arn} is not authorized to perform: sts:AssumeRole on resource: "
            f"{role['Arn']}", 403)
    assert sts.assume_role(RoleArn=by_arn["Arn"], RoleSessionName="s1")["AssumedRoleUser"]["Arn"].endswith("/s1")
    iam.put_user_policy(UserName=name, PolicyName="assume", PolicyDocument=json.dumps(_may_assume(by_id["Arn"])))
    assert sts.assume_role(RoleArn=by_id["Arn"], RoleSessionName="s2")["AssumedRoleUser"]["Arn"].endswith("/s2")
    assert error_of(sts.assume_role, RoleArn=by_root["Arn"], RoleSessionName="s2")[0] == "AccessDenied"
    iam.put_user_policy(UserName=name, PolicyName="no", PolicyDocument=json.dumps({"Statement": [
        {"Effect": "Deny", "Action": "sts:AssumeRole", "Resource": by_arn["Arn"]}]}))
    assert error_of(sts.assume_role, RoleArn=by_arn["Arn"], RoleSessionName="s3")[0] == "AccessDenied"


def test_assume_role_durations(identity_server, iam):
    role = _role(iam, ACCOUNT, MaxSessionDuration=7200)
    # (the role's own policy lets its sessions assume it again, as the trust policy names only the account)
    iam.put_role_policy(RoleName=role["RoleName"], PolicyName="again",
                        PolicyDocument=json.dumps(_may_assume(role["Arn"])))
    _, key = user_with_key(iam, _may_assume(role["Arn"]))
    sts = with_credentials(identity_server, "sts", key)
    long = sts.assume_role(RoleArn=role["Arn"], RoleSessionName="long", DurationSeconds=7200)["Credentials"]
    assert 7100 < _seconds_left(long) <= 7200
    assert error_of(sts.assume_role, RoleArn=role["Arn"], RoleSessionName="s0", DurationSeconds=7201) == (
        "ValidationError", "The requested DurationSeconds exceeds the MaxSessionDuration set for this role.", 400)
    chained = with_credentials(identity_server, "sts", long)
    assert error_of(chained.assume_role, RoleArn=role["Arn"], RoleSessionName="c0", DurationSeconds=3601) == (
        "ValidationError", "The requested DurationSeconds exceeds the 1 hour session limit for roles assumed by "
        "role chaining.", 400)
    assert chained.assume_role(RoleArn=role["Arn"], RoleSessionName="c0")["AssumedRoleUser"]["Arn"].endswith("/c0")


def test_an_assumed_role_may_call_iam_as_its_policies_allow(identity_server, iam):
    role = _role(iam, ACCOUNT)
    _, key = user_with_key(iam, _may_assume(role["Arn"]))
    iam.put_role_policy(RoleName=role["RoleName"], PolicyName="read", PolicyDocument=json.dumps(allow("iam:Get*")))
    credentials = with_credentials(identity_server, "sts", key).assume_role(RoleArn=role["Arn"], RoleSessionName="s0")
    role_iam = with_credentials(identity_server, "iam", credentials["Credentials"])
    assert role_iam.get_role(RoleName=role["RoleName"])["Role"]["Arn"] == role["Arn"]
    assert error_of(role_iam.create_user, UserName=unique_name("u"))[0] == "AccessDenied"


@pytest.fixture
def dev_server() -> Iterator[ServerProcess]:
    process = verifying_server("--dev")
    try:
        yield process
    finally:
        process.finish()


def test_expired_credentials_are_refused(dev_server):
    iam = client(dev_server, "iam")
    name, key = user_with_key(iam)
    role = _role(iam, f"arn:aws:iam::{ACCOUNT}:user/{name}")
    assumed = with_credentials(dev_server, "sts", key).assume_role(RoleArn=role["Arn"], RoleSessionName="s0",
                                                                   DurationSeconds=900)["Credentials"]
    ddb = with_credentials(dev_server, "dynamodb", assumed)
    ddb.list_tables()
    request = urllib.request.Request(f"{dev_server.endpoint}/openddb/clock", data=b'{"advance": 901}',
                                     method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert json.loads(response.read())["offset"] >= 901
    assert error_of(ddb.list_tables) == (
        "ExpiredTokenException", "The security token included in the request is expired", 400)
    assert error_of(with_credentials(dev_server, "sts", assumed).get_caller_identity) == (
        "ExpiredToken", "The security token included in the request is expired", 400)
