"""The rules read from a table's description and the server's state, with the traffic on its indexes: index use,
count and projection, point-in-time recovery, declared access patterns (RULES.md ids); and the server-wide ones:
policies, destructive schema changes."""

from __future__ import annotations

import re
from typing import Any

from openddb.advisor.findings import Finding, NotChecked, Outcome
from openddb.advisor.listener import Advisor
from openddb.advisor.observations import COUNT, TableObservations
from openddb.advisor.state import ServerState
from openddb.model.schema import TableMeta


def gsi_unused(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    if seen is None:
        return []
    found: list[Outcome] = []
    for index in meta.indexes:
        reads = seen.indexes.get(index.name)
        if reads is not None and not reads.reads and reads.writes >= advisor.limits.gsi_unused_writes:
            found.append(Finding("gsi-unused", seen.name,
                                 f"index {index.name} was written {reads.writes} times ({reads.write_units:g} units) "
                                 "and never read", {"index": index.name, "index_writes": reads.writes,
                                                    "index_write_units": reads.write_units, "reads": 0}))
    return found


def gsi_too_many(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    limits = advisor.limits
    gsis = [index.name for index in meta.indexes if index.is_global]
    found: list[Outcome] = []
    if len(gsis) > limits.gsi_max:
        found.append(Finding("gsi-too-many", meta.name, f"{len(gsis)} GSIs (more than {limits.gsi_max})",
                             {"gsis": gsis}))
    if seen is not None and seen.write_units:
        index_units = sum(reads.write_units for reads in seen.indexes.values())
        amplification = index_units / seen.write_units
        if amplification >= limits.gsi_write_amplification:
            found.append(Finding("gsi-too-many", meta.name,
                                 f"index writes cost {amplification:.1f} times the table's own write units",
                                 {"table_write_units": seen.write_units, "index_write_units": index_units,
                                  "amplification": round(amplification, 2)}))
    return found


def gsi_projection_all(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    if seen is None:
        return []
    limits = advisor.limits
    found: list[Outcome] = []
    for index in meta.indexes:
        reads = seen.indexes.get(index.name)
        if (index.projection_type == "ALL" and reads is not None and reads.reads >= limits.projection_all_min_reads
                and reads.narrow == reads.reads):
            found.append(Finding("gsi-projection-all", seen.name,
                                 f"index {index.name} projects ALL; its {reads.reads} reads projected at most "
                                 f"{limits.projection_all_attributes} attributes",
                                 {"index": index.name, "reads": reads.reads, "narrow_reads": reads.narrow}))
    return found


def pitr_off(state: ServerState, meta: TableMeta) -> list[Outcome]:
    if state.pitr(meta):
        return []
    return [Finding("pitr-off", meta.name, "point-in-time recovery is off",
                    {"PointInTimeRecoveryStatus": "DISABLED"})]


def access_patterns(advisor: Advisor, seen: TableObservations | None, meta: TableMeta) -> list[Outcome]:
    declared = advisor.settings.declared.get(meta.stored_name, advisor.settings.declared.get(meta.name))
    if declared is None:
        return [NotChecked("access-pattern-undeclared", meta.name, "no access patterns declared for this table "
                           "(docs/ADVISOR.md: the advisor's configuration file)")]
    found: list[Outcome] = []
    observed = seen.patterns if seen is not None else {}
    for (operation, index, shape, _, _), figures in observed.items():
        if not any(_matches(pattern.operation, pattern.index, pattern.key_condition, operation, index, shape)
                   for pattern in declared):
            found.append(Finding("access-pattern-undeclared", meta.name,
                                 f"observed but not declared: {operation} {index or 'table'} {shape}".rstrip(),
                                 {"operation": operation, "index": index, "key_condition": shape,
                                  "requests": int(figures[COUNT]), "kind": "observed-undeclared"}))
    index_names = {index.name for index in meta.indexes}
    for pattern in declared:
        unservable = pattern.index is not None and pattern.index not in index_names
        mismatch = None if unservable else _key_mismatch(meta, pattern.operation, pattern.index, pattern.key_condition)
        served = any(_matches(pattern.operation, pattern.index, pattern.key_condition, operation, index, shape)
                     for operation, index, shape, _, _ in observed)
        if unservable or mismatch or not served:
            why = (f"no index {pattern.index} can serve it" if unservable else
                   f"the {'index' if pattern.index else 'table'}'s key cannot serve it ({mismatch})" if mismatch else
                   "declared but never served")
            found.append(Finding("access-pattern-undeclared", meta.name,
                                 f"{why}: {pattern.operation} {pattern.index or 'table'} {pattern.key_condition}"
                                 .rstrip(), {"operation": pattern.operation, "index": pattern.index,
                                             "key_condition": pattern.key_condition, "kind": "declared-unserved",
                                             "index_missing": unservable, "key_mismatch": mismatch}))
    return found


# The attribute of each condition of a key condition shape ("pk = ?", "sk BETWEEN ? AND ?", "begins_with(sk, ?)").
_CONDITION = re.compile(r"begins_with\(\s*([^\s,()]+)\s*,\s*\?\s*\)|([^\s,()]+)\s*(=|<=|>=|<|>|BETWEEN)\s*\?")


def _key_mismatch(meta: TableMeta, operation: str, index: str | None, shape: str) -> str | None:
    """Why a declared GetItem or Query of `shape` cannot be served by the key of the table (or of its index
    `index`), or None: its partition key must be compared with =, and it may name no other attribute than the
    key's (a condition on another attribute is a filter, not a key condition)."""
    if operation not in ("Query", "GetItem") or not shape.strip():
        return None
    found = meta.index(index) if index else None
    hashes = [key.name for key in found.hash_keys] if found else [meta.hash_key.name]
    ranges = ([key.name for key in found.range_keys] if found else
              [meta.range_key.name] if meta.range_key else [])
    conditions = [(match.group(1) or match.group(2), match.group(3) or "begins_with")
                  for match in _CONDITION.finditer(shape)]
    equal = {attribute for attribute, comparison in conditions if comparison == "="}
    missing = [name for name in hashes if name not in equal]
    if missing:
        return f"no equality on the partition key {', '.join(missing)}"
    others = [attribute for attribute, _ in conditions if attribute not in hashes and attribute not in ranges]
    return f"{', '.join(others)} is not a key attribute" if others else None


def _matches(operation: str, index: str | None, shape: str, seen_operation: str, seen_index: str | None,
             seen_shape: str) -> bool:
    return (operation == seen_operation and index == seen_index
            and (not shape or " ".join(shape.split()) == seen_shape))


def least_privilege(state: ServerState, account: str | None = None) -> list[Outcome]:
    """Broad grants in the inline policies of users and roles (of `account` only, if given)."""
    found: list[Outcome] = [NotChecked("least-privilege", None, "principals' use of their grants (requests "
                                       "carry no principal to the advisor) and LeadingKeys on multi-tenant tables")]
    for principal, policy, document in state.policies(account):
        broad = _broad_statements(document)
        if broad:
            found.append(Finding("least-privilege", None, f"{principal}'s policy {policy} grants "
                                 + "; ".join(broad), {"principal": principal, "policy": policy, "grants": broad}))
    return found


def _broad_statements(document: dict[str, Any]) -> list[str]:
    statements = document.get("Statement")
    if isinstance(statements, dict):
        statements = [statements]
    broad: list[str] = []
    for statement in statements if isinstance(statements, list) else ():
        if not isinstance(statement, dict) or statement.get("Effect") != "Allow":
            continue
        actions = _listed(statement.get("Action"))
        resources = _listed(statement.get("Resource"))
        wild = [action for action in actions if action in ("*", "dynamodb:*")]
        dynamo = [action for action in actions if action.startswith("dynamodb:") or action == "*"]
        if wild:
            broad.append(f"Action {wild[0]}")
        if dynamo and "*" in resources:
            broad.append("Resource *")
    return broad


def _listed(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def destructive_changes(advisor: Advisor) -> list[Finding]:
    return [Finding("schema-destructive-change", change["table"],
                    f"{change['change']} after it served {change['reads_before']} reads", dict(change))
            for change in advisor.changes]
