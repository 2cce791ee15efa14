"""The operation layer (operations/): what each operation says about itself for its later readers (authorization,
metering: table, key, attributes read and written, whether it needs the old item), its one pure `apply`, and the
same refusal as a transaction's cancellation reason (`outcome`)."""

from __future__ import annotations

import pytest

from openddb.api.keys import parse_key
from openddb.errors import ConditionalCheckFailedException, ValidationException
from openddb.expressions import ExpressionAttributes, compile_condition, compile_update
from openddb.model.schema import KeyAttribute, TableMeta
from openddb.operations import ConditionCheck, Delete, Put, Update

META = TableMeta("things", 7, "uuid", KeyAttribute("pk", "S"), None, [{"AttributeName": "pk", "AttributeType": "S"}],
                 0.0)
KEY_ITEM, KEY = parse_key(META, {"pk": {"S": "a"}})
OLD = {"pk": {"S": "a"}, "n": {"N": "1"}, "tags": {"SS": ["x"]}}


def condition(text: str, values: dict | None = None):
    return compile_condition(text, ExpressionAttributes({"#n": "n"}, values))


def test_put_describes_itself_and_applies():
    item = {"pk": {"S": "a"}, "m": {"S": "v"}}
    put = Put(META, KEY_ITEM, KEY, condition("attribute_not_exists(#n)"), None, False, item)
    assert put.attributes_written == {"pk", "m"}
    assert put.attributes_read == {"n"}
    assert put.needs_old
    assert put.apply(None) == put.item
    with pytest.raises(ConditionalCheckFailedException):
        put.apply(OLD)
    blind = put._replace(condition=None)
    assert not blind.needs_old and blind.write_op().blind  # no condition, nothing returned, no index: blind


def test_update_reads_its_condition_and_writes_its_paths():
    attrs = ExpressionAttributes({"#n": "n"}, {":one": {"N": "1"}, ":t": {"SS": ["y"]}})
    update = Update(META, KEY_ITEM, KEY, compile_condition("#n = :one", attrs), "ALL_OLD", False,
                    compile_update("SET #n = #n + :one ADD tags :t", attrs))
    assert update.attributes_written == {"n", "tags"}
    assert update.attributes_read == {"n"}
    assert update.needs_old and not update.write_op().blind
    new = update.apply(OLD)
    assert new == {"pk": {"S": "a"}, "n": {"N": "2"}, "tags": {"SS": ["x", "y"]}}
    assert OLD["n"] == {"N": "1"}  # pure: the old item is not touched
    with pytest.raises(ConditionalCheckFailedException) as failed:
        update.apply(new)
    assert failed.value.item == new  # ALL_OLD: the item that failed the condition


def test_a_refusal_becomes_a_cancellation_reason():
    """`outcome` turns what `apply` raises into the reason a transaction reports, leaving the item as it was."""
    check = ConditionCheck(META, KEY_ITEM, KEY, condition("#n = :two", {":two": {"N": "2"}}), "ALL_OLD", False)
    assert check.attributes_written == frozenset()
    assert check.outcome(OLD) == (OLD, {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed",
                                        "Item": OLD})
    assert check.apply(dict(OLD, n={"N": "2"}))["n"] == {"N": "2"}
    attrs = ExpressionAttributes(None, {":one": {"N": "1"}})
    wrong = Update(META, KEY_ITEM, KEY, None, None, False, compile_update("SET tags = tags + :one", attrs), "item")
    new, reason = wrong.outcome(OLD)
    assert new is OLD and reason is not None and reason["Code"] == "ValidationError"
    with pytest.raises(ValidationException):
        wrong.apply(OLD)


def test_delete_writes_the_whole_item():
    delete = Delete(META, KEY_ITEM, KEY, None, None, True)
    assert delete.attributes_written is None  # every attribute: the item goes
    assert delete.needs_old  # its caller returns the old item
    assert delete.apply(OLD) is None
