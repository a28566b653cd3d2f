"""σ at rational points, beyond the formal values of `kernel/symbolic.py` (docs/certificates.md,
"Symbolic values"): an atom σ(β) at β < 0 through σ's reflection (σ(z) = c + s·z + t·σ(−z),
re-proved from σ's formula: `relied.reflection`), and whether a value is non-zero, decided
only from an enclosure: each atom evaluated from σ's own sympy formula (`proofs.formula`)
in python-flint's arb ball arithmetic, at growing precision, until the ball excludes 0.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any

from ..kernel.contract import Invalid
from ..kernel.symbolic import KINDS, Poly, add, as_rational, rational

BITS = (64, 128, 256, 512, 1024, 2048, 4096)


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
    from .relied import reflection as proved

    found = proved(kind)
    if found is None:
        raise Invalid(f"no reflection σ(−z) of {kind} is proved")
    return found


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

    from .proofs import formula

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

    from .proofs import Z, formula

    value = sp.simplify(formula(activation).subs(Z, sp.Rational(str(point))))
    if value.is_Rational:
        return bool(value != 0)
    try:
        return sign(atom(activation["kind"], point)) not in (0, None)
    except Invalid:  # no atom for this σ: not proved
        return False
