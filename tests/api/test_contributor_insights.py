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
