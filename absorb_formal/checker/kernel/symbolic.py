"""The checker's own reading of symbolic certificate values (docs/certificates.md,
"Symbolic values"): σ at rational points, which no rational can hold.

A value is `r + Σₖ cₖ Πⱼ σⱼ(βⱼ)^eⱼₖ` written as terms joined by " + " / " - ", each a
rational coefficient (absent: 1) times atoms `kind(β)` with an optional `^e`, e.g.
`1/2 + 3*silu(1) - gelu(1/2)^-1`, each atom at a point β > 0 (a constant neuron σ(−β) reads
as its reflection, `reflection`). It is parsed into a map monomial ↦ coefficient (a
Laurent polynomial over Q in the atoms); sums and rational multiples are formal, so two
values with the same map are the same real. Whether a value is non-zero is decided only from
an enclosure: each atom evaluated from σ's own sympy formula (`lemma_proofs.formula`) in
python-flint's arb ball arithmetic, at growing precision, until the ball excludes 0.
"""

from __future__ import annotations

import functools
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
BITS = (64, 128, 256, 512, 1024, 2048, 4096)


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


def atom(kind: str, point: Fraction) -> Poly:
    """σ(β) as a value: the atom σ(β) for β > 0; for β < 0 the reflection c + s·β + t·σ(−β)
    that `reflection` proves (Invalid for σ rational on Q or β = 0)."""
    if kind not in KINDS or point == 0:
        raise Invalid(f"{kind}({point}) is not an atom")
    if point > 0:
        return {(((kind, point), 1),): Fraction(1)}
    c, slope, t = reflection(kind)
    return add(rational(c + slope * point), atom(kind, -point), Fraction(t))


def reflection(kind: str) -> tuple[Fraction, Fraction, int]:
    """(c, s, t) with σ(z) = c + s·z + t·σ(−z), re-proved (`lemmas.reflection`)."""
    from ..lemmas.relied import reflection as proved

    found = proved(kind)
    if found is None:
        raise Invalid(f"no reflection σ(−z) of {kind} is proved")
    return found


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


# ---- enclosures ------------------------------------------------------------------------

def _ball(expression: Any, point: Fraction) -> Any:
    """σ's sympy formula at z = point as an arb ball (working precision set by the caller):
    constants, z, +, ×, integer and half-integer powers, exp, erf, tanh, π, e; anything
    else is refused."""
    import flint
    import sympy as sp

    def walk(node: Any) -> Any:
        if node.is_Symbol:
            return flint.arb(flint.fmpq(point.numerator, point.denominator))
        if node.is_Rational:
            return flint.arb(flint.fmpq(int(node.p), int(node.q)))
        if node == sp.pi:
            return flint.arb.pi()
        if node == sp.E:
            return flint.arb(1).exp()
        if isinstance(node, sp.Add):
            total = flint.arb(0)
            for arg in node.args:
                total += walk(arg)
            return total
        if isinstance(node, sp.Mul):
            product = flint.arb(1)
            for arg in node.args:
                product *= walk(arg)
            return product
        if isinstance(node, sp.Pow):
            base, exponent = node.args
            value = walk(base)
            if exponent.is_Integer:
                n = int(exponent)
                return value ** n if n >= 0 else 1 / value ** (-n)
            if exponent == sp.Rational(1, 2):
                return value.sqrt()
            if exponent == sp.Rational(-1, 2):
                return 1 / value.sqrt()
        if isinstance(node, sp.exp):
            return walk(node.args[0]).exp()
        if isinstance(node, sp.erf):
            return walk(node.args[0]).erf()
        if isinstance(node, sp.tanh):
            return walk(node.args[0]).tanh()
        raise Invalid(f"no enclosure for {node}")

    return walk(expression)


def enclosure(value: Poly, bits: int) -> Any:
    """An arb ball containing the value, each atom from σ's formula."""
    import flint

    with flint.ctx.workprec(bits):
        total = flint.arb(0)
        for m, c in value.items():
            term = flint.arb(flint.fmpq(c.numerator, c.denominator))
            for (kind, point), e in m:
                ball = _atom_ball(kind, point, bits)
                term *= ball ** e if e > 0 else 1 / ball ** (-e)
            total += term
        return total


@functools.lru_cache(maxsize=4096)
def _atom_ball(kind: str, point: Fraction, bits: int) -> Any:
    """σ(point) as an arb ball at `bits` (a wide construction repeats one atom many times)."""
    import flint

    from ..lemmas.proofs import formula

    with flint.ctx.workprec(bits):
        return _ball(formula({"kind": kind}), point)


def sign(value: Poly) -> int | None:
    """The value's sign, proved by an enclosure that excludes 0 (exact for a rational);
    None when none up to 4096 bits does."""
    found = as_rational(value)
    if found is not None:
        return (found > 0) - (found < 0)
    for bits in BITS:
        ball = enclosure(value, bits)
        if ball > 0:
            return 1
        if ball < 0:
            return -1
    return None


def nonzero_at(activation: dict[str, Any], point: Fraction) -> bool:
    """σ(point) ≠ 0 (docs/rules.md §8: a gated neuron with gate row 0 and gate bias `point` is
    the linear neuron σ(point)·(u·x + β)): exactly when sympy reduces σ(point) to a rational,
    else by an arb enclosure of σ's formula at `point` that excludes 0 (`sign`)."""
    import sympy as sp

    from ..lemmas.proofs import Z, formula

    value = sp.simplify(formula(activation).subs(Z, sp.Rational(str(point))))
    if value.is_Rational:
        return bool(value != 0)
    try:
        return sign(atom(activation["kind"], point)) not in (0, None)
    except Invalid:  # no atom for this σ: not proved
        return False
