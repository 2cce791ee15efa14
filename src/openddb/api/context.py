"""What every handler receives: the engine, the caller's region and account, and table look-up."""

from __future__ import annotations

from dataclasses import dataclass

from openddb.errors import ResourceNotFoundException
from openddb.model.schema import TableMeta
from openddb.storage.base import Engine

DEFAULT_ACCOUNT = "000000000000"


@dataclass(slots=True)
class RequestContext:
    engine: Engine
    region: str = "us-east-1"
    account: str = DEFAULT_ACCOUNT
    request_id: str = ""

    def table(self, name_or_arn: str) -> TableMeta:
        """The table named (or ARN'd) in a data-plane request; DynamoDB's not-found error otherwise."""
        name = table_name_from(name_or_arn)
        meta = self.engine.get_table(name)
        if meta is None:
            raise ResourceNotFoundException("Requested resource not found")
        return meta

    def described_table(self, name_or_arn: str) -> TableMeta:
        """The table named in a control-plane request, with the control plane's not-found wording."""
        name = table_name_from(name_or_arn)
        meta = self.engine.get_table(name)
        if meta is None:
            raise ResourceNotFoundException(f"Requested resource not found: Table: {name} not found")
        return meta


def table_name_from(name_or_arn: str) -> str:
    """Tables may be named by ARN (arn:aws:dynamodb:region:account:table/Name)."""
    if name_or_arn.startswith("arn:"):
        _, _, rest = name_or_arn.partition(":table/")
        return rest.split("/", 1)[0]
    return name_or_arn
