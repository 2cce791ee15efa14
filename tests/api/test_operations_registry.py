"""The operations registry: botocore's list of DynamoDB's operations, the server's handlers and docs/OPERATIONS.md
agree, and an operation DynamoDB has but OpenDDB lacks gets a clear, non-retried error naming it."""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path

import botocore.session
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from openddb.api.dispatch import DYNAMODB_OPERATIONS, STREAMS_OPERATIONS, implemented_operations
from tests.api.test_protocol import call

OPERATIONS_MD = Path(__file__).resolve().parents[2] / "docs" / "OPERATIONS.md"
PREFIXES = {"dynamodb": "DynamoDB_20120810.", "dynamodbstreams": "DynamoDBStreams_20120810."}
SECTIONS = {"DynamoDB": "dynamodb", "DynamoDB Streams": "dynamodbstreams"}
STATUSES = ("supported", "partial", "not yet")
UNSUPPORTED = "com.amazon.coral.service#UnsupportedOperationException"
UNKNOWN = {"__type": "com.amazon.coral.service#UnknownOperationException", "message": "Unknown operation exception"}
_ROW = re.compile(r"^\|\s*(\w+)\s*\|\s*([^|]*?)\s*\|\s*(.*?)\s*\|$")


def botocore_operations(service: str) -> frozenset[str]:
    return frozenset(botocore.session.get_session().get_service_model(service).operation_names)


def documented() -> dict[str, dict[str, tuple[str, str]]]:
    """OPERATIONS.md's tables: service -> operation -> (status, note); a name listed twice fails here."""
    tables: dict[str, dict[str, tuple[str, str]]] = {service: {} for service in SECTIONS.values()}
    service = None
    for line in OPERATIONS_MD.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            service = SECTIONS.get(line[3:].strip())
            continue
        match = _ROW.match(line)
        if service is None or match is None or match.group(1) == "Operation":
            continue
        name, status, note = match.groups()
        assert name not in tables[service], f"{name} is listed twice in OPERATIONS.md"
        tables[service][name] = (status, note)
    return tables


COMMITTED = {"dynamodb": DYNAMODB_OPERATIONS, "dynamodbstreams": STREAMS_OPERATIONS}


def unsupported() -> list[tuple[str, str]]:
    implemented = implemented_operations()
    return sorted((service, name) for service in SECTIONS.values()
                  for name in COMMITTED[service] - implemented[service])


# --- the three lists agree -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("service", "committed"), [("dynamodb", DYNAMODB_OPERATIONS),
                                                    ("dynamodbstreams", STREAMS_OPERATIONS)])
def test_committed_list_is_botocores(service, committed):
    """The server's own list of DynamoDB's operations (it may not load botocore) names only operations of
    botocore's model. A botocore newer than the list may know more (AWS adds operations; CI installs the latest
    boto3): those are printed for the next update of the list, and answered as DynamoDB answers a name it does
    not know until then."""
    current = botocore_operations(service)
    assert committed <= current
    newer = sorted(current - committed)
    if newer:
        print(f"botocore lists {service} operations the server's list lacks: {', '.join(newer)}")


@pytest.mark.parametrize("service", sorted(SECTIONS.values()))
def test_server_implements_only_dynamodbs_operations(service):
    """A handler under a name DynamoDB does not have would answer where DynamoDB says UnknownOperationException."""
    assert implemented_operations()[service] <= botocore_operations(service)


@pytest.mark.parametrize("service", sorted(SECTIONS.values()))
def test_operations_md_matches_botocore_and_the_registry(service):
    """OPERATIONS.md lists every operation of the server's list once, no other, and says "not yet" exactly for
    those the server has no handler for; a partial one says what is missing."""
    table = documented()[service]
    assert sorted(table) == sorted(COMMITTED[service])
    implemented = implemented_operations()[service]
    for name, (status, note) in table.items():
        assert status in STATUSES, f"{name}: unknown status {status!r}"
        assert (status != "not yet") == (name in implemented), f"{name} is documented as {status!r}"
        if status == "partial":
            assert note, f"{name} is partial without a note saying how"


# --- what a client sees --------------------------------------------------------------------------------------


def test_every_unimplemented_operation_answers_501_naming_it(server):
    """Through the running server, each operation botocore lists and the registry lacks answers the clear error,
    and each one the registry has does not (an empty body changes nothing in any of them)."""
    implemented = implemented_operations()
    for service in SECTIONS.values():
        for name in sorted(COMMITTED[service]):
            response, data = call(server, "{}", target=PREFIXES[service] + name)
            body = json.loads(data)
            if name in implemented[service]:
                assert body.get("__type") != UNSUPPORTED, name
            else:
                assert response.status == 501, name
                assert body == {"__type": UNSUPPORTED, "message": f"{name} is not supported by OpenDDB yet "
                                                                  "(docs/OPERATIONS.md lists the operations it "
                                                                  "implements)"}


def test_unsupported_operation_over_raw_http(server):
    """The raw answer: 501 Not Implemented, DynamoDB's JSON error shape, a request id and a CRC32 like any answer."""
    response, data = call(server, json.dumps({"GlobalTableName": "some-table"}),
                          target="DynamoDB_20120810.DescribeGlobalTable")
    assert response.status == 501
    assert response.getheader("Content-Type") == "application/x-amz-json-1.0"
    assert int(response.getheader("x-amz-crc32")) == zlib.crc32(data)
    assert response.getheader("x-amzn-RequestId")
    assert json.loads(data) == {"__type": UNSUPPORTED, "message": "DescribeGlobalTable is not supported by OpenDDB yet "
                                                                  "(docs/OPERATIONS.md lists the operations it "
                                                                  "implements)"}


@pytest.mark.parametrize(("operation", "arguments"), [
    ("list_global_tables", {}),
    ("describe_global_table", {"GlobalTableName": "some-table"}),
    ("describe_global_table_settings", {"GlobalTableName": "some-table"}),
])
def test_unsupported_operation_through_boto3(ddb, operation, arguments):
    """boto3 shows the operation's name, "not supported by OpenDDB" and HTTP 501, not a misleading unknown
    operation (the old answer, DynamoDB Local's too)."""
    with pytest.raises(ClientError) as caught:
        getattr(ddb, operation)(**arguments)
    error = caught.value.response
    assert error["Error"]["Code"] == "UnsupportedOperationException"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 501
    wire_name = caught.value.operation_name
    assert error["Error"]["Message"].startswith(f"{wire_name} is not supported by OpenDDB yet")


@pytest.mark.parametrize("mode", ["legacy", "standard", "adaptive"])
def test_clients_do_not_retry_it(server, mode):
    """Why 501 and not a 500: with retries on, botocore gives up at once instead of backing off into the same
    answer (the shared `ddb` fixture has retries switched off, so this client is its own)."""
    ddb = botocore.session.get_session().create_client(
        "dynamodb", endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id="test",
        aws_secret_access_key="test", config=Config(retries={"mode": mode, "max_attempts": 4}))
    with pytest.raises(ClientError) as caught:
        ddb.list_global_tables()
    assert caught.value.response["ResponseMetadata"]["RetryAttempts"] == 0


def test_checks_before_it_are_dynamodbs(server):
    """DynamoDB knows the operation, so a request to it is authenticated and its body read first, as any other:
    no Authorization is MissingAuthenticationTokenException, a body that is not JSON a SerializationException."""
    response, data = call(server, "{}", target="DynamoDB_20120810.ListGlobalTables", auth=None)
    assert response.status == 400
    assert json.loads(data)["__type"] == "com.amazon.coral.service#MissingAuthenticationTokenException"
    response, data = call(server, "{not json", target="DynamoDB_20120810.ListGlobalTables")
    assert response.status == 400
    assert json.loads(data)["__type"] == "com.amazon.coral.service#SerializationException"


@pytest.mark.parametrize("target", [
    "DynamoDB_20120810.Frobnicate",  # invented
    "DynamoDB_20120810.createBackup",  # DynamoDB's names are case-sensitive
    "DynamoDB_20120810.GetRecords",  # a Streams operation under DynamoDB's prefix
    "DynamoDBStreams_20120810.CreateBackup",  # a DynamoDB operation under the Streams prefix
    "DynamoDBStreams_20120810.Frobnicate",
])
def test_names_dynamodb_does_not_have_stay_unknown(server, target):
    """For a name the service (DynamoDB, or DynamoDB Streams for its prefix) does not have, DynamoDB's own answer:
    400 UnknownOperationException."""
    response, data = call(server, "{}", target=target)
    assert response.status == 400
    assert json.loads(data) == UNKNOWN
