"""The policy evaluator (identity/policies.py) against the IAM User Guide's rules: Deny over Allow over the
default deny, wildcards in Action and Resource, NotAction/NotResource, policy variables and each condition
operator family with IfExists and the set prefixes, missing keys included. (The API tests drive it end to end.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

from openddb.identity.policies import Statement, compiled, decide, substitute, trusts, wildcard_match

TABLE = "arn:aws:dynamodb:us-east-1:000000000000:table/Books"


def policy(*statements: dict[str, Any], version: str = "2012-10-17") -> tuple[Statement, ...]:
    return compiled(json.dumps({"Version": version, "Statement": list(statements)}))


def allow(action: Any = "dynamodb:GetItem", resource: Any = "*", **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def deny(action: Any = "dynamodb:GetItem", resource: Any = "*", **extra: Any) -> dict[str, Any]:
    return {"Effect": "Deny", "Action": action, "Resource": resource, **extra}


def test_explicit_deny_wins_over_allow_and_nothing_is_a_default_deny():
    assert decide([policy(allow())], "dynamodb:GetItem", TABLE, {}) == "allow"
    assert decide([policy(allow()), policy(deny())], "dynamodb:GetItem", TABLE, {}) == "deny"
    assert decide([policy(allow("dynamodb:PutItem"))], "dynamodb:GetItem", TABLE, {}) == "none"
    assert decide([], "dynamodb:GetItem", TABLE, {}) == "none"


def test_action_wildcards_ignore_case_and_resource_wildcards_do_not():
    assert decide([policy(allow("dynamodb:Get*"))], "dynamodb:GetItem", TABLE, {}) == "allow"
    assert decide([policy(allow("DYNAMODB:getitem"))], "dynamodb:GetItem", TABLE, {}) == "allow"
    assert decide([policy(allow("dynamodb:?etItem"))], "dynamodb:GetItem", TABLE, {}) == "allow"
    assert decide([policy(allow("dynamodb:Get*"))], "dynamodb:BatchGetItem", TABLE, {}) == "none"
    assert decide([policy(allow(resource="arn:aws:dynamodb:*:*:table/Book*"))], "dynamodb:GetItem", TABLE,
                  {}) == "allow"
    assert decide([policy(allow(resource="arn:aws:dynamodb:*:*:table/books"))], "dynamodb:GetItem", TABLE,
                  {}) == "none"
    # `*` crosses "/": a table pattern ending in * also names its indexes and streams
    assert wildcard_match("arn:aws:dynamodb:*:*:table/Books*", TABLE + "/index/ByAuthor")
    assert not wildcard_match("arn:aws:dynamodb:*:*:table/Books", TABLE + "/index/ByAuthor")
    assert wildcard_match("a[b]c", "a[b]c") and not wildcard_match("a[b]c", "abc")  # (no character classes)


def test_not_action_and_not_resource():
    everything_but_deletes = policy({"Effect": "Allow", "NotAction": "dynamodb:Delete*", "Resource": "*"})
    assert decide([everything_but_deletes], "dynamodb:GetItem", TABLE, {}) == "allow"
    assert decide([everything_but_deletes], "dynamodb:DeleteItem", TABLE, {}) == "none"
    not_books = policy({"Effect": "Deny", "Action": "*", "NotResource": TABLE})
    assert decide([policy(allow("*")), not_books], "dynamodb:GetItem", TABLE, {}) == "allow"
    assert decide([policy(allow("*")), not_books], "dynamodb:GetItem", TABLE + "2", {}) == "deny"


def test_policy_variables_in_resources_and_condition_values():
    context = {"aws:username": ("alice",), "aws:userid": ("AIDAEXAMPLE",)}
    own = policy(allow(resource="arn:aws:dynamodb:*:*:table/${aws:username}-*"))
    assert decide([own], "dynamodb:GetItem", TABLE.replace("Books", "alice-notes"), context) == "allow"
    assert decide([own], "dynamodb:GetItem", TABLE.replace("Books", "bob-notes"), context) == "none"
    # (a 2008-10-17 policy takes ${...} literally)
    literal = policy(allow(resource="arn:aws:dynamodb:*:*:table/${aws:username}-*"), version="2008-10-17")
    assert decide([literal], "dynamodb:GetItem", TABLE.replace("Books", "alice-notes"), context) == "none"
    assert substitute("${aws:username}/${*}${?}${$}", context) == "alice/*?$"
    assert substitute("${aws:nothing}", context) is None
    assert substitute("${aws:nothing, 'anon'}", context) == "anon"


@pytest.mark.parametrize(("operator", "wanted", "given", "expected"), [
    ("StringEquals", "a", ("a",), True), ("StringEquals", "a", ("A",), False),
    ("StringNotEquals", "a", ("b",), True), ("StringNotEquals", "a", ("a",), False),
    ("StringEqualsIgnoreCase", "a", ("A",), True), ("StringNotEqualsIgnoreCase", "a", ("A",), False),
    ("StringLike", "a*", ("abc",), True), ("StringLike", "a?", ("abc",), False), ("StringNotLike", "a*", ("b",), True),
    ("NumericEquals", "10", ("10.0",), True), ("NumericNotEquals", "10", ("11",), True),
    ("NumericLessThan", "10", ("9",), True), ("NumericLessThanEquals", "10", ("10",), True),
    ("NumericGreaterThan", "10", ("10",), False), ("NumericGreaterThanEquals", "10", ("10",), True),
    ("NumericEquals", "10", ("ten",), False),
    ("DateLessThan", "2030-01-01T00:00:00Z", ("2026-11-29T12:00:00Z",), True),
    ("DateGreaterThan", "2030-01-01T00:00:00Z", ("2026-11-29T12:00:00Z",), False),
    ("DateEquals", "1893456000", ("2030-01-01T00:00:00Z",), True),
    ("DateNotEquals", "1893456000", ("2030-01-01T00:00:01Z",), True),
    ("DateLessThanEquals", "2030-01-01", ("2030-01-01T00:00:00Z",), True),
    ("DateGreaterThanEquals", "2030-01-01T00:00:00Z", ("2029-12-31T23:59:59Z",), False),
    ("Bool", "true", ("true",), True), ("Bool", True, ("false",), False),
    ("BinaryEquals", "QmluYXJ5", ("QmluYXJ5",), True),
    ("IpAddress", "10.0.0.0/8", ("10.1.2.3",), True), ("IpAddress", "10.0.0.0/8", ("127.0.0.1",), False),
    ("NotIpAddress", "10.0.0.0/8", ("127.0.0.1",), True),
    ("ArnLike", "arn:aws:iam::*:user/*", ("arn:aws:iam::000000000000:user/alice",), True),
    ("ArnEquals", "arn:aws:iam::1:user/a", ("arn:aws:iam::1:user/b",), False),
    ("ArnNotLike", "arn:aws:iam::*:role/*", ("arn:aws:iam::1:user/a",), True),
    ("ArnNotEquals", "arn:aws:iam::1:user/a", ("arn:aws:iam::1:user/a",), False),
    ("NoSuchOperator", "a", ("a",), False),
])
def test_condition_operators(operator: str, wanted: Any, given: tuple[str, ...], expected: bool):
    statements = policy(allow(Condition={operator: {"k:key": wanted}}))
    assert (decide([statements], "dynamodb:GetItem", TABLE, {"k:key": given}) == "allow") is expected


@pytest.mark.parametrize(("operator", "expected"), [
    ("StringEquals", False), ("StringNotEquals", True), ("StringEqualsIfExists", True), ("StringLike", False),
    ("StringNotLike", True), ("NumericLessThan", False), ("NumericLessThanIfExists", True), ("Bool", False),
    ("NotIpAddress", True), ("ForAllValues:StringEquals", True), ("ForAnyValue:StringEquals", False),
    ("ForAnyValue:StringEqualsIfExists", True),
])
def test_a_key_missing_from_the_context(operator: str, expected: bool):
    statements = policy(allow(Condition={operator: {"k:key": "a"}}))
    assert (decide([statements], "dynamodb:GetItem", TABLE, {}) == "allow") is expected


def test_null_tells_a_missing_key():
    absent = policy(allow(Condition={"Null": {"k:key": "true"}}))
    present = policy(allow(Condition={"Null": {"k:key": "false"}}))
    assert decide([absent], "dynamodb:GetItem", TABLE, {}) == "allow"
    assert decide([present], "dynamodb:GetItem", TABLE, {}) == "none"
    assert decide([absent], "dynamodb:GetItem", TABLE, {"k:key": ("x",)}) == "none"
    assert decide([present], "dynamodb:GetItem", TABLE, {"k:key": ("x",)}) == "allow"


def test_set_operators_on_multivalued_keys():
    every = policy(allow(Condition={"ForAllValues:StringEquals": {"dynamodb:Attributes": ["pk", "title"]}}))
    some = policy(allow(Condition={"ForAnyValue:StringEquals": {"dynamodb:Attributes": ["title"]}}))
    none_of = policy(allow(Condition={"ForAllValues:StringNotEquals": {"dynamodb:Attributes": ["secret"]}}))
    for given, results in [(("pk", "title"), ("allow", "allow", "allow")),
                           (("pk", "secret"), ("none", "none", "none")),
                           (("pk",), ("allow", "none", "allow")),
                           ((), ("allow", "none", "allow"))]:
        context = {"dynamodb:attributes": given}
        assert tuple(decide([p], "dynamodb:GetItem", TABLE, context) for p in (every, some, none_of)) == results


def test_every_operator_and_every_key_of_a_block_must_hold_and_values_are_alternatives():
    block = {"StringEquals": {"k:a": ["1", "2"], "k:b": "x"}, "Bool": {"k:c": "true"}}
    statements = policy(allow(Condition=block))
    good = {"k:a": ("2",), "k:b": ("x",), "k:c": ("true",)}
    assert decide([statements], "dynamodb:GetItem", TABLE, good) == "allow"
    for key, value in (("k:a", "3"), ("k:b", "y"), ("k:c", "false")):
        assert decide([statements], "dynamodb:GetItem", TABLE, {**good, key: (value,)}) == "none"


def test_condition_keys_ignore_case_and_a_deny_with_a_condition_denies_only_when_it_holds():
    statements = [policy(allow("*")), policy(deny(Condition={"StringEquals": {"AWS:SourceIp": "10.0.0.1"}}))]
    assert decide(statements, "dynamodb:GetItem", TABLE, {"aws:sourceip": ("10.0.0.1",)}) == "deny"
    assert decide(statements, "dynamodb:GetItem", TABLE, {"aws:sourceip": ("10.0.0.2",)}) == "allow"


def test_trust_policies_name_principals_and_evaluate_conditions():
    user = "arn:aws:iam::000000000000:user/alice"
    document = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": user}, "Action": "sts:AssumeRole",
         "Condition": {"StringEquals": {"aws:username": "alice"}}}]})
    assert trusts(document, "000000000000", [user], {"aws:username": ("alice",)}) == "principal"
    assert trusts(document, "000000000000", [user], {"aws:username": ("bob",)}) is None
    assert trusts(document, "000000000000", [user.replace("alice", "bob")], {"aws:username": ("alice",)}) is None


def test_a_trust_policy_naming_the_account_leaves_the_rest_to_identity_policies():
    user = "arn:aws:iam::000000000000:user/alice"
    for account in ("000000000000", "arn:aws:iam::000000000000:root"):
        document = json.dumps({"Statement": [{"Effect": "Allow", "Principal": {"AWS": account},
                                              "Action": "sts:AssumeRole"}]})
        assert trusts(document, "000000000000", [user], {}) == "account"
        assert trusts(document, "111111111111", ["arn:aws:iam::111111111111:user/alice"], {}) is None
    both = json.dumps({"Statement": [
        {"Effect": "Allow", "Principal": {"AWS": ["000000000000", user]}, "Action": "sts:AssumeRole"}]})
    assert trusts(both, "000000000000", [user], {}) == "principal"
    # A Deny naming the account refuses the principal the policy names itself.
    denying = json.dumps({"Statement": [
        {"Effect": "Allow", "Principal": {"AWS": user}, "Action": "sts:AssumeRole"},
        {"Effect": "Deny", "Principal": {"AWS": "000000000000"}, "Action": "sts:AssumeRole"}]})
    assert trusts(denying, "000000000000", [user], {}) is None
    # An assumed role's session is named by its role's ARN.
    role = "arn:aws:iam::000000000000:role/app"
    by_role = json.dumps({"Statement": [{"Effect": "Allow", "Principal": {"AWS": role}, "Action": "sts:AssumeRole"}]})
    assert trusts(by_role, "000000000000", ["arn:aws:sts::000000000000:assumed-role/app/s1", role], {}) == \
        "principal"
