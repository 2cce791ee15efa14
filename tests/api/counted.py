"""Which refusals PutItem and UpdateItem count as "1 validation error detected: ...".

Recorded in every region of paritysuite's 2026-09-20 cross-region run (us-east-1 among them) and in 31 of 33
regions on 2026-10-07: their request checks on sets, NULL, numbers, expressions and expression members carry the
count; key, size and data-dependent refusals, and every other operation's, stay bare.
"""

from __future__ import annotations

COUNT = "1 validation error detected: "
_FAMILIES = ("Can not use both expression and non-expression parameters", "ExpressionAttributeValues can only be",
             "ExpressionAttributeNames can only be", "ExpressionAttributeNames must not be empty",
             "ExpressionAttributeValues must not be empty", "Invalid ConditionExpression: ",
             "Invalid UpdateExpression: ", "Value provided in ExpressionAttributeNames unused",
             "Value provided in ExpressionAttributeValues unused", "The parameter cannot be converted to a numeric",
             "One or more parameter values were invalid: Input collection",
             "One or more parameter values were invalid: Binary sets should not be empty",
             "One or more parameter values were invalid: Null attribute value types")


def counted(message: str) -> str:
    """`message` as PutItem or UpdateItem gives it. (The recorded answers themselves, spelled out, are checked in
    test_items.test_counted_refusals_as_recorded.)"""
    if message.startswith(_FAMILIES) or (
            message.startswith("One or more parameter values were invalid: An ")
            and message.endswith(" set  may not be empty")):
        return COUNT + message
    return message
