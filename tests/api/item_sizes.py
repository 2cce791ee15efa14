"""DynamoDB's documented item sizes (Developer Guide, "Item sizes and formats"), computed here apart from the
server's own code, so size tests check the server against the documentation rather than against itself."""

from __future__ import annotations


def number_size(text: str) -> int:
    """1 byte, plus half the integer and half the fraction significant digits (rounded up), plus 1 if negative."""
    negative = text.startswith("-")
    whole, _, fraction = text.lstrip("-").partition(".")
    whole = whole.lstrip("0")
    if not fraction:
        whole = whole.rstrip("0")
    elif not whole:
        fraction = fraction.lstrip("0")
    fraction = fraction.rstrip("0")
    return 1 + (len(whole) + 1) // 2 + (len(fraction) + 1) // 2 + negative


def size_of(value: dict) -> int:
    """The size of one value of a test item (B given as bytes, as boto3 takes it)."""
    (kind, inner), = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        return number_size(inner)
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(member.encode()) for member in inner)
    if kind == "NS":
        return sum(map(number_size, inner))
    if kind == "L":
        return 3 + sum(1 + size_of(element) for element in inner)
    if kind == "M":
        return 3 + sum(1 + len(name.encode()) + size_of(element) for name, element in inner.items())
    raise AssertionError(kind)


def item_size(item: dict) -> int:
    return sum(len(name.encode()) + size_of(value) for name, value in item.items())
