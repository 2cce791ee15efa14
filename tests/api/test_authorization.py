"""Authorization under `--auth verify`: every DynamoDB and Streams call of a user or an assumed role is allowed only
as its identity policies allow (explicit Deny, then Allow, then the default deny), with AWS's AccessDenied words;
table, index and stream ARNs with wildcards; batches and transactions checked on every table they touch; PartiQL
under its own actions. Users and roles are made through IAM on the same port, calls made with boto3."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.identity_helpers import ACCOUNT, allow, client, error_of, trust, user_with_key, with_credentials
from tests.conftest import ServerProcess, unique_name

REGION = "us-east-1"


def arn(table: str) -> str:
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}"


def statement(effect: str, actions: Any, resources: Any, **extra: Any) -> dict[str, Any]:
    return {"Effect": effect, "Action": actions, "Resource": resources, **extra}


def policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def user_key(iam: Any, document: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """(the ARN of a new user whose only policy is `document`, an access key of it)."""
    name, access_key = user_with_key(iam, document)
    return f"arn:aws:iam::{ACCOUNT}:user/{name}", access_key


def user_client(server: ServerProcess, iam: Any, document: dict[str, Any]) -> tuple[str, Any]:
    """(the user's ARN, a DynamoDB client signed with a new user's key whose only policy is `document`)."""
    user, access_key = user_key(iam, document)
    return user, with_credentials(server, "dynamodb", access_key)


def denied(user: str, action: str, resource: str, explicit: bool = False) -> tuple[str, str, int]:
    reason = ("with an explicit deny in an identity-based policy" if explicit
              else f"because no identity-based policy allows the {action} action")
    return ("AccessDeniedException",
            f"User: {user} is not authorized to perform: {action} on resource: {resource} {reason}", 400)


@pytest.fixture(scope="module")
def root(identity_server: ServerProcess) -> Any:
    return client(identity_server, "dynamodb")


@pytest.fixture(scope="module")
def tables(root: Any) -> tuple[str, str]:
    """Two tables (pk, sk), an index ByTitle on the first and a stream on it, one item in each."""
    first, second = unique_name("z-authz"), unique_name("z-authz")
    definitions = [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"},
                   {"AttributeName": "title", "AttributeType": "S"}]
    schema = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
    root.create_table(TableName=first, AttributeDefinitions=definitions, KeySchema=schema,
                      BillingMode="PAY_PER_REQUEST",
                      GlobalSecondaryIndexes=[{"IndexName": "ByTitle", "Projection": {"ProjectionType": "ALL"},
                                               "KeySchema": [{"AttributeName": "title", "KeyType": "HASH"}]}],
                      StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"})
    root.create_table(TableName=second, AttributeDefinitions=definitions[:2], KeySchema=schema,
                      BillingMode="PAY_PER_REQUEST")
    for table in (first, second):
        root.put_item(TableName=table, Item={"pk": {"S": "a"}, "sk": {"S": "1"}, "title": {"S": "t"}})
    return first, second


def key(pk: str = "a", sk: str = "1") -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def test_an_allowed_action_on_one_table_and_nothing_else(identity_server, iam, tables):
    first, second = tables
    user, ddb = user_client(identity_server, iam, policy(statement("Allow", "dynamodb:GetItem", arn(first))))
    assert ddb.get_item(TableName=first, Key=key())["Item"]["title"] == {"S": "t"}
    assert error_of(ddb.get_item, TableName=second, Key=key()) == denied(user, "dynamodb:GetItem", arn(second))
    assert error_of(ddb.put_item, TableName=first, Item=key("b")) == denied(user, "dynamodb:PutItem", arn(first))
    assert error_of(ddb.describe_table, TableName=first) == denied(user, "dynamodb:DescribeTable", arn(first))
    assert error_of(ddb.list_tables) == denied(user, "dynamodb:ListTables", "*")
    assert error_of(ddb.delete_table, TableName=first) == denied(user, "dynamodb:DeleteTable", arn(first))


def test_a_user_without_policies_may_do_nothing_and_the_root_everything(identity_server, iam, root, tables):
    user, ddb = user_client(identity_server, iam, policy(statement("Allow", "sts:GetCallerIdentity", "*")))
    assert error_of(ddb.get_item, TableName=tables[0], Key=key()) == denied(user, "dynamodb:GetItem",
                                                                               arn(tables[0]))
    assert root.get_item(TableName=tables[0], Key=key())["Item"]


def test_an_explicit_deny_wins(identity_server, iam, tables):
    first, _ = tables
    document = policy(statement("Allow", "dynamodb:*", "*"), statement("Deny", "dynamodb:DeleteItem", arn(first)))
    user, ddb = user_client(identity_server, iam, document)
    ddb.put_item(TableName=first, Item=key("deny-me"))
    assert error_of(ddb.delete_item, TableName=first, Key=key("deny-me")) == denied(
        user, "dynamodb:DeleteItem", arn(first), explicit=True)
    assert ddb.get_item(TableName=first, Key=key("deny-me"))["Item"]  # (the refused delete changed nothing)


def test_action_and_resource_wildcards_and_their_negations(identity_server, iam, tables):
    first, second = tables
    prefix = first[:-4]
    _, readers = user_client(identity_server, iam, policy(statement("Allow", "dynamodb:Get*", f"{arn(prefix)}*")))
    assert readers.get_item(TableName=first, Key=key())["Item"]
    user, others = user_client(identity_server, iam, policy(
        {"Effect": "Allow", "NotAction": ["dynamodb:Delete*", "dynamodb:Put*"], "NotResource": arn(second)}))
    assert others.get_item(TableName=first, Key=key())["Item"]
    assert error_of(others.get_item, TableName=second, Key=key()) == denied(user, "dynamodb:GetItem", arn(second))
    assert error_of(others.put_item, TableName=first, Item=key("x")) == denied(user, "dynamodb:PutItem", arn(first))


def test_index_and_stream_resources(identity_server, iam, root, tables):
    first, _ = tables
    index_arn = f"{arn(first)}/index/ByTitle"
    user, ddb = user_client(identity_server, iam, policy(statement("Allow", ["dynamodb:Query", "dynamodb:Scan"],
                                                                   arn(first))))
    query = {"TableName": first, "IndexName": "ByTitle", "KeyConditionExpression": "title = :t",
             "ExpressionAttributeValues": {":t": {"S": "t"}}}
    assert error_of(ddb.query, **query) == denied(user, "dynamodb:Query", index_arn)
    assert error_of(ddb.scan, TableName=first, IndexName="ByTitle") == denied(user, "dynamodb:Scan", index_arn)
    assert ddb.query(TableName=first, KeyConditionExpression="pk = :p",
                     ExpressionAttributeValues={":p": {"S": "a"}})["Count"] == 1
    _, indexed = user_client(identity_server, iam, policy(statement("Allow", "dynamodb:Query",
                                                                    f"{arn(first)}/index/*")))
    assert indexed.query(**query)["Count"] == 1

    stream = root.describe_table(TableName=first)["Table"]["LatestStreamArn"]
    streams_user, streams_key = user_key(iam, policy(statement(
        "Allow", ["dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"],
        f"{arn(first)}/stream/*")))
    reader = with_credentials(identity_server, "dynamodbstreams", streams_key)
    shard = reader.describe_stream(StreamArn=stream)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = reader.get_shard_iterator(StreamArn=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    assert "Records" in reader.get_records(ShardIterator=iterator["ShardIterator"])
    assert error_of(reader.list_streams) == denied(streams_user, "dynamodb:ListStreams", "*")


def test_batches_and_transactions_check_every_table_they_touch(identity_server, iam, tables):
    first, second = tables
    user, ddb = user_client(identity_server, iam, policy(statement(
        "Allow", ["dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:GetItem", "dynamodb:PutItem"],
        arn(first))))
    assert ddb.batch_get_item(RequestItems={first: {"Keys": [key()]}})["Responses"][first]
    assert error_of(ddb.batch_get_item, RequestItems={first: {"Keys": [key()]}, second: {"Keys": [key()]}}) == \
        denied(user, "dynamodb:BatchGetItem", arn(second))
    both = {first: [{"PutRequest": {"Item": key("batch")}}], second: [{"PutRequest": {"Item": key("batch")}}]}
    assert error_of(ddb.batch_write_item, RequestItems=both) == denied(user, "dynamodb:BatchWriteItem", arn(second))
    assert "Item" not in ddb.get_item(TableName=first, Key=key("batch"))  # (nothing of the refused batch written)
    ddb.batch_write_item(RequestItems={first: both[first]})
    assert ddb.get_item(TableName=first, Key=key("batch"))["Item"]

    assert ddb.transact_get_items(TransactItems=[{"Get": {"TableName": first, "Key": key()}}])["Responses"][0]
    assert error_of(ddb.transact_get_items, TransactItems=[{"Get": {"TableName": second, "Key": key()}}]) == \
        denied(user, "dynamodb:GetItem", arn(second))
    ddb.transact_write_items(TransactItems=[{"Put": {"TableName": first, "Item": key("tx")}}])
    check = {"ConditionCheck": {"TableName": first, "Key": key(), "ConditionExpression": "attribute_exists(pk)"}}
    assert error_of(ddb.transact_write_items, TransactItems=[{"Put": {"TableName": first, "Item": key("tx2")}},
                                                             check]) == \
        denied(user, "dynamodb:ConditionCheckItem", arn(first))
    assert error_of(ddb.transact_write_items, TransactItems=[{"Delete": {"TableName": first, "Key": key("tx")}}]) == \
        denied(user, "dynamodb:DeleteItem", arn(first))
    assert "Item" not in ddb.get_item(TableName=first, Key=key("tx2"))


def test_partiql_needs_its_own_actions(identity_server, iam, tables):
    first, _ = tables
    user, ddb = user_client(identity_server, iam, policy(statement("Allow", ["dynamodb:PartiQLSelect",
                                                                             "dynamodb:GetItem"], arn(first))))
    one = f'SELECT * FROM "{first}" WHERE pk = ? AND sk = ?'
    assert ddb.execute_statement(Statement=one, Parameters=[{"S": "a"}, {"S": "1"}])["Items"]
    assert ddb.execute_statement(Statement=f'SELECT * FROM "{first}" WHERE pk = ?', Parameters=[{"S": "a"}])["Items"]
    assert error_of(ddb.execute_statement, Statement=f"INSERT INTO \"{first}\" VALUE {{'pk': 'q', 'sk': '1'}}") == \
        denied(user, "dynamodb:PartiQLInsert", arn(first))
    assert error_of(ddb.execute_transaction, TransactStatements=[
        {"Statement": f"DELETE FROM \"{first}\" WHERE pk = 'a' AND sk = '1'"}]) == \
        denied(user, "dynamodb:PartiQLDelete", arn(first))
    answer = ddb.batch_execute_statement(Statements=[{"Statement": one, "Parameters": [{"S": "a"}, {"S": "1"}]}])
    assert answer["Responses"][0]["Item"]["pk"] == {"S": "a"}


def test_an_assumed_role_is_held_to_the_roles_policies(identity_server, iam, tables):
    first, second = tables
    name, key_of_user = user_with_key(iam)
    role = iam.create_role(RoleName=unique_name("r"), AssumeRolePolicyDocument=trust(
        f"arn:aws:iam::{ACCOUNT}:user/{name}"))["Role"]
    iam.put_role_policy(RoleName=role["RoleName"], PolicyName="read", PolicyDocument=json.dumps(
        policy(statement("Allow", "dynamodb:GetItem", arn(first)))))
    credentials = with_credentials(identity_server, "sts", key_of_user).assume_role(
        RoleArn=role["Arn"], RoleSessionName="reader")["Credentials"]
    ddb = with_credentials(identity_server, "dynamodb", credentials)
    session = f"arn:aws:sts::{ACCOUNT}:assumed-role/{role['RoleName']}/reader"
    assert ddb.get_item(TableName=first, Key=key())["Item"]
    assert error_of(ddb.get_item, TableName=second, Key=key()) == denied(session, "dynamodb:GetItem", arn(second))


def test_a_changed_policy_applies_at_once(identity_server, iam, tables):
    first, _ = tables
    name, access_key = user_with_key(iam, allow("dynamodb:GetItem"))
    ddb = with_credentials(identity_server, "dynamodb", access_key)
    assert ddb.get_item(TableName=first, Key=key())["Item"]
    iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=json.dumps(allow("dynamodb:PutItem")))
    assert error_of(ddb.get_item, TableName=first, Key=key())[0] == "AccessDeniedException"
