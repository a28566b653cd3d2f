"""The checker's own proofs of activation lemmas (docs/rules.md §2), from σ's formula, in
sympy: the work behind `lemmas.py`, which keeps their results (on disk too) and is what the
rest of the checker asks.

Each lemma is re-proved here from scratch: an identity by simplifying it on the three sign
cases z = p > 0, z = −p, z = 0; a limit by sympy's limit. A lemma that cannot be re-proved
makes the certificate invalid. An activation is named by `key`: its JSON text, keys sorted
(`lemmas.key`).
"""

from __future__ import annotations

import functools
import json
from fractions import Fraction
from typing import Any

import sympy as sp

Z = sp.Symbol("z", real=True)
P = sp.Symbol("p", positive=True)
T = sp.Symbol("t", positive=True)


def formula(activation: dict[str, Any]) -> sp.Expr:
    """σ(Z) from docs/language.md's table (gated activations name their gate function)."""
    kind = activation["kind"]
    if kind == "relu":
        return sp.Max(0, Z)
    if kind == "leaky_relu":
        return sp.Piecewise((Z, Z >= 0), (sp.Rational(activation["param"]) * Z, True))
    if kind == "relu_pow":
        return sp.Max(0, Z) ** int(activation["power"])
    if kind == "abs":
        return sp.Abs(Z)
    if kind == "identity":
        return Z
    if kind == "poly":
        return sum((sp.Rational(c) * Z**i for i, c in enumerate(activation["coeffs"])),
                   sp.Integer(0))
    if kind == "gelu":
        return Z / 2 * (1 + sp.erf(Z / sp.sqrt(2)))
    if kind == "gelu_tanh":
        return Z / 2 * (1 + sp.tanh(sp.sqrt(2 / sp.pi) * (Z + sp.Rational(44715, 10**6) * Z**3)))
    if kind == "silu":
        return Z / (1 + sp.exp(-Z))
    if kind == "tanh":
        return sp.tanh(Z)
    if kind == "sigmoid":
        return 1 / (1 + sp.exp(-Z))
    raise ValueError(f"unknown activation kind {kind!r}")


def _simplified(expr: sp.Expr) -> sp.Expr:
    """expr in a simpler form: `expand` first (milliseconds; enough for every activation of
    docs/language.md, e.g. gelu_tanh's tanh(−x) = −tanh(x)), `simplify` (a fraction of a
    second each) only where expand leaves a non-constant. Both rewrite expr into an equal
    expression."""
    quick = sp.expand(expr)
    return quick if not quick.free_symbols else sp.simplify(expr)


def _vanishes(expr: sp.Expr) -> bool:
    for case in (P, -P, sp.Integer(0)):
        if _simplified(sp.piecewise_fold(expr.subs(Z, case))) != 0:
            return False
    return True


def _limit(expr: sp.Expr, point: Any) -> Any:
    """The limit as P → point, taken of the expanded expression (an equal one, on which
    sympy's limit is often ten times quicker), else of expr as given."""
    for form in (sp.expand(expr), expr):
        try:
            return sp.limit(form, P, point)
        except Exception:  # undecided limit: the lemma is not re-proved
            continue
    return sp.nan


def _finite(value: Any) -> bool:
    return bool(value.is_finite) and value.is_real is True


@functools.cache
def odd_slope(key: str) -> Fraction | None:
    """a with σ(z) − σ(−z) = 2az, re-derived and re-proved (None if there is none)."""
    s = formula(json.loads(key))
    a = _simplified((s.subs(Z, P) - s.subs(Z, -P)) / (2 * P))
    if a.free_symbols or not a.is_Rational or a == 0:
        return None
    if not _vanishes(s - s.subs(Z, -Z) - 2 * a * Z):
        return None
    return Fraction(int(a.p), int(a.q))


@functools.cache
def holds(key: str, name: str, value: str | None) -> bool:
    """Re-prove one lemma: H (value k), E, Bd, F, O / Lin / N (value a), Og / OgN (value c),
    Sq (σ(z) + σ(−z) = v z², value v), An, zero (σ(0) = 0)."""
    activation = json.loads(key)
    s = formula(activation)
    v: Any = sp.Integer(0) if value is None else sp.Rational(value)
    if name == "H":
        return _vanishes(s.subs(Z, T * Z) - T**v * s)
    if name == "E":
        return _vanishes(s.subs(Z, -Z) - s)
    if name == "O":
        return v != 0 and _vanishes(s - s.subs(Z, -Z) - 2 * v * Z)
    if name == "Og":
        return v != 0 and _vanishes(s + s.subs(Z, -Z) - 2 * v)
    if name == "OgN":  # §5: o = σ − c odd (Og), analytic (An) and not a polynomial
        return holds(key, "Og", value) and holds(key, "An", None) and _odd_nonpoly(s - v)
    if name == "Sq":  # §8.2, relu²: σ(z) + σ(−z) = v·z²
        return v != 0 and _vanishes(s + s.subs(Z, -Z) - v * Z**2)
    if name == "Lin":
        return v != 0 and _vanishes(s - v * Z)
    if name == "zero":
        return sp.simplify(s.subs(Z, 0)) == 0
    if name == "Bd":
        ends = [_limit(s.subs(Z, P), sp.oo), _limit(s.subs(Z, -P), sp.oo)]
        if not all(_finite(e) for e in ends):
            return False
        try:
            return sp.calculus.util.continuous_domain(s, Z, sp.S.Reals) == sp.S.Reals
        except Exception:  # sympy cannot tell: not re-proved
            return False
    if name == "F":
        if sp.simplify(s.subs(Z, 0)) != 0:
            return False
        if activation["gated"]:
            ends = [_limit(s.subs(Z, P), 0), _limit(s.subs(Z, -P), 0)]
        else:
            ends = [_limit(s.subs(Z, P) / P, 0), _limit(s.subs(Z, -P) / P, 0)]
        return all(e == 0 for e in ends)
    if name == "N":
        e = s - v * Z
        plus = _limit(e.subs(Z, P) / P, sp.oo)
        minus = _limit(e.subs(Z, -P) / (-P), sp.oo)
        return _finite(plus) and _finite(minus) and sp.simplify(plus - minus) != 0
    if name == "An":
        return _analytic(s)
    raise ValueError(f"unknown lemma {name!r}")


@functools.cache
def reflection(kind: str) -> tuple[Fraction, Fraction, int] | None:
    """(c, s, t) with σ(z) = c + s·z + t·σ(−z) for every real z, re-derived from σ's formula
    (the checker's symbolic values write σ(−β) so, docs/certificates.md): σ(z) − σ(−z) = 2az
    gives (0, 2a, 1) (silu, gelu, gelu_tanh); σ(z) + σ(−z) = 2σ(0) gives (2σ(0), 0, −1)
    (sigmoid, tanh). None when neither is proved."""
    key = json.dumps({"kind": kind, "gated": False}, sort_keys=True)
    a = odd_slope(key)
    if a is not None:
        return Fraction(0), 2 * a, 1
    c = value_at_zero(key)
    s = formula(json.loads(key))
    if c is not None and _vanishes(s + s.subs(Z, -Z) - 2 * c):
        return 2 * c, Fraction(0), -1
    return None


@functools.cache
def value_at_zero(key: str) -> Fraction | None:
    """σ(0) when it is rational."""
    v = sp.simplify(formula(json.loads(key)).subs(Z, 0))
    return Fraction(int(v.p), int(v.q)) if v.is_Rational else None


def _odd_nonpoly(odd: sp.Expr) -> bool:
    """An odd o with a finite limit L ≠ 0 at +∞ is no polynomial: a polynomial with a finite
    limit is constant, and an odd constant is 0."""
    end = _limit(odd.subs(Z, P), sp.oo)
    return _finite(end) and sp.simplify(end) != 0


def _analytic(node: Any) -> bool:
    if not node.free_symbols:
        return bool(node.is_finite) and node.is_real is True
    if node == Z:
        return True
    if isinstance(node, sp.Add | sp.Mul | sp.exp | sp.erf | sp.tanh):
        return all(_analytic(arg) for arg in node.args)
    if isinstance(node, sp.Pow):
        base, exponent = node.args
        return bool(exponent.is_Integer and _analytic(base) and (exponent >= 0 or base.is_positive))
    return False


@functools.cache
def degree(key: str) -> int | None:
    """The proved homogeneity degree k of σ (None if σ is not homogeneous)."""
    s = formula(json.loads(key))
    for branch in (s.subs(Z, P), s.subs(Z, -P)):
        branch = sp.simplify(branch)
        if branch != 0:
            k = sp.simplify(P * sp.diff(branch, P) / branch)
            if k.is_Integer and k >= 0 and holds(key, "H", str(int(k))):
                return int(k)
            return None
    return None


@functools.cache
def relu_multiple(key: str) -> Fraction | None:
    """c ≠ 0 with σ = c·relu (ungated, H(1), σ(z) = 0 for z < 0, σ(1) = c), else None."""
    activation = json.loads(key)
    if activation["gated"] or not holds(key, "H", "1"):
        return None
    s = formula(activation)
    if sp.simplify(sp.piecewise_fold(s.subs(Z, -P))) != 0:
        return None
    c = sp.simplify(s.subs(Z, sp.Integer(1)))
    if not c.is_Rational or c == 0:
        return None
    return Fraction(int(c.p), int(c.q))
