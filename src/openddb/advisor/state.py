"""What the advisor reads of the server's own state, beyond table descriptions: point-in-time recovery (through the
server's DescribeContinuousBackups, when the server can turn it on at all) and the identity store's policies. A
state the server cannot read is None, and its rule says "not checked"."""

from __future__ import annotations

from typing import Any

import orjson

from openddb.api.context import RequestContext
from openddb.api.dispatch import TARGET_PREFIX, Dispatcher, implemented_operations
from openddb.errors import DynamoDBError
from openddb.identity.store import IdentityStore, Kind
from openddb.observe.record import RequestRecord


class ServerState:
    """Reads through the dispatcher's handlers (the same code a client's call runs) and its identity store."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        # PITR is real only where the server can restore to a point in time (else UpdateContinuousBackups refuses
        # to turn it on, and every table reads DISABLED: not a finding, a missing feature).
        self.pitr_supported = "RestoreTableToPointInTime" in implemented_operations()["dynamodb"]

    def pitr(self, table: str) -> bool | None:
        """Whether point-in-time recovery is on for `table` (None: cannot be read)."""
        if not self.pitr_supported:
            return None
        handler = self.dispatcher.handlers.get(TARGET_PREFIX + b"DescribeContinuousBackups")
        if handler is None:
            return None
        context = RequestContext(self.dispatcher.engine, RequestRecord("DescribeContinuousBackups"), "us-east-1",
                                 self.dispatcher.account, "advisor")
        try:
            answer = handler(context, {"TableName": table}) or {}
        except DynamoDBError:
            return None
        status = (answer.get("ContinuousBackupsDescription", {}).get("PointInTimeRecoveryDescription", {})
                  .get("PointInTimeRecoveryStatus"))
        return None if status is None else status == "ENABLED"

    def policies(self) -> list[tuple[str, str, dict[str, Any]]]:
        """("user NAME" or "role NAME", policy name, document) of every inline policy of the identity store's
        users and roles."""
        store = IdentityStore(lambda: self.dispatcher.engine)
        found: list[tuple[str, str, dict[str, Any]]] = []
        kinds: tuple[Kind, ...] = ("user", "role")
        for kind in kinds:
            for record in store.records(kind):
                name = record.get("UserName") or record.get("RoleName") or "?"
                for policy, text in (record.get("policies") or {}).items():
                    try:
                        document = orjson.loads(text)
                    except orjson.JSONDecodeError:
                        continue
                    if isinstance(document, dict):
                        found.append((f"{kind} {name}", policy, document))
        return found
