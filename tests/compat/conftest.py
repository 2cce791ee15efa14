"""The compatibility matrix: each client through one realistic scenario against a real `openddb serve` (the
session's `server` fixture): a table with a global index, conditional writes, a transaction, a batch, paging.
A client that is not installed is skipped (tests/compat/requirements.txt lists them at the tested versions)."""

from __future__ import annotations

ITEMS = 7  # written by a batch, read back in pages of PAGE
PAGE = 3
