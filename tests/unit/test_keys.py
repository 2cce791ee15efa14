"""Unit tests for openddb.model.keys: order-preserving key bytes and the partition hash."""

from __future__ import annotations

import base64
import hashlib
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openddb.model.keys import decode_key, decode_number, encode_key, encode_number, partition_hash
from openddb.model.numbers import normalize_number


@st.composite
def dynamo_numbers(draw: st.DrawFn) -> str:
    """Normalized text of any valid DynamoDB number, biased towards the edges of the range."""
    digits = draw(st.integers(min_value=0, max_value=10**38 - 1) | st.sampled_from([1, 9, 10**38 - 1]))
    if digits == 0:
        return "0"
    width = len(str(digits))
    adjusted = draw(st.integers(min_value=-130, max_value=125) | st.sampled_from([-130, -1, 0, 125]))
    sign = draw(st.sampled_from([0, 1]))
    return normalize_number(str(Decimal((sign, tuple(map(int, str(digits))), adjusted - width + 1))))


def sign(x: int) -> int:
    return (x > 0) - (x < 0)


def memcmp(a: bytes, b: bytes) -> int:
    return (a > b) - (a < b)


@given(dynamo_numbers(), dynamo_numbers())
def test_number_byte_order_is_numeric_order(a: str, b: str) -> None:
    """A range read on encoded N keys must visit items in numeric order."""
    assert memcmp(encode_number(a), encode_number(b)) == sign(Decimal(a).compare(Decimal(b)))


@given(dynamo_numbers())
def test_number_round_trip(a: str) -> None:
    """decode(encode(x)) == x for normalized numbers, so keys come back in wire form."""
    assert decode_number(encode_number(a)) == a
    assert decode_key("N", encode_key({"N": a})) == {"N": a}


@pytest.mark.parametrize(
    "ordered",
    [
        [
            "-" + "9" * 38 + "0" * 88,  # the most negative number
            "-1" + "0" * 125,
            "-1.05",
            "-1",
            "-0.5",
            "-0." + "0" * 129 + "1",
            "0",
            "0." + "0" * 129 + "1",
            "0.5",
            "1",
            "1.05",
            "1.1",
            "9",
            "10",
            "1" + "0" * 125,
            "9" * 38 + "0" * 88,  # the largest number
        ]
    ],
)
def test_number_edges_sort(ordered: list[str]) -> None:
    """The range edges, zero and prefix-related digit strings sort correctly."""
    encoded = [encode_number(x) for x in ordered]
    assert encoded == sorted(encoded)
    assert len(set(encoded)) == len(encoded)


def test_number_encoding_is_compact() -> None:
    """Two digits per byte plus a sign and an exponent byte: a 38-digit key is 21 bytes."""
    assert len(encode_number("9" * 38)) == 21
    assert len(encode_number("0")) == 1


@given(st.text(), st.text())
def test_string_byte_order(a: str, b: str) -> None:
    """S keys sort by UTF-8 bytes, which is code-point order."""
    assert memcmp(encode_key({"S": a}), encode_key({"S": b})) == sign((a > b) - (a < b))


@given(st.text())
def test_string_round_trip(a: str) -> None:
    """S keys decode to the same string."""
    assert decode_key("S", encode_key({"S": a})) == {"S": a}


@given(st.binary(), st.binary())
def test_binary_byte_order(a: bytes, b: bytes) -> None:
    """B keys are their raw bytes, so memcmp order is unsigned byte order."""
    ea = encode_key({"B": base64.b64encode(a).decode()})
    eb = encode_key({"B": base64.b64encode(b).decode()})
    assert ea == a and eb == b
    assert memcmp(ea, eb) == memcmp(a, b)


@given(st.binary())
def test_binary_round_trip(a: bytes) -> None:
    """B keys decode to canonical base64."""
    text = base64.b64encode(a).decode()
    assert decode_key("B", encode_key({"B": text})) == {"B": text}


def test_partition_hash_is_stable() -> None:
    """The hash orders rows on disk, so its values are pinned: changing them would corrupt existing tables."""
    assert partition_hash(b"") == 0x1271CF25
    assert partition_hash(b"user#1") == partition_hash(b"user#1")
    assert partition_hash(b"user#1") != partition_hash(b"user#2")


@given(st.binary())
def test_partition_hash_is_unsigned_32_bit(data: bytes) -> None:
    """Parallel-scan segments split [0, 2**32), so every hash lies in that range."""
    assert 0 <= partition_hash(data) < 2**32


def test_rejects_non_key_types() -> None:
    """Only S, N and B can be key attributes."""
    with pytest.raises(ValueError):
        encode_key({"BOOL": True})
    with pytest.raises(ValueError):
        decode_key("SS", b"")


@given(st.lists(st.binary(max_size=200), min_size=1, max_size=20))
def test_partition_hash_is_blake2b_whether_remembered_or_not(keys: list[bytes]) -> None:
    """Repeated, short and long keys all hash to the 4-byte BLAKE2b digest (the remembered hashes change
    nothing)."""
    for key in keys + keys:
        assert partition_hash(key) == int.from_bytes(hashlib.blake2b(key, digest_size=4).digest(), "big")
