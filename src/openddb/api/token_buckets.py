"""Token buckets (api/throttle.py): filled at a rate up to a capacity, admitting while they hold any; in this
process (`Bucket`) or in the host's shared memory (api/shared_buckets.py's SharedBucket)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class Bucket:
    """Tokens filled at `rate` a second up to `capacity`; admits while it holds any."""

    __slots__ = ("capacity", "key", "rate", "stamp", "tokens")

    def __init__(self, rate: float, capacity: float, now: float, unused: float = 0.0, key: str = "") -> None:
        self.key = key  # (what names it among the shared buckets: see api/shared_buckets.py)
        self.rate = rate
        self.capacity = capacity
        # one second's worth, and what `unused` seconds left unused (best guess, see the module's doc)
        self.tokens = min(rate * (1.0 + unused), capacity)
        self.stamp = now

    def level(self, now: float) -> float:
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        return self.tokens

    def take(self, amount: float, now: float) -> None:
        self.level(now)
        self.tokens -= amount


class TokenBucket(Protocol):
    """A Bucket, in this process or in the host's shared memory (api/shared_buckets.py)."""

    key: str

    def level(self, now: float) -> float: ...

    def take(self, amount: float, now: float) -> None: ...


# (key, rate, capacity, now, seconds unused) -> a bucket; the key names it among the host's shared buckets
MakeBucket = Callable[[str, float, float, float, float], TokenBucket]


def local_bucket(key: str, rate: float, capacity: float, now: float, unused: float) -> TokenBucket:
    return Bucket(rate, capacity, now, unused, key)
