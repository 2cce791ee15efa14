"""PartiQL as IDEs and the AWS CLI use it: an IDE-style session (list the tables, page through a table with
NextToken to its end, edit one item, insert one, delete one) whose results equal the same work done with the
native operations on a twin table; and `aws dynamodb execute-statement` and friends through the CLI."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import create_table, unique_name

ROWS = 40


def _load(ddb, name: str) -> None:
    for i in range(ROWS):
        ddb.put_item(TableName=name, Item={"pk": {"S": f"k{i % 7}"}, "sk": {"N": str(i)}, "v": {"S": "x" * 50},
                                           "n": {"N": str(i)}})


def _all(ddb, name: str) -> list[dict]:
    items: list[dict] = []
    start: dict = {}
    while True:
        page = ddb.scan(TableName=name, ConsistentRead=True, **start)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return sorted(items, key=lambda item: (item["pk"]["S"], int(item["sk"]["N"])))
        start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}


def test_ide_session_matches_native_operations(ddb):
    partiql, native = create_table(ddb, unique_name("ide"), range_type="N"), create_table(ddb, unique_name("nat"),
                                                                                            range_type="N")
    _load(ddb, partiql)
    _load(ddb, native)
    listed = [name for page in ddb.get_paginator("list_tables").paginate() for name in page["TableNames"]]
    assert partiql in listed and native in listed  # (every page: on PostgreSQL other tests' tables share the list)

    # The table view: SELECT * paged to its end, as an IDE pages it.
    seen: list[dict] = []
    request = {"Statement": f'SELECT * FROM "{partiql}"', "Limit": 9}
    while True:
        page = ddb.execute_statement(**request)
        seen.extend(page["Items"])
        if "NextToken" not in page:
            break
        request["NextToken"] = page["NextToken"]
    assert sorted(seen, key=lambda item: (item["pk"]["S"], int(item["sk"]["N"]))) == _all(ddb, native)

    # Edit one item, insert one, delete one: in PartiQL on one table, natively on the other.
    ddb.execute_statement(Statement=f"UPDATE \"{partiql}\" SET v = ? SET n = n + 5 REMOVE gone "
                                    f"WHERE pk = 'k1' AND sk = 8", Parameters=[{"S": "edited"}])
    ddb.update_item(TableName=native, Key={"pk": {"S": "k1"}, "sk": {"N": "8"}},
                    UpdateExpression="SET v = :v, n = n + :five REMOVE gone",
                    ExpressionAttributeValues={":v": {"S": "edited"}, ":five": {"N": "5"}})
    ddb.execute_statement(Statement=f"INSERT INTO \"{partiql}\" VALUE {{'pk': 'new', 'sk': 1, 'v': 'y'}}")
    ddb.put_item(TableName=native, Item={"pk": {"S": "new"}, "sk": {"N": "1"}, "v": {"S": "y"}},
                 ConditionExpression="attribute_not_exists(pk)")
    ddb.execute_statement(Statement=f'DELETE FROM "{partiql}" WHERE pk = ? AND sk = ?',
                          Parameters=[{"S": "k2"}, {"N": "9"}])
    ddb.delete_item(TableName=native, Key={"pk": {"S": "k2"}, "sk": {"N": "9"}})
    assert _all(ddb, partiql) == _all(ddb, native)

    # One partition, as the IDE's filter on the key shows it, equals the Query.
    got = ddb.execute_statement(Statement=f"SELECT * FROM \"{partiql}\" WHERE pk = 'k1'")["Items"]
    assert got == ddb.query(TableName=native, KeyConditionExpression="pk = :p",
                            ExpressionAttributeValues={":p": {"S": "k1"}})["Items"]


def aws(endpoint: str, *args: str, fail: bool = False) -> dict:
    """`aws dynamodb ...` (awscli from PyPI, as `python -m awscli`) with test credentials and no config files."""
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_PAGER": "",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
    done = subprocess.run([sys.executable, "-m", "awscli", "--endpoint-url", endpoint, "--output", "json",
                           "dynamodb", *args], capture_output=True, text=True, env=env, timeout=60)
    assert (done.returncode != 0) == fail, done.stderr
    return {"stderr": done.stderr} if fail else json.loads(done.stdout or "{}")


@pytest.mark.skipif(importlib.util.find_spec("awscli") is None, reason="awscli is not installed")
def test_aws_cli_partiql(server, ddb):
    """`aws dynamodb execute-statement`, `batch-execute-statement` and `execute-transaction` as a shell script
    would run them."""
    name = create_table(ddb, unique_name("cli"), range_type=None)
    e = server.endpoint
    aws(e, "execute-statement", "--statement", f"INSERT INTO \"{name}\" VALUE {{'pk': 'a', 'n': 1}}")
    got = aws(e, "execute-statement", "--statement", f'SELECT * FROM "{name}" WHERE pk = ?',
              "--parameters", json.dumps([{"S": "a"}]))
    assert got["Items"] == [{"pk": {"S": "a"}, "n": {"N": "1"}}]
    refused = aws(e, "execute-statement", "--statement", f"INSERT INTO \"{name}\" VALUE {{'pk': 'a'}}", fail=True)
    assert "DuplicateItemException" in refused["stderr"]
    done = aws(e, "batch-execute-statement", "--statements", json.dumps([
        {"Statement": f"UPDATE \"{name}\" SET n = 2 WHERE pk = 'a'"},
        {"Statement": f"INSERT INTO \"{name}\" VALUE {{'pk': 'b'}}"}]))
    assert done["Responses"] == [{"TableName": name}, {"TableName": name}]
    aws(e, "execute-transaction", "--transact-statements", json.dumps([
        {"Statement": f"DELETE FROM \"{name}\" WHERE pk = 'b'"},
        {"Statement": f"UPDATE \"{name}\" SET n = n + 1 WHERE pk = 'a'"}]))
    assert ddb.scan(TableName=name)["Items"] == [{"pk": {"S": "a"}, "n": {"N": "3"}}]
    # a nested path, named by its last step (see test_partiql_projection), and batch capacity
    aws(e, "execute-statement", "--statement", f"UPDATE \"{name}\" SET m = {{'k': [7, 8]}} WHERE pk = 'a'")
    got = aws(e, "execute-statement", "--statement", f"SELECT m.k, m.k[1] FROM \"{name}\" WHERE pk = 'a'")
    assert got["Items"] == [{"k": {"L": [{"N": "7"}, {"N": "8"}]}, "_2": {"N": "8"}}]
    # EXISTS with a condition beyond the key: false, the transaction is cancelled and nothing is written
    refused = aws(e, "execute-transaction", "--transact-statements", json.dumps([
        {"Statement": f"EXISTS(SELECT * FROM \"{name}\" WHERE pk = 'a' AND n > 5)"},
        {"Statement": f"INSERT INTO \"{name}\" VALUE {{'pk': 'c'}}"}]), fail=True)
    assert "TransactionCanceledException" in refused["stderr"] and "[ConditionalCheckFailed, None]" in refused["stderr"]
    assert "Item" not in ddb.get_item(TableName=name, Key={"pk": {"S": "c"}})
