"""Bringing an embedded store made by an earlier version up to date: columns added where they are missing."""

from __future__ import annotations

import sqlite3


def add_columns(db: sqlite3.Connection, table: str, columns: dict[str, str]) -> None:
    """Add each of `columns` (name -> its declaration) that `table` lacks (a store made before it was kept)."""
    present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
    for name, declaration in columns.items():
        if name not in present:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {declaration}")
