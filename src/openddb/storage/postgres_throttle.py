"""The throttle's draws shared across PostgreSQL nodes (`--throttling on` with `--engine`): each node publishes,
about once a second, the cumulative units its processes drew on each token bucket (api/throttle.py), and reads the
other nodes'; what grew is taken from its own buckets, so every node's buckets feel the whole table's traffic,
within about a second.

One row per (node, bucket): cumulative, so a row written late or twice loses nothing (a reader takes what grew
since the total it saw last). `created` says when the row first appeared, so a node that starts after another
does not take that one's whole past as new debt. Rows not renewed for STALE_SECONDS are deleted. The table is made
when first used, under an advisory lock (it holds nothing a restart needs), not by the catalog's migrations.
"""

from __future__ import annotations

STALE_SECONDS = 600.0
SCHEMA_LOCK = 0x0DDB_7407  # the advisory lock that serialises nodes making the table
TABLE = ("CREATE TABLE IF NOT EXISTS openddb_throttle_draws (node VARCHAR(255) NOT NULL, key TEXT NOT NULL, "
         "total DOUBLE PRECISION NOT NULL, created DOUBLE PRECISION NOT NULL, at DOUBLE PRECISION NOT NULL, "
         "PRIMARY KEY (node, key))")
PUBLISH = ("INSERT INTO openddb_throttle_draws (node, key, total, created, at) VALUES (%s, %s, %s, %s, %s) "
           "ON CONFLICT (node, key) DO UPDATE SET total = EXCLUDED.total, at = EXCLUDED.at")
READ = "SELECT node, key, total, created FROM openddb_throttle_draws WHERE node <> %s AND at >= %s"
TRIM = "DELETE FROM openddb_throttle_draws WHERE at < %s"
