"""Fine-grained access control as the Developer Guide describes it ("Using IAM policy conditions for fine-grained
access control"): a user limited to the items whose partition key is its own name (dynamodb:LeadingKeys with
${aws:username}, or an assumed role's ${aws:userid}) and to some attributes (dynamodb:Attributes with
dynamodb:Select and dynamodb:ReturnValues) gets exactly those, and AccessDeniedException otherwise, on every read
and write operation, batches and transactions included; dynamodb:ReturnConsumedCapacity, aws:SourceIp,
aws:SecureTransport and Null conditions too. Each condition kind allowed and denied, through boto3."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.identity_helpers import ACCOUNT, client, error_of, trust, user_with_key, with_credentials
from tests.conftest import ServerProcess, unique_name

DENIED = "AccessDeniedException"


def arn(table: str) -> str:
    return f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/{table}"


def document(actions: list[str], table: str, condition: dict[str, Any], effect: str = "Allow",
             *more: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": effect, "Action": actions, "Resource": [arn(table), f"{arn(table)}/index/*"],
         "Condition": condition}, *more]})


def item(pk: str, sk: str = "1", **attributes: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}, **{name: {"S": value} for name, value in attributes.items()}}


@pytest.fixture(scope="module")
def table(identity_server: ServerProcess) -> str:
    name = unique_name("z-fgac")
    client(identity_server, "dynamodb").create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                              {"AttributeName": "sk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}])
    return name


def user(server: ServerProcess, iam: Any, policy: str) -> tuple[str, Any]:
    """(a new user's name, its DynamoDB client), the user's one policy `policy`."""
    name, key = user_with_key(iam)
    iam.put_user_policy(UserName=name, PolicyName="fgac", PolicyDocument=policy)
    return name, with_credentials(server, "dynamodb", key)


ITEM_ACTIONS = ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem",
                "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:ConditionCheckItem"]
OWN_ITEMS = {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["${aws:username}"]}}


def test_leading_keys_limit_a_user_to_its_own_partition(identity_server, iam, table):
    name, ddb = user(identity_server, iam, document(ITEM_ACTIONS, table, OWN_ITEMS))
    root = client(identity_server, "dynamodb")
    root.put_item(TableName=table, Item=item("someone-else", secret="x"))
    ddb.put_item(TableName=table, Item=item(name, title="mine"))
    assert ddb.get_item(TableName=table, Key=item(name))["Item"]["title"] == {"S": "mine"}
    ddb.update_item(TableName=table, Key=item(name), UpdateExpression="SET score = :s",
                    ExpressionAttributeValues={":s": {"S": "9"}})
    own = ddb.query(TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": name}})
    assert own["Count"] == 1
    assert ddb.batch_get_item(RequestItems={table: {"Keys": [item(name)]}})["Responses"][table]

    other = item("someone-else")
    message = (f"User: arn:aws:iam::{ACCOUNT}:user/{name} is not authorized to perform: dynamodb:GetItem on "
               f"resource: {arn(table)} because no identity-based policy allows the dynamodb:GetItem action")
    assert error_of(ddb.get_item, TableName=table, Key=other) == (DENIED, message, 400)
    assert error_of(ddb.put_item, TableName=table, Item=item("someone-else", "2"))[0] == DENIED
    assert error_of(ddb.delete_item, TableName=table, Key=other)[0] == DENIED
    assert error_of(ddb.update_item, TableName=table, Key=other, UpdateExpression="SET secret = :s",
                    ExpressionAttributeValues={":s": {"S": "y"}})[0] == DENIED
    assert error_of(ddb.query, TableName=table, KeyConditionExpression="pk = :p",
                    ExpressionAttributeValues={":p": {"S": "someone-else"}})[0] == DENIED
    assert error_of(ddb.batch_get_item, RequestItems={table: {"Keys": [item(name), other]}})[0] == DENIED
    mixed = [{"PutRequest": {"Item": item(name, "3")}}, {"PutRequest": {"Item": item("someone-else", "3")}}]
    assert error_of(ddb.batch_write_item, RequestItems={table: mixed})[0] == DENIED
    assert "Item" not in ddb.get_item(TableName=table, Key=item(name, "3"))  # (the refused batch wrote nothing)
    check = {"ConditionCheck": {"TableName": table, "Key": other, "ConditionExpression": "attribute_exists(pk)"}}
    assert error_of(ddb.transact_write_items, TransactItems=[{"Put": {"TableName": table, "Item": item(name, "4")}},
                                                             check])[0] == DENIED
    assert root.get_item(TableName=table, Key=other)["Item"]["secret"] == {"S": "x"}  # (untouched)
    ddb.delete_item(TableName=table, Key=item(name))


def test_an_assumed_role_session_is_limited_by_its_user_id(identity_server, iam, table):
    name, key = user_with_key(iam)
    role = iam.create_role(RoleName=unique_name("r"), AssumeRolePolicyDocument=trust(
        f"arn:aws:iam::{ACCOUNT}:user/{name}"))["Role"]
    condition = {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["${aws:userid}"]}}
    iam.put_role_policy(RoleName=role["RoleName"], PolicyName="own", PolicyDocument=document(ITEM_ACTIONS, table,
                                                                                              condition))
    answer = with_credentials(identity_server, "sts", key).assume_role(RoleArn=role["Arn"], RoleSessionName="app")
    ddb = with_credentials(identity_server, "dynamodb", answer["Credentials"])
    own = answer["AssumedRoleUser"]["AssumedRoleId"]  # (role id:session name)
    ddb.put_item(TableName=table, Item=item(own))
    assert ddb.get_item(TableName=table, Key=item(own))["Item"]
    assert error_of(ddb.get_item, TableName=table, Key=item(name))[0] == DENIED


ATTRIBUTES = {"ForAllValues:StringEquals": {"dynamodb:Attributes": ["pk", "sk", "title", "score"]},
              "StringEqualsIfExists": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES",
                                       "dynamodb:ReturnValues": ["NONE", "UPDATED_OLD", "UPDATED_NEW"]}}


def test_attributes_select_and_return_values_limit_what_is_read_and_written(identity_server, iam, table):
    _, ddb = user(identity_server, iam, document(ITEM_ACTIONS, table, ATTRIBUTES))
    pk = unique_name("attrs")
    client(identity_server, "dynamodb").put_item(TableName=table, Item=item(pk, title="t", secret="s"))
    got = ddb.get_item(TableName=table, Key=item(pk), ProjectionExpression="pk, title")["Item"]
    assert got == {"pk": {"S": pk}, "title": {"S": "t"}}
    assert ddb.get_item(TableName=table, Key=item(pk), AttributesToGet=["title"])["Item"] == {"title": {"S": "t"}}
    assert error_of(ddb.get_item, TableName=table, Key=item(pk))[0] == DENIED  # (every attribute: ALL_ATTRIBUTES)
    assert error_of(ddb.get_item, TableName=table, Key=item(pk), ProjectionExpression="title, secret")[0] == DENIED
    query = {"TableName": table, "KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": pk}}}
    assert ddb.query(**query, ProjectionExpression="title")["Items"] == [{"title": {"S": "t"}}]
    assert ddb.query(**query, Select="SPECIFIC_ATTRIBUTES", ProjectionExpression="sk")["Count"] == 1
    assert error_of(ddb.query, **query)[0] == DENIED
    assert error_of(ddb.query, **query, Select="COUNT")[0] == DENIED
    assert error_of(ddb.query, **query, ProjectionExpression="title", FilterExpression="secret = :p")[0] == DENIED

    ddb.put_item(TableName=table, Item=item(pk, "2", title="new"))
    assert error_of(ddb.put_item, TableName=table, Item=item(pk, "3", secret="no"))[0] == DENIED
    set_score = {"TableName": table, "Key": item(pk), "UpdateExpression": "SET score = :v",
                 "ExpressionAttributeValues": {":v": {"S": "1"}}}
    assert ddb.update_item(**set_score, ReturnValues="UPDATED_NEW")["Attributes"] == {"score": {"S": "1"}}
    assert error_of(ddb.update_item, **set_score, ReturnValues="ALL_NEW")[0] == DENIED
    assert error_of(ddb.update_item, TableName=table, Key=item(pk), UpdateExpression="REMOVE secret")[0] == DENIED
    assert error_of(ddb.update_item, **set_score, ConditionExpression="attribute_exists(secret)")[0] == DENIED
    assert "Item" not in client(identity_server, "dynamodb").get_item(TableName=table, Key=item(pk, "3"))


def test_return_consumed_capacity_and_null_conditions(identity_server, iam, table):
    no_indexes = {"StringNotEqualsIfExists": {"dynamodb:ReturnConsumedCapacity": "INDEXES"}}
    _, ddb = user(identity_server, iam, document(["dynamodb:GetItem"], table, no_indexes))
    assert "ConsumedCapacity" not in ddb.get_item(TableName=table, Key=item("n"))
    assert ddb.get_item(TableName=table, Key=item("n"), ReturnConsumedCapacity="TOTAL")["ConsumedCapacity"]
    assert error_of(ddb.get_item, TableName=table, Key=item("n"), ReturnConsumedCapacity="INDEXES")[0] == DENIED

    projected_only = {"Null": {"dynamodb:Attributes": "false"}}
    _, projecting = user(identity_server, iam, document(["dynamodb:GetItem"], table, projected_only))
    assert projecting.get_item(TableName=table, Key=item("n"), ProjectionExpression="title") is not None
    assert error_of(projecting.get_item, TableName=table, Key=item("n"))[0] == DENIED


def test_source_ip_and_secure_transport_conditions(identity_server, iam, table):
    from_here = {"IpAddress": {"aws:SourceIp": "127.0.0.0/8"}}
    _, local = user(identity_server, iam, document(["dynamodb:GetItem"], table, from_here))
    assert local.get_item(TableName=table, Key=item("n")) is not None
    elsewhere = {"IpAddress": {"aws:SourceIp": "203.0.113.0/24"}}
    _, remote = user(identity_server, iam, document(["dynamodb:GetItem"], table, elsewhere))
    assert error_of(remote.get_item, TableName=table, Key=item("n"))[0] == DENIED
    plain_http = {"Bool": {"aws:SecureTransport": "false"}}
    name, refused = user(identity_server, iam, document(
        ["dynamodb:GetItem"], table, plain_http, "Deny",
        {"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": "*"}))
    assert error_of(refused.get_item, TableName=table, Key=item("n")) == (
        DENIED, f"User: arn:aws:iam::{ACCOUNT}:user/{name} is not authorized to perform: dynamodb:GetItem on "
                f"resource: {arn(table)} with an explicit deny in an identity-based policy", 400)
