"""The request record: what one API call consumed and how it ended, made once per request at one point (the
dispatcher, after the call was executed and rendered) and handed to every listener.

A handler charges what it reads and writes as it goes (`charge`, to its context's record), whether or not the client
asked for ReturnConsumedCapacity; the ConsumedCapacity of the response is rendered from those charges
(api/capacity.py). The dispatcher then fills in the outcome (status, error type, latency, attempts) and calls each
`Listener.observe(record)`: the throttle, the metrics, the request log and, later, the standards advisor.

Listeners run on the event-loop thread, synchronously, once per request: they must be cheap and must not raise.
A record belongs to its listener only for the call: keep what you need, not the record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from openddb.storage.base import StorageKey


class Charge(NamedTuple):
    """One charge of capacity: `units` read or written in `table` (or in its index `index_name`)."""

    label: str  # the table as the request named it (a name or ARN): one ConsumedCapacity entry per label
    table: str  # the table's name
    index_name: str | None  # the secondary index charged (None: the table itself)
    is_global: bool  # the index is a GSI (False for an LSI or the table)
    units: float
    write: bool
    size: int  # bytes the charge was computed from (the item, or a page's items; 0 if unknown)
    # The key read or written: its partition hash `h`, encoded partition key `pk` and sort key `sk` (b"" for none,
    # or for a Query's whole partition); None where several partitions were read (a Scan) or for an index.
    key: StorageKey | None
    # A vector index's write: `size` is its VectorWriteRequestBytes, `units` 0 (reported apart from capacity)
    vector: bool = False
    # An index's charge: the items whose index key it read or wrote, for listeners that count an index's keys
    # (Contributor Insights): (old, new) of a write (either None), or the key values a Query on it named
    items: tuple[dict[str, Any] | None, ...] = ()


class RequestRecord:
    """One API call: what it consumed (`charges`) and how it ended.

    `operation`: the operation's name ("PutItem"); `status`: the HTTP status; `error`: the error's __type without
    its namespace ("" on success); `latency`: seconds from the dispatcher's start to its answer; `attempts`: runs of
    the handler (a call run again after a catalog change counts its runs); `returned`: items the answer returned
    (ReturnedItemCount), -1 where the operation returns none; `client`: the caller's address if the server knows
    it, else ""; `tables`: the tables a refused or control-plane request named (a data-plane one's are in its
    charges); `request_id`: its x-amzn-RequestId; `response_bytes`: the size of the answer's body; `throttled`:
    why the call was throttled, (reason, table, index or None) per ThrottlingReason, and `throttled_keys` the keys
    it named in the tables throttled, where it names keys (item requests), `throttled_items` what it named of the
    GSIs throttled; `access_key`: the caller's access key
    ("" if it was refused before); `namespace`: the caller's ("" shared, else "<account>/<region>/": charges name a
    table by the name clients see, and the namespace and that name are its stored name); `request`: the request as
    parsed (None if it could not be), and `response`: the handler's answer (None if refused or empty), both as they
    are: a listener reads them during the call and keeps none of them (the advisor reads expressions and items there
    rather than parse again)."""

    # The members a request does not set keep these class-level values: a record is made on every request, and
    # setting only what differs keeps that cheap.
    status = 0
    error = ""
    latency = 0.0
    attempts = 0
    returned = -1
    client = ""
    tables: Sequence[str] = ()
    request_id = b""
    response_bytes = 0
    throttled: tuple[tuple[str, str, str | None], ...] = ()
    throttled_keys: tuple[tuple[str, bytes, bytes], ...] = ()  # (table, encoded partition key, sort key or b"")
    # (table, GSI, an item it names): what a request refused by a GSI's limit named of that GSI (a put's item, or a
    # Query's key values), for its Contributor Insights
    throttled_items: tuple[tuple[str, str, Any], ...] = ()
    access_key = ""
    namespace = ""
    request: dict[str, Any] | None = None
    response: dict[str, Any] | None = None

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self.charges: list[Charge] = []

    def add_returned(self, count: int) -> None:
        """Add `count` items to what the request returned (ReturnedItemCount)."""
        self.returned = count if self.returned < 0 else self.returned + count

    def units(self, *, write: bool) -> float:
        """All read (or write) units the call consumed, its indexes' included."""
        return sum((charge.units for charge in self.charges if charge.write == write), 0.0)


class Listener(Protocol):
    """Something told of every request once it is answered (see the module's doc for the rules)."""

    def observe(self, record: RequestRecord) -> None: ...
