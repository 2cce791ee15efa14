"""Where users, roles, access keys, inline policies and temporary credentials live: an internal table of the
store, kept by the engine like any other (so it survives a restart and every worker and PostgreSQL node sees the
same), written and read through the engine interface alone.

Its name, `openddb/identity`, is one no DynamoDB client can reach: "/" is outside the table-name pattern
(`[a-zA-Z0-9_.-]+`) that every operation checks a name against, and a table ARN's name ends at its first "/".
ListTables, DescribeTable and the PartiQL planner leave it out by name (api/context.py, partiql/planner.py).

Each record is one item: partition key `pk` the kind ("user", "role", "key", "session", "policy"), sort key `sk`
its name (user or role name, lower case, prefixed by "<account>:" outside the default account `000000000000`;
access key id; the ARN of a table or stream with a resource-based policy), and `doc` the record as JSON text.
Access keys and ARNs are unique across accounts, and each key's record names its account. Secrets are stored as
they are: encrypted at rest with the whole store when the embedded store has a key (docs/ENCRYPTION.md), in
plaintext otherwise (see README, Identity).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, Literal

import orjson

from openddb import clock
from openddb.errors import ResourceInUseException
from openddb.identity.policies import PolicySet, compiled
from openddb.identity.sigv4 import Credentials
from openddb.model import Item
from openddb.model.keys import encode_key, partition_hash
from openddb.model.schema import KeyAttribute, TableMeta
from openddb.storage.base import Engine, SortRange, StorageKey, WriteOp

IDENTITY_TABLE = "openddb/identity"
# The account of --root-credentials without @ACCOUNT, and of every --auth off call.
DEFAULT_ACCOUNT = "000000000000"
Kind = Literal["user", "role", "key", "session", "policy"]
Doc = dict[str, Any]
# A change of one record: the record as stored (None: absent) -> as it is to be (None: deleted; the very same
# object: left as it is). It may raise to refuse the whole write.
Change = Callable[[Doc | None], Doc | None]
# How long a looked-up access key is trusted before the store is read again: a key deleted by another worker (or
# node) stops working within this time; one deleted by this worker at once.
CACHE_SECONDS = 1.0


def entity_name(account: str, name: str) -> str:
    """The sort key of a user or role `name` of `account` (":" is outside IAM's name pattern, so none collide; the
    default account's keep the unprefixed names they had before there were several accounts)."""
    name = name.lower()
    return name if account == DEFAULT_ACCOUNT else f"{account}:{name}"


def _key(kind: str, name: str) -> StorageKey:
    pk = encode_key({"S": kind})
    return StorageKey(partition_hash(pk), pk, encode_key({"S": name}))


def _new_table() -> TableMeta:
    return TableMeta(name=IDENTITY_TABLE, table_id=0, uuid=str(uuid.uuid4()), hash_key=KeyAttribute("pk", "S"),
                     range_key=KeyAttribute("sk", "S"),
                     attribute_definitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                            {"AttributeName": "sk", "AttributeType": "S"}],
                     created_at=clock.now(), billing_mode="PAY_PER_REQUEST")


class IdentityStore:
    """Records of one account's identities over the engine `engine_of()` gives (the dispatcher's current one: a
    `--dev` reset replaces it)."""

    def __init__(self, engine_of: Callable[[], Engine]) -> None:
        self.engine_of = engine_of
        self._cache: dict[str, tuple[float, Credentials | None]] = {}
        self._policies: dict[tuple[str, str], tuple[float, PolicySet]] = {}

    def _table(self, create: bool) -> TableMeta | None:
        engine = self.engine_of()
        meta = engine.get_table(IDENTITY_TABLE)
        if meta is None and create:
            try:
                meta = engine.create_table(_new_table())
            except ResourceInUseException:  # another worker made it meanwhile
                meta = engine.get_table(IDENTITY_TABLE)
        return meta

    def get(self, kind: Kind, name: str) -> Doc | None:
        meta = self._table(create=False)
        if meta is None:
            return None
        row = self.engine_of().get(meta, _key(kind, name))
        return None if row is None else _doc(row.data)

    def records(self, kind: Kind) -> list[Doc]:
        """Every record of a kind, in name order."""
        meta = self._table(create=False)
        if meta is None:
            return []
        pk = encode_key({"S": kind})
        return [_doc(row.data) for row in self.engine_of().query(meta, partition_hash(pk), pk, SortRange(), True,
                                                                   None)]

    def write(self, changes: list[tuple[Kind, str, Change]]) -> None:
        """Apply every change in one engine write: all of them, or (one raised) none."""
        meta = self._table(create=True)
        assert meta is not None
        ops = [WriteOp(meta, _key(kind, name), _apply(kind, name, change)) for kind, name, change in changes]
        self.engine_of().write(ops)

    # --- access keys, for the verifier -------------------------------------------------------------------------
    def credentials(self, access_key_id: str) -> Credentials | None:
        """The credentials of a user's access key or of temporary credentials (None: unknown), trusted for
        CACHE_SECONDS."""
        now = time.monotonic()
        cached = self._cache.get(access_key_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        kind: Kind = "session" if access_key_id.startswith("ASIA") else "key"
        doc = self.get(kind, access_key_id) if 16 <= len(access_key_id) <= 128 else None
        found = None if doc is None else Credentials(
            access_key_id, doc["secret"], doc["account"], doc["arn"], doc["user_id"], doc.get("token"),
            doc.get("expires"), doc.get("source", "user"), doc.get("role"))
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[access_key_id] = (now + CACHE_SECONDS, found)
        return found

    def forget(self, access_key_id: str) -> None:
        self._cache.pop(access_key_id, None)

    # --- identity policies, for authorization ------------------------------------------------------------------
    def policies(self, credentials: Credentials) -> PolicySet:
        """The inline policies of the user or the assumed role the credentials stand for, compiled, trusted for
        CACHE_SECONDS (a policy changed by another worker or node applies within that time; by this one at once)."""
        kind: Kind = "role" if credentials.source == "role" else "user"
        name = (credentials.role or "") if kind == "role" else credentials.arn.rpartition("/")[2]
        cached_key = (kind, entity_name(credentials.account, name))
        now = time.monotonic()
        cached = self._policies.get(cached_key)
        if cached is not None and cached[0] > now:
            return cached[1]
        record = self.get(kind, entity_name(credentials.account, name))
        found = PolicySet(() if record is None else tuple(compiled(text) for text in record["policies"].values()))
        if len(self._policies) > 4096:
            self._policies.clear()
        self._policies[cached_key] = (now + CACHE_SECONDS, found)
        return found

    def forget_policies(self, kind: Kind, name: str) -> None:
        """`name`: as the store names it (`entity_name`)."""
        self._policies.pop((kind, name), None)


def _doc(data: bytes) -> Doc:
    document: Doc = orjson.loads(orjson.loads(data)["doc"]["S"])
    return document


def _apply(kind: str, name: str, change: Change) -> Callable[[Item | None], Item | None]:
    def apply(old: Item | None) -> Item | None:
        before = None if old is None else orjson.loads(old["doc"]["S"])
        after = change(before)
        if after is None:
            return None
        if after is before and old is not None:
            return old
        return {"pk": {"S": kind}, "sk": {"S": name}, "doc": {"S": orjson.dumps(after).decode()}}
    return apply
