"""The operations a call on items built, handed to its authorization (identity/access.py) before anything runs:
each front end calls one of these once its operations are built and before storage is touched, when the request
context carries an `Access` (`--auth verify`, a caller other than the root; otherwise nothing is called).

What each operation touches, as the condition keys hold it (best guess where the Developer Guide is silent: which
attributes a write "accesses"; here the key attributes, the written ones and those its condition reads):
- a Put: its item's attributes and its condition's; an Update: the key's, the updated and the condition's;
  a Delete and a ConditionCheck: the key's and the condition's;
- a read (GetItem, BatchGetItem's keys, TransactGetItems' gets, Query, Scan): its projection's top-level attributes
  (and a Query's or Scan's filter's), none when it has no projection.
"""

from __future__ import annotations

from collections.abc import Iterable

from openddb.expressions import Projection
from openddb.identity.access import Access, ItemAccess, ItemKeys, key_text
from openddb.model import Item
from openddb.model.keys import decode_key
from openddb.model.schema import TableMeta
from openddb.operations import ConditionCheck, Delete, Get, Put, Update, WriteOperation


def _leading(meta: TableMeta, key_item: Item) -> tuple[str, ...]:
    value = key_item.get(meta.hash_key.name)
    return () if value is None else (key_text(value),)


def write_access(action: str, operation: WriteOperation) -> ItemAccess:
    """What a write operation touches (`action`: the IAM action it needs)."""
    def keys() -> ItemKeys:
        attributes = set(operation.key_item) | operation.attributes_read
        if isinstance(operation, Put | Update):
            attributes |= operation.attributes_written
        return ItemKeys(_leading(operation.table, operation.key_item), frozenset(attributes))
    return ItemAccess(action, operation.table, keys)


WRITE_ACTIONS: dict[type, str] = {Put: "dynamodb:PutItem", Update: "dynamodb:UpdateItem",
                                  Delete: "dynamodb:DeleteItem", ConditionCheck: "dynamodb:ConditionCheckItem"}


def check_writes(access: Access, operations: Iterable[WriteOperation], action: str | None = None) -> None:
    """AccessDeniedException unless every write is allowed: each as `action` (a batch's) or as its own item
    action (a transaction's)."""
    access.items(write_access(action or WRITE_ACTIONS[type(operation)], operation) for operation in operations)


def check_gets(access: Access, action: str, meta: TableMeta, key_items: Iterable[Item],
               projection: Projection | None) -> None:
    """AccessDeniedException unless reading these keys of `meta` (with `projection`) is allowed."""
    attributes = None if projection is None else frozenset(projection.top_level_names)
    select = "ALL_ATTRIBUTES" if projection is None else "SPECIFIC_ATTRIBUTES"

    def access_of(key_item: Item) -> ItemAccess:
        return ItemAccess(action, meta, lambda: ItemKeys(_leading(meta, key_item), attributes, select))
    access.items(access_of(key_item) for key_item in key_items)


def check_read(access: Access, action: str, meta: TableMeta, index: str | None, leading: tuple[str, ...],
               attributes: frozenset[str] | None, select: str) -> None:
    """AccessDeniedException unless a Query or Scan of `meta` (or of its index) is allowed."""
    access.items((ItemAccess(action, meta, lambda: ItemKeys(leading, attributes, select), index),))


# The PartiQL action each operation a statement plans needs (Service Authorization Reference: PartiQLInsert,
# PartiQLUpdate, PartiQLDelete, PartiQLSelect; best guess: an EXISTS check, which reads, needs PartiQLSelect).
PARTIQL_ACTIONS: dict[type, str] = {Put: "dynamodb:PartiQLInsert", Update: "dynamodb:PartiQLUpdate",
                                    Delete: "dynamodb:PartiQLDelete", ConditionCheck: "dynamodb:PartiQLSelect"}


def check_statement_writes(access: Access, operations: Iterable[WriteOperation]) -> None:
    """AccessDeniedException unless every write PartiQL statements planned is allowed."""
    access.items(write_access(PARTIQL_ACTIONS[type(operation)], operation) for operation in operations)


def check_statement_gets(access: Access, gets: Iterable[Get]) -> None:
    """AccessDeniedException unless every one-item SELECT is allowed (dynamodb:PartiQLSelect)."""
    for get in gets:
        meta = get.table
        key_item = {meta.hash_key.name: decode_key(meta.hash_key.type, get.key.pk)}
        check_gets(access, "dynamodb:PartiQLSelect", meta, (key_item,), get.projection)
