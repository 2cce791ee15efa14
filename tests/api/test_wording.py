"""The earlier wording (OPENDDB_WORDING=2025): what the regions DynamoDB had not yet moved to its 2026 words
answered, for the refusals whose words changed; the default server keeps the latest words."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.test_protocol import call
from tests.conftest import ServerProcess, make_client, unique_name

INVALID = "One or more parameter values were invalid: "


@pytest.fixture(scope="module")
def earlier() -> Iterator[ServerProcess]:
    os.environ["OPENDDB_WORDING"] = "2025"
    try:
        process = ServerProcess(None)
    finally:
        del os.environ["OPENDDB_WORDING"]
    try:
        yield process
    finally:
        process.finish()


def message(server: ServerProcess, operation: str, body: dict[str, Any]) -> str:
    response, data = call(server, json.dumps(body), target=f"DynamoDB_20120810.{operation}")
    assert response.status == 400
    return str(json.loads(data)["message"])


def _table(server: ServerProcess) -> str:
    name = unique_name()
    make_client(server.endpoint).create_table(
        TableName=name, AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}], BillingMode="PAY_PER_REQUEST")
    return name


def test_empty_table_name_echoes_the_value(earlier, server):
    """Earlier: the envelope's usual "Value '' at 'tableName'"; latest: the value left out, the member PascalCase
    (both described in martinhicks.dev's 2026 cross-region comparison)."""
    body = {"TableName": "", "Item": {"pk": {"S": "a"}}}
    assert message(earlier, "PutItem", body) == ("1 validation error detected: Value '' at 'tableName' failed to "
                                                 "satisfy constraint: Member must have length greater than or equal "
                                                 "to 1")
    assert message(server, "PutItem", body) == ("1 validation error detected: Value at 'TableName' failed to satisfy "
                                                "constraint: Member must have length greater than or equal to 1")


@pytest.mark.parametrize(("value", "words"), [
    ({"SS": ["a", "a"]}, 'Input collection ["a", "a"] contains duplicates.'),
    ({"NULL": False}, "Null attribute value types must have the value of true"),
])
def test_request_checks_are_not_counted(earlier, server, value, words):
    """Earlier: the refusal bare; latest: inside the "1 validation error detected" envelope."""
    bodies = [{"TableName": _table(s), "Item": {"pk": {"S": "a"}, "v": value}} for s in (earlier, server)]
    assert message(earlier, "PutItem", bodies[0]) == INVALID + words
    assert message(server, "PutItem", bodies[1]) == "1 validation error detected: " + INVALID + words


def test_update_expression_values_name_their_placeholder(earlier):
    """Earlier: an invalid ExpressionAttributeValues member of UpdateItem is named, as in every other operation."""
    body = {"TableName": _table(earlier), "Key": {"pk": {"S": "a"}}, "UpdateExpression": "ADD s :s",
            "ExpressionAttributeValues": {":s": {"SS": ["a", "a"]}}}
    assert message(earlier, "UpdateItem", body) == (
        f'ExpressionAttributeValues contains invalid value: {INVALID}Input collection ["a", "a"] contains '
        "duplicates. for key :s")


def test_the_command_line_option_chooses_the_earlier_wording():
    """`openddb serve --wording 2025` is the same switch as the environment variable."""
    process = ServerProcess(None, "--wording", "2025")
    try:
        body = {"TableName": "", "Item": {"pk": {"S": "a"}}}
        assert message(process, "PutItem", body).startswith("1 validation error detected: Value '' at 'tableName'")
    finally:
        process.finish()
