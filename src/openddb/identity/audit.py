"""The audit log (`openddb serve --audit-log FILE`): one JSON line per control-plane call (a change, made or
refused) and per call refused for who made it, in the shape of CloudTrail's management events (eventTime,
eventSource, eventName, awsRegion, sourceIPAddress, userIdentity, requestID, resources, errorCode and
errorMessage when refused), so tools that read CloudTrail records read these.

Every worker appends to the same file, each line in one write on a descriptor opened for appending: lines of
different processes never interleave. The file is the owner's alone. Data-plane calls are not recorded (as
CloudTrail does not by default: they are its data events).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import orjson

from openddb.api.context import tables_named
from openddb.identity.access import table_arn

if TYPE_CHECKING:
    from openddb.api.incoming import Caller, Incoming
    from openddb.errors import DynamoDBError
    from openddb.identity.sigv4 import Credentials as IdentityCaller

# The calls that change the control plane: DynamoDB's management events (Developer Guide, "Logging DynamoDB
# operations by using AWS CloudTrail": the control-plane operations), the read-only ones left out.
_CHANGES = ("CreateTable", "UpdateTable", "DeleteTable", "TagResource", "UntagResource", "UpdateTimeToLive",
            "UpdateContinuousBackups", "UpdateContributorInsights", "CreateBackup", "DeleteBackup",
            "RestoreTableFromBackup", "RestoreTableToPointInTime", "CreateGlobalTable", "UpdateGlobalTable",
            "UpdateGlobalTableSettings", "UpdateTableReplicaAutoScaling", "EnableKinesisStreamingDestination",
            "DisableKinesisStreamingDestination", "UpdateKinesisStreamingDestination", "PutResourcePolicy",
            "DeleteResourcePolicy", "ExportTableToPointInTime", "ImportTable")
AUDITED = frozenset(b"DynamoDB_20120810." + name.encode() for name in _CHANGES)


class AuditLog:
    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def record(self, incoming: Incoming, caller: Caller | None, request: dict[str, Any] | None,
               error: DynamoDBError | None = None) -> None:
        """One line for a call: a control-plane change (made, or refused with `error`), a call refused before its
        caller was known (`caller` None), or one its caller's policies refused (AccessDeniedException)."""
        operation = incoming.target.rpartition(b".")[2].decode("latin-1")
        event: dict[str, Any] = {
            "eventVersion": "1.08",
            "eventTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "eventSource": "dynamodb.amazonaws.com",
            "eventName": operation,
            "awsRegion": caller.region if caller is not None else None,
            "sourceIPAddress": incoming.peer or None,
            "userIdentity": _identity(incoming, caller),
            "requestID": incoming.request_id.decode("latin-1"),
            "readOnly": False,
            "managementEvent": True,
            "eventCategory": "Management",
        }
        tables = tables_named(request) if request else []
        if tables and caller is not None:
            table = tables[0]
            arn = table_arn(caller.region, caller.account, table)
            event["resources"] = [{"ARN": arn, "type": "AWS::DynamoDB::Table"}]
        if error is not None:
            event["errorCode"] = error.type_name.rpartition("#")[2]
            event["errorMessage"] = error.message
        os.write(self._fd, orjson.dumps(event) + b"\n")

    def record_identity(self, incoming: Incoming, service: str, action: str, caller: IdentityCaller | None,
                        params: dict[str, str], error: tuple[str, str] | None = None) -> None:
        """One line for an IAM or STS call (`service` "iam" or "sts"): a change (made, or refused with `error`, its
        code and message), or a call refused before its caller was known. Of its parameters only the names it
        acts on are recorded (never a secret)."""
        identity: dict[str, Any] = {"type": "Unknown"}
        if caller is not None:
            identity = {"type": _principal_type(caller.arn), "arn": caller.arn, "accountId": caller.account,
                        "accessKeyId": caller.access_key_id}
        event: dict[str, Any] = {
            "eventVersion": "1.08",
            "eventTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "eventSource": f"{service}.amazonaws.com",
            "eventName": action,
            "awsRegion": "us-east-1",
            "sourceIPAddress": incoming.peer or None,
            "userIdentity": identity,
            "requestID": incoming.request_id.decode("latin-1"),
            "requestParameters": {name: params[name] for name in _NAMED if name in params} or None,
            "readOnly": False,
            "managementEvent": True,
            "eventCategory": "Management",
        }
        if error is not None:
            event["errorCode"], event["errorMessage"] = error
        os.write(self._fd, orjson.dumps(event) + b"\n")

    def close(self) -> None:
        os.close(self._fd)


# The parameters of an IAM or STS call that name what it acts on (the rest, documents and secrets, stay out).
_NAMED = ("UserName", "RoleName", "PolicyName", "AccessKeyId", "RoleArn", "RoleSessionName")


def _principal_type(arn: str) -> str:
    """CloudTrail's userIdentity type of a principal's ARN."""
    if arn.endswith(":root"):
        return "Root"
    return "AssumedRole" if ":assumed-role/" in arn else "IAMUser"


def _identity(incoming: Incoming, caller: Caller | None) -> dict[str, Any]:
    """CloudTrail's userIdentity: the verified principal, else the access key the call named (unverified)."""
    if caller is not None and caller.principal is not None:
        return {"type": _principal_type(caller.principal), "arn": caller.principal,
                "accountId": caller.account, "accessKeyId": caller.access_key}
    identity: dict[str, Any] = {"type": "Unknown"}
    if caller is not None:
        identity.update(accountId=caller.account, accessKeyId=caller.access_key)
    elif incoming.authorization is not None:
        start = incoming.authorization.find(b"Credential=")
        if start >= 0:
            identity["accessKeyId"] = incoming.authorization[start + 11:].split(b"/", 1)[0].decode("latin-1")
    return identity

