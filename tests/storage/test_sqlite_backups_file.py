"""The backups file beside the embedded store is made by whichever worker first needs it. Two workers making it
at once meet in its switch to WAL, which SQLite answers with "database is locked" at once (the busy timeout does
not apply to it): the second waits for the first instead of failing."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from openddb.storage.sqlite import SQLiteEngine


def test_a_worker_waits_for_another_making_the_backups_file(tmp_path: Path) -> None:
    engine = SQLiteEngine(str(tmp_path))
    other = sqlite3.connect(tmp_path / "openddb-backups.sqlite3", isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another worker, in the middle of making the file's tables
    other.execute("CREATE TABLE IF NOT EXISTS made_first (x)")
    done = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    done.start()
    try:
        assert engine.list_backups() == []
    finally:
        done.join()
        other.close()
    mode = sqlite3.connect(tmp_path / "openddb-backups.sqlite3").execute("PRAGMA journal_mode").fetchone()
    assert mode == ("wal",)
