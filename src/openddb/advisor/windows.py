"""The advisor's observations over time: each table's are kept in slices of a minute (observations.py), sealed as
the next minute begins; sealed minutes more than an hour old are merged into one slice per clock hour, and a slice
that ended longer ago than the retention (Thresholds.retention_hours, 24 by default) is forgotten. A table so has
at most 60 minute slices, `retention_hours` + 1 hour slices and the current one, each bounded, and a report over
a window (`openddb advise --since 10m`) adds up the slices that overlap it: to the minute within the last hour, to
the hour before."""

from __future__ import annotations

from openddb.advisor.merging import absorb, merged
from openddb.advisor.observations import TableObservations

HOUR = 3600.0
# What a sealed slice keeps of its bounded samples: its most appended-to items, its heaviest partition keys (the
# rules report the top 3 of a window), the first of its sampled String keys (missing-sort-key's shapes)
_SEALED_APPENDS = 64
_SEALED_KEYS = 16
_SEALED_KEY_SAMPLE = 32


class Windows:
    """The sealed slices of each table (by its stored name), oldest first; the current slice is the listener's."""

    def __init__(self, retention_hours: float) -> None:
        self.retention = max(retention_hours, 0.0) * HOUR
        self.sealed: dict[str, list[TableObservations]] = {}

    def roll(self, current: TableObservations, now: float) -> TableObservations:
        """Seal `current` (its minute is over) and start the table's slice of `now`."""
        _trim(current)
        history = self.sealed.setdefault(current.name, [])
        history.append(current)
        self._compact(history, now)
        return current.carried(now)

    def _compact(self, history: list[TableObservations], now: float) -> None:
        """Forget the slices past the retention; merge the ones more than an hour old by their clock hour (a merged
        slice spans its first minute's start to its last minute's end)."""
        horizon, old = now - self.retention, now - HOUR
        kept: list[TableObservations] = []
        for piece in history:
            if piece.ends <= horizon:
                continue
            last = kept[-1] if kept else None
            if (piece.start < old and last is not None and last.start < old
                    and last.start // HOUR == piece.start // HOUR):
                absorb(last, piece)
                last.ends, last.last_seen = max(last.ends, piece.ends), max(last.last_seen, piece.last_seen)
                _trim(last)
                continue
            kept.append(piece)
        history[:] = kept

    def expire(self, tables: dict[str, TableObservations], now: float) -> None:
        """Forget what ended before the retention: old slices, and the tables seen in none left."""
        horizon = now - self.retention
        for name in list(tables):
            history = self.sealed.get(name)
            if history is not None:
                self._compact(history, now)
                if not history:
                    del self.sealed[name]
            if tables[name].ends <= horizon and name not in self.sealed:
                del tables[name]

    def slices(self, current: TableObservations, since: float | None) -> list[TableObservations]:
        """The table's slices (oldest first) that overlap the window from `since` (None: all kept)."""
        pieces = [*self.sealed.get(current.name, ()), current]
        return pieces if since is None else [piece for piece in pieces if piece.ends > since]

    def window(self, current: TableObservations, since: float | None) -> TableObservations | None:
        """The table's observations within the window from `since`, as one (None: nothing seen within it)."""
        pieces = self.slices(current, since)
        if since is not None and not any(piece.last_seen >= since for piece in pieces):
            return None
        return merged(pieces) if pieces else None

    def reads(self, current: TableObservations, index: str | None = None) -> int:
        """The reads of the table (or of one of its indexes) over the slices kept."""
        pieces = self.slices(current, None)
        if index is None:
            return sum(piece.reads for piece in pieces)
        return sum(piece.indexes[index].reads for piece in pieces if index in piece.indexes)


def _trim(piece: TableObservations) -> None:
    """A sealed slice made smaller: of its samples, what a window's report reads first."""
    if len(piece.appends) > _SEALED_APPENDS:
        piece.appends = dict(sorted(piece.appends.items(), key=lambda pair: -pair[1])[:_SEALED_APPENDS])
    piece.keys.shrink(_SEALED_KEYS)
    piece.key_sample.shrink(_SEALED_KEY_SAMPLE)
