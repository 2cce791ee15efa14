"""StreamSpecification on CreateTable and UpdateTable, and the stream members of every table description."""

from __future__ import annotations

import calendar
import re
import tempfile
import time

import pytest
from botocore.exceptions import ClientError

from tests.conftest import ServerProcess, make_client, unique_name

DEFS = [{"AttributeName": "pk", "AttributeType": "S"}]
SCHEMA = [{"AttributeName": "pk", "KeyType": "HASH"}]
INVALID = "One or more parameter values were invalid: "
VIEW_TYPES = ("KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES")
LABEL = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}")


def error_of(excinfo) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


def _table(ddb, view_type: str | None = None) -> str:  # type: ignore[no-untyped-def]
    name = unique_name("stream")
    extra = {} if view_type is None else {"StreamSpecification": {"StreamEnabled": True, "StreamViewType": view_type}}
    ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA, BillingMode="PAY_PER_REQUEST",
                     **extra)
    return name


def _stream_members(description: dict) -> dict:  # type: ignore[type-arg]
    return {k: v for k, v in description.items()
            if k in ("StreamSpecification", "LatestStreamLabel", "LatestStreamArn")}


def _check_label(description: dict, name: str) -> str:  # type: ignore[type-arg]
    """A label is the stream's creation time (UTC, to the millisecond) and names the stream in its ARN."""
    label = description["LatestStreamLabel"]
    assert LABEL.fullmatch(label), label
    created = calendar.timegm(time.strptime(label[:19], "%Y-%m-%dT%H:%M:%S"))
    assert abs(created - time.time()) < 60
    assert description["LatestStreamArn"] == f"arn:aws:dynamodb:us-east-1:000000000000:table/{name}/stream/{label}"
    assert description["LatestStreamArn"] == f"{description['TableArn']}/stream/{label}"
    return str(label)


@pytest.mark.parametrize("view_type", VIEW_TYPES)
def test_create_with_a_stream_describes_it(ddb, view_type):
    """Each view type is accepted at creation and described in CreateTable's and DescribeTable's answers."""
    name = unique_name("stream")
    created = ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                               BillingMode="PAY_PER_REQUEST",
                               StreamSpecification={"StreamEnabled": True, "StreamViewType": view_type})
    answer = created["TableDescription"]
    assert answer["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": view_type}
    label = _check_label(answer, name)
    described = ddb.describe_table(TableName=name)["Table"]
    assert _stream_members(described) == _stream_members(answer)
    assert described["LatestStreamLabel"] == label


def test_enable_through_update_table(ddb):
    """UpdateTable enables a stream on a table without one: the answer (UPDATING) already names it."""
    name = _table(ddb)
    answer = ddb.update_table(TableName=name, StreamSpecification={"StreamEnabled": True,
                                                                  "StreamViewType": "NEW_AND_OLD_IMAGES"})
    answer = answer["TableDescription"]
    assert answer["TableStatus"] == "UPDATING"
    assert answer["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    _check_label(answer, name)
    described = ddb.describe_table(TableName=name)["Table"]
    assert described["TableStatus"] == "ACTIVE"
    assert _stream_members(described) == _stream_members(answer)


def test_disable_keeps_the_latest_stream_named(ddb):
    """Once disabled, StreamSpecification is gone but LatestStreamArn and LatestStreamLabel stay, as on DynamoDB."""
    name = _table(ddb, "KEYS_ONLY")
    before = ddb.describe_table(TableName=name)["Table"]
    answer = ddb.update_table(TableName=name, StreamSpecification={"StreamEnabled": False})["TableDescription"]
    assert answer["TableStatus"] == "UPDATING"
    described = ddb.describe_table(TableName=name)["Table"]
    for description in (answer, described):
        assert "StreamSpecification" not in description
        assert description["LatestStreamArn"] == before["LatestStreamArn"]
        assert description["LatestStreamLabel"] == before["LatestStreamLabel"]


def test_reenabling_makes_a_new_stream(ddb):
    """Each enabling makes a new stream with a later label and ARN, even in quick succession (same millisecond)."""
    name = _table(ddb, "NEW_IMAGE")
    labels = [ddb.describe_table(TableName=name)["Table"]["LatestStreamLabel"]]
    arns = {ddb.describe_table(TableName=name)["Table"]["LatestStreamArn"]}
    for view_type in ("OLD_IMAGE", "KEYS_ONLY", "NEW_IMAGE"):  # the view type changes by disabling first
        ddb.update_table(TableName=name, StreamSpecification={"StreamEnabled": False})
        answer = ddb.update_table(TableName=name, StreamSpecification={"StreamEnabled": True,
                                                                      "StreamViewType": view_type})
        description = answer["TableDescription"]
        assert description["StreamSpecification"]["StreamViewType"] == view_type
        labels.append(_check_label(description, name))
        arns.add(description["LatestStreamArn"])
    assert labels == sorted(labels) and len(set(labels)) == len(labels) == len(arns)


def test_enabling_an_enabled_stream_is_refused(ddb):
    """An enabled stream is not enabled again, nor its view type changed without disabling first."""
    name = _table(ddb, "NEW_IMAGE")
    before = ddb.describe_table(TableName=name)["Table"]
    for view_type in ("NEW_IMAGE", "OLD_IMAGE"):
        with pytest.raises(ClientError) as excinfo:
            ddb.update_table(TableName=name, StreamSpecification={"StreamEnabled": True, "StreamViewType": view_type})
        assert error_of(excinfo) == ("ValidationException", f"Table already has an enabled stream: TableName: {name}")
    assert _stream_members(ddb.describe_table(TableName=name)["Table"]) == _stream_members(before)


def test_disabling_without_an_enabled_stream_is_refused(ddb):
    """A table that never had a stream, or whose stream is already disabled, has no stream to disable."""
    never = _table(ddb)
    disabled = _table(ddb, "KEYS_ONLY")
    ddb.update_table(TableName=disabled, StreamSpecification={"StreamEnabled": False})
    for name in (never, disabled):
        with pytest.raises(ClientError) as excinfo:
            ddb.update_table(TableName=name, StreamSpecification={"StreamEnabled": False})
        assert error_of(excinfo) == ("ValidationException", f"Table has no stream to disable: TableName: {name}")


@pytest.mark.parametrize(("spec", "message"), [
    ({"StreamEnabled": True}, "If stream is being enabled then UpdateViewType is required"),
    ({"StreamEnabled": False, "StreamViewType": "KEYS_ONLY"},
     "If stream is being disabled, then UpdateViewType must not be specified"),
])
def test_update_table_specification_mismatch(ddb, spec, message):
    """UpdateTable's StreamEnabled and StreamViewType must agree, whatever the table's stream."""
    for name in (_table(ddb), _table(ddb, "KEYS_ONLY")):
        with pytest.raises(ClientError) as excinfo:
            ddb.update_table(TableName=name, StreamSpecification=spec)
        assert error_of(excinfo) == ("ValidationException", INVALID + message)


@pytest.mark.parametrize(("spec", "message"), [
    ({"StreamEnabled": True}, "Table is being created with a stream enabled, UpdateViewType is required"),
    ({"StreamEnabled": False, "StreamViewType": "KEYS_ONLY"},
     "Table is being created with a stream disabled, UpdateViewType should not be specified"),
])
def test_create_table_specification_mismatch(ddb, spec, message):
    """CreateTable's own wording for a StreamSpecification whose members disagree; no table is created."""
    name = unique_name("stream")
    with pytest.raises(ClientError) as excinfo:
        ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA, BillingMode="PAY_PER_REQUEST",
                         StreamSpecification=spec)
    assert error_of(excinfo) == ("ValidationException", INVALID + message)
    with pytest.raises(ClientError):
        ddb.describe_table(TableName=name)


def test_delete_table_answer_names_the_stream(ddb):
    """DeleteTable's answer is a table description, with the stream members too."""
    name = _table(ddb, "OLD_IMAGE")
    before = ddb.describe_table(TableName=name)["Table"]
    answer = ddb.delete_table(TableName=name)["TableDescription"]
    assert _stream_members(answer) == _stream_members(before)


def test_recreated_table_gets_a_new_stream_arn(ddb):
    """A table deleted and created again under its name gets a stream of its own, never the deleted one's ARN."""
    name = _table(ddb, "KEYS_ONLY")
    first = ddb.delete_table(TableName=name)["TableDescription"]["LatestStreamArn"]
    again = ddb.create_table(TableName=name, AttributeDefinitions=DEFS, KeySchema=SCHEMA,
                             BillingMode="PAY_PER_REQUEST",
                             StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"})
    assert again["TableDescription"]["LatestStreamArn"] != first


def test_streams_survive_a_restart():
    """The stream of a table, enabled or disabled, is described the same by a restarted server."""
    with tempfile.TemporaryDirectory() as data_dir:
        first = ServerProcess(data_dir)
        try:
            ddb = make_client(first.endpoint)
            enabled, disabled = _table(ddb, "NEW_AND_OLD_IMAGES"), _table(ddb, "KEYS_ONLY")
            ddb.update_table(TableName=disabled, StreamSpecification={"StreamEnabled": False})
            before = {name: _stream_members(ddb.describe_table(TableName=name)["Table"])
                      for name in (enabled, disabled)}
        finally:
            first.finish()
        second = ServerProcess(data_dir)
        try:
            ddb = make_client(second.endpoint)
            for name, members in before.items():
                assert _stream_members(ddb.describe_table(TableName=name)["Table"]) == members
            assert "StreamSpecification" in before[enabled] and "StreamSpecification" not in before[disabled]
            with pytest.raises(ClientError) as excinfo:  # still known as enabled after the restart
                ddb.update_table(TableName=enabled, StreamSpecification={"StreamEnabled": True,
                                                                         "StreamViewType": "KEYS_ONLY"})
            assert error_of(excinfo)[1] == f"Table already has an enabled stream: TableName: {enabled}"
        finally:
            second.finish()
