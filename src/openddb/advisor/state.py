"""What the advisor reads of the server's own state, beyond table descriptions: point-in-time recovery (the
engine's recovery window, as DescribeContinuousBackups reads it) and the identity store's policies."""

from __future__ import annotations

from typing import Any

import orjson

from openddb.api.dispatch import Dispatcher
from openddb.identity.store import IdentityStore, Kind
from openddb.model.schema import TableMeta


class ServerState:
    """Reads the dispatcher's engine and its identity store."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher

    def pitr(self, meta: TableMeta) -> bool:
        """Whether point-in-time recovery is on for the table `meta`."""
        return self.dispatcher.engine.recovery_window(meta) is not None

    def policies(self, account: str | None = None) -> list[tuple[str, str, dict[str, Any]]]:
        """("user NAME" or "role NAME", policy name, document) of every inline policy of the identity store's
        users and roles (of `account` only, if given: the account in their ARN)."""
        store = IdentityStore(lambda: self.dispatcher.engine)
        found: list[tuple[str, str, dict[str, Any]]] = []
        kinds: tuple[Kind, ...] = ("user", "role")
        for kind in kinds:
            for record in store.records(kind):
                if account is not None and str(record.get("Arn", "")).split(":", 5)[4:5] != [account]:
                    continue
                name = record.get("UserName") or record.get("RoleName") or "?"
                for policy, text in (record.get("policies") or {}).items():
                    try:
                        document = orjson.loads(text)
                    except orjson.JSONDecodeError:
                        continue
                    if isinstance(document, dict):
                        found.append((f"{kind} {name}", policy, document))
        return found
