"""DynamoDB's client-visible errors: one exception class per AWS ``__type``.

Every error a client can see is raised as one of these and rendered by the server as
``{"__type": "<namespace>#<Name>", "message": "..."}`` with HTTP 400 (or the status given).
The class names are the AWS names, so the AWS documentation and this code can be searched together.
This module imports nothing from the package.
"""

from __future__ import annotations

from typing import Any

_DYNAMODB = "com.amazonaws.dynamodb.v20120810#"
_CORAL_SERVICE = "com.amazon.coral.service#"
_CORAL_VALIDATE = "com.amazon.coral.validate#"


class DynamoDBError(Exception):
    """Base of every error rendered to a client."""

    namespace: str = _DYNAMODB
    status: int = 400
    # Some errors carry the message under "Message" (capitalised) on the wire; DynamoDB uses "message".
    message_key: str = "message"
    extra: dict[str, Any] | None = None  # more members of the error's shape (e.g. ThrottlingReasons)

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or "")
        self.message = message

    @property
    def type_name(self) -> str:
        return self.namespace + type(self).__name__

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {"__type": self.type_name}
        if self.message is not None:
            body[self.message_key] = self.message
        if self.extra:
            body.update(self.extra)
        return body


# --- protocol / coral errors -------------------------------------------------------------------


class SerializationException(DynamoDBError):
    namespace = _CORAL_SERVICE
    message_key = "Message"  # DynamoDB's deserializer errors capitalise the member


class UnknownOperationException(DynamoDBError):
    namespace = _CORAL_SERVICE

    # DynamoDB's text, as boto3 and the Java SDK show it (boto3 #1542, aws-toolkit-jetbrains #2956).
    def __init__(self, message: str = "Unknown operation exception") -> None:
        super().__init__(message)


class UnsupportedOperationException(DynamoDBError):
    """An operation DynamoDB has that OpenDDB does not implement yet (one DynamoDB does not have stays
    UnknownOperationException).

    Why not DynamoDB Local's answer: for operations it lacks, DynamoDB Local answers 400 UnknownOperationException
    "An unknown operation was requested." (quoted in localstack issues 709, 908 and 6909, aws-sdk-php issue 1687,
    aws-sdk-js issue 2502), and those threads show it misleading users into looking for a typo, a wrong endpoint
    or an outdated SDK. This names the operation and says what is missing instead. 501 Not Implemented is HTTP's
    status for exactly this, and no SDK retries it: botocore's legacy and standard retry modes retry 500, 502, 503,
    504 and throttling codes only (retries/standard.py, data/_retry.json), so a client fails at once instead of
    backing off into the same answer, as it would on a 500 InternalFailure (LocalStack's choice). The name is the
    one AWS services give an operation they do not support (IoT Events' UnsupportedOperationException is a 501
    fault; Directory Service's reads "The operation is not supported."); SDKs key on the part after "#", and the
    coral namespace marks it, like UnknownOperationException, as decided before any DynamoDB logic ran."""

    namespace = _CORAL_SERVICE
    status = 501

    def __init__(self, operation: str, reason: str | None = None) -> None:
        """`reason`: why a part of an operation OpenDDB implements (`operation` names the part) is refused."""
        if reason is None:
            super().__init__(f"{operation} is not supported by OpenDDB yet (docs/OPERATIONS.md lists the operations "
                             "it implements)")
        else:
            super().__init__(f"{operation} is not supported by OpenDDB: {reason} (docs/OPERATIONS.md)")


class MissingAuthenticationTokenException(DynamoDBError):
    namespace = _CORAL_SERVICE

    def __init__(self, message: str = "Request is missing Authentication Token") -> None:
        super().__init__(message)


class IncompleteSignatureException(DynamoDBError):
    namespace = _CORAL_SERVICE


class InvalidSignatureException(DynamoDBError):
    namespace = _CORAL_SERVICE


class UnrecognizedClientException(DynamoDBError):
    namespace = _CORAL_SERVICE


class ExpiredTokenException(DynamoDBError):
    """Temporary credentials past their expiry: 400 with "The security token included in the request is expired"
    (a raw DynamoDB Scan answer, guregu/dynamo issue 68, 2018)."""

    namespace = _CORAL_SERVICE

    def __init__(self, message: str = "The security token included in the request is expired") -> None:
        super().__init__(message)


class AccessDeniedException(DynamoDBError):
    namespace = _CORAL_SERVICE


class RequestEntityTooLargeException(DynamoDBError):
    """Body over the service's maximum; DynamoDB answers 413."""

    namespace = _CORAL_SERVICE
    status = 413


class ValidationException(DynamoDBError):
    namespace = _CORAL_VALIDATE


INVALID_PARAMETERS = "One or more parameter values were invalid: "


def invalid(detail: str) -> ValidationException:
    """DynamoDB's most common refusal of a well-formed request's values: "One or more parameter values were
    invalid: <detail>"."""
    return ValidationException(INVALID_PARAMETERS + detail)


# --- DynamoDB service errors -------------------------------------------------------------------


class ResourceNotFoundException(DynamoDBError):
    pass


class TableNotFoundException(DynamoDBError):
    """The backup operations' word for a missing table (where the others say ResourceNotFoundException)."""


class ResourceInUseException(DynamoDBError):
    pass


class PolicyNotFoundException(DynamoDBError):
    """No resource-based policy, or not the revision ExpectedRevisionId names (API Reference)."""


class LimitExceededException(DynamoDBError):
    pass


class ConditionalCheckFailedException(DynamoDBError):
    """A ConditionExpression evaluated false; ``item`` is the old item when ALL_OLD was asked for."""

    def __init__(self, message: str = "The conditional request failed",
                 item: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.item = item

    def to_wire(self) -> dict[str, Any]:
        body = super().to_wire()
        if self.item is not None:
            body["Item"] = self.item
        return body


class DuplicateItemException(DynamoDBError):
    """A PartiQL INSERT found an item with its key already there."""


class ItemCollectionSizeLimitExceededException(DynamoDBError):
    """An item collection (the items of one partition key value of a table with local secondary indexes, and their
    entries) grown past its limit. `collection`: (table id, partition hash) of the collection, for a transaction to
    name the action that grew it."""

    # DynamoDB's text (the Developer Guide's error list, and the reason's message in a cancelled transaction).
    MESSAGE = "Collection size exceeded."

    def __init__(self, collection: tuple[int, int]) -> None:
        super().__init__(self.MESSAGE)
        self.collection = collection


class ProvisionedThroughputExceededException(DynamoDBError):
    pass


class RequestLimitExceeded(DynamoDBError):
    pass


class ThrottlingException(DynamoDBError):
    namespace = _CORAL_SERVICE


class TransactionConflictException(DynamoDBError):
    pass


class IdempotentParameterMismatchException(DynamoDBError):
    message_key = "Message"  # (capitalised in DynamoDB's service model, as TransactionCanceledException's)


class TransactionCanceledException(DynamoDBError):
    """A transaction was cancelled; ``reasons`` holds one entry per action, in request order.

    DynamoDB sends this one's text under a capitalised "Message", after the reasons."""

    message_key = "Message"

    def __init__(self, reasons: list[dict[str, Any]]) -> None:
        codes = ", ".join(r.get("Code", "None") for r in reasons)
        super().__init__(f"Transaction cancelled, please refer cancellation reasons for specific reasons "
                         f"[{codes}]")
        self.reasons = reasons

    def to_wire(self) -> dict[str, Any]:
        return {"__type": self.type_name, "CancellationReasons": self.reasons, "Message": self.message}


class InternalServerError(DynamoDBError):
    status = 500


class ServiceUnavailable(DynamoDBError):
    """503, retryable: the Developer Guide's "Error messages and codes" lists it among the 5xx errors, a temporary
    state in which a request can be sent again. OpenDDB answers it when its store cannot take a write now (its disk
    is full): nothing of the request was kept."""

    status = 503

    def __init__(self, message: str = "The service is currently unavailable or busy.") -> None:  # best guess
        super().__init__(message)


# --- DynamoDB Streams errors -------------------------------------------------------------------


class ExpiredIteratorException(DynamoDBError):
    """A shard iterator used more than 15 minutes after it was returned."""


class TrimmedDataAccessException(DynamoDBError):
    """A read of stream records older than the retention period (24 hours), which are gone."""


# --- backups and point-in-time recovery (API Reference: CreateBackup, RestoreTableFromBackup,
# RestoreTableToPointInTime, UpdateContinuousBackups) -------------------------------------------------------


class BackupNotFoundException(DynamoDBError):
    """Backup not found for the given BackupARN."""


class BackupInUseException(DynamoDBError):
    """There is another ongoing conflicting backup control plane operation on the table. The backup is either being
    created, deleted or restored to a table."""


class TableAlreadyExistsException(DynamoDBError):
    """A restore's target table name is taken."""


class TableInUseException(DynamoDBError):
    """A restore's target table (or a backup's source) is being created or deleted."""


class PointInTimeRecoveryUnavailableException(DynamoDBError):
    """Point-in-time recovery is not enabled for the source table."""


class InvalidRestoreTimeException(DynamoDBError):
    """RestoreDateTime is outside EarliestRestorableDateTime .. LatestRestorableDateTime."""


class ExportNotFoundException(DynamoDBError):
    """The specified export was not found."""


class InvalidExportTimeException(DynamoDBError):
    """ExportTime is outside the point-in-time recovery window."""


# --- imports (API Reference: ImportTable, DescribeImport) ------------------------------------------------------


class ImportNotFoundException(DynamoDBError):
    """The specified import was not found."""


class ImportConflictException(DynamoDBError):
    """An ImportTable whose ClientToken an earlier import used, with other parameters."""


class ExportConflictException(DynamoDBError):
    """An ExportTableToPointInTime whose ClientToken an earlier export used, with other parameters."""
