"""Numbers are exact rationals (docs/language.md, "Lexical rules")."""

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from absorb_formal.language.numbers import NumberError, exact_decimal, parse_decimal, parse_rational


@pytest.mark.parametrize(("text", "value"), [
    ("3", Fraction(3)), ("-2", Fraction(-2)), ("7/10", Fraction(7, 10)),
    ("-0.25", Fraction(-1, 4)), ("1e-3", Fraction(1, 1000)), ("2.5E+2", Fraction(250)),
    ("0.1", Fraction(1, 10)), (".5", Fraction(1, 2)), ("5.", Fraction(5)),
    ("1.5/0.5", Fraction(3)), ("-6/4", Fraction(-3, 2)), ("0", Fraction(0)),
])
def test_literals_denote_exact_values(text, value):
    assert parse_rational(text) == value


def test_decimal_is_not_the_nearest_float():
    assert parse_rational("0.1") != Fraction(0.1)


@given(st.fractions(max_denominator=10**6))
def test_fraction_text_round_trips(value):
    assert parse_rational(str(value)) == value


@given(st.decimals(allow_nan=False, allow_infinity=False, places=6))
def test_decimal_text_round_trips(value):
    assert parse_rational(str(value)) == Fraction(value)


@pytest.mark.parametrize(("text", "fragment"), [
    ("1/0", "division by zero"), ("1/0.0", "division by zero"),
    ("9" * 4001, "significant digits"), ("1e4001", "exponent"), ("1e-99999999999", "exponent"),
])
def test_bad_literals_are_refused(text, fragment):
    with pytest.raises(NumberError, match=fragment):
        parse_rational(text)


def test_zeros_do_not_count_as_digits():
    assert parse_rational("0" * 5000 + "1") == 1


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_a_floats_exact_decimal_reads_back_as_that_float(x):
    text = exact_decimal(Fraction(x))
    assert parse_decimal(text) == Fraction(x)
    assert "e" not in text and not text.endswith(".") and (text == "0" or text[-1] != "0"
                                                          or "." not in text)


def test_exact_decimals_of_known_values():
    assert exact_decimal(Fraction(-3, 8)) == "-0.375"
    assert exact_decimal(Fraction(1200)) == "1200"
    assert exact_decimal(Fraction(13421773, 134217728)) == "0.100000001490116119384765625"
    with pytest.raises(ValueError):
        exact_decimal(Fraction(1, 3))
