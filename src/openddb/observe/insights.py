"""Contributor Insights' counts: the most accessed and most throttled keys of each table whose insights are
enabled (api/contributor_insights.py), per worker, served in `GET /metrics` by rule name.

A listener of the request record, told of each request by the metrics (`Metrics.observe`) while some table has
insights. Which tables are enabled is read from their descriptions about once a second (`refresh`, called by the
server's background round): while no table has insights a request costs a test.
Counted: every item read or written in the table itself (its charges' keys) under the PKC rule (the partition key)
and SKC (partition and sort key; a Query counts its partition under PKC only), and every key of a throttled request
under PKT/SKT. A GSI with insights of its own counts its keys the same way under its rules: each item a write put
in or took out of it (by the item's index key: the new item's, or the old one's when the write took it out), and
the partition a Query on it named. Counts are totals since the insights were enabled on this worker (CloudWatch
reports them per period). A GSI's PKT and SKT rules count what a request refused by one of that GSI's limits
(api/throttle.py) named of it: a put item's index key, or the partition a Query on it named (an UpdateItem's or
DeleteItem's index key is not known before it runs: none is counted for it).
Where tables are kept by account and region, a rule's counts are kept under its name qualified by its table's
namespace ("<account>/<region>/<rule>"), as CloudWatch keeps rules per account and region (observe/namespaces.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openddb.model import AttributeValue
from openddb.model.keys import decode_key
from openddb.model.schema import IndexMeta, TableMeta
from openddb.observe.record import Charge, RequestRecord
from openddb.storage.base import Engine

MODES = ("ACCESSED_AND_THROTTLED_KEYS", "THROTTLED_KEYS")
TOP = 10  # contributors served per rule
_KEPT = 5000  # keys counted per rule before the least counted are dropped


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
        # (table's stored name, GSI name) -> (the GSI, its rule name by kind), for the GSIs with insights
        self.indexes: dict[tuple[str, str], tuple[IndexMeta, dict[str, str]]] = {}
        self.active = False  # some table or GSI has insights (what the metrics ask before telling a request)
        self.counts: dict[str, dict[str, float]] = {}  # rule name -> key text -> count

    def observe(self, record: RequestRecord) -> None:
        """Count the keys of one answered request (a Listener: see observe/record.py)."""
        if not self.active:  # (refreshed once a second by the server: `refresh`; Metrics asks this first)
            return
        namespace = record.namespace  # (`enabled` is keyed by stored names; charges name tables as clients do)
        for charge in record.charges:
            if charge.index_name is not None and charge.items and self.indexes:
                self._count_index(namespace, charge)
                continue
            found = self.enabled.get(namespace + charge.table)
            if found is None or charge.key is None or charge.index_name is not None:
                continue
            meta, rules = found
            self._count(rules, "PKC", "SKC", meta, charge.key.pk, charge.key.sk)
        for table, pk, sk in record.throttled_keys:
            found = self.enabled.get(namespace + table)
            if found is not None:
                self._count(found[1], "PKT", "SKT", found[0], pk, sk)
        for table, index_name, item in record.throttled_items:
            found_index = self.indexes.get((namespace + table, index_name))
            if found_index is not None:
                self._count_item(found_index[0], found_index[1], "PKT", "SKT", item)

    def _count(self, rules: dict[str, str], partition: str, pair: str, meta: TableMeta, pk: bytes, sk: bytes) -> None:
        rule = rules.get(partition)
        if rule is None:
            return
        key = _text(meta.hash_key.type, pk)
        _add(self.counts.setdefault(rule, {}), key)
        rule = rules.get(pair)
        if rule is not None and sk and meta.range_key is not None:
            _add(self.counts.setdefault(rule, {}), f"{key}|{_text(meta.range_key.type, sk)}")

    def _count_index(self, namespace: str, charge: Charge) -> None:
        """Count the GSI key of an index charge, if the GSI has insights (its keys: see the module's doc)."""
        assert charge.index_name is not None
        found = self.indexes.get((namespace + charge.table, charge.index_name))
        if found is None:
            return
        index, rules = found
        item = next((item for item in reversed(charge.items)
                     if item is not None and all(key.name in item for key in index.hash_keys)), None)
        if item is not None:
            self._count_item(index, rules, "PKC", "SKC", item)

    def _count_item(self, index: IndexMeta, rules: dict[str, str], partition: str, pair: str,
                    item: dict[str, Any]) -> None:
        """Count an item's (or a Query's key values') GSI key under the GSI's `partition` rule and, with its sort
        key, its `pair` rule; an item without the index's partition key is in no partition of it."""
        rule = rules.get(partition)
        if rule is None or not all(key.name in item for key in index.hash_keys):
            return
        try:
            key = _values_text([item[key.name] for key in index.hash_keys])
        except (KeyError, TypeError, ValueError, AttributeError):
            return  # (a refused request's value that is no key: nothing to name)
        _add(self.counts.setdefault(rule, {}), key)
        rule = rules.get(pair)
        if rule is not None and index.range_keys and all(attribute.name in item for attribute in index.range_keys):
            _add(self.counts.setdefault(rule, {}),
                 f"{key}|{_values_text([item[attribute.name] for attribute in index.range_keys])}")

    def refresh(self) -> None:
        """Read which tables and GSIs have insights enabled (the server calls it about once a second)."""
        engine = self._engine()
        enabled: dict[str, tuple[TableMeta, dict[str, str]]] = {}
        indexes: dict[tuple[str, str], tuple[IndexMeta, dict[str, str]]] = {}
        for name in engine.list_tables():
            meta = engine.get_table(name)
            if meta is None:
                continue
            qualifier = meta.namespace
            for index_name, setting in meta.contributor_insights.items():
                index = meta.index(index_name) if index_name else None
                if setting["status"] != "ENABLED" or (index_name and index is None):
                    continue
                rules = {rule.split("-")[1]: qualifier + rule for rule in rule_names(meta, index_name, setting)}
                if index is None:
                    enabled[name] = (meta, rules)
                else:
                    indexes[(name, index_name)] = (index, rules)
        self.enabled, self.indexes = enabled, indexes
        self.active = bool(enabled or indexes)

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


def _values_text(values: list[AttributeValue]) -> str:
    """A GSI key's values as a contributor: each as `_text` shows it, joined by "|" if the key has several
    attributes (best guess: how DynamoDB shows a multi-attribute key's contributor is not documented)."""
    return "|".join(str(next(iter(value.values()))) for value in values)
