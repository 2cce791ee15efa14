"""Write operations: Put, Update, Delete and ConditionCheck, each one implementation of its action.

A front end (PutItem, a transaction's action, a BatchWriteItem request, a legacy rewrite, a PartiQL statement)
checks its input, builds one of these, and hands `write_op()` to the engine. `apply(old) -> new` is pure and
may run more than once (an engine may retry); it raises ConditionalCheckFailedException when the condition is
false and ValidationException when the result is refused. A transaction turns those into cancellation reasons
(`outcome`). Each operation names its table, key, the attributes it reads and writes, and whether it needs the
old item, for the readers of operations that come after the engine's (authorization, metering).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import orjson

from openddb.api.keys import check_index_keys
from openddb.api.limits import exceeds_item_size
from openddb.errors import ConditionalCheckFailedException, ValidationException
from openddb.expressions import Condition
from openddb.expressions import Update as UpdateExpression
from openddb.expressions.resolve import get_path
from openddb.expressions.update import WRONG_TYPE
from openddb.model import Item
from openddb.model.schema import TableMeta
from openddb.model.values import MAX_ITEM_SIZE, MSG_UPDATE_SIZE, item_size
from openddb.storage.base import StorageKey, WriteOp

OnFailure = Literal["ALL_OLD", "NONE"] | None
# What an Update's finished item is held to: UpdateItem's own accounting (`update_too_large`) or, in a
# transaction, the item size limit alone.
SizeRule = Literal["update_item", "item"]
_CONDITION_FAILED = "ConditionalCheckFailed"
_CONDITION_FAILED_MESSAGE = "The conditional request failed"
# An index key emptied by an update refuses a whole transaction rather than cancelling it (as reported of DynamoDB).
EMPTY_INDEX_KEY = "attempted to update a secondary index key to a value that is not supported"


def _check(condition: Condition | None, old: Item | None, on_failure: OnFailure) -> None:
    if condition is not None and not condition.evaluate(old):
        raise ConditionalCheckFailedException(item=old if on_failure == "ALL_OLD" and old is not None else None)


class _Write:
    """What every write operation does with what it carries (a mixin of the immutable operations below: each is
    a NamedTuple, which a request builds in a fraction of a frozen dataclass's time, on every write)."""

    __slots__ = ()

    # The fields every write operation has (each operation's NamedTuple defines them; these only type them here).
    @property
    def table(self) -> TableMeta:
        raise NotImplementedError

    @property
    def key_item(self) -> Item:
        raise NotImplementedError

    @property
    def key(self) -> StorageKey:
        raise NotImplementedError

    @property
    def condition(self) -> Condition | None:
        raise NotImplementedError

    @property
    def on_failure(self) -> OnFailure:  # ReturnValuesOnConditionCheckFailure
        raise NotImplementedError

    @property
    def returns_old(self) -> bool:  # the caller needs the old item or its size (return values, capacity)
        raise NotImplementedError

    @property
    def needs_old(self) -> bool:
        """Whether the operation itself needs the stored item (its condition, or what the caller returns)."""
        return self.condition is not None or self.returns_old

    @property
    def attributes_read(self) -> frozenset[str]:
        """Top-level attributes the operation reads (its condition's)."""
        return self.condition.names if self.condition is not None else frozenset()

    def apply(self, old: Item | None) -> Item | None:
        raise NotImplementedError

    def write_op(self) -> WriteOp:
        """The engine's write: blind (no read of the old row) when neither this operation nor an index needs it."""
        return WriteOp(self.table, self.key, self.apply, not self.needs_old and not self.table.indexes)

    def outcome(self, old: Item | None) -> tuple[Item | None, dict[str, Any] | None]:
        """`apply` as a transaction action runs it: (new item, None), or (old item, cancellation reason)."""
        try:
            return self.apply(old), None
        except ConditionalCheckFailedException as failed:
            reason: dict[str, Any] = {"Code": _CONDITION_FAILED, "Message": _CONDITION_FAILED_MESSAGE}
            if failed.item is not None:
                reason["Item"] = failed.item
            return old, reason
        except ValidationException as error:
            if EMPTY_INDEX_KEY in (error.message or ""):  # refuses the whole request, as reported of DynamoDB
                raise
            return old, {"Code": "ValidationError", "Message": error.message}


class _PutFields(NamedTuple):
    table: TableMeta
    key_item: Item
    key: StorageKey
    condition: Condition | None
    on_failure: OnFailure
    returns_old: bool
    item: Item


class Put(_PutFields, _Write):
    __slots__ = ()

    @property
    def attributes_written(self) -> frozenset[str]:
        return frozenset(self.item)

    def apply(self, old: Item | None) -> Item | None:
        _check(self.condition, old, self.on_failure)
        return self.item


class _KeyFields(NamedTuple):
    table: TableMeta
    key_item: Item
    key: StorageKey
    condition: Condition | None
    on_failure: OnFailure
    returns_old: bool


class Delete(_KeyFields, _Write):
    __slots__ = ()

    @property
    def attributes_written(self) -> frozenset[str] | None:
        """None: every attribute of the item (it is removed)."""
        return None

    def apply(self, old: Item | None) -> Item | None:
        _check(self.condition, old, self.on_failure)
        return None


class ConditionCheck(_KeyFields, _Write):
    __slots__ = ()

    @property
    def attributes_written(self) -> frozenset[str]:
        return frozenset()

    def apply(self, old: Item | None) -> Item | None:
        _check(self.condition, old, self.on_failure)
        return old  # the very object: the row is left untouched


class _UpdateFields(NamedTuple):
    table: TableMeta
    key_item: Item
    key: StorageKey
    condition: Condition | None
    on_failure: OnFailure
    returns_old: bool
    update: UpdateExpression | None  # None: a legacy UpdateItem with nothing to update (creates a key-only item)
    size_rule: SizeRule = "update_item"
    legacy_updates: bool = False  # from AttributeUpdates: a type mismatch is worded as the legacy form's


class Update(_UpdateFields, _Write):
    __slots__ = ()

    @property
    def attributes_written(self) -> frozenset[str]:
        return self.update.updated_top_level_names() if self.update is not None else frozenset()

    @property
    def needs_old(self) -> bool:
        return True  # an update is applied to the stored item

    def apply(self, old: Item | None) -> Item | None:
        _check(self.condition, old, self.on_failure)
        base = old if old is not None else self.key_item
        update = self.update
        if update is None:
            return base if old is not None else dict(base)  # an existing item untouched, a missing one key-only
        try:
            new = update.apply(base, missing=old is None)
        except ValidationException as error:
            if self.legacy_updates and error.message == WRONG_TYPE:
                raise ValidationException("Type mismatch for attribute to update") from None
            raise
        if old is None and len(new) == len(self.key_item):
            return None  # only REMOVE/DELETE actions on a missing item: DynamoDB does not create it
        if (update_too_large(self.table, update, new) if self.size_rule == "update_item"
                else exceeds_item_size(self.table, new)):
            raise ValidationException(MSG_UPDATE_SIZE)
        check_index_keys(self.table, new, updating=True)
        return new


WriteOperation = Put | Update | Delete | ConditionCheck

# UpdateItem's own accounting of the 400 KB limit (see `update_too_large`), in bytes: for the update, for each
# action that writes a value, for each that removes one, and on top for a SET through a list index and for a SET
# whose value is `a + b` or `a - b`.
_UPDATE_BYTES, _WRITE_BYTES, _REMOVE_BYTES, _LIST_INDEX_BYTES, _ARITHMETIC_BYTES = 3, 19, 2, 1, 50


def update_too_large(meta: TableMeta, update: UpdateExpression, new: Item) -> bool:
    """True if DynamoDB refuses this UpdateItem as too large. It holds an update to two measures:

    * the finished item, as every write is (with its local secondary index entries: `exceeds_item_size`);
    * its own accounting of the update: what the update writes (each written value as it ends, under its
      attribute's name; an element written through a list index as a one-element list), plus 3 bytes for the
      update, 19 for each action that writes a value (SET, ADD, DELETE), 2 for each REMOVE, 1 more for a SET
      through a list index and 50 more for an arithmetic SET. Key attributes and attributes the update leaves
      alone are not counted, so at a one-character key UpdateItem refuses the 409,600-byte item PutItem or a
      transaction's Update stores, and a counter on a large item still moves.

    Sources: bisections of the limit in eu-west-2 published by dynoxide (CHANGELOG entry for its issue 187: 3,
    19 and 2 bytes, list index +1, "an arithmetic assignment such as SET n = n + :one costs fifty more"; issue
    210: untouched attributes left out, from one 10-byte attribute). The 50 bytes rest on that single report.
    The 31-of-33-region capture (2026-10) of the transaction's 409,600-byte item refused by UpdateItem agrees.
    Whether DynamoDB stores a finished item over 400 KB whose untouched attributes leave the update room is
    not recorded: it is refused here, as the documented 400 KB limit says."""
    writes, removes, through_index = update.action_counts
    charge = (_UPDATE_BYTES + _WRITE_BYTES * writes + _REMOVE_BYTES * removes + _LIST_INDEX_BYTES * through_index
              + _ARITHMETIC_BYTES * update.arithmetic_sets)
    local = sum(1 for index in meta.indexes if not index.is_global) if meta.indexes else 0
    # The item's JSON is never shorter than its size, nor than what the update writes: one encoding clears both.
    if len(orjson.dumps(new)) * (1 + local) + charge <= MAX_ITEM_SIZE:
        return False
    if exceeds_item_size(meta, new):
        return True
    written = 0
    for path in update.written_paths():
        value = get_path(new, path)
        if value is not None:
            written += item_size({str(path[0]): value})
            if isinstance(path[-1], int):  # in its list: the list's 3 bytes and the element's 1 (issue 210)
                written += 4
    return written + charge > MAX_ITEM_SIZE
