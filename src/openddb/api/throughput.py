"""Provisioned capacity: DynamoDB's quotas on it (per table, per index, per account), its daily budget of
decreases, and how a table or index describes it."""

from __future__ import annotations

import time
from typing import Any

from openddb import clock
from openddb.api import quotas, transient
from openddb.api.context import names_in
from openddb.api.figures import epoch_millis
from openddb.errors import LimitExceededException
from openddb.model.schema import IndexMeta, TableMeta
from openddb.storage.base import Engine

_HIGHER_LIMITS = "Refer to the Amazon DynamoDB Developer Guide for current limits and how to request higher limits."
# Decreases of a table's (or a global index's) provisioned capacity: four at any time of a UTC day, then one an hour
# after the last one, until the day ends (the Developer Guide's quota, as recorded against DynamoDB in 2026).
DAILY_DECREASES = 4
_DECREASE_INTERVAL = 3600.0
_DAY = 86400.0
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")


def provisioned_units(throughput: dict[str, Any]) -> tuple[int, int]:
    """(read, write) units of a validated ProvisionedThroughput (the quotas are checked on the whole table by
    `check_throughput_quota`)."""
    return int(throughput["ReadCapacityUnits"]), int(throughput["WriteCapacityUnits"])


_UNITS = (("ReadCapacityUnits", "MaxReadRequestUnits", "ReadUnitsPerSecond", "TableMaxReadCapacityUnits"),
          ("WriteCapacityUnits", "MaxWriteRequestUnits", "WriteUnitsPerSecond", "TableMaxWriteCapacityUnits"))


def check_throughput_quota(engine: Engine, meta: TableMeta, region: str, before: TableMeta | None = None) -> None:
    """DynamoDB's capacity quotas (api/quotas.py: by default 80,000 units for the account, 40,000 for a table), in
    its recorded words and order: the account's units over every provisioned table and global index; then the
    table's for the table and for each global index (apart: a table's indexes are not added to its own); on-demand
    maximums and warm throughput of at most the table's too. Nothing is checked with `--quotas off`.

    `before`: the table as it was, for an UpdateTable. Only what the request raises is held to a quota, so a
    table over one (made so by another version, or by creates racing in two workers) can always come down."""
    configured = quotas.current()
    if not configured.applied:
        return
    indexes = [index for index in meta.indexes if index.is_global]
    old_indexes = {index.name: index for index in (before.indexes if before is not None else [])}
    provisioned = meta.billing_mode == "PROVISIONED"
    for position, (unit, on_demand, warm, quota) in enumerate(_UNITS):
        account_max = configured.account_max_read if position == 0 else configured.account_max_write
        table_max = configured.table_max_read if position == 0 else configured.table_max_write

        def units(of: TableMeta | IndexMeta | None, position: int = position) -> int:
            if of is None or (isinstance(of, TableMeta) and of.billing_mode != "PROVISIONED"):
                return 0
            return of.read_capacity if position == 0 else of.write_capacity

        def raised(new: int, old: int, table_max: int = table_max) -> bool:
            return new > table_max and new > old

        if provisioned:
            requested = units(meta) + sum(units(index) for index in indexes)
            old_total = units(before) + sum(units(old_indexes.get(index.name)) for index in indexes
                                            if before is not None and before.billing_mode == "PROVISIONED")
            # As recorded: raising a table at 40,000 to 40,001 read "reserved by the account: 40136 ... Requested:
            # 40001", so what the table holds now counts in both.
            if requested > old_total:
                reserved = _reserved_units(engine, units, meta.namespace)
                if reserved + requested > account_max:
                    raise LimitExceededException(
                        f"This request would have caused the {unit} limit to be exceeded for the account in "
                        f"{region}. Current {unit} reserved by the account: {reserved}. Limit: "
                        f"{account_max}. Requested: {requested}")
            if raised(units(meta), units(before)):
                raise LimitExceededException(
                    f"The requested {unit}, {units(meta)}, is above the per table maximum for the account in "
                    f"{region}. Per table maximum: {table_max}. {_HIGHER_LIMITS}")
            for index in indexes:
                if raised(units(index), units(old_indexes.get(index.name))):
                    raise LimitExceededException(
                        f"The requested {unit} for index {index.name}, {units(index)}, is above the per index "
                        f"maximum for the account in {region}. Per table maximum: {table_max}. {_HIGHER_LIMITS}")
        limits: list[tuple[str, TableMeta | IndexMeta, TableMeta | IndexMeta | None]] = [("table", meta, before)]
        limits += [(f"index {index.name}", index, old_indexes.get(index.name)) for index in indexes]
        for of, now, then in limits:
            if raised(now.on_demand.get(on_demand, 0), then.on_demand.get(on_demand, 0) if then else 0):
                raise LimitExceededException(
                    f"Subscriber limit exceeded: Requested {on_demand} for OnDemandThroughput for "
                    f"{of.replace('index ', 'index : ')} exceeds {quota} of the account in region {region}")
        # (an on-demand table's own warm throughput, which nobody asked for, is not held to a table maximum set
        # below it with --quota: best guess, as Service Quotas would not let it go that low)
        warm_max = max(table_max, ON_DEMAND_WARM[position])
        for of, now, then in limits:
            if raised(_peak(now, position), _peak(then, position) if then else 0, warm_max):
                raise LimitExceededException(
                    f"Subscriber limit exceeded: Requested {warm} for WarmThroughput for {of} exceeds {quota} of the "
                    f"account in region {region}")


def _peak(of: TableMeta | IndexMeta, position: int) -> int:
    return of.peak_read if position == 0 else of.peak_write


def _reserved_units(engine: Engine, units: Any, namespace: str) -> int:
    """Units provisioned by every table of the namespace (an account's quota is per region), with its global
    indexes, as it stands."""
    total = 0
    for name in names_in(engine, namespace):
        other = engine.get_table(namespace + name)
        if other is not None and other.billing_mode == "PROVISIONED" and not transient.gone(other):
            total += units(other) + sum(units(index) for index in other.indexes if index.is_global)
    return total


def decreases_today(provisioned: TableMeta | IndexMeta, now: float) -> int:
    """Decreases made during the current UTC day: the count starts again at midnight."""
    last = provisioned.last_decrease
    if last is None or last // _DAY != now // _DAY:
        return 0
    return provisioned.decreases_today


def count_decrease(provisioned: TableMeta | IndexMeta, now: float) -> None:
    """Record a decrease of provisioned capacity, refused past the daily budget as DynamoDB words it."""
    done = decreases_today(provisioned, now)
    last = provisioned.last_decrease
    if quotas.current().applied and done >= DAILY_DECREASES and last is not None and now - last < _DECREASE_INTERVAL:
        allowed = min(last + _DECREASE_INTERVAL, (now // _DAY + 1) * _DAY)
        raise LimitExceededException(
            "Subscriber limit exceeded: Provisioned throughput decreases are limited within a given UTC day. After "
            f"the first {DAILY_DECREASES} decreases, each subsequent decrease in the same UTC day can be performed "
            f"at most once every {int(_DECREASE_INTERVAL)} seconds. Number of decreases today: {done}. Last "
            f"decrease at {_spelled_time(last)}. Next decrease can be made at {_spelled_time(allowed)}")
    provisioned.last_decrease = now
    provisioned.decreases_today = done + 1


def _spelled_time(seconds: float) -> str:
    """A UTC time as DynamoDB spells it in its limit messages: Friday, October 9, 2026 at 1:21:34 AM Coordinated
    Universal Time (English whatever the server's locale)."""
    moment = time.gmtime(seconds)
    hour = moment.tm_hour % 12 or 12
    return (f"{_WEEKDAYS[moment.tm_wday]}, {_MONTHS[moment.tm_mon - 1]} {moment.tm_mday}, {moment.tm_year} at "
            f"{hour}:{moment.tm_min:02d}:{moment.tm_sec:02d} {'AM' if moment.tm_hour < 12 else 'PM'} "
            "Coordinated Universal Time")


# DynamoDB's warm throughput of an on-demand table (read, write units per second), also kept by a table that was
# ever on-demand; a provisioned table's follows its provisioned capacity (probes of real DynamoDB, 2026-10).
ON_DEMAND_WARM = (12000, 4000)


def throughput_description(provisioned: TableMeta | IndexMeta) -> dict[str, Any]:
    """The ProvisionedThroughput member that DescribeTable reports for a table or a global index."""
    throughput: dict[str, Any] = {"NumberOfDecreasesToday": decreases_today(provisioned, clock.now()),
                                  "ReadCapacityUnits": provisioned.read_capacity,
                                  "WriteCapacityUnits": provisioned.write_capacity}
    if provisioned.last_increase is not None:
        throughput["LastIncreaseDateTime"] = epoch_millis(provisioned.last_increase)
    if provisioned.last_decrease is not None:
        throughput["LastDecreaseDateTime"] = epoch_millis(provisioned.last_decrease)
    return throughput
