"""The 400 KB limit as each write family measures it, on both sides of each boundary.

PutItem, BatchWriteItem and a transaction's Put and Update hold the item to 409,600 bytes by the Developer Guide's
size formulas ("Item sizes and formats"; numbers by the measured rule in model/numbers.py). UpdateItem adds its own
accounting (operations/writes.py `update_too_large`): what the update writes, plus 3 bytes for the update, 19 per action
that writes a value, 2 per REMOVE, 1 more through a list index and 50 more for an arithmetic SET, with key
attributes and untouched attributes left out (eu-west-2 bisections published by dynoxide; the 50 bytes rest on a
single report). Every table here has a one-character key value, so the key attribute `pk` costs 3 bytes.
"""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tests.api.item_sizes import item_size, number_size
from tests.conftest import create_table

LIMIT = 400 * 1024
PUT_TOO_BIG = ("ValidationException", "Item size has exceeded the maximum allowed size")
UPDATE_TOO_BIG = ("ValidationException", "Item size to update has exceeded the maximum allowed size")
KEY = {"pk": {"S": "a"}}
KEY_BYTES = 3  # "pk" + "a"
UPDATE, WRITE, REMOVE, ARITHMETIC = 3, 19, 2, 50


def error_of(call) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(ClientError) as excinfo:
        call()
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


@pytest.fixture(scope="module")
def table(ddb) -> str:
    return create_table(ddb, range_type=None)


def update(ddb, table: str, expression: str, values: dict | None = None):  # type: ignore[no-untyped-def]
    extra = {"ExpressionAttributeValues": values} if values else {}
    return ddb.update_item(TableName=table, Key=KEY, UpdateExpression=expression, **extra)


def stored(ddb, table: str) -> dict:
    return ddb.get_item(TableName=table, Key=KEY, ConsistentRead=True)["Item"]


# --- PutItem: the item as the Developer Guide sizes it ----------------------------------------------------


def test_put_item_boundary_counts_names_and_numbers(ddb, table):
    """Attribute names (multibyte too), nested map names, list and map overheads and each number's measured size
    all count: an item of exactly 409,600 bytes is stored, one byte more is refused, and nothing is written."""
    item = {
        "pk": {"S": "a"}, "名前": {"S": "☃"}, "n": {"N": "-12.345"},
        "big": {"N": "1234567890123456789012345678901234567"}, "tiny": {"N": "0.000001"}, "round": {"N": "1000"},
        "ns": {"NS": ["1", "22", "333"]},
        "doc": {"M": {"ключ": {"L": [{"N": "7"}, {"BOOL": False}, {"NULL": True}]}}}, "pad": {"S": ""},
    }
    item["pad"] = {"S": "p" * (LIMIT - item_size(item))}
    assert item_size(item) == LIMIT
    ddb.put_item(TableName=table, Item=item)
    assert stored(ddb, table)["pad"] == item["pad"]
    ddb.delete_item(TableName=table, Key=KEY)
    over = {**item, "pad": {"S": item["pad"]["S"] + "p"}}
    assert error_of(lambda: ddb.put_item(TableName=table, Item=over)) == PUT_TOO_BIG
    assert "Item" not in ddb.get_item(TableName=table, Key=KEY)
    # A longer attribute name costs its bytes: renaming `pad` to `padd` tips the same item over.
    renamed = {name: value for name, value in item.items() if name != "pad"} | {"padd": item["pad"]}
    assert error_of(lambda: ddb.put_item(TableName=table, Item=renamed)) == PUT_TOO_BIG
    # BatchWriteItem and a transaction's Put word it as PutItem does.
    assert error_of(lambda: ddb.batch_write_item(RequestItems={table: [{"PutRequest": {"Item": over}}]})) == \
        PUT_TOO_BIG
    assert error_of(lambda: ddb.transact_write_items(
        TransactItems=[{"Put": {"TableName": table, "Item": over}}])) == PUT_TOO_BIG


# --- UpdateItem: its own accounting -------------------------------------------------------------------------


def test_set_of_a_large_attribute_on_a_large_item(ddb, table):
    """Rewriting a large attribute is measured by the value written plus 22 bytes (3 + 19), not by the finished
    item: the same-sized rewrite of a 409,578-byte attribute is refused although the item does not grow."""
    ceiling = LIMIT - UPDATE - WRITE - 1  # the longest value `SET u = :v` may write
    ddb.put_item(TableName=table, Item={**KEY, "u": {"S": "x" * ceiling}})
    update(ddb, table, "SET u = :v", {":v": {"S": "y" * ceiling}})
    assert stored(ddb, table)["u"]["S"][:1] == "y"
    assert error_of(lambda: update(ddb, table, "SET u = :v", {":v": {"S": "z" * (ceiling + 1)}})) == UPDATE_TOO_BIG
    ddb.put_item(TableName=table, Item={**KEY, "u": {"S": "x" * (ceiling + 1)}})  # PutItem stores it
    assert error_of(lambda: update(ddb, table, "SET u = :v", {":v": {"S": "z" * (ceiling + 1)}})) == UPDATE_TOO_BIG
    assert stored(ddb, table)["u"]["S"][:1] == "x"


def test_small_set_on_a_large_item_is_held_by_the_finished_item(ddb, table):
    """A small SET beside a large untouched attribute is measured by the finished item: exactly 409,600 bytes
    is stored, one more is refused."""
    ddb.put_item(TableName=table, Item={**KEY, "u": {"S": "x" * 300_000}})
    room = LIMIT - KEY_BYTES - (1 + 300_000) - 1  # what `b` may hold
    update(ddb, table, "SET b = :v", {":v": {"S": "b" * room}})
    assert item_size(stored(ddb, table)) == LIMIT
    ddb.put_item(TableName=table, Item={**KEY, "u": {"S": "x" * 300_000}})
    assert error_of(lambda: update(ddb, table, "SET b = :v", {":v": {"S": "b" * (room + 1)}})) == UPDATE_TOO_BIG
    assert "b" not in stored(ddb, table)


def test_list_append_is_measured_by_the_whole_list(ddb, table):
    """`SET l = list_append(l, :v)` writes the whole list: its final size plus 22 bytes is held to 400 KB."""
    first = 200_000
    # l = "l" + 3 + (1 + first) + (1 + m): the update may write m while 1 + 3 + 2 + first + m + 22 <= LIMIT.
    most = LIMIT - UPDATE - WRITE - 1 - 3 - 2 - first

    def grow(length: int) -> None:
        update(ddb, table, "SET l = list_append(l, :v)", {":v": {"L": [{"S": "m" * length}]}})

    ddb.put_item(TableName=table, Item={**KEY, "l": {"L": [{"S": "f" * first}]}})
    grow(most)
    assert len(stored(ddb, table)["l"]["L"]) == 2
    ddb.put_item(TableName=table, Item={**KEY, "l": {"L": [{"S": "f" * first}]}})
    assert error_of(lambda: grow(most + 1)) == UPDATE_TOO_BIG
    assert len(stored(ddb, table)["l"]["L"]) == 1


def test_add_to_a_set_is_measured_by_the_whole_set(ddb, table):
    """ADD to a string set writes the whole set: its final size plus 22 bytes is held to 400 KB."""
    first = 250_000
    most = LIMIT - UPDATE - WRITE - 1 - first  # "s" + both members

    def add(length: int) -> None:
        update(ddb, table, "ADD s :v", {":v": {"SS": ["n" * length]}})

    ddb.put_item(TableName=table, Item={**KEY, "s": {"SS": ["o" * first]}})
    add(most)
    assert len(stored(ddb, table)["s"]["SS"]) == 2
    ddb.put_item(TableName=table, Item={**KEY, "s": {"SS": ["o" * first]}})
    assert error_of(lambda: add(most + 1)) == UPDATE_TOO_BIG
    assert len(stored(ddb, table)["s"]["SS"]) == 1


def test_remove_and_counter_on_an_item_at_the_limit(ddb, table):
    """On an item of exactly 409,600 bytes, a REMOVE (2 bytes) and an ADD to a counter are measured by what they
    write, not by the item they leave, so both succeed."""
    item = {**KEY, "n": {"N": "1"}, "v": {"S": "v"}, "u": {"S": ""}}
    item["u"] = {"S": "x" * (LIMIT - item_size(item))}
    assert item_size(item) == LIMIT
    ddb.put_item(TableName=table, Item=item)
    update(ddb, table, "REMOVE v")
    update(ddb, table, "ADD n :one", {":one": {"N": "1"}})
    got = stored(ddb, table)
    assert "v" not in got and got["n"] == {"N": "2"}
    # Growing it back by the byte it lost is allowed, by one byte more refused.
    update(ddb, table, "SET v = :v", {":v": {"BOOL": True}})
    assert item_size(stored(ddb, table)) == LIMIT
    assert error_of(lambda: update(ddb, table, "SET w = :v", {":v": {"BOOL": True}})) == UPDATE_TOO_BIG


def test_arithmetic_set_costs_fifty_bytes_more(ddb, table):
    """`SET n = :x + :y` is charged 50 bytes more than the plain SET writing the same number (dynoxide's
    eu-west-2 measurement, a single report)."""
    number = {"N": "3"}  # 1 + 1 bytes under the name "n"
    base = LIMIT - UPDATE - 2 * WRITE - (1 + number_size("3")) - 1  # the longest `b` beside a plain SET of n

    def plain(length: int) -> None:
        update(ddb, table, "SET b = :b, n = :n", {":b": {"S": "b" * length}, ":n": number})

    def arithmetic(length: int) -> None:
        update(ddb, table, "SET b = :b, n = :x + :y", {":b": {"S": "b" * length}, ":x": {"N": "1"},
                                                       ":y": {"N": "2"}})

    ddb.delete_item(TableName=table, Key=KEY)
    plain(base)
    assert error_of(lambda: plain(base + 1)) == UPDATE_TOO_BIG
    ddb.delete_item(TableName=table, Key=KEY)
    arithmetic(base - ARITHMETIC)
    assert stored(ddb, table)["n"] == number
    ddb.delete_item(TableName=table, Key=KEY)
    assert error_of(lambda: arithmetic(base - ARITHMETIC + 1)) == UPDATE_TOO_BIG
    assert "Item" not in ddb.get_item(TableName=table, Key=KEY)


def test_legacy_attribute_updates_word_it_as_update_item(ddb, table):
    """AttributeUpdates are measured and worded as the update expression they stand for."""
    ddb.delete_item(TableName=table, Key=KEY)
    ceiling = LIMIT - UPDATE - WRITE - 1
    ddb.update_item(TableName=table, Key=KEY, AttributeUpdates={"u": {"Action": "PUT", "Value": {"S": "x" * ceiling}}})
    assert error_of(lambda: ddb.update_item(
        TableName=table, Key=KEY, AttributeUpdates={"u": {"Action": "PUT", "Value": {"S": "x" * (ceiling + 1)}}})) == \
        UPDATE_TOO_BIG


# --- TransactWriteItems' Update: the finished item only -----------------------------------------------------


def test_transaction_update_is_held_to_the_finished_item(ddb, table):
    """A transaction's Update stores the 409,600-byte item UpdateItem refuses at a one-character key (captured
    in 31 of 33 regions, 2026-10), and cancels one byte more with UpdateItem's wording as its reason."""
    ddb.delete_item(TableName=table, Key=KEY)
    at_limit = LIMIT - KEY_BYTES - 1

    def action(length: int) -> dict:
        return {"Update": {"TableName": table, "Key": KEY, "UpdateExpression": "SET b = :p",
                           "ExpressionAttributeValues": {":p": {"S": "x" * length}}}}

    assert error_of(lambda: update(ddb, table, "SET b = :p", {":p": {"S": "x" * at_limit}})) == UPDATE_TOO_BIG
    ddb.transact_write_items(TransactItems=[action(at_limit)])
    assert item_size(stored(ddb, table)) == LIMIT
    ddb.delete_item(TableName=table, Key=KEY)
    with pytest.raises(ClientError) as excinfo:
        ddb.transact_write_items(TransactItems=[action(at_limit + 1)])
    assert excinfo.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert excinfo.value.response["CancellationReasons"] == [
        {"Code": "ValidationError", "Message": UPDATE_TOO_BIG[1]}]
