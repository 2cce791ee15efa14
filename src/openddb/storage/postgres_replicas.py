"""Eventually consistent reads from PostgreSQL streaming replicas (`--engine-replica URL`, repeatable).

DynamoDB's consistency model maps onto a primary and its replicas: a strongly consistent read (ConsistentRead) and
every write go to the primary; an eventually consistent GetItem, Query, Scan or BatchGetItem may be answered from
a replica, which holds every change the primary committed up to a moment in the recent past.

Bounded staleness: about every CHECK_SECONDS (when a read comes) the primary's WAL position is noted with the
time, and each replica's replay position is asked. A replica is used while it has replayed a position the primary
had at most `max_lag` seconds ago; one that lags further, cannot be reached or fails a read is skipped (for
RETRY_SECONDS after a failure) and the read goes to the primary, so a replica never makes a read fail. Replicas in
use take turns.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Sequence

import psycopg

from openddb.storage.postgres_pipeline import Param, Pipeline, Rows

log = logging.getLogger("openddb.storage")

CHECK_SECONDS = 0.2
RETRY_SECONDS = 1.0
CONNECT_SECONDS = 1
# The WAL position as a number of bytes (pg_lsn has no binary decoder in postgres_pipeline)
PRIMARY_POSITION = "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::int8"
REPLAYED_POSITION = "SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::int8"


class Replica:
    """One replica: its URL, its connection once made, and until when it is skipped after a failure."""

    def __init__(self, url: str, location: str) -> None:
        self.url = url
        self.location = location
        self.pipe: Pipeline | None = None
        self.down_until = 0.0
        self.replayed = -1  # the WAL position it had replayed at the last check (-1: unknown)

    def run(self, statements: Sequence[tuple[str, Sequence[Param]]]) -> list[Rows]:
        """The rows of each statement, in one round trip."""
        pipe = self.pipe
        if pipe is None or pipe.conn.closed or pipe.conn.broken:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_SECONDS)
            pipe = self.pipe = Pipeline(conn, lambda: None)
        for sql, params in statements:
            pipe.add(sql, params)
        return pipe.run()

    def fail(self, error: Exception, now: float) -> None:
        log.warning("replica %s skipped for %.0f s: %s", self.location, RETRY_SECONDS, str(error).strip())
        self.down_until = now + RETRY_SECONDS
        self.replayed = -1
        if self.pipe is not None:
            self.pipe.conn.close()
            self.pipe = None

    def close(self) -> None:
        if self.pipe is not None:
            self.pipe.conn.close()


class Replicas:
    """The replicas of one engine, and which of them may serve an eventually consistent read now."""

    def __init__(self, replicas: Sequence[Replica], primary_position: Callable[[], int], max_lag: float) -> None:
        self.replicas = list(replicas)
        self._primary_position = primary_position
        self.max_lag = max_lag
        self._positions: collections.deque[tuple[float, int]] = collections.deque()  # (time, primary's position)
        self._usable: list[Replica] = []
        self._turn = 0
        self._next_check = 0.0
        self.served = 0  # reads a replica answered (for tests and figures)

    def rows(self, sql: str, params: Sequence[Param]) -> Rows | None:
        """The rows of one read statement from a replica fresh enough, or None (then the primary serves it)."""
        answers = self.run([(sql, params)])
        if answers is None:
            return None
        self.served += 1
        return answers[0]

    def run(self, statements: Sequence[tuple[str, Sequence[Param]]]) -> list[Rows] | None:
        """The rows of each read statement, in one round trip to a replica fresh enough, or None (then the primary
        serves them)."""
        now = time.monotonic()
        if now >= self._next_check:
            self._check(now)
        usable = self._usable
        if not usable:
            return None
        self._turn += 1
        replica = usable[self._turn % len(usable)]
        try:
            return replica.run(statements)
        except psycopg.Error as error:
            replica.fail(error, now)
            usable.remove(replica)
            return None

    def _check(self, now: float) -> None:
        """Note the primary's position now; keep the replicas whose replay reached one at most max_lag old."""
        self._next_check = now + CHECK_SECONDS
        positions = self._positions
        positions.append((now, self._primary_position()))
        while len(positions) > 1 and positions[1][0] <= now - self.max_lag:
            positions.popleft()  # (the oldest kept is the newest at least max_lag old)
        usable = []
        for replica in self.replicas:
            if replica.down_until > now:
                continue
            try:
                replayed = replica.run([(REPLAYED_POSITION, ())])[0][0][0]
            except psycopg.Error as error:
                replica.fail(error, now)
                continue
            if replayed is None:  # (not a standby: a server that is not replaying this primary's WAL)
                replica.fail(RuntimeError("not a standby (pg_last_wal_replay_lsn() is NULL)"), now)
                continue
            replica.replayed = replayed
            if _fresh_enough(positions, replayed, now, self.max_lag):
                usable.append(replica)
        self._usable = usable

    def close(self) -> None:
        for replica in self.replicas:
            replica.close()


def _fresh_enough(positions: collections.deque[tuple[float, int]], replayed: int, now: float,
                  max_lag: float) -> bool:
    """Whether `replayed` is at or past a position the primary had no more than `max_lag` seconds ago."""
    for noted, position in reversed(positions):
        if replayed >= position:
            return now - noted <= max_lag
    return False

