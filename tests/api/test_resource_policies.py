"""Resource-based policies (PutResourcePolicy, GetResourcePolicy, DeleteResourcePolicy, CreateTable's
ResourcePolicy) on tables and streams: revisions and ExpectedRevisionId, PolicyNotFoundException, the 20 KB limit,
ConfirmRemoveSelfResourceAccess; and their evaluation with identity policies under `--auth verify` (an Allow of
either grants, a Deny of either wins), through boto3 against real servers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.identity_helpers import ACCOUNT, allow, client, error_of, user_with_key, with_credentials
from tests.conftest import ServerProcess, create_table, unique_name

DENIED = "AccessDeniedException"


def arn(table: str) -> str:
    return f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/{table}"


def resource_policy(effect: str, principal: Any, actions: Any, resources: Any) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": effect, "Principal": principal, "Action": actions, "Resource": resources}]})


@pytest.fixture(scope="module")
def root(identity_server: ServerProcess) -> Any:
    return client(identity_server, "dynamodb")


def new_table(root: Any) -> str:
    table = create_table(root, unique_name("z-rbac"))
    root.put_item(TableName=table, Item={"pk": {"S": "a"}, "sk": {"S": "1"}})
    return table


def test_revisions_and_expected_revision_ids(root):
    table = new_table(root)
    document = resource_policy("Allow", {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "dynamodb:GetItem", arn(table))
    assert error_of(root.get_resource_policy, ResourceArn=arn(table))[0] == "PolicyNotFoundException"
    assert "RevisionId" not in root.delete_resource_policy(ResourceArn=arn(table))  # (none attached)
    first = root.put_resource_policy(ResourceArn=arn(table), Policy=document, ExpectedRevisionId="NO_POLICY")
    revision = first["RevisionId"]
    assert root.get_resource_policy(ResourceArn=arn(table)) | {"ResponseMetadata": None} == {
        "Policy": document, "RevisionId": revision, "ResponseMetadata": None}
    assert root.put_resource_policy(ResourceArn=arn(table), Policy=document)["RevisionId"] == revision  # (the same)
    assert error_of(root.put_resource_policy, ResourceArn=arn(table), Policy=document,
                    ExpectedRevisionId="NO_POLICY")[0] == "PolicyNotFoundException"
    assert error_of(root.put_resource_policy, ResourceArn=arn(table), Policy=document,
                    ExpectedRevisionId="1")[0] == "PolicyNotFoundException"
    changed = document.replace("GetItem", "Query")
    second = root.put_resource_policy(ResourceArn=arn(table), Policy=changed, ExpectedRevisionId=revision)
    assert second["RevisionId"] != revision
    assert root.get_resource_policy(ResourceArn=arn(table))["Policy"] == changed
    assert error_of(root.delete_resource_policy, ResourceArn=arn(table),
                    ExpectedRevisionId=revision)[0] == "PolicyNotFoundException"
    assert root.delete_resource_policy(ResourceArn=arn(table), ExpectedRevisionId=second["RevisionId"])[
        "RevisionId"] == second["RevisionId"]
    assert error_of(root.get_resource_policy, ResourceArn=arn(table))[0] == "PolicyNotFoundException"


def test_refusals_of_resources_and_documents(root):
    table = new_table(root)
    good = resource_policy("Allow", "*", "dynamodb:GetItem", arn(table))
    assert error_of(root.get_resource_policy, ResourceArn=arn(unique_name("none")))[0] == "ResourceNotFoundException"
    assert error_of(root.put_resource_policy, ResourceArn=f"{arn(table)}/index/x", Policy=good)[0] == \
        "ValidationException"
    assert error_of(root.put_resource_policy, ResourceArn=arn(table), Policy="{not json")[0] == "ValidationException"
    no_principal = json.dumps({"Statement": [{"Effect": "Allow", "Action": "dynamodb:*", "Resource": arn(table)}]})
    assert error_of(root.put_resource_policy, ResourceArn=arn(table), Policy=no_principal)[0] == "ValidationException"
    padded = good[:-1] + " " * (20 * 1024 - len(good) + 1) + "}"  # (white space counts: one byte over)
    assert error_of(root.put_resource_policy, ResourceArn=arn(table), Policy=padded)[0] == "ValidationException"
    assert root.put_resource_policy(ResourceArn=arn(table), Policy=padded[:-2] + "}")["RevisionId"]  # (20 KB)


def test_the_table_description_is_unaffected_and_a_deleted_table_takes_its_policy(root):
    table = new_table(root)
    before = root.describe_table(TableName=table)["Table"]
    root.put_resource_policy(ResourceArn=arn(table), Policy=resource_policy("Allow", "*", "dynamodb:*", arn(table)))
    assert root.describe_table(TableName=table)["Table"].keys() == before.keys()
    root.delete_table(TableName=table)
    root.get_waiter("table_not_exists").wait(TableName=table, WaiterConfig={"Delay": 0.2})
    create_table(root, table)
    assert error_of(root.get_resource_policy, ResourceArn=arn(table))[0] == "PolicyNotFoundException"


def test_a_resource_policy_grants_and_denies_with_identity_policies(identity_server, iam, root):
    table = new_table(root)
    name, key = user_with_key(iam)
    user = f"arn:aws:iam::{ACCOUNT}:user/{name}"
    ddb = with_credentials(identity_server, "dynamodb", key)
    item_key = {"pk": {"S": "a"}, "sk": {"S": "1"}}
    assert error_of(ddb.get_item, TableName=table, Key=item_key)[0] == DENIED
    root.put_resource_policy(ResourceArn=arn(table), Policy=resource_policy(
        "Allow", {"AWS": user}, ["dynamodb:GetItem", "dynamodb:Query"], [arn(table), f"{arn(table)}/index/*"]))
    assert ddb.get_item(TableName=table, Key=item_key)["Item"]  # (granted by the table's policy alone)
    assert error_of(ddb.put_item, TableName=table, Item=item_key) == (
        DENIED, f"User: {user} is not authorized to perform: dynamodb:PutItem on resource: {arn(table)} because no "
                f"identity-based policy allows the dynamodb:PutItem action", 400)

    iam.put_user_policy(UserName=name, PolicyName="all", PolicyDocument=json.dumps(allow("dynamodb:*")))
    root.put_resource_policy(ResourceArn=arn(table), Policy=resource_policy(
        "Deny", {"AWS": user}, "dynamodb:GetItem", arn(table)))
    assert error_of(ddb.get_item, TableName=table, Key=item_key) == (
        DENIED, f"User: {user} is not authorized to perform: dynamodb:GetItem on resource: {arn(table)} with an "
                f"explicit deny in a resource-based policy", 400)
    ddb.put_item(TableName=table, Item={**item_key, "v": {"S": "x"}})  # (identity policy, nothing denies it)
    account_wide = resource_policy("Deny", {"AWS": ACCOUNT}, "dynamodb:PutItem", arn(table))
    root.put_resource_policy(ResourceArn=arn(table), Policy=account_wide)
    assert error_of(ddb.put_item, TableName=table, Item=item_key)[0] == DENIED
    assert root.get_item(TableName=table, Key=item_key)["Item"]["v"] == {"S": "x"}  # (the root is not held to it)


def test_stream_policies(identity_server, iam, root):
    table = unique_name("z-rbac")
    root.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                      AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                      KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                      StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"})
    stream = root.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    name, key = user_with_key(iam)
    streams = with_credentials(identity_server, "dynamodbstreams", key)
    assert error_of(streams.describe_stream, StreamArn=stream)[0] == DENIED
    root.put_resource_policy(ResourceArn=stream, Policy=resource_policy(
        "Allow", {"AWS": f"arn:aws:iam::{ACCOUNT}:user/{name}"}, "dynamodb:DescribeStream", stream))
    assert root.get_resource_policy(ResourceArn=stream)["RevisionId"]
    assert streams.describe_stream(StreamArn=stream)["StreamDescription"]["StreamArn"] == stream
    assert error_of(root.get_resource_policy, ResourceArn=stream[:-3] + "xyz")[0] == "ResourceNotFoundException"


def test_create_table_with_a_policy_and_confirming_the_loss_of_ones_own_access(identity_server, iam, root):
    table = unique_name("z-rbac")
    document = resource_policy("Allow", "*", "dynamodb:GetItem", arn(table))
    name, key = user_with_key(iam, allow("dynamodb:CreateTable", "dynamodb:PutResourcePolicy",
                                         "dynamodb:GetResourcePolicy"))
    ddb = with_credentials(identity_server, "dynamodb", key)
    create_table(ddb, table)  # (without a ResourcePolicy, CreateTable alone is needed)
    second = unique_name("z-rbac")
    iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=json.dumps(allow("dynamodb:CreateTable")))
    definitions = {"AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                   "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}], "BillingMode": "PAY_PER_REQUEST"}
    assert error_of(ddb.create_table, TableName=second, ResourcePolicy=document.replace(table, second),
                    **definitions)[0] == DENIED
    assert error_of(root.describe_table, TableName=second)[0] == "ResourceNotFoundException"  # (nothing made)
    root.create_table(TableName=second, ResourcePolicy=document.replace(table, second), **definitions)
    assert root.get_resource_policy(ResourceArn=arn(second))["Policy"] == document.replace(table, second)

    iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=json.dumps(
        allow("dynamodb:PutResourcePolicy", "dynamodb:GetResourcePolicy")))
    locking = resource_policy("Deny", {"AWS": f"arn:aws:iam::{ACCOUNT}:user/{name}"}, "dynamodb:PutResourcePolicy",
                              arn(table))
    assert error_of(ddb.put_resource_policy, ResourceArn=arn(table), Policy=locking)[0] == "ValidationException"
    ddb.put_resource_policy(ResourceArn=arn(table), Policy=locking, ConfirmRemoveSelfResourceAccess=True)
    assert error_of(ddb.put_resource_policy, ResourceArn=arn(table), Policy=document)[0] == DENIED


def test_resource_policies_are_kept_without_verification(ddb):
    table = create_table(ddb, unique_name("z-rbac"))
    document = resource_policy("Allow", "*", "dynamodb:GetItem", f"arn:aws:dynamodb:us-east-1:*:table/{table}")
    table_arn = ddb.describe_table(TableName=table)["Table"]["TableArn"]
    revision = ddb.put_resource_policy(ResourceArn=table_arn, Policy=document)["RevisionId"]
    assert ddb.get_resource_policy(ResourceArn=table_arn)["RevisionId"] == revision
    assert ddb.delete_resource_policy(ResourceArn=table_arn)["RevisionId"] == revision
