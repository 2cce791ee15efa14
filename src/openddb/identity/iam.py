"""The IAM subset: users, their access keys and inline policies, roles with a trust policy and inline policies
(IAM API Reference, version 2010-05-08; shapes and error codes from botocore's `iam` service model).

Each handler reads and validates its parameters, then changes the store in one engine write whose changes
re-check what they depend on (a user that must exist, a name that must be free, the number of keys), so two
workers' calls cannot both succeed where one must fail. Messages are IAM's where they are public (cited), else
marked best guess.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from openddb.identity.policy_documents import size_without_whitespace, statements
from openddb.identity.query import (
    ACCESS_KEY_PATTERN,
    NAME_PATTERN,
    PATH_PATTERN,
    PATH_PREFIX_PATTERN,
    POLICY_PATTERN,
    Action,
    QueryError,
    Value,
    timestamp,
)
from openddb.identity.sigv4 import Credentials
from openddb.identity.store import Doc, IdentityStore, entity_name

Result = Mapping[str, Value | None] | None
# IAM quotas (IAM User Guide, "IAM and AWS STS quotas"): access keys per user; the aggregate size of a user's and of
# a role's inline policies, white space not counted; a role's trust policy.
ACCESS_KEYS_PER_USER = 2
USER_POLICY_BYTES = 2048
ROLE_POLICY_BYTES = 10240
TRUST_POLICY_BYTES = 2048
_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"  # (IAM's ids and access key ids: upper case and digits 2-7)


def new_id(prefix: str, length: int) -> str:
    """An IAM-style id: its prefix (AIDA user, AROA role, AKIA access key, ASIA temporary key) and random
    characters, `length` in all (user and role ids 21, access key ids 20)."""
    return prefix + "".join(secrets.choice(_ID_ALPHABET) for _ in range(length - len(prefix)))


def new_secret() -> str:
    """A 40-character secret access key."""
    return secrets.token_urlsafe(30).replace("-", "+").replace("_", "/")


@dataclass(frozen=True)
class IamCall:
    store: IdentityStore
    account: str
    caller: Credentials
    now: float
    action: Action
    secure: bool = False  # the call came over TLS (aws:SecureTransport)


def _no_user(name: str) -> QueryError:
    return QueryError("NoSuchEntity", f"The user with name {name} cannot be found.", 404)  # (IAM's words)


def _no_role(name: str) -> QueryError:
    return QueryError("NoSuchEntity", f"The role with name {name} cannot be found.", 404)  # (IAM's words)


def _user_shape(user: Doc) -> dict[str, Value | None]:
    return {"Path": user["Path"], "UserName": user["UserName"], "UserId": user["UserId"], "Arn": user["Arn"],
            "CreateDate": timestamp(user["CreateDate"])}


def _role_shape(role: Doc) -> dict[str, Value | None]:
    # (documents travel URL-encoded, as IAM sends them: botocore decodes them for boto3's iam client)
    return {"Path": role["Path"], "RoleName": role["RoleName"], "RoleId": role["RoleId"], "Arn": role["Arn"],
            "CreateDate": timestamp(role["CreateDate"]),
            "AssumeRolePolicyDocument": _encoded(role["AssumeRolePolicyDocument"]),
            "Description": role.get("Description"), "MaxSessionDuration": role["MaxSessionDuration"]}


def _encoded(document: str) -> str:
    return quote(document, safe="")


def _user_name(call: IamCall, required: bool = True) -> str:
    """The UserName member; absent where allowed, the calling user's name."""
    name = call.action.text("UserName", required=required, high=128, pattern=NAME_PATTERN)
    if name is not None:
        return name
    if call.caller.source != "user":
        # best guess: IAM's words when an assumed role omits UserName; the root is held to it too here
        raise QueryError("ValidationError", "Must specify userName when calling with non-User credentials")
    return call.caller.arn.rpartition("/")[2]


def _entity(call: IamCall, name: str) -> str:
    """The store's name of a user or role of the caller's account (IAM compares names case-insensitively)."""
    return entity_name(call.account, name)


def _existing(doc: Doc | None, missing: QueryError) -> Doc:
    if doc is None:
        raise missing
    return doc


# --- users ---------------------------------------------------------------------------------------------------------
def create_user(call: IamCall) -> Result:
    action = call.action
    name = action.text("UserName", required=True, high=64, pattern=NAME_PATTERN)
    path = action.text("Path", high=512, pattern=PATH_PATTERN) or "/"
    assert name is not None
    user = {"UserName": name, "Path": path, "UserId": new_id("AIDA", 21),
            "Arn": f"arn:aws:iam::{call.account}:user{path}{name}", "CreateDate": call.now, "keys": [],
            "policies": {}}

    def create(old: Doc | None) -> Doc:
        if old is not None:
            raise QueryError("EntityAlreadyExists", f"User with name {name} already exists.", 409)  # (IAM's words)
        return user
    # (IAM compares user names case-insensitively: the record is kept under the lower-case name)
    call.store.write([("user", _entity(call, name), create)])
    return {"User": _user_shape(user)}


def get_user(call: IamCall) -> Result:
    name = call.action.text("UserName", high=128, pattern=NAME_PATTERN)
    if name is None and call.caller.source == "root":
        # (the root's own: no name or path; its creation date is not known here, so none is given)
        return {"User": {"UserId": call.account, "Arn": call.caller.arn}}
    name = name or _user_name(call, required=False)  # (a user asking for itself: IAM names it from the key)
    return {"User": _user_shape(_existing(call.store.get("user", _entity(call, name)), _no_user(name)))}


def delete_user(call: IamCall) -> Result:
    name = _user_name(call)

    def delete(old: Doc | None) -> None:
        user = _existing(old, _no_user(name))
        if user["keys"]:
            raise QueryError("DeleteConflict", "Cannot delete entity, must delete access keys first.", 409)
        if user["policies"]:  # (IAM's words for both, as reported from DeleteUser answers)
            raise QueryError("DeleteConflict", "Cannot delete entity, must delete policies first.", 409)
    call.store.write([("user", _entity(call, name), delete)])
    return None


def _page(call: IamCall, items: list[Any], key: Callable[[Any], str]) -> tuple[list[Any], dict[str, Value]]:
    """One page of a listing (MaxItems, default 100; Marker: the key of the last item of the page before)."""
    limit = call.action.number("MaxItems", 1, 1000) or 100
    marker = call.action.text("Marker", high=320)
    if marker is not None:
        items = [item for item in items if key(item) > marker]
    page = items[:limit]
    more: dict[str, Value] = {"IsTruncated": len(items) > limit}
    if len(items) > limit:
        more["Marker"] = key(page[-1])
    return page, more


def list_users(call: IamCall) -> Result:
    prefix = call.action.text("PathPrefix", high=512, pattern=PATH_PREFIX_PATTERN) or "/"
    users = [user for user in call.store.records("user")
             if user["Path"].startswith(prefix) and user["Arn"].split(":", 5)[4] == call.account]
    page, more = _page(call, users, lambda user: str(user["UserName"]).lower())
    return {"Users": [_user_shape(user) for user in page], **more}


# --- access keys ---------------------------------------------------------------------------------------------------
def create_access_key(call: IamCall) -> Result:
    name = _user_name(call, required=False)
    key_id, secret = new_id("AKIA", 20), new_secret()
    made: dict[str, Doc] = {}

    def add(old: Doc | None) -> Doc:
        user = _existing(old, _no_user(name))
        if len(user["keys"]) >= ACCESS_KEYS_PER_USER:  # (IAM's words)
            raise QueryError("LimitExceeded", f"Cannot exceed quota for AccessKeysPerUser: {ACCESS_KEYS_PER_USER}",
                             409)
        made["user"] = user
        return {**user, "keys": [*user["keys"], key_id]}

    def store(old: Doc | None) -> Doc:
        user = made["user"]
        return {"user": user["UserName"], "secret": secret, "account": call.account, "arn": user["Arn"],
                "user_id": user["UserId"], "source": "user", "created": call.now}
    call.store.write([("user", _entity(call, name), add), ("key", key_id, store)])
    return {"AccessKey": {"UserName": made["user"]["UserName"], "AccessKeyId": key_id, "Status": "Active",
                          "SecretAccessKey": secret, "CreateDate": timestamp(call.now)}}


def delete_access_key(call: IamCall) -> Result:
    name = _user_name(call, required=False)
    key_id = call.action.text("AccessKeyId", required=True, low=16, high=128, pattern=ACCESS_KEY_PATTERN)
    assert key_id is not None
    missing = QueryError("NoSuchEntity", f"The Access Key with id {key_id} cannot be found.", 404)  # (IAM's words)

    def remove(old: Doc | None) -> Doc:
        user = _existing(old, _no_user(name))
        if key_id not in user["keys"]:
            raise missing
        return {**user, "keys": [key for key in user["keys"] if key != key_id]}
    call.store.write([("user", _entity(call, name), remove), ("key", key_id, lambda old: None)])
    call.store.forget(key_id)
    return None


def list_access_keys(call: IamCall) -> Result:
    name = _user_name(call, required=False)
    user = _existing(call.store.get("user", _entity(call, name)), _no_user(name))
    keys = [key for key in (call.store.get("key", key_id) for key_id in user["keys"]) if key is not None]
    page, more = _page(call, sorted(user["keys"]), lambda key_id: str(key_id))
    created = {key_id: key["created"] for key_id, key in zip(user["keys"], keys, strict=False)}
    return {"AccessKeyMetadata": [{"UserName": user["UserName"], "AccessKeyId": key_id, "Status": "Active",
                                   "CreateDate": timestamp(created.get(key_id, call.now))} for key_id in page],
            **more}


# --- inline policies of users and roles ----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Holder:
    """Users and roles hold inline policies alike: what differs between them."""

    kind: Literal["user", "role"]
    member: str  # UserName or RoleName
    high: int  # the name's length limit
    quota: int  # the aggregate size of its policies
    missing: Callable[[str], QueryError]


_USER = _Holder("user", "UserName", 128, USER_POLICY_BYTES, _no_user)
_ROLE = _Holder("role", "RoleName", 64, ROLE_POLICY_BYTES, _no_role)


def _holder_name(call: IamCall, holder: _Holder) -> str:
    name = call.action.text(holder.member, required=True, high=holder.high, pattern=NAME_PATTERN)
    assert name is not None
    return name


def _policy_name(call: IamCall) -> str:
    name = call.action.text("PolicyName", required=True, high=128, pattern=NAME_PATTERN)
    assert name is not None
    return name


def _no_policy(holder: _Holder, policy: str) -> QueryError:
    return QueryError("NoSuchEntity", f"The {holder.kind} policy with name {policy} cannot be found.", 404)


def put_policy(call: IamCall, holder: _Holder) -> Result:
    name, policy = _holder_name(call, holder), _policy_name(call)
    document = call.action.text("PolicyDocument", required=True, high=131072, pattern=POLICY_PATTERN)
    assert document is not None
    statements(document, "identity")

    def put(old: Doc | None) -> Doc:
        entity = _existing(old, holder.missing(name))
        policies = {**entity["policies"], policy: document}
        if sum(size_without_whitespace(text) for text in policies.values()) > holder.quota:  # (IAM's words)
            raise QueryError("LimitExceeded", f"Maximum policy size of {holder.quota} bytes exceeded for "
                             f"{holder.kind} {name}", 409)
        return {**entity, "policies": policies}
    call.store.write([(holder.kind, _entity(call, name), put)])
    call.store.forget_policies(holder.kind, _entity(call, name))
    return None


def get_policy(call: IamCall, holder: _Holder) -> Result:
    name, policy = _holder_name(call, holder), _policy_name(call)
    entity = _existing(call.store.get(holder.kind, _entity(call, name)), holder.missing(name))
    document = entity["policies"].get(policy)
    if document is None:
        raise _no_policy(holder, policy)
    return {holder.member: entity[holder.member], "PolicyName": policy, "PolicyDocument": _encoded(document)}


def delete_policy(call: IamCall, holder: _Holder) -> Result:
    name, policy = _holder_name(call, holder), _policy_name(call)

    def delete(old: Doc | None) -> Doc:
        entity = _existing(old, holder.missing(name))
        if policy not in entity["policies"]:
            raise _no_policy(holder, policy)
        return {**entity, "policies": {key: text for key, text in entity["policies"].items() if key != policy}}
    call.store.write([(holder.kind, _entity(call, name), delete)])
    call.store.forget_policies(holder.kind, _entity(call, name))
    return None


def list_user_policies(call: IamCall) -> Result:
    name = _holder_name(call, _USER)
    user = _existing(call.store.get("user", _entity(call, name)), _no_user(name))
    page, more = _page(call, sorted(user["policies"]), str)
    return {"PolicyNames": page, **more}


# --- roles ---------------------------------------------------------------------------------------------------------
def create_role(call: IamCall) -> Result:
    action = call.action
    name = action.text("RoleName", required=True, high=64, pattern=NAME_PATTERN)
    path = action.text("Path", high=512, pattern=PATH_PATTERN) or "/"
    trust = action.text("AssumeRolePolicyDocument", required=True, high=131072, pattern=POLICY_PATTERN)
    description = action.text("Description", low=0, high=1000)
    longest = action.number("MaxSessionDuration", 3600, 43200) or 3600
    assert name is not None and trust is not None
    statements(trust, "trust")
    if size_without_whitespace(trust) > TRUST_POLICY_BYTES:  # (IAM's words)
        raise QueryError("LimitExceeded", f"Cannot exceed quota for ACLSizePerRole: {TRUST_POLICY_BYTES}", 409)
    role = {"RoleName": name, "Path": path, "RoleId": new_id("AROA", 21),
            "Arn": f"arn:aws:iam::{call.account}:role{path}{name}", "CreateDate": call.now,
            "AssumeRolePolicyDocument": trust, "Description": description, "MaxSessionDuration": longest,
            "policies": {}}

    def create(old: Doc | None) -> Doc:
        if old is not None:
            raise QueryError("EntityAlreadyExists", f"Role with name {name} already exists.", 409)  # (IAM's words)
        return role
    call.store.write([("role", _entity(call, name), create)])
    return {"Role": _role_shape(role)}


def get_role(call: IamCall) -> Result:
    name = _holder_name(call, _ROLE)
    return {"Role": _role_shape(_existing(call.store.get("role", _entity(call, name)), _no_role(name)))}


def delete_role(call: IamCall) -> Result:
    name = _holder_name(call, _ROLE)

    def delete(old: Doc | None) -> None:
        if _existing(old, _no_role(name))["policies"]:  # (IAM's words)
            raise QueryError("DeleteConflict", "Cannot delete entity, must delete policies first.", 409)
    call.store.write([("role", _entity(call, name), delete)])
    return None


IAM_ACTIONS: dict[str, Callable[[IamCall], Result]] = {
    "CreateUser": create_user, "GetUser": get_user, "DeleteUser": delete_user, "ListUsers": list_users,
    "CreateAccessKey": create_access_key, "DeleteAccessKey": delete_access_key, "ListAccessKeys": list_access_keys,
    "PutUserPolicy": lambda call: put_policy(call, _USER), "GetUserPolicy": lambda call: get_policy(call, _USER),
    "DeleteUserPolicy": lambda call: delete_policy(call, _USER), "ListUserPolicies": list_user_policies,
    "CreateRole": create_role, "GetRole": get_role, "DeleteRole": delete_role,
    "PutRolePolicy": lambda call: put_policy(call, _ROLE), "GetRolePolicy": lambda call: get_policy(call, _ROLE),
    "DeleteRolePolicy": lambda call: delete_policy(call, _ROLE),
}
