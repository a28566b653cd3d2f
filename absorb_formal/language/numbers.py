"""Exact rational literals (docs/language.md, "Lexical rules"): `0.1` is 1/10, never a binary
float."""

from __future__ import annotations

import re
from fractions import Fraction

# Python refuses int() of more than 4300 digits, and `1e999999999` would take forever to
# expand: both limits are checked before any arithmetic, so a hostile literal costs nothing.
MAX_DIGITS = 4000
MAX_EXPONENT = 4000

_DECIMAL = re.compile(r"(-?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?\Z")


class NumberError(ValueError):
    """A literal that is well-formed but cannot be taken as an exact rational."""


def parse_decimal(text: str) -> Fraction:
    """The exact value of `[-]digits[.digits][e[+-]digits]`."""
    match = _DECIMAL.match(text)
    if match is None or not (match.group(2) or match.group(3)):
        raise NumberError(f"malformed number {text!r}")
    sign, whole, frac, exp = match.groups()
    frac = frac or ""
    digits = (whole + frac).lstrip("0") or "0"
    if len(digits) > MAX_DIGITS:
        raise NumberError(f"number has more than {MAX_DIGITS} significant digits")
    # Check the exponent's length first: int() of a million-digit exponent is slow too.
    if exp is not None and (len(exp) > 8 or abs(int(exp)) > MAX_EXPONENT):
        raise NumberError(f"exponent of {text[:40]!r} is out of range (|e| <= {MAX_EXPONENT})")
    power = (int(exp) if exp is not None else 0) - len(frac)
    value = Fraction(int(digits)) * (Fraction(10) ** power)
    return -value if sign else value


def parse_rational(text: str) -> Fraction:
    """The exact value of a NUMBER token: a decimal, or `decimal/decimal`."""
    numerator, slash, denominator = text.partition("/")
    value = parse_decimal(numerator)
    if not slash:
        return value
    below = parse_decimal(denominator)
    if below == 0:
        raise NumberError("division by zero")
    return value / below


def format_rational(value: Fraction) -> str:
    """`3`, `-7/10`: the form used in output and certificates."""
    return str(value)


def exact_decimal(value: Fraction) -> str:
    """The exact decimal text of a rational whose denominator divides a power of ten (every
    binary float's value does): `0.00000999999974737875163555145263671875` for the float32
    nearest 1e-5. `parse_decimal` reads it back as the same value. ValueError for others
    (1/3 has no exact decimal)."""
    numerator, denominator = value.numerator, value.denominator
    twos = (denominator & -denominator).bit_length() - 1
    fives, rest = 0, denominator >> twos
    while rest % 5 == 0:
        rest //= 5
        fives += 1
    if rest != 1:
        raise ValueError(f"{value} has no exact decimal")
    places = max(twos, fives)
    digits = str(abs(numerator) * 10**places // denominator).rjust(places + 1, "0")
    whole, frac = digits[:len(digits) - places], digits[len(digits) - places:].rstrip("0")
    return ("-" if numerator < 0 else "") + whole + (f".{frac}" if frac else "")
