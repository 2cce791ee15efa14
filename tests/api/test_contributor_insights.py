"""Contributor Insights: UpdateContributorInsights, DescribeContributorInsights and ListContributorInsights through
boto3, both modes, and the most accessed / most throttled keys of a run served in GET /metrics by rule name."""

from __future__ import annotations

import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.api.test_metrics import scrape
from tests.conftest import ServerProcess, one_try_client, unique_name


def _table(ddb: Any, name: str, write: int = 100, sort: bool = False) -> None:
    definitions = [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "g", "AttributeType": "S"}]
    schema = [{"AttributeName": "pk", "KeyType": "HASH"}]
    if sort:
        definitions.append({"AttributeName": "sk", "AttributeType": "S"})
        schema.append({"AttributeName": "sk", "KeyType": "RANGE"})
    ddb.create_table(TableName=name, AttributeDefinitions=definitions, KeySchema=schema,
                     ProvisionedThroughput={"ReadCapacityUnits": 100, "WriteCapacityUnits": write},
                     GlobalSecondaryIndexes=[{
                         "IndexName": "byG", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                         "Projection": {"ProjectionType": "KEYS_ONLY"},
                         "ProvisionedThroughput": {"ReadCapacityUnits": 100, "WriteCapacityUnits": 100}}])


def _contributors(server: ServerProcess, rule: str) -> dict[str, float]:
    return {dict(labels)["key"]: count for (name, labels), count in scrape(server.endpoint).items()
            if name == "openddb_contributor_insights" and dict(labels)["rule"] == rule}


def test_enable_describe_list_disable(throttled: ServerProcess) -> None:
    ddb = one_try_client(throttled)
    table = unique_name("ci")
    _table(ddb, table, sort=True)
    assert ddb.describe_contributor_insights(TableName=table)["ContributorInsightsStatus"] == "DISABLED"
    answer = ddb.update_contributor_insights(TableName=table, ContributorInsightsAction="ENABLE")
    assert (answer["TableName"], answer["ContributorInsightsStatus"], answer["ContributorInsightsMode"]) == (
        table, "ENABLING", "ACCESSED_AND_THROTTLED_KEYS")
    described = ddb.describe_contributor_insights(TableName=table)
    assert described["ContributorInsightsStatus"] == "ENABLED"
    assert [rule.rsplit("-", 1)[0] for rule in described["ContributorInsightsRuleList"]] == [
        f"DynamoDBContributorInsights-{kind}-{table}" for kind in ("PKC", "SKC", "PKT", "SKT")]
    assert described["ContributorInsightsMode"] == "ACCESSED_AND_THROTTLED_KEYS"
    assert described["LastUpdateDateTime"].timestamp() <= time.time() + 1
    index = ddb.update_contributor_insights(TableName=table, IndexName="byG", ContributorInsightsAction="ENABLE",
                                            ContributorInsightsMode="THROTTLED_KEYS")
    assert (index["IndexName"], index["ContributorInsightsMode"]) == ("byG", "THROTTLED_KEYS")
    rules = ddb.describe_contributor_insights(TableName=table, IndexName="byG")["ContributorInsightsRuleList"]
    assert [rule.rsplit("-", 1)[0] for rule in rules] == [f"DynamoDBContributorInsights-PKT-{table}-byG"]
    listed = ddb.list_contributor_insights(TableName=table)["ContributorInsightsSummaries"]
    assert listed == [
        {"TableName": table, "ContributorInsightsStatus": "ENABLED",
         "ContributorInsightsMode": "ACCESSED_AND_THROTTLED_KEYS"},
        {"TableName": table, "IndexName": "byG", "ContributorInsightsStatus": "ENABLED",
         "ContributorInsightsMode": "THROTTLED_KEYS"}]
    assert ddb.update_contributor_insights(TableName=table, ContributorInsightsAction="DISABLE")[
        "ContributorInsightsStatus"] == "DISABLING"
    disabled = ddb.describe_contributor_insights(TableName=table)
    assert disabled["ContributorInsightsStatus"] == "DISABLED" and "ContributorInsightsRuleList" not in disabled
    with pytest.raises(ClientError) as missing:
        ddb.describe_contributor_insights(TableName=unique_name("none"))
    assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"
    with pytest.raises(ClientError) as invalid:
        ddb.update_contributor_insights(TableName=table, ContributorInsightsAction="PAUSE")
    assert invalid.value.response["Error"]["Code"] == "ValidationException"


def test_the_hot_key_of_a_run_is_named(throttled: ServerProcess) -> None:
    ddb = one_try_client(throttled)
    table = unique_name("cihot")
    _table(ddb, table)
    rule = [r for r in ddb.describe_contributor_insights(TableName=table).get("ContributorInsightsRuleList", [])]
    assert rule == []
    ddb.update_contributor_insights(TableName=table, ContributorInsightsAction="ENABLE")
    rules = ddb.describe_contributor_insights(TableName=table)["ContributorInsightsRuleList"]
    time.sleep(1.2)  # (the server reads which tables are enabled once a second)
    for n in range(8):
        ddb.put_item(TableName=table, Item={"pk": {"S": f"cold{n}"}, "g": {"S": "x"}})
    ddb.put_item(TableName=table, Item={"pk": {"S": "hot"}, "g": {"S": "x"}})
    for _ in range(20):
        ddb.get_item(TableName=table, Key={"pk": {"S": "hot"}})
    counted = _contributors(throttled, next(r for r in rules if "-PKC-" in r))
    assert max(counted, key=counted.__getitem__) == "hot"
    assert counted["hot"] == 21 and counted["cold3"] == 1


def test_throttled_keys_mode_names_the_throttled_key(throttled: ServerProcess) -> None:
    ddb = one_try_client(throttled)
    table = unique_name("cithr")
    _table(ddb, table, write=5)
    ddb.update_contributor_insights(TableName=table, ContributorInsightsAction="ENABLE",
                                    ContributorInsightsMode="THROTTLED_KEYS")
    rules = ddb.describe_contributor_insights(TableName=table)["ContributorInsightsRuleList"]
    assert [rule.rsplit("-", 1)[0] for rule in rules] == [f"DynamoDBContributorInsights-PKT-{table}"]
    time.sleep(1.2)
    refused = 0
    for _ in range(40):  # (5 WCU, and what the table left unused since it was made: fewer than 40)
        try:
            ddb.put_item(TableName=table, Item={"pk": {"S": "busy"}, "g": {"S": "x"}})
        except ClientError as error:
            assert error.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
            refused += 1
    assert refused
    assert _contributors(throttled, rules[0]) == {"busy": refused}


def test_a_gsis_most_accessed_keys_are_counted(throttled: ServerProcess) -> None:
    """Insights enabled on a GSI alone count the GSI's keys under its own rules: each item a write put in it or
    took out of it, by the item's index key (partition key under PKC, partition and sort key under SKC), and the
    partition a Query on it named; an item the index does not hold is not counted, nor is the table's own key."""
    ddb = one_try_client(throttled)
    table = unique_name("cigsi")
    ddb.create_table(TableName=table, AttributeDefinitions=[{"AttributeName": name, "AttributeType": "S"}
                                                            for name in ("pk", "g", "r")],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST",
                     GlobalSecondaryIndexes=[{"IndexName": "byG", "KeySchema": [
                         {"AttributeName": "g", "KeyType": "HASH"}, {"AttributeName": "r", "KeyType": "RANGE"}],
                         "Projection": {"ProjectionType": "KEYS_ONLY"}}])
    answer = ddb.update_contributor_insights(TableName=table, IndexName="byG", ContributorInsightsAction="ENABLE")
    assert (answer["IndexName"], answer["ContributorInsightsStatus"]) == ("byG", "ENABLING")
    described = ddb.describe_contributor_insights(TableName=table, IndexName="byG")
    rules = {rule.split("-")[1]: rule for rule in described["ContributorInsightsRuleList"]}
    assert sorted(rules) == ["PKC", "PKT", "SKC", "SKT"] and f"-{table}-byG-" in rules["PKC"]
    assert ddb.describe_contributor_insights(TableName=table)["ContributorInsightsStatus"] == "DISABLED"
    time.sleep(1.2)  # (the server reads which tables and indexes are enabled once a second)
    for n in range(6):
        ddb.put_item(TableName=table, Item={"pk": {"S": f"h{n}"}, "g": {"S": "hotg"}, "r": {"S": f"r{n}"}})
    for n in range(2):
        ddb.put_item(TableName=table, Item={"pk": {"S": f"c{n}"}, "g": {"S": "coldg"}, "r": {"S": "r0"}})
    ddb.put_item(TableName=table, Item={"pk": {"S": "outside"}})  # (no index key: not in the index)
    ddb.delete_item(TableName=table, Key={"pk": {"S": "c1"}})  # (taken out of the index: its old key)
    for _ in range(3):
        ddb.query(TableName=table, IndexName="byG", KeyConditionExpression="g = :g",
                  ExpressionAttributeValues={":g": {"S": "hotg"}})
    assert _contributors(throttled, rules["PKC"]) == {"hotg": 9.0, "coldg": 3.0}
    pairs = _contributors(throttled, rules["SKC"])
    assert pairs == {**{f"hotg|r{n}": 1.0 for n in range(6)}, "coldg|r0": 3.0}
    assert _contributors(throttled, rules["PKT"]) == {}


def test_a_gsis_throttled_keys_mode_names_the_keys_its_limits_refused(throttled: ServerProcess) -> None:
    """THROTTLED_KEYS insights on a GSI of 1 WCU: the puts it refuses (IndexWriteProvisionedThroughputExceeded) are
    counted under the GSI's own rules by their index key (partition key under PKT, partition and sort key under
    SKT), not the table's key; the puts it served are not counted."""
    ddb = one_try_client(throttled)
    table = unique_name("cigsithr")
    ddb.create_table(TableName=table, AttributeDefinitions=[{"AttributeName": name, "AttributeType": "S"}
                                                            for name in ("pk", "g", "r")],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     ProvisionedThroughput={"ReadCapacityUnits": 100, "WriteCapacityUnits": 100},
                     GlobalSecondaryIndexes=[{"IndexName": "byG", "KeySchema": [
                         {"AttributeName": "g", "KeyType": "HASH"}, {"AttributeName": "r", "KeyType": "RANGE"}],
                         "Projection": {"ProjectionType": "KEYS_ONLY"},
                         "ProvisionedThroughput": {"ReadCapacityUnits": 100, "WriteCapacityUnits": 1}}])
    ddb.update_contributor_insights(TableName=table, IndexName="byG", ContributorInsightsAction="ENABLE",
                                    ContributorInsightsMode="THROTTLED_KEYS")
    described = ddb.describe_contributor_insights(TableName=table, IndexName="byG")
    rules = {rule.split("-")[1]: rule for rule in described["ContributorInsightsRuleList"]}
    assert sorted(rules) == ["PKT", "SKT"] and f"-{table}-byG-" in rules["PKT"]
    time.sleep(1.2)  # (the server reads which tables and indexes are enabled once a second)
    refused = 0
    for n in range(30):  # (1 WCU, and what the index left unused since it was made: fewer than 30)
        try:
            ddb.put_item(TableName=table, Item={"pk": {"S": f"p{n}"}, "g": {"S": "busyg"}, "r": {"S": "r1"}})
        except ClientError as error:
            reasons = error.response["ThrottlingReasons"]
            assert reasons[0]["reason"] == "IndexWriteProvisionedThroughputExceeded", reasons
            refused += 1
    assert 0 < refused < 30
    assert _contributors(throttled, rules["PKT"]) == {"busyg": refused}
    assert _contributors(throttled, rules["SKT"]) == {"busyg|r1": refused}
