"""The control plane through boto3: CreateTable, DescribeTable, ListTables, UpdateTable, DeleteTable, tags."""

from __future__ import annotations

import json
import re

import pytest
from botocore.exceptions import ClientError

from tests.api.test_protocol import call
from tests.conftest import create_table, table_exists, unique_name

DEFS = [{"AttributeName": "pk", "AttributeType": "S"}]
SCHEMA = [{"AttributeName": "pk", "KeyType": "HASH"}]


def error_of(excinfo) -> tuple[str, str]:
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


def refused_creation(ddb, **members) -> tuple[str, str]:
    """The error code and message of a CreateTable that must be refused (a fresh name, DEFS and SCHEMA unless
    `members` say otherwise)."""
    with pytest.raises(ClientError) as excinfo:
        ddb.create_table(**{"TableName": unique_name(), "AttributeDefinitions": DEFS, "KeySchema": SCHEMA, **members})
    return error_of(excinfo)


def test_create_describe_delete(ddb):
    """The basic life cycle returns DynamoDB's descriptions."""
    name = unique_name()
    created = ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                               BillingMode="PAY_PER_REQUEST")["TableDescription"]
    assert created["TableStatus"] == "CREATING"
    assert created["TableArn"] == f"arn:aws:dynamodb:us-east-1:000000000000:table/{name}"
    assert created["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    described = ddb.describe_table(TableName=name)["Table"]
    assert described["TableStatus"] == "ACTIVE"
    assert described["KeySchema"] == SCHEMA
    assert described["AttributeDefinitions"] == DEFS
    assert described["ItemCount"] == 0 and described["TableSizeBytes"] == 0
    assert described["ProvisionedThroughput"]["ReadCapacityUnits"] == 0
    assert described["TableId"] == created["TableId"]
    assert described["DeletionProtectionEnabled"] is False
    deleted = ddb.delete_table(TableName=name)["TableDescription"]
    assert deleted["TableStatus"] == "DELETING"
    with pytest.raises(ClientError) as excinfo:
        ddb.describe_table(TableName=name)
    assert error_of(excinfo) == ("ResourceNotFoundException",
                                 f"Requested resource not found: Table: {name} not found")


def test_waiter_works(ddb):
    """boto3's table_exists waiter sees the table ACTIVE."""
    name = create_table(ddb)
    ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.1, "MaxAttempts": 5})


def test_provisioned_table(ddb):
    """A provisioned table reports its throughput."""
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                     ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 7})
    throughput = ddb.describe_table(TableName=name)["Table"]["ProvisionedThroughput"]
    assert (throughput["ReadCapacityUnits"], throughput["WriteCapacityUnits"]) == (5, 7)


def test_create_existing_table(ddb):
    """A second CreateTable of a name is ResourceInUseException."""
    name = create_table(ddb)
    with pytest.raises(ClientError) as excinfo:
        create_table(ddb, name)
    assert error_of(excinfo) == ("ResourceInUseException", f"Table already exists: {name}")


@pytest.mark.parametrize(("table_name", "message"), [
    ("ab", "1 validation error detected: Value 'ab' at 'tableName' failed to satisfy constraint: "
           "Member must have length greater than or equal to 3"),
    ("a b c", "1 validation error detected: Value 'a b c' at 'tableName' failed to satisfy constraint: "
              "Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+"),
    ("x" * 256, f"1 validation error detected: Value '{'x' * 256}' at 'tableName' failed to satisfy "
                "constraint: Member must have length less than or equal to 255"),
])
def test_table_name_validation(ddb, table_name, message):
    """Table names are 3-255 characters of [a-zA-Z0-9_.-]."""
    with pytest.raises(ClientError) as excinfo:
        ddb.create_table(TableName=table_name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                         BillingMode="PAY_PER_REQUEST")
    assert error_of(excinfo) == ("ValidationException", message)


def test_key_type_enum(ddb):
    """Key attribute types are S, N or B only."""
    with pytest.raises(ClientError) as excinfo:
        ddb.create_table(TableName=unique_name(), AttributeDefinitions=[{"AttributeName": "pk",
                                                                          "AttributeType": "BOOL"}],
                         KeySchema=SCHEMA, BillingMode="PAY_PER_REQUEST")
    assert error_of(excinfo) == (
        "ValidationException",
        "1 validation error detected: Value 'BOOL' at 'attributeDefinitions.1.member.attributeType' failed to "
        "satisfy constraint: Member must satisfy enum value set: [B, N, S]")



def test_too_long_key_schema_printed_as_key_schema_elements(ddb):
    """DynamoDB prints the structures of a too-long KeySchema as KeySchemaElement(attributeName=.., keyType=..),
    in the structure's own member order."""
    schema = [*SCHEMA, {"KeyType": "RANGE", "AttributeName": "sk"}, {"AttributeName": "extra", "KeyType": "RANGE"}]
    defs = [*DEFS, {"AttributeName": "sk", "AttributeType": "S"}, {"AttributeName": "extra", "AttributeType": "S"}]
    assert refused_creation(ddb, KeySchema=schema, AttributeDefinitions=defs, BillingMode="PAY_PER_REQUEST") == (
        "ValidationException",
        "1 validation error detected: Value '[KeySchemaElement(attributeName=pk, keyType=HASH), "
        "KeySchemaElement(attributeName=sk, keyType=RANGE), KeySchemaElement(attributeName=extra, keyType=RANGE)]' "
        "at 'keySchema' failed to satisfy constraint: Member must have length less than or equal to 2")

def test_unused_attribute_definition(ddb):
    """AttributeDefinitions must match the key attributes exactly."""
    with pytest.raises(ClientError) as excinfo:
        ddb.create_table(TableName=unique_name(),
                         AttributeDefinitions=[*DEFS, {"AttributeName": "x", "AttributeType": "S"}],
                         KeySchema=SCHEMA, BillingMode="PAY_PER_REQUEST")
    assert error_of(excinfo) == (
        "ValidationException", "One or more parameter values were invalid: Number of attributes in KeySchema "
        "does not exactly match number of attributes defined in AttributeDefinitions")


def test_undefined_key_attribute(ddb):
    """A key attribute missing from AttributeDefinitions is rejected."""
    with pytest.raises(ClientError) as excinfo:
        ddb.create_table(TableName=unique_name(), AttributeDefinitions=DEFS,
                         KeySchema=[*SCHEMA, {"AttributeName": "sk", "KeyType": "RANGE"}],
                         BillingMode="PAY_PER_REQUEST")
    assert error_of(excinfo) == ("ValidationException",
                                 "Invalid KeySchema: Some index key attribute have no definition")


@pytest.mark.parametrize("definitions, key, listed", [
    ([{"AttributeName": "other", "AttributeType": "S"}], "pk", "[other]"),
    ([{"AttributeName": "pk", "AttributeType": "S"}], "PK", "[pk]"),  # names are case sensitive
])
def test_key_attribute_defined_under_another_name(ddb, definitions, key, listed):
    """As many definitions as key attributes, but not theirs: the message lists both sides."""
    refused = refused_creation(ddb, AttributeDefinitions=definitions, BillingMode="PAY_PER_REQUEST",
                               KeySchema=[{"AttributeName": key, "KeyType": "HASH"}])
    assert refused == (
        "ValidationException", "One or more parameter values were invalid: Some index key attributes are not "
        f"defined in AttributeDefinitions. Keys: [{key}], AttributeDefinitions: {listed}")


def test_first_key_must_be_hash(ddb):
    """The first KeySchemaElement must be the HASH key."""
    with pytest.raises(ClientError) as excinfo:
        ddb.create_table(TableName=unique_name(), AttributeDefinitions=DEFS,
                         KeySchema=[{"AttributeName": "pk", "KeyType": "RANGE"}], BillingMode="PAY_PER_REQUEST")
    assert error_of(excinfo) == ("ValidationException",
                                 "Invalid KeySchema: The first KeySchemaElement is not a HASH key type")


def test_billing_mode_and_throughput(ddb):
    """PAY_PER_REQUEST refuses throughput; PROVISIONED needs it."""
    refused = refused_creation(ddb, BillingMode="PAY_PER_REQUEST",
                               ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1})
    assert refused[1] == ("One or more parameter values were invalid: Neither ReadCapacityUnits nor "
                          "WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST")
    assert refused_creation(ddb) == ("ValidationException", "One or more parameter values were invalid: "
                                     "ReadCapacityUnits and WriteCapacityUnits must both be specified when BillingMode "
                                     "is PROVISIONED")


def test_missing_required_members(server):
    """Missing required members are listed in one ValidationException (raw request: boto3 refuses to send it)."""
    response, data = call(server, "{}", target="DynamoDB_20120810.CreateTable")
    body = json.loads(data)
    assert response.status == 400
    assert body["__type"] == "com.amazon.coral.validate#ValidationException"
    assert body["message"] == "The parameter 'TableName' is required but was not present in the request"


def test_list_tables_paginates(ddb):
    """ListTables pages with Limit / ExclusiveStartTableName / LastEvaluatedTableName."""
    prefix = unique_name("list")
    names = sorted(create_table(ddb, f"{prefix}-{i}") for i in range(5))
    seen: list[str] = []
    start = None
    while True:
        kwargs = {"Limit": 2}
        if start:
            kwargs["ExclusiveStartTableName"] = start
        page = ddb.list_tables(**kwargs)
        seen += page["TableNames"]
        start = page.get("LastEvaluatedTableName")
        if not start:
            break
    assert [n for n in seen if n.startswith(prefix)] == names
    assert seen == sorted(seen)
    paginator = ddb.get_paginator("list_tables")
    listed = [n for page in paginator.paginate(PaginationConfig={"PageSize": 3}) for n in page["TableNames"]]
    assert set(names) <= set(listed)


def test_update_table(ddb):
    """UpdateTable switches billing modes, changes throughput and deletion protection."""
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                     ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1})
    table = ddb.update_table(TableName=name, ProvisionedThroughput={"ReadCapacityUnits": 3,
                                                                    "WriteCapacityUnits": 4})["TableDescription"]
    # The answer shows the throughput before the change (still being applied); DescribeTable shows the new one.
    assert table["TableStatus"] == "UPDATING"
    assert (table["ProvisionedThroughput"]["ReadCapacityUnits"], table["ProvisionedThroughput"]["WriteCapacityUnits"]) \
        == (1, 1)
    described = ddb.describe_table(TableName=name)["Table"]["ProvisionedThroughput"]
    assert (described["ReadCapacityUnits"], described["WriteCapacityUnits"]) == (3, 4)
    assert "LastIncreaseDateTime" in described
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, ProvisionedThroughput={"ReadCapacityUnits": 3, "WriteCapacityUnits": 4})
    assert error_of(excinfo)[1].startswith("The provisioned throughput for the table will not change.")
    table = ddb.update_table(TableName=name, BillingMode="PAY_PER_REQUEST")["TableDescription"]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    ddb.update_table(TableName=name, DeletionProtectionEnabled=True)
    with pytest.raises(ClientError) as excinfo:
        ddb.delete_table(TableName=name)
    assert error_of(excinfo) == ("ValidationException",
                                 "Resource cannot be deleted as it is currently protected against deletion. "
                                 "Disable deletion protection first.")
    ddb.update_table(TableName=name, DeletionProtectionEnabled=False)
    ddb.delete_table(TableName=name)


def test_refused_update_changes_nothing(ddb):
    """A refused UpdateTable leaves the table exactly as it was (no half-applied change in any cache)."""
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                     ProvisionedThroughput={"ReadCapacityUnits": 2, "WriteCapacityUnits": 2})
    before = ddb.describe_table(TableName=name)["Table"]
    with pytest.raises(ClientError):  # the index part is valid, the billing part is not
        ddb.update_table(
            TableName=name, BillingMode="PAY_PER_REQUEST", DeletionProtectionEnabled=True,
            ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 5},
            AttributeDefinitions=[*DEFS, {"AttributeName": "g", "AttributeType": "S"}],
            GlobalSecondaryIndexUpdates=[{"Create": {
                "IndexName": "by-g", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
                "ProvisionedThroughput": {"ReadCapacityUnits": 1, "WriteCapacityUnits": 1}}}])
    after = ddb.describe_table(TableName=name)["Table"]
    assert "GlobalSecondaryIndexes" not in after
    assert after["AttributeDefinitions"] == before["AttributeDefinitions"]
    assert after["ProvisionedThroughput"] == before["ProvisionedThroughput"]
    assert after["DeletionProtectionEnabled"] is False
    assert "BillingModeSummary" not in after


INVALID = "One or more parameter values were invalid: "
ALONE = INVALID + "{} modification must be the only operation in the request"


@pytest.mark.parametrize("members, message", [
    ({"DeletionProtectionEnabled": True, "SSESpecification": {"Enabled": True}},
     ALONE.format("Server-Side Encryption")),
    ({"DeletionProtectionEnabled": True, "TableClass": "STANDARD_INFREQUENT_ACCESS"}, ALONE.format("TableClass")),
    ({"WarmThroughput": {"ReadUnitsPerSecond": 13000}, "DeletionProtectionEnabled": True},
     ALONE.format("DeletionProtection")),
    ({"WarmThroughput": {"ReadUnitsPerSecond": 13000}, "OnDemandThroughput": {"MaxReadRequestUnits": 10}},
     INVALID + "OnDemandThroughput can only be combined with BillingMode in an UpdateTable request"),
    ({"WarmThroughput": {"ReadUnitsPerSecond": 13000}, "BillingMode": "PAY_PER_REQUEST"},
     INVALID + "WarmThroughput must be the only operation in the request"),
    ({"WarmThroughput": {"ReadUnitsPerSecond": 13000},
      "AttributeDefinitions": [{"AttributeName": "g", "AttributeType": "S"}],
      "GlobalSecondaryIndexUpdates": [{"Create": {
          "IndexName": "gsi", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
          "Projection": {"ProjectionType": "ALL"}}}]},
     INVALID + "Create global secondary index cannot be specified when updating WarmThroughput"),
])
def test_update_table_makes_one_kind_of_change(ddb, members, message):
    """Encryption, table class, deletion protection and warm throughput each come alone (DynamoDB names the first
    of them in this order); a refused call changes nothing."""
    name = create_table(ddb)
    before = ddb.describe_table(TableName=name)["Table"]
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, **members)
    assert error_of(excinfo) == ("ValidationException", message)
    after = ddb.describe_table(TableName=name)["Table"]
    assert (after["DeletionProtectionEnabled"], after["WarmThroughput"], after.get("TableClassSummary")) == (
        before["DeletionProtectionEnabled"], before["WarmThroughput"], before.get("TableClassSummary"))


def test_index_creation_beside_a_throughput_change(ddb):
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                     ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1})
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, ProvisionedThroughput={"ReadCapacityUnits": 2, "WriteCapacityUnits": 2},
                         AttributeDefinitions=[{"AttributeName": "g", "AttributeType": "S"}],
                         GlobalSecondaryIndexUpdates=[{"Create": {
                             "IndexName": "gsi", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                             "Projection": {"ProjectionType": "ALL"},
                             "ProvisionedThroughput": {"ReadCapacityUnits": 1, "WriteCapacityUnits": 1}}}])
    assert error_of(excinfo) == ("ValidationException", INVALID + "You cannot create or delete index while updating "
                                 "table IOPS")
    table = ddb.describe_table(TableName=name)["Table"]
    assert "GlobalSecondaryIndexes" not in table and table["ProvisionedThroughput"]["ReadCapacityUnits"] == 1


@pytest.mark.parametrize("stream", [{"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"}, {"StreamEnabled": False}],
                         ids=["enabling", "disabling"])
def test_index_creation_beside_a_stream_change(ddb, stream):
    """An online index change and a stream change are two operations (ack-api-quirks' DynamoDB catalogue); the
    refusal comes before the stream's own checks (a stream to disable that is not there) and changes nothing."""
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA, BillingMode="PAY_PER_REQUEST")
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, StreamSpecification=stream,
                         AttributeDefinitions=[{"AttributeName": "g", "AttributeType": "S"}],
                         GlobalSecondaryIndexUpdates=[{"Create": {
                             "IndexName": "gsi", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                             "Projection": {"ProjectionType": "ALL"}}}])
    assert error_of(excinfo) == ("ValidationException", INVALID + "You cannot create or delete index while changing "
                                 "stream status")
    table = ddb.describe_table(TableName=name)["Table"]
    assert "GlobalSecondaryIndexes" not in table and "StreamSpecification" not in table


def test_on_demand_throughput_with_a_switch_to_on_demand(ddb):
    """The one pair DynamoDB takes: BillingMode PAY_PER_REQUEST with OnDemandThroughput; an empty structure beside
    another change counts as absent."""
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                     ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1})
    ddb.update_table(TableName=name, BillingMode="PAY_PER_REQUEST", OnDemandThroughput={"MaxReadRequestUnits": 10})
    table = ddb.describe_table(TableName=name)["Table"]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert table["OnDemandThroughput"] == {"MaxReadRequestUnits": 10}
    ddb.update_table(TableName=name, DeletionProtectionEnabled=False, WarmThroughput={})


def test_table_class_standard_on_a_table_without_one(ddb):
    name = create_table(ddb)
    ddb.update_table(TableName=name, TableClass="STANDARD")
    assert "TableClassSummary" not in ddb.describe_table(TableName=name)["Table"]
    other = create_table(ddb)
    ddb.update_table(TableName=other, TableClass="STANDARD_INFREQUENT_ACCESS")
    ddb.update_table(TableName=other, TableClass="STANDARD")
    summary = ddb.describe_table(TableName=other)["Table"]["TableClassSummary"]
    assert summary["TableClass"] == "STANDARD" and "LastUpdateDateTime" in summary


def test_table_class_updates_limited_to_two_in_thirty_days(ddb):
    """Two changes of class in 30 days; the class in use re-sent is free (STANDARD on a table that never set one
    too) but refused like a change once both are spent; the answer shows the class before the change."""
    name = create_table(ddb)
    ddb.update_table(TableName=name, TableClass="STANDARD")
    answer = ddb.update_table(TableName=name, TableClass="STANDARD_INFREQUENT_ACCESS")["TableDescription"]
    assert "TableClassSummary" not in answer
    ddb.update_table(TableName=name, TableClass="STANDARD_INFREQUENT_ACCESS")
    answer = ddb.update_table(TableName=name, TableClass="STANDARD")["TableDescription"]
    assert answer["TableClassSummary"]["TableClass"] == "STANDARD_INFREQUENT_ACCESS"
    for table_class in ("STANDARD_INFREQUENT_ACCESS", "STANDARD"):
        with pytest.raises(ClientError) as excinfo:
            ddb.update_table(TableName=name, TableClass=table_class)
        assert error_of(excinfo) == ("LimitExceededException", "Subscriber limit exceeded: Updates to TableClass "
                                     "are limited to 2 times in 30 day(s).")
    assert ddb.describe_table(TableName=name)["Table"]["TableClassSummary"]["TableClass"] == "STANDARD"


def test_update_table_answers_before_the_change_settles(ddb):
    """Recorded answers: a switch to on-demand shows 0/0 stamped as a decrease; raising warm throughput shows the
    old figures UPDATING."""
    name = _provisioned(ddb, 5, 5)
    throughput = ddb.update_table(TableName=name, BillingMode="PAY_PER_REQUEST")["TableDescription"][
        "ProvisionedThroughput"]
    assert (throughput["ReadCapacityUnits"], throughput["WriteCapacityUnits"]) == (0, 0)
    assert "LastDecreaseDateTime" in throughput
    warm = ddb.update_table(TableName=name, WarmThroughput={"ReadUnitsPerSecond": 12001})["TableDescription"][
        "WarmThroughput"]
    assert warm == {"ReadUnitsPerSecond": 12000, "WriteUnitsPerSecond": 4000, "Status": "UPDATING"}
    assert ddb.describe_table(TableName=name)["Table"]["WarmThroughput"]["ReadUnitsPerSecond"] == 12001


def test_update_table_recorded_refusals(ddb, server):
    name = _provisioned(ddb, 5, 5)
    with pytest.raises(ClientError) as excinfo:  # stream and capacity together, whatever streams may do
        ddb.update_table(TableName=name, ProvisionedThroughput={"ReadCapacityUnits": 6, "WriteCapacityUnits": 6},
                         StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"})
    assert error_of(excinfo) == ("ValidationException", "One or more parameter values were invalid: You cannot modify "
                                                        "stream status while updating table IOPS")
    for members in ({"DeletionProtectionEnabled": True}, {"WarmThroughput": {}}):  # before any other rule
        _, data = call(server, json.dumps({"TableName": "ab", **members}),
                       "DynamoDB_20120810.UpdateTable")  # a name, not an ARN: a table name's constraints
        assert json.loads(data)["message"] == ("1 validation error detected: Value 'ab' at 'tableName' failed to "
                                               "satisfy constraint: Member must have length greater than or equal "
                                               "to 3")
    for table in (name, "no-such-table"):  # an empty index WarmThroughput is refused before any look-up
        with pytest.raises(ClientError) as excinfo:
            ddb.update_table(TableName=table, GlobalSecondaryIndexUpdates=[{"Update": {
                "IndexName": "ghost", "WarmThroughput": {}}}])
        assert error_of(excinfo) == ("ValidationException", "One or more parameter values were invalid: "
                                     "WarmThroughput must have at least one of ReadUnitsPerSecond or "
                                     "WriteUnitsPerSecond specified for index: ghost")
    _, data = call(server, json.dumps({"TableName": name, "MultiRegionConsistency": "EVENTUAL"}),
                   "DynamoDB_20120810.UpdateTable")
    assert json.loads(data)["message"] == (
        "At least one of ProvisionedThroughput, BillingMode, UpdateStreamEnabled, GlobalSecondaryIndexUpdates, "
        "SSESpecification, ReplicaUpdates, MultiAccountReplicaReady, ReplicaTransitRoleArn, "
        "DeletionProtectionEnabled, OnDemandThroughput, WarmThroughput or TableClass is required")


def test_switches_to_on_demand_limited_to_four_a_day(ddb):
    name = create_table(ddb)
    for _ in range(3):
        ddb.update_table(TableName=name, BillingMode="PROVISIONED",
                         ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1})
        ddb.update_table(TableName=name, BillingMode="PAY_PER_REQUEST")
    ddb.update_table(TableName=name, BillingMode="PROVISIONED",
                     ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1})
    ddb.update_table(TableName=name, BillingMode="PAY_PER_REQUEST")  # the fourth (creation as on-demand is none)
    ddb.update_table(TableName=name, BillingMode="PROVISIONED",
                     ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1})
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, BillingMode="PAY_PER_REQUEST")
    kind, message = error_of(excinfo)
    assert kind == "LimitExceededException"
    assert re.fullmatch(r"Subscriber limit exceeded: Update to PayPerRequest mode are limited to 4 times in "
                        r"1 day\(s\)\. Last update at \w{3} \w{3} \d\d \d\d:\d\d:\d\d UTC \d{4}\. "
                        r"Next update can be made at \w{3} \w{3} \d\d \d\d:\d\d:\d\d UTC \d{4}", message), message
    assert ddb.describe_table(TableName=name)["Table"]["BillingModeSummary"]["BillingMode"] == "PROVISIONED"


def _provisioned(ddb, read: int, write: int, **members) -> str:
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=members.pop("AttributeDefinitions", DEFS), KeySchema=SCHEMA,
                     ProvisionedThroughput={"ReadCapacityUnits": read, "WriteCapacityUnits": write}, **members)
    return name


def test_four_decreases_a_day_then_one_an_hour(ddb):
    """The fifth decrease of a UTC day within an hour of the fourth is refused in DynamoDB's words, naming the
    next allowed time; the refusal counts nothing. An increase is still taken, a mixed change is a decrease."""
    name = _provisioned(ddb, 10, 10)
    for units in (9, 8, 7, 6):
        answer = ddb.update_table(TableName=name, ProvisionedThroughput={"ReadCapacityUnits": units,
                                                                         "WriteCapacityUnits": 10})
        # The answer counts the decreases as before the change, but shows the new time of the last one.
        assert answer["TableDescription"]["ProvisionedThroughput"]["NumberOfDecreasesToday"] == 9 - units
        assert "LastDecreaseDateTime" in answer["TableDescription"]["ProvisionedThroughput"]
    described = ddb.describe_table(TableName=name)["Table"]["ProvisionedThroughput"]
    assert (described["NumberOfDecreasesToday"], described["ReadCapacityUnits"]) == (4, 6)
    for read, write in ((5, 10), (7, 9)):
        with pytest.raises(ClientError) as excinfo:
            ddb.update_table(TableName=name, ProvisionedThroughput={"ReadCapacityUnits": read,
                                                                    "WriteCapacityUnits": write})
        kind, message = error_of(excinfo)
        assert kind == "LimitExceededException"
        assert re.fullmatch(
            r"Subscriber limit exceeded: Provisioned throughput decreases are limited within a given UTC day\. "
            r"After the first 4 decreases, each subsequent decrease in the same UTC day can be performed at most "
            r"once every 3600 seconds\. Number of decreases today: 4\. "
            r"Last decrease at \w+day, \w+ \d{1,2}, \d{4} at \d{1,2}:\d\d:\d\d [AP]M Coordinated Universal Time\. "
            r"Next decrease can be made at \w+day, \w+ \d{1,2}, \d{4} at \d{1,2}:\d\d:\d\d [AP]M "
            r"Coordinated Universal Time", message), message
    ddb.update_table(TableName=name, ProvisionedThroughput={"ReadCapacityUnits": 8, "WriteCapacityUnits": 10})
    described = ddb.describe_table(TableName=name)["Table"]["ProvisionedThroughput"]
    assert (described["NumberOfDecreasesToday"], described["ReadCapacityUnits"]) == (4, 8)


def test_index_decreases_have_their_own_budget(ddb):
    definitions = [*DEFS, {"AttributeName": "g", "AttributeType": "S"}]
    name = _provisioned(ddb, 10, 10, AttributeDefinitions=definitions, GlobalSecondaryIndexes=[{
        "IndexName": "byg", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
        "Projection": {"ProjectionType": "ALL"},
        "ProvisionedThroughput": {"ReadCapacityUnits": 10, "WriteCapacityUnits": 10}}])

    def lower_index(units: int) -> dict:
        return ddb.update_table(TableName=name, GlobalSecondaryIndexUpdates=[{"Update": {
            "IndexName": "byg", "ProvisionedThroughput": {"ReadCapacityUnits": units, "WriteCapacityUnits": 10}}}])

    for units in (9, 8, 7, 6):
        lower_index(units)
    with pytest.raises(ClientError) as excinfo:
        lower_index(5)
    assert error_of(excinfo)[0] == "LimitExceededException"
    ddb.update_table(TableName=name, ProvisionedThroughput={"ReadCapacityUnits": 9, "WriteCapacityUnits": 10})
    index = ddb.describe_table(TableName=name)["Table"]["GlobalSecondaryIndexes"][0]["ProvisionedThroughput"]
    assert (index["NumberOfDecreasesToday"], index["ReadCapacityUnits"]) == (4, 6)


_PER_TABLE_QUOTAS = [
    (40001, 1, None, "The requested ReadCapacityUnits, 40001, is above the per table maximum for the account in "
                     "us-east-1. Per table maximum: 40000."),
    (1, 40001, None, "The requested WriteCapacityUnits, 40001, is above the per table maximum for the account in "
                     "us-east-1. Per table maximum: 40000."),
    (1, 1, (40001, 1), "The requested ReadCapacityUnits for index byg, 40001, is above the per index maximum for the "
                       "account in us-east-1. Per table maximum: 40000."),
]


def test_capacity_quotas(ddb):
    """The capacity quotas, one after another in one test: with a shared engine every table counts toward the
    account's 80,000 units, so tests of these quotas running side by side on two workers would meet each other's
    tables (pytest-xdist's groups are not honoured under every pytest version)."""
    for read, write, gsi, message in _PER_TABLE_QUOTAS:
        _per_table_and_per_index_throughput_quota(ddb, read, write, gsi, message)
    _account_throughput_quota(ddb)
    _throughput_quota_on_update(ddb)


def _per_table_and_per_index_throughput_quota(ddb, read, write, gsi, message):  # type: ignore[no-untyped-def]
    """40,000 units for a table and for each of its global indexes, worded as recorded against DynamoDB."""
    with pytest.raises(ClientError) as excinfo:
        _provisioned(ddb, read, write, **_with_gsi(gsi))
    assert error_of(excinfo) == ("LimitExceededException", message + " Refer to the Amazon DynamoDB Developer Guide "
                                 "for current limits and how to request higher limits.")


def _with_gsi(throughput: tuple[int, int] | None) -> dict:
    if throughput is None:
        return {}
    return {"AttributeDefinitions": [*DEFS, {"AttributeName": "g", "AttributeType": "S"}],
            "GlobalSecondaryIndexes": [{
                "IndexName": "byg", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
                "ProvisionedThroughput": {"ReadCapacityUnits": throughput[0], "WriteCapacityUnits": throughput[1]}}]}


def _account_throughput_quota(ddb):  # type: ignore[no-untyped-def]
    """A table's indexes are not added to its own 40,000 units (recorded: a table of 39,900 with an index of 200 is
    taken), but every provisioned table and index counts toward the account's 80,000, what a table holds now
    included when it asks for more."""
    name = _provisioned(ddb, 39900, 1, **_with_gsi((200, 1)))
    try:
        with pytest.raises(ClientError) as excinfo:
            ddb.update_table(TableName=name, ProvisionedThroughput={"ReadCapacityUnits": 39901,
                                                                    "WriteCapacityUnits": 1})
        kind, message = error_of(excinfo)
        assert kind == "LimitExceededException"
        assert re.fullmatch(r"This request would have caused the ReadCapacityUnits limit to be exceeded for the "
                            r"account in us-east-1\. Current ReadCapacityUnits reserved by the account: \d+\. "
                            r"Limit: 80000\. Requested: 40101", message), message
        assert ddb.describe_table(TableName=name)["Table"]["ProvisionedThroughput"]["ReadCapacityUnits"] == 39900
        # What does not raise the account's read units is not held to its quota: the index's writes go up, the
        # table's reads come down, the index goes.
        ddb.update_table(TableName=name, GlobalSecondaryIndexUpdates=[{"Update": {
            "IndexName": "byg", "ProvisionedThroughput": {"ReadCapacityUnits": 200, "WriteCapacityUnits": 2}}}])
        ddb.update_table(TableName=name, ProvisionedThroughput={"ReadCapacityUnits": 39000, "WriteCapacityUnits": 1})
        ddb.update_table(TableName=name, GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "byg"}}])
    finally:
        ddb.delete_table(TableName=name)


def test_on_demand_and_warm_throughput_quotas(ddb):
    name = create_table(ddb)
    for members, message in (
            ({"OnDemandThroughput": {"MaxReadRequestUnits": 40001}},
             "Requested MaxReadRequestUnits for OnDemandThroughput for table exceeds TableMaxReadCapacityUnits"),
            ({"OnDemandThroughput": {"MaxWriteRequestUnits": 40001}},
             "Requested MaxWriteRequestUnits for OnDemandThroughput for table exceeds TableMaxWriteCapacityUnits"),
            ({"WarmThroughput": {"ReadUnitsPerSecond": 40001}},
             "Requested ReadUnitsPerSecond for WarmThroughput for table exceeds TableMaxReadCapacityUnits")):
        with pytest.raises(ClientError) as excinfo:
            ddb.update_table(TableName=name, **members)
        assert error_of(excinfo) == ("LimitExceededException", f"Subscriber limit exceeded: {message} of the "
                                     "account in region us-east-1")
    ddb.update_table(TableName=name, OnDemandThroughput={"MaxReadRequestUnits": 40000})
    assert ddb.describe_table(TableName=name)["Table"]["OnDemandThroughput"] == {"MaxReadRequestUnits": 40000}


def _throughput_quota_on_update(ddb):  # type: ignore[no-untyped-def]
    name = _provisioned(ddb, 1, 1)
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 40001})
    assert error_of(excinfo)[1].startswith("The requested WriteCapacityUnits, 40001, is above the per table maximum")
    ddb.update_table(TableName=name, ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 40000})
    ddb.delete_table(TableName=name)


def test_delete_table_answer_is_smaller_than_a_description(ddb):
    """DynamoDB's DeleteTable answer has no key schema, attribute definitions, creation time or local indexes."""
    name = unique_name()
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[*DEFS, *({"AttributeName": a, "AttributeType": "S"} for a in ("sk", "l"))],
                     KeySchema=[*SCHEMA, {"AttributeName": "sk", "KeyType": "RANGE"}],
                     LocalSecondaryIndexes=[{"IndexName": "byl", "KeySchema": [
                         {"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "l", "KeyType": "RANGE"}],
                         "Projection": {"ProjectionType": "KEYS_ONLY"}}])
    deleted = ddb.delete_table(TableName=name)["TableDescription"]
    assert not {"KeySchema", "AttributeDefinitions", "CreationDateTime", "LocalSecondaryIndexes"} & set(deleted)
    assert {"TableName", "TableStatus", "ProvisionedThroughput", "TableSizeBytes", "ItemCount", "TableArn"} <= \
        set(deleted)


def test_attribute_definitions_and_projected_attributes_described_by_name(ddb):
    """Whatever order they were sent in; the indexes keep theirs."""
    name = unique_name()
    definitions = [{"AttributeName": n, "AttributeType": "S"} for n in ("z", "a", "m", "sk", "pk")]
    created = ddb.create_table(
        TableName=name, AttributeDefinitions=definitions, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[
            {"IndexName": "g-z", "KeySchema": [{"AttributeName": "z", "KeyType": "HASH"}],
             "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["zz", "aa", "mm", "sk"]}},
            {"IndexName": "g-a", "KeySchema": [{"AttributeName": "a", "KeyType": "HASH"},
                                               {"AttributeName": "m", "KeyType": "RANGE"}],
             "Projection": {"ProjectionType": "KEYS_ONLY"}}])["TableDescription"]
    for table in (created, ddb.describe_table(TableName=name)["Table"]):
        assert [d["AttributeName"] for d in table["AttributeDefinitions"]] == ["a", "m", "pk", "sk", "z"]
        assert [i["IndexName"] for i in table["GlobalSecondaryIndexes"]] == ["g-z", "g-a"]
        assert table["GlobalSecondaryIndexes"][0]["Projection"]["NonKeyAttributes"] == ["aa", "mm", "sk", "zz"]
        assert [k["AttributeName"] for k in table["GlobalSecondaryIndexes"][1]["KeySchema"]] == ["a", "m"]


def test_update_table_refusals(ddb):
    """Deletion protection changes alone; SSE cannot be turned off where only the default encryption is on."""
    name = create_table(ddb)
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, BillingMode="PAY_PER_REQUEST", DeletionProtectionEnabled=True)
    assert error_of(excinfo) == ("ValidationException", "One or more parameter values were invalid: "
                                 "DeletionProtection modification must be the only operation in the request")
    for sse in ({"Enabled": False}, {}):
        with pytest.raises(ClientError) as excinfo:
            ddb.update_table(TableName=name, SSESpecification=sse)
        assert error_of(excinfo) == ("ValidationException", "One or more parameter values were invalid: Table is "
                                     "already encrypted by default")
    assert ddb.describe_table(TableName=name)["Table"]["DeletionProtectionEnabled"] is False


@pytest.mark.parametrize(("sse", "detail"), [
    ({"Enabled": False, "SSEType": "KMS"}, "SSEType can not be specified if Enabled is false"),
    ({"Enabled": False, "SSEType": "AES256"}, "SSEType can not be specified if Enabled is false"),
    ({"Enabled": False, "KMSMasterKeyId": "alias/mine"}, "KMSMasterKeyId can not be specified if Enabled is false"),
    ({"Enabled": False, "SSEType": "KMS", "KMSMasterKeyId": "alias/mine"},
     "SSEType can not be specified if Enabled is false"),
    ({"Enabled": True, "SSEType": "AES256"}, "SSEType AES256 is not supported"),
    ({"Enabled": True, "KMSMasterKeyId": "alias/mine"}, "SSEType KMS is required if KMSMasterKeyId is specified"),
])
def test_sse_specification_refusals(ddb, sse, detail):
    """SSESpecification shapes DynamoDB refuses, in its words; nothing is created."""
    assert refused_creation(ddb, BillingMode="PAY_PER_REQUEST", SSESpecification=sse) == (
        "ValidationException", f"One or more parameter values were invalid: {detail}")


def test_sse_specification_shapes_accepted(ddb):
    """{} keeps the default encryption (no SSEDescription); SSEType KMS turns KMS on without Enabled; the AWS
    managed key shows as a key ARN, the same whether named by its alias or not at all; a key ARN shows as given."""
    def created(sse: dict) -> dict | None:
        name = unique_name()
        ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA, BillingMode="PAY_PER_REQUEST",
                         SSESpecification=sse)
        return ddb.describe_table(TableName=name)["Table"].get("SSEDescription")

    assert created({}) is None
    managed = created({"SSEType": "KMS"})
    # (Status DISABLED: the store is not encrypted, so the server does not say ENABLED as DynamoDB would)
    assert managed is not None and (managed["Status"], managed["SSEType"]) == ("DISABLED", "KMS")
    assert re.fullmatch(r"arn:aws:kms:us-east-1:\d{12}:key/[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}",
                        managed["KMSMasterKeyArn"])
    assert created({"Enabled": True}) == managed
    assert created({"SSEType": "KMS", "KMSMasterKeyId": "alias/aws/dynamodb"}) == managed
    arn = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    assert created({"SSEType": "KMS", "KMSMasterKeyId": arn})["KMSMasterKeyArn"] == arn


def test_sse_updates_answer_updating(ddb):
    """UpdateTable's answer shows the encryption before the change, UPDATING; DescribeTable then shows the new
    one. The key a table already uses is refused."""
    name = create_table(ddb)
    answer = ddb.update_table(TableName=name, SSESpecification={"Enabled": True})["TableDescription"]
    assert answer["SSEDescription"] == {"Status": "UPDATING"}
    managed = ddb.describe_table(TableName=name)["Table"]["SSEDescription"]
    assert managed["Status"] == "DISABLED"  # (not encrypted here: see test_sse_specification_shapes_accepted)
    key = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    answer = ddb.update_table(TableName=name, SSESpecification={"Enabled": True, "SSEType": "KMS",
                                                                "KMSMasterKeyId": key})["TableDescription"]
    assert answer["SSEDescription"] == {**managed, "Status": "UPDATING"}
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, SSESpecification={"Enabled": True, "SSEType": "KMS", "KMSMasterKeyId": key})
    assert error_of(excinfo) == ("ValidationException", "One or more parameter values were invalid: Table is already "
                                 "encrypted with given KMSMasterKeyId. Use KMSMasterKeyId parameter if you want to "
                                 "change Master Key")
    # Its alias or key id re-sent is no refusal (recorded): the table is encrypted again with the same key.
    own = "arn:aws:kms:us-east-1:000000000000:key/1234abcd-12ab-34cd-56ef-000000000000"
    ddb.update_table(TableName=name, SSESpecification={"Enabled": True, "SSEType": "KMS", "KMSMasterKeyId": own})
    answer = ddb.update_table(TableName=name, SSESpecification={"Enabled": True, "SSEType": "KMS",
                                                                "KMSMasterKeyId": own.rsplit("/", 1)[1]})
    assert answer["TableDescription"]["SSEDescription"]["Status"] == "UPDATING"
    assert ddb.describe_table(TableName=name)["Table"]["SSEDescription"]["KMSMasterKeyArn"] == own
    ddb.update_table(TableName=name, SSESpecification={"Enabled": True, "SSEType": "KMS", "KMSMasterKeyId": key})
    answer = ddb.update_table(TableName=name, SSESpecification={"Enabled": False})["TableDescription"]
    assert answer["SSEDescription"] == {"Status": "UPDATING", "SSEType": "KMS", "KMSMasterKeyArn": key}
    assert "SSEDescription" not in ddb.describe_table(TableName=name)["Table"]


@pytest.mark.parametrize("throughput, violation", [
    ({"ReadCapacityUnits": 0, "WriteCapacityUnits": 0},
     "Value '0' at 'provisionedThroughput.{}' failed to satisfy constraint: Member must have value greater than or "
     "equal to 1"),
    ({}, "Value null at 'provisionedThroughput.{}' failed to satisfy constraint: Member must not be null"),
])
def test_throughput_violations_name_the_write_member_first(server, throughput, violation):
    response, body = call(server, json.dumps({
        "TableName": unique_name(), "AttributeDefinitions": DEFS, "KeySchema": SCHEMA,
        "BillingMode": "PROVISIONED", "ProvisionedThroughput": throughput}), "DynamoDB_20120810.CreateTable")
    assert response.status == 400
    assert json.loads(body)["message"] == "2 validation errors detected: " + "; ".join(
        violation.format(member) for member in ("writeCapacityUnits", "readCapacityUnits"))


WARM_LOWER = ("One or more parameter values were invalid: Requested ReadUnitsPerSecond for WarmThroughput for table "
              "is lower than ")


def test_warm_throughput_at_creation(ddb):
    """At least the on-demand initial 12000/4000, or the provisioned capacity; a missing member keeps that."""
    refused = refused_creation(ddb, BillingMode="PAY_PER_REQUEST",
                               WarmThroughput={"ReadUnitsPerSecond": 1, "WriteUnitsPerSecond": 1})
    assert refused == ("ValidationException", WARM_LOWER + (
        "initial throughput for OnDemand. See: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/"
        "on-demand-capacity-mode.html#on-demand-capacity-mode-initial"))
    refused = refused_creation(ddb, ProvisionedThroughput={"ReadCapacityUnits": 10, "WriteCapacityUnits": 10},
                               WarmThroughput={"ReadUnitsPerSecond": 5, "WriteUnitsPerSecond": 5})
    assert refused == ("ValidationException", WARM_LOWER + "ReadCapacityUnits of ProvisionedThroughput")
    name = unique_name()
    created = ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                               BillingMode="PAY_PER_REQUEST", WarmThroughput={"ReadUnitsPerSecond": 12001})
    assert created["TableDescription"]["WarmThroughput"] == {"ReadUnitsPerSecond": 12001, "WriteUnitsPerSecond": 4000,
                                                             "Status": "UPDATING"}
    assert ddb.describe_table(TableName=name)["Table"]["WarmThroughput"] == {
        "ReadUnitsPerSecond": 12001, "WriteUnitsPerSecond": 4000, "Status": "ACTIVE"}


def test_warm_throughput_only_grows(ddb):
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                     ProvisionedThroughput={"ReadCapacityUnits": 10, "WriteCapacityUnits": 10},
                     WarmThroughput={"ReadUnitsPerSecond": 100, "WriteUnitsPerSecond": 100})
    assert ddb.describe_table(TableName=name)["Table"]["WarmThroughput"] == {
        "ReadUnitsPerSecond": 100, "WriteUnitsPerSecond": 100, "Status": "ACTIVE"}
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, WarmThroughput={"ReadUnitsPerSecond": 1, "WriteUnitsPerSecond": 1})
    assert error_of(excinfo) == ("ValidationException", WARM_LOWER + "current WarmThroughput, decreasing "
                                 "WarmThroughput is not supported")
    answer = ddb.update_table(TableName=name, WarmThroughput={"WriteUnitsPerSecond": 150})["TableDescription"]
    assert answer["TableStatus"] == "ACTIVE"
    ddb.update_table(TableName=name, WarmThroughput={"ReadUnitsPerSecond": 100})  # equal: accepted
    assert ddb.describe_table(TableName=name)["Table"]["WarmThroughput"] == {
        "ReadUnitsPerSecond": 100, "WriteUnitsPerSecond": 150, "Status": "ACTIVE"}


def test_update_table_requires_a_change(ddb):
    """UpdateTable with nothing to change is a ValidationException, before the table is looked up."""
    for name in (create_table(ddb), unique_name("missing")):
        with pytest.raises(ClientError) as excinfo:
            ddb.update_table(TableName=name)
        assert error_of(excinfo)[0] == "ValidationException"
        assert error_of(excinfo)[1].startswith("At least one of ProvisionedThroughput, BillingMode, ")


OUT_OF_RANGE = ("One or more parameter values were invalid: Requested {} for OnDemandThroughput for table is "
                "outside of valid range")


@pytest.mark.parametrize("throughput, member", [
    ({"MaxReadRequestUnits": 0, "MaxWriteRequestUnits": 0}, "MaxReadRequestUnits"),
    ({"MaxReadRequestUnits": -1, "MaxWriteRequestUnits": -1}, "MaxReadRequestUnits"),  # -1 clears, on update only
    ({"MaxWriteRequestUnits": -2}, "MaxWriteRequestUnits"),
])
def test_on_demand_throughput_out_of_range_at_creation(ddb, throughput, member):
    name = unique_name()
    assert refused_creation(ddb, TableName=name, BillingMode="PAY_PER_REQUEST", OnDemandThroughput=throughput) == (
        "ValidationException", OUT_OF_RANGE.format(member))
    assert not table_exists(ddb, name)


def test_on_demand_throughput_needs_on_demand_billing(ddb):
    name = unique_name()
    refused = refused_creation(ddb, TableName=name, BillingMode="PROVISIONED",
                               ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1},
                               OnDemandThroughput={"MaxReadRequestUnits": 100, "MaxWriteRequestUnits": 100})
    assert refused == ("ValidationException", "One or more parameter values were invalid: MaxReadRequestUnits for "
                       "OnDemandThroughput cannot be specified when table BillingMode is PROVISIONED.")
    ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA, BillingMode="PAY_PER_REQUEST",
                     OnDemandThroughput={"MaxWriteRequestUnits": 100})
    ddb.update_table(TableName=name, BillingMode="PROVISIONED",
                     ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1})
    assert "OnDemandThroughput" not in ddb.describe_table(TableName=name)["Table"]
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, OnDemandThroughput={"MaxWriteRequestUnits": 100})
    assert error_of(excinfo) == ("ValidationException", "One or more parameter values were invalid: "
                                 "MaxWriteRequestUnits for OnDemandThroughput cannot be specified when the table "
                                 "BillingMode is PROVISIONED")


def test_on_demand_throughput(ddb):
    """Set at creation, members merged by UpdateTable, -1 clears one: answered as -1, then absent."""
    name = unique_name()
    created = ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                               BillingMode="PAY_PER_REQUEST", OnDemandThroughput={"MaxReadRequestUnits": 100})
    assert created["TableDescription"]["OnDemandThroughput"] == {"MaxReadRequestUnits": 100}

    def update(**throughput: int) -> dict:
        answer = ddb.update_table(TableName=name, OnDemandThroughput=throughput)["TableDescription"]
        assert answer["TableStatus"] == "ACTIVE"
        return answer.get("OnDemandThroughput", {})

    def described() -> dict:
        return ddb.describe_table(TableName=name)["Table"].get("OnDemandThroughput", {})

    assert described() == {"MaxReadRequestUnits": 100}
    assert update(MaxReadRequestUnits=1000, MaxWriteRequestUnits=500) == {"MaxReadRequestUnits": 1000,
                                                                          "MaxWriteRequestUnits": 500}
    assert update(MaxReadRequestUnits=2000) == {"MaxReadRequestUnits": 2000, "MaxWriteRequestUnits": 500}
    with pytest.raises(ClientError) as excinfo:
        update(MaxWriteRequestUnits=0)
    assert error_of(excinfo) == ("ValidationException", OUT_OF_RANGE.format("MaxWriteRequestUnits"))
    assert described() == {"MaxReadRequestUnits": 2000, "MaxWriteRequestUnits": 500}
    assert update(MaxReadRequestUnits=-1) == {"MaxReadRequestUnits": -1, "MaxWriteRequestUnits": 500}
    assert described() == {"MaxWriteRequestUnits": 500}
    assert update(MaxWriteRequestUnits=-1) == {"MaxWriteRequestUnits": -1}
    assert "OnDemandThroughput" not in ddb.describe_table(TableName=name)["Table"]
    assert update(MaxWriteRequestUnits=700) == {"MaxWriteRequestUnits": 700}
    assert described() == {"MaxWriteRequestUnits": 700}
    # Without the member the table keeps it, and an empty structure at creation sets nothing.
    ddb.update_table(TableName=name, DeletionProtectionEnabled=False)
    assert described() == {"MaxWriteRequestUnits": 700}
    other = ddb.create_table(TableName=unique_name(), AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                             BillingMode="PAY_PER_REQUEST", OnDemandThroughput={})["TableDescription"]
    assert "OnDemandThroughput" not in other


def test_unknown_table_everywhere(ddb):
    """Every table operation on a missing table is ResourceNotFoundException."""
    for operation in (lambda: ddb.delete_table(TableName="missing-table"),
                 lambda: ddb.update_table(TableName="missing-table", DeletionProtectionEnabled=True)):
        with pytest.raises(ClientError) as excinfo:
            operation()
        assert error_of(excinfo) == ("ResourceNotFoundException",
                                     "Requested resource not found: Table: missing-table not found")


def test_tags(ddb):
    """Tags given at creation and through TagResource/UntagResource are listed."""
    name = unique_name()
    arn = ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                           BillingMode="PAY_PER_REQUEST",
                           Tags=[{"Key": "team", "Value": "a"}])["TableDescription"]["TableArn"]
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "env", "Value": "test"}])
    assert ddb.list_tags_of_resource(ResourceArn=arn)["Tags"] == [{"Key": "team", "Value": "a"},
                                                                   {"Key": "env", "Value": "test"}]
    ddb.untag_resource(ResourceArn=arn, TagKeys=["team"])
    assert ddb.list_tags_of_resource(ResourceArn=arn)["Tags"] == [{"Key": "env", "Value": "test"}]


@pytest.mark.parametrize("operation, body, message", [
    ("TagResource", {"Tags": [{"Key": "aws:foo", "Value": "x"}]}, "Tag Key cannot be prefixed with aws:, Key: aws:foo"),
    ("TagResource", {"Tags": [{"Key": "AWS:foo", "Value": "x"}]}, "Tag Key cannot be prefixed with aws:, Key: AWS:foo"),
    ("UntagResource", {"TagKeys": ["aws:foo"]}, "Tag Key cannot be prefixed with aws:, Key: aws:foo"),
    ("TagResource", {"Tags": [{"Key": "bad#char", "Value": "x"}]}, "The Tag Key provided is invalid, Key: bad#char"),
    ("TagResource", {"Tags": [{"Key": "k", "Value": "100%"}]}, "The Tag Value provided is invalid, Value: 100%"),
    # Lengths and presence are checked by hand too, in the same words (as DynamoDB answered in October 2026,
    # recorded in aws-controllers-k8s/dynamodb-controller's api-quirks, DDB-TABLE-107 and 457).
    ("TagResource", {"Tags": [{"Key": "k" * 129, "Value": "x"}]}, f"The Tag Key provided is invalid, Key: {'k' * 129}"),
    ("TagResource", {"Tags": [{"Key": "k", "Value": "v" * 257}]},
     f"The Tag Value provided is invalid, Value: {'v' * 257}"),
    ("TagResource", {"Tags": [{"Key": "", "Value": "x"}]}, "The Tag Key provided is invalid, Key: "),
    ("TagResource", {"Tags": [{"Key": "k"}]}, "The Tag Value provided is invalid, Value: null"),
    ("TagResource", {"Tags": [{}]}, "The Tag Key provided is invalid, Key: null"),
    ("TagResource", {"Tags": [{"Value": "x"}]}, "The Tag Key provided is invalid, Key: null"),
    ("TagResource", {"Tags": [{"Key": "ok", "Value": "x"}, {"Key": "k" * 129, "Value": "x"}]},
     f"The Tag Key provided is invalid, Key: {'k' * 129}"),
    ("UntagResource", {"TagKeys": [""]}, "The Tag Key provided is invalid, Key: "),
    ("UntagResource", {"TagKeys": ["k" * 129]}, f"The Tag Key provided is invalid, Key: {'k' * 129}"),
    ("TagResource", {"Tags": []}, "Atleast one Tag needs to be provided as Input."),
    ("UntagResource", {"TagKeys": []}, "Atleast one Tag Key needs to be provided as Input."),
    ("UntagResource", {"TagKeys": [f"k{n}" for n in range(51)]},
     "Number of Tags exceed the current limit for the provided ResourceArn"),
    ("TagResource", {"Tags": [{"Key": "ok", "Value": "x"}, {"Key": "aws:zzz", "Value": "x"}]},
     "Tag Key cannot be prefixed with aws:, Key: aws:zzz"),
])
def test_tag_refusals(server, ddb, operation, body, message):
    """Each refusal is DynamoDB's own wording, and refuses the whole request: no tag of it is kept."""
    arn = ddb.describe_table(TableName=create_table(ddb))["Table"]["TableArn"]
    response, data = call(server, json.dumps({"ResourceArn": arn, **body}), f"DynamoDB_20120810.{operation}")
    assert response.status == 400
    assert json.loads(data)["message"] == message
    assert ddb.list_tags_of_resource(ResourceArn=arn)["Tags"] == []


def test_at_most_50_tags(ddb):
    """Counted after the merge: a new key beyond 50 is refused, new values for kept keys are not. Letters of any
    script, spaces, _ . : / = + - @ and empty values are accepted."""
    arn = ddb.create_table(TableName=unique_name(), AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                           BillingMode="PAY_PER_REQUEST", Tags=[])["TableDescription"]["TableArn"]
    unusual = [{"Key": "ключ sp", "Value": "a b+c-d=e.f_g:h/i@j"}, {"Key": "Env", "Value": ""}]
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": f"k{n:02d}", "Value": "v"} for n in range(48)] + unusual)
    for tags in ([{"Key": "k50", "Value": "v"}], [{"Key": "k01", "Value": "new"}, {"Key": "k50", "Value": "v"}]):
        with pytest.raises(ClientError) as excinfo:
            ddb.tag_resource(ResourceArn=arn, Tags=tags)
        assert error_of(excinfo) == ("ValidationException",
                                     "Number of Tags exceed the current limit for the provided ResourceArn")
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": f"k{n:02d}", "Value": "w"} for n in range(48)])
    tags = {tag["Key"]: tag["Value"] for tag in ddb.list_tags_of_resource(ResourceArn=arn)["Tags"]}
    assert len(tags) == 50 and tags["k01"] == "w" and tags["Env"] == "" and tags["ключ sp"] == "a b+c-d=e.f_g:h/i@j"


def test_create_table_tag_refusals(ddb):
    """CreateTable checks its tags as TagResource does, and creates nothing when one is refused (DDB-TABLE-110)."""
    for tags, message in (([{"Key": "x" * 129, "Value": "v"}], f"The Tag Key provided is invalid, Key: {'x' * 129}"),
                          ([{"Key": "k", "Value": "100%"}], "The Tag Value provided is invalid, Value: 100%"),
                          ([{"Key": "aws:foo", "Value": "v"}], "Tag Key cannot be prefixed with aws:, Key: aws:foo")):
        name = unique_name()
        with pytest.raises(ClientError) as excinfo:
            ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                             BillingMode="PAY_PER_REQUEST", Tags=tags)
        assert error_of(excinfo) == ("ValidationException", message)
        with pytest.raises(ClientError) as missing:  # (not created: DescribeTable, not a page of ListTables)
            ddb.describe_table(TableName=name)
        assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_table_arn_accepted(ddb):
    """DescribeTable accepts a table ARN as TableName, but not one of another region than the request's."""
    name = create_table(ddb)
    arn = f"arn:aws:dynamodb:us-east-1:000000000000:table/{name}"
    assert ddb.describe_table(TableName=arn)["Table"]["TableName"] == name
    elsewhere = arn.replace("us-east-1", "eu-west-1")
    with pytest.raises(ClientError) as excinfo:
        ddb.describe_table(TableName=elsewhere)
    assert error_of(excinfo) == ("ValidationException",
                                 f"1 validation error detected: Invalid AWS region in '{elsewhere}'")
    with pytest.raises(ClientError) as excinfo:
        ddb.describe_continuous_backups(TableName=elsewhere)
    assert error_of(excinfo)[1] == f"1 validation error detected: Invalid AWS region in '{elsewhere}'"
    for other in (arn + "/index/byx", arn.replace(":table/", ":stream/"), arn.replace(":table/", ":")):
        with pytest.raises(ClientError) as excinfo:  # an index's or a stream's ARN names no table
            ddb.describe_table(TableName=other)
        assert error_of(excinfo)[1] == f"1 validation error detected: Invalid resource type in '{other}'"
        with pytest.raises(ClientError) as excinfo:
            ddb.get_item(TableName=other, Key={"pk": {"S": "a"}, "sk": {"S": "b"}})
        assert error_of(excinfo)[1] == f"1 validation error detected: Invalid resource type in '{other}'"
    with pytest.raises(ClientError) as excinfo:
        ddb.describe_table(TableName=arn.replace("arn:aws:", "arn:aws-cn:"))
    assert error_of(excinfo)[1].startswith("1 validation error detected: Invalid AWS partition in 'arn:aws-cn:")
    # Nor do the item operations serve another region's ARN from this region's table.
    with pytest.raises(ClientError) as excinfo:
        ddb.put_item(TableName=elsewhere, Item={"pk": {"S": "a"}, "sk": {"S": "b"}})
    assert error_of(excinfo)[1] == f"1 validation error detected: Invalid AWS region in '{elsewhere}'"
    assert ddb.scan(TableName=arn)["Count"] == 0


def test_tag_resource_arn_refusals(ddb):
    """The tag operations name what is wrong with a ResourceArn in DynamoDB's words (recorded against the
    service); a refused TagResource keeps no tag."""
    name = create_table(ddb)
    arn = ddb.describe_table(TableName=name)["Table"]["TableArn"]
    invalid = "One or more parameter values were invalid: "
    for resource, refusal in (
            (name, ("ValidationException", f"{invalid}ARNs must start with 'arn:': {name}")),
            (f"{arn}/index/byG",
             ("ValidationException", f"{invalid}Invalid resource arn provided, only table or stream is accepted. "
                                     f"Provided resource arn: {arn}/index/byG")),
            (f"{arn}/backup/01234567890123-abcdefgh",
             ("ValidationException", f"{invalid}Provided Arn is not a DynamoDB resource arn: "
                                     f"{arn}/backup/01234567890123-abcdefgh")),
            ("arn:aws:s3:::bucket", ("ValidationException", f"{invalid}Provided Arn is not a DynamoDB resource arn: "
                                                            "arn:aws:s3:::bucket")),
            (arn.replace("us-east-1", "us-west-2"),
             ("ValidationException", f"Invalid TableArn: Invalid ResourceArn provided as input "
                                     f"{arn.replace('us-east-1', 'us-west-2')}")),
            (f"{arn}-gone", ("ResourceNotFoundException",
                             f"Requested resource not found: ResourceArn: {arn}-gone not found"))):
        for operation, members in (("list_tags_of_resource", {}),
                                   ("tag_resource", {"Tags": [{"Key": "k", "Value": "v"}]})):
            with pytest.raises(ClientError) as excinfo:
                getattr(ddb, operation)(ResourceArn=resource, **members)
            assert error_of(excinfo) == refusal
    assert ddb.list_tags_of_resource(ResourceArn=arn)["Tags"] == []


def test_timestamps_to_the_millisecond(server, ddb):
    """Description timestamps are epoch seconds with at most three decimals, as DynamoDB writes them."""
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                     ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1})
    ddb.update_table(TableName=name, ProvisionedThroughput={"ReadCapacityUnits": 2, "WriteCapacityUnits": 1})
    ddb.update_table(TableName=name, BillingMode="PAY_PER_REQUEST")
    _, data = call(server, json.dumps({"TableName": name}), "DynamoDB_20120810.DescribeTable")
    table = json.loads(data)["Table"]
    stamps = [table["CreationDateTime"], table["ProvisionedThroughput"]["LastIncreaseDateTime"],
              table["BillingModeSummary"]["LastUpdateToPayPerRequestDateTime"]]
    for stamp in stamps:
        assert isinstance(stamp, float | int) and round(stamp, 3) == stamp, stamp


def test_describe_continuous_backups(ddb):
    """Continuous backups are ENABLED (as for every DynamoDB table), point-in-time recovery off until turned on; a
    missing table is the backup operations' TableNotFoundException (not ResourceNotFoundException)."""
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA, BillingMode="PAY_PER_REQUEST")
    described = ddb.describe_continuous_backups(TableName=name)["ContinuousBackupsDescription"]
    assert described == {"ContinuousBackupsStatus": "ENABLED",
                         "PointInTimeRecoveryDescription": {"PointInTimeRecoveryStatus": "DISABLED"}}
    missing = unique_name()
    with pytest.raises(ClientError) as excinfo:
        ddb.describe_continuous_backups(TableName=missing)
    assert error_of(excinfo) == ("TableNotFoundException", f"Table not found: {missing}")


@pytest.mark.parametrize(("members", "status", "error"), [
    ({"MultiRegionConsistency": "BAD"}, "ValidationException",
     "1 validation error detected: Value 'BAD' at 'multiRegionConsistency' failed to satisfy constraint: Member "
     "must satisfy enum value set: [EVENTUAL, STRONG]"),
    ({"MultiRegionConsistency": 5}, "SerializationException", "NUMBER_VALUE cannot be converted to String"),
    ({"ReplicaUpdates": []}, "ValidationException",
     "1 validation error detected: Value '[]' at 'replicaUpdates' failed to satisfy constraint: Member must have "
     "length greater than or equal to 1"),
    ({"ReplicaUpdates": [{"Create": {}}], "DeletionProtectionEnabled": False}, "ValidationException",
     "1 validation error detected: Value null at 'replicaUpdates.1.member.create.regionName' failed to satisfy "
     "constraint: Member must not be null"),
    ({"GlobalTableWitnessUpdates": [{"Create": {"RegionName": "a"}}, {"Delete": {"RegionName": "b"}}]},
     "ValidationException", "length less than or equal to 1"),
    ({"GlobalTableSettingsReplicationMode": "BAD"}, "ValidationException",
     "Member must satisfy enum value set: [ENABLED, ENABLED_WITH_OVERRIDES, DISABLED]"),
], ids=["consistency-enum", "consistency-type", "replicas-empty", "replica-region-null", "witnesses-two",
        "mode-enum"])
def test_update_table_global_table_members_are_checked_for_shape(server, ddb, members, status, error):
    """The global-table members of UpdateTable are checked as the API defines them, before anything else; a
    request refused for one of them changes nothing."""
    name = create_table(ddb)
    response, data = call(server, json.dumps({"TableName": name, **members}),
                          target="DynamoDB_20120810.UpdateTable")
    body = json.loads(data)
    assert response.status == 400 and body["__type"].endswith("#" + status)
    assert error in body.get("message", body.get("Message"))
    _, data = call(server, json.dumps({"TableName": name}), target="DynamoDB_20120810.DescribeTable")
    assert json.loads(data)["Table"]["DeletionProtectionEnabled"] is False


@pytest.mark.parametrize(("members", "error"), [
    ({"ResourcePolicy": 5}, "NUMBER_VALUE cannot be converted to String"),
    ({"GlobalTableSourceArn": ""}, "Value '' at 'globalTableSourceArn' failed to satisfy constraint: Member must "
                                   "have length greater than or equal to 1"),
    ({"GlobalTableSettingsReplicationMode": "BAD"}, "Value 'BAD' at 'globalTableSettingsReplicationMode' failed "
                                                    "to satisfy constraint: Member must satisfy enum value set"),
], ids=["policy-type", "source-arn-empty", "mode-enum"])
def test_create_table_global_members_are_checked_for_shape(server, members, error):
    """CreateTable's ResourcePolicy, GlobalTableSourceArn and GlobalTableSettingsReplicationMode have the API's
    types and constraints; a refused request creates nothing."""
    name = unique_name()
    request = {"TableName": name, "BillingMode": "PAY_PER_REQUEST",
               "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
               "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}], **members}
    response, data = call(server, json.dumps(request), target="DynamoDB_20120810.CreateTable")
    body = json.loads(data)
    assert response.status == 400
    assert error in body.get("message", body.get("Message"))
    response, _ = call(server, json.dumps({"TableName": name}), target="DynamoDB_20120810.DescribeTable")
    assert response.status == 400
