"""What the advisor follows per client across requests: who last read and wrote an item (lost updates), bursts of
single-item calls (batch opportunities), retries after throttling, UnprocessedItems left behind, requests sent
again after an error (idempotency). A client is its access key and, where the server knows it, its address. Each
map is bounded: when full, its older half is forgotten. What they find (a race, a burst, a quick retry, a repeated
request) is returned to the listener, which counts it in the table's observations of the current minute (so a
report over a window counts what happened within it: observations.py)."""

from __future__ import annotations

from typing import Any

import orjson

from openddb.advisor.settings import Thresholds

_MAX = 8192
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

    def read(self, item: ItemId, client: Client, now: float) -> None:
        entry = self.items.get(item)
        if entry is None:
            _bounded(self.items)
            self.items[item] = [None, 0.0, client, now, False]
        else:
            entry[2], entry[3], entry[4] = client, now, False

    def write(self, item: ItemId, client: Client, now: float, conditional: bool, key: Any,
              limits: Thresholds) -> dict[str, Any] | None:
        """A write of `item`; the race it makes (an example: the key, the clients, what happened), if any."""
        entry = self.items.get(item)
        if entry is None:
            _bounded(self.items)
            self.items[item] = [client, now, None, 0.0, False]
            return None
        writer, written, reader = entry[0], entry[1], entry[2]
        race = None
        if not conditional:
            if writer is not None and writer != client and now - written < limits.shared_write_seconds:
                race = _race(key, writer, client, f"written by another client {now - written:.3f} s before, "
                             "without a condition")
            elif reader == client and entry[4]:
                race = _race(key, writer, client, "read, then written without a condition after another "
                             "client's write: that write was lost")
        entry[0], entry[1] = client, now
        if reader is not None and reader != client:
            entry[4] = True
        return race


def _race(key: Any, first: Client | None, second: Client, what: str) -> dict[str, Any]:
    clients = [client_name(first), client_name(second)] if first else [client_name(second)]
    return {"key": key, "clients": clients, "what": what}


class Bursts:
    """Single-item calls from one client to one table in quick succession."""

    def __init__(self) -> None:
        self.windows: dict[tuple[Client, str, str], list[float]] = {}  # -> [window start, calls]

    def call(self, client: Client, table: str, kind: str, now: float, limits: Thresholds, weight: int = 1) -> bool:
        """A call (`weight` more than 1: a sample's, standing for that many calls just before); whether it ends a
        burst (counted by the caller, and the next one starts afresh)."""
        slot = (client, table, kind)
        window = self.windows.get(slot)
        if window is None:
            _bounded(self.windows)
            self.windows[slot] = [now, float(weight)]
        elif now - window[0] > limits.batch_burst_seconds:
            window[0], window[1] = now, float(weight)
        else:
            window[1] += weight
            if window[1] >= limits.batch_burst:
                window[0], window[1] = now, 0.0
                return True
        return False


class Retries:
    """Throttled requests sent again at once, UnprocessedItems never sent again, and requests repeated after an
    error without an idempotency token."""

    def __init__(self) -> None:
        self.throttles: dict[tuple[Client, str], list[float]] = {}  # -> [answered at, quick in a row]
        self.unprocessed: dict[tuple[Client, str], float] = {}  # -> when a batch left items unprocessed
        self.failed: dict[Client, tuple[int, float, str, str]] = {}  # -> (digest, when, operation, table)

    def throttled(self, client: Client, table: str, arrived: float, answered: float, limits: Thresholds) -> int:
        """A throttled call; how many throttled calls in a row came back sooner than limits.backoff_seconds."""
        slot = (client, table)
        entry = self.throttles.get(slot)
        if entry is None:
            _bounded(self.throttles)
            self.throttles[slot] = [answered, 0.0]
            return 0
        quick = arrived - entry[0] < limits.backoff_seconds
        entry[1] = entry[1] + 1 if quick else 0.0
        entry[0] = answered
        return int(entry[1])

    def batch(self, client: Client, table: str, left: bool, now: float) -> None:
        if left:
            _bounded(self.unprocessed)
            self.unprocessed.setdefault((client, table), now)
        else:
            self.unprocessed.pop((client, table), None)

    def request(self, client: Client, operation: str, request: dict[str, Any], ok: bool, now: float,
                limits: Thresholds, table: str) -> dict[str, Any] | None:
        """An unconditional PutItem, or a TransactWriteItems without ClientRequestToken, ended (`ok` or not); the
        repeat it is (an example), if it is the request that failed last sent again identically."""
        failed = self.failed.pop(client, None)
        if failed is None and ok:
            return None
        digest = hash(orjson.dumps(request, option=orjson.OPT_SORT_KEYS))
        repeat = None
        if failed is not None and failed[0] == digest and now - failed[1] < limits.retry_seconds:
            repeat = {"operation": operation, "client": client_name(client),
                      "seconds_after_error": round(now - failed[1], 3)}
        if not ok:
            _bounded(self.failed)
            self.failed[client] = (digest, now, operation, table)
        return repeat
