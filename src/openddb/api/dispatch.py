"""Routes a framed request to its operation handler and renders the outcome.

Order of checks follows DynamoDB: the operation (X-Amz-Target), then authentication, then the body. Every
error a client may see is a `DynamoDBError`; anything else is a bug, logged with its traceback and answered
as an InternalServerError without details.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable
from typing import Any

import orjson

from openddb import clock
from openddb.api import (
    backups,
    backups_continuous,
    backups_export_runs,
    backups_import_runs,
    backups_restore,
    backups_runs,
    batch,
    contributor_insights,
    indexes,
    items,
    reads,
    resource_policies,
    tables,
    tags,
    transactions,
    transient,
    ttl,
)
from openddb.api.context import RequestContext, as_requested, table_name_from, tables_named
from openddb.api.expression_members import REQUEST_BYTES
from openddb.api.fault_injection import FaultInjector
from openddb.api.incoming import Caller, Incoming
from openddb.api.legacy import REWRITERS, Rewriter
from openddb.api.read_ahead import asks_consistency
from openddb.api.throttle import Throttle, throttled_by
from openddb.api.validation import attribute_value_error
from openddb.errors import (
    AccessDeniedException,
    DynamoDBError,
    IncompleteSignatureException,
    InternalServerError,
    InvalidSignatureException,
    MissingAuthenticationTokenException,
    RequestEntityTooLargeException,
    ResourceNotFoundException,
    SerializationException,
    ServiceUnavailable,
    UnknownOperationException,
    UnsupportedOperationException,
    ValidationException,
)
from openddb.identity.access import Access, principal_context
from openddb.identity.audit import AUDITED, AuditLog
from openddb.identity.policies import PolicySet, Statement, compiled
from openddb.identity.resource_policies import statements_of
from openddb.identity.service import QUERY_TARGETS, IdentityService
from openddb.identity.sigv4 import CREDENTIAL, Credentials, Verifier
from openddb.observe.cloudwatch import JSON_TARGET as CLOUDWATCH_TARGET
from openddb.observe.record import Listener, RequestRecord
from openddb.partiql import batches, statements
from openddb.partiql import transactions as partiql_transactions
from openddb.storage.base import CatalogChanged, Engine, EngineBusy, lease_holder
from openddb.streams import api as streams
from openddb.vectors import search, updates

log = logging.getLogger("openddb.api")

# A handler's answer: the response document, or None for an operation whose output shape is empty, answered
# with an empty body as DynamoDB does (TagResource, UntagResource).
Handler = Callable[[RequestContext, dict[str, Any]], dict[str, Any] | None]

TARGET_PREFIX = b"DynamoDB_20120810."
STREAMS_TARGET_PREFIX = b"DynamoDBStreams_20120810."  # DynamoDB Streams, on the same port (signed for "dynamodb")
# How often a request runs again because another worker changed a table it was working from (CatalogChanged).
_CATALOG_ATTEMPTS = 30
# How often a server looks for index backfills nobody drives (one cut short by a crash, or by a worker's death).
RESUME_SECONDS = 5.0
# The stream upkeep lease outlives the server's roughly one-second duty rounds, so its holder keeps it.
STREAM_LEASE_SECONDS = 10.0
_PARAMETER_SEPARATORS = re.compile(rb"[,\s]+")


# Every operation of DynamoDB (API version 2012-08-10) and of DynamoDB Streams, as botocore's service models list
# them (botocore 1.44.8: data/dynamodb/2012-08-10 and data/dynamodbstreams/2012-08-10). Committed here, not read
# from botocore at run time (botocore is a test dependency only); tests/api/test_operations_registry.py checks that
# every name is botocore's and names the operations a newer botocore adds, for the next update of this list.
DYNAMODB_OPERATIONS = frozenset({
    "BatchExecuteStatement", "BatchGetItem", "BatchWriteItem", "CancelBulkOperation", "CreateBackup",
    "CreateGlobalTable", "CreateTable", "DeleteBackup", "DeleteItem", "DeleteResourcePolicy", "DeleteTable",
    "DescribeBackup", "DescribeBulkOperation", "DescribeContinuousBackups", "DescribeContributorInsights",
    "DescribeEndpoints", "DescribeExport", "DescribeGlobalTable", "DescribeGlobalTableSettings", "DescribeImport",
    "DescribeKinesisStreamingDestination", "DescribeLimits", "DescribeTable", "DescribeTableReplicaAutoScaling",
    "DescribeTimeToLive", "DisableKinesisStreamingDestination", "EnableKinesisStreamingDestination", "ExecuteStatement",
    "ExecuteTransaction", "ExportTableToPointInTime", "GetItem", "GetResourcePolicy", "ImportTable", "ListBackups",
    "ListBulkOperations", "ListContributorInsights", "ListExports", "ListGlobalTables", "ListImports", "ListTables",
    "ListTagsOfResource", "PutItem", "PutResourcePolicy", "Query", "RestoreTableFromBackup",
    "RestoreTableToPointInTime", "Scan", "SearchVectors", "StartBulkPutItems", "TagResource", "TransactGetItems",
    "TransactWriteItems", "UntagResource", "UpdateContinuousBackups", "UpdateContributorInsights", "UpdateGlobalTable",
    "UpdateGlobalTableSettings", "UpdateItem", "UpdateKinesisStreamingDestination", "UpdateTable",
    "UpdateTableReplicaAutoScaling", "UpdateTimeToLive",
})
STREAMS_OPERATIONS = frozenset({"DescribeStream", "GetRecords", "GetShardIterator", "ListStreams"})


# The reads that may be eventually consistent, answered from a replica where the engine has them (unless the
# request asks for ConsistentRead)
_EVENTUAL_READS = frozenset(b"DynamoDB_20120810." + name for name in (b"GetItem", b"Query", b"Scan", b"BatchGetItem"))


def _unsupported(operation: str) -> Handler:
    def handler(context: RequestContext, request: dict[str, Any]) -> dict[str, Any]:
        raise UnsupportedOperationException(operation)
    return handler


def _implemented() -> dict[bytes, dict[str, Handler]]:
    """This server's handlers, by target prefix and operation name."""
    table: dict[str, Handler] = {}
    for module in (tables, backups, tags, items, reads, batch, transactions, ttl, statements, batches,
                   partiql_transactions, resource_policies, search, contributor_insights):
        table.update(module.HANDLERS)
    return {TARGET_PREFIX: table, STREAMS_TARGET_PREFIX: dict(streams.HANDLERS)}


def implemented_operations() -> dict[str, frozenset[str]]:
    """The operations this server implements, by service ("dynamodb", "dynamodbstreams", botocore's names)."""
    handlers = _implemented()
    return {"dynamodb": frozenset(handlers[TARGET_PREFIX]),
            "dynamodbstreams": frozenset(handlers[STREAMS_TARGET_PREFIX])}


def _handlers() -> dict[bytes, Handler]:
    """Every X-Amz-Target DynamoDB (or DynamoDB Streams) answers, to its handler; an operation OpenDDB lacks gets
    one that says so. A target not here is unknown to DynamoDB too, and stays UnknownOperationException."""
    known = {TARGET_PREFIX: DYNAMODB_OPERATIONS, STREAMS_TARGET_PREFIX: STREAMS_OPERATIONS}
    routes: dict[bytes, Handler] = {}
    for prefix, handlers in _implemented().items():
        for name in known[prefix] | handlers.keys():
            routes[prefix + name.encode()] = handlers.get(name) or _unsupported(name)
    return routes


def _rewriters() -> dict[bytes, Rewriter]:
    return {TARGET_PREFIX + name.encode(): rewrite for name, rewrite in REWRITERS.items()}


# An Authorization header's part before its signature, checked -> its region and access key.
_CHECKED: dict[bytes, tuple[str, str]] = {}
_CHECKED_HEAD_MAX = 1024  # a real one is 150-300 bytes; longer ones are checked every time, not kept


def _scope_from(authorization: bytes) -> tuple[str, str]:
    """The region and access key of the SigV4 credential scope, once what needs no secret is checked: the header's
    form, the service, and that the host is among the signed headers (the signature itself: identity/sigv4.py)."""
    # Clients send the same credential scope and signed headers request after request, the signature alone
    # changing: a header whose part before ", Signature=" passed every check, and whose signature is one piece
    # (no space or comma), is answered from the cache.
    cut = authorization.rfind(b", Signature=")
    if cut > 0:
        head = authorization[:cut]
        scope = _CHECKED.get(head)
        if scope is not None and authorization.find(b" ", cut + 12) < 0 and authorization.find(b",", cut + 12) < 0:
            return scope  # (find, not `in`: see _ARN)
    scope = _parse_scope(authorization)
    _check_signed_headers(authorization)
    if 0 < cut <= _CHECKED_HEAD_MAX and len(_CHECKED) < 1024:
        _CHECKED[authorization[:cut]] = scope
    return scope


def _check_signed_headers(authorization: bytes) -> None:
    """InvalidSignatureException unless the host is a signed header (DynamoDB's words, quoted in aws-sdk-php issue
    2469 and laravel-dynamodb issue 18)."""
    start = authorization.find(b"SignedHeaders=") + 14
    end = authorization.find(b",", start)
    signed = authorization[start:] if end < 0 else authorization[start:end]
    names = signed.strip().lower().split(b";")
    if b"host" not in names and b":authority" not in names:
        raise InvalidSignatureException("'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.")


def _names_a_type(value: Any) -> bool:
    """Whether some JSON object in the request has a member "__type", which DynamoDB's deserializer reads as the
    name of the type to build (an attribute so named is refused: aws-sdk-js issue 1547)."""
    pending = [value]  # (a loop, not recursion: the JSON may nest as deep as the parser allows)
    while pending:
        current = pending.pop()
        if isinstance(current, dict):
            if "__type" in current:
                return True
            pending.extend(current.values())
        elif isinstance(current, list):
            pending.extend(current)
    return False


def _parse_scope(authorization: bytes) -> tuple[str, str]:
    if not authorization.startswith(b"AWS4-HMAC-SHA256"):
        raise IncompleteSignatureException(
            "Authorization header requires 'Credential' parameter. Authorization header requires "
            "'Signature' parameter. Authorization header requires 'SignedHeaders' parameter. "
            "Authorization=" + authorization.decode("latin-1"))
    match = CREDENTIAL.search(authorization)
    missing = [name for name in (b"Credential=", b"Signature=", b"SignedHeaders=") if name not in authorization]
    if not missing:  # every parameter there: each piece must be a key=value pair (the order is an inference)
        for token in _PARAMETER_SEPARATORS.split(authorization[16:]):  # after "AWS4-HMAC-SHA256"
            if token and b"=" not in token:  # (DynamoDB's words, quoted in fhir-works-on-aws-deployment issue 379)
                raise IncompleteSignatureException(
                    f"'{token.decode('latin-1')}' not a valid key=value pair (missing equal-sign) in Authorization "
                    f"header: '{authorization.decode('latin-1')}'.")
    if missing or match is None:
        parts = [f"Authorization header requires '{name[:-1].decode()}' parameter." for name in missing]
        if not parts:
            parts = ["Credential should be scoped to a valid region."]
        raise IncompleteSignatureException(" ".join(parts) + " Authorization=" + authorization.decode("latin-1"))
    if match.group(4) != b"dynamodb":  # (the scope needs no secret to check; DynamoDB's words, trailing space too)
        raise InvalidSignatureException("Credential should be scoped to correct service: 'dynamodb'. ")
    return match.group(3).decode("latin-1") or "us-east-1", match.group(1).decode("latin-1")


def _refused(record: RequestRecord, error: DynamoDBError, request: dict[str, Any] | None) -> None:
    """Note on the record how the call was refused: the error's type and the tables the request named."""
    record.error = type(error).__name__
    if error.extra and not record.throttled:  # (a throttle injected by --inject-errors: its reasons, for the metrics)
        record.throttled = throttled_by(error)
    if request is not None:
        record.tables = [table_name_from(name) for name in tables_named(request)]


# The root's identity policy, when it is checked against another account's resource policy.
_EVERYTHING = PolicySet((compiled('{"Version": "2012-10-17", "Statement": '
                                   '[{"Effect": "Allow", "Action": "*", "Resource": "*"}]}'),))
_ACCOUNT_IN_ARN = re.compile(rb'arn:aws:dynamodb:[^:"]*:([^:"]*):')


# (Looked for with find, not `in`: on CPython 3.11 `needle in data` first tries its operand as an integer, and
# formats and drops a TypeError, some 1,800 instructions, on every request.)
_ARN = b"arn:aws:dynamodb:"


def _names_other_account(body: bytes, account: str) -> bool:
    """Whether a request names (by ARN) a resource of an account other than `account`."""
    return body.find(_ARN) >= 0 and any(
        found.decode("latin-1") != account for found in _ACCOUNT_IN_ARN.findall(body))


_OPERATIONS: dict[bytes, str] = {}  # X-Amz-Target -> the operation's name, as records carry it


def _operation_of(target: bytes) -> str:
    name = _OPERATIONS.get(target)
    if name is None:
        name = target.rpartition(b".")[2].decode("latin-1") or "-"
        if len(_OPERATIONS) < 4096:
            _OPERATIONS[target] = name
    return name


class Dispatcher:
    """Turns (target, authorization, body) into (HTTP status, response body)."""

    def __init__(self, engine: Engine, account: str = "000000000000") -> None:
        self.engine = engine
        self.account = account
        self.verifier: Verifier | None = None  # checks signatures (`--auth verify`); None: any signature goes
        self.audit: AuditLog | None = None  # records control-plane changes and refused callers (`--audit-log`)
        self.faults: FaultInjector | None = None  # refuses a fraction of calls (`--inject-errors`)
        self.throttle: Throttle | None = None  # refuses calls past their tables' throughput (`--throttling on`)
        self.listeners: list[Listener] = []  # told of every request once answered (observe/record.py)
        self.secure = False  # every call comes over TLS (--tls-cert): aws:SecureTransport is true
        # Tables belong to the caller's account and region (--namespaces account-region), else to one namespace.
        self.namespaced = False
        # answers CloudWatch's calls in the AWS JSON protocol (set by the server, which holds the metrics)
        self.cloudwatch: Callable[[Incoming], tuple[int, bytes]] | None = None
        # Set by the server while it runs again the requests of a group commit that conflicted: they were observed
        # at their first run (once per request, not per attempt).
        self.replaying = False
        self._callers: dict[tuple[str, str], Caller] = {}  # (region, access key) -> its unverified Caller
        self._verified: dict[tuple[str, str], Caller] = {}  # (region, access key) -> its last verified Caller
        self.handlers = _handlers()
        self.rewriters = _rewriters()
        self.identity = IdentityService(lambda: self.engine, account)  # IAM and STS, and the keys they keep
        self._next_resume = 0.0  # when `run_background` next looks for index backfills to take up

    def handle(self, incoming: Incoming) -> tuple[int, bytes]:
        """One API call through its stages: route, authenticate, parse, authorize, execute, render, then
        observe: its record (observe/record.py) handed to every listener, once per request. The HTTP layer framed
        it before; the server sends the answer after."""
        target = incoming.target
        record = RequestRecord(_OPERATIONS.get(target) or _operation_of(target))
        started = time.perf_counter()
        status, payload = self._stages(incoming, record)
        if status and self.listeners and not self.replaying and record.operation:
            record.status = status
            record.latency = time.perf_counter() - started
            record.request_id = incoming.request_id
            record.client = incoming.peer
            record.response_bytes = len(payload)
            for listener in self.listeners:
                listener.observe(record)
        return status, payload

    def _stages(self, incoming: Incoming, record: RequestRecord) -> tuple[int, bytes]:
        request: dict[str, Any] | None = None
        caller: Caller | None = None
        try:
            handler = self.handlers.get(incoming.target)
            if handler is None:  # (an operation DynamoDB has but OpenDDB lacks has a handler: see _handlers)
                if incoming.target in QUERY_TARGETS:  # IAM or STS (routed by the HTTP layer: server/http.py)
                    record.operation = ""  # (not a DynamoDB call: not observed)
                    return self.identity.handle(incoming, self.verifier, self.audit)
                if self.cloudwatch is not None and incoming.target.startswith(CLOUDWATCH_TARGET):
                    record.operation = ""  # (CloudWatch's reads of the metrics: server/cloudwatch_wire.py)
                    return self.cloudwatch(incoming)
                raise UnknownOperationException()
            caller = self._authenticate(incoming)
            request = record.request = self._parse(incoming)
            record.access_key = caller.access_key
            if caller.namespace:
                record.namespace = caller.namespace
            identity = caller.identity  # (the account's root naming no ARN: nothing to evaluate, see access_of)
            access = None if identity is None or (identity.source == "root" and incoming.body.find(_ARN) < 0) \
                else self._authorize(caller, incoming, request)
            if self.faults is not None:
                self.faults.check(incoming.target, request, self.engine, caller)
            if self.throttle is not None:
                self.throttle.admit(record, request, self.engine, caller.namespace)
            if self.engine.replicated and incoming.target in _EVENTUAL_READS and not asks_consistency(request):
                response = self._execute_eventually(handler, caller, incoming, request, record, access)
            else:
                response = self._execute(handler, caller, incoming, request, record, access)
            record.response = response
            if not record.charges and self.listeners:  # (the control plane: the tables named, for the listeners)
                record.tables = [table_name_from(name) for name in tables_named(request)]
            if self.audit is not None and incoming.target in AUDITED:
                self.audit.record(incoming, caller, request)
            return 200, b"" if response is None else orjson.dumps(response)
        except DynamoDBError as error:
            # Refused before all its values were checked? A mis-shaped one anywhere wins, as in DynamoDB.
            if request is not None and isinstance(error, ValidationException | ResourceNotFoundException):
                error = attribute_value_error(request) or error
            _refused(record, error, request)
            if self.audit is not None and (caller is None or incoming.target in AUDITED
                                           or isinstance(error, AccessDeniedException)):
                # (refused by authentication or authorization, or a change)
                self.audit.record(incoming, caller, request, error)
            return error.status, orjson.dumps(error.to_wire())
        except EngineBusy:
            return 0, b""  # nothing happened: the server runs the request again shortly
        except Exception as error:
            if self.engine.unavailable(error):  # (nothing of the request was kept: the client may send it again)
                unavailable = ServiceUnavailable()
                return unavailable.status, orjson.dumps(unavailable.to_wire())
            log.exception("internal error handling %s", incoming.target.decode("latin-1"))
            failure = InternalServerError("Internal server error")
            _refused(record, failure, request)
            return failure.status, orjson.dumps(failure.to_wire())

    def _authenticate(self, incoming: Incoming) -> Caller:
        """Who calls: the Authorization header checked (its form and scope always; with a verifier, its
        signature too), in DynamoDB's order, the body size after it."""
        authorization = incoming.authorization
        if authorization is None:
            raise MissingAuthenticationTokenException()
        scope = _scope_from(authorization)
        if self.verifier is not None:
            if incoming.signed is None:
                raise MissingAuthenticationTokenException()  # (a caller that kept back what was signed)
            credentials = self.verifier.verify(authorization, incoming.signed)
            if incoming.too_large:
                raise RequestEntityTooLargeException("Request payload size exceeds the limit")
            verified = self._verified.get(scope)
            if verified is None or verified.identity is not credentials:  # (kept while its credentials are)
                verified = self._verified_caller(scope, credentials)
            return verified
        if incoming.too_large:
            raise RequestEntityTooLargeException("Request payload size exceeds the limit")
        caller = self._callers.get(scope)  # (unverified callers are their scope: made once, not per request)
        if caller is None:
            if len(self._callers) > 1024:
                self._callers.clear()
            caller = self._callers[scope] = Caller(scope[0], self.account, scope[1], None, None,
                                                   f"{self.account}/{scope[0]}/" if self.namespaced else "")
        return caller

    def _verified_caller(self, scope: tuple[str, str], credentials: Credentials) -> Caller:
        """The Caller of verified `credentials` in the region of `scope`, kept for the next request with both."""
        region, account = scope[0], credentials.account
        if len(self._verified) > 1024:
            self._verified.clear()
        caller = self._verified[scope] = Caller(region, account, scope[1], credentials.arn, credentials,
                                                f"{account}/{region}/" if self.namespaced else "")
        return caller

    def namespace_of(self, authorization: bytes | None) -> str:
        """The namespace of a CloudWatch caller (whose calls the server answers without authenticating them): its
        credential scope's region and its access key's account ("" in one namespace; for a key the server does not
        know, one no table is in)."""
        if not self.namespaced:
            return ""
        match = None if authorization is None else CREDENTIAL.search(authorization)
        if match is None:
            return "-/-/"
        key, region = match.group(1).decode("latin-1"), match.group(3).decode("latin-1") or "us-east-1"
        if self.verifier is None:
            return f"{self.account}/{region}/"
        credentials = self.verifier.credentials(key)
        return "-/-/" if credentials is None else f"{credentials.account}/{region}/"

    def _authorize(self, caller: Caller, incoming: Incoming, request: dict[str, Any]) -> Access | None:
        """A verified caller's authorization (None for the account's root, which may do anything): a call on
        tables, streams or the account decided here, a call on items handed on for its operations to be checked
        (identity/access.py)."""
        access = self.access_of(caller, incoming, request)
        if access is not None:
            access.authorize(incoming.target.partition(b".")[2].decode(), request)
        return access

    def authenticate(self, incoming: Incoming) -> Caller:
        """Who sends `incoming` (a request that is no API call: the advisor's report), authenticated as an API call
        is: DynamoDB's errors for a header missing, malformed, scoped to another service or wrongly signed."""
        return self._authenticate(incoming)

    def access_of(self, caller: Caller, incoming: Incoming, request: dict[str, Any] | None = None) -> Access | None:
        """What a verified caller's policies allow, to be asked of each action and resource (None for the account's
        root acting in its own account, which may do anything)."""
        identity = caller.identity
        assert identity is not None
        if identity.source != "root":
            policies = self.identity.store.policies(identity)
        elif self.namespaced and _names_other_account(incoming.body, identity.account):
            policies = _EVERYTHING  # (the root may do anything in its account; another's must let it in)
        else:
            return None
        context = principal_context(identity, clock.now(), incoming.peer, caller.region, self.secure)
        return Access(identity, policies, context, caller.region, request or {}, self._resource_statements,
                      self.namespaced)

    def _resource_statements(self, resource: str) -> tuple[Statement, ...]:
        """The statements of the resource-based policy governing `resource` (none: it has none)."""
        return statements_of(self.engine, resource, self.namespaced)

    @staticmethod
    def _parse(incoming: Incoming) -> dict[str, Any]:
        """The body as a JSON object, or DynamoDB's SerializationException."""
        body = incoming.body
        try:
            request = orjson.loads(body) if body else {}
        except orjson.JSONDecodeError:
            raise SerializationException() from None
        if not isinstance(request, dict):
            raise SerializationException("Start of list found where not expected"
                                         if isinstance(request, list) else None)
        # (the text may come escaped, \u005f_type: any escape sends the request through the search)
        if (body.find(b'type"') >= 0 or body.find(b"\\u") >= 0) and _names_a_type(request):  # (find: see _ARN)
            raise SerializationException("No assembly name on stack!")
        return request

    def _execute(self, handler: Handler, caller: Caller, incoming: Incoming, request: dict[str, Any],
                 record: RequestRecord, access: Access | None = None) -> dict[str, Any] | None:
        """The handler's answer (legacy parameters rewritten first); a call that met a catalog change before it
        wrote anything runs again, as attempts of one request."""
        rewrite = self.rewriters.get(incoming.target)
        given, legacy = (request, None) if rewrite is None else rewrite(request)
        REQUEST_BYTES.set(len(incoming.body))
        request_id = incoming.request_id.decode()
        namespace = caller.namespace
        for attempt in range(_CATALOG_ATTEMPTS):
            context = RequestContext(self.engine, record, caller.region, caller.account, request_id,
                                     host=incoming.host, legacy=legacy, access=access, namespace=namespace)
            record.attempts = attempt + 1
            try:
                response = handler(context, given)
                break
            except CatalogChanged:  # nothing was written: run again on the fresh table description
                record.charges.clear()
                if attempt == _CATALOG_ATTEMPTS - 1:
                    raise
                if attempt:  # changes racing on one table: a little jitter lets the queue drain
                    time.sleep(random.uniform(0, 0.002 * attempt))
        if response is not None and context.arns is not None:
            response = as_requested(response, context.arns)
        return response

    def _execute_eventually(self, handler: Handler, caller: Caller, incoming: Incoming, request: dict[str, Any],
                            record: RequestRecord, access: Access | None) -> dict[str, Any] | None:
        """`_execute` for a read that may be eventually consistent: the engine may answer it from a replica."""
        self.engine.eventual_reads = True
        try:
            return self._execute(handler, caller, incoming, request, record, access)
        finally:
            self.engine.eventual_reads = False

    def run_background(self) -> None:
        """The store's background duties (TTL expiry; index backfills a restart cut short and tables whose delayed
        deletion is over, at start and then every RESUME_SECONDS), for the server to call about once a second,
        between event-loop passes that left no group of writes open."""
        now = clock.now()
        try:
            resume = now >= self._next_resume
            if resume:
                self._next_resume = now + RESUME_SECONDS
                self._duty("resuming index backfills", indexes.resume_backfills, self.engine,
                           updates.resume_vector_backfills)
                self._duty("finishing table deletions", transient.finish_deletions, self.engine)
                self._duty("dropping abandoned export snapshots", backups_export_runs.drop_abandoned_snapshots,
                           self.engine)
                self._duty("resuming exports", backups_export_runs.resume_exports, self.engine)
                self._duty("resuming imports", backups_import_runs.resume_imports, self.engine)
                self._duty("resuming backups", backups_runs.resume_backups, self.engine)
            # (this process's restores each round; on a resume round any, as a restart or another process left them)
            self._duty("finishing restores", backups_restore.finish_restores, self.engine, resume)
            self._duty("recovery log upkeep", backups_continuous.trim_recovery_logs, self.engine, now)
            self._duty("TTL sweep", ttl.sweep, self.engine, now)
            self._duty("stream upkeep", self._maintain_streams, now)
            self._duty("disk reserve", self.engine.keep_reserve)
        finally:
            self.engine.end_reads()  # no read snapshot may outlive the duty (it would hold back checkpoints)

    def _maintain_streams(self, now: float) -> None:
        """Shard rollover and retention, by one process of those sharing the store at a time."""
        engine = self.engine
        if not engine.list_streams():
            return
        if engine.try_lease("streams", lease_holder(), STREAM_LEASE_SECONDS, time.time()):
            engine.maintain_streams(now)

    def _duty(self, what: str, duty: Callable[..., object], *args: Any) -> None:
        """Run one background duty; its failure is logged and leaves the others to run."""
        try:
            duty(*args)
        except CatalogChanged:
            pass  # a table changed under the duty: its next round looks again
        except Exception as error:
            if self.engine.unavailable(error):
                return  # (the disk is full: said once, by the engine; the duty runs again when there is room)
            log.exception("%s failed", what)
