"""What the backup operations share: request shapes of their members, timestamps as the JSON protocol sends them,
and their not-found error."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from openddb.api import validation as v
from openddb.api.context import RequestContext
from openddb.errors import BackupInUseException, BackupNotFoundException, SerializationException
from openddb.storage.base import BackupRecord

# botocore's model: BackupName 3-255 of [a-zA-Z0-9_.-]+, BackupArn 37-1024 characters.
BACKUP_NAME = v.Str(required=True, min_len=3, max_len=255, pattern=v.TABLE_NAME_PATTERN)
BACKUP_ARN = v.Str(required=True, min_len=37, max_len=1024)


def stamped_id(now: float) -> str:
    """The tail DynamoDB gives a backup's, an export's and an import's ARN: 14 digits of the creation time in
    milliseconds, "-" and 8 hex digits."""
    return f"{int(now * 1000):014d}-{os.urandom(4).hex()}"


def backup_not_found(arn: str) -> BackupNotFoundException:
    # best guess: the message DynamoDB gives with the API Reference's "Backup not found for the given BackupARN"
    return BackupNotFoundException(f"Backup not found: {arn}")


def backup_in_use(arn: str) -> BackupInUseException:
    # best guess: the API Reference's description of BackupInUseException (its message is not recorded in public)
    return BackupInUseException("There is another ongoing conflicting backup control plane operation on the table. "
                                f"The backup is either being created, deleted or restored to a table: {arn}")


def visible_backup(context: RequestContext, arn: str) -> BackupRecord | None:
    """The backup `arn` if the caller's namespace holds it (another account's or region's is not found here; the
    authorize stage refused another account's caller before)."""
    record = context.engine.get_backup(arn)
    return record if record is not None and context.owns(record.arn) else None


@dataclass
class Timestamp(v.Shape):
    """A timestamp member: epoch seconds, as the SDKs send them over the JSON protocol."""

    required: bool = False

    def check(self, value: Any, path: str, errors: list[str]) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            # best guess: the deserializer's refusal of a timestamp that is no number (the SDKs never send one)
            raise SerializationException("Unexpected field type")


def timestamp(request: dict[str, Any], member: str) -> float | None:
    """A timestamp member checked by `Timestamp`, or None if absent."""
    value = request.get(member)
    return None if value is None else float(value)
