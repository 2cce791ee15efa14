"""The report in the forms people and CI systems read: text, JSON, SARIF 2.1.0 (code-scanning views) and JUnit XML
(test-report views), and the exit status `--fail-on` asks for."""

from __future__ import annotations

from typing import Any, Literal
from xml.sax.saxutils import escape, quoteattr

import orjson

from openddb import __version__
from openddb.advisor.catalog import RULES, standard

Format = Literal["text", "json", "sarif", "junit"]
_LEVELS = {"error": "error", "warning": "warning", "info": "note"}
_RANK = {"error": 0, "warning": 1, "info": 2}


def failing(report: dict[str, Any], fail_on: str | None) -> bool:
    """Whether a finding is at least as severe as `fail_on` ("error" or "warning"; None: never)."""
    if fail_on is None:
        return False
    return any(_RANK[finding["severity"]] <= _RANK[fail_on] for finding in report["findings"])


def render(report: dict[str, Any], form: Format) -> str:
    if form == "json":
        return orjson.dumps(report, option=orjson.OPT_INDENT_2).decode()
    if form == "sarif":
        return orjson.dumps(sarif(report), option=orjson.OPT_INDENT_2).decode()
    if form == "junit":
        return junit(report)
    return text(report)


def located(entry: dict[str, Any]) -> str:
    """Where a finding (or rule not checked, or pattern) is: its table, after its account and region where tables
    are kept by account and region ("111111111111/eu-west-1/orders", as the report's window lists them), or
    "(server)"."""
    table = entry.get("table")
    if table is None:
        return "(server)"
    return f"{entry['account']}/{entry['region']}/{table}" if "account" in entry else str(table)


def text(report: dict[str, Any]) -> str:
    lines = []
    findings = report["findings"]
    window = report["window"]
    lines.append(f"OpenDDB advisor: {len(findings)} findings over {window['requests_observed']} observed requests "
                 f"({window['configuration']})")
    for finding in findings:
        lines.append("")
        lines.append(f"{finding['severity'].upper():7} {finding['rule']}  table {located(finding)}")
        lines.append(f"        {finding['message']}")
        lines.append(f"        standard: {finding['standard']['statement']} "
                     f"({', '.join(finding['standard']['sources'])})")
        lines.append(f"        evidence: {orjson.dumps(finding['evidence']).decode()[:400]}")
        lines.append(f"        why: {finding['why']}")
        lines.append(f"        fix: {finding['fix']}")
    if report["not_checked"]:
        lines.append("")
        lines.append("Not checked:")
        for entry in report["not_checked"]:
            lines.append(f"  {entry['rule']} {located(entry)}: {entry['reason']}")
    if report["access_patterns"]:
        lines.append("")
        lines.append("Observed access patterns:")
        lines.append(f"  {'table':20} {'operation':18} {'index':14} {'key condition':34} {'projection':14} "
                     f"{'strong':6} {'count':>8} {'mean ms':>8} {'RCU':>8} {'WCU':>8}")
        for row in report["access_patterns"]:
            lines.append(f"  {located(row)[-20:]:20} {row['operation']:18} {(row['index'] or '-')[:14]:14} "
                         f"{row['key_condition'][:34]:34} {row['projection']:14} {row['consistent_read']!s:6} "
                         f"{row['count']:>8} {row['latency_ms']['mean']:>8} {row['read_units']:>8g} "
                         f"{row['write_units']:>8g}")
    return "\n".join(lines) + "\n"


def sarif(report: dict[str, Any]) -> dict[str, Any]:
    """SARIF 2.1.0: one run of the tool "openddb-advisor", a rule per RULES.md id, a result per finding located at
    the table (a logical location: findings come from traffic, not from a file)."""
    rules = [{"id": rule.id, "name": rule.id, "shortDescription": {"text": rule.statement},
              "fullDescription": {"text": rule.why}, "help": {"text": rule.fix},
              "defaultConfiguration": {"level": _LEVELS[rule.severity]},
              "properties": {"standard": standard(rule)}} for rule in RULES.values()]
    results = [{"ruleId": finding["rule"], "level": _LEVELS[finding["severity"]],
                "message": {"text": f"{finding['message']}. Fix: {finding['fix']}"},
                "locations": [{"logicalLocations": [{"name": finding["table"] or "server",
                                                     "fullyQualifiedName": located(finding),
                                                     "kind": "table" if finding["table"] else "module"}]}],
                "properties": {"evidence": finding["evidence"], "table": finding["table"],
                               **{member: finding[member] for member in ("account", "region") if member in finding}}}
               for finding in report["findings"]]
    return {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0",
            "runs": [{"tool": {"driver": {"name": "openddb-advisor", "version": __version__,
                                          "informationUri": "https://github.com/openddb/openddb",
                                          "rules": rules}},
                      "results": results}]}


def junit(report: dict[str, Any]) -> str:
    """JUnit XML: a test suite per table, a test case per rule: failed by its findings, skipped when not checked."""
    tables = sorted({name for name in report["window"]["tables"]} | {located(f) for f in report["findings"]})
    suites = []
    total = failures = skipped = 0
    for table in tables:
        cases = []
        for rule in RULES:
            found = [f for f in report["findings"] if located(f) == table and f["rule"] == rule]
            unchecked = [n for n in report["not_checked"] if located(n) == table and n["rule"] == rule]
            if table == "(server)" and not found and not unchecked:
                continue
            body = "".join(f"<failure type={quoteattr(f['severity'])} message={quoteattr(f['message'])}>"
                           f"{escape(orjson.dumps(f['evidence']).decode())}</failure>" for f in found)
            if not found and unchecked:
                body = f"<skipped message={quoteattr(unchecked[0]['reason'])}/>"
                skipped += 1
            failures += bool(found)
            total += 1
            cases.append(f'    <testcase classname={quoteattr("openddb.advisor." + table)} name={quoteattr(rule)}>'
                         f"{body}</testcase>")
        suites.append(f"  <testsuite name={quoteattr(table)} tests=\"{len(cases)}\">\n" + "\n".join(cases)
                      + "\n  </testsuite>")
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="openddb-advisor" tests="{total}" '
            f'failures="{failures}" skipped="{skipped}">\n' + "\n".join(suites) + "\n</testsuites>\n")
