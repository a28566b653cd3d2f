"""The checker's own reading of symbolic certificate values (docs/certificates.md,
"Symbolic values"): σ at rational points, which no rational can hold.

A value is `r + Σₖ cₖ Πⱼ σⱼ(βⱼ)^eⱼₖ` written as terms joined by " + " / " - ", each a
rational coefficient (absent: 1) times atoms `kind(β)` with an optional `^e`, e.g.
`1/2 + 3*silu(1) - gelu(1/2)^-1`, each atom at a point β > 0. It is parsed into a map
monomial ↦ coefficient (a Laurent polynomial over Q in the atoms); sums and rational
multiples are formal, so two values with the same map are the same real. This module is the
formal part only (parsing, sums, printing), which the prover uses to read the values too;
what needs σ's formula — an atom at β < 0 through its proved reflection, and whether a value
is non-zero, by arb enclosures — is the checker's `lemmas/values.py`.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from .contract import Invalid

Monomial = tuple[tuple[tuple[str, Fraction], int], ...]
Poly = dict[Monomial, Fraction]  # {(): r} for a rational r; zero coefficients left out

KINDS = frozenset({"gelu", "gelu_tanh", "sigmoid", "silu", "tanh"})  # σ irrational on Q \ {0}
MAX_EXPONENT = 16
MAX_TERMS = 256
_RATIONAL = r"\d+(?:/\d+)?"
_ATOM = re.compile(rf"([a-z_]+)\((-?{_RATIONAL})\)(?:\^(-?\d+))?")
_SPLIT = re.compile(r" ([+-]) ")


def parse(text: Any) -> Poly:
    """The value a certificate string denotes: a rational (`Fraction`'s syntax) or a sum of
    terms as in the module docstring. Atoms at 0 are refused (σ(0) is rational)."""
    if not isinstance(text, str):
        raise Invalid(f"expected a number as a string, got {text!r}")
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        pass
    else:
        return {(): value} if value else {}
    pieces = _SPLIT.split(text.strip())
    if len(pieces) > 2 * MAX_TERMS:
        raise Invalid("too many terms")
    signs = ["+", *pieces[1::2]]
    out: Poly = {}
    for sign, term in zip(signs, pieces[0::2], strict=True):
        monomial, coefficient = _term(term)
        coefficient = -coefficient if sign == "-" else coefficient
        out[monomial] = out.get(monomial, Fraction(0)) + coefficient
    return {m: c for m, c in out.items() if c != 0}


def _term(text: str) -> tuple[Monomial, Fraction]:
    negative = text.startswith("-")
    parts = (text[1:] if negative else text).split("*")
    coefficient = Fraction(1)
    if re.fullmatch(_RATIONAL, parts[0]):
        coefficient = Fraction(parts.pop(0))
    powers: dict[tuple[str, Fraction], int] = {}
    for part in parts:
        found = _ATOM.fullmatch(part)
        if found is None:
            raise Invalid(f"{part!r} is neither a rational nor an atom kind(β)^e")
        kind, point, exponent = found.group(1), Fraction(found.group(2)), int(found.group(3) or 1)
        if kind not in KINDS or point == 0 or exponent == 0 or abs(exponent) > MAX_EXPONENT:
            raise Invalid(f"{part!r}: not an atom σ(β), β ≠ 0, of {sorted(KINDS)}")
        powers[kind, point] = powers.get((kind, point), 0) + exponent
    if coefficient == 0:
        raise Invalid(f"{text!r} has a zero coefficient")
    if any(point < 0 for (_, point) in powers):
        raise Invalid(f"{text!r}: an atom at a negative point (written σ(β), β > 0)")
    monomial = tuple(sorted((a, e) for a, e in powers.items() if e != 0))
    return monomial, -coefficient if negative else coefficient


def rational(value: Fraction) -> Poly:
    return {(): value} if value else {}


def add(a: Poly, b: Poly, scale: Fraction = Fraction(1)) -> Poly:
    """a + scale·b."""
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, Fraction(0)) + scale * c
    return {m: c for m, c in out.items() if c != 0}


def as_rational(value: Poly) -> Fraction | None:
    """The value when it has no atom, else None."""
    if any(m != () for m in value):
        return None
    return value.get((), Fraction(0))


def text(value: Poly) -> str:
    """A rational as its string; otherwise the terms in a fixed order (for messages and for
    comparing stored forms with recomputed ones)."""
    found = as_rational(value)
    if found is not None:
        return str(found)
    out = []
    for m, c in sorted(value.items()):
        atoms = "*".join(f"{k}({p})" + (f"^{e}" if e != 1 else "") for (k, p), e in m)
        body = str(abs(c)) if not atoms else atoms if abs(c) == 1 else f"{abs(c)}*{atoms}"
        out.append(("-" if c < 0 else "+", body))
    first = ("-" if out[0][0] == "-" else "") + out[0][1]
    return first + "".join(f" {s} {b}" for s, b in out[1:])
