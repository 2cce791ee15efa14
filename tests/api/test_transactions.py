"""TransactWriteItems and TransactGetItems through boto3: validation, cancellation reasons, idempotency, capacity,
and a concurrent transfer workload whose total balance must never be observed broken."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from tests.api.test_protocol import call
from tests.conftest import ServerProcess, create_table, make_client, unique_name

CANCELLED = "Transaction cancelled, please refer cancellation reasons for specific reasons "
FAILED = {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
NONE = {"Code": "None"}


def error_of(excinfo) -> tuple[str, str]:
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


def key(pk: str) -> dict:
    return {"pk": {"S": pk}}


def put(table: str, pk: str, **attrs) -> dict:
    item = {"pk": {"S": pk}, **{k: {"N": str(v)} for k, v in attrs.items()}}
    return {"Put": {"TableName": table, "Item": item}}


def get_item(ddb, table: str, pk: str) -> dict | None:
    return ddb.get_item(TableName=table, Key=key(pk), ConsistentRead=True).get("Item")


def add(table: str, pk: str, amount: int, condition: str | None = None) -> dict:
    update = {"TableName": table, "Key": key(pk), "UpdateExpression": "ADD n :a",
              "ExpressionAttributeValues": {":a": {"N": str(amount)}}}
    if condition is not None:
        update["ConditionExpression"] = condition
    return {"Update": update}


def cancelled(ddb, items: list[dict], **kwargs) -> tuple[str, list[dict]]:
    with pytest.raises(ClientError) as excinfo:
        ddb.transact_write_items(TransactItems=items, **kwargs)
    response = excinfo.value.response
    assert response["Error"]["Code"] == "TransactionCanceledException"
    return response["Error"]["Message"], response["CancellationReasons"]


def validation_error(ddb, items: list[dict], operation: str = "transact_write_items", **kwargs) -> tuple[str, str]:
    with pytest.raises(ClientError) as excinfo:
        getattr(ddb, operation)(TransactItems=items, **kwargs)
    return error_of(excinfo)


def raw_error(server, operation: str, request: dict) -> tuple[str, str]:
    """An error for a request botocore's own parameter checks would refuse to send."""
    response, data = call(server, json.dumps(request), f"DynamoDB_20120810.{operation}")
    assert response.status == 400, data
    body = json.loads(data)
    return body["__type"].rpartition("#")[2], body.get("message", body.get("Message"))


@pytest.fixture(scope="module")
def second_table(ddb) -> str:
    return create_table(ddb, unique_name("tx2"), range_type=None)


# --- TransactWriteItems: the happy path ---------------------------------------------------------------


def test_all_four_actions_across_tables(ddb, hash_table, second_table):
    """Put, Update, Delete and ConditionCheck on two tables commit together."""
    a, b, c, d = (unique_name("k") for _ in range(4))
    ddb.transact_write_items(TransactItems=[put(hash_table, b, n=1), put(second_table, c, n=2),
                                            put(second_table, d, n=3)])
    response = ddb.transact_write_items(TransactItems=[
        put(hash_table, a, n=10),
        {"Update": {"TableName": hash_table, "Key": key(b), "UpdateExpression": "ADD n :a",
                    "ConditionExpression": "n = :one",
                    "ExpressionAttributeValues": {":a": {"N": "5"}, ":one": {"N": "1"}}}},
        {"Delete": {"TableName": second_table, "Key": key(c)}},
        {"ConditionCheck": {"TableName": second_table, "Key": key(d), "ConditionExpression": "attribute_exists(pk)"}},
    ])
    assert "ConsumedCapacity" not in response and "ItemCollectionMetrics" not in response
    assert get_item(ddb, hash_table, a) == {"pk": {"S": a}, "n": {"N": "10"}}
    assert get_item(ddb, hash_table, b) == {"pk": {"S": b}, "n": {"N": "6"}}
    assert get_item(ddb, second_table, c) is None
    assert get_item(ddb, second_table, d) == {"pk": {"S": d}, "n": {"N": "3"}}


def test_update_creates_missing_item_with_its_key(ddb, range_table):
    """An Update of a missing item creates it from the key, as UpdateItem does."""
    pk, sk = unique_name("p"), unique_name("s")
    ddb.transact_write_items(TransactItems=[{"Update": {
        "TableName": range_table, "Key": {"pk": {"S": pk}, "sk": {"S": sk}}, "UpdateExpression": "SET #v = :v",
        "ExpressionAttributeNames": {"#v": "value"}, "ExpressionAttributeValues": {":v": {"S": "x"}}}}])
    item = ddb.get_item(TableName=range_table, Key={"pk": {"S": pk}, "sk": {"S": sk}})["Item"]
    assert item == {"pk": {"S": pk}, "sk": {"S": sk}, "value": {"S": "x"}}
    # As with UpdateItem, only REMOVE and DELETE actions create nothing.
    other = {"pk": {"S": pk}, "sk": {"S": unique_name("s")}}
    ddb.transact_write_items(TransactItems=[{"Update": {
        "TableName": range_table, "Key": other, "UpdateExpression": "REMOVE a DELETE s :v",
        "ExpressionAttributeValues": {":v": {"SS": ["x"]}}}}])
    assert "Item" not in ddb.get_item(TableName=range_table, Key=other)


def test_table_by_arn(ddb, hash_table):
    """Actions may name their table by ARN."""
    pk = unique_name("k")
    arn = ddb.describe_table(TableName=hash_table)["Table"]["TableArn"]
    ddb.transact_write_items(TransactItems=[put(arn, pk, n=1)])
    assert get_item(ddb, hash_table, pk) == {"pk": {"S": pk}, "n": {"N": "1"}}


# --- cancellation ---------------------------------------------------------------------------------------


def test_failed_condition_cancels_everything(ddb, hash_table):
    """One failed condition cancels the whole transaction with one reason per action, in order."""
    a, b = unique_name("k"), unique_name("k")
    message, reasons = cancelled(ddb, [
        put(hash_table, a, n=1),
        {"ConditionCheck": {"TableName": hash_table, "Key": key(b), "ConditionExpression": "attribute_exists(pk)"}},
    ])
    assert message == CANCELLED + "[None, ConditionalCheckFailed]"
    assert reasons == [NONE, FAILED]
    assert get_item(ddb, hash_table, a) is None


def test_every_condition_is_reported(ddb, hash_table):
    """All conditions are evaluated, so every failing action gets its own reason."""
    a, b, c = (unique_name("k") for _ in range(3))
    ddb.transact_write_items(TransactItems=[put(hash_table, b, n=7)])
    message, reasons = cancelled(ddb, [
        add(hash_table, a, 1, "attribute_exists(pk)"),
        add(hash_table, b, 1, "attribute_exists(pk)"),
        {"Delete": {"TableName": hash_table, "Key": key(c), "ConditionExpression": "attribute_exists(pk)"}},
    ])
    assert message == CANCELLED + "[ConditionalCheckFailed, None, ConditionalCheckFailed]"
    assert reasons == [FAILED, NONE, FAILED]
    assert get_item(ddb, hash_table, b) == {"pk": {"S": b}, "n": {"N": "7"}}


def test_all_old_returns_item_in_reason(ddb, hash_table):
    """ReturnValuesOnConditionCheckFailure ALL_OLD puts the current item in the reason (if there is one)."""
    a, b = unique_name("k"), unique_name("k")
    ddb.transact_write_items(TransactItems=[put(hash_table, a, n=3)])
    _, reasons = cancelled(ddb, [
        {"Put": {"TableName": hash_table, "Item": {"pk": {"S": a}}, "ConditionExpression": "attribute_not_exists(pk)",
                 "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
        {"ConditionCheck": {"TableName": hash_table, "Key": key(b), "ConditionExpression": "attribute_exists(pk)",
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
    ])
    assert reasons == [FAILED | {"Item": {"pk": {"S": a}, "n": {"N": "3"}}}, FAILED]


def test_update_type_error_is_a_validation_reason(ddb, hash_table):
    """A runtime update error cancels with a ValidationError reason carrying UpdateItem's message."""
    a, b = unique_name("k"), unique_name("k")
    ddb.transact_write_items(TransactItems=[{"Put": {"TableName": hash_table,
                                                     "Item": {"pk": {"S": a}, "n": {"S": "text"}}}}])
    message, reasons = cancelled(ddb, [put(hash_table, b, n=1), add(hash_table, a, 1)])
    assert message == CANCELLED + "[None, ValidationError]"
    assert reasons == [NONE, {"Code": "ValidationError", "Message": "An operand in the update expression has an "
                                                                    "incorrect data type"}]
    assert get_item(ddb, hash_table, b) is None


def test_update_growing_past_400_kb_is_a_validation_reason(ddb, hash_table):
    """An update that makes the item exceed 400 KB cancels with a ValidationError reason."""
    a = unique_name("k")
    big = {"S": "x" * 300_000}
    ddb.transact_write_items(TransactItems=[{"Put": {"TableName": hash_table, "Item": {"pk": {"S": a}, "a": big}}}])
    _, reasons = cancelled(ddb, [{"Update": {"TableName": hash_table, "Key": key(a), "UpdateExpression": "SET b = :b",
                                             "ExpressionAttributeValues": {":b": big}}}])
    assert reasons == [{"Code": "ValidationError",
                        "Message": "Item size to update has exceeded the maximum allowed size"}]


def test_update_value_nested_too_deep_is_a_validation_reason(ddb, hash_table):
    """An Update's expression value nested 33 levels cancels at that action (captured against DynamoDB), where
    UpdateItem refuses the request."""
    deep: dict = {"S": "x"}
    for _ in range(32):
        deep = {"M": {"m": deep}}
    a = unique_name("k")
    update = {"Update": {"TableName": hash_table, "Key": key(a), "UpdateExpression": "SET e = :v",
                         "ExpressionAttributeValues": {":v": deep}}}
    message, reasons = cancelled(ddb, [put(hash_table, unique_name("k"), n=1), update])
    assert message == CANCELLED + "[None, ValidationError]"
    assert reasons[1]["Code"] == "ValidationError" and "Nesting Levels have exceeded" in reasons[1]["Message"]
    assert get_item(ddb, hash_table, a) is None
    # The deep value wins over the member's other mistakes: a syntax error, an undefined name, a bad value.
    for mistake in ({"UpdateExpression": "SET e = :v,,"}, {"UpdateExpression": "SET e = :v, #bad = :v"},
                    {"ExpressionAttributeValues": {":v": deep, ":w": {"N": "abc"}}}):
        body = {**update["Update"], **mistake}
        assert cancelled(ddb, [{"Update": body}])[0] == CANCELLED + "[ValidationError]"


def test_value_nested_too_deep_but_only_compared_is_evaluated(ddb, hash_table):
    """A value nested past 32 levels that a ConditionCheck, or an Update's condition, only compares is evaluated,
    not refused (captured against DynamoDB in 30 of 33 regions, 2026-10); far deeper values are still refused."""
    deep: dict = {"S": "x"}
    for _ in range(32):
        deep = {"M": {"m": deep}}
    a = unique_name("k")
    ddb.put_item(TableName=hash_table, Item={**key(a), "d": {"S": "x"}})
    check = {"ConditionCheck": {"TableName": hash_table, "Key": key(a), "ConditionExpression": "d = :v",
                                "ExpressionAttributeValues": {":v": deep}}}
    assert cancelled(ddb, [check])[0] == CANCELLED + "[ConditionalCheckFailed]"
    update = {"Update": {"TableName": hash_table, "Key": key(a), "UpdateExpression": "SET e = :s",
                         "ConditionExpression": "d = :v", "ExpressionAttributeValues": {":v": deep, ":s": {"S": "y"}}}}
    assert cancelled(ddb, [update])[0] == CANCELLED + "[ConditionalCheckFailed]"
    # A deep value that holds: the condition passes and the write goes through.
    ddb.put_item(TableName=hash_table, Item={**key(a), "d": {"S": "x"}, "w": deep["M"]["m"]})
    ddb.transact_write_items(TransactItems=[{"Update": {
        "TableName": hash_table, "Key": key(a), "UpdateExpression": "SET e = :s", "ConditionExpression": "w <> :v",
        "ExpressionAttributeValues": {":v": deep, ":s": {"S": "y"}}}}])
    assert get_item(ddb, hash_table, a)["e"] == {"S": "y"}
    for _ in range(100):
        deep = {"M": {"m": deep}}
    with pytest.raises(ClientError) as excinfo:
        ddb.transact_write_items(TransactItems=[{**check, "ConditionCheck": {
            **check["ConditionCheck"], "ExpressionAttributeValues": {":v": deep}}}])
    assert excinfo.value.response["Error"]["Code"] == "ValidationException"


def test_members_without_expressions_may_carry_expression_attributes(ddb, hash_table):
    """Captured of DynamoDB: a Put, Delete or Get without any expression ignores ExpressionAttributeNames and
    Values, which their single-item twins refuse."""
    a, b = unique_name("k"), unique_name("k")
    names = {"ExpressionAttributeNames": {"#a": "a"}}
    ddb.transact_write_items(TransactItems=[
        {"Put": {"TableName": hash_table, "Item": {"pk": {"S": a}}, **names,
                 "ExpressionAttributeValues": {":v": {"S": "x"}}}},
        {"Delete": {"TableName": hash_table, "Key": key(b), **names}}])
    got = ddb.transact_get_items(TransactItems=[{"Get": {"TableName": hash_table, "Key": key(a), **names}}])
    assert got["Responses"] == [{"Item": {"pk": {"S": a}}}]
    with pytest.raises(ClientError) as excinfo:  # with an expression, an unused name is still refused
        ddb.transact_write_items(TransactItems=[{"Delete": {"TableName": hash_table, "Key": key(b), **names,
                                                            "ConditionExpression": "attribute_exists(pk)"}}])
    assert error_of(excinfo)[1].startswith("Value provided in ExpressionAttributeNames unused in expressions")


def test_cancellation_wire_shape(server, hash_table):
    """On the wire the text is under "Message", next to CancellationReasons, as DynamoDB sends it."""
    body = json.dumps({"TransactItems": [{"ConditionCheck": {
        "TableName": hash_table, "Key": key(unique_name("k")), "ConditionExpression": "attribute_exists(pk)"}}]})
    response, data = call(server, body, "DynamoDB_20120810.TransactWriteItems")
    assert response.status == 400
    assert json.loads(data) == {"__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                                "CancellationReasons": [FAILED],
                                "Message": CANCELLED + "[ConditionalCheckFailed]"}


# --- validation -----------------------------------------------------------------------------------------


def test_two_actions_on_one_item(ddb, hash_table):
    """No two actions may target one item, even when the table is once named by ARN."""
    a = unique_name("k")
    arn = ddb.describe_table(TableName=hash_table)["Table"]["TableArn"]
    expected = ("ValidationException", "Transaction request cannot include multiple operations on one item")
    assert validation_error(ddb, [put(hash_table, a, n=1), add(hash_table, a, 1)]) == expected
    assert validation_error(ddb, [put(hash_table, a, n=1), {"ConditionCheck": {
        "TableName": arn, "Key": key(a), "ConditionExpression": "attribute_exists(pk)"}}]) == expected
    assert get_item(ddb, hash_table, a) is None


def test_same_key_in_two_tables_is_fine(ddb, hash_table, second_table):
    """Items are told apart by table as well as key."""
    a = unique_name("k")
    ddb.transact_write_items(TransactItems=[put(hash_table, a, n=1), put(second_table, a, n=2)])
    assert get_item(ddb, second_table, a) == {"pk": {"S": a}, "n": {"N": "2"}}


def test_action_count_limits(server, ddb, hash_table):
    """TransactItems holds 1 to 100 actions."""
    assert raw_error(server, "TransactWriteItems", {"TransactItems": []}) == (
        "ValidationException", "1 validation error detected: Value '[]' at 'transactItems' failed to satisfy "
                               "constraint: Member must have length greater than or equal to 1")
    code, message = validation_error(ddb, [put(hash_table, f"k{i}", n=1) for i in range(101)])
    assert code == "ValidationException"
    assert message.startswith("1 validation error detected: Value '[")
    assert message.endswith("at 'transactItems' failed to satisfy constraint: "
                            "Member must have length less than or equal to 100")


def test_hundred_actions(ddb, hash_table):
    """Exactly 100 actions are accepted and all applied."""
    prefix = unique_name("h")
    ddb.transact_write_items(TransactItems=[put(hash_table, f"{prefix}-{i}", n=i) for i in range(100)])
    assert get_item(ddb, hash_table, f"{prefix}-99") == {"pk": {"S": f"{prefix}-99"}, "n": {"N": "99"}}


def test_entry_with_two_or_no_actions(ddb, hash_table):
    """Each entry holds exactly one action."""
    a = unique_name("k")
    both = {"Put": put(hash_table, a)["Put"], "Delete": {"TableName": hash_table, "Key": key(a)}}
    assert validation_error(ddb, [both]) == (
        "ValidationException", "TransactItems can only contain one of Check, Put, Update or Delete")
    assert validation_error(ddb, [{}]) == (
        "ValidationException", "Invalid Request: TransactWriteRequest should contain Delete or Put or Update request")


def test_missing_members_are_named_by_path(server, hash_table):
    """Required members are reported with their full path, all in one message."""
    items = [{"ConditionCheck": {"TableName": hash_table, "Key": key("a")}},
             {"Update": {"TableName": hash_table, "Key": key("b")}}]
    assert raw_error(server, "TransactWriteItems", {"TransactItems": items}) == (
        "ValidationException", "2 validation errors detected: Value null at "
        "'transactItems.1.member.conditionCheck.conditionExpression' failed to satisfy constraint: Member must not "
        "be null; Value null at 'transactItems.2.member.update.updateExpression' failed to satisfy constraint: "
        "Member must not be null")


def test_bad_enum_is_named_by_path(ddb, hash_table):
    """ReturnValuesOnConditionCheckFailure is ALL_OLD or NONE."""
    items = [{"Put": {"TableName": hash_table, "Item": {"pk": {"S": "a"}},
                      "ReturnValuesOnConditionCheckFailure": "ALL_NEW"}}]
    assert validation_error(ddb, items) == (
        "ValidationException", "1 validation error detected: Value 'ALL_NEW' at "
        "'transactItems.1.member.put.returnValuesOnConditionCheckFailure' failed to satisfy constraint: Member "
        "must satisfy enum value set: [ALL_OLD, NONE]")


def test_action_errors_match_single_item_twins(ddb, hash_table):
    """Each action is validated like its single-item operation, before anything is written."""
    a = unique_name("k")
    first = put(hash_table, a, n=1)
    assert validation_error(ddb, [first, {"Delete": {"TableName": "missing-table", "Key": key("x")}}]) == (
        "ResourceNotFoundException", "Requested resource not found")
    assert validation_error(ddb, [first, {"Update": {"TableName": hash_table, "Key": key("x"),
                                                     "UpdateExpression": "SET pk = :v",
                                                     "ExpressionAttributeValues": {":v": {"S": "y"}}}}]) == (
        "ValidationException", "One or more parameter values were invalid: Cannot update attribute pk. This "
                               "attribute is part of the key")
    assert validation_error(ddb, [first, {"ConditionCheck": {
        "TableName": hash_table, "Key": key("x"), "ConditionExpression": "attribute_exists(pk)",
        "ExpressionAttributeValues": {":unused": {"S": "y"}}}}]) == (
        "ValidationException", "Value provided in ExpressionAttributeValues unused in expressions: keys: {:unused}")
    assert validation_error(ddb, [first, {"ConditionCheck": {
        "TableName": hash_table, "Key": key("x"), "ConditionExpression": ""}}]) == (
        "ValidationException", "Invalid ConditionExpression: The expression can not be empty;")
    assert get_item(ddb, hash_table, a) is None


def test_put_item_over_400_kb(ddb, hash_table):
    """A Put item over 400 KB is rejected up front, as PutItem rejects it."""
    item = {"pk": {"S": "big"}, "a": {"S": "x" * (400 * 1024)}}
    assert validation_error(ddb, [{"Put": {"TableName": hash_table, "Item": item}}]) == (
        "ValidationException", "Item size has exceeded the maximum allowed size")


def test_transaction_over_4_mb(ddb, hash_table):
    """The items of one transaction add up to at most 4 MB."""
    prefix = unique_name("big")
    items = [{"Put": {"TableName": hash_table, "Item": {"pk": {"S": f"{prefix}-{i}"}, "a": {"S": "x" * 390_000}}}}
             for i in range(11)]
    assert validation_error(ddb, items) == (
        "ValidationException", "Transaction request size has exceeded the maximum allowed size of 4 MB")
    assert get_item(ddb, hash_table, f"{prefix}-0") is None


def test_transaction_of_updates_over_4_mb(ddb, hash_table):
    """Updates count what they carry (key and values) toward the 4 MB: eleven writing ~410 KB each are refused
    as the same eleven Puts are, ten pass."""
    prefix = unique_name("bigu")
    items = [{"Update": {"TableName": hash_table, "Key": key(f"{prefix}-{i}"), "UpdateExpression": "SET d = :v",
                         "ExpressionAttributeValues": {":v": {"S": "x" * 409_500}}}} for i in range(11)]
    assert validation_error(ddb, items) == (
        "ValidationException", "Transaction request size has exceeded the maximum allowed size of 4 MB")
    assert get_item(ddb, hash_table, f"{prefix}-0") is None
    ddb.transact_write_items(TransactItems=items[:10])
    assert get_item(ddb, hash_table, f"{prefix}-9") is not None


def test_client_request_token_length(ddb, hash_table):
    """ClientRequestToken is 1 to 36 characters."""
    token = "t" * 37
    assert validation_error(ddb, [put(hash_table, "a", n=1)], ClientRequestToken=token) == (
        "ValidationException", f"1 validation error detected: Value '{token}' at 'clientRequestToken' failed to "
                               "satisfy constraint: Member must have length less than or equal to 36")


# --- idempotency ----------------------------------------------------------------------------------------


def test_same_token_applies_once(ddb, hash_table):
    """A repeat with the same token and request succeeds without applying twice."""
    a, token = unique_name("k"), str(uuid.uuid4())
    for _ in range(3):
        ddb.transact_write_items(TransactItems=[add(hash_table, a, 1)], ClientRequestToken=token)
    assert get_item(ddb, hash_table, a) == {"pk": {"S": a}, "n": {"N": "1"}}


def test_token_and_table_name_with_nul(ddb, hash_table):
    """A token may hold NUL (applied once, like any token); a table name with NUL breaks a table name's pattern.
    Either once ended in a server error on the PostgreSQL engine, whose text columns cannot hold NUL."""
    a, token = unique_name("k"), "nul\x00" + uuid.uuid4().hex[:20]
    for _ in range(2):
        ddb.transact_write_items(TransactItems=[add(hash_table, a, 1)], ClientRequestToken=token)
    assert get_item(ddb, hash_table, a) == {"pk": {"S": a}, "n": {"N": "1"}}
    with pytest.raises(ClientError) as excinfo:
        ddb.get_item(TableName=hash_table + "\x00", Key={"pk": {"S": a}})
    assert excinfo.value.response["Error"]["Code"] == "ValidationException"
    assert "regular expression pattern" in excinfo.value.response["Error"]["Message"]


def test_same_token_other_request(ddb, hash_table):
    """The same token with a different request is IdempotentParameterMismatchException."""
    a, token = unique_name("k"), str(uuid.uuid4())
    ddb.transact_write_items(TransactItems=[add(hash_table, a, 1)], ClientRequestToken=token)
    with pytest.raises(ClientError) as excinfo:
        ddb.transact_write_items(TransactItems=[add(hash_table, a, 2)], ClientRequestToken=token)
    assert error_of(excinfo) == ("IdempotentParameterMismatchException",
                                 "The request uses the same client token as a previous, but non-identical request.")
    # The text is under a capitalised "Message", the member DynamoDB's service model gives this error.
    assert excinfo.value.response["Message"] == "The request uses the same client token as a previous, but " \
                                                "non-identical request."
    assert get_item(ddb, hash_table, a) == {"pk": {"S": a}, "n": {"N": "1"}}


def test_token_ignores_member_order(server, ddb, hash_table):
    """Requests are compared as JSON values, so reordered members are the same request."""
    a, token = unique_name("k"), str(uuid.uuid4())
    action = add(hash_table, a, 1)["Update"]
    reordered = dict(reversed(list(action.items())))
    for update in (action, reordered):
        body = json.dumps({"ClientRequestToken": token, "TransactItems": [{"Update": update}]})
        response, data = call(server, body, "DynamoDB_20120810.TransactWriteItems")
        assert response.status == 200, data
    assert get_item(ddb, hash_table, a) == {"pk": {"S": a}, "n": {"N": "1"}}


def test_cancelled_request_does_not_use_token(ddb, hash_table):
    """A cancelled transaction records nothing, so a retry with its token runs afresh."""
    a, token = unique_name("k"), str(uuid.uuid4())
    items = [add(hash_table, a, 1, "attribute_exists(pk)")]
    cancelled(ddb, items, ClientRequestToken=token)
    ddb.transact_write_items(TransactItems=[put(hash_table, a, n=0)])
    ddb.transact_write_items(TransactItems=items, ClientRequestToken=token)
    ddb.transact_write_items(TransactItems=items, ClientRequestToken=token)
    assert get_item(ddb, hash_table, a) == {"pk": {"S": a}, "n": {"N": "1"}}


def test_replay_reports_read_capacity(ddb, hash_table):
    """The first call reports write units; its replay reports the read units it spent."""
    a, token = unique_name("k"), str(uuid.uuid4())
    first = ddb.transact_write_items(TransactItems=[add(hash_table, a, 1)], ClientRequestToken=token,
                                     ReturnConsumedCapacity="TOTAL")
    assert first["ConsumedCapacity"] == [{"TableName": hash_table, "CapacityUnits": 2.0,
                                          "WriteCapacityUnits": 2.0}]
    again = ddb.transact_write_items(TransactItems=[add(hash_table, a, 1)], ClientRequestToken=token,
                                     ReturnConsumedCapacity="TOTAL")
    assert again["ConsumedCapacity"] == [{"TableName": hash_table, "CapacityUnits": 2.0,
                                          "ReadCapacityUnits": 2.0}]
    # A replayed Delete of a 9 KB item reports reads of the item the first call deleted: 6 units, not 2 (as
    # reported of DynamoDB, dynoxide PR 188).
    b, token = unique_name("k"), str(uuid.uuid4())
    ddb.put_item(TableName=hash_table, Item={"pk": {"S": b}, "d": {"S": "x" * 9000}})
    delete = [{"Delete": {"TableName": hash_table, "Key": key(b)}}]
    ddb.transact_write_items(TransactItems=delete, ClientRequestToken=token)
    again = ddb.transact_write_items(TransactItems=delete, ClientRequestToken=token, ReturnConsumedCapacity="TOTAL")
    assert again["ConsumedCapacity"] == [{"TableName": hash_table, "CapacityUnits": 6.0,
                                          "ReadCapacityUnits": 6.0}]


def test_token_survives_across_processes(server, ddb, hash_table):
    """Tokens live in the store, so a second server process on the same data sees them."""
    a, token = unique_name("k"), str(uuid.uuid4())
    ddb.transact_write_items(TransactItems=[add(hash_table, a, 1)], ClientRequestToken=token)
    other = ServerProcess(server.data_dir)
    try:
        client = make_client(other.endpoint)
        client.transact_write_items(TransactItems=[add(hash_table, a, 1)], ClientRequestToken=token)
        with pytest.raises(ClientError) as excinfo:
            client.transact_write_items(TransactItems=[add(hash_table, a, 5)], ClientRequestToken=token)
        assert error_of(excinfo)[0] == "IdempotentParameterMismatchException"
    finally:
        other.stop()
        output = other.output()
        other.log.close()
    assert "Traceback" not in output, output
    assert get_item(ddb, hash_table, a) == {"pk": {"S": a}, "n": {"N": "1"}}


# --- capacity and metrics -------------------------------------------------------------------------------


def test_write_capacity_per_table(ddb, hash_table, second_table):
    """Transactional writes cost 2 WCU per KB, summed per table in order of first appearance."""
    a, b, c = (unique_name("k") for _ in range(3))
    big = {"S": "x" * 1500}  # about 1.5 KB: 2 KB of writes, 4 units
    response = ddb.transact_write_items(TransactItems=[
        {"Put": {"TableName": second_table, "Item": {"pk": {"S": a}, "a": big}}},
        put(hash_table, b, n=1),
        {"ConditionCheck": {"TableName": hash_table, "Key": key(c), "ConditionExpression": "attribute_not_exists(pk)"}},
    ], ReturnConsumedCapacity="TOTAL")
    assert response["ConsumedCapacity"] == [
        {"TableName": second_table, "CapacityUnits": 4.0, "WriteCapacityUnits": 4.0},
        {"TableName": hash_table, "CapacityUnits": 4.0, "WriteCapacityUnits": 4.0},
    ]
    indexes = ddb.transact_write_items(TransactItems=[{"Delete": {"TableName": second_table, "Key": key(a)}}],
                                       ReturnConsumedCapacity="INDEXES")
    assert indexes["ConsumedCapacity"] == [{"TableName": second_table, "CapacityUnits": 4.0,
                                            "WriteCapacityUnits": 4.0,
                                            "Table": {"CapacityUnits": 4.0, "WriteCapacityUnits": 4.0}}]


def test_item_collection_metrics_without_local_indexes(ddb, hash_table):
    """ReturnItemCollectionMetrics SIZE reports nothing for tables without a local secondary index."""
    response = ddb.transact_write_items(TransactItems=[put(hash_table, unique_name("k"), n=1)],
                                        ReturnItemCollectionMetrics="SIZE")
    assert "ItemCollectionMetrics" not in response


def test_item_collection_metrics_with_a_local_index(ddb):
    """On a table with a local secondary index, one entry per item collection written, as PutItem reports it."""
    name = unique_name()
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk", "l")],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                {"AttributeName": "sk", "KeyType": "RANGE"}],
                     LocalSecondaryIndexes=[{"IndexName": "byL", "Projection": {"ProjectionType": "ALL"},
                                             "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                                                           {"AttributeName": "l", "KeyType": "RANGE"}]}])
    items = [{"pk": {"S": pk}, "sk": {"S": sk}, "l": {"S": "x"}} for pk, sk in (("a", "1"), ("a", "2"), ("b", "1"))]
    response = ddb.transact_write_items(TransactItems=[{"Put": {"TableName": name, "Item": item}} for item in items],
                                        ReturnItemCollectionMetrics="SIZE")
    single = ddb.put_item(TableName=name, Item=items[0], ReturnItemCollectionMetrics="SIZE")["ItemCollectionMetrics"]
    assert response["ItemCollectionMetrics"] == {name: [single, {**single, "ItemCollectionKey": {"pk": {"S": "b"}}}]}
    assert single == {"ItemCollectionKey": {"pk": {"S": "a"}}, "SizeEstimateRangeGB": [0.0, 1.0]}


# --- TransactGetItems -----------------------------------------------------------------------------------


def test_get_items_in_order(ddb, hash_table, range_table):
    """Responses come in request order, {} for a missing item, projected when asked."""
    a, b, missing, pk = unique_name("k"), unique_name("k"), unique_name("k"), unique_name("p")
    item = {"n": {"N": "1"}, "m": {"M": {"x": {"S": "y"}, "z": {"S": "w"}}}}
    ddb.transact_write_items(TransactItems=[
        {"Put": {"TableName": hash_table, "Item": {"pk": {"S": a}, **item}}},
        {"Put": {"TableName": hash_table, "Item": {"pk": {"S": b}, **item}}},
        {"Put": {"TableName": range_table, "Item": {"pk": {"S": pk}, "sk": {"S": "1"}, "name": {"S": "n"}}}},
    ])
    response = ddb.transact_get_items(TransactItems=[
        {"Get": {"TableName": range_table, "Key": {"pk": {"S": pk}, "sk": {"S": "1"}},
                 "ProjectionExpression": "#n", "ExpressionAttributeNames": {"#n": "name"}}},
        {"Get": {"TableName": hash_table, "Key": key(missing)}},
        {"Get": {"TableName": hash_table, "Key": key(a), "ProjectionExpression": "m.x, n"}},
        {"Get": {"TableName": hash_table, "Key": key(b)}},
    ])
    assert response["Responses"] == [
        {"Item": {"name": {"S": "n"}}},
        {},
        {"Item": {"m": {"M": {"x": {"S": "y"}}}, "n": {"N": "1"}}},
        {"Item": {"pk": {"S": b}, **item}},
    ]
    assert "ConsumedCapacity" not in response


def test_get_capacity(ddb, hash_table, second_table):
    """Transactional reads cost 2 RCU per 4 KB per item, a missing item included, summed per table."""
    a = unique_name("k")
    ddb.transact_write_items(TransactItems=[{"Put": {"TableName": hash_table,
                                                     "Item": {"pk": {"S": a}, "a": {"S": "x" * 5000}}}}])
    response = ddb.transact_get_items(TransactItems=[
        {"Get": {"TableName": hash_table, "Key": key(a)}},
        {"Get": {"TableName": second_table, "Key": key(unique_name("k"))}},
        {"Get": {"TableName": hash_table, "Key": key(unique_name("k"))}},
    ], ReturnConsumedCapacity="TOTAL")
    assert response["ConsumedCapacity"] == [
        {"TableName": hash_table, "CapacityUnits": 6.0, "ReadCapacityUnits": 6.0},
        {"TableName": second_table, "CapacityUnits": 2.0, "ReadCapacityUnits": 2.0},
    ]


def test_get_validation(server, ddb, hash_table):
    """TransactGetItems validates like GetItem, with paths into TransactItems."""
    get = {"Get": {"TableName": hash_table, "Key": key("a")}}
    assert raw_error(server, "TransactGetItems", {"TransactItems": [get, {}]}) == (
        "ValidationException", "1 validation error detected: Value null at 'transactItems.2.member.get' failed to "
                               "satisfy constraint: Member must not be null")
    code, message = validation_error(ddb, [get] * 101, "transact_get_items")
    assert code == "ValidationException"
    assert message.endswith("Member must have length less than or equal to 100")
    assert validation_error(ddb, [{"Get": {"TableName": "no-such-table", "Key": key("a")}}],
                            "transact_get_items") == ("ResourceNotFoundException", "Requested resource not found")
    assert validation_error(ddb, [{"Get": {"TableName": hash_table, "Key": key("a"), "ProjectionExpression": "a",
                                           "ExpressionAttributeNames": {"#x": "b"}}}], "transact_get_items") == (
        "ValidationException", "Value provided in ExpressionAttributeNames unused in expressions: keys: {#x}")
    assert validation_error(ddb, [get, get], "transact_get_items") == (  # one item read twice
        "ValidationException", "Transaction request cannot include multiple operations on one item")


def test_get_projection_keeping_nothing_answers_an_empty_response(ddb, hash_table):
    """TransactGetItems answers {} for an item its projection keeps nothing of (GetItem answers Item {}), as
    captured against DynamoDB."""
    a, b = unique_name("k"), unique_name("k")
    ddb.put_item(TableName=hash_table, Item={**key(a), "n": {"N": "1"}})
    ddb.put_item(TableName=hash_table, Item={**key(b), "n": {"N": "1"}})
    response = ddb.transact_get_items(TransactItems=[
        {"Get": {"TableName": hash_table, "Key": key(a), "ProjectionExpression": "absent"}},
        {"Get": {"TableName": hash_table, "Key": key(b), "ProjectionExpression": "n"}}])
    assert response["Responses"] == [{}, {"Item": {"n": {"N": "1"}}}]
    assert ddb.get_item(TableName=hash_table, Key=key(a), ProjectionExpression="absent")["Item"] == {}


def test_keys_that_do_not_fit_the_schema_cancel(ddb, hash_table):
    """A key of the wrong type, non-scalar or missing a key attribute cancels the transaction (it is not refused):
    the first such action carries a ValidationError, every other one None, ahead of duplicates and conditions.
    An empty key value still refuses the whole request. (Captured against DynamoDB in four regions, as reported
    in the paritysuite/dynamodb-conformance PRs 46 and 60.)"""
    a = unique_name("k")
    failing = {"ConditionCheck": {"TableName": hash_table, "Key": key(a), "ConditionExpression": "attribute_exists(x)"}}
    for bad, message in (
            ({"Put": {"TableName": hash_table, "Item": {"pk": {"N": "1"}}}},
             "One or more parameter values were invalid: Type mismatch for key pk expected: S actual: N"),
            ({"Put": {"TableName": hash_table, "Item": {"pk": {"M": {}}}}},
             "One or more parameter values were invalid: Type mismatch for key pk expected: S actual: M"),
            ({"Put": {"TableName": hash_table, "Item": {"n": {"S": "x"}}}},
             "One or more parameter values were invalid: Missing the key pk in the item"),
            ({"Delete": {"TableName": hash_table, "Key": {"pk": {"N": "1"}}}},
             "The provided key element does not match the schema"),
            ({"Update": {"TableName": hash_table, "Key": {"id": {"S": "x"}}, "UpdateExpression": "SET v = :v",
                         "ExpressionAttributeValues": {":v": {"S": "y"}}}},
             "The provided key element does not match the schema")):
        second = {"Delete": {"TableName": hash_table, "Key": {"pk": {"L": []}}}}  # also wrong: only the first counts
        text, reasons = cancelled(ddb, [failing, bad, failing, second])
        assert reasons == [{"Code": "None"}, {"Code": "ValidationError", "Message": message}, {"Code": "None"},
                           {"Code": "None"}]
        assert text.endswith("[None, ValidationError, None, None]")
    with pytest.raises(ClientError) as excinfo:
        ddb.transact_get_items(TransactItems=[{"Get": {"TableName": hash_table, "Key": key(a)}},
                                              {"Get": {"TableName": hash_table, "Key": {"pk": {"N": "1"}}}}])
    assert excinfo.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert excinfo.value.response["CancellationReasons"] == [
        {"Code": "None"}, {"Code": "ValidationError", "Message": "The provided key element does not match the schema"}]
    assert validation_error(ddb, [{"Put": {"TableName": hash_table, "Item": {"pk": {"S": ""}}}}]) == (
        "ValidationException", "One or more parameter values are not valid. The AttributeValue for a key attribute "
                               "cannot contain an empty string value. Key: pk")


def test_get_over_4_mb(ddb, hash_table):
    """The items read by one TransactGetItems add up to at most 4 MB."""
    prefix = unique_name("big")
    for start in (0, 6):
        ddb.transact_write_items(TransactItems=[
            {"Put": {"TableName": hash_table, "Item": {"pk": {"S": f"{prefix}-{i}"}, "a": {"S": "x" * 390_000}}}}
            for i in range(start, start + 6)])
    gets = [{"Get": {"TableName": hash_table, "Key": key(f"{prefix}-{i}")}} for i in range(12)]
    assert len(ddb.transact_get_items(TransactItems=gets[:10])["Responses"]) == 10
    assert validation_error(ddb, gets, "transact_get_items") == (
        "ValidationException", "Transaction request size has exceeded the maximum allowed size of 4 MB")


# --- isolation under concurrency ------------------------------------------------------------------------

ACCOUNTS = 20
OPENING_BALANCE = 1000


def test_concurrent_transfers_keep_the_total(server, ddb):
    """Writers on two server processes move money between accounts while readers check the total throughout."""
    table = create_table(ddb, unique_name("bank"), range_type=None)
    ddb.transact_write_items(TransactItems=[put(table, f"acct-{i}", balance=OPENING_BALANCE)
                                            for i in range(ACCOUNTS)])
    expected = ACCOUNTS * OPENING_BALANCE
    gets = [{"Get": {"TableName": table, "Key": key(f"acct-{i}")}} for i in range(ACCOUNTS)]
    other = ServerProcess(server.data_dir)
    endpoints = [server.endpoint, other.endpoint]
    stop = threading.Event()
    errors: list[str] = []
    counts = {"committed": 0, "cancelled": 0, "reads": 0}
    lock = threading.Lock()

    def writer(seed: int) -> None:
        client = make_client(endpoints[seed % 2])
        rng = random.Random(seed)
        while not stop.is_set():
            source, target = rng.sample(range(ACCOUNTS), 2)
            amount = rng.randint(1, 300)
            try:
                client.transact_write_items(TransactItems=[
                    {"Update": {"TableName": table, "Key": key(f"acct-{source}"),
                                "UpdateExpression": "SET balance = balance - :a",
                                "ConditionExpression": "balance >= :a",
                                "ExpressionAttributeValues": {":a": {"N": str(amount)}}}},
                    {"Update": {"TableName": table, "Key": key(f"acct-{target}"),
                                "UpdateExpression": "SET balance = balance + :a",
                                "ExpressionAttributeValues": {":a": {"N": str(amount)}}}},
                ], ClientRequestToken=str(uuid.uuid4()))
                outcome = "committed"
            except ClientError as error:
                reasons = error.response.get("CancellationReasons")
                if reasons != [FAILED, NONE]:
                    errors.append(f"unexpected error: {error.response}")
                outcome = "cancelled"
            with lock:
                counts[outcome] += 1

    def reader(seed: int) -> None:
        client = make_client(endpoints[seed % 2])
        while not stop.is_set():
            items = client.transact_get_items(TransactItems=gets)["Responses"]
            balances = [int(entry["Item"]["balance"]["N"]) for entry in items]
            if sum(balances) != expected or min(balances) < 0:
                errors.append(f"invariant broken: total {sum(balances)}, balances {balances}")
            with lock:
                counts["reads"] += 1

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    threads += [threading.Thread(target=reader, args=(i,)) for i in range(2)]
    try:
        for thread in threads:
            thread.start()
        time.sleep(5)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        other.stop()
        output = other.output()
        other.log.close()
    assert "Traceback" not in output, output
    assert not errors, errors[:5]
    final = ddb.transact_get_items(TransactItems=gets)["Responses"]
    assert sum(int(entry["Item"]["balance"]["N"]) for entry in final) == expected
    assert counts["committed"] > 50 and counts["reads"] > 10, counts


# --- the engine's token contract (time travel is only possible below the API) ----------------------------


def test_engine_token_contract():
    """A live token refuses the write untouched; an expired one is replaced and the write goes ahead."""
    from openddb.model.keys import encode_key, partition_hash
    from openddb.model.schema import KeyAttribute, TableMeta
    from openddb.storage.base import TOKEN_LIFETIME, RequestToken, StorageKey, TokenInUse, WriteOp
    from openddb.storage.sqlite import SQLiteEngine

    engine = SQLiteEngine(None)
    try:
        meta = engine.create_table(TableMeta(name="tokens", table_id=0, uuid="u", hash_key=KeyAttribute("pk", "S"),
                                             range_key=None, attribute_definitions=[], created_at=0.0))
        pk = encode_key({"S": "a"})
        op = WriteOp(meta, StorageKey(partition_hash(pk), pk, b""), lambda old: {"pk": {"S": "a"}})
        now = time.time()

        def stored(token: RequestToken | None) -> tuple[bytes, float] | None:
            return None if token is None else (token.request_hash, token.created_at)

        first, second, third = b"first", b"second", b"third"
        engine.write([op], token=RequestToken("t", first, now - TOKEN_LIFETIME - 1))
        assert stored(engine.get_token("t")) == (first, now - TOKEN_LIFETIME - 1)
        engine.write([op], token=RequestToken("t", second, now))
        assert stored(engine.get_token("t")) == (second, now)
        with pytest.raises(TokenInUse) as excinfo:
            engine.write([WriteOp(meta, op.key, lambda old: None)], token=RequestToken("t", third, now + 1))
        assert stored(excinfo.value.existing) == (second, now)
        assert engine.get(meta, op.key) is not None
        assert engine.get_token("missing") is None
    finally:
        engine.close()
