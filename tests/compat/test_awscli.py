"""The AWS CLI (`awscli` from PyPI, run as `python -m awscli`): the scenario as a shell script would write it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.compat.conftest import ITEMS, KEYS, PAGE
from tests.conftest import unique_name

pytestmark = pytest.mark.skipif(importlib.util.find_spec("awscli") is None, reason="awscli is not installed")


def aws(endpoint: str, *args: str, fail: bool = False) -> dict:  # type: ignore[type-arg]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": os.devnull,
           "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_PAGER": ""}
    env.pop("AWS_ENDPOINT_URL_DYNAMODB", None)
    done = subprocess.run([sys.executable, "-m", "awscli", "--endpoint-url", endpoint, "--output", "json",
                           "dynamodb", *args], capture_output=True, text=True, env=env, timeout=60)
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
