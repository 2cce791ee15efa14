"""The IAM and STS front end on DynamoDB's port: a form-encoded POST whose SigV4 credential scope names the service
`iam` or `sts` (the HTTP layer routes it here, server/http.py) is authenticated, its Action found, authorized,
run and answered in the Query protocol's XML, so boto3's `iam` and `sts` clients and `aws iam`/`aws sts` work
against the same endpoint.

Authentication follows the server's `--auth`: with `verify`, the signature is checked by the same verifier as
DynamoDB's calls (errors in IAM's and STS's own codes: InvalidClientTokenId, SignatureDoesNotMatch,
ExpiredToken); with `off`, every caller is the root of the account. Authorization of IAM actions: the root may
do anything; a user or an assumed role what its inline policies allow (an explicit Deny wins, default deny).
STS actions are not authorized here: AssumeRole asks the role's trust policy and, as IAM does, the caller's
identity policies (identity/sts.py).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from openddb import clock
from openddb.errors import (
    DynamoDBError,
    ExpiredTokenException,
    IncompleteSignatureException,
    InvalidSignatureException,
    UnrecognizedClientException,
)
from openddb.identity.access import principal_context
from openddb.identity.audit import AuditLog
from openddb.identity.iam import IAM_ACTIONS, IamCall, Result
from openddb.identity.policies import decide
from openddb.identity.query import (
    IAM_NAMESPACE,
    STS_NAMESPACE,
    Action,
    QueryError,
    parse_form,
    render_error,
    render_result,
)
from openddb.identity.sigv4 import Credentials, Verifier
from openddb.identity.store import IdentityStore
from openddb.identity.sts import sts_actions
from openddb.storage.base import CatalogChanged, Engine, EngineBusy

if TYPE_CHECKING:
    from openddb.api.incoming import Incoming

# What the HTTP layer puts in place of X-Amz-Target for an IAM or STS call (no DynamoDB target looks like these).
IAM_TARGET = b"openddb:iam"
STS_TARGET = b"openddb:sts"
QUERY_TARGETS = frozenset({IAM_TARGET, STS_TARGET})
FORM_TYPE = b"application/x-www-form-urlencoded"
_SCOPE_SERVICE = re.compile(rb"Credential=[^/,\s]*/\d{8}/[^/,\s]*/([^/,\s]*)/aws4_request")
_ATTEMPTS = 5
# The calls the audit log records (CloudTrail's management events of IAM and STS that change something or hand out
# credentials; reads such as GetUser, ListUsers and GetCallerIdentity are left out, as DynamoDB's reads are).
AUDITED_ACTIONS = frozenset({"CreateUser", "DeleteUser", "CreateAccessKey", "DeleteAccessKey", "PutUserPolicy",
                             "DeleteUserPolicy", "CreateRole", "DeleteRole", "PutRolePolicy", "DeleteRolePolicy",
                             "GetSessionToken", "AssumeRole"})
log = logging.getLogger("openddb.identity")


def query_target(authorization: bytes | None) -> bytes | None:
    """IAM_TARGET or STS_TARGET for a form-encoded POST signed for service `iam` or `sts`; None for any other."""
    if authorization is None:
        return None
    match = _SCOPE_SERVICE.search(authorization)
    service = None if match is None else match.group(1)
    return IAM_TARGET if service == b"iam" else STS_TARGET if service == b"sts" else None


def as_query_error(error: DynamoDBError) -> QueryError:
    """An authentication refusal in IAM's and STS's codes (their messages are DynamoDB's words, but for the
    invalid token's final period)."""
    message = error.message or ""
    if isinstance(error, UnrecognizedClientException):
        return QueryError("InvalidClientTokenId", "The security token included in the request is invalid.", 403)
    if isinstance(error, ExpiredTokenException):
        return QueryError("ExpiredToken", message, 400)
    if isinstance(error, InvalidSignatureException):
        return QueryError("SignatureDoesNotMatch", message, 403)
    if isinstance(error, IncompleteSignatureException):
        return QueryError("IncompleteSignature", message, 400)
    return QueryError("MissingAuthenticationToken", "Request is missing Authentication Token", 403)


def _action_of(body: bytes) -> str:
    """The Action a form body names ("" if none can be read)."""
    try:
        return parse_form(body).get("Action", "")
    except QueryError:
        return ""


class IdentityService:
    """IAM and STS over the store the dispatcher's engine holds: each call acts in its caller's account (with --auth
    off every caller is the root of `account`)."""

    def __init__(self, engine_of: Callable[[], Engine], account: str) -> None:
        self.store = IdentityStore(engine_of)
        self.account = account
        self.root = Credentials("", "", account, f"arn:aws:iam::{account}:root", account)
        self.secure = False  # every call comes over TLS (--tls-cert): aws:SecureTransport is true

    def handle(self, incoming: Incoming, verifier: Verifier | None, audit: AuditLog | None = None) -> tuple[int, bytes]:
        """(status, XML) for one IAM or STS call; with `audit`, changes and refused callers are recorded."""
        iam = incoming.target == IAM_TARGET
        namespace = IAM_NAMESPACE if iam else STS_NAMESPACE
        request_id = incoming.request_id.decode("latin-1")  # (the x-amzn-RequestId header's too)
        caller: Credentials | None = None
        name, params = "", {}
        try:
            caller = self._caller(incoming, verifier)
            if incoming.too_large:  # best guess: IAM's answer to a body past the server's limit
                raise QueryError("RequestEntityTooLarge", "Request payload size exceeds the limit", 413)
            params = parse_form(incoming.body)
            name = params.pop("Action", "")
            version = params.pop("Version", "")
            actions = IAM_ACTIONS if iam else sts_actions(verifier is not None)
            handler = actions.get(name)
            if handler is None:  # best guess at the words (the code is the Query protocol's)
                raise QueryError("InvalidAction", f"Could not find operation {name} for version {version}")
            call = IamCall(self.store, caller.account, caller, clock.now(), Action(name, params), self.secure)
            if iam:
                self._authorize(call, incoming.peer)
            answer = render_result(name, namespace, self._run(handler, call), request_id)
            if audit is not None and name in AUDITED_ACTIONS:
                audit.record_identity(incoming, "iam" if iam else "sts", name, caller, params)
            return 200, answer
        except QueryError as error:
            if audit is not None and (caller is None or name in AUDITED_ACTIONS):
                name = name or _action_of(incoming.body)  # (a caller refused before the body was read)
                audit.record_identity(incoming, "iam" if iam else "sts", name, caller, params,
                                      (error.code, error.message))
            return error.status, render_error(error, namespace, request_id)
        except EngineBusy:
            raise  # (the server runs the request again shortly)
        except Exception as error:
            if self.store.engine_of().unavailable(error):
                raise  # (the dispatcher answers as for any call the store cannot take now)
            log.exception("internal error handling %s", incoming.target.decode("latin-1"))
            failure = QueryError("ServiceFailure", "Request processing has failed due to an unknown error, "
                                 "exception or failure.", 500, sender=False)  # (IAM's words for ServiceFailure)
            return failure.status, render_error(failure, namespace, request_id)

    def _caller(self, incoming: Incoming, verifier: Verifier | None) -> Credentials:
        if verifier is None:
            return self.root
        authorization = incoming.authorization
        try:
            if authorization is None or incoming.signed is None:
                raise UnrecognizedClientException()
            if not authorization.startswith(b"AWS4-HMAC-SHA256 "):
                raise IncompleteSignatureException("Authorization header requires 'Credential' parameter.")
            return verifier.verify(authorization, incoming.signed)
        except DynamoDBError as error:
            raise as_query_error(error) from None

    def _authorize(self, call: IamCall, peer: str) -> None:
        """AccessDenied unless the caller may run this IAM action: the root always; a user or an assumed role if
        its inline policies allow it (IAM's words for a refusal)."""
        caller = call.caller
        if caller.source == "root":
            return
        operation = f"iam:{call.action.name}"
        resource = self._resource(call)
        context = principal_context(caller, call.now, peer, "us-east-1", call.secure)  # (IAM is global: us-east-1)
        decision = decide(call.store.policies(caller), operation, resource, context)
        if decision == "allow":
            return
        reason = "with an explicit deny in an identity-based policy" if decision == "deny" else \
            f"because no identity-based policy allows the {operation} action"
        raise QueryError("AccessDenied", f"User: {caller.arn} is not authorized to perform: {operation} on "
                         f"resource: {resource} {reason}", 403)

    @staticmethod
    def _resource(call: IamCall) -> str:
        params = call.action.params
        if "RoleName" in params:
            return f"arn:aws:iam::{call.account}:role/{params['RoleName']}"
        name = params.get("UserName")
        if name is None and call.caller.source == "user":
            return call.caller.arn
        return f"arn:aws:iam::{call.account}:user/{name or ''}"

    @staticmethod
    def _run(handler: Callable[[IamCall], Result], call: IamCall) -> Result:
        """The handler's answer; a call that met a catalog change (the identity table made by another worker
        meanwhile) runs again."""
        for attempt in range(_ATTEMPTS):
            try:
                return handler(call)
            except CatalogChanged:
                if attempt == _ATTEMPTS - 1:
                    raise
        return None
