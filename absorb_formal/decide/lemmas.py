"""Proofs of the activation properties of docs/rules.md §2, with sympy, from σ's formula alone.

Soundness rule: a property is recorded only when sympy *proves* it (an identity simplifies
to 0 in every sign case, or a limit evaluates to a finite number). Anything sympy cannot
settle is recorded as absent, which can only make the tool answer `unknown` more often.

Piecewise functions (Max, Abs, Piecewise) are proved case by case: z is replaced by a
positive symbol p, by -p, and by 0: sympy's simplify alone does not see through Max (it
leaves Max(0, t*z)**2 - t**2*Max(0, z)**2 unsimplified even for positive t), while each sign
case simplifies at once.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..model import diskcache
from ..model.activations import Activation, Scalar
from . import budget


@dataclass(frozen=True)
class Properties:
    """What is proved about an activation (σ and its gating); None/False = not proved.

    - homogeneous: k with σ(tz) = t^k σ(z) for t > 0 (H(k)); block degree is k (+1 if gated)
    - even: σ(−z) = σ(z) (E)
    - bounded: σ continuous on R with finite limits at ±∞ (Bd)
    - flat: every plain block P has P(0) = 0 and P(y) = o(‖y‖) (F)
    - odd_linear: a ≠ 0 with σ(z) − σ(−z) = 2az (O(a))
    - gated_const: c ≠ 0 with σ(z) + σ(−z) = 2c (Og(c))
    - gated_odd_part: Og(c), and o = σ − c (odd by Og(c)) is analytic and not a polynomial:
      what §5's only-if needs (OgN); σ(z) = 1 + z has Og(1) but o(z) = z is a polynomial
    - nonpoly_even: e(z) = σ(z) − az is not a polynomial (N)
    - analytic: σ is real-analytic on R (An): built from polynomials, exp, erf and tanh with
      no singularity on R. With N it makes e's Taylor series at 0 have infinitely many
      non-zero terms, which separates the keys {u, −u} of the gelu family (docs/rules.md §4).
    - linear: σ(z) = az exactly (Lin): blocks are linear maps
    - sigma_at_zero: σ(0) when sympy reduces it to a rational
    - lemmas: the statements proved, for certificates ("lemma + direction", §7)
    """

    homogeneous: int | None = None
    even: bool = False
    bounded: bool = False
    flat: bool = False
    odd_linear: Fraction | None = None
    gated_const: Fraction | None = None
    gated_odd_part: bool = False
    nonpoly_even: bool = False
    analytic: bool = False
    linear: bool = False
    sigma_at_zero: Fraction | None = None
    lemmas: dict[str, str] = field(default_factory=dict, compare=False)

    def block_degree(self, gated: bool) -> int | None:
        """The positive-homogeneity degree of a whole block (gated adds the linear Ux)."""
        if self.homogeneous is None:
            return None
        return self.homogeneous + (1 if gated else 0)

    def names(self) -> list[str]:
        """Short labels: H(2), E, Bd, F, O(1/2), Og(1/2), N."""
        out = []
        if self.homogeneous is not None:
            out.append(f"H({self.homogeneous})")
        out += [label for label, on in (("E", self.even), ("Bd", self.bounded),
                                        ("F", self.flat)) if on]
        if self.odd_linear is not None:
            out.append(f"O({self.odd_linear})")
        if self.gated_const is not None:
            out.append(f"Og({self.gated_const})")
        if self.nonpoly_even:
            out.append("N")
        if self.analytic:
            out.append("An")
        if self.linear:
            out.append("Lin")
        return out


_proved: dict[Activation, Properties] = {}


def properties(activation: Activation) -> Properties:
    """Prove every §2 property of `activation` that holds (cached per process, and on disk
    under a key that changes with this code: `model/diskcache.py`).

    Only a run that finished within its claim's budget is cached: a timeout propagates
    (`ClaimTimeout`), and a run that still overran (a sympy routine that caught the alarm
    itself) may lack properties for want of time, which is sound for this claim ("unknown")
    but no fact for later claims with fresh budgets."""
    if activation in _proved:
        return _proved[activation]
    path = _disk_entry(activation)
    found = _read(path) if path is not None else None
    if found is None:
        found = _Prover(activation.scalar, activation.gated).run()
        if budget.spent():
            return found
        if path is not None:
            diskcache.write_signed(path, json.dumps(_as_json(found), sort_keys=True).encode())
    _proved[activation] = found
    return found


# ---- on disk (model/diskcache.py): proved once per version of this code -----------------------

_FRACTIONS = ("odd_linear", "gated_const", "sigma_at_zero")
_FIELDS = {f.name for f in fields(Properties)}


def _disk_entry(activation: Activation) -> Path | None:
    """The entry for σ, keyed by this module's and model/activations.py's code, sympy's version and
    σ itself (its scalar's kind, parameter, power, coefficients, and the gating)."""
    scalar = activation.scalar
    what = repr((scalar.kind, str(scalar.param), scalar.power,
                 [str(c) for c in scalar.coeffs], activation.gated))
    code = diskcache.code_key("decide/lemmas.py", "model/activations.py", libraries=("sympy",))
    digest = hashlib.sha256(what.encode()).hexdigest()[:20]
    return diskcache.entry("properties", f"{code}-{digest}.json")


def _as_json(found: Properties) -> dict[str, Any]:
    out: dict[str, Any] = {f.name: getattr(found, f.name) for f in fields(Properties)}
    for name in _FRACTIONS:
        out[name] = None if out[name] is None else str(out[name])
    return out


def _read(path: Path) -> Properties | None:
    """A stored entry, or None when absent, not signed under the user's secret
    (`diskcache.read_signed`) or not exactly the shape `_as_json` writes."""
    stored = diskcache.read_signed(path)
    if stored is None:
        return None
    try:
        data = json.loads(stored)
        if not isinstance(data, dict) or set(data) != _FIELDS:
            return None
        for name in _FRACTIONS:
            if data[name] is not None:
                data[name] = Fraction(data[name])
        kinds_ok = (
            (data["homogeneous"] is None or type(data["homogeneous"]) is int)
            and all(type(data[n]) is bool for n in ("even", "bounded", "flat", "gated_odd_part",
                                                     "nonpoly_even", "analytic", "linear"))
            and isinstance(data["lemmas"], dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in data["lemmas"].items()))
        return Properties(**data) if kinds_ok else None
    except (OSError, ValueError, TypeError, ZeroDivisionError):
        return None


class _Prover:
    def __init__(self, scalar: Scalar, gated: bool):
        import sympy as sp

        self.sp = sp
        self.z = sp.Symbol("z", real=True)
        self.p = sp.Symbol("p", positive=True)
        self.t = sp.Symbol("t", positive=True)
        self.sigma = scalar.sympy(self.z)
        self.gated = gated
        self.lemmas: dict[str, str] = {}

    def f(self, arg: Any) -> Any:
        return self.sigma.subs(self.z, arg)

    def is_identically_zero(self, expr: Any) -> bool:
        """expr(z) = 0 for every real z, proved on z = p > 0, z = −p and z = 0."""
        sp = self.sp
        for case in (self.p, -self.p, sp.Integer(0)):
            value = expr.subs(self.z, case)
            if sp.simplify(sp.piecewise_fold(value)) != 0:
                return False
        return True

    def constant(self, expr: Any) -> Fraction | None:
        """expr as an exact rational constant, if sympy reduces it to one."""
        value = self.sp.simplify(expr)
        if value.free_symbols or not value.is_Rational:
            return None
        return Fraction(int(value.p), int(value.q))

    def limit(self, expr: Any, point: Any) -> Any:
        try:
            return self.sp.limit(expr, self.p, point)
        except MemoryError:  # a resource limit is no fact about σ: never "not proved"
            raise
        except Exception:  # sympy cannot always decide a limit: "not proved", never a crash
            return self.sp.nan

    def finite(self, value: Any) -> bool:
        return bool(value.is_finite) and value.is_real is True

    def run(self) -> Properties:
        a = self.odd_linear()
        c = self.gated_const()
        analytic = self.analytic()
        return Properties(
            homogeneous=self.homogeneous(),
            even=self.even(),
            bounded=self.bounded(),
            flat=self.flat(),
            odd_linear=a,
            gated_const=c,
            gated_odd_part=c is not None and analytic and self.gated_odd_part(c),
            nonpoly_even=a is not None and self.nonpoly_even(a),
            analytic=analytic,
            linear=a is not None and self.linear(a),
            sigma_at_zero=self.constant(self.f(self.sp.Integer(0))),
            lemmas=self.lemmas,
        )

    def numeric(self, expr: Any, at: float) -> float | None:
        """expr(p = at) to 30 digits, or None when it does not evaluate to a real number.
        Used only to skip a proof that cannot succeed, never to assert a property."""
        try:
            value = complex(expr.subs(self.p, self.sp.Rational(at)).evalf(30))
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            return None
        return value.real if value.imag == 0 and abs(value.real) < float("inf") else None

    def homogeneous(self) -> int | None:
        sp, p, t, z = self.sp, self.p, self.t, self.z
        # A non-constant p·σ'(p)/σ(p) at two points rules out H(k) on that branch; gelu_tanh's
        # symbolic attempt cost 0.8 s of the corpus run.
        for branch in (self.f(p), self.f(-p)):
            ratio = p * sp.diff(branch, p) / branch
            r1, r2 = self.numeric(ratio, 0.7), self.numeric(ratio, 2.3)
            if r1 is not None and r2 is not None and abs(r1 - r2) > 1e-9 * (1 + abs(r1)):
                return None
        k = None
        for branch in (self.f(p), self.f(-p)):
            if sp.simplify(branch) != 0:
                k = self.constant(p * sp.diff(branch, p) / branch)
                break
        if k is None or k.denominator != 1 or k < 0:
            return None
        if not self.is_identically_zero(self.f(t * z) - t ** int(k) * self.sigma):
            return None
        self.lemmas["H"] = f"sigma(t*z) - t**{k}*sigma(z) == 0 for all real z, t > 0"
        return int(k)

    def even(self) -> bool:
        if not self.is_identically_zero(self.f(-self.z) - self.sigma):
            return False
        self.lemmas["E"] = "sigma(-z) - sigma(z) == 0 for all real z"
        return True

    def odd_linear(self) -> Fraction | None:
        p = self.p
        a = self.constant((self.f(p) - self.f(-p)) / (2 * p))
        if not a or not self.is_identically_zero(self.sigma - self.f(-self.z) - 2 * a * self.z):
            return None
        self.lemmas["O"] = f"sigma(z) - sigma(-z) - 2*({a})*z == 0 for all real z"
        return a

    def gated_const(self) -> Fraction | None:
        c = self.constant((self.f(self.p) + self.f(-self.p)) / 2)
        if not c or not self.is_identically_zero(self.sigma + self.f(-self.z) - 2 * c):
            return None
        self.lemmas["Og"] = f"sigma(z) + sigma(-z) - 2*({c}) == 0 for all real z"
        return c

    def gated_odd_part(self, c: Fraction) -> bool:
        """o = σ − c (odd by Og(c), analytic by An) is no polynomial: o(z) has a finite limit
        L ≠ 0 at +∞. A polynomial with a finite limit is constant, and an odd constant is 0."""
        sp = self.sp
        end = self.limit(self.f(self.p) - sp.Rational(c), sp.oo)
        if not self.finite(end) or sp.simplify(end) == 0:
            return False
        self.lemmas["OgN"] = (f"o(z) = sigma(z) - ({c}) is odd (Og), real-analytic (An) and "
                              f"o(z) -> {end} != 0 as z -> +oo, so o is not a polynomial")
        return True

    def bounded(self) -> bool:
        sp = self.sp
        for branch in (self.f(self.p), self.f(-self.p)):  # clear growth: skip the limits
            near, far = self.numeric(branch, 1e3), self.numeric(branch, 1e6)
            if near is not None and far is not None and abs(far) > 10 * max(1.0, abs(near)):
                return False
        ends = [self.limit(self.f(self.p), sp.oo), self.limit(self.f(-self.p), sp.oo)]
        if not all(self.finite(v) for v in ends):
            return False
        try:
            domain = sp.calculus.util.continuous_domain(self.sigma, self.z, sp.S.Reals)
        except MemoryError:
            raise
        except Exception:  # an expression sympy cannot analyse: not proved
            return False
        if domain != sp.S.Reals:
            return False
        self.lemmas["Bd"] = (f"sigma continuous on R, sigma(z) -> {ends[0]} as z -> +oo and "
                             f"-> {ends[1]} as z -> -oo, hence bounded")
        return True

    def flat(self) -> bool:
        sp, p = self.sp, self.p
        if sp.simplify(self.f(sp.Integer(0))) != 0:
            return False
        if self.gated:  # σ(0) = 0 and σ continuous at 0: σ(g·y)(u·y) = o(1)·O(|y|)
            ends = [self.limit(self.f(p), 0), self.limit(self.f(-p), 0)]
            statement = "sigma(0) == 0 and sigma(z) -> 0 as z -> 0"
        else:  # σ(z) = o(z)
            ends = [self.limit(self.f(p) / p, 0), self.limit(self.f(-p) / p, 0)]
            statement = "sigma(0) == 0 and sigma(z)/z -> 0 as z -> 0"
        if any(v != 0 for v in ends):
            return False
        self.lemmas["F"] = statement
        return True

    def linear(self, a: Fraction) -> bool:
        if not self.is_identically_zero(self.sigma - a * self.z):
            return False
        self.lemmas["Lin"] = f"sigma(z) - ({a})*z == 0 for all real z"
        return True

    def analytic(self) -> bool:
        if not self._analytic_node(self.sigma):
            return False
        self.lemmas["An"] = ("sigma is built from polynomials, exp, erf, tanh and quotients by "
                             "expressions positive on R, hence is real-analytic on R")
        return True

    def _analytic_node(self, node: Any) -> bool:
        """Whitelist: constants, z, +, ×, exp/erf/tanh, integer powers (negative ones only of
        bases that sympy proves positive for real z)."""
        sp = self.sp
        if not node.free_symbols:
            return bool(node.is_finite) and node.is_real is True
        if node == self.z:
            return True
        if isinstance(node, sp.Add | sp.Mul | sp.exp | sp.erf | sp.tanh):
            return all(self._analytic_node(arg) for arg in node.args)
        if isinstance(node, sp.Pow):
            base, exponent = node.args
            if not (exponent.is_Integer and self._analytic_node(base)):
                return False
            return bool(exponent >= 0 or base.is_positive)
        return False

    def nonpoly_even(self, a: Fraction) -> bool:
        """e(z) = σ(z) − az is no polynomial: e(z)/z has finite, different limits at ±∞
        (a polynomial's are equal, or infinite)."""
        sp, p = self.sp, self.p
        e = self.sigma - sp.Rational(a) * self.z
        plus = self.limit(e.subs(self.z, p) / p, sp.oo)
        minus = self.limit(e.subs(self.z, -p) / (-p), sp.oo)
        if not (self.finite(plus) and self.finite(minus)) or sp.simplify(plus - minus) == 0:
            return False
        self.lemmas["N"] = (f"e(z) = sigma(z) - ({a})*z has e(z)/z -> {plus} at +oo and "
                            f"-> {minus} at -oo, so e is not a polynomial")
        return True
