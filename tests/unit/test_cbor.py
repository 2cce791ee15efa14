"""The CBOR subset CloudWatch's RPC v2 CBOR protocol carries: what botocore's serializer writes decodes to the
request's members (timestamps to epoch seconds), what the server encodes botocore's parser reads, indefinite
lengths decode, and a body that is not one whole item is refused."""

from __future__ import annotations

import datetime

import botocore.session
import pytest
from botocore.parsers import create_parser
from botocore.serialize import create_serializer

from openddb.server import cbor

_MODEL = botocore.session.get_session().get_service_model("cloudwatch")


def test_botocores_request_decodes() -> None:
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    request = create_serializer("smithy-rpc-v2-cbor").serialize_to_request({
        "Namespace": "AWS/DynamoDB", "MetricName": "UserErrors", "Dimensions": [{"Name": "TableName", "Value": "é"}],
        "StartTime": start, "EndTime": start + datetime.timedelta(seconds=90.5), "Period": 60,
        "Statistics": ["Sum", "SampleCount"]}, _MODEL.operation_model("GetMetricStatistics"))
    assert cbor.decode(request["body"]) == {
        "Namespace": "AWS/DynamoDB", "MetricName": "UserErrors", "Dimensions": [{"Name": "TableName", "Value": "é"}],
        "StartTime": 1767225600.0, "EndTime": 1767225690.5, "Period": 60, "Statistics": ["Sum", "SampleCount"]}


def test_an_answer_botocore_parses() -> None:
    body = cbor.encode({"Label": "UserErrors", "Datapoints": [
        {"Timestamp": cbor.Timestamp(1767225600.0), "Sum": 3.0, "SampleCount": 3.0, "Unit": "Count"}]})
    parsed = create_parser("smithy-rpc-v2-cbor").parse({"body": body, "headers": {}, "status_code": 200},
                                                        _MODEL.operation_model("GetMetricStatistics").output_shape)
    point = parsed["Datapoints"][0]
    assert (point["Timestamp"].timestamp(), point["Sum"], point["Unit"]) == (1767225600.0, 3.0, "Count")


def test_values_round_trip_and_indefinite_lengths_decode() -> None:
    value = {"a": [0, 23, 24, 255, 65536, 2**40, -1, -2**40, 1.5, True, False, None], "b": b"\x00", "c": "x" * 300}
    assert cbor.decode(cbor.encode(value)) == value
    assert cbor.decode(bytes([0xBF, 0x61, 0x61, 0x9F, 0x01, 0x02, 0xFF, 0xFF])) == {"a": [1, 2]}
    assert cbor.decode(bytes([0x7F, 0x61, 0x61, 0x61, 0x62, 0xFF])) == "ab"
    assert cbor.decode(bytes([0xF9, 0x3E, 0x00])) == 1.5  # (a half-precision float)


@pytest.mark.parametrize("body", [b"", bytes([0xA1, 0x61, 0x61]), bytes([0x82, 0x01]), bytes([0x81, 0x01, 0x02]),
                                  bytes([0x62, 0xFF, 0xFE]), bytes([0x1C])])
def test_what_is_not_one_item_is_refused(body: bytes) -> None:
    with pytest.raises(cbor.CborError):
        cbor.decode(body)
