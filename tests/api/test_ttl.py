"""Time to Live through boto3: UpdateTimeToLive / DescribeTimeToLive and the expiry of items by the server."""

from __future__ import annotations

import json
import time

import pytest
from botocore.exceptions import ClientError

from tests.api.test_protocol import call
from tests.conftest import create_table, unique_name


def error_of(excinfo) -> tuple[str, str]:
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


def ttl_request(ddb, table: str, enabled: bool, name: str):
    return ddb.update_time_to_live(TableName=table,
                                   TimeToLiveSpecification={"Enabled": enabled, "AttributeName": name})


def test_disabled_until_enabled(ddb):
    """A new table has TTL disabled; enabling answers the specification and describes ENABLED with the name."""
    table = create_table(ddb)
    assert ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"] == {"TimeToLiveStatus": "DISABLED"}
    answer = ttl_request(ddb, table, True, "expires")
    assert answer["TimeToLiveSpecification"] == {"AttributeName": "expires", "Enabled": True}
    described = ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    assert described == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires"}
    # The table may be named by its ARN, as every table operation allows.
    arn = ddb.describe_table(TableName=table)["Table"]["TableArn"]
    assert ddb.describe_time_to_live(TableName=arn)["TimeToLiveDescription"]["AttributeName"] == "expires"


@pytest.mark.parametrize(("enabled", "name", "message"), [
    (True, "expires", "TimeToLive is already enabled"),
    (True, "other", "TimeToLive is active on a different AttributeName: current AttributeName is expires"),
    (False, "other", "TimeToLive is active on a different AttributeName: current AttributeName is expires"),
    # What the request asks is checked first; then a second change within the hour is refused.
    (False, "expires", "Time to live has been modified multiple times within a fixed interval"),
])
def test_refused_changes(ddb, enabled, name, message):
    table = create_table(ddb)
    ttl_request(ddb, table, True, "expires")
    with pytest.raises(ClientError) as excinfo:
        ttl_request(ddb, table, enabled, name)
    assert error_of(excinfo) == ("ValidationException", message)
    described = ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    assert described == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires"}


def test_disabling_a_disabled_table(ddb):
    table = create_table(ddb)
    with pytest.raises(ClientError) as excinfo:
        ttl_request(ddb, table, False, "expires")
    assert error_of(excinfo) == ("ValidationException", "TimeToLive is already disabled")


def test_missing_table(ddb):
    name = unique_name()
    for operation in (lambda: ddb.describe_time_to_live(TableName=name),
                      lambda: ttl_request(ddb, name, True, "expires")):
        with pytest.raises(ClientError) as excinfo:
            operation()
        assert error_of(excinfo) == ("ResourceNotFoundException",
                                     f"Requested resource not found: Table: {name} not found")


@pytest.mark.parametrize(("body", "message"), [
    ({}, "Value null at 'timeToLiveSpecification' failed to satisfy constraint: Member must not be null"),
    ({"TimeToLiveSpecification": {"AttributeName": "e"}},
     "Value null at 'timeToLiveSpecification.enabled' failed to satisfy constraint: Member must not be null"),
    ({"TimeToLiveSpecification": {"Enabled": True, "AttributeName": ""}},
     "Value '' at 'timeToLiveSpecification.attributeName' failed to satisfy constraint: Member must have length "
     "greater than or equal to 1"),
])
def test_validation(server, ddb, body, message):
    table = create_table(ddb)
    response, data = call(server, json.dumps({"TableName": table, **body}), "DynamoDB_20120810.UpdateTimeToLive")
    answer = json.loads(data)
    assert response.status == 400
    assert answer["__type"].endswith("#ValidationException")
    assert answer["message"] == "1 validation error detected: " + message
    assert ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"] == {"TimeToLiveStatus": "DISABLED"}


def index_count(ddb, table: str) -> int:
    return ddb.query(TableName=table, IndexName="by-group", KeyConditionExpression="g = :g",
                     ExpressionAttributeValues={":g": {"S": "G"}}, Select="COUNT")["Count"]


def test_expired_items_are_deleted(ddb):
    """Items whose TTL Number is in the past go away (from the table and its index); items expiring later, with
    a TTL more than five years old, or with a TTL attribute of another type stay."""
    table = unique_name()
    ddb.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                           {"AttributeName": "g", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     GlobalSecondaryIndexes=[{"IndexName": "by-group",
                                              "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                              "Projection": {"ProjectionType": "KEYS_ONLY"}}])
    ttl_request(ddb, table, True, "expires")
    now = int(time.time())
    kept = {
        "later": {"N": str(now + 3600)},
        "ancient": {"N": str(now - 6 * 365 * 86400)},
        "string": {"S": str(now - 60)},
        "set": {"NS": [str(now - 60)]},
    }
    for name, value in kept.items():
        ddb.put_item(TableName=table, Item={"pk": {"S": name}, "g": {"S": "G"}, "expires": value})
    ddb.put_item(TableName=table, Item={"pk": {"S": "no-ttl"}, "g": {"S": "G"}})
    for i in range(40):
        ddb.put_item(TableName=table, Item={"pk": {"S": f"gone-{i}"}, "g": {"S": "G"},
                                            "expires": {"N": f"{now - 60 - i}.5"}})
    # Expired items stay readable until the sweep reaches them, so wait for it (it runs about once a second).
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and ddb.scan(TableName=table, Select="COUNT")["Count"] > 5:
        time.sleep(0.2)
    left = {item["pk"]["S"] for item in ddb.scan(TableName=table)["Items"]}
    assert left == {*kept, "no-ttl"}
    assert index_count(ddb, table) == 5
