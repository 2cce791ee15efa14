"""What the advisor follows per client across requests: who last read and wrote an item (lost updates), bursts of
single-item calls (batch opportunities), retries after throttling, UnprocessedItems left behind, requests sent
again after an error (idempotency). A client is its access key and, where the server knows it, its address. Each
map is bounded: when full, its older half is forgotten."""

from __future__ import annotations

from typing import Any

import orjson

from openddb.advisor.settings import Thresholds

_MAX = 8192
_EXAMPLES_MAX = 5
Client = tuple[str, str]  # (access key, address)
ItemId = tuple[str, bytes | None, str]  # (table, encoded partition key, sort key value)


def _bounded(mapping: dict[Any, Any]) -> None:
    if len(mapping) >= _MAX:
        for old in list(mapping)[: _MAX // 2]:
            del mapping[old]


def client_name(client: Client) -> str:
    return f"{client[0]}@{client[1]}" if client[1] else client[0]


class Races:
    """Unconditional writes of an item another client wrote in the last moments, or wrote since this client read it
    (a read-then-blind-write that lost an update)."""

    def __init__(self) -> None:
        # item -> [last writer, when, last reader, when, another client wrote since that read]
        self.items: dict[ItemId, list[Any]] = {}
        self.found: dict[str, int] = {}  # table -> races
        self.examples: dict[str, list[dict[str, Any]]] = {}

    def read(self, item: ItemId, client: Client, now: float) -> None:
        entry = self.items.get(item)
        if entry is None:
            _bounded(self.items)
            self.items[item] = [None, 0.0, client, now, False]
        else:
            entry[2], entry[3], entry[4] = client, now, False

    def write(self, item: ItemId, client: Client, now: float, conditional: bool, key: Any,
              limits: Thresholds) -> None:
        entry = self.items.get(item)
        if entry is None:
            _bounded(self.items)
            self.items[item] = [client, now, None, 0.0, False]
            return
        writer, written, reader = entry[0], entry[1], entry[2]
        if not conditional:
            if writer is not None and writer != client and now - written < limits.shared_write_seconds:
                self._race(item[0], key, writer, client, "written by another client "
                           f"{now - written:.3f} s before, without a condition")
            elif reader == client and entry[4]:
                self._race(item[0], key, writer, client, "read, then written without a condition after another "
                           "client's write: that write was lost")
        entry[0], entry[1] = client, now
        if reader is not None and reader != client:
            entry[4] = True

    def _race(self, table: str, key: Any, first: Client | None, second: Client, what: str) -> None:
        self.found[table] = self.found.get(table, 0) + 1
        examples = self.examples.setdefault(table, [])
        if len(examples) < _EXAMPLES_MAX:
            clients = [client_name(first), client_name(second)] if first else [client_name(second)]
            examples.append({"key": key, "clients": clients, "what": what})


class Bursts:
    """Single-item calls from one client to one table in quick succession."""

    def __init__(self) -> None:
        self.windows: dict[tuple[Client, str, str], list[float]] = {}  # -> [window start, calls, bursts]

    def call(self, client: Client, table: str, kind: str, now: float, limits: Thresholds, weight: int = 1) -> None:
        """A call (`weight` more than 1: a sample's, standing for that many calls just before)."""
        slot = (client, table, kind)
        window = self.windows.get(slot)
        if window is None:
            _bounded(self.windows)
            self.windows[slot] = [now, float(weight), 0.0]
        elif now - window[0] > limits.batch_burst_seconds:
            window[0], window[1] = now, float(weight)
        else:
            window[1] += weight
            if window[1] >= limits.batch_burst:  # a burst: counted, and the next one starts afresh
                window[0], window[1] = now, 0.0
                window[2] += 1

    def of(self, table: str, limits: Thresholds) -> list[dict[str, Any]]:
        return [{"client": client_name(client), "kind": kind, "bursts": int(window[2])}
                for (client, name, kind), window in self.windows.items()
                if name == table and window[2] >= limits.batch_bursts]


class Retries:
    """Throttled requests sent again at once, UnprocessedItems never sent again, and requests repeated after an
    error without an idempotency token."""

    def __init__(self) -> None:
        self.throttles: dict[tuple[Client, str], list[float]] = {}  # -> [answered at, quick in a row, most]
        self.unprocessed: dict[tuple[Client, str], float] = {}  # -> when a batch left items unprocessed
        self.failed: dict[Client, tuple[int, float, str, str]] = {}  # -> (digest, when, operation, table)
        self.repeated: dict[str, list[dict[str, Any]]] = {}  # table -> the repeats found

    def throttled(self, client: Client, table: str, arrived: float, answered: float, limits: Thresholds) -> None:
        slot = (client, table)
        entry = self.throttles.get(slot)
        if entry is None:
            _bounded(self.throttles)
            self.throttles[slot] = [answered, 0.0, 0.0]
            return
        quick = arrived - entry[0] < limits.backoff_seconds
        entry[1] = entry[1] + 1 if quick else 0.0
        entry[2] = max(entry[2], entry[1])
        entry[0] = answered

    def batch(self, client: Client, table: str, left: bool, now: float) -> None:
        if left:
            _bounded(self.unprocessed)
            self.unprocessed.setdefault((client, table), now)
        else:
            self.unprocessed.pop((client, table), None)

    def request(self, client: Client, operation: str, table: str, request: dict[str, Any], ok: bool, now: float,
                limits: Thresholds) -> None:
        """An unconditional PutItem, or a TransactWriteItems without ClientRequestToken, ended (`ok` or not)."""
        failed = self.failed.pop(client, None)
        if failed is None and ok:
            return
        digest = hash(orjson.dumps(request, option=orjson.OPT_SORT_KEYS))
        if failed is not None and failed[0] == digest and now - failed[1] < limits.retry_seconds:
            found = self.repeated.setdefault(table, [])
            if len(found) < _EXAMPLES_MAX:
                found.append({"operation": operation, "client": client_name(client),
                              "seconds_after_error": round(now - failed[1], 3)})
        if not ok:
            _bounded(self.failed)
            self.failed[client] = (digest, now, operation, table)
