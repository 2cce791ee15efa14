"""PartiQL through the AWS SDK for JavaScript v3 on Node (tests/node/partiql.mjs): the DocumentClient's
ExecuteStatement, BatchExecuteStatement and ExecuteTransaction with native parameters, and the plain client's
ExecuteStatement with DynamoDB JSON, each result and refusal as the SDK hands it to an application."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import ServerProcess, unique_name
from tests.node_runner import needs_node, run_node

pytestmark = needs_node


@pytest.fixture(scope="module")
def session(server: ServerProcess) -> dict[str, Any]:
    return run_node("partiql.mjs", server.endpoint, unique_name("pqjs"))


def test_insert_select_update_delete_with_native_parameters(session: dict[str, Any]) -> None:
    assert session["insert"] == {"Items": []}
    user = {"pk": "user", "sk": 1, "tags": {"$set": ["a", "b"]}, "profile": {"name": "Ada", "langs": ["en", "fr"]}}
    assert session["get"] == {"Items": [user]}
    assert session["update"] == {"Items": [dict(user, profile={"name": "Ada L.", "langs": ["en", "fr"]}, visits=1)]}
    assert session["deleted"] == {"Items": [{"pk": "user", "sk": 2}]}
    assert session["raw"] == {"Items": [{"sk": {"N": "2"}}]}


def test_refusals_reach_the_application_as_the_sdks_errors(session: dict[str, Any]) -> None:
    assert session["duplicate"]["name"] == "DuplicateItemException" and session["duplicate"]["status"] == 400
    assert session["refusedUpdate"] == {"name": "ConditionalCheckFailedException",
                                        "message": "The conditional request failed", "status": 400}
    assert session["malformed"] == {
        "name": "ValidationException", "status": 400,
        "message": "Statement wasn't well formed, can't be processed: Expected data manipulation"}


def test_a_batch_answers_each_statement_and_a_transaction_is_all_or_nothing(session: dict[str, Any]) -> None:
    responses = session["batch"]["Responses"]
    assert responses[0] == responses[2] == {"TableName": session["batch"]["Responses"][0]["TableName"]}
    assert responses[1]["Error"]["Code"] == "DuplicateItem"
    cancelled = session["cancelled"]
    assert cancelled["name"] == "TransactionCanceledException"
    assert cancelled["CancellationReasons"] == [
        {"Code": "None"}, {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}]
    # The committed transactions' inserts (sk 4, 6) are there; the cancelled ones' (sk 5, 7) are not.
    keys = [item["sk"] for page in session["pages"] for item in page]
    assert keys == [1, 2, 3, 4, 6]


def test_exists_checks_conditions_beside_the_key(session: dict[str, Any]) -> None:
    assert session["exists"] == {}
    failed = session["existsFailed"]
    assert failed["name"] == "TransactionCanceledException"
    [check, insert] = failed["CancellationReasons"]
    # (the DocumentClient leaves a cancellation reason's item in DynamoDB JSON)
    assert check["Code"] == "ConditionalCheckFailed" and check["Item"]["visits"] == {"N": "2"}
    assert insert == {"Code": "None"}


def test_nested_paths_are_named_by_their_last_step(session: dict[str, Any]) -> None:
    assert session["nested"] == {"Items": [{"name": "Ada L.", "_2": "fr"}]}


def test_a_partition_read_in_pages_follows_next_token_to_the_end(session: dict[str, Any]) -> None:
    pages = session["pages"]
    assert [len(page) for page in pages[:2]] == [2, 2]
    assert all(len(page) <= 2 for page in pages)
