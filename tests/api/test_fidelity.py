"""Response shapes and messages of the control plane checked against what real DynamoDB answers."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from tests.api.test_protocol import call
from tests.conftest import table_exists, unique_name

DEFS = [{"AttributeName": "pk", "AttributeType": "S"}]
SCHEMA = [{"AttributeName": "pk", "KeyType": "HASH"}]
ONE = {"ReadCapacityUnits": 1, "WriteCapacityUnits": 1}
INVALID = "One or more parameter values were invalid: "


def error_of(excinfo) -> tuple[str, str]:
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


def _provisioned(ddb, **extra) -> str:
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA, ProvisionedThroughput=ONE, **extra)
    return name


def _on_demand(ddb) -> str:
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA, BillingMode="PAY_PER_REQUEST")
    return name


def test_billing_mode_summary_absent_for_provisioned_tables(ddb):
    """A table created PROVISIONED (even with BillingMode sent) has no BillingModeSummary."""
    for extra in ({}, {"BillingMode": "PROVISIONED"}):
        name = _provisioned(ddb, **extra)
        assert "BillingModeSummary" not in ddb.describe_table(TableName=name)["Table"]


def test_create_response_lacks_settled_members(ddb):
    """CreateTable answers without WarmThroughput and LastUpdateToPayPerRequestDateTime; DescribeTable has both."""
    name = unique_name()
    created = ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                               BillingMode="PAY_PER_REQUEST")["TableDescription"]
    assert "WarmThroughput" not in created
    assert created["BillingModeSummary"] == {"BillingMode": "PAY_PER_REQUEST"}
    described = ddb.describe_table(TableName=name)["Table"]
    assert "LastUpdateToPayPerRequestDateTime" in described["BillingModeSummary"]
    assert described["ProvisionedThroughput"] == {"NumberOfDecreasesToday": 0, "ReadCapacityUnits": 0,
                                                  "WriteCapacityUnits": 0}
    assert described["WarmThroughput"] == {"ReadUnitsPerSecond": 12000, "WriteUnitsPerSecond": 4000,
                                           "Status": "ACTIVE"}


def test_warm_throughput_of_provisioned_table(ddb):
    """A provisioned table's WarmThroughput follows its capacity; once on-demand it keeps 12000/4000."""
    name = _provisioned(ddb)
    assert ddb.describe_table(TableName=name)["Table"]["WarmThroughput"] == {
        "ReadUnitsPerSecond": 1, "WriteUnitsPerSecond": 1, "Status": "ACTIVE"}
    ddb.update_table(TableName=name, BillingMode="PAY_PER_REQUEST")
    ddb.update_table(TableName=name, BillingMode="PROVISIONED", ProvisionedThroughput=ONE)
    table = ddb.describe_table(TableName=name)["Table"]
    assert table["WarmThroughput"]["ReadUnitsPerSecond"] == 12000
    # Once on-demand, the summary stays, now naming PROVISIONED with the time of the switch to on-demand.
    assert table["BillingModeSummary"]["BillingMode"] == "PROVISIONED"
    assert "LastUpdateToPayPerRequestDateTime" in table["BillingModeSummary"]


def test_switch_from_on_demand_answers_new_units(ddb):
    """Switching an on-demand table to PROVISIONED answers the new units, stamped as an increase, and keeps the
    time of the switch to on-demand (the AWS CLI's update-table Example 1, a real answer); DescribeTable agrees."""
    name = _on_demand(ddb)
    created = ddb.describe_table(TableName=name)["Table"]["BillingModeSummary"]["LastUpdateToPayPerRequestDateTime"]
    switched = ddb.update_table(TableName=name, BillingMode="PROVISIONED",
                                ProvisionedThroughput={"ReadCapacityUnits": 15, "WriteCapacityUnits": 10})
    answer = switched["TableDescription"]
    assert answer["TableStatus"] == "UPDATING"
    throughput = answer["ProvisionedThroughput"]
    assert (throughput["ReadCapacityUnits"], throughput["WriteCapacityUnits"]) == (15, 10)
    assert throughput["NumberOfDecreasesToday"] == 0 and "LastDecreaseDateTime" not in throughput
    assert throughput["LastIncreaseDateTime"] >= created
    assert answer["BillingModeSummary"] == {"BillingMode": "PROVISIONED",
                                            "LastUpdateToPayPerRequestDateTime": created}
    table = ddb.describe_table(TableName=name)["Table"]
    assert table["ProvisionedThroughput"] == throughput
    assert table["BillingModeSummary"] == answer["BillingModeSummary"]
    # Back to on-demand: that answer still lacks the new switch's time, and shows 0/0 stamped as a decrease.
    back = ddb.update_table(TableName=name, BillingMode="PAY_PER_REQUEST")["TableDescription"]
    assert back["BillingModeSummary"] == {"BillingMode": "PAY_PER_REQUEST"}
    assert (back["ProvisionedThroughput"]["ReadCapacityUnits"], back["ProvisionedThroughput"]["WriteCapacityUnits"],
            "LastDecreaseDateTime" in back["ProvisionedThroughput"]) == (0, 0, True)


def test_table_throughput_mode(server, ddb):
    """TableThroughputMode, outside the SDKs' models, is honoured as DynamoDB does (measured with raw requests in
    2026): it stands for an absent BillingMode, its value is checked first, and TableThroughputModeSummary repeats
    BillingModeSummary."""
    def send(operation: str, **request) -> tuple[int, dict]:
        response, data = call(server, json.dumps(request), f"DynamoDB_20120810.{operation}")
        return response.status, json.loads(data)

    name = unique_name()
    status, body = send("CreateTable", TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                        TableThroughputMode="PAY_PER_REQUEST")
    assert status == 200, body
    assert body["TableDescription"]["TableThroughputModeSummary"] == {"TableThroughputMode": "PAY_PER_REQUEST"}
    table = ddb.describe_table(TableName=name)["Table"]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    status, body = send("DescribeTable", TableName=name)
    summary = body["Table"]["BillingModeSummary"]
    assert body["Table"]["TableThroughputModeSummary"] == {
        "TableThroughputMode": "PAY_PER_REQUEST",
        "LastUpdateToPayPerRequestDateTime": summary["LastUpdateToPayPerRequestDateTime"]}
    # BillingMode decides when both are sent; a value outside the enum is refused even then, before the lookup.
    status, body = send("UpdateTable", TableName=name, BillingMode="PROVISIONED", TableThroughputMode="PAY_PER_REQUEST",
                        ProvisionedThroughput=ONE)
    assert status == 200 and body["TableDescription"]["BillingModeSummary"]["BillingMode"] == "PROVISIONED", body
    for operation, table_name in (("CreateTable", unique_name()), ("UpdateTable", unique_name())):
        status, body = send(operation, TableName=table_name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                            BillingMode="PAY_PER_REQUEST", TableThroughputMode="BOGUS")
        assert (status, body["__type"].split("#")[-1]) == (400, "ValidationException"), body
        assert body["message"] == ("1 validation error detected: Value 'BOGUS' at 'tableThroughputMode' failed to "
                                   "satisfy constraint: Member must satisfy enum value set: [PROVISIONED, "
                                   "PAY_PER_REQUEST]")
    assert ddb.describe_table(TableName=name)["Table"]["TableStatus"] == "ACTIVE"
    assert "TableThroughputModeSummary" not in ddb.describe_table(TableName=_provisioned(ddb))["Table"]


def test_no_stream_members_without_stream(ddb):
    """Without a stream, no StreamSpecification / LatestStreamArn is described."""
    table = ddb.describe_table(TableName=_on_demand(ddb))["Table"]
    assert not {"StreamSpecification", "LatestStreamArn", "LatestStreamLabel"} & set(table)
    assert table["DeletionProtectionEnabled"] is False


def test_update_table_status(ddb):
    """UpdateTable answers UPDATING for a billing switch, ACTIVE for a deletion-protection change."""
    name = _on_demand(ddb)
    switched = ddb.update_table(TableName=name, BillingMode="PROVISIONED",
                                ProvisionedThroughput=ONE)["TableDescription"]
    assert switched["TableStatus"] == "UPDATING"
    protected = ddb.update_table(TableName=name, DeletionProtectionEnabled=True)["TableDescription"]
    assert protected["TableStatus"] == "ACTIVE"
    ddb.update_table(TableName=name, DeletionProtectionEnabled=False)


def test_update_table_billing_messages(ddb):
    """DynamoDB's wording for throughput sent with PAY_PER_REQUEST, and PROVISIONED without throughput."""
    name = _provisioned(ddb)
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, BillingMode="PAY_PER_REQUEST", ProvisionedThroughput=ONE)
    assert error_of(excinfo) == ("ValidationException", INVALID + "ProvisionedThroughput cannot be specified when "
                                 "BillingMode is PAY_PER_REQUEST")
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, BillingMode="PROVISIONED")
    assert error_of(excinfo) == ("ValidationException", INVALID + "ProvisionedThroughput must be specified when "
                                 "BillingMode is PROVISIONED")
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, BillingMode="PROVISIONED", ProvisionedThroughput=ONE)
    assert error_of(excinfo)[1].startswith("The provisioned throughput for the table will not change.")


def test_update_table_nothing_to_change_message(ddb):
    """The 'At least one of' message lists every member DynamoDB names today."""
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=_on_demand(ddb), AttributeDefinitions=DEFS)
    assert error_of(excinfo) == ("ValidationException", (
        "At least one of ProvisionedThroughput, BillingMode, UpdateStreamEnabled, GlobalSecondaryIndexUpdates, "
        "SSESpecification, ReplicaUpdates, MultiAccountReplicaReady, ReplicaTransitRoleArn, MultiRegionConsistency, "
        "DeletionProtectionEnabled, OnDemandThroughput, WarmThroughput or TableClass is required"))


def test_duplicate_attribute_definition(ddb):
    """A repeated AttributeDefinitions name has its own unprefixed message."""
    with pytest.raises(ClientError) as excinfo:
        ddb.create_table(TableName=unique_name(), AttributeDefinitions=DEFS * 2, KeySchema=SCHEMA,
                         BillingMode="PAY_PER_REQUEST")
    assert error_of(excinfo) == ("ValidationException", "Attribute Name is duplicated: pk")


@pytest.mark.parametrize(("spec", "message"), [
    ({"StreamEnabled": True}, INVALID + "Table is being created with a stream enabled, UpdateViewType is required"),
    ({"StreamEnabled": False, "StreamViewType": "KEYS_ONLY"},
     INVALID + "Table is being created with a stream disabled, UpdateViewType should not be specified"),
    ({"StreamEnabled": True, "StreamViewType": "new_image"},  # the view types in DynamoDB's order
     "1 validation error detected: Value 'new_image' at 'streamSpecification.streamViewType' failed to satisfy "
     "constraint: Member must satisfy enum value set: [OLD_IMAGE, KEYS_ONLY, NEW_AND_OLD_IMAGES, NEW_IMAGE]"),
])
def test_create_table_stream_specification(ddb, spec, message):
    """A StreamSpecification whose members disagree, or with an unknown view type, is refused in DynamoDB's words."""
    with pytest.raises(ClientError) as excinfo:
        ddb.create_table(TableName=unique_name(), AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                         BillingMode="PAY_PER_REQUEST", StreamSpecification=spec)
    assert error_of(excinfo) == ("ValidationException", message)


def test_create_table_stream_disabled_accepted(ddb):
    """StreamEnabled false at creation is accepted and describes no stream."""
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA, BillingMode="PAY_PER_REQUEST",
                     StreamSpecification={"StreamEnabled": False})
    assert "LatestStreamArn" not in ddb.describe_table(TableName=name)["Table"]


def test_update_table_stream_specification(ddb):
    """Disabling a stream the table does not have is DynamoDB's 'no stream to disable'."""
    name = _on_demand(ddb)
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, StreamSpecification={"StreamEnabled": False})
    assert error_of(excinfo) == ("ValidationException", f"Table has no stream to disable: TableName: {name}")
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, StreamSpecification={"StreamEnabled": True})
    assert error_of(excinfo) == ("ValidationException",
                                 INVALID + "If stream is being enabled then UpdateViewType is required")


GSI_DEFS = [*DEFS, {"AttributeName": "g", "AttributeType": "S"}]


def _gsi(name: str = "gsi1", **extra) -> dict:
    return {"IndexName": name, "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
            "Projection": {"ProjectionType": "ALL"}, **extra}


def test_gsi_without_throughput_on_provisioned_create(ddb):
    """CreateTable words a missing index throughput 'is not specified'."""
    with pytest.raises(ClientError) as excinfo:
        ddb.create_table(TableName=unique_name(), AttributeDefinitions=GSI_DEFS, KeySchema=SCHEMA,
                         ProvisionedThroughput=ONE, GlobalSecondaryIndexes=[_gsi()])
    assert error_of(excinfo) == ("ValidationException",
                                 INVALID + "ProvisionedThroughput is not specified for index: gsi1")


def test_gsi_key_schema_order(ddb):
    """A RANGE element before a HASH element of a multi-attribute key is DynamoDB's 'must precede'."""
    defs = [*GSI_DEFS, {"AttributeName": "h", "AttributeType": "S"}, {"AttributeName": "r", "AttributeType": "S"}]
    gsi = _gsi(KeySchema=[{"AttributeName": "g", "KeyType": "HASH"}, {"AttributeName": "r", "KeyType": "RANGE"},
                          {"AttributeName": "h", "KeyType": "HASH"}])
    with pytest.raises(ClientError) as excinfo:
        ddb.create_table(TableName=unique_name(), AttributeDefinitions=defs, KeySchema=SCHEMA,
                         BillingMode="PAY_PER_REQUEST", GlobalSecondaryIndexes=[gsi])
    assert error_of(excinfo) == ("ValidationException",
                                 INVALID + "All HASH key attributes must precede RANGE key attributes in the KeySchema")


def test_gsi_update_entry_without_action(ddb):
    """A GlobalSecondaryIndexUpdates entry with no action names the three members."""
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=_on_demand(ddb), GlobalSecondaryIndexUpdates=[{}])
    assert error_of(excinfo) == ("ValidationException", INVALID + "One of GlobalSecondaryIndexUpdate.Update, "
                                 "GlobalSecondaryIndexUpdate.Create, GlobalSecondaryIndexUpdate.Delete must not be "
                                 "null")


def test_delete_lsi_through_gsi_updates(ddb):
    """A local index named in a GlobalSecondaryIndexUpdates Delete is refused as not global."""
    name = unique_name()
    ddb.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[*DEFS, {"AttributeName": "sk", "AttributeType": "S"},
                              {"AttributeName": "l", "AttributeType": "S"}],
        KeySchema=[*SCHEMA, {"AttributeName": "sk", "KeyType": "RANGE"}],
        LocalSecondaryIndexes=[{"IndexName": "lsi1", "Projection": {"ProjectionType": "ALL"},
                                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                                              {"AttributeName": "l", "KeyType": "RANGE"}]}])
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "lsi1"}}])
    assert error_of(excinfo) == ("ValidationException",
                                 "Cannot delete an index that is not a GlobalSecondaryIndex: lsi1")


def test_warm_throughput_keeps_the_highest_capacity(ddb):
    """WarmThroughput reports the highest capacity a table ever had: lowering capacity does not lower it."""
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 5})
    ddb.update_table(TableName=name, ProvisionedThroughput={"ReadCapacityUnits": 20, "WriteCapacityUnits": 10})
    ddb.update_table(TableName=name, ProvisionedThroughput={"ReadCapacityUnits": 2, "WriteCapacityUnits": 3})
    table = ddb.describe_table(TableName=name)["Table"]
    assert table["ProvisionedThroughput"]["ReadCapacityUnits"] == 2
    assert (table["WarmThroughput"]["ReadUnitsPerSecond"], table["WarmThroughput"]["WriteUnitsPerSecond"]) == (20, 10)


def _on_demand_with_gsi(ddb) -> str:
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=GSI_DEFS, KeySchema=SCHEMA, BillingMode="PAY_PER_REQUEST",
                     GlobalSecondaryIndexes=[_gsi()])
    return name


def test_switch_to_provisioned_names_every_gsi_without_throughput(ddb):
    """Every index left without capacity is named, comma-joined (quoted from DynamoDB, 2023); one given its
    capacity is not."""
    name = unique_name()
    ddb.create_table(TableName=name, AttributeDefinitions=GSI_DEFS, KeySchema=SCHEMA, BillingMode="PAY_PER_REQUEST",
                     GlobalSecondaryIndexes=[_gsi("index-A"), _gsi("index-B"), _gsi("index-C")])
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, BillingMode="PROVISIONED", ProvisionedThroughput=ONE)
    assert error_of(excinfo) == ("ValidationException", INVALID + "ProvisionedThroughput must be specified for index: "
                                 "index-A,index-B,index-C")
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, BillingMode="PROVISIONED", ProvisionedThroughput=ONE,
                         GlobalSecondaryIndexUpdates=[{"Update": {"IndexName": "index-B",
                                                                  "ProvisionedThroughput": ONE}}])
    assert error_of(excinfo)[1] == INVALID + "ProvisionedThroughput must be specified for index: index-A,index-C"


def test_switch_to_provisioned_needs_throughput_for_every_gsi(ddb):
    """On-demand to provisioned: each GSI must get its capacity in the same request (checked against the new
    mode, not the old one); without it the switch is refused and nothing changes."""
    name = _on_demand_with_gsi(ddb)
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, BillingMode="PROVISIONED", ProvisionedThroughput=ONE)
    assert error_of(excinfo) == ("ValidationException", INVALID + "ProvisionedThroughput must be specified for index: "
                                 "gsi1")
    assert ddb.describe_table(TableName=name)["Table"]["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    ddb.update_table(TableName=name, BillingMode="PROVISIONED", ProvisionedThroughput=ONE,
                     GlobalSecondaryIndexUpdates=[{"Update": {"IndexName": "gsi1", "ProvisionedThroughput": {
                         "ReadCapacityUnits": 3, "WriteCapacityUnits": 4}}}])
    table = ddb.describe_table(TableName=name)["Table"]
    gsi = table["GlobalSecondaryIndexes"][0]["ProvisionedThroughput"]
    assert (gsi["ReadCapacityUnits"], gsi["WriteCapacityUnits"]) == (3, 4)
    ddb.update_table(TableName=name, BillingMode="PAY_PER_REQUEST")  # and back: the index capacity goes to 0
    gsi = ddb.describe_table(TableName=name)["Table"]["GlobalSecondaryIndexes"][0]["ProvisionedThroughput"]
    assert (gsi["ReadCapacityUnits"], gsi["WriteCapacityUnits"]) == (0, 0)


def test_duplicate_tag_keys_are_refused(ddb):
    """A key given twice in one request, at creation or in TagResource, refuses the whole request."""
    name = unique_name()
    with pytest.raises(ClientError) as excinfo:
        ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA, BillingMode="PAY_PER_REQUEST",
                         Tags=[{"Key": "a", "Value": "1"}, {"Key": "a", "Value": "2"}])
    assert excinfo.value.response["Error"]["Message"] == (
        "Duplicate Tag Keys provided as input: Duplicate Tag Key found a")
    assert not table_exists(ddb, name)
    arn = ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA, BillingMode="PAY_PER_REQUEST",
                           Tags=[{"Key": "a", "Value": "1"}])["TableDescription"]["TableArn"]
    with pytest.raises(ClientError) as excinfo:
        ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "b", "Value": "1"}, {"Key": "b", "Value": "3"}])
    assert excinfo.value.response["Error"]["Code"] == "ValidationException"
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "a", "Value": "4"}])  # a key tagged again takes the new value
    assert ddb.list_tags_of_resource(ResourceArn=arn)["Tags"] == [{"Key": "a", "Value": "4"}]


def test_duplicate_non_key_attributes_are_refused(ddb):
    with pytest.raises(ClientError) as excinfo:
        ddb.create_table(TableName=unique_name(), AttributeDefinitions=GSI_DEFS, KeySchema=SCHEMA,
                         BillingMode="PAY_PER_REQUEST", GlobalSecondaryIndexes=[_gsi(Projection={
                             "ProjectionType": "INCLUDE", "NonKeyAttributes": ["a", "a"]})])
    assert error_of(excinfo) == ("ValidationException", "One or more parameter values were invalid: Duplicate element "
                                                        "in NonKeyAttributes: a")


def test_index_created_later_counts_toward_the_projected_attribute_limit(ddb):
    """100 NonKeyAttributes across all indexes: an index added by UpdateTable may not pass it either."""
    name = unique_name()
    defs = [*DEFS] + [{"AttributeName": f"g{n}", "AttributeType": "S"} for n in range(6)]
    gsis = [{"IndexName": f"idx{n}", "KeySchema": [{"AttributeName": f"g{n}", "KeyType": "HASH"}],
             "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": [f"a{n}_{m}" for m in range(20)]}}
            for n in range(5)]
    ddb.create_table(TableName=name, AttributeDefinitions=defs[:6], KeySchema=SCHEMA, BillingMode="PAY_PER_REQUEST",
                     GlobalSecondaryIndexes=gsis)
    with pytest.raises(ClientError) as excinfo:
        ddb.update_table(TableName=name, AttributeDefinitions=[defs[6]], GlobalSecondaryIndexUpdates=[{"Create": {
            "IndexName": "idx5", "KeySchema": [{"AttributeName": "g5", "KeyType": "HASH"}],
            "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["zz"]}}}])
    assert excinfo.value.response["Error"]["Code"] == "ValidationException"
    assert "projected attributes" in excinfo.value.response["Error"]["Message"]
    assert len(ddb.describe_table(TableName=name)["Table"]["GlobalSecondaryIndexes"]) == 5
