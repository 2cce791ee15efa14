"""The operation layer: typed, validated operations between every front end (the DynamoDB JSON API, its legacy
parameters, batches, transactions, PartiQL) and the engine. Each write carries its table, key, what it reads and
writes, whether it needs the old item, and one pure `apply(old) -> new`; each action has one implementation."""

from __future__ import annotations

from .reads import Get
from .writes import ConditionCheck, Delete, Put, Update, WriteOperation, update_too_large

__all__ = ["ConditionCheck", "Delete", "Get", "Put", "Update", "WriteOperation", "update_too_large"]
