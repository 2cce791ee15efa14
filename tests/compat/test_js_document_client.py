"""The AWS SDK for JavaScript v3 with its DocumentClient (@aws-sdk/lib-dynamodb) on Node: tests/node/document.mjs
runs an application's scenario against the session's server (native JavaScript values; a table with a global
index; conditional writes, one refused of each kind; a transaction and a cancelled one; batch get and write;
paginateQuery and paginateScan; TTL) and prints what the SDK returned; these tests check it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import ServerProcess, unique_name
from tests.node_runner import needs_node, run_node

pytestmark = needs_node

@pytest.fixture(scope="module")
def scenario(server: ServerProcess) -> dict[str, Any]:
    return run_node("document.mjs", server.endpoint, unique_name("jsdoc"))


def refused(name: str, message: str = "The conditional request failed") -> dict[str, Any]:
    return {"name": name, "message": message, "status": 400, "fault": "client"}


def test_native_values_round_trip(scenario: dict[str, Any]) -> None:
    """The DocumentClient marshals JavaScript values (number, Set of strings and of numbers, Uint8Array, nested
    arrays and objects, null, boolean; undefined left out) and reads them back as the same values; the waiters
    see the table created and deleted."""
    assert scenario["created"] == scenario["deleted"] == "SUCCESS"
    assert scenario["batchWrite"] == {"UnprocessedItems": {}}
    assert scenario["rich"] == {
        "pk": "customer", "sk": "rich", "status": "draft", "amount": 12.5, "tags": {"$set": ["a", "b"]},
        "sizes": {"$set": [1, 2]}, "blob": {"$bytes": "AAH+/w=="}, "lines": [{"sku": "x", "qty": 2}, None, True]}


def test_conditional_writes(scenario: dict[str, Any]) -> None:
    """A conditional update returns ALL_NEW as native values; a refused put, update or delete raises the SDK's
    ConditionalCheckFailedException, the put's carrying the item it found (ReturnValuesOnConditionCheckFailure;
    the DocumentClient leaves an error's item in DynamoDB JSON)."""
    assert scenario["update"] == {"Attributes": {"pk": "customer", "sk": "o0", "status": "open", "amount": 10,
                                                 "tags": {"$set": ["gift"]}}}
    put_again = scenario["putAgain"]
    assert {key: value for key, value in put_again.items() if key != "Item"} == refused(
        "ConditionalCheckFailedException")
    assert put_again["Item"]["tags"] == {"SS": ["a", "b"]} and put_again["Item"]["amount"] == {"N": "12.5"}
    assert scenario["updateRefused"] == scenario["deleteRefused"] == refused("ConditionalCheckFailedException")


def test_transactions(scenario: dict[str, Any]) -> None:
    """TransactWrite (update, condition check, put) is applied whole, TransactGet reads it (an empty entry for a
    missing key); a transaction whose second condition fails is TransactionCanceledException with one
    CancellationReason per action, and its first action is not applied."""
    assert scenario["transactGet"] == {"Responses": [
        {"Item": {"pk": "customer", "sk": "o1", "status": "shipped", "amount": 1}},
        {"Item": {"pk": "customer", "sk": "o100", "status": "new", "amount": 100}}, {}]}
    cancelled = scenario["transactRefused"]
    assert {key: value for key, value in cancelled.items() if key != "CancellationReasons"} == refused(
        "TransactionCanceledException", "Transaction cancelled, please refer cancellation reasons for specific "
        "reasons [None, ConditionalCheckFailed]")
    assert cancelled["CancellationReasons"] == [
        {"Code": "None"},
        {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed",
         "Item": {"pk": {"S": "customer"}, "sk": {"S": "o1"}, "status": {"S": "shipped"}, "amount": {"N": "1"}}}]
    assert scenario["o3AfterRefusal"] == {"pk": "customer", "sk": "o3", "status": "open", "amount": 3}


def test_batches_and_paginators(scenario: dict[str, Any]) -> None:
    """BatchGet and paginatedBatchGet find the existing keys of four; paginateQuery pages by pageSize on the
    table (sort-key order) and on the index (descending), and paginateScan filters after reading, so a page
    counts fewer items than it scanned; a full last page is followed by an empty one, as on DynamoDB."""
    assert scenario["batchGet"] == scenario["paginatedBatchGet"] == ["o4", "o5", "o6"]
    assert scenario["batchGetUnprocessed"] == {}
    assert scenario["queryPages"] == [["o0", "o1", "o100"], ["o2", "o3", "o4"], ["o5", "o6"]]
    assert scenario["indexPages"] == [["o6", "o5"], ["o4", "o3"], ["o2", "o0"], []]
    assert scenario["scanPages"] == [
        {"count": 2, "scanned": 3, "sks": ["o0", "o100"]}, {"count": 2, "scanned": 3, "sks": ["o3", "o4"]},
        {"count": 3, "scanned": 3, "sks": ["o5", "o6", "rich"]}, {"count": 0, "scanned": 0, "sks": []}]
    assert scenario["count"] == 9  # o0..o6, o100, rich


def test_time_to_live(scenario: dict[str, Any]) -> None:
    """UpdateTimeToLive enables TTL (DescribeTimeToLive says ENABLED); enabling it again is a
    ValidationException; an item's expiry (epoch seconds) reads back as the number written."""
    assert scenario["ttlEnabled"] == {"TimeToLiveSpecification": {"Enabled": True, "AttributeName": "expires"}}
    assert scenario["ttlDescribed"] == {"TimeToLiveDescription": {"TimeToLiveStatus": "ENABLED",
                                                                  "AttributeName": "expires"}}
    assert scenario["ttlAgain"] == refused("ValidationException", "TimeToLive is already enabled")
    assert scenario["session"] == {"pk": "customer", "sk": "session", "status": "active",
                                   "expires": scenario["expires"]}
