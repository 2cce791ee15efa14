"""Unit tests for openddb.model.numbers: DynamoDB's number grammar, limits, normalization and arithmetic."""

from __future__ import annotations

import decimal
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openddb.errors import ValidationException
from openddb.model.numbers import (
    MAX_ADJUSTED_EXPONENT,
    MIN_ADJUSTED_EXPONENT,
    MSG_OVERFLOW,
    MSG_PRECISION,
    MSG_UNDERFLOW,
    add_numbers,
    compare_numbers,
    format_number,
    normalize_number,
    number_size,
    parse_number,
    subtract_numbers,
)

MAX = "9.9999999999999999999999999999999999999E+125"


@st.composite
def dynamo_numbers(draw: st.DrawFn) -> Decimal:
    """Any valid DynamoDB number: up to 38 digits, first-digit exponent in [-130, 125]."""
    digits = draw(st.integers(min_value=0, max_value=10**38 - 1))
    if digits == 0:
        return Decimal(0)
    width = len(str(digits))
    adjusted = draw(st.integers(min_value=-130, max_value=125))
    sign = draw(st.sampled_from([0, 1]))
    return Decimal((sign, tuple(map(int, str(digits))), adjusted - width + 1))


def spellings(value: Decimal) -> list[str]:
    """Several wire spellings DynamoDB accepts for the same number."""
    sci = f"{value:E}"
    plain = format(value, "f")
    sign = "-" if value < 0 else ""
    padded = sign + "00" + plain.lstrip("-")
    return [str(value), sci, sci.lower(), plain, padded, plain if value < 0 else "+" + plain]


# --- grammar ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", "1"),
        ("-1.5", "-1.5"),
        ("1e3", "1000"),
        ("1E-3", "0.001"),
        (".5", "0.5"),
        ("5.", "5"),
        ("+5", "5"),  # DynamoDB accepts a leading + (nubo-db/dynoxide#108, captured in ap-south-1)
        ("1e+2", "100"),
        ("1.5E2", "150"),
        ("00042", "42"),
        ("0.0100", "0.01"),
        ("-0", "0"),
        ("-0.000e5", "0"),
        ("1.0", "1"),
        ("1e-0000000000000000001", "0.1"),  # a long exponent is not a large one
        ("123.4500", "123.45"),
        ("1E-130", "0." + "0" * 129 + "1"),
        (MAX, "9" * 38 + "0" * 88),
        ("-" + MAX, "-" + "9" * 38 + "0" * 88),
        ("1" + "0" * 100, "1" + "0" * 100),  # one significant digit, however many zeros
    ],
)
def test_normalizes_like_dynamodb(text: str, expected: str) -> None:
    """Accepted spellings come back in DynamoDB's normalized plain notation."""
    assert normalize_number(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", " 5", "5 ", "5\n", "NaN", "Infinity", "-inf", "1_000", ".", "e5", ".e5", "1e", "1.2.3", "1+2",
     "0x10", "١٢", "+-1", "1e5.5", "--1"],
)  # fmt: skip
def test_rejects_malformed(text: str) -> None:
    """Decimal() would accept several of these (whitespace, NaN, underscores); DynamoDB does not."""
    with pytest.raises(ValidationException) as info:
        normalize_number(text)
    assert info.value.message is not None
    assert info.value.message.startswith("The parameter cannot be converted to a numeric value")


def test_malformed_message_echoes_input() -> None:
    """Real DynamoDB appends the offending text: "...numeric value: NaN"."""
    with pytest.raises(ValidationException, match=r"^The parameter cannot be converted to a numeric value: NaN$"):
        normalize_number("NaN")


# --- limits ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1E126", MSG_OVERFLOW),
        ("-1E126", MSG_OVERFLOW),
        ("10" + "0" * 125, MSG_OVERFLOW),
        ("1E-131", MSG_UNDERFLOW),
        ("-0.99E-130", MSG_UNDERFLOW),
        ("1e99999999999999999999999", MSG_OVERFLOW),
        ("1e-99999999999999999999999", MSG_UNDERFLOW),
        ("1" * 39, MSG_PRECISION),
        ("0.000" + "1" * 39, MSG_PRECISION),
        ("1." + "0" * 37 + "1", MSG_PRECISION),
    ],
)
def test_limits(text: str, message: str) -> None:
    """Range and the 38-digit precision limit produce DynamoDB's three distinct messages."""
    with pytest.raises(ValidationException) as info:
        normalize_number(text)
    assert info.value.message == message


def test_zero_exponent_is_held_to_the_range() -> None:
    """DynamoDB no longer takes 0e1000 (scylladb issue 26079, a run against DynamoDB in 2025): a zero's exponent
    is held to the range of any number's."""
    assert normalize_number("0e125") == normalize_number("0E-130") == normalize_number("-0.000e5") == "0"
    for text in ("0e126", "0e1000", "0e99999999999999999999999"):
        with pytest.raises(ValidationException, match="Number overflow"):
            normalize_number(text)
    with pytest.raises(ValidationException, match="Number underflow"):
        normalize_number("0E-131")
    assert normalize_number("0." + "0" * 200) == "0"  # (no exponent written: as before)


def test_an_exact_zero_result_is_zero() -> None:
    """x - x of a small x is exactly 0, whatever exponent the exact arithmetic carries."""
    tiny = normalize_number("1.5E-130")
    assert subtract_numbers(tiny, tiny) == "0"
    assert add_numbers(tiny, "-" + tiny) == "0"
    assert format_number(Decimal("0E-200")) == "0"


def test_exponent_written_with_thousands_of_leading_zeros() -> None:
    """Leading zeros of an exponent do not count: 1e000...01 is 10 however many zeros it has (Python's int()
    refuses strings of more than 4,300 digits, which once made such a value an internal error)."""
    zeros = "0" * 5000
    assert normalize_number(f"1e{zeros}1") == "10"
    assert normalize_number(f"1E-{zeros}1") == "0.1"
    assert normalize_number(f"-25e+{zeros}") == "-25"


def test_38_digits_and_trailing_zeros_are_fine() -> None:
    """Only significant digits count: trailing zeros in a 39+ character string are not digits of precision."""
    assert normalize_number("1" * 38) == "1" * 38
    assert normalize_number("1" * 38 + "000") == "1" * 38 + "000"
    assert normalize_number("0." + "1" * 38 + "000") == "0." + "1" * 38


# --- parse / format --------------------------------------------------------------------------------------


def test_parse_returns_exact_decimal() -> None:
    """parse_number keeps every digit (no context rounding)."""
    assert parse_number("1" * 38) == Decimal("1" * 38)
    assert parse_number("-1.5e-3") == Decimal("-0.0015")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Decimal("1E+3"), "1000"),
        (Decimal("0.0100"), "0.01"),
        (Decimal("-0"), "0"),
        (Decimal("1E-130"), "0." + "0" * 129 + "1"),
    ],
)
def test_format_number(value: Decimal, expected: str) -> None:
    """format_number renders Decimals in the normalized form."""
    assert format_number(value) == expected


@pytest.mark.parametrize("value", [Decimal("NaN"), Decimal("Infinity"), Decimal("-Infinity")])
def test_format_rejects_non_finite(value: Decimal) -> None:
    """Non-finite decimals are not DynamoDB numbers."""
    with pytest.raises(ValidationException):
        format_number(value)


def test_format_checks_limits() -> None:
    """Arithmetic results are held to the same limits as input."""
    with pytest.raises(ValidationException, match="Number overflow"):
        format_number(Decimal("1E126"))
    with pytest.raises(ValidationException, match="38 significant digits"):
        format_number(Decimal("1" * 39))


@given(dynamo_numbers())
def test_normalization_is_idempotent(value: Decimal) -> None:
    """A normalized string normalizes to itself (stored numbers never change on re-validation)."""
    once = normalize_number(str(value))
    assert normalize_number(once) == once


@given(dynamo_numbers())
def test_equal_numbers_normalize_equal(value: Decimal) -> None:
    """Every spelling of one number gives the same string: the basis for N equality and key identity."""
    assert len({normalize_number(text) for text in spellings(value)}) == 1


@given(dynamo_numbers())
def test_parse_format_round_trip(value: Decimal) -> None:
    """format(parse(x)) == normalize(x) and parse keeps the numeric value."""
    text = str(value)
    assert parse_number(text) == value
    assert format_number(parse_number(text)) == normalize_number(text)
    assert Decimal(normalize_number(text)) == value


@given(st.from_regex(r"[+-]?0{0,3}[0-9]{0,40}(\.[0-9]{0,40})?([eE][+-]?[0-9]{1,3})?", fullmatch=True))
def test_fast_paths_agree_with_decimal(text: str) -> None:
    """Whatever shortcut normalize_number takes, the result is Decimal's value in normalized form (a zero written
    with an exponent out of range is refused, see test_zero_exponent_is_held_to_the_range)."""
    try:
        value = Decimal(text)
        if value.is_zero() and "e" in text.lower() and not (
                MIN_ADJUSTED_EXPONENT <= int(value.as_tuple().exponent) <= MAX_ADJUSTED_EXPONENT):
            raise ValidationException("out of range")
        expected = format_number(value)
    except (ValidationException, decimal.InvalidOperation):
        with pytest.raises(ValidationException):
            normalize_number(text)
        return
    assert normalize_number(text) == expected


@given(dynamo_numbers())
def test_normalized_form_shape(value: Decimal) -> None:
    """No exponent, no '+', no leading zeros, no trailing fractional zeros, no '-0'."""
    text = normalize_number(str(value))
    assert "e" not in text.lower() and "+" not in text
    body = text.lstrip("-")
    assert body == "0" or not body.startswith("0") or body.startswith("0.")
    assert not ("." in body and body.endswith("0")) and not body.endswith(".")
    assert text != "-0"


# --- arithmetic ------------------------------------------------------------------------------------------


def test_arithmetic_is_exact() -> None:
    """Decimal arithmetic, not float: 0.3 - 0.1 is 0.2."""
    assert subtract_numbers("0.3", "0.1") == "0.2"
    assert add_numbers("0.1", "0.2") == "0.3"
    assert add_numbers("9007199254740993", "1") == "9007199254740994"
    assert add_numbers("1" * 38, "-" + "1" * 38) == "0"


def _by_decimal(value: Decimal) -> str | None:
    try:
        return format_number(value)
    except ValidationException:
        return None


@given(st.integers(-(10**38) + 1, 10**38 - 1), st.integers(-(10**38) + 1, 10**38 - 1))
def test_integer_arithmetic_matches_decimal(a: int, b: int) -> None:
    """The integer fast path answers exactly as the Decimal path, 39-digit results and errors included."""
    for operation, exact in ((add_numbers, Decimal(a + b)), (subtract_numbers, Decimal(a - b))):
        expected = _by_decimal(exact)
        if expected is None:
            with pytest.raises(ValidationException):
                operation(str(a), str(b))
        else:
            assert operation(str(a), str(b)) == expected


def test_arithmetic_overflow() -> None:
    """DynamoDB answers overflow for MAX + 1E125 (ExtendDB/extenddb#94), though the sum also has 39 digits."""
    with pytest.raises(ValidationException) as info:
        add_numbers(MAX, "1E+125")
    assert info.value.message == MSG_OVERFLOW
    with pytest.raises(ValidationException) as info:
        subtract_numbers("-" + MAX, "1E+125")
    assert info.value.message == MSG_OVERFLOW


def test_arithmetic_precision() -> None:
    """A result needing more than 38 digits is an error, not silently rounded."""
    with pytest.raises(ValidationException) as info:
        add_numbers("1E+125", "1E-130")
    assert info.value.message == MSG_PRECISION


# Numbers of similar scale, so that most sums are representable (random DynamoDB numbers rarely are).
nearby = st.decimals(min_value=-(10**20), max_value=10**20, places=10, allow_nan=False, allow_infinity=False)


@given(st.one_of(dynamo_numbers(), nearby), st.one_of(dynamo_numbers(), nearby))
def test_add_and_subtract_match_exact_arithmetic(a: Decimal, b: Decimal) -> None:
    """Results equal the exact sum/difference when representable, and are rejected otherwise."""
    wide = decimal.Context(prec=500)
    for op, exact in ((add_numbers, wide.add(a, b)), (subtract_numbers, wide.subtract(a, b))):
        try:
            expected = format_number(exact)
        except ValidationException:
            with pytest.raises(ValidationException):
                op(str(a), str(b))
            continue
        assert op(str(a), str(b)) == expected


@given(dynamo_numbers(), dynamo_numbers())
def test_compare_numbers(a: Decimal, b: Decimal) -> None:
    """compare_numbers agrees with numeric order on normalized text."""
    x, y = normalize_number(str(a)), normalize_number(str(b))
    assert compare_numbers(x, y) == (a > b) - (a < b)


# --- size ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("0", 1),
        ("27", 2),
        ("-27", 3),  # negatives cost one byte more
        ("461", 3),
        ("1786461547", 6),  # getmoto/moto#10176: a 10-digit timestamp is 6 bytes
        ("1000", 2),  # trailing zeros trimmed
        ("0.001", 2),  # leading zeros trimmed
        ("1.5", 3),  # integer and fraction digits are halved separately
        ("123.45", 4),
        ("1" * 38, 20),
    ],
)
def test_number_size(text: str, size: int) -> None:
    """Sizes follow the measured DynamoDB rule (docs' rule for integers, per-part halves for fractions)."""
    assert number_size(text) == size
