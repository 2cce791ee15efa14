"""IAM on DynamoDB's port (`aws iam`, boto3's `iam` client, AWS Query protocol): users, access keys, inline
policies and roles through every operation and error of the subset, the keys then signing DynamoDB calls under
`--auth verify`, kept across a restart and invisible to DynamoDB's own operations."""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import pytest

from tests.api.identity_helpers import (
    ACCOUNT,
    ROOT_KEY,
    ROOT_SECRET,
    allow,
    client,
    error_of,
    trust,
    user_with_key,
    verifying_server,
    with_credentials,
)
from tests.conftest import ServerProcess, create_table, unique_name


def test_users_are_created_read_listed_and_deleted(iam):
    name = unique_name("u")
    user = iam.create_user(UserName=name, Path="/team/")["User"]
    assert user["Arn"] == f"arn:aws:iam::{ACCOUNT}:user/team/{name}" and user["Path"] == "/team/"
    assert user["UserId"].startswith("AIDA") and len(user["UserId"]) == 21
    assert iam.get_user(UserName=name)["User"] == user
    assert user in iam.list_users(PathPrefix="/team/")["Users"]
    assert user not in iam.list_users(PathPrefix="/other/")["Users"]
    iam.delete_user(UserName=name)
    assert error_of(iam.get_user, UserName=name) == (
        "NoSuchEntity", f"The user with name {name} cannot be found.", 404)


def test_user_errors(iam):
    name = unique_name("u")
    iam.create_user(UserName=name)
    assert error_of(iam.create_user, UserName=name) == (
        "EntityAlreadyExists", f"User with name {name} already exists.", 409)
    assert error_of(iam.create_user, UserName=name.upper())[0] == "EntityAlreadyExists"  # (names ignore case)
    assert error_of(iam.delete_user, UserName=unique_name("none"))[:1] == ("NoSuchEntity",)
    code, message, status = error_of(iam.create_user, UserName="no spaces")
    assert (code, status) == ("ValidationError", 400)
    assert message == ("1 validation error detected: Value 'no spaces' at 'userName' failed to satisfy constraint: "
                       "Member must satisfy regular expression pattern: [\\w+=,.@-]+")
    assert error_of(iam.create_user, UserName="x" * 65)[0] == "ValidationError"


def test_list_users_pages_with_a_marker(iam):
    names = sorted(unique_name("page") for _ in range(3))
    for name in names:
        iam.create_user(UserName=name, Path="/paging-" + names[0] + "/")
    prefix = "/paging-" + names[0] + "/"
    first = iam.list_users(PathPrefix=prefix, MaxItems=2)
    assert [user["UserName"] for user in first["Users"]] == names[:2] and first["IsTruncated"]
    rest = iam.list_users(PathPrefix=prefix, MaxItems=2, Marker=first["Marker"])
    assert [user["UserName"] for user in rest["Users"]] == names[2:] and not rest["IsTruncated"]


def test_access_keys_two_per_user_then_limit_exceeded(iam):
    name = unique_name("u")
    iam.create_user(UserName=name)
    keys = [iam.create_access_key(UserName=name)["AccessKey"] for _ in range(2)]
    for key in keys:
        assert key["AccessKeyId"].startswith("AKIA") and len(key["AccessKeyId"]) == 20
        assert len(key["SecretAccessKey"]) == 40 and key["Status"] == "Active" and key["UserName"] == name
    assert error_of(iam.create_access_key, UserName=name) == (
        "LimitExceeded", "Cannot exceed quota for AccessKeysPerUser: 2", 409)
    listed = iam.list_access_keys(UserName=name)["AccessKeyMetadata"]
    assert sorted(key["AccessKeyId"] for key in listed) == sorted(key["AccessKeyId"] for key in keys)
    assert all("SecretAccessKey" not in key for key in listed)
    assert error_of(iam.delete_user, UserName=name) == (
        "DeleteConflict", "Cannot delete entity, must delete access keys first.", 409)
    for key in keys:
        iam.delete_access_key(UserName=name, AccessKeyId=key["AccessKeyId"])
    assert error_of(iam.delete_access_key, UserName=name, AccessKeyId=keys[0]["AccessKeyId"]) == (
        "NoSuchEntity", f"The Access Key with id {keys[0]['AccessKeyId']} cannot be found.", 404)
    assert iam.list_access_keys(UserName=name)["AccessKeyMetadata"] == []
    assert error_of(iam.create_access_key, UserName=unique_name("none"))[0] == "NoSuchEntity"
    iam.delete_user(UserName=name)


def test_user_inline_policies(iam):
    name = unique_name("u")
    iam.create_user(UserName=name)
    policy = allow("dynamodb:GetItem")
    iam.put_user_policy(UserName=name, PolicyName="read", PolicyDocument=json.dumps(policy))
    got = iam.get_user_policy(UserName=name, PolicyName="read")
    assert (got["UserName"], got["PolicyName"], got["PolicyDocument"]) == (name, "read", policy)
    assert iam.list_user_policies(UserName=name)["PolicyNames"] == ["read"]
    assert error_of(iam.delete_user, UserName=name) == (
        "DeleteConflict", "Cannot delete entity, must delete policies first.", 409)
    assert error_of(iam.get_user_policy, UserName=name, PolicyName="other") == (
        "NoSuchEntity", "The user policy with name other cannot be found.", 404)
    iam.delete_user_policy(UserName=name, PolicyName="read")
    assert error_of(iam.delete_user_policy, UserName=name, PolicyName="read")[0] == "NoSuchEntity"
    assert iam.list_user_policies(UserName=name)["PolicyNames"] == []
    iam.delete_user(UserName=name)


@pytest.mark.parametrize(("document", "message"), [
    ("{not json", "This policy contains invalid Json"),
    (json.dumps({"Version": "2012-10-17"}), "Syntax errors in policy."),
    (json.dumps({"Statement": [{"Effect": "Maybe", "Action": "*", "Resource": "*"}]}), "Syntax errors in policy."),
    (json.dumps({"Statement": [{"Effect": "Allow", "Resource": "*"}]}), "Policy statement must contain actions."),
    (json.dumps({"Statement": [{"Effect": "Allow", "Action": "*"}]}), "Policy statement must contain resources."),
    (json.dumps({"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*", "Principal": "*"}]}),
     "Policy document should not specify a principal."),
    (json.dumps({"Version": "2020-01-01", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}),
     "The policy failed legacy parsing"),
])
def test_malformed_identity_policies_are_refused(iam, document, message):
    name = unique_name("u")
    iam.create_user(UserName=name)
    assert error_of(iam.put_user_policy, UserName=name, PolicyName="p", PolicyDocument=document) == (
        "MalformedPolicyDocument", message, 400)
    assert iam.list_user_policies(UserName=name)["PolicyNames"] == []


def test_inline_policies_of_a_user_are_limited_to_2048_characters(iam):
    name = unique_name("u")
    iam.create_user(UserName=name)
    big = {"Statement": [{"Effect": "Allow", "Action": [f"dynamodb:Action{i:04}" for i in range(60)],
                          "Resource": "*"}]}
    iam.put_user_policy(UserName=name, PolicyName="one", PolicyDocument=json.dumps(big))
    assert error_of(iam.put_user_policy, UserName=name, PolicyName="two", PolicyDocument=json.dumps(big)) == (
        "LimitExceeded", f"Maximum policy size of 2048 bytes exceeded for user {name}", 409)


def test_roles_with_trust_and_inline_policies(iam):
    name = unique_name("r")
    document = trust(f"arn:aws:iam::{ACCOUNT}:root")
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=document, Description="for tests")["Role"]
    assert role["Arn"] == f"arn:aws:iam::{ACCOUNT}:role/{name}" and role["RoleId"].startswith("AROA")
    assert role["AssumeRolePolicyDocument"] == json.loads(document) and role["MaxSessionDuration"] == 3600
    assert iam.get_role(RoleName=name)["Role"] == role
    assert error_of(iam.create_role, RoleName=name, AssumeRolePolicyDocument=document) == (
        "EntityAlreadyExists", f"Role with name {name} already exists.", 409)
    policy = allow("dynamodb:*")
    iam.put_role_policy(RoleName=name, PolicyName="all", PolicyDocument=json.dumps(policy))
    assert iam.get_role_policy(RoleName=name, PolicyName="all")["PolicyDocument"] == policy
    assert error_of(iam.delete_role, RoleName=name) == (
        "DeleteConflict", "Cannot delete entity, must delete policies first.", 409)
    assert error_of(iam.get_role_policy, RoleName=name, PolicyName="none") == (
        "NoSuchEntity", "The role policy with name none cannot be found.", 404)
    iam.delete_role_policy(RoleName=name, PolicyName="all")
    iam.delete_role(RoleName=name)
    assert error_of(iam.get_role, RoleName=name) == (
        "NoSuchEntity", f"The role with name {name} cannot be found.", 404)
    assert error_of(iam.put_role_policy, RoleName=name, PolicyName="p", PolicyDocument=json.dumps(policy))[0] == \
        "NoSuchEntity"


def test_trust_policies_need_a_principal_and_no_resource(iam):
    no_principal = json.dumps({"Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole"}]})
    assert error_of(iam.create_role, RoleName=unique_name("r"), AssumeRolePolicyDocument=no_principal)[0] == \
        "MalformedPolicyDocument"
    with_resource = json.dumps({"Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*",
                                               "Principal": {"AWS": ACCOUNT}}]})
    assert error_of(iam.create_role, RoleName=unique_name("r"), AssumeRolePolicyDocument=with_resource) == (
        "MalformedPolicyDocument", "Has prohibited field Resource", 400)
    assert error_of(iam.create_role, RoleName=unique_name("r"), AssumeRolePolicyDocument=trust(ACCOUNT),
                    MaxSessionDuration=50000)[0] == "ValidationError"


def test_a_users_key_signs_dynamodb_calls_until_it_is_deleted(identity_server, iam):
    name, key = user_with_key(iam, allow("dynamodb:*"))
    ddb = with_credentials(identity_server, "dynamodb", key)
    # (named to sort after other tests' tables: some look for theirs in the first page of ListTables)
    table = create_table(ddb, unique_name("z-identity"))
    ddb.put_item(TableName=table, Item={"pk": {"S": "a"}, "sk": {"S": "b"}})
    assert ddb.get_item(TableName=table, Key={"pk": {"S": "a"}, "sk": {"S": "b"}})["Item"]["pk"] == {"S": "a"}
    iam.delete_access_key(UserName=name, AccessKeyId=key["AccessKeyId"])
    assert error_of(ddb.get_item, TableName=table, Key={"pk": {"S": "a"}, "sk": {"S": "b"}}) == (
        "UnrecognizedClientException", "The security token included in the request is invalid", 400)
    wrong = with_credentials(identity_server, "dynamodb", {**key, "SecretAccessKey": "x" * 40})
    assert error_of(wrong.list_tables)[0] == "UnrecognizedClientException"


def test_iam_refuses_unknown_keys_and_wrong_signatures(identity_server, iam):
    assert error_of(client(identity_server, "iam", "AKIAUNKNOWNKEY000000", "secret").list_users) == (
        "InvalidClientTokenId", "The security token included in the request is invalid.", 403)
    code, message, status = error_of(client(identity_server, "iam", ROOT_KEY, "wrong").list_users)
    assert (code, status) == ("SignatureDoesNotMatch", 403) and message.startswith("The request signature we")


def test_users_may_call_iam_only_as_their_policies_allow(identity_server, iam):
    _, plain = user_with_key(iam)
    target = unique_name("u")
    code, message, status = error_of(with_credentials(identity_server, "iam", plain).create_user, UserName=target)
    assert (code, status) == ("AccessDenied", 403)
    assert message.endswith(f"is not authorized to perform: iam:CreateUser on resource: "
                            f"arn:aws:iam::{ACCOUNT}:user/{target} because no identity-based policy allows the "
                            f"iam:CreateUser action")
    _, admin = user_with_key(iam, allow("iam:*User", "iam:ListUsers"))
    admin_iam = with_credentials(identity_server, "iam", admin)
    admin_iam.create_user(UserName=target)
    assert admin_iam.get_user(UserName=target)["User"]["UserName"] == target
    assert error_of(admin_iam.create_role, RoleName=unique_name("r"), AssumeRolePolicyDocument=trust(ACCOUNT))[0] \
        == "AccessDenied"
    denied = {"Statement": [{"Effect": "Allow", "Action": "iam:*", "Resource": "*"},
                            {"Effect": "Deny", "Action": "iam:DeleteUser", "Resource": "*"}]}
    _, limited = user_with_key(iam, denied)
    assert error_of(with_credentials(identity_server, "iam", limited).delete_user, UserName=target)[1].endswith(
        "with an explicit deny in an identity-based policy")
    admin_iam.delete_user(UserName=target)


def test_the_identity_table_is_no_clients_table(identity_server, iam):
    user_with_key(iam)  # (the store holds identities from here on)
    ddb = client(identity_server, "dynamodb")
    names = []
    for page in ddb.get_paginator("list_tables").paginate():
        names += page["TableNames"]
    assert "openddb/identity" not in names and all("/" not in name for name in names)
    arn = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/openddb/identity"
    key = {"pk": {"S": "user"}, "sk": {"S": "x"}}
    calls = [(ddb.describe_table, {"TableName": "openddb/identity"}), (ddb.describe_table, {"TableName": arn}),
             (ddb.scan, {"TableName": "openddb/identity"}), (ddb.scan, {"TableName": arn}),
             (ddb.get_item, {"TableName": arn, "Key": key}), (ddb.delete_table, {"TableName": "openddb/identity"}),
             (ddb.put_item, {"TableName": "openddb/identity", "Item": key}),
             (ddb.execute_statement, {"Statement": 'SELECT * FROM "openddb/identity"'}),
             (ddb.execute_statement, {"Statement": "DELETE FROM \"openddb/identity\" WHERE pk = 'user' AND sk = 'x'"}),
             (ddb.create_table, {"TableName": "openddb/identity", "BillingMode": "PAY_PER_REQUEST",
                                 "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                                 "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}]})]
    for call, arguments in calls:
        assert error_of(call, **arguments)[0] in ("ResourceNotFoundException", "ValidationException"), call


def test_a_form_post_for_another_service_still_finds_no_page(identity_server):
    connection = http.client.HTTPConnection("127.0.0.1", identity_server.port, timeout=10)
    connection.request("POST", "/", body="Action=ListBuckets", headers={
        "Content-Type": "application/x-www-form-urlencoded",
        "Authorization": f"AWS4-HMAC-SHA256 Credential={ROOT_KEY}/20260101/us-east-1/s3/aws4_request, "
                         "SignedHeaders=host, Signature=00"})
    response = connection.getresponse()
    assert response.status == 404 and b"Page Not Found" in response.read()
    connection.close()


def test_with_auth_off_any_caller_is_the_root():
    process = ServerProcess(None, "--workers", "1")
    try:
        iam, sts = client(process, "iam", "anything", "at-all"), client(process, "sts", "anything", "at-all")
        name = unique_name("u")
        assert iam.create_user(UserName=name)["User"]["UserName"] == name
        assert sts.get_caller_identity()["Arn"] == f"arn:aws:iam::{ACCOUNT}:root"
    finally:
        process.finish()


def test_users_and_keys_survive_a_restart():
    with tempfile.TemporaryDirectory() as data_dir:
        first = verifying_server(data_dir=data_dir)
        try:
            name, key = user_with_key(client(first, "iam"))
        finally:
            first.finish()
        second = verifying_server(data_dir=data_dir)
        try:
            assert client(second, "iam").get_user(UserName=name)["User"]["UserName"] == name
            assert with_credentials(second, "sts", key).get_caller_identity()["Arn"].endswith(f":user/{name}")
        finally:
            second.finish()


def test_a_deleted_key_stops_working_on_every_worker_within_a_second():
    process = ServerProcess(None, "--workers", "2", "--auth", "verify", "--root-credentials",
                            f"{ROOT_KEY}:{ROOT_SECRET}")
    try:
        iam = client(process, "iam")
        name, key = user_with_key(iam, allow("dynamodb:*"))
        clients = [with_credentials(process, "dynamodb", key) for _ in range(8)]  # (connections spread on workers)
        for ddb in clients:
            ddb.list_tables()
        iam.delete_access_key(UserName=name, AccessKeyId=key["AccessKeyId"])
        time.sleep(1.5)
        for ddb in clients:
            assert error_of(ddb.list_tables)[0] == "UnrecognizedClientException"
    finally:
        process.finish()


@pytest.mark.skipif(importlib.util.find_spec("awscli") is None, reason="awscli is not installed")
def test_the_aws_cli_creates_users_and_tells_who_calls(identity_server):
    env = {**os.environ, "AWS_ACCESS_KEY_ID": ROOT_KEY, "AWS_SECRET_ACCESS_KEY": ROOT_SECRET,
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": os.devnull,
           "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_PAGER": ""}

    def aws(*args: str) -> dict[str, Any]:
        done = subprocess.run([sys.executable, "-m", "awscli", "--endpoint-url", identity_server.endpoint,
                               "--output", "json", *args], capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer

    name = unique_name("cli")
    assert aws("iam", "create-user", "--user-name", name)["User"]["Arn"] == f"arn:aws:iam::{ACCOUNT}:user/{name}"
    assert aws("sts", "get-caller-identity") == {"UserId": ACCOUNT, "Account": ACCOUNT,
                                                 "Arn": f"arn:aws:iam::{ACCOUNT}:root"}


def test_iam_changes_and_refused_callers_go_to_the_audit_log():
    path = os.path.join(tempfile.mkdtemp(), "audit.jsonl")
    process = verifying_server("--audit-log", path)
    try:
        iam = client(process, "iam")
        name, key = user_with_key(iam)
        iam.get_user(UserName=name)  # (a read: not recorded)
        assert error_of(iam.create_user, UserName=name)[0] == "EntityAlreadyExists"
        assert error_of(client(process, "sts", "AKIAUNKNOWNKEY000000", "x").get_caller_identity)[0] == \
            "InvalidClientTokenId"
    finally:
        process.finish()
    with open(path, encoding="utf-8") as log:
        events = [json.loads(line) for line in log]
    assert [(event["eventSource"], event["eventName"], event.get("errorCode")) for event in events] == [
        ("iam.amazonaws.com", "CreateUser", None), ("iam.amazonaws.com", "CreateAccessKey", None),
        ("iam.amazonaws.com", "CreateUser", "EntityAlreadyExists"), ("sts.amazonaws.com", "GetCallerIdentity",
                                                                  "InvalidClientTokenId")]
    assert events[0]["userIdentity"] == {"type": "Root", "arn": f"arn:aws:iam::{ACCOUNT}:root",
                                         "accountId": ACCOUNT, "accessKeyId": ROOT_KEY}
    assert events[1]["requestParameters"] == {"UserName": name}
    assert key["SecretAccessKey"] not in json.dumps(events)
