"""The advisor's report: every rule of the catalogue over every table (or one), its findings and the rules it could
not check, and the observed access patterns: `{"findings": [...], "not_checked": [...], "access_patterns": [...],
"window": {...}}` (docs/ADVISOR.md describes each member)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from openddb import clock
from openddb.advisor import rules_data, rules_schema, rules_traffic
from openddb.advisor.catalog import RULES
from openddb.advisor.findings import Finding, NotChecked, Outcome, TableRule, placed
from openddb.advisor.listener import Advisor
from openddb.advisor.observations import COUNT, LAST, LATENCY, READ, REFUSED, SLOWEST, WRITE, TableObservations
from openddb.advisor.state import ServerState
from openddb.api.context import INTERNAL_PREFIX
from openddb.model.schema import TableMeta

_TABLE_RULES: dict[str, TableRule] = {
    **rules_traffic.RULES, **rules_data.RULES, "gsi-unused": rules_schema.gsi_unused,
    "gsi-too-many": rules_schema.gsi_too_many, "gsi-projection-all": rules_schema.gsi_projection_all,
    "access-pattern-undeclared": rules_schema.access_patterns,
}
_ORDER = {rule: position for position, rule in enumerate(RULES)}
_SEVERITY = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True, slots=True)
class Scope:
    """Which tables a report covers: one name (None: any), in one account and one region (None: any)."""

    table: str | None = None
    account: str | None = None
    region: str | None = None

    def covers(self, stored: str) -> bool:
        """Whether the table stored as `stored` ("[<account>/<region>/]<name>") is in the scope (a table of the
        shared namespace is in every account and region)."""
        namespace, _, name = stored.rpartition("/")
        account, _, region = namespace.partition("/")
        return ((self.table is None or name == self.table)
                and (not namespace or ((self.account is None or account == self.account)
                                       and (self.region is None or region == self.region))))


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who reads the report. With --auth off, anyone: every table, and every account's policies. With --auth
    verify, a verified caller: `account`, whose IAM policies least-privilege reads (its root's alone), and
    `permits`, which tables' findings and patterns it may read (None: its account's root, every one)."""

    account: str | None = None
    permits: Callable[[TableMeta], bool] | None = None

    def may_read(self, meta: TableMeta) -> bool:
        return self.permits is None or self.permits(meta)


def build(advisor: Advisor, state: ServerState, scope: Scope | None = None, since: float | None = None,
          viewer: Viewer | None = None) -> dict[str, Any]:
    """The report of the tables in `scope` (every one if None) that `viewer` may read (anyone if None), of the
    traffic seen since `since` (epoch seconds) if given. Tables are those of every namespace: with --namespaces
    account-region each finding, rule not checked and pattern names its table's account and region."""
    scope = scope or Scope()
    viewer = viewer or Viewer()
    advisor.expire()
    engine = advisor.engine_of()
    outcomes: list[Outcome] = []
    patterns: list[dict[str, Any]] = []
    names = [name for name in engine.list_tables() if not name.startswith(INTERNAL_PREFIX) and scope.covers(name)]
    # Tables observed and since deleted (a test suite's, once its store is reset) are reported from their last
    # description.
    listed = set(names)
    gone = [name for name, seen in advisor.tables.items()
            if seen.meta is not None and name not in listed and scope.covers(name)]
    calls = passed_over = 0  # (within the window, on the tables reported)
    for name in names + gone:
        meta = engine.get_table(name) if name in listed else advisor.tables[name].meta
        if meta is None or not viewer.may_read(meta):
            continue
        seen = advisor.observed(name, since)
        found: list[Outcome] = []
        for rule in _TABLE_RULES.values():
            found += rule(advisor, seen, meta)
        if name in listed:
            found += rules_schema.pitr_off(state, meta)
        outcomes += _placed(found, meta.name, meta.namespace)
        if seen is not None:
            patterns += _patterns(seen, since)
            calls, passed_over = calls + seen.calls, passed_over + seen.passed_over
    outcomes += _changes(advisor, scope, since, viewer)
    if scope.table is None and (scope.account is None or scope.account == viewer.account):
        outcomes += (rules_schema.least_privilege(state, viewer.account) if viewer.permits is None else [NotChecked(
            "least-privilege", None, "the account's IAM policies are read for its root alone")])
    findings = sorted((outcome for outcome in outcomes if isinstance(outcome, Finding)),
                      key=lambda finding: (finding.table or "", finding.namespace, _ORDER[finding.rule]))
    rendered = [finding.to_json() for finding in findings]
    rendered.sort(key=lambda finding: _SEVERITY[finding["severity"]])
    return {"findings": rendered,
            "not_checked": [outcome.to_json() for outcome in outcomes if not isinstance(outcome, Finding)],
            "access_patterns": patterns,
            "window": {"observed_since": max(advisor.started, clock.now() - advisor.windows.retention),
                       "retention_hours": advisor.limits.retention_hours, "since": since, "now": clock.now(),
                       "requests_observed": calls, "requests_passed_over": passed_over,
                       "observing_seconds": round(advisor.observing, 6),
                       "tables": names, "deleted_tables": gone,
                       "configuration": advisor.settings.source or "defaults"},
            "rules": sorted(RULES)}


def _changes(advisor: Advisor, scope: Scope, since: float | None, viewer: Viewer) -> list[Outcome]:
    """The destructive schema changes of the tables in `scope` that `viewer` may read, since `since`."""
    found: list[Outcome] = []
    for change in rules_schema.destructive_changes(advisor):
        seen = advisor.tables.get(change.table or "")
        if (scope.covers(change.table or "") and (since is None or change.evidence["at"] >= since)
                and (viewer.permits is None or (seen is not None and seen.meta is not None
                                                and viewer.permits(seen.meta)))):
            namespace, _, table = (change.table or "").rpartition("/")
            change.evidence["table"] = table
            found += _placed([change], table, namespace + "/" if namespace else "")
    return found


def _placed(outcomes: list[Outcome], table: str, namespace: str) -> list[Outcome]:
    """`outcomes` of one table, named as clients name it, in its namespace (the rules name it by its stored name)."""
    for outcome in outcomes:
        outcome.table, outcome.namespace = table, namespace
    return outcomes


def _patterns(seen: TableObservations, since: float | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for (operation, index, shape, projected, consistent), figures in seen.patterns.items():
        if since is not None and figures[LAST] < since:
            continue
        count = figures[COUNT]
        rows.append({"table": seen.client_name, **placed(seen.namespace), "operation": operation, "index": index,
                     "key_condition": shape,
                     "projection": "ALL" if projected < 0 else f"{projected} attributes",
                     "consistent_read": consistent, "count": int(count), "refused": int(figures[REFUSED]),
                     "latency_ms": {"mean": round(figures[LATENCY] / count * 1000, 3) if count else 0.0,
                                    "max": round(figures[SLOWEST] * 1000, 3)},
                     "read_units": figures[READ], "write_units": figures[WRITE],
                     "last_seen": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(figures[LAST]))})
    rows.sort(key=lambda row: -int(row["count"]))
    return rows
