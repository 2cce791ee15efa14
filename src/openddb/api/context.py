"""What every handler receives: the engine, the caller's region and account, and table look-up."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from openddb.api import transient
from openddb.errors import ResourceNotFoundException, ValidationException
from openddb.identity.store import DEFAULT_ACCOUNT, IDENTITY_TABLE
from openddb.model.schema import TableMeta, namespace_of_arn
from openddb.observe.record import RequestRecord
from openddb.storage.base import Engine

if TYPE_CHECKING:
    from openddb.identity.access import Access

INTERNAL_PREFIX = IDENTITY_TABLE.split("/")[0] + "/"  # "/" is outside every table name a client can give
_TABLE_RESOURCE = re.compile(r"table/[^/]+")


@dataclass(frozen=True, slots=True)
class LegacyOrigin:
    """What a legacy rewrite (`legacy`) wrote a request from, for the handlers and expression checks that word or
    limit a rewritten member differently."""

    # Every expression member the rewriter wrote: the limits on expressions (size, operators) are not the legacy
    # parameters' limits, so they do not apply to it.
    generated: frozenset[str] = frozenset()
    query_filter: tuple[str, ...] | None = None  # a Query's FilterExpression came from QueryFilter (these names)
    attribute_updates: bool = False  # an UpdateItem's UpdateExpression came from AttributeUpdates


@dataclass(slots=True)
class RequestContext:
    engine: Engine
    # What the request consumed and how it ends (observe/record.py): handlers charge their reads and writes to it
    record: RequestRecord
    region: str = "us-east-1"
    account: str = DEFAULT_ACCOUNT
    request_id: str = ""
    # Tables the request named by ARN (name -> ARN): the response then names them so too (`as_requested`).
    arns: dict[str, str] | None = None
    # The request's Host header: the address the client reached this server at (DescribeEndpoints answers with it).
    host: bytes = b""
    legacy: LegacyOrigin | None = None  # set when the request was rewritten from legacy parameters
    # A read run for a PartiQL SELECT: its filter may name key attributes (the conditions on them a Query's key
    # condition cannot carry, which DynamoDB evaluates as a filter), which a native Query refuses.
    keys_in_filter: bool = False
    # The caller's authorization, when its calls on items are checked (`--auth verify`, a caller other than the
    # root): each front end hands it the operations it built (api/item_access.py). None: nothing to check.
    access: Access | None = None
    # The caller's namespace: "" (one for every account and region: --namespaces shared) or "<account>/<region>/"
    # (docs/ACCOUNTS-AND-REGIONS.md). Tables are looked up under it, and created in it.
    namespace: str = ""

    def generated(self, member: str) -> bool:
        """True if the expression ``member`` was written from legacy parameters (see `LegacyOrigin.generated`)."""
        return self.legacy is not None and member in self.legacy.generated

    def table(self, name_or_arn: str) -> TableMeta:
        """The table named (or ARN'd) in a data-plane request; DynamoDB's not-found error otherwise."""
        name = table_name_from(name_or_arn)
        if name != name_or_arn:
            stored = self.check_table_arn(name_or_arn) + name
            if self.arns is None:
                self.arns = {}
            self.arns[name] = name_or_arn
        else:
            stored = self.namespace + name
        meta = self.engine.get_table(stored)
        # A table still CREATING, or whose deletion is over, serves no item (see api/transient.py).
        if meta is None or (meta.pending is not None and not transient.serves_items(meta)):
            raise ResourceNotFoundException("Requested resource not found")
        return meta

    def described_table(self, name_or_arn: str) -> TableMeta:
        """The table named in a control-plane request, with the control plane's not-found wording."""
        name, meta = self.find_table(name_or_arn)
        if meta is None:
            raise ResourceNotFoundException(f"Requested resource not found: Table: {name} not found")
        return meta

    def find_table(self, name_or_arn: str) -> tuple[str, TableMeta | None]:
        """A control-plane request's table name (an ARN checked) and its table, or None for the caller to word."""
        name = table_name_from(name_or_arn)
        namespace = self.check_table_arn(name_or_arn) if name != name_or_arn else self.namespace
        meta = visible_table(self.engine, namespace + name)
        if meta is not None and meta.pending is not None and transient.gone(meta):
            return name, None
        return name, meta

    def stored(self, name: str) -> str:
        """The engine's name of the caller's table `name` (a client's name, not an ARN)."""
        return self.namespace + name

    def owns(self, arn: str) -> bool:
        """Whether the resource `arn` (a table's, or its stream's, backup's or export's) is in the caller's
        namespace (any is, in the shared one)."""
        return not self.namespace or namespace_of_arn(arn, True) == self.namespace

    def table_names(self) -> list[str]:
        """The names of the caller's namespace's tables, ascending (the server's internal tables never among them)."""
        return names_in(self.engine, self.namespace)

    def check_table_arn(self, arn: str) -> str:
        """A TableName ARN must name a table of this partition and region (another region's is not served from
        this one), in DynamoDB's recorded words; an index or stream ARN is no table's. Its namespace: the caller's
        region's of the account it names (whose authorization, if it is not the caller's, is identity/access.py's),
        or the shared one."""
        parts = arn.split(":", 5)
        if parts[1:2] != ["aws"]:
            raise ValidationException(f"1 validation error detected: Invalid AWS partition in '{arn}'")
        if parts[3:4] != [self.region]:
            raise ValidationException(f"1 validation error detected: Invalid AWS region in '{arn}'")
        if len(parts) < 6 or not _TABLE_RESOURCE.fullmatch(parts[5]):
            raise ValidationException(f"1 validation error detected: Invalid resource type in '{arn}'")
        return namespace_of_arn(arn, bool(self.namespace))  # (its region is the caller's, checked above)


def names_in(engine: Engine, namespace: str) -> list[str]:
    """The names clients give the tables of `namespace` ("": the shared one), ascending."""
    cut = len(namespace)
    return [stored[cut:] for stored in engine.list_tables() if stored.startswith(namespace) and "/" not in stored[cut:]]


def visible_table(engine: Engine, name: str) -> TableMeta | None:
    """A table a client may see by its stored name: any but the server's own internal tables, named "openddb/..."
    (the identity store, the export records and snapshots: no client sees them, ListTables included)."""
    return None if name.startswith(INTERNAL_PREFIX) else engine.get_table(name)


def tables_named(request: dict[str, Any]) -> list[str]:
    """The tables a request names, as it names them (a name or an ARN): its TableName (or the control plane's
    ResourceArn, TargetTableName, GlobalTableName), a batch's RequestItems, a transaction's items."""
    for member in ("TableName", "ResourceArn", "TargetTableName", "GlobalTableName"):
        value = request.get(member)
        if isinstance(value, str) and value:
            return [value]
    items = request.get("RequestItems")
    if isinstance(items, dict):
        return [str(key) for key in items]
    found = []
    actions = request.get("TransactItems")
    for action in actions if isinstance(actions, list) else ():  # (any JSON may come: this runs before validation)
        if isinstance(action, dict):
            for body in action.values():
                if isinstance(body, dict) and isinstance(body.get("TableName"), str):
                    found.append(body["TableName"])
    return found


def table_name_from(name_or_arn: str) -> str:
    """Tables may be named by ARN (arn:aws:dynamodb:region:account:table/Name)."""
    if name_or_arn.startswith("arn:"):
        _, _, rest = name_or_arn.partition(":table/")
        return rest.split("/", 1)[0]
    return name_or_arn


def as_requested(response: dict[str, Any], arns: dict[str, str]) -> dict[str, Any]:
    """Name the tables a request gave by ARN by that ARN in the response's ConsumedCapacity (and in the per-table
    ItemCollectionMetrics of BatchWriteItem), as DynamoDB does."""
    consumed = response.get("ConsumedCapacity")
    for entry in consumed if isinstance(consumed, list) else [consumed] if consumed else []:
        entry["TableName"] = arns.get(entry["TableName"], entry["TableName"])
    metrics = response.get("ItemCollectionMetrics")
    if isinstance(metrics, dict) and any(name in arns for name in metrics):
        response["ItemCollectionMetrics"] = {arns.get(name, name): value for name, value in metrics.items()}
    return response
