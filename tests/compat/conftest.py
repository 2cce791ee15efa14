"""The compatibility matrix: each client through one realistic scenario against a real `openddb serve` (the
session's `server` fixture): a table with a global index, conditional writes, a transaction, a batch, paging.
A client that is not installed is skipped (tests/compat/requirements.txt lists them at the tested versions)."""

from __future__ import annotations

ITEMS = 7  # written by a batch, read back in pages of PAGE
PAGE = 3
# The scenario's table: orders of a customer (pk, sk) with a global index on their status.
KEYS = {"AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                                 {"AttributeName": "sk", "AttributeType": "S"},
                                 {"AttributeName": "status", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        "GlobalSecondaryIndexes": [{"IndexName": "by_status", "Projection": {"ProjectionType": "ALL"},
                                    "KeySchema": [{"AttributeName": "status", "KeyType": "HASH"},
                                                  {"AttributeName": "sk", "KeyType": "RANGE"}]}],
        "BillingMode": "PAY_PER_REQUEST"}
