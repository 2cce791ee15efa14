"""Which refusals PutItem and UpdateItem count as "1 validation error detected: ...", for the tests that check
every refusal in both forms.

The families are the server's own (`validation.is_counted`); the recorded answers themselves, spelled out word
for word beside refusals that stay bare, are checked in test_items.test_counted_refusals_as_recorded.
"""

from __future__ import annotations

from openddb.api.validation import is_counted


def counted(message: str) -> str:
    """`message` as PutItem or UpdateItem gives it."""
    return "1 validation error detected: " + message if is_counted(message) else message
