"""The account's quotas as this server applies them: DynamoDB's defaults for a new account, changed as Service Quotas
would change them (`openddb serve --quota NAME=VALUE`), or not applied at all (`--quotas off`).

What `--quotas off` lifts, for local test suites that create and resize tables more than an account may: the
account's and the per-table (and per-index) maximums of provisioned capacity, of on-demand maximums and of warm
throughput; the daily budget of capacity decreases; the switches to on-demand a day; the table-class changes in 30
days; the number of tables. What is not a quota but a rule of the API (one online index creation at a time, 20
global indexes, 5 local ones, a table's name and sizes) still applies. DescribeLimits reports the configured
values whether or not they are applied.

The options reach every worker the server forks through two environment variables, read when a control-plane call
asks (as `--delay-transient-statuses` does, api/transient.py), so a server started inside a test process may set
them too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

APPLIED_VARIABLE = "OPENDDB_QUOTAS"  # "off": no quota applied (unset or "on": applied)
VALUES_VARIABLE = "OPENDDB_QUOTA_VALUES"  # NAME=VALUE,... : the quotas set apart from DynamoDB's defaults


@dataclass(frozen=True, slots=True)
class Quotas:
    """The account's quotas in one region (the Developer Guide's quota page: its defaults for a new account)."""

    applied: bool = True
    # The sum of the provisioned capacity of every provisioned table and global index
    account_max_read: int = 80_000
    account_max_write: int = 80_000
    # The provisioned capacity of one table or one global index; also the most its on-demand maximums and its warm
    # throughput may ask
    table_max_read: int = 40_000
    table_max_write: int = 40_000
    # Tables in the region ("There is a soft account quota of 2,500 tables": the API Reference, LimitExceededException)
    tables: int = 2_500


# The names `--quota` takes: DescribeLimits' member names, and TablesPerRegion for the number of tables.
NAMES = {
    "AccountMaxReadCapacityUnits": "account_max_read",
    "AccountMaxWriteCapacityUnits": "account_max_write",
    "TableMaxReadCapacityUnits": "table_max_read",
    "TableMaxWriteCapacityUnits": "table_max_write",
    "TablesPerRegion": "tables",
}


class QuotaSpecError(ValueError):
    """A `--quota` that cannot be read (its message says why, for the one start-up line)."""


def parse(specs: list[str]) -> dict[str, int]:
    """`NAME=VALUE` quota settings as a dict by name; QuotaSpecError for an unknown name or a value below 1."""
    values: dict[str, int] = {}
    for spec in specs:
        name, _, value = spec.partition("=")
        if name not in NAMES:
            raise QuotaSpecError(f"--quota {spec}: the quotas are {', '.join(NAMES)}")
        if not value.isdigit() or int(value) < 1:
            raise QuotaSpecError(f"--quota {spec}: the value is a whole number, at least 1")
        values[name] = int(value)
    return values


def export(applied: bool, values: dict[str, int]) -> None:
    """Set the environment every worker reads its quotas from (see the module's doc)."""
    os.environ[APPLIED_VARIABLE] = "on" if applied else "off"
    os.environ[VALUES_VARIABLE] = ",".join(f"{name}={value}" for name, value in values.items())


_cache: tuple[tuple[str, str], Quotas] | None = None


def current() -> Quotas:
    """The quotas this server applies, from its environment (read once per change of it)."""
    global _cache
    seen = (os.environ.get(APPLIED_VARIABLE, "on"), os.environ.get(VALUES_VARIABLE, ""))
    if _cache is not None and _cache[0] == seen:
        return _cache[1]
    values = parse([spec for spec in seen[1].split(",") if spec])
    fields: dict[str, Any] = {NAMES[name]: value for name, value in values.items()}
    quotas = replace(Quotas(applied=seen[0] != "off"), **fields)
    _cache = (seen, quotas)
    return quotas
