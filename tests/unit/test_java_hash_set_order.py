"""DynamoDB lists some sets of attribute names in java.util.HashSet order; `java_hash_set_order` reproduces it."""

from __future__ import annotations

from openddb.api.indexes import java_hash_set_order
from openddb.api.validation import java_string_hash as _java_string_hash


def test_string_hash_matches_java() -> None:
    assert _java_string_hash("") == 0
    assert _java_string_hash("a") == 97
    assert _java_string_hash("pk") == 3579
    assert _java_string_hash("polygenelubricants") == 0x80000000  # Integer.MIN_VALUE: wraps around 32 bits
    assert _java_string_hash("é") == 233 and _java_string_hash("😀") == (0xD83D * 31 + 0xDE00)  # UTF-16 units


def test_order_of_buckets_then_insertion() -> None:
    # Recorded against DynamoDB: keys used [a, sk, pk] (buckets 1, 8, 11 of 16).
    assert java_hash_set_order(["pk", "sk", "a"]) == ["a", "sk", "pk"]
    assert java_hash_set_order(["pk", "pk", "a"]) == ["a", "pk"]
    # "Aa" and "BB" share a hash: they stay in the order they were added.
    assert java_hash_set_order(["BB", "Aa"]) == ["BB", "Aa"] and java_hash_set_order(["Aa", "BB"]) == ["Aa", "BB"]


def test_the_table_grows_past_twelve_names() -> None:
    names = [f"k{n}" for n in range(13)]  # 13 names: 32 buckets, so "k1".."k9" spread differently than in 16
    ordered = java_hash_set_order(names)
    assert sorted(ordered) == sorted(names)

    def bucket(name: str, capacity: int) -> int:
        code = _java_string_hash(name)
        return (code ^ (code >> 16)) & (capacity - 1)

    assert [bucket(name, 32) for name in ordered] == sorted(bucket(name, 32) for name in names)
