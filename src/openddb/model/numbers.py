"""DynamoDB numbers: validation, normalization, exact arithmetic and size.

A DynamoDB number is a decimal with at most 38 significant digits whose magnitude is 0 or lies in
[1E-130, 9.9999999999999999999999999999999999999E+125]. On the wire it is a string; inside the server it is
kept in the *normalized* form DynamoDB returns: plain notation (no exponent), no leading zeros, no trailing
fractional zeros, no "+", and "0" for every zero. Equal numbers therefore have equal normalized strings.
"""

from __future__ import annotations

import decimal
import re
from decimal import Decimal

from openddb.errors import ValidationException

MAX_DIGITS = 38
# Bounds on the exponent of the most significant digit (DynamoDB's documented range).
MAX_ADJUSTED_EXPONENT = 125
MIN_ADJUSTED_EXPONENT = -130

MSG_NOT_A_NUMBER = "The parameter cannot be converted to a numeric value"
MSG_PRECISION = "Attempting to store more than 38 significant digits in a Number"
MSG_OVERFLOW = "Number overflow. Attempting to store a number with magnitude larger than supported range"
MSG_UNDERFLOW = "Number underflow. Attempting to store a number with magnitude smaller than supported range"

# DynamoDB's grammar: optional sign, digits with an optional point (at least one digit), optional exponent.
# No whitespace, no "Infinity"/"NaN", no underscores (all of which Decimal() would accept), ASCII digits only.
_NUMBER = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?", re.ASCII)

# Already-normalized text. At most 38 characters long it can hold neither 39 digits nor a magnitude outside
# DynamoDB's range, so it needs no further checks (the hot path for stored and typical client numbers).
_NORMALIZED = re.compile(r"-?(?:[1-9][0-9]*|0(?=\.))(?:\.[0-9]*[1-9])?|0", re.ASCII)

# Exact for any sum or difference of two in-range numbers: their digits span at most
# 125 + 130 + 38 decimal places, so 320 digits of precision never rounds.
_EXACT = decimal.Context(prec=320, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[decimal.InvalidOperation])

# Exponent strings longer than this are out of range whatever the mantissa (and int() of them is slow).
_MAX_EXPONENT_CHARS = 12


def _not_a_number(text: str) -> ValidationException:
    # Real DynamoDB echoes the rejected text after a colon ("...numeric value: NaN"), an empty one too
    # ("...numeric value: ", recorded in every region of paritysuite's 2026-09-20 cross-region run).
    return ValidationException(f"{MSG_NOT_A_NUMBER}: {text}")


def _split(text: str, *, sent: bool = False) -> tuple[bool, str, int]:
    """Parse ``text`` into ``(negative, digits, exponent)`` with value ``digits * 10**exponent``.

    ``digits`` has no leading or trailing zeros ("" for zero) and the result is range- and precision-checked.
    Raises ValidationException with DynamoDB's messages.
    """
    match = _NUMBER.fullmatch(text)
    if match is None:
        raise _not_a_number(text)
    sign, whole, frac, exp_text = match.groups()
    frac = frac or ""
    if not whole and not frac:
        raise _not_a_number(text)
    mantissa = (whole + frac).lstrip("0")
    digits = mantissa.rstrip("0")
    # Range before precision: DynamoDB answers "Number overflow" for 9.99..9E+125 + 1E+125, whose exact
    # result also has 39 digits (ExtendDB/extenddb#94, captured from DynamoDB).
    exp_value = 0
    if exp_text is not None:
        exp_digits = exp_text.lstrip("+-").lstrip("0")
        if len(exp_digits) > _MAX_EXPONENT_CHARS:
            raise ValidationException(MSG_UNDERFLOW if exp_text.startswith("-") else MSG_OVERFLOW)
        # (int() of the text itself would refuse an exponent written with thousands of leading zeros)
        exp_value = int(exp_digits or "0")
        if exp_text.startswith("-"):
            exp_value = -exp_value
    if not mantissa:
        # A zero a client writes with an exponent is held to the range too: DynamoDB no longer takes 0e1000
        # (scylladb issue 26079, from a run against DynamoDB in 2025). (An exact result of zero is just 0.)
        if sent and exp_text is not None:
            if exp_value - len(frac) > MAX_ADJUSTED_EXPONENT:
                raise ValidationException(MSG_OVERFLOW)
            if exp_value - len(frac) < MIN_ADJUSTED_EXPONENT:
                raise ValidationException(MSG_UNDERFLOW)
        return False, "", 0
    exponent = exp_value - len(frac) + (len(mantissa) - len(digits))
    adjusted = exponent + len(digits) - 1
    if adjusted > MAX_ADJUSTED_EXPONENT:
        raise ValidationException(MSG_OVERFLOW)
    if adjusted < MIN_ADJUSTED_EXPONENT:
        raise ValidationException(MSG_UNDERFLOW)
    if len(digits) > MAX_DIGITS:
        raise ValidationException(MSG_PRECISION)
    return sign == "-", digits, exponent


def _join(negative: bool, digits: str, exponent: int) -> str:
    """Render a checked ``(negative, digits, exponent)`` triple in normalized plain notation."""
    if not digits:
        return "0"
    if exponent >= 0:
        body = digits + "0" * exponent
    elif len(digits) > -exponent:
        body = digits[:exponent] + "." + digits[exponent:]
    else:
        body = "0." + "0" * (-exponent - len(digits)) + digits
    return "-" + body if negative else body


def _is_plain_integer(text: str) -> bool:
    """True when ``text`` is already a normalized integer of at most 38 digits (the common case)."""
    body = text[1:] if text[:1] == "-" else text
    return 0 < len(body) <= MAX_DIGITS and body.isascii() and body.isdigit() and (body[0] != "0" or text == "0")


def normalize_number(text: str) -> str:
    """Validate a wire number string and return DynamoDB's normalized text for it.

    Raises ValidationException for malformed text, more than 38 significant digits, or a magnitude
    outside DynamoDB's range.
    """
    if _is_plain_integer(text) or (len(text) <= MAX_DIGITS and _NORMALIZED.fullmatch(text)):
        return text
    return _join(*_split(text, sent=True))


def parse_number(text: str) -> Decimal:
    """Validate a wire number string and return it as an exact Decimal (see ``normalize_number``)."""
    negative, digits, exponent = _split(text)
    if not digits:
        return Decimal(0)
    return Decimal((1 if negative else 0, tuple(map(int, digits)), exponent))


def format_number(value: Decimal) -> str:
    """Return DynamoDB's normalized text for ``value``, checking range and precision as on input.

    Used for arithmetic results; NaN and infinities are rejected as not-a-number.
    """
    if not value.is_finite():
        raise _not_a_number(str(value))
    return _join(*_split(str(value)))


def add_numbers(a: str, b: str) -> str:
    """Exact ``a + b`` of two numbers, normalized; errors if the result is not a valid DynamoDB number."""
    if _is_plain_integer(a) and _is_plain_integer(b):  # counters: integer arithmetic, no Decimal round trip
        total = str(int(a) + int(b))
        if _is_plain_integer(total):
            return total
    return format_number(_EXACT.add(parse_number(a), parse_number(b)))


def subtract_numbers(a: str, b: str) -> str:
    """Exact ``a - b`` of two numbers, normalized; errors if the result is not a valid DynamoDB number."""
    if _is_plain_integer(a) and _is_plain_integer(b):
        difference = str(int(a) - int(b))
        if _is_plain_integer(difference):
            return difference
    return format_number(_EXACT.subtract(parse_number(a), parse_number(b)))


def compare_numbers(a: str, b: str) -> int:
    """-1, 0 or 1 as the normalized numbers ``a`` and ``b`` compare numerically."""
    if a == b:
        return 0
    if _is_plain_integer(a) and _is_plain_integer(b):
        return -1 if int(a) < int(b) else 1
    return -1 if Decimal(a) < Decimal(b) else 1


def number_size(normalized: str) -> int:
    """Bytes DynamoDB counts for a normalized number.

    The Developer Guide gives "approximately 1 byte per two significant digits, plus 1 byte". Measured
    against DynamoDB the exact figure is 1 byte, plus half the integer digits and half the fraction digits
    (each rounded up, with leading and trailing zeros of the whole value trimmed), plus 1 for a negative
    number (nubo-db/dynoxide#195, bisected against eu-west-2). For integers the two rules agree.
    """
    negative = normalized[:1] == "-"
    body = normalized[1:] if negative else normalized
    whole, _, frac = body.partition(".")
    whole = whole.lstrip("0")
    if not frac:
        whole = whole.rstrip("0")
    elif not whole:
        frac = frac.lstrip("0")
    return 1 + (len(whole) + 1) // 2 + (len(frac) + 1) // 2 + negative
