"""The AWS CLI (`awscli` from PyPI, run as `python -m awscli`): the scenario as a shell script would write it."""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import subprocess
import sys
import time

import pytest

from tests.compat.conftest import ITEMS, KEYS, PAGE
from tests.conftest import unique_name

pytestmark = pytest.mark.skipif(importlib.util.find_spec("awscli") is None, reason="awscli is not installed")


def aws(endpoint: str, *args: str, fail: bool = False, service: str = "dynamodb") -> dict:  # type: ignore[type-arg]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": os.devnull,
           "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_PAGER": ""}
    env.pop("AWS_ENDPOINT_URL_DYNAMODB", None)
    done = subprocess.run([sys.executable, "-m", "awscli", "--endpoint-url", endpoint, "--output", "json",
                           service, *args], capture_output=True, text=True, env=env, timeout=60)
    if fail:
        assert done.returncode != 0, done.stdout
        return {"stderr": done.stderr}
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else {}


def test_awscli_scenario(server):
    name = unique_name("awscli")
    e = server.endpoint
    aws(e, "create-table", "--table-name", name, "--cli-input-json", json.dumps(KEYS))
    aws(e, "wait", "table-exists", "--table-name", name)
    puts = [{"PutRequest": {"Item": {"pk": {"S": "c"}, "sk": {"S": f"o{n}"}, "status": {"S": "open"}}}}
            for n in range(ITEMS)]
    assert aws(e, "batch-write-item", "--request-items", json.dumps({name: puts}))["UnprocessedItems"] == {}
    refused = aws(e, "put-item", "--table-name", name, "--item", json.dumps(puts[0]["PutRequest"]["Item"]),
                  "--condition-expression", "attribute_not_exists(pk)", fail=True)
    assert "ConditionalCheckFailedException" in refused["stderr"]
    aws(e, "transact-write-items", "--transact-items", json.dumps([
        {"Update": {"TableName": name, "Key": {"pk": {"S": "c"}, "sk": {"S": "o1"}},
                    "UpdateExpression": "SET #s = :shipped", "ConditionExpression": "#s = :open",
                    "ExpressionAttributeNames": {"#s": "status"},
                    "ExpressionAttributeValues": {":shipped": {"S": "shipped"}, ":open": {"S": "open"}}}}]))
    # The CLI follows LastEvaluatedKey itself: pages of PAGE items come back as one answer.
    every = aws(e, "query", "--table-name", name, "--key-condition-expression", "pk = :c",
                "--expression-attribute-values", '{":c": {"S": "c"}}', "--page-size", str(PAGE))
    assert [item["sk"]["S"] for item in every["Items"]] == [f"o{n}" for n in range(ITEMS)]
    first = aws(e, "query", "--table-name", name, "--index-name", "by_status", "--key-condition-expression",
                "#s = :s", "--expression-attribute-names", '{"#s": "status"}',
                "--expression-attribute-values", '{":s": {"S": "open"}}', "--max-items", "2")
    assert len(first["Items"]) == 2 and "NextToken" in first
    aws(e, "delete-table", "--table-name", name)


def test_awscli_reads_cloudwatch_metrics(server):
    """`aws cloudwatch get-metric-statistics --endpoint-url` on the same port: the units a put consumed, once the
    server has sampled its counts into the minute's data point (about a second)."""
    name = unique_name("awscw")
    e = server.endpoint
    aws(e, "create-table", "--table-name", name, "--cli-input-json", json.dumps(KEYS))
    aws(e, "put-item", "--table-name", name, "--item", json.dumps({"pk": {"S": "c"}, "sk": {"S": "o"}}))
    now = datetime.datetime.now(datetime.UTC)
    ask = ["get-metric-statistics", "--namespace", "AWS/DynamoDB", "--metric-name", "ConsumedWriteCapacityUnits",
           "--dimensions", f"Name=TableName,Value={name}", "--period", "60", "--statistics", "Sum",
           "--start-time", (now - datetime.timedelta(minutes=10)).isoformat(),
           "--end-time", (now + datetime.timedelta(minutes=2)).isoformat()]
    deadline = time.monotonic() + 10
    answer = aws(e, *ask, service="cloudwatch")
    while not answer["Datapoints"] and time.monotonic() < deadline:
        time.sleep(0.3)
        answer = aws(e, *ask, service="cloudwatch")
    assert answer["Label"] == "ConsumedWriteCapacityUnits"
    assert [(point["Sum"], point["Unit"]) for point in answer["Datapoints"]] == [(1.0, "Count")]
    aws(e, "delete-table", "--table-name", name)
