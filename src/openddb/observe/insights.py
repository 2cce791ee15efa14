"""Contributor Insights' counts: the most accessed and most throttled keys of each table whose insights are
enabled (api/contributor_insights.py), per worker, served in `GET /metrics` by rule name.

A listener of the request record, told of each request by the metrics (`Metrics.observe`) while some table has
insights. Which tables are enabled is read from their descriptions about once a second (`refresh`, called by the
server's background round): while no table has insights a request costs a test.
Counted: every item read or written in the table itself (its charges' keys) under the PKC rule (the partition key)
and SKC (partition and sort key; a Query counts its partition under PKC only), and every key of a throttled request
under PKT/SKT. Counts are totals since the insights were enabled on this worker (CloudWatch reports them per
period); a GSI's keys are not counted (its charges carry no key), only its rules named. Where tables are kept by
account and region, a rule's counts are kept under its name qualified by its table's namespace
("<account>/<region>/<rule>"), as CloudWatch keeps rules per account and region (observe/namespaces.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openddb.model.keys import decode_key
from openddb.model.schema import TableMeta
from openddb.observe.record import RequestRecord
from openddb.storage.base import Engine

MODES = ("ACCESSED_AND_THROTTLED_KEYS", "THROTTLED_KEYS")
TOP = 10  # contributors served per rule
_KEPT = 5000  # keys counted per rule before the least counted are dropped


def namespace_of(stored: str) -> str:
    """The namespace part of a table's stored name ("<account>/<region>/", or "" in one namespace: a table name
    has no "/")."""
    return stored[:stored.rfind("/") + 1] if stored.count("/") >= 2 else ""


def rule_names(meta: TableMeta, index: str, setting: dict[str, Any]) -> list[str]:
    """The CloudWatch rules DynamoDB makes for a table's or GSI's insights: PKC/SKC (most accessed partition keys,
    and partition and sort keys) in ACCESSED_AND_THROTTLED_KEYS mode, PKT/SKT (most throttled) in both; the sort
    key rules only where there is a sort key. Named DynamoDBContributorInsights-<rule>-<table>[-<index>]-<epoch
    ms of the enabling> (the pattern public describe-contributor-insights outputs show)."""
    target = meta.name if not index else f"{meta.name}-{index}"
    stamp = int(setting["created"] * 1000)
    found = meta.index(index) if index else None
    sorted_keys = bool(found.range_keys) if found is not None else meta.range_key is not None
    kinds = ["PKC", "SKC", "PKT", "SKT"] if setting["mode"] == MODES[0] else ["PKT", "SKT"]
    return [f"DynamoDBContributorInsights-{kind}-{target}-{stamp}" for kind in kinds
            if sorted_keys or kind.startswith("PK")]


class Insights:
    """One worker's key counts per Contributor Insights rule."""

    def __init__(self, engine: Callable[[], Engine]) -> None:
        self._engine = engine
        # table's stored name -> (its description when last read, rule name by kind "PKC", "SKC", "PKT", "SKT")
        self.enabled: dict[str, tuple[TableMeta, dict[str, str]]] = {}
        self.counts: dict[str, dict[str, float]] = {}  # rule name -> key text -> count

    def observe(self, record: RequestRecord) -> None:
        """Count the keys of one answered request (a Listener: see observe/record.py)."""
        if not self.enabled:  # (refreshed once a second by the server: `refresh`; Metrics asks this first)
            return
        namespace = record.namespace  # (`enabled` is keyed by stored names; charges name tables as clients do)
        for charge in record.charges:
            found = self.enabled.get(namespace + charge.table)
            if found is None or charge.key is None or charge.index_name is not None:
                continue
            meta, rules = found
            self._count(rules, "PKC", "SKC", meta, charge.key.pk, charge.key.sk)
        for table, pk, sk in record.throttled_keys:
            found = self.enabled.get(namespace + table)
            if found is not None:
                self._count(found[1], "PKT", "SKT", found[0], pk, sk)

    def _count(self, rules: dict[str, str], partition: str, pair: str, meta: TableMeta, pk: bytes, sk: bytes) -> None:
        rule = rules.get(partition)
        if rule is None:
            return
        key = _text(meta.hash_key.type, pk)
        _add(self.counts.setdefault(rule, {}), key)
        rule = rules.get(pair)
        if rule is not None and sk and meta.range_key is not None:
            _add(self.counts.setdefault(rule, {}), f"{key}|{_text(meta.range_key.type, sk)}")

    def refresh(self) -> None:
        """Read which tables have insights enabled (the server calls it about once a second)."""
        engine = self._engine()
        enabled: dict[str, tuple[TableMeta, dict[str, str]]] = {}
        for name in engine.list_tables():
            meta = engine.get_table(name)
            setting = meta.contributor_insights.get("") if meta is not None else None
            if meta is None or setting is None or setting["status"] != "ENABLED":
                continue
            names, qualifier = rule_names(meta, "", setting), namespace_of(name)
            enabled[name] = (meta, {rule.split("-")[1]: qualifier + rule for rule in names})
        self.enabled = enabled

    def snapshot(self) -> dict[str, list[list[Any]]]:
        """Each rule's counted keys (for the other workers to sum)."""
        return {rule: [[key, count] for key, count in keys.items()] for rule, keys in self.counts.items()}


def _add(keys: dict[str, float], key: str) -> None:
    keys[key] = keys.get(key, 0.0) + 1
    if len(keys) > _KEPT:
        for dropped in sorted(keys, key=keys.__getitem__)[:_KEPT // 2]:
            del keys[dropped]


def _text(key_type: str, encoded: bytes) -> str:
    """A key value as CloudWatch's reports show a contributor: the string, the number, the base64 of binary."""
    return str(next(iter(decode_key(key_type, encoded).values())))
