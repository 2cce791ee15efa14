"""Accounts and regions as namespaces (issue 25, part 3; docs/ACCOUNTS-AND-REGIONS.md): with `--auth verify` a
table, its stream, indexes and backups belong to the account of the key that made it and to the region of the
request's credential scope, as on DynamoDB; another account's table is reached only by its ARN and only as its
resource-based policy allows; `--shared` (and `--auth off`, by default) keeps one namespace. Real servers, boto3
clients signed with two accounts' root keys and their IAM users' keys, in several regions."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.api.identity_helpers import error_of
from tests.api.test_backups import wait_available
from tests.api.test_cloudwatch import _eventually
from tests.conftest import ServerProcess, create_table, unique_name

FIRST, SECOND = "111111111111", "222222222222"
KEYS = {FIRST: ("AKIDACCOUNTONE", "secret-one"), SECOND: ("AKIDACCOUNTTWO", "secret-two")}
ROOTS = [option for account, (key, secret) in KEYS.items()
         for option in ("--root-credentials", f"{key}:{secret}@{account}")]
DENIED = "AccessDeniedException"
NOT_FOUND = "ResourceNotFoundException"


def signed(server: ServerProcess, service: str, account: str, region: str = "us-east-1",
           keys: tuple[str, str] | None = None) -> Any:
    key, secret = keys or KEYS[account]
    return boto3.client(service, endpoint_url=server.endpoint, region_name=region, aws_access_key_id=key,
                        aws_secret_access_key=secret, config=Config(retries={"max_attempts": 1}))


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    process = ServerProcess(None, "--workers", "1", "--auth", "verify", *ROOTS)
    try:
        yield process
    finally:
        process.finish()


def table_arn(account: str, region: str, name: str) -> str:
    return f"arn:aws:dynamodb:{region}:{account}:table/{name}"


def listed(ddb: Any, name: str) -> bool:
    """Whether ListTables names the table (every page: the store may be shared with other tests)."""
    return any(name in page["TableNames"] for page in ddb.get_paginator("list_tables").paginate())


def test_a_table_is_in_the_region_it_was_made_in(server):
    """A table made in eu-west-1 is listed, described and read there, not from us-east-1 (nor made twice there
    by mistake: us-east-1 may make its own of the name)."""
    west, east = signed(server, "dynamodb", FIRST, "eu-west-1"), signed(server, "dynamodb", FIRST, "us-east-1")
    name = create_table(west, unique_name("ns-region"))
    west.put_item(TableName=name, Item={"pk": {"S": "a"}, "sk": {"S": "1"}})
    assert west.describe_table(TableName=name)["Table"]["TableArn"] == table_arn(FIRST, "eu-west-1", name)
    assert listed(west, name) and not listed(east, name)
    assert error_of(east.describe_table, TableName=name)[:2] == (
        NOT_FOUND, f"Requested resource not found: Table: {name} not found")
    assert error_of(east.get_item, TableName=name, Key={"pk": {"S": "a"}, "sk": {"S": "1"}})[0] == NOT_FOUND
    create_table(east, name)  # (a table of that name in us-east-1 is another table)
    assert "Item" not in east.get_item(TableName=name, Key={"pk": {"S": "a"}, "sk": {"S": "1"}})
    assert "Item" in west.get_item(TableName=name, Key={"pk": {"S": "a"}, "sk": {"S": "1"}})
    # Another region's ARN is refused as DynamoDB refuses it (not looked for elsewhere).
    assert error_of(east.get_item, TableName=table_arn(FIRST, "eu-west-1", name),
                    Key={"pk": {"S": "a"}, "sk": {"S": "1"}})[:2] == (
        "ValidationException", f"1 validation error detected: Invalid AWS region in "
                               f"'{table_arn(FIRST, 'eu-west-1', name)}'")


def test_two_accounts_each_have_a_table_of_one_name_with_their_own_arns(server):
    """Each account's table, items, stream, index and ARNs are its own."""
    name = unique_name("ns-accounts")
    ddbs = {account: signed(server, "dynamodb", account) for account in (FIRST, SECOND)}
    for account, ddb in ddbs.items():
        ddb.create_table(
            TableName=name, BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                  {"AttributeName": "g", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            GlobalSecondaryIndexes=[{"IndexName": "by-g", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                     "Projection": {"ProjectionType": "ALL"}}],
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"})
        ddb.put_item(TableName=name, Item={"pk": {"S": "k"}, "g": {"S": "g"}, "owner": {"S": account}})
    for account, ddb in ddbs.items():
        table = ddb.describe_table(TableName=name)["Table"]
        arn = table_arn(account, "us-east-1", name)
        assert table["TableArn"] == arn
        assert table["LatestStreamArn"].startswith(f"{arn}/stream/")
        assert table["GlobalSecondaryIndexes"][0]["IndexArn"] == f"{arn}/index/by-g"
        assert ddb.get_item(TableName=name, Key={"pk": {"S": "k"}})["Item"]["owner"] == {"S": account}
        assert ddb.query(TableName=name, IndexName="by-g", KeyConditionExpression="g = :g",
                         ExpressionAttributeValues={":g": {"S": "g"}})["Items"][0]["owner"] == {"S": account}
        streams = signed(server, "dynamodbstreams", account)
        found = streams.list_streams(TableName=name)["Streams"]
        assert [stream["StreamArn"] for stream in found] == [table["LatestStreamArn"]]
        assert all(stream["StreamArn"].split(":")[4] == account
                   for stream in streams.list_streams()["Streams"])
        description = streams.describe_stream(StreamArn=table["LatestStreamArn"])["StreamDescription"]
        assert description["TableName"] == name and description["StreamArn"] == table["LatestStreamArn"]


def test_another_accounts_table_needs_its_resource_policy(server):
    """By ARN, another account's table is AccessDeniedException (whether or not it exists) until its resource
    policy lets the caller's account in; then the root of that account may do what the policy allows, and its
    users what both the policy and their own identity policies allow."""
    owner, guest = signed(server, "dynamodb", FIRST), signed(server, "dynamodb", SECOND)
    name = create_table(owner, unique_name("ns-cross"))
    owner.put_item(TableName=name, Item={"pk": {"S": "a"}, "sk": {"S": "1"}})
    arn, key = table_arn(FIRST, "us-east-1", name), {"pk": {"S": "a"}, "sk": {"S": "1"}}
    guest_root = f"arn:aws:iam::{SECOND}:root"
    missing = table_arn(FIRST, "us-east-1", unique_name("ns-none"))
    for target in (arn, missing):
        assert error_of(guest.get_item, TableName=target, Key=key) == (
            DENIED, f"User: {guest_root} is not authorized to perform: dynamodb:GetItem on resource: {target} "
                    f"because no resource-based policy allows the dynamodb:GetItem action", 400)
    assert error_of(guest.describe_table, TableName=arn)[0] == DENIED
    assert error_of(guest.get_item, TableName=name, Key=key)[0] == NOT_FOUND  # (by name: its own namespace)
    policy = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": SECOND}, "Action": ["dynamodb:GetItem", "dynamodb:DescribeTable"],
        "Resource": arn}]}
    owner.put_resource_policy(ResourceArn=arn, Policy=json.dumps(policy))
    assert guest.get_item(TableName=arn, Key=key)["Item"]["pk"] == {"S": "a"}
    assert guest.describe_table(TableName=arn)["Table"]["TableArn"] == arn
    assert error_of(guest.put_item, TableName=arn, Item=key)[0] == DENIED
    assert owner.get_item(TableName=name, Key=key)["Item"] == key  # (nothing written)
    iam = signed(server, "iam", SECOND)
    user = unique_name("ns-user")
    iam.create_user(UserName=user)
    access = iam.create_access_key(UserName=user)["AccessKey"]
    as_user = signed(server, "dynamodb", SECOND, keys=(access["AccessKeyId"], access["SecretAccessKey"]))
    assert error_of(as_user.get_item, TableName=arn, Key=key)[:2] == (
        DENIED, f"User: arn:aws:iam::{SECOND}:user/{user} is not authorized to perform: dynamodb:GetItem on "
                f"resource: {arn} because no resource-based policy allows the dynamodb:GetItem action")
    iam.put_user_policy(UserName=user, PolicyName="read", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": "*"}]}))
    assert as_user.get_item(TableName=arn, Key=key)["Item"]["pk"] == {"S": "a"}


def test_iam_users_and_backups_are_their_accounts(server):
    """Each account's root makes its own users (one name may be in both accounts), lists only its own, and a
    user's key calls as its account; backups are listed and found only in their table's account and region."""
    name = unique_name("ns-same")
    keys = {}
    for account in (FIRST, SECOND):
        iam = signed(server, "iam", account)
        made = iam.create_user(UserName=name)["User"]
        assert made["Arn"] == f"arn:aws:iam::{account}:user/{name}"
        assert [user["Arn"] for user in iam.list_users()["Users"] if user["UserName"] == name] == [made["Arn"]]
        access = iam.create_access_key(UserName=name)["AccessKey"]
        keys[account] = (access["AccessKeyId"], access["SecretAccessKey"])
    for account, pair in keys.items():
        identity = signed(server, "sts", account, keys=pair).get_caller_identity()
        assert (identity["Account"], identity["Arn"]) == (account, f"arn:aws:iam::{account}:user/{name}")
    owner, guest = signed(server, "dynamodb", FIRST), signed(server, "dynamodb", SECOND)
    table = create_table(owner, unique_name("ns-backup"))
    backup = owner.create_backup(TableName=table, BackupName="first")["BackupDetails"]["BackupArn"]
    wait_available(owner, backup)  # (made in the background: restorable once AVAILABLE)
    assert backup.startswith(table_arn(FIRST, "us-east-1", table) + "/backup/")
    assert backup in [summary["BackupArn"] for summary in owner.list_backups(TableName=table)["BackupSummaries"]]
    assert all(summary["TableArn"].split(":")[4] == SECOND for summary in guest.list_backups()["BackupSummaries"])
    assert error_of(guest.describe_backup, BackupArn=backup)[0] == DENIED
    west = signed(server, "dynamodb", FIRST, "eu-west-1")
    assert error_of(west.describe_backup, BackupArn=backup)[0] == "BackupNotFoundException"
    restored = unique_name("ns-restored")
    answer = owner.restore_table_from_backup(TargetTableName=restored, BackupArn=backup)["TableDescription"]
    assert answer["TableArn"] == table_arn(FIRST, "us-east-1", restored)


def test_shared_keeps_one_namespace():
    """--shared: every account and region sees the tables every other made (DynamoDB Local's -sharedDb)."""
    process = ServerProcess(None, "--workers", "1", "--auth", "verify", "--shared", *ROOTS)
    try:
        name = create_table(signed(process, "dynamodb", FIRST, "eu-west-1"), unique_name("ns-shared"))
        other = signed(process, "dynamodb", SECOND, "us-east-1")
        assert other.describe_table(TableName=name)["Table"]["TableName"] == name
    finally:
        process.finish()


def test_auth_off_is_shared_unless_regions_are_asked_apart():
    """--auth off keeps one namespace by default; with --namespaces account-region each region has its own
    tables (every unverified caller is the account 000000000000)."""
    for option, apart in (((), False), (("--namespaces", "account-region"), True)):
        process = ServerProcess(None, "--workers", "1", *option)
        try:
            west = signed(process, "dynamodb", FIRST, "eu-west-1", ("anything", "any"))
            east = signed(process, "dynamodb", FIRST, "us-east-1", ("another", "any"))
            name = create_table(west, unique_name("ns-off"))
            arn = west.describe_table(TableName=name)["Table"]["TableArn"]
            assert arn == table_arn("000000000000", "eu-west-1", name)
            if apart:
                assert error_of(east.describe_table, TableName=name)[0] == NOT_FOUND
            else:
                assert east.describe_table(TableName=name)["Table"]["TableArn"] == arn
        finally:
            process.finish()


def test_roles_are_assumed_in_their_account(server):
    """A role made in the second account is assumed there, and its session works on that account's tables."""
    iam, sts = signed(server, "iam", SECOND), signed(server, "sts", SECOND)
    user = unique_name("ns-assumer")
    iam.create_user(UserName=user)
    access = iam.create_access_key(UserName=user)["AccessKey"]
    role = unique_name("ns-role")
    # (the trust policy names the account: the user's own policy must allow it too, as in IAM)
    iam.put_user_policy(UserName=user, PolicyName="assume", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                "Resource": f"arn:aws:iam::{SECOND}:role/{role}"}]}))
    role_arn = iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": SECOND},
                                                "Action": "sts:AssumeRole"}]}))["Role"]["Arn"]
    assert role_arn == f"arn:aws:iam::{SECOND}:role/{role}"
    iam.put_role_policy(RoleName=role, PolicyName="all", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"}]}))
    as_user = signed(server, "sts", SECOND, keys=(access["AccessKeyId"], access["SecretAccessKey"]))
    session = as_user.assume_role(RoleArn=role_arn, RoleSessionName="s1")
    assert session["AssumedRoleUser"]["Arn"] == f"arn:aws:sts::{SECOND}:assumed-role/{role}/s1"
    credentials = session["Credentials"]
    ddb = boto3.client("dynamodb", endpoint_url=server.endpoint, region_name="us-east-1",
                       aws_access_key_id=credentials["AccessKeyId"],
                       aws_secret_access_key=credentials["SecretAccessKey"],
                       aws_session_token=credentials["SessionToken"], config=Config(retries={"max_attempts": 1}))
    name = create_table(ddb, unique_name("ns-role-table"))
    assert ddb.describe_table(TableName=name)["Table"]["TableArn"] == table_arn(SECOND, "us-east-1", name)
    assert sts.get_caller_identity()["Account"] == SECOND


def test_another_accounts_stream_needs_its_resource_policy(server):
    """Streams calls on another account's stream: AccessDeniedException until the stream's resource policy names
    the caller's account; then its records are read (another region's stream is not found)."""
    owner = signed(server, "dynamodb", FIRST)
    name = unique_name("ns-stream")
    owner.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                       KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"})
    owner.put_item(TableName=name, Item={"pk": {"S": "a"}})
    stream = owner.describe_table(TableName=name)["Table"]["LatestStreamArn"]
    guest = signed(server, "dynamodbstreams", SECOND)
    assert error_of(guest.describe_stream, StreamArn=stream)[:2] == (
        DENIED, f"User: arn:aws:iam::{SECOND}:root is not authorized to perform: dynamodb:DescribeStream on "
                f"resource: {stream} because no resource-based policy allows the dynamodb:DescribeStream action")
    owner.put_resource_policy(ResourceArn=stream, Policy=json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{SECOND}:root"},
        "Action": ["dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"],
        "Resource": stream}]}))
    shard = guest.describe_stream(StreamArn=stream)["StreamDescription"]["Shards"]
    iterator = guest.get_shard_iterator(StreamArn=stream, ShardId=shard[0]["ShardId"],
                                        ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    records = []
    for piece in shard:
        at = guest.get_shard_iterator(StreamArn=stream, ShardId=piece["ShardId"],
                                      ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records += guest.get_records(ShardIterator=at)["Records"]
    assert iterator and [record["dynamodb"]["Keys"] for record in records] == [{"pk": {"S": "a"}}]
    west = signed(server, "dynamodbstreams", FIRST, "eu-west-1")
    assert error_of(west.describe_stream, StreamArn=stream)[0] == NOT_FOUND


def test_namespaces_survive_a_restart(tmp_path):
    """The namespace is kept with the table: after a restart each account and region finds its own again."""
    process = ServerProcess(str(tmp_path), "--workers", "1", "--auth", "verify", *ROOTS)
    name = unique_name("ns-restart")
    try:
        for account in (FIRST, SECOND):
            ddb = signed(process, "dynamodb", account, "ap-south-1")
            create_table(ddb, name)
            ddb.put_item(TableName=name, Item={"pk": {"S": "k"}, "sk": {"S": account}})
    finally:
        process.finish()
    process = ServerProcess(str(tmp_path), "--workers", "1", "--auth", "verify", *ROOTS)
    try:
        for account in (FIRST, SECOND):
            ddb = signed(process, "dynamodb", account, "ap-south-1")
            assert [item["sk"]["S"] for item in ddb.scan(TableName=name)["Items"]] == [account]
        assert error_of(signed(process, "dynamodb", FIRST).describe_table, TableName=name)[0] == NOT_FOUND
    finally:
        process.finish()


def test_background_work_finds_namespaced_tables(server):
    """An index added by UpdateTable is filled and becomes ACTIVE, and a restore with an index finishes, for a
    table of a namespace (the background duties look tables up by their stored names)."""
    ddb = signed(server, "dynamodb", SECOND, "eu-central-1")
    name = create_table(ddb, unique_name("ns-backfill"))
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "sk": {"S": "1"}, "g": {"S": "x"}})
    ddb.update_table(TableName=name, AttributeDefinitions=[{"AttributeName": "g", "AttributeType": "S"}],
                     GlobalSecondaryIndexUpdates=[{"Create": {
                         "IndexName": "by-g", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                         "Projection": {"ProjectionType": "ALL"}}}])
    wait = {"Delay": 1, "MaxAttempts": 30}
    ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig=wait)
    for _ in range(30):
        index = ddb.describe_table(TableName=name)["Table"]["GlobalSecondaryIndexes"][0]
        if index["IndexStatus"] == "ACTIVE":
            break
        time.sleep(1)
    assert index["IndexStatus"] == "ACTIVE"
    assert ddb.query(TableName=name, IndexName="by-g", KeyConditionExpression="g = :g",
                     ExpressionAttributeValues={":g": {"S": "x"}})["Count"] == 1
    backup = ddb.create_backup(TableName=name, BackupName="with-index")["BackupDetails"]["BackupArn"]
    wait_available(ddb, backup)  # (made in the background: restorable once AVAILABLE)
    restored = unique_name("ns-restored-index")
    ddb.restore_table_from_backup(TargetTableName=restored, BackupArn=backup)
    ddb.get_waiter("table_exists").wait(TableName=restored, WaiterConfig=wait)
    assert ddb.query(TableName=restored, IndexName="by-g", KeyConditionExpression="g = :g",
                     ExpressionAttributeValues={":g": {"S": "x"}})["Count"] == 1


def test_throughput_is_each_namespaces_own():
    """--throttling on with tables kept by region: a 5 WCU table spending its units is throttled (its buckets
    are drawn on by its requests), while the table of that name in another region still has its own."""
    process = ServerProcess(None, "--workers", "1", "--namespaces", "account-region", "--throttling", "on")
    try:
        name, big = unique_name("ns-throttle"), "x" * (15 * 1024 - 100)  # (15 WCU a put)
        west = signed(process, "dynamodb", FIRST, "eu-west-1", ("anything", "any"))
        east = signed(process, "dynamodb", FIRST, "us-east-1", ("anything", "any"))
        for ddb in (west, east):
            ddb.create_table(TableName=name, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                             KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                             ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 5})
        time.sleep(3)  # (15 units of burst each)
        west.put_item(TableName=name, Item={"pk": {"S": "a"}, "data": {"S": big}})
        west.put_item(TableName=name, Item={"pk": {"S": "b"}, "data": {"S": big}})
        code, _, _ = error_of(west.put_item, TableName=name, Item={"pk": {"S": "c"}})
        assert code == "ProvisionedThroughputExceededException"
        east.put_item(TableName=name, Item={"pk": {"S": "a"}, "data": {"S": big}})  # (its own 15 units)
    finally:
        process.finish()


def test_a_role_of_another_account_is_assumed_as_its_trust_policy_and_the_callers_policies_allow(server):
    """Cross-account AssumeRole (IAM User Guide, "Cross-account policy evaluation logic"): a user of the first
    account assumes a role of the second only when the role's trust policy names the first account and the user's
    own policies allow sts:AssumeRole on the role; refused otherwise in STS's words; the session acts in the second
    account's namespace, on its tables, as the role's policy allows."""
    owner_iam, owner_ddb = signed(server, "iam", SECOND), signed(server, "dynamodb", SECOND)
    table = create_table(owner_ddb, unique_name("ns-cross-role"))
    owner_ddb.put_item(TableName=table, Item={"pk": {"S": "a"}, "sk": {"S": "1"}, "owner": {"S": SECOND}})
    role, distrusting = unique_name("ns-cross"), unique_name("ns-own-only")
    role_arn = owner_iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{FIRST}:root"},
                                                "Action": "sts:AssumeRole"}]}))["Role"]["Arn"]
    own_only_arn = owner_iam.create_role(RoleName=distrusting, AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": SECOND},
                                                "Action": "sts:AssumeRole"}]}))["Role"]["Arn"]
    owner_iam.put_role_policy(RoleName=role, PolicyName="read", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:PutItem"],
                                                "Resource": table_arn(SECOND, "us-east-1", table)}]}))
    guest_iam = signed(server, "iam", FIRST)
    user = unique_name("ns-guest")
    guest_iam.create_user(UserName=user)
    access = guest_iam.create_access_key(UserName=user)["AccessKey"]
    sts = signed(server, "sts", FIRST, keys=(access["AccessKeyId"], access["SecretAccessKey"]))

    def refusal(arn: str) -> tuple[str, str, int]:
        return ("AccessDenied", f"User: arn:aws:iam::{FIRST}:user/{user} is not authorized to perform: "
                                f"sts:AssumeRole on resource: {arn}", 403)
    # Trusted by the role, but no policy of the user's allows it: refused.
    assert error_of(sts.assume_role, RoleArn=role_arn, RoleSessionName="s1") == refusal(role_arn)
    guest_iam.put_user_policy(UserName=user, PolicyName="assume", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}))
    time.sleep(1.1)  # (policies are trusted for a second: identity/store.py CACHE_SECONDS)
    # Allowed by the user's policy, but the role trusts its own account only (nor is a missing role told apart).
    assert error_of(sts.assume_role, RoleArn=own_only_arn, RoleSessionName="s1") == refusal(own_only_arn)
    missing = f"arn:aws:iam::{SECOND}:role/{unique_name('none')}"
    assert error_of(sts.assume_role, RoleArn=missing, RoleSessionName="s1") == refusal(missing)
    session = sts.assume_role(RoleArn=role_arn, RoleSessionName="s1")
    assert session["AssumedRoleUser"]["Arn"] == f"arn:aws:sts::{SECOND}:assumed-role/{role}/s1"
    credentials = session["Credentials"]
    keys = (credentials["AccessKeyId"], credentials["SecretAccessKey"])
    as_role = boto3.client("dynamodb", endpoint_url=server.endpoint, region_name="us-east-1",
                           aws_access_key_id=keys[0], aws_secret_access_key=keys[1],
                           aws_session_token=credentials["SessionToken"], config=Config(retries={"max_attempts": 1}))
    identity = boto3.client("sts", endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id=keys[0],
                            aws_secret_access_key=keys[1], aws_session_token=credentials["SessionToken"])
    assert identity.get_caller_identity()["Account"] == SECOND
    # The table is the second account's, by its name alone; the role's policy allows reads and writes, nothing else.
    assert as_role.get_item(TableName=table, Key={"pk": {"S": "a"}, "sk": {"S": "1"}})["Item"]["owner"] == \
        {"S": SECOND}
    as_role.put_item(TableName=table, Item={"pk": {"S": "b"}, "sk": {"S": "1"}})
    assert "Item" in owner_ddb.get_item(TableName=table, Key={"pk": {"S": "b"}, "sk": {"S": "1"}})
    assert error_of(as_role.delete_item, TableName=table, Key={"pk": {"S": "a"}, "sk": {"S": "1"}})[0] == DENIED
    # The first account has no such table: the session does not act there.
    assert error_of(signed(server, "dynamodb", FIRST).describe_table, TableName=table)[0] == NOT_FOUND


def test_metrics_request_log_and_insights_tell_two_accounts_tables_of_one_name_apart(tmp_path):
    """Two accounts' tables of one name are counted apart: /metrics carries account and region labels, the request
    log names the account and region, CloudWatch's calls and Contributor Insights rules answer each account of its
    own table (as CloudWatch keeps metrics and rules per account and region)."""
    process = ServerProcess(str(tmp_path), "--workers", "1", "--auth", "verify", *ROOTS, "--log-level", "info",
                            "--log-format", "json")
    name, window = unique_name("ns-metrics"), {"StartTime": time.time() - 600, "EndTime": time.time() + 60}
    try:
        ddbs = {account: signed(process, "dynamodb", account) for account in (FIRST, SECOND)}
        rules = {}
        for account, ddb in ddbs.items():
            ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                             AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                             KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
            ddb.update_contributor_insights(TableName=name, ContributorInsightsAction="ENABLE")
            rules[account] = next(rule for rule in ddb.describe_contributor_insights(TableName=name)[
                "ContributorInsightsRuleList"] if "-PKC-" in rule)
        time.sleep(1.5)  # (enabled insights are read about once a second)
        for account, writes in ((FIRST, 1), (SECOND, 3)):
            for n in range(writes):
                ddbs[account].put_item(TableName=name, Item={"pk": {"S": f"{account}-key"}, "n": {"N": str(n)}})
        assert error_of(ddbs[FIRST].describe_table, TableName="x")[0] == NOT_FOUND  # (a user error)
        with urllib.request.urlopen(f"{process.endpoint}/metrics", timeout=10) as page:
            metrics = page.read().decode()
        for account, units in ((FIRST, 1), (SECOND, 3)):
            assert f'ConsumedWriteCapacityUnits{{account="{account}",region="us-east-1",TableName="{name}"}} ' \
                   f'{units}' in metrics.splitlines()
            assert f'openddb_contributor_insights{{account="{account}",region="us-east-1",rule="{rules[account]}",' \
                   f'key="{account}-key"}} {units}' in metrics.splitlines()
        assert any(line.startswith(f'UserErrors{{account="{FIRST}",region="us-east-1"}} ')
                   for line in metrics.splitlines())
        for account, units in ((FIRST, 1.0), (SECOND, 3.0)):
            cw = signed(process, "cloudwatch", account)

            def written(cw: Any = cw) -> float:
                answer = cw.get_metric_statistics(
                    Namespace="AWS/DynamoDB", MetricName="ConsumedWriteCapacityUnits", Period=600, Statistics=["Sum"],
                    Dimensions=[{"Name": "TableName", "Value": name}], **window)
                return float(sum(point["Sum"] for point in answer["Datapoints"]))
            assert _eventually(written, units) == units

            def median_latencies(cw: Any = cw) -> int:  # (the latency buckets are the caller's namespace's too)
                answer = cw.get_metric_statistics(
                    Namespace="AWS/DynamoDB", MetricName="SuccessfulRequestLatency", Period=600,
                    ExtendedStatistics=["p50"], Dimensions=[{"Name": "TableName", "Value": name},
                                                            {"Name": "Operation", "Value": "PutItem"}], **window)
                return sum(1 for point in answer["Datapoints"] if "p50" in point.get("ExtendedStatistics", {}))
            assert _eventually(median_latencies, 1) == 1
            report = cw.get_insight_rule_report(RuleName=rules[account], Period=60, **window)
            assert [top["Keys"] for top in report["Contributors"]] == [[f"{account}-key"]]
            other = rules[SECOND if account == FIRST else FIRST]
            if other != rules[account]:  # (the other account's rule is not this account's)
                assert error_of(cw.get_insight_rule_report, RuleName=other, Period=60, **window)[0] == \
                    "ResourceNotFoundException"
    finally:
        output = process.finish()
    puts = [json.loads(line) for line in output.splitlines() if line.startswith("{") and '"PutItem"' in line]
    assert sorted((put["account"], put["region"]) for put in puts) == \
        [(FIRST, "us-east-1")] + [(SECOND, "us-east-1")] * 3


def test_backups_take_no_resource_based_policy(server):
    """The Developer Guide ("DynamoDB API operations supported by resource-based policies"): resource-based policies
    cannot be attached to backups, and the actions on backups are left out of those a resource-based policy grants.
    So a backup ARN is refused by PutResourcePolicy, and a table's policy letting another account do anything on
    the table and everything under its ARN does not let that account reach the table's backup."""
    owner, guest = signed(server, "dynamodb", FIRST), signed(server, "dynamodb", SECOND)
    table = create_table(owner, unique_name("ns-backup-policy"))
    arn = table_arn(FIRST, "us-east-1", table)
    backup = owner.create_backup(TableName=table, BackupName="policy-less")["BackupDetails"]["BackupArn"]
    owner.put_resource_policy(ResourceArn=arn, Policy=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": SECOND}, "Action": "dynamodb:*", "Resource": [arn, f"{arn}/*"]}]}))
    assert error_of(owner.put_resource_policy, ResourceArn=backup, Policy=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": SECOND},
                                               "Action": "dynamodb:DescribeBackup", "Resource": backup}]}))[0] == \
        "ValidationException"
    time.sleep(1.1)  # (a resource policy applies within a second: identity/resource_policies.py)
    assert guest.describe_table(TableName=arn)["Table"]["TableArn"] == arn  # (the table's policy lets it in)
    assert error_of(guest.describe_backup, BackupArn=backup)[0] == DENIED
    assert error_of(guest.restore_table_from_backup, TargetTableName=unique_name("ns-stolen"),
                    BackupArn=backup)[0] == DENIED
