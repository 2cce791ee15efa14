"""Bringing an embedded store made by an earlier version up to date: columns added where they are missing, triggers
an earlier version wrote through dropped."""

from __future__ import annotations

import sqlite3


def add_columns(db: sqlite3.Connection, table: str, columns: dict[str, str]) -> None:
    """Add each of `columns` (name -> its declaration) that `table` lacks (a store made before it was kept)."""
    present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
    for name, declaration in columns.items():
        if name not in present:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {declaration}")


def drop_triggers(db: sqlite3.Connection, prefix: str) -> None:
    """Drop every trigger whose name starts with `prefix` (logs an earlier version wrote through triggers on
    `items`, which the write path now writes itself: left, they would log each change twice). A schema change:
    every connection sees it at its next statement."""
    pattern = prefix.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%") + "%"
    names = [row[0] for row in db.execute(
        "SELECT name FROM sqlite_master WHERE type='trigger' AND name LIKE ? ESCAPE '\\'", (pattern,))]
    for name in names:
        db.execute(f'DROP TRIGGER IF EXISTS "{name}"')
