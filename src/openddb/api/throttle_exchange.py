"""The throttle's draws told across PostgreSQL nodes (`--throttling on` with `--engine`): what this worker drew on
each bucket is published, about once a second, through the store (storage/postgres_throttle.py), and what other
nodes drew is taken from this host's buckets (api/shared_buckets.py `owe`), so a table is throttled at its rate
across nodes too, within about a second of each node's traffic. Before the other nodes' draws arrive, each node
admits on its own buckets: a burst spread over N nodes may pass up to N times a table's rate for that second, and
is then owed, as DynamoDB's burst capacity would be drawn on. A partition's split (api/partition_splits.py) is told
the same way, as a row whose key names the split range (SPLIT, then the range's key) and whose total is its
boundary; a node that has not split that range records it. Two nodes that split one range in the same second keep
their own cut.

A node is `<server>/<worker>` (`Node`): the workers of one server share their buckets already, so they
publish their own draws but only worker 0 takes the other servers' (`applies`). A row made after the server bound
its socket (less CLOCK_SLACK seconds, for hosts' clocks) is new in full: its draws were made while this server could
be reached; one made before, what grew after it was first seen (a node restarting does not take the others' past
as a debt).
"""

from __future__ import annotations

import time
from typing import NamedTuple

from openddb.api.partition_splits import SharedSplits
from openddb.api.shared_buckets import SharedBuckets
from openddb.storage.base import Engine

CLOCK_SLACK = 2.0
SPLIT = "split "  # (the key of a row telling a split, before the range's key: no bucket's key starts so)


class Node(NamedTuple):
    """A worker among the nodes: its server's name, its index, and when its server bound its socket (time.time())."""

    server: str
    worker: int
    bound: float


class DrawExchange:
    """One worker's side of the exchange."""

    def __init__(self, shared: SharedBuckets, node: Node) -> None:
        self._shared = shared
        self._node = f"{node.server}/{node.worker}"
        self._server = node.server
        self._applies = node.worker == 0
        self._drawn: dict[str, float] = {}  # bucket key -> units this worker drew, since it started
        self._splits = SharedSplits(shared)
        self._seen: dict[tuple[str, str], float] = {}  # (node, bucket key) -> its total when last read
        self._since = node.bound - CLOCK_SLACK

    def drawn(self, key: str, units: float) -> None:
        """Count units this worker took from a bucket (the throttle calls it per charge)."""
        self._drawn[key] = self._drawn.get(key, 0.0) + units

    def split(self, key: str, boundary: int) -> None:
        """Tell the other nodes that this worker split the range `key` at `boundary`."""
        self._drawn[SPLIT + key] = float(boundary)

    def run(self, engine: Engine, monotonic: float) -> None:
        """Publish this worker's draws; with `applies`, take the other servers' new draws from the buckets, and
        record their splits."""
        others = engine.exchange_draws(self._node, self._drawn, time.time())
        if not self._applies:
            return
        self._shared.lock()
        try:
            for node, key, total, created in others:
                if node.rsplit("/", 1)[0] == self._server:
                    continue
                if key.startswith(SPLIT):
                    self._splits.split(key[len(SPLIT):], int(total))
                    continue
                last = self._seen.get((node, key))
                if last is None:
                    last = 0.0 if created >= self._since else total
                self._seen[(node, key)] = total
                if total > last:
                    self._shared.owe(key, total - last, monotonic)
        finally:
            self._shared.unlock()
