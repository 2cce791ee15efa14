"""Errors injected into a fraction of calls (`openddb serve --inject-errors SPEC`), to test retry and backoff code.

    SPEC = RATE[:KIND[,KIND...]][@TARGET[,TARGET...]]     e.g. 0.1   0.05:internal,unavailable   1:throttle@Orders

RATE is the fraction of matching calls refused (0 < RATE <= 1). KIND is `throttle` (the default: as DynamoDB
throttles a table's callers, ProvisionedThroughputExceededException on a provisioned table and ThrottlingException
on an on-demand one, with their ThrottlingReasons), `internal` (500 InternalServerError) or `unavailable` (503
ServiceUnavailable); several kinds are chosen among at random. Only data-plane calls are refused (item reads and
writes, queries, scans, batches, transactions, PartiQL: what DynamoDB throttles by a table's throughput), never
table management or DynamoDB Streams. A TARGET is one of those operations (`PutItem`) or a table name; without
targets every data-plane call matches. A refused call is refused before it runs: it changes nothing, as a
throttled or failed call on DynamoDB.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal

from openddb.api.context import table_name_from, tables_named
from openddb.api.incoming import Caller
from openddb.errors import (
    DynamoDBError,
    InternalServerError,
    ProvisionedThroughputExceededException,
    ServiceUnavailable,
    ThrottlingException,
)
from openddb.model.schema import table_arn
from openddb.storage.base import Engine

Kind = Literal["throttle", "internal", "unavailable"]
KINDS: tuple[Kind, ...] = ("throttle", "internal", "unavailable")
_PREFIX = b"DynamoDB_20120810."
_DATA_PLANE = frozenset({"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem",
                         "BatchWriteItem", "TransactGetItems", "TransactWriteItems", "ExecuteStatement",
                         "BatchExecuteStatement", "ExecuteTransaction"})
_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems",
                     "ExecuteTransaction", "BatchExecuteStatement"})
# As DynamoDB words them: a provisioned table's throttle (mozilla-services/autopush issue 435 and
# quintilesims/layer0 issue 229 quote the raw answer), an on-demand table's (a PutItem's in
# praetorian-inc/chariot-ui issue 684, 2024; aws/aws-appsync-community issue 336).
PROVISIONED_THROTTLE = ("The level of configured provisioned throughput for the table was exceeded. Consider "
                        "increasing your provisioning level with the UpdateTable API.")
ON_DEMAND_THROTTLE = ("Throughput exceeds the current capacity of your table or index. DynamoDB is automatically "
                      "scaling your table or index so please try again shortly. If exceptions persist, check if you "
                      "have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/"
                      "bp-partition-key-design.html")


class SpecError(ValueError):
    """A --inject-errors SPEC that cannot be read (the message says why)."""


@dataclass(frozen=True)
class Fault:
    rate: float
    kinds: tuple[Kind, ...]
    operations: frozenset[str]  # empty: any
    tables: frozenset[str]  # empty: any

    def matches(self, operation: str, tables: list[str]) -> bool:
        if not self.operations and not self.tables:
            return True
        return operation in self.operations or any(table in self.tables for table in tables)


def parse_spec(spec: str, operations: frozenset[str]) -> Fault:
    """A SPEC (see the module's doc); `operations`: the names that are operations rather than tables."""
    head, _, targets = spec.partition("@")
    rate_text, _, kinds_text = head.partition(":")
    try:
        rate = float(rate_text)
    except ValueError:
        raise SpecError(f"--inject-errors {spec}: the rate must be a number in (0, 1]") from None
    if not 0 < rate <= 1:
        raise SpecError(f"--inject-errors {spec}: the rate must be a number in (0, 1]")
    kinds = tuple(kind.strip() for kind in kinds_text.split(",")) if kinds_text else ("throttle",)
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown:
        raise SpecError(f"--inject-errors {spec}: unknown kind {unknown[0]!r} (throttle, internal, unavailable)")
    names = [name.strip() for name in targets.split(",") if name.strip()] if targets else []
    return Fault(rate, kinds, frozenset(name for name in names if name in operations),  # type: ignore[arg-type]
                 frozenset(name for name in names if name not in operations))


class FaultInjector:
    def __init__(self, faults: list[Fault], chance: random.Random | None = None) -> None:
        self.faults = faults
        self.chance = chance or random.Random()

    def check(self, target: bytes, request: dict[str, Any], engine: Engine, caller: Caller) -> None:
        """Raise the injected error if this call is one of those refused."""
        if not target.startswith(_PREFIX):
            return
        operation = target[len(_PREFIX):].decode("latin-1")
        if operation not in _DATA_PLANE:
            return
        tables = [table_name_from(table) for table in tables_named(request)]
        for fault in self.faults:
            if fault.matches(operation, tables) and self.chance.random() < fault.rate:
                raise self._error(self.chance.choice(fault.kinds), operation, tables, engine, caller)

    @staticmethod
    def _error(kind: Kind, operation: str, tables: list[str], engine: Engine, caller: Caller) -> DynamoDBError:
        if kind == "internal":
            return InternalServerError("Internal server error")
        if kind == "unavailable":
            return ServiceUnavailable()
        meta = engine.get_table(caller.namespace + tables[0]) if tables else None
        access = "Write" if operation in _WRITES else "Read"
        on_demand = meta is not None and meta.billing_mode == "PAY_PER_REQUEST"
        error: DynamoDBError
        if on_demand:  # (botocore's model names each exception's reasons member its own way)
            error, member, limit = ThrottlingException(ON_DEMAND_THROTTLE), "throttlingReasons", "KeyRange"
        else:
            error = ProvisionedThroughputExceededException(PROVISIONED_THROTTLE)
            member, limit = "ThrottlingReasons", "Provisioned"
        error.extra = {member: [{"reason": f"Table{access}{limit}ThroughputExceeded",
                                 "resource": table_arn(caller.region, caller.account, tables[0])}] if tables else []}
        return error
