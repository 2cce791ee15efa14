"""At `--log-level info` every API request is one log line (operation, status, error type, time, size, request
id); above it, none."""

from __future__ import annotations

import re

import pytest
from botocore.exceptions import ClientError

from tests.conftest import ServerProcess, create_table, make_client


def test_each_request_is_one_line_at_info() -> None:
    server = ServerProcess(None, "--log-level", "info")
    try:
        ddb = make_client(server.endpoint)
        table = create_table(ddb, range_type=None)
        put = ddb.put_item(TableName=table, Item={"pk": {"S": "a"}})
        with pytest.raises(ClientError) as refused:
            ddb.put_item(TableName=table, Item={"pk": {"S": "a"}}, ConditionExpression="attribute_not_exists(pk)")
    finally:
        output = server.finish()
    lines = [line.split("openddb.requests: ", 1)[1] for line in output.splitlines() if "openddb.requests: " in line]
    assert [" ".join(line.split()[:2]) for line in lines] == ["CreateTable 200", "PutItem 200", "PutItem 400"]
    assert re.fullmatch(r"PutItem 200 \d+\.\d\dms 2B id=" + put["ResponseMetadata"]["RequestId"], lines[1])
    refused_id = refused.value.response["ResponseMetadata"]["RequestId"]
    assert re.fullmatch(r"PutItem 400 ConditionalCheckFailedException \d+\.\d\dms \d+B id=" + refused_id, lines[2])


def test_no_request_lines_above_info() -> None:
    server = ServerProcess(None, "--log-level", "warning")
    try:
        make_client(server.endpoint).list_tables()
    finally:
        assert "openddb.requests" not in server.finish()
