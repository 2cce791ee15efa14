"""The STS subset: GetCallerIdentity, GetSessionToken and AssumeRole (STS API Reference, version 2011-06-15;
shapes from botocore's `sts` service model). Temporary credentials (ASIA... key id, secret, session token,
expiry) are stored with the identity records, so every worker and node accepts them until they expire.
"""

from __future__ import annotations

import base64
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from openddb.identity.access import principal_context
from openddb.identity.iam import IamCall, Result, new_id, new_secret
from openddb.identity.policies import trusts
from openddb.identity.query import SESSION_NAME_PATTERN, QueryError, timestamp
from openddb.identity.sigv4 import Source
from openddb.identity.store import Doc, entity_name

# DurationSeconds (STS API Reference): GetSessionToken 900 s to 129,600 s (36 hours), 43,200 s by default, and for
# the root at most 3,600 s (a longer request gets one hour); AssumeRole 900 s up to the role's MaxSessionDuration,
# 3,600 s by default, and one hour at most for a role assumed with a role's credentials (role chaining).
SESSION_TOKEN_SECONDS = (900, 129600, 43200)
ROOT_SESSION_SECONDS = 3600
ASSUME_ROLE_SECONDS = (900, 43200, 3600)
CHAINED_ROLE_SECONDS = 3600
# A role's ARN: its account, then its path and name (IAM User Guide, "IAM identifiers")
_ROLE_ARN = re.compile(r"arn:aws:iam::(\d{12}):role/(?:[^/]+/)*[^/]+")


def get_caller_identity(call: IamCall) -> Result:
    caller = call.caller
    return {"UserId": caller.user_id or call.account, "Account": caller.account, "Arn": caller.arn}


@dataclass(frozen=True)
class _Session:
    """What temporary credentials stand for."""

    arn: str
    user_id: str
    source: Source
    role: str | None = None


def _issue(call: IamCall, session: _Session, seconds: int, account: str | None = None) -> dict[str, str]:
    """New temporary credentials for `session` in `account` (None: the caller's), stored, as STS's Credentials
    shape."""
    key_id, secret = new_id("ASIA", 20), new_secret()
    token = base64.b64encode(secrets.token_bytes(240)).decode()
    expires = int(call.now) + seconds
    record = {"secret": secret, "token": token, "expires": expires, "account": account or call.account,
              "arn": session.arn,
              "user_id": session.user_id, "source": session.source, "role": session.role, "created": call.now}
    call.store.write([("session", key_id, lambda old: record)])
    return {"AccessKeyId": key_id, "SecretAccessKey": secret, "SessionToken": token,
            "Expiration": timestamp(expires)}


def get_session_token(call: IamCall) -> Result:
    caller = call.caller
    low, high, default = SESSION_TOKEN_SECONDS
    seconds = call.action.number("DurationSeconds", low, high) or default
    if caller.token is not None:  # (STS's words)
        raise QueryError("AccessDenied", "Cannot call GetSessionToken with session credentials", 403)
    if caller.source == "root":
        seconds = min(seconds, ROOT_SESSION_SECONDS)
    session = _Session(caller.arn, caller.user_id or call.account, caller.source)
    return {"Credentials": _issue(call, session, seconds)}


def assume_role(call: IamCall, verified: bool) -> Result:
    """AssumeRole: the role's trust policy must name the caller (its ARN, an assumed role's role ARN, "*", or its
    account) as principal, and no identity policy of the caller may deny sts:AssumeRole on the role. Trust
    policies are an exception to the rule that either an identity or a resource-based policy suffices within an
    account (IAM User Guide, "Policy evaluation logic": "IAM role trust policies and KMS key policies are exceptions
    to this logic, because they must explicitly allow access for principals"): a trust policy naming the caller
    itself is enough in its own account, one naming only the account delegates the decision to the account's
    identity policies, so the caller's must then allow sts:AssumeRole on the role too. A role of another account,
    besides, only as the caller's identity policies allow it ("Cross-account policy evaluation logic": the
    trusting account's resource-based policy, here the trust policy, and the trusted account's identity-based
    policy must both allow). The session then acts in the role's account."""
    action, caller = call.action, call.caller
    role_arn = action.text("RoleArn", required=True, low=20, high=2048)
    session_name = action.text("RoleSessionName", required=True, low=2, high=64, pattern=SESSION_NAME_PATTERN)
    low, high, default = ASSUME_ROLE_SECONDS
    asked = action.number("DurationSeconds", low, high)
    assert role_arn is not None and session_name is not None
    if verified and caller.source == "root":  # (STS's words; with --auth off every caller is the root)
        raise QueryError("AccessDenied", "Roles may not be assumed by root accounts.", 403)
    role, account = _trusting_role(call, role_arn, verified)
    seconds = default if asked is None else asked
    if caller.source == "role" and seconds > CHAINED_ROLE_SECONDS:  # (STS's words)
        raise QueryError("ValidationError", "The requested DurationSeconds exceeds the 1 hour session limit for "
                         "roles assumed by role chaining.")
    if seconds > role["MaxSessionDuration"]:  # (STS's words)
        raise QueryError("ValidationError", "The requested DurationSeconds exceeds the MaxSessionDuration set for "
                         "this role.")
    assumed_id = f"{role['RoleId']}:{session_name}"
    assumed_arn = f"arn:aws:sts::{account}:assumed-role/{role['RoleName']}/{session_name}"
    credentials = _issue(call, _Session(assumed_arn, assumed_id, "role", role["RoleName"]), seconds, account)
    return {"Credentials": credentials, "AssumedRoleUser": {"AssumedRoleId": assumed_id, "Arn": assumed_arn}}


def _trusting_role(call: IamCall, role_arn: str, verified: bool) -> tuple[Doc, str]:
    """The role `role_arn` names and its account, if the caller may assume it; else STS's AccessDenied (the same
    for a role that does not exist, as STS does not tell)."""
    caller = call.caller
    denied = QueryError("AccessDenied", f"User: {caller.arn} is not authorized to perform: sts:AssumeRole on "
                        f"resource: {role_arn}", 403)  # (STS's words)
    match = _ROLE_ARN.fullmatch(role_arn)
    account = call.account if match is None else match.group(1)
    role = None if match is None else call.store.get("role", entity_name(account, role_arn.rpartition("/")[2]))
    if role is None or role["Arn"] != role_arn:
        raise denied
    context = principal_context(caller, call.now, "", "us-east-1", call.secure)
    names = (caller.arn, *context.get("aws:principalarn", ()))
    trusted = trusts(role["AssumeRolePolicyDocument"], caller.account, names, context)
    if trusted is None:
        raise denied
    if verified:  # (with --auth off every caller is the root, and asks no identity policy)
        own = call.store.policies(caller).decide("sts:AssumeRole", role_arn, context)
        if own == "deny" or (own != "allow" and (account != caller.account or trusted == "account")):
            raise denied
    return role, account


def sts_actions(verified: bool) -> dict[str, Callable[[IamCall], Result]]:
    return {"GetCallerIdentity": get_caller_identity, "GetSessionToken": get_session_token,
            "AssumeRole": lambda call: assume_role(call, verified)}

