"""A finding (a rule broken, with its evidence) and a rule that could not be checked (with why)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from openddb.advisor.catalog import RULES, Severity, standard
from openddb.advisor.listener import Advisor
from openddb.advisor.observations import TableObservations
from openddb.model.schema import TableMeta


@dataclass(slots=True)
class Finding:
    rule: str
    table: str | None
    message: str  # what was seen, in one sentence with its numbers
    evidence: dict[str, Any] = field(default_factory=dict)
    severity: Severity | None = None  # None: the rule's own
    namespace: str = ""  # the table's: "" (shared) or "<account>/<region>/" (--namespaces account-region)

    def to_json(self) -> dict[str, Any]:
        rule = RULES[self.rule]
        return {"rule": self.rule, "severity": self.severity or rule.severity, "table": self.table,
                **placed(self.namespace), "message": self.message, "evidence": self.evidence, "why": rule.why,
                "fix": rule.fix, "standard": standard(rule)}


@dataclass(slots=True)
class NotChecked:
    rule: str
    table: str | None
    reason: str
    namespace: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "table": self.table, **placed(self.namespace), "reason": self.reason}


def placed(namespace: str) -> dict[str, str]:
    """The account and region of a table's namespace ("<account>/<region>/"; none for the shared one "")."""
    if not namespace:
        return {}
    account, region, _ = namespace.split("/", 2)
    return {"account": account, "region": region}


Outcome = Finding | NotChecked
# A rule over one table: the advisor, the table's observations (None: no traffic seen), its description.
TableRule = Callable[[Advisor, TableObservations | None, TableMeta], list[Outcome]]
