"""Exact reals beyond Q: σ at rational points (docs/rules.md §8 "Symbolic constants").

silu, gelu, gelu_tanh, sigmoid and tanh take irrational values at every rational point but
0 (silu(1) = 1/(1 + e⁻¹), gelu(1) = Φ(1)). Two places need such values exactly: a biased
swiglu/geglu block's linear neuron (gate row 0, gate bias γ = 1) has down weights p/σ(γ),
and a biased gelu/silu witness's output bias c′ holds the constant neurons' Σ dᵢ σ(βᵢ).

A `Symbolic` is a Laurent polynomial over Q in *atoms* σ(β) (σ one of those kinds, β > 0
rational; σ(−β) is rewritten through σ's symmetry, e.g. silu(−1) = silu(1) − 1): Σₖ cₖ Πⱼ
σⱼ(βⱼ)^eⱼₖ. Sums, products and division by a monomial stay in that ring
and are exact; a formal identity between two such expressions is an identity of the reals
they denote (an atom with a negative power is non-zero: the prover only divides by atoms
whose sign `sign` proves). The converse fails (silu(2) is a rational function of silu(1)),
so formally different values are never taken to be different: `sign` decides that from a
rigorous enclosure (python-flint's arb interval arithmetic), or not at all. (For silu and
sigmoid, 1 and the σ(β), β > 0, are even linearly independent over Q — e^{1/N} is
transcendental and the largest β's pole is its own — so sums of constant neurons differ
exactly when they differ formally; enclosures find it.)

A value with no atom is returned as a plain Fraction, so rational code paths see Fractions.
Text form (certificates, docs/certificates.md): terms joined by " + " / " - ", each a rational
coefficient (left out when 1) times atoms `kind(β)` with an optional `^e`:
`1/2 + 3*silu(1) - silu(-1/2)^-1`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any

Atom = tuple[str, Fraction]  # (σ's kind, point β ≠ 0)
Monomial = tuple[tuple[Atom, int], ...]  # sorted atoms, non-zero exponents
Number = Any  # Fraction | int | Symbolic: what the arithmetic takes and returns

KINDS = ("gelu", "gelu_tanh", "sigmoid", "silu", "tanh")
AT_ZERO = {"gelu": Fraction(0), "gelu_tanh": Fraction(0), "sigmoid": Fraction(1, 2),
           "silu": Fraction(0), "tanh": Fraction(0)}
# σ(p) = c + s·p + t·σ(−p): σ(z) − σ(−z) = z (silu, gelu, gelu_tanh: O(1/2)), σ(z) + σ(−z) = 1
# (sigmoid), tanh odd. The checker re-derives each from σ's formula (checker/kernel/symbolic.py).
REFLECTION = {"gelu": (Fraction(0), Fraction(1), 1), "gelu_tanh": (Fraction(0), Fraction(1), 1),
              "silu": (Fraction(0), Fraction(1), 1), "sigmoid": (Fraction(1), Fraction(0), -1),
              "tanh": (Fraction(0), Fraction(0), -1)}
GELU_TANH_C = Fraction(44715, 10**6)
PRECISIONS = (64, 128, 256, 512, 1024, 2048, 4096)  # bits, tried in turn by float() and sign


class Symbolic:
    """Σ coefficient · monomial, with at least one monomial that is not 1 (else a Fraction)."""

    __slots__ = ("terms",)

    def __init__(self, terms: tuple[tuple[Monomial, Fraction], ...]) -> None:
        self.terms = terms  # sorted by monomial, coefficients non-zero

    # ---- construction ------------------------------------------------------------------
    @staticmethod
    def make(found: dict[Monomial, Fraction]) -> Number:
        terms = tuple(sorted((m, c) for m, c in found.items() if c != 0))
        if not terms:
            return Fraction(0)
        if len(terms) == 1 and terms[0][0] == ():
            return terms[0][1]
        return Symbolic(terms)

    def as_dict(self) -> dict[Monomial, Fraction]:
        return dict(self.terms)

    # ---- arithmetic --------------------------------------------------------------------
    def __add__(self, other: Number) -> Number:
        found = self.as_dict()
        for m, c in _terms(other):
            found[m] = found.get(m, Fraction(0)) + c
        return Symbolic.make(found)

    __radd__ = __add__

    def __neg__(self) -> Number:
        return Symbolic.make({m: -c for m, c in self.terms})

    def __sub__(self, other: Number) -> Number:
        return self + (-other)

    def __rsub__(self, other: Number) -> Number:
        return (-self) + other

    def __mul__(self, other: Number) -> Number:
        if not isinstance(other, Symbolic | Fraction | int):
            return NotImplemented
        found: dict[Monomial, Fraction] = {}
        for m1, c1 in self.terms:
            for m2, c2 in _terms(other):
                m = _product(m1, m2)
                found[m] = found.get(m, Fraction(0)) + c1 * c2
        return Symbolic.make(found)

    __rmul__ = __mul__

    def __truediv__(self, other: Number) -> Number:
        return self * inverse(other)

    def __rtruediv__(self, other: Number) -> Number:
        return other * inverse(self)

    def __eq__(self, other: object) -> bool:  # formal: equal expressions (see the module doc)
        return isinstance(other, Symbolic) and self.terms == other.terms

    def __hash__(self) -> int:
        return hash(self.terms)

    def __bool__(self) -> bool:
        return True  # formally non-zero (its value may still be 0: `sign` tells)

    # ---- order, by enclosure -----------------------------------------------------------
    def __lt__(self, other: Number) -> bool:
        return sign(self - other) < 0

    def __gt__(self, other: Number) -> bool:
        return sign(self - other) > 0

    def __le__(self, other: Number) -> bool:
        return sign(self - other) <= 0

    def __ge__(self, other: Number) -> bool:
        return sign(self - other) >= 0

    def __abs__(self) -> Number:
        return -self if sign(self) < 0 else self

    def __float__(self) -> float:
        """The nearest float64, exactly: the enclosure narrowed until both ends round to
        the same float (rounding to nearest is monotone, so the value rounds there too)."""
        def same(ball: Any) -> float | None:
            low, high = float(ball.lower()), float(ball.upper())
            return low if low == high else None

        found = _narrowed(self, same)
        if found is None:
            raise ArithmeticError(f"{self} lies too close to a float64 rounding boundary")
        return float(found)

    def __str__(self) -> str:
        out = ""
        for n, (m, c) in enumerate(self.terms):
            atoms = "*".join(f"{k}({p})" + (f"^{e}" if e != 1 else "") for (k, p), e in m)
            body = (str(abs(c)) if not atoms else atoms if abs(c) == 1
                    else f"{abs(c)}*{atoms}")
            out += ("-" if c < 0 else "") + body if n == 0 else (" - " if c < 0 else " + ") + body
        return out

    def __repr__(self) -> str:
        return f"Symbolic({str(self)!r})"


def _terms(x: Number) -> Iterable[tuple[Monomial, Fraction]]:
    if isinstance(x, Symbolic):
        return x.terms
    return (((), Fraction(x)),)


def _product(a: Monomial, b: Monomial) -> Monomial:
    powers = dict(a)
    for atom_, e in b:
        powers[atom_] = powers.get(atom_, 0) + e
    return tuple(sorted((k, e) for k, e in powers.items() if e != 0))


def inverse(x: Number) -> Number:
    """1/x for a rational x ≠ 0 or a single term c·monomial (c ≠ 0); a sum has no inverse
    in the ring: ValueError."""
    if not isinstance(x, Symbolic):
        return 1 / Fraction(x)
    if len(x.terms) != 1:
        raise ValueError(f"{x} is a sum: no exact inverse")
    [(m, c)] = x.terms
    return Symbolic.make({tuple((a, -e) for a, e in m): 1 / c})


def atom(kind: str, point: Fraction) -> Number:
    """σ(point) for σ one of KINDS, exactly: a rational at 0, an atom σ(β) with β > 0
    elsewhere — a negative point is reflected, σ(p) = c + s·p + t·σ(−p) (REFLECTION), so
    that equal values of one σ at ±β have one form."""
    if kind not in KINDS:
        raise ValueError(f"{kind} has no symbolic values")
    point = Fraction(point)
    if point == 0:
        return AT_ZERO[kind]
    if point < 0:
        c, slope, t = REFLECTION[kind]
        return c + slope * point + t * atom(kind, -point)
    monomial: Monomial = (((kind, point), 1),)
    return Symbolic(((monomial, Fraction(1)),))


def sigma_at(scalar: Any, point: Fraction) -> Number:
    """σ(point) exactly for an activation's scalar: Scalar.exact where σ is rational on Q,
    else `atom` (ValueError for a kind with neither)."""
    if scalar.is_rational:
        return scalar.exact(Fraction(point))
    return atom(scalar.kind, point)


def atoms_of(x: Number) -> set[Atom]:
    return {a for m, _ in _terms(x) for a, _ in m}


def linear_part(x: Number, kind: str) -> tuple[Fraction, dict[Fraction, Fraction]] | None:
    """(r, {β: c}) with x = r + Σ c·kind(β), or None when x has any other monomial."""
    rational, found = Fraction(0), {}
    for m, c in _terms(x):
        if m == ():
            rational = c
        elif len(m) == 1 and m[0][1] == 1 and m[0][0][0] == kind:
            found[m[0][0][1]] = c
        else:
            return None
    return rational, found


# ---- enclosures (python-flint arb) -----------------------------------------------------------
# σ's formulas in arb, here (fast to import); the checker evaluates σ's own sympy formula
# instead (checker/kernel/symbolic.py) and decides every sign a certificate needs by itself.

def enclosure(x: Number, bits: int = 128) -> Any:
    """A flint.arb ball that contains x, computed at `bits` of working precision."""
    import flint

    with flint.ctx.workprec(bits):
        total = flint.arb(0)
        for m, c in _terms(x):
            term = _arb(c)
            for (kind, point), e in m:
                value = _atom_arb(kind, point, bits)
                term *= value ** e if e > 0 else 1 / value ** (-e)
            total += term
        return total


def _arb(value: Fraction) -> Any:
    import flint

    return flint.arb(flint.fmpq(value.numerator, value.denominator))


@functools.lru_cache(maxsize=4096)
def _atom_arb(kind: str, point: Fraction, bits: int) -> Any:
    """σ(point) in arb at `bits`, from σ's formula (docs/language.md's table)."""
    import flint

    with flint.ctx.workprec(bits):
        z = _arb(point)
        if kind == "silu":
            return z / (1 + (-z).exp())
        if kind == "sigmoid":
            return 1 / (1 + (-z).exp())
        if kind == "tanh":
            return z.tanh()
        if kind == "gelu":
            return z / 2 * (1 + (z / flint.arb(2).sqrt()).erf())
        if kind == "gelu_tanh":
            inner = (2 / flint.arb.pi()).sqrt() * (z + _arb(GELU_TANH_C) * z ** 3)
            return z / 2 * (1 + inner.tanh())
    raise ValueError(f"{kind} has no symbolic values")


def _narrowed(x: Number, settle: Callable[[Any], Any]) -> Any:
    """settle(ball) for the first enclosure of x, at 64 to 4096 bits, on which it is not None
    (called within that precision, so the ball's exact ends are available); None if none."""
    import flint

    for bits in PRECISIONS:
        with flint.ctx.workprec(bits):
            found = settle(enclosure(x, bits))
        if found is not None:
            return found
    return None


def sign(x: Number) -> int:
    """The sign of x, proved: exact for a rational, from an enclosure that excludes 0
    otherwise. ArithmeticError when no enclosure up to 4096 bits does (x may be 0)."""
    if not isinstance(x, Symbolic):
        return (Fraction(x) > 0) - (Fraction(x) < 0)
    found = _narrowed(x, lambda ball: 1 if ball > 0 else -1 if ball < 0 else None)
    if found is None:
        raise ArithmeticError(f"the sign of {x} is not proved (it may be 0)")
    return int(found)


def nonzero(x: Number) -> bool:
    """x ≠ 0, proved (False: x = 0, or not proved)."""
    try:
        return sign(x) != 0
    except ArithmeticError:
        return False


def text(x: Number) -> str:
    """The certificate text of an exact value (a rational as `str(Fraction)`)."""
    return str(x) if isinstance(x, Symbolic) else str(Fraction(x))
