"""The 2024-2026 additions to the control plane (global-table settings, witnesses, replicas of a table that has
none, point-in-time recovery's description) and the wording of enumerations and missing members, through boto3
and raw requests."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.api.test_protocol import call
from tests.conftest import make_client, unique_name

DEFS = [{"AttributeName": "pk", "AttributeType": "S"}]
SCHEMA = [{"AttributeName": "pk", "KeyType": "HASH"}]
ENUM = "failed to satisfy constraint: Member must satisfy enum value set: "


def raw(server, operation: str, body: dict[str, Any]) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    """Status, error type (without its namespace) and message of a raw DynamoDB request."""
    response, data = call(server, json.dumps(body), target=f"DynamoDB_20120810.{operation}")
    answer = json.loads(data) if data else {}
    return response.status, str(answer.get("__type", "")).rsplit("#", 1)[-1], str(
        answer.get("message", answer.get("Message", "")))


def refusal(call_it: Any, **request: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as excinfo:
        call_it(**request)
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


# --- enumerations, listed in DynamoDB's order -------------------------------------------------------------------


def _table(**members: Any) -> dict[str, Any]:
    return {"TableName": unique_name(), "AttributeDefinitions": DEFS, "KeySchema": SCHEMA,
            "BillingMode": "PAY_PER_REQUEST", **members}


@pytest.mark.parametrize(("operation", "body", "at", "values"), [
    ("CreateTable", _table(AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "BOOL"}]),
     "attributeDefinitions.1.member.attributeType", "[B, N, S]"),
    ("CreateTable", _table(AttributeDefinitions=[*DEFS, {"AttributeName": "g", "AttributeType": "S"}],
                           GlobalSecondaryIndexes=[{"IndexName": "gsi", "KeySchema": [
                               {"AttributeName": "g", "KeyType": "HASH"}], "Projection": {"ProjectionType": "X"}}]),
     "globalSecondaryIndexes.1.member.projection.projectionType", "[ALL, INCLUDE, KEYS_ONLY]"),
    ("CreateTable", _table(TableClass="COLD"), "tableClass", "[STANDARD_INFREQUENT_ACCESS, STANDARD]"),
    ("CreateTable", _table(SSESpecification={"SSEType": "X"}), "sSESpecification.sSEType", "[AES256, KMS]"),
    ("CreateTable", _table(GlobalTableSettingsReplicationMode="X"), "globalTableSettingsReplicationMode",
     "[ENABLED, ENABLED_WITH_OVERRIDES, DISABLED]"),
    ("Query", {"TableName": "any-table", "KeyConditionExpression": "pk = :p",
               "ExpressionAttributeValues": {":p": {"S": "a"}}, "Select": "all"},
     "select", "[SPECIFIC_ATTRIBUTES, COUNT, ALL_ATTRIBUTES, ALL_PROJECTED_ATTRIBUTES]"),
    ("PutItem", {"TableName": "any-table", "Item": {"pk": {"S": "a"}}, "ConditionalOperator": "XOR"},
     "conditionalOperator", "[OR, AND]"),
    ("UpdateItem", {"TableName": "any-table", "Key": {"pk": {"S": "a"}},
                    "AttributeUpdates": {"a": {"Action": "XX", "Value": {"S": "x"}}}},
     "attributeUpdates.a.member.action", "[ADD, DELETE, PUT]"),
], ids=["attribute-type", "projection-type", "table-class", "sse-type", "replication-mode", "select",
        "conditional-operator", "attribute-action"])
def test_enumerations_are_listed_in_dynamodb_order(server, operation, body, at, values):
    """DynamoDB lists an enumeration's values in its hash-set order, not the API model's: recorded texts ([B, N, S],
    [ALL, INCLUDE, KEYS_ONLY], [SPECIFIC_ATTRIBUTES, COUNT, ...], [OR, AND]) and the rule they follow for the rest."""
    status, kind, message = raw(server, operation, body)
    assert (status, kind) == (400, "ValidationException")
    assert message == f"1 validation error detected: Value '{body_value(body, at)}' at '{at}' {ENUM}{values}"


def body_value(body: dict[str, Any], at: str) -> str:
    """The refused value at a message path (`a.1.member.b`), read back from the request."""
    node: Any = body
    for part in at.split("."):
        if part == "member":
            continue
        if part.isdigit():
            node = node[int(part) - 1]
        else:
            node = next(value for key, value in node.items() if key.lower() == part.lower())
    return str(node)


def test_shard_iterator_type_is_listed_in_dynamodb_order(server, ddb):
    """The Streams API shares the rule: [AFTER_SEQUENCE_NUMBER, LATEST, AT_SEQUENCE_NUMBER, TRIM_HORIZON]."""
    name = unique_name()
    arn = ddb.create_table(**_table(TableName=name, StreamSpecification={
        "StreamEnabled": True, "StreamViewType": "KEYS_ONLY"}))["TableDescription"]["LatestStreamArn"]
    streams = make_client(server.endpoint, "dynamodbstreams")
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    code, message = refusal(streams.get_shard_iterator, StreamArn=arn, ShardId=shard, ShardIteratorType="FIRST")
    assert (code, message) == ("ValidationException", "1 validation error detected: Value 'FIRST' at "
                               f"'shardIteratorType' {ENUM}[AFTER_SEQUENCE_NUMBER, LATEST, AT_SEQUENCE_NUMBER, "
                               "TRIM_HORIZON]")


# --- a missing required member, in the form each operation uses ----------------------------------------------

REQUIRED = "The parameter 'TableName' is required but was not present in the request"


@pytest.mark.parametrize(("operation", "body"), [
    ("CreateTable", {}),
    ("CreateTable", {"AttributeDefinitions": DEFS, "KeySchema": SCHEMA, "BillingMode": "PAY_PER_REQUEST"}),
    ("DescribeTable", {}),
    ("DeleteTable", {}),
    ("UpdateTable", {"DeletionProtectionEnabled": True}),
    ("UpdateTable", {}),
    ("DescribeContinuousBackups", {}),
    ("UpdateContinuousBackups", {}),
    ("UpdateTimeToLive", {}),
    ("UpdateTimeToLive", {"TimeToLiveSpecification": {"Enabled": True, "AttributeName": "e"}}),
    ("DescribeTimeToLive", {}),
])
def test_control_plane_names_a_missing_table_name_alone(server, operation, body):
    """The table operations of the control plane refuse a request without TableName in their own form, alone,
    whatever else is missing."""
    assert raw(server, operation, body) == (400, "ValidationException", REQUIRED)


def test_item_operations_keep_the_enveloped_form(server):
    """GetItem reports the same absence inside the "validation error detected" envelope, with its other errors."""
    assert raw(server, "GetItem", {"Key": {"pk": {"S": "a"}}}) == (
        400, "ValidationException", "1 validation error detected: Value null at 'tableName' failed to satisfy "
        "constraint: Member must not be null")


def test_a_member_of_the_wrong_type_is_still_refused_first(server):
    """Deserialization comes before any check: a wrong JSON type beside a missing TableName is that error."""
    assert raw(server, "CreateTable", {"KeySchema": "pk"}) == (
        400, "SerializationException", "Unrecognized collection type class java.lang.String")


# --- global-table members: this server keeps no replicas ------------------------------------------------------


@pytest.mark.parametrize("members", [
    {"ReplicaUpdates": [{"Create": {"RegionName": "us-west-2"}}]},
    {"ReplicaUpdates": [{"Delete": {"RegionName": "us-west-2"}}]},
    {"GlobalTableWitnessUpdates": [{"Create": {"RegionName": "us-west-2"}}]},
    {"GlobalTableSettingsReplicationMode": "ENABLED"},
    {"DisassociationProtectionEnabled": False},
], ids=["replica-create", "replica-delete", "witness-create", "settings-replication", "disassociation-protection"])
def test_global_table_changes_are_refused_by_name(server, ddb, members):
    """A replica, witness, settings-replication or replica disassociation-protection change is refused by name
    (nothing pretends it was made), only once the table is found; the table stays a regional table without
    replicas."""
    name = unique_name()
    ddb.create_table(**_table(TableName=name))
    member = next(iter(members))
    assert raw(server, "UpdateTable", {"TableName": "no-such-table", **members})[1] == "ResourceNotFoundException"
    status, kind, message = raw(server, "UpdateTable", {"TableName": name, **members})
    assert (status, kind) == (501, "UnsupportedOperationException")
    assert message == (f"UpdateTable's {member} is not supported by OpenDDB: its tables have no replicas in other "
                       "Regions or accounts (docs/OPERATIONS.md)")  # said once (it once ended in a second sentence)
    table = ddb.describe_table(TableName=name)["Table"]
    assert table["TableStatus"] == "ACTIVE"
    assert not {"Replicas", "GlobalTableVersion", "GlobalTableWitnesses", "MultiRegionConsistency",
                "GlobalTableSettingsReplicationMode", "DisassociationProtectionEnabled"} & set(table)


def test_disassociation_protection_is_held_to_its_shape(server):
    """DisassociationProtectionEnabled is a Boolean: another JSON type is refused as any member of the wrong type
    is, before the table is looked up."""
    assert raw(server, "UpdateTable", {"TableName": "no-such-table", "DisassociationProtectionEnabled": "yes"}) == (
        400, "SerializationException", "STRING_VALUE cannot be converted to Boolean")


def test_settings_replication_with_overrides_is_refused_for_a_regional_table(server, ddb):
    """ENABLED_WITH_OVERRIDES is DynamoDB's refusal for a regional table, which every table here is."""
    name = unique_name()
    ddb.create_table(**_table(TableName=name))
    assert raw(server, "UpdateTable", {"TableName": name, "GlobalTableSettingsReplicationMode":
                                       "ENABLED_WITH_OVERRIDES"}) == (
        400, "ValidationException", "Value 'ENABLED_WITH_OVERRIDES' at 'GlobalTableSettingsReplicationMode' failed "
        "to satisfy constraint: Only ENABLED and DISABLED settings replication are supported for a Regional Table.")


@pytest.mark.parametrize(("members", "what"), [
    ({"TableClass": "STANDARD_INFREQUENT_ACCESS", "ReplicaUpdates": [{"Delete": {"RegionName": "us-west-2"}}]},
     "TableClass"),
    ({"DeletionProtectionEnabled": True, "GlobalTableWitnessUpdates": [{"Delete": {"RegionName": "us-west-2"}}]},
     "DeletionProtection"),
    ({"SSESpecification": {"Enabled": True}, "GlobalTableSettingsReplicationMode": "DISABLED"},
     "Server-Side Encryption"),
], ids=["class-with-replicas", "protection-with-witness", "sse-with-settings-replication"])
def test_alone_members_count_global_table_members_as_operations(server, ddb, members, what):
    """TableClass, deletion protection and encryption must be the only operation of an UpdateTable: a global-table
    member beside them is another one, refused the same way (before, the replica change was silently dropped)."""
    name = unique_name()
    ddb.create_table(**_table(TableName=name))
    assert raw(server, "UpdateTable", {"TableName": name, **members}) == (
        400, "ValidationException", f"One or more parameter values were invalid: {what} modification must be the "
        "only operation in the request")
    table = ddb.describe_table(TableName=name)["Table"]
    assert (table["DeletionProtectionEnabled"], "TableClassSummary" in table) == (False, False)


def test_point_in_time_recovery_is_described_off(ddb):
    """DescribeContinuousBackups of a new table: continuous backups ENABLED (as for every DynamoDB table), point-in-time
    recovery off, so no RecoveryPeriodInDays or restorable times, which DynamoDB gives only while it is enabled."""
    name = unique_name()
    ddb.create_table(**_table(TableName=name))
    description = ddb.describe_continuous_backups(TableName=name)["ContinuousBackupsDescription"]
    assert description == {"ContinuousBackupsStatus": "ENABLED",
                           "PointInTimeRecoveryDescription": {"PointInTimeRecoveryStatus": "DISABLED"}}


# --- UpdateContinuousBackups: checked in full; point-in-time recovery turns on and off ------------------------


def _pitr(name: str, **specification: Any) -> dict[str, Any]:
    return {"TableName": name, "PointInTimeRecoverySpecification": specification}


@pytest.mark.parametrize(("specification", "violation"), [
    ({"PointInTimeRecoveryEnabled": True, "RecoveryPeriodInDays": 0},
     "Value '0' at 'pointInTimeRecoverySpecification.recoveryPeriodInDays' failed to satisfy constraint: Member must "
     "have value greater than or equal to 1"),
    ({"PointInTimeRecoveryEnabled": True, "RecoveryPeriodInDays": 36},
     "Value '36' at 'pointInTimeRecoverySpecification.recoveryPeriodInDays' failed to satisfy constraint: Member "
     "must have value less than or equal to 35"),
    ({"RecoveryPeriodInDays": 7},
     "Value null at 'pointInTimeRecoverySpecification.pointInTimeRecoveryEnabled' failed to satisfy constraint: "
     "Member must not be null"),
], ids=["period-0", "period-36", "enabled-missing"])
def test_recovery_period_is_checked_before_the_table(server, specification, violation):
    """RecoveryPeriodInDays is 1-35 (the API Reference's PointInTimeRecoverySpecification) and
    PointInTimeRecoveryEnabled is required: refused in the envelope, before the table is looked up."""
    assert raw(server, "UpdateContinuousBackups", _pitr("no-such-table", **specification)) == (
        400, "ValidationException", f"1 validation error detected: {violation}")


def test_recovery_period_is_refused_when_disabling(server):
    """DynamoDB's own rule (ack-api-quirks' DynamoDB catalogue, 2026-10): no period for recovery being turned off."""
    assert raw(server, "UpdateContinuousBackups", _pitr("no-such-table", PointInTimeRecoveryEnabled=False,
                                                        RecoveryPeriodInDays=7)) == (
        400, "ValidationException", "Invalid Request: Cannot specify RecoveryPeriodInDays when disabling "
        "point-in-time recovery.")


def test_update_continuous_backups_needs_its_specification(server):
    assert raw(server, "UpdateContinuousBackups", {"TableName": "no-such-table"}) == (
        400, "ValidationException", "1 validation error detected: Value null at 'pointInTimeRecoverySpecification' "
        "failed to satisfy constraint: Member must not be null")


def test_point_in_time_recovery_turns_on_and_off(server, ddb):
    """Turning it on answers the window (RecoveryPeriodInDays, 35 by default, and the restorable times); turning it
    off answers it off; a missing table is the backup operations' TableNotFoundException."""
    name = unique_name()
    ddb.create_table(**_table(TableName=name))
    on = ddb.update_continuous_backups(TableName=name, PointInTimeRecoverySpecification={
        "PointInTimeRecoveryEnabled": True, "RecoveryPeriodInDays": 7})["ContinuousBackupsDescription"]
    recovery = on["PointInTimeRecoveryDescription"]
    assert (on["ContinuousBackupsStatus"], recovery["PointInTimeRecoveryStatus"], recovery["RecoveryPeriodInDays"]) \
        == ("ENABLED", "ENABLED", 7)
    assert recovery["EarliestRestorableDateTime"] <= recovery["LatestRestorableDateTime"]
    again = ddb.update_continuous_backups(TableName=name, PointInTimeRecoverySpecification={
        "PointInTimeRecoveryEnabled": True})["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]
    # (the period back to its default; the window still starts when recovery was turned on)
    assert (again["RecoveryPeriodInDays"], again["EarliestRestorableDateTime"]) == (
        35, recovery["EarliestRestorableDateTime"])
    off = {"PointInTimeRecoveryEnabled": False}
    assert ddb.update_continuous_backups(TableName=name, PointInTimeRecoverySpecification=off)[
        "ContinuousBackupsDescription"] == {"ContinuousBackupsStatus": "ENABLED",
                                           "PointInTimeRecoveryDescription": {"PointInTimeRecoveryStatus": "DISABLED"}}
    code, message = refusal(ddb.update_continuous_backups, TableName="no-such-table",
                            PointInTimeRecoverySpecification=off)
    assert (code, message) == ("TableNotFoundException", "Table not found: no-such-table")
    assert ddb.describe_continuous_backups(TableName=name)["ContinuousBackupsDescription"][
        "PointInTimeRecoveryDescription"] == {"PointInTimeRecoveryStatus": "DISABLED"}
