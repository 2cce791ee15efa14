"""Clients and servers shared by the IAM and STS tests: a server verifying signatures with known root credentials,
and boto3 clients of any service signed with given credentials."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.conftest import ServerProcess, unique_name

ROOT_KEY, ROOT_SECRET = "AKIDIDENTITYROOT", "identity-root-secret"
ACCOUNT = "000000000000"


def verifying_server(*extra: str, data_dir: str | None = None) -> ServerProcess:
    return ServerProcess(data_dir, "--workers", "1", "--auth", "verify", "--root-credentials",
                         f"{ROOT_KEY}:{ROOT_SECRET}", *extra)


def client(server: ServerProcess, service: str, key: str = ROOT_KEY, secret: str = ROOT_SECRET,
           token: str | None = None) -> Any:
    return boto3.client(service, endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id=key,
                        aws_secret_access_key=secret, aws_session_token=token,
                        config=Config(retries={"max_attempts": 1}))


def with_credentials(server: ServerProcess, service: str, credentials: dict[str, str]) -> Any:
    """A client signed with an AccessKey (IAM) or Credentials (STS) answer."""
    return client(server, service, credentials["AccessKeyId"], credentials["SecretAccessKey"],
                  credentials.get("SessionToken"))


def error_of(call: Any, *args: Any, **kwargs: Any) -> tuple[str, str, int]:
    """(code, message, HTTP status) of the ClientError a call raises."""
    with pytest.raises(ClientError) as raised:
        call(*args, **kwargs)
    response = raised.value.response
    return response["Error"]["Code"], response["Error"]["Message"], response["ResponseMetadata"]["HTTPStatusCode"]


def user_with_key(iam: Any, policy: dict[str, Any] | None = None) -> tuple[str, dict[str, str]]:
    """A new user (a unique name), with an inline policy if given, and one access key of it."""
    name = unique_name("u")
    iam.create_user(UserName=name)
    if policy is not None:
        iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=json.dumps(policy))
    return name, iam.create_access_key(UserName=name)["AccessKey"]


def allow(*actions: str) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": list(actions), "Resource": "*"}]}


def trust(*principals: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": list(principals)}, "Action": "sts:AssumeRole"}]})
