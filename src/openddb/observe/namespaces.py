"""What CloudWatch's calls see of the metrics where tables are kept by account and region (`--namespaces
account-region`): the caller's namespace alone, as CloudWatch's metrics and Contributor Insights rules belong to one
account and region. The metrics count such tables by their stored names, "<account>/<region>/<name>", and
Contributor Insights rules likewise (observe/metrics.py, observe/insights.py); a caller's view keeps the series and
rules of its namespace, named as its clients name them, and leaves out every other's.
"""

from __future__ import annotations

from typing import Any


def scoped(snapshots: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """The workers' snapshots as a caller of `namespace` sees their history (CloudWatch reads only that); in one
    namespace ("") they are as they are."""
    if not namespace:
        return snapshots
    seen = []
    for snapshot in snapshots:
        history = snapshot.get("history") or {}
        series = [[name, [_strip(labels[0], namespace), *labels[1:]], points]
                  for name, labels, points in history.get("series", ()) if labels and labels[0].startswith(namespace)]
        buckets = [[[_strip(labels[0], namespace), *labels[1:]], minutes]
                   for labels, minutes in history.get("buckets", ()) if labels and labels[0].startswith(namespace)]
        insights = {rule[len(namespace):]: keys for rule, keys in (history.get("insights") or {}).items()
                    if rule.startswith(namespace)}
        seen.append({**snapshot, "history": {"series": series, "insights": insights, "buckets": buckets}})
    return seen


def scoped_rules(rules: set[str], namespace: str) -> set[str]:
    """The Contributor Insights rules of `namespace`, by their own names."""
    if not namespace:
        return rules
    return {rule[len(namespace):] for rule in rules if rule.startswith(namespace)}


def _strip(value: str, namespace: str) -> str:
    # (a table's name, or UserErrors' namespace itself: "" once stripped, which CloudWatch's dimensions leave out)
    return value[len(namespace):]
