"""CloudWatch on DynamoDB's port, in the two protocols botocore's current service model offers: AWS JSON 1.0 (a POST
to / with X-Amz-Target GraniteServiceVersion20100801.<Operation>, which boto3 sends; `answer_json`) and Smithy RPC
v2 CBOR (a POST to /service/GraniteServiceVersion20100801/operation/<Operation> with a CBOR body, answered in CBOR
with the `smithy-protocol: rpc-v2-cbor` header; `answer`). Errors carry their shape's name in `__type` and, in CBOR
(the model being awsQueryCompatible), their Query-protocol code in `x-amzn-query-error`, which botocore reports as
the error's Code (`InvalidParameterValue`, ...). The calls themselves are observe/cloudwatch.py's.

With `--auth verify` a call must be signed as CloudWatch's are, for the service `monitoring`, by credentials the
server knows, and is checked by the verifier DynamoDB's calls are (identity/sigv4.py): a refusal carries the
Query-protocol codes CloudWatch's model, being awsQueryCompatible, reports (SignatureDoesNotMatch,
InvalidClientTokenId, IncompleteSignature, MissingAuthenticationToken, ExpiredToken: IAM's and STS's words,
identity/service.py); best guess: their shape names in `__type` are the same codes. GET /metrics stays unsigned,
as Prometheus scrapes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from openddb.errors import (
    DynamoDBError,
    IncompleteSignatureException,
    InvalidSignatureException,
    MissingAuthenticationTokenException,
)
from openddb.identity.service import as_query_error
from openddb.identity.sigv4 import CREDENTIAL, SignedRequest, Verifier
from openddb.observe import cloudwatch
from openddb.server import cbor

PATH_PREFIX = b"/service/GraniteServiceVersion20100801/operation/"
CONTENT_TYPE = b"application/cbor"
_SHAPES = "com.amazonaws.cloudwatch#"


@dataclass(frozen=True)
class Signature:
    """What a call's signature is checked with: the server's verifier (None: `--auth` is not `verify`), the
    Authorization header, and what it covers."""

    verifier: Verifier | None
    authorization: bytes | None
    signed: SignedRequest | None

    def check(self) -> None:
        """CloudWatchError unless the call is signed for CloudWatch by credentials the verifier knows."""
        if self.verifier is None:
            return
        authorization = self.authorization
        try:
            if authorization is None or self.signed is None:
                raise MissingAuthenticationTokenException()
            scope = CREDENTIAL.search(authorization)
            if not authorization.startswith(b"AWS4-HMAC-SHA256 ") or scope is None or any(
                    name not in authorization for name in (b"Signature=", b"SignedHeaders=")):
                raise IncompleteSignatureException("Authorization header requires 'Credential' parameter. "
                                                   "Authorization header requires 'Signature' parameter. "
                                                   "Authorization header requires 'SignedHeaders' parameter. "
                                                   "Authorization=" + authorization.decode("latin-1"))
            if scope.group(4) != b"monitoring":  # (AWS's words for a scope of another service, as DynamoDB's)
                raise InvalidSignatureException("Credential should be scoped to correct service: 'monitoring'. ")
            self.verifier.verify(authorization, self.signed)
        except DynamoDBError as error:
            refusal = as_query_error(error)
            raise cloudwatch.CloudWatchError(refusal.code, refusal.code, refusal.message, refusal.status) from None


def operation_of(path: bytes) -> str | None:
    """The CloudWatch operation a request path names (None: not a CloudWatch path)."""
    if not path.startswith(PATH_PREFIX):
        return None
    return path[len(PATH_PREFIX):].decode("latin-1")


def answer(operation: str, body: bytes, snapshots: Callable[[], list[dict[str, Any]]],
           rules: Callable[[], set[str]], signature: Signature) -> tuple[int, bytes, bytes]:
    """(status, CBOR body, extra header lines) for one call in the RPC v2 CBOR protocol."""
    try:
        signature.check()
    except cloudwatch.CloudWatchError as error:
        return _error(error.shape, error.code, error.message, error.status)
    try:
        params = cbor.decode(body) if body else {}
        if not isinstance(params, dict):
            raise cbor.CborError("not a map")
    except cbor.CborError:
        # best guess: the words for a body that is not CBOR (the code is the protocol's SerializationException)
        return _error("SerializationException", "", "The request body is not a CBOR map", 400)
    try:
        result = call(operation, params, snapshots, rules)
    except cloudwatch.CloudWatchError as error:
        return _error(error.shape, error.code, error.message, error.status)
    return 200, cbor.encode(_timestamped(result)), b"smithy-protocol: rpc-v2-cbor\r\n"


def answer_json(operation: str, body: bytes, snapshots: Callable[[], list[dict[str, Any]]],
                rules: Callable[[], set[str]], signature: Signature) -> tuple[int, bytes]:
    """(status, JSON body) for one call in the AWS JSON 1.0 protocol (X-Amz-Target
    GraniteServiceVersion20100801.<Operation>, which botocore's current model sends): timestamps are epoch
    seconds. The dispatcher answers it (api/dispatch.py), whose answers carry no header of the call's own, so an
    error's Query-protocol code is not sent: botocore then reports its shape name as the Code
    (InvalidParameterValueException where CloudWatch's header would make it InvalidParameterValue)."""
    try:
        signature.check()
    except cloudwatch.CloudWatchError as error:
        return error.status, orjson.dumps({"__type": _SHAPES + error.shape, "message": error.message})
    try:
        params = orjson.loads(body) if body else {}
        if not isinstance(params, dict):
            raise ValueError("not an object")
    except ValueError:
        # best guess: the words for a body that is not JSON (the code is the protocol's SerializationException)
        return 400, orjson.dumps({"__type": _SHAPES + "SerializationException",
                                  "message": "The request body is not a JSON object"})
    try:
        return 200, orjson.dumps(call(operation, params, snapshots, rules))
    except cloudwatch.CloudWatchError as error:
        return error.status, orjson.dumps({"__type": _SHAPES + error.shape, "message": error.message})


def call(operation: str, params: dict[str, Any], snapshots: Callable[[], list[dict[str, Any]]],
         rules: Callable[[], set[str]]) -> dict[str, Any]:
    """One call's answer (CloudWatchError for a refusal)."""
    if operation == "GetMetricStatistics":
        return cloudwatch.get_metric_statistics(params, snapshots())
    if operation == "GetMetricData":
        return cloudwatch.get_metric_data(params, snapshots())
    if operation == "ListMetrics":
        return cloudwatch.list_metrics(params, snapshots())
    if operation == "GetInsightRuleReport":
        return cloudwatch.get_insight_rule_report(params, snapshots(), rules())
    # best guess: an operation of CloudWatch's this server does not answer, in the protocol's terms
    raise cloudwatch.CloudWatchError("UnknownOperationException", "", f"This server answers no CloudWatch {operation}",
                                     404)


def _error(shape: str, code: str, message: str, status: int) -> tuple[int, bytes, bytes]:
    extra = b"smithy-protocol: rpc-v2-cbor\r\n"
    if code:
        extra += f"x-amzn-query-error: {code};Sender\r\n".encode()
    return status, cbor.encode({"__type": _SHAPES + shape, "message": message}), extra


def _timestamped(value: Any, member: str = "") -> Any:
    """The answer with its timestamp members (Timestamp, Timestamps) as CBOR timestamps."""
    if isinstance(value, dict):
        return {key: _timestamped(item, key) for key, item in value.items()}
    if isinstance(value, list):
        return [_timestamped(item, member) for item in value]
    if member in ("Timestamp", "Timestamps") and isinstance(value, int | float):
        return cbor.Timestamp(float(value))
    return value
