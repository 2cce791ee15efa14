"""Token buckets in shared memory, so every worker of a host throttles a table at its one rate (`--throttling on`
with `--workers N`): a 5 RCU table serves 5 read units a second however many workers take its requests.

The buckets live in one file the supervisor makes before it forks the workers (`create_buckets`), mapped into each
(`SharedBuckets`): SLOTS slots of (key digest, tokens, stamp), found by open addressing on the digest of the
bucket's key (a resource's key includes what its buckets were made from, so a change of capacity is a new bucket).
A worker takes the file's lock (flock: released by the kernel if the worker dies holding it) once per admission
check and once per charge (`lock`, `unlock`), so reading a bucket and drawing on it is one step across workers.
Stamps are CLOCK_MONOTONIC seconds, one clock for every process of the host. When PROBE slots in a row are taken by
other keys, the one least recently used is given to the new key (a table not seen for a while starts afresh, as a
new worker's would).

Across PostgreSQL nodes the buckets are not shared but told of each other's draws, about once a second
(storage/postgres_throttle.py): `owe` takes what another node drew from a bucket, or from the tokens a bucket no
worker of this host has made yet will start with.
"""

from __future__ import annotations

import fcntl
import hashlib
import math
import mmap
import os
import struct

SLOTS = 1 << 16
PROBE = 32
_SLOT = struct.Struct("<16sdd")  # key digest, tokens, stamp (0: an empty slot)
_STATE = struct.Struct("<dd")  # tokens, stamp
_STATE_OFFSET = 16
_OWED = "owed "  # the key of what other nodes drew on a bucket no worker of this host has made yet
SIZE = SLOTS * _SLOT.size


def _digest(key: str) -> bytes:
    return hashlib.blake2b(key.encode(), digest_size=16).digest()


def create_buckets(path: str) -> None:
    """Make the buckets' file, every slot empty (before the workers that map it are forked)."""
    with open(path, "wb") as handle:
        handle.truncate(SIZE)


class SharedBuckets:
    """One worker's view of the host's buckets."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_RDWR)
        self._map = mmap.mmap(self._fd, SIZE)
        self._depth = 0

    def lock(self) -> None:
        """Hold the buckets for one admission check or one charge (re-entrant within the worker); `unlock` after."""
        self._depth += 1
        if self._depth == 1:
            fcntl.flock(self._fd, fcntl.LOCK_EX)

    def unlock(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def slot(self, key: str, tokens: float, now: float) -> int:
        """The offset of `key`'s state in its slot; a slot it did not have starts with `tokens`, less what other
        nodes' draws left owed to it (`owe`)."""
        self.lock()
        try:
            found, free = self._probe(_digest(key))
            if found is not None:
                return found
            owed = self._probe(_digest(_OWED + key))[0]
            if owed is not None:  # (drained, not emptied: an empty slot would cut other keys' probes short)
                owed_units, stamp = self.read(owed)
                tokens -= owed_units
                self.write(owed, 0.0, stamp)
            _SLOT.pack_into(self._map, free, _digest(key), tokens, now)
            return free + _STATE_OFFSET
        finally:
            self.unlock()

    def owe(self, key: str, units: float, now: float) -> None:
        """Take `units` that another node drew (storage/postgres_throttle.py) from `key`'s bucket, or, if no worker
        of this host has made it yet, from the tokens it will start with (hold `lock`)."""
        found, free = self._probe(_digest(key))
        if found is None:
            found, free = self._probe(_digest(_OWED + key))
            if found is None:
                _SLOT.pack_into(self._map, free, _digest(_OWED + key), 0.0, now)
                found = free + _STATE_OFFSET
            tokens, stamp = self.read(found)
            self.write(found, tokens + units, max(stamp, now))
            return
        tokens, stamp = self.read(found)
        self.write(found, tokens - units, stamp)

    def find(self, key: str) -> int | None:
        """The offset of `key`'s state, or None if no slot holds it (hold `lock`)."""
        return self._probe(_digest(key))[0]

    def pin(self, key: str, value: float) -> int:
        """Give `key` a slot holding `value` that is never given to another key (a partition's split: see
        api/partition_splits.py), or leave the one it has; its state's offset (hold `lock`)."""
        found, free = self._probe(_digest(key))
        if found is not None:
            return found
        _SLOT.pack_into(self._map, free, _digest(key), value, math.inf)  # (never the least recently used)
        return free + _STATE_OFFSET

    def _probe(self, digest: bytes) -> tuple[int | None, int]:
        """(the state offset of the slot holding `digest`, or None; the slot a new key would take: the first
        empty one of the probe, else the least recently used)."""
        start = int.from_bytes(digest[:8], "little") % SLOTS
        oldest, oldest_stamp = -1, math.inf
        for step in range(SLOTS):  # (past PROBE only while every slot seen is pinned: `pin`)
            offset = ((start + step) % SLOTS) * _SLOT.size
            found, _, stamp = _SLOT.unpack_from(self._map, offset)
            if found == digest:
                return offset + _STATE_OFFSET, offset
            if stamp == 0.0:
                return None, offset
            if stamp < oldest_stamp:
                oldest, oldest_stamp = offset, stamp
            if step + 1 >= PROBE and oldest >= 0:
                break
        if oldest < 0:
            raise RuntimeError("every slot of the throttle's shared buckets holds a partition's split")
        return None, oldest

    def read(self, offset: int) -> tuple[float, float]:
        """(tokens, stamp) of a slot's state (hold `lock` around a read and its write)."""
        tokens, stamp = _STATE.unpack_from(self._map, offset)
        return tokens, stamp

    def write(self, offset: int, tokens: float, stamp: float) -> None:
        _STATE.pack_into(self._map, offset, tokens, stamp)


class SharedBucket:
    """A token bucket (as api/throttle.py's Bucket) whose tokens are in the host's shared buckets."""

    __slots__ = ("capacity", "key", "offset", "rate", "store")

    def __init__(self, store: SharedBuckets, key: str, rate: float, capacity: float, now: float,
                 unused: float = 0.0) -> None:
        self.store = store
        self.key = key
        self.rate = rate
        self.capacity = capacity
        # A bucket another worker made already keeps its tokens; a new one starts as Bucket does.
        self.offset = store.slot(key, min(rate * (1.0 + unused), capacity), max(now, 1e-9))

    def level(self, now: float) -> float:
        tokens, stamp = self.store.read(self.offset)
        if now > stamp:  # (another worker may have stamped it after this one read the clock)
            tokens = min(self.capacity, tokens + (now - stamp) * self.rate)
            self.store.write(self.offset, tokens, now)
        return tokens

    def take(self, amount: float, now: float) -> None:
        tokens, stamp = self.store.read(self.offset)
        if now > stamp:
            tokens, stamp = min(self.capacity, tokens + (now - stamp) * self.rate), now
        self.store.write(self.offset, tokens - amount, stamp)
