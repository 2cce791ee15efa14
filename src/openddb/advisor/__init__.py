"""The standards advisor (issue 29): a listener of the request record (observe/record.py) that keeps compact
observations per table and index (`observations.py`, with the sketches of `sketches.py` and the request shapes of
`shapes.py`), the rules of the design standards by their RULES.md ids (`rules_*.py`, described in `catalog.py`),
the report they make with the tables' own state (`report.py`), and its formats (`formats.py`: text, JSON, SARIF,
JUnit). See docs/ADVISOR.md."""
