"""At `--log-level info` (and `debug`) every API request is one log line (method, operation, table, status, error
type, latency, consumed units, size, client, request id), as text or JSON (`--log-format`); above info, none."""

from __future__ import annotations

import re

import orjson
import pytest
from botocore.exceptions import ClientError

from tests.conftest import ServerProcess, create_table, make_client


def _lines(output: str) -> list[str]:
    return [line.split("openddb.requests: ", 1)[1] for line in output.splitlines() if "openddb.requests: " in line]


def test_each_request_is_one_line_at_info() -> None:
    server = ServerProcess(None, "--log-level", "info")
    try:
        ddb = make_client(server.endpoint)
        table = create_table(ddb, range_type=None)
        put = ddb.put_item(TableName=table, Item={"pk": {"S": "a"}})
        with pytest.raises(ClientError) as refused:
            ddb.put_item(TableName=table, Item={"pk": {"S": "a"}}, ConditionExpression="attribute_not_exists(pk)")
        ddb.get_item(TableName=table, Key={"pk": {"S": "a"}}, ConsistentRead=True)
    finally:
        output = server.finish()
    lines = _lines(output)
    assert [" ".join(line.split()[:4]) for line in lines] == [
        f"POST CreateTable {table} 200", f"POST PutItem {table} 200", f"POST PutItem {table} 400",
        f"POST GetItem {table} 200"]
    # The units are recorded although the client never asked for ReturnConsumedCapacity.
    assert re.fullmatch(rf"POST PutItem {table} 200 \d+\.\d\dms rcu=0 wcu=1 2B client=127\.0\.0\.1 id="
                        + put["ResponseMetadata"]["RequestId"], lines[1])
    refused_id = refused.value.response["ResponseMetadata"]["RequestId"]
    assert re.fullmatch(rf"POST PutItem {table} 400 ConditionalCheckFailedException \d+\.\d\dms rcu=0 wcu=0 \d+B "
                        rf"client=127\.0\.0\.1 id={refused_id}", lines[2])
    assert " rcu=1 wcu=0 " in lines[3]


def test_json_lines_at_debug() -> None:
    server = ServerProcess(None, "--log-level", "debug", "--log-format", "json")
    try:
        ddb = make_client(server.endpoint)
        table = create_table(ddb, range_type=None)
        ddb.put_item(TableName=table, Item={"pk": {"S": "a"}, "data": {"S": "x" * 1500}})
        ddb.get_item(TableName=table, Key={"pk": {"S": "a"}})
    finally:
        output = server.finish()
    records = [orjson.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert [(r["method"], r["operation"], r["table"], r["status"]) for r in records] == [
        ("POST", "CreateTable", table, 200), ("POST", "PutItem", table, 200), ("POST", "GetItem", table, 200)]
    put, get = records[1], records[2]
    assert (put["write_units"], put["read_units"], put["error"], put["client"]) == (2.0, 0.0, None, "127.0.0.1")
    assert (get["read_units"], get["write_units"]) == (0.5, 0.0)
    assert put["latency_ms"] >= 0 and len(put["request_id"]) == 52


def test_no_request_lines_above_info() -> None:
    server = ServerProcess(None, "--log-level", "warning")
    try:
        make_client(server.endpoint).list_tables()
    finally:
        assert "openddb.requests" not in server.finish()
