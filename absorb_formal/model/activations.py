"""Activations as mathematics: each knows its formula (sympy), its exact value on Q where it
has one, and its float64 value; `decide/lemmas.py` proves what docs/rules.md §2 needs about it.

An `Activation` is the block's nonlinearity: a scalar function `σ` plus whether the block is
gated (`B(x) = Sx + D(σ(Gx) ⊙ Ux)`) or not (`B(x) = Sx + Dσ(Ux)`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # sympy costs half a second to import: only when a property is asked for
    import sympy

# Scalar kinds whose value at a rational point is rational (exact evaluation works).
_RATIONAL_KINDS = frozenset({"relu", "leaky_relu", "relu_pow", "abs", "identity", "poly"})


@dataclass(frozen=True)
class Scalar:
    """A scalar function σ: R → R from the table of docs/language.md.

    kind is one of relu, leaky_relu (param α), relu_pow (power k ≥ 2), abs, identity,
    poly (coeffs c0..cn; `square` is poly[0, 0, 1]), gelu, gelu_tanh, silu, tanh, sigmoid.
    """

    kind: str
    param: Fraction | None = None
    power: int | None = None
    coeffs: tuple[Fraction, ...] = ()

    @property
    def is_rational(self) -> bool:
        """σ maps Q to Q, so blocks can be evaluated exactly."""
        return self.kind in _RATIONAL_KINDS

    def exact(self, z: Fraction) -> Fraction:
        """σ(z) in exact arithmetic; only for `is_rational` kinds."""
        kind = self.kind
        if kind == "relu":
            return z if z > 0 else Fraction(0)
        if kind == "leaky_relu":
            assert self.param is not None
            return z if z >= 0 else self.param * z
        if kind == "relu_pow":
            assert self.power is not None
            return z**self.power if z > 0 else Fraction(0)
        if kind == "abs":
            return abs(z)
        if kind == "identity":
            return z
        if kind == "poly":
            value = Fraction(0)
            for c in reversed(self.coeffs):
                value = value * z + c
            return value
        raise ValueError(f"{self.kind} is not rational-valued on Q; use float evaluation")

    def numpy(self, z: np.ndarray) -> np.ndarray:
        """σ(z) elementwise in float64."""
        return _NUMPY[self.kind](self, np.asarray(z, dtype=np.float64))

    def sympy(self, z: sympy.Expr) -> sympy.Expr:
        """σ(z) as a sympy expression (exact constants: 0.044715 is 44715/10^6)."""
        import sympy as sp

        kind = self.kind
        if kind == "relu":
            return sp.Max(0, z)
        if kind == "leaky_relu":
            return sp.Piecewise((z, z >= 0), (sp.Rational(self.param) * z, True))
        if kind == "relu_pow":
            return sp.Max(0, z) ** self.power
        if kind == "abs":
            return sp.Abs(z)
        if kind == "identity":
            return z
        if kind == "poly":
            return sp.Add(*(sp.Rational(c) * z**i for i, c in enumerate(self.coeffs)))
        if kind == "gelu":
            return z * (1 + sp.erf(z / sp.sqrt(2))) / 2
        if kind == "gelu_tanh":
            inner = sp.sqrt(2 / sp.pi) * (z + sp.Rational(44715, 10**6) * z**3)
            return z / 2 * (1 + sp.tanh(inner))
        if kind == "silu":
            return z / (1 + sp.exp(-z))
        if kind == "tanh":
            return sp.tanh(z)
        if kind == "sigmoid":
            return 1 / (1 + sp.exp(-z))
        raise ValueError(f"unknown scalar kind {kind!r}")


def _sigmoid(z: np.ndarray) -> np.ndarray:
    # exp of -|z| never overflows, so no warning and no inf/inf.
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


# erfc(z) for z >= 0 by Chebyshev expansion (Numerical Recipes, 3rd ed., §6.2.2): absolute
# error below 1e-15 on R (tested against math.erf). One implementation on every machine keeps
# cross-check figures reproducible, with or without scipy.
_ERFC_CHEB = (
    -1.3026537197817094, 6.4196979235649026e-1, 1.9476473204185836e-2, -9.561514786808631e-3,
    -9.46595344482036e-4, 3.66839497852761e-4, 4.2523324806907e-5, -2.0278578112534e-5,
    -1.624290004647e-6, 1.303655835580e-6, 1.5626441722e-8, -8.5238095915e-8,
    6.529054439e-9, 5.059343495e-9, -9.91364156e-10, -2.27365122e-10, 9.6467911e-11,
    2.394038e-12, -6.886027e-12, 8.94487e-13, 3.13092e-13, -1.12708e-13, 3.81e-16,
    7.106e-15, -1.523e-15, -9.4e-17, 1.21e-16, -2.8e-17,
)
# erf(x) = 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)): relative accuracy near 0.
_ERF_SERIES = tuple((-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(12))


def _erf(z: np.ndarray) -> np.ndarray:
    a = np.abs(z)
    t = 2.0 / (2.0 + a)
    ty = 4.0 * t - 2.0
    d = np.zeros_like(a)
    dd = np.zeros_like(a)
    for c in _ERFC_CHEB[:0:-1]:
        d, dd = ty * d - dd + c, d
    large = 1.0 - t * np.exp(-a * a + 0.5 * (_ERFC_CHEB[0] + ty * d) - dd)
    small_z = np.where(a < 0.5, a, 0.0)
    series = np.zeros_like(a)
    for c in reversed(_ERF_SERIES):
        series = series * small_z * small_z + c
    small = 2.0 / math.sqrt(math.pi) * small_z * series
    return np.sign(z) * np.where(a < 0.5, small, large)


def _poly(s: Scalar, z: np.ndarray) -> np.ndarray:
    value = np.zeros_like(z)
    for c in reversed(s.coeffs):
        value = value * z + float(c)
    return value


_NUMPY: dict[str, Callable[[Scalar, np.ndarray], np.ndarray]] = {
    "relu": lambda s, z: np.maximum(z, 0.0),
    "leaky_relu": lambda s, z: np.where(z >= 0, z, float(s.param or 0) * z),
    "relu_pow": lambda s, z: np.maximum(z, 0.0) ** (s.power or 1),
    "abs": lambda s, z: np.abs(z),
    "identity": lambda s, z: z.copy(),
    "poly": _poly,
    "gelu": lambda s, z: 0.5 * z * (1.0 + _erf(z / math.sqrt(2.0))),
    "gelu_tanh": lambda s, z: 0.5 * z * (
        1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z**3))
    ),
    "silu": lambda s, z: z * _sigmoid(z),
    "tanh": lambda s, z: np.tanh(z),
    "sigmoid": lambda s, z: _sigmoid(z),
}


@dataclass(frozen=True)
class Activation:
    """A block's nonlinearity: the scalar σ and whether it gates (`σ(Gx) ⊙ Ux`)."""

    name: str  # as printed: "relu", "leaky_relu(1/2)", "relu^3", "poly[0, 1, 1]", "swiglu"
    scalar: Scalar
    gated: bool

    @property
    def is_rational(self) -> bool:
        return self.scalar.is_rational

    def __str__(self) -> str:
        return self.name


# Activations that take no argument. Gated ones name the gate function.
_SIMPLE: dict[str, tuple[Scalar, bool]] = {
    "relu": (Scalar("relu"), False),
    "abs": (Scalar("abs"), False),
    "square": (Scalar("poly", coeffs=(Fraction(0), Fraction(0), Fraction(1))), False),
    "identity": (Scalar("identity"), False),
    "gelu": (Scalar("gelu"), False),
    "gelu_tanh": (Scalar("gelu_tanh"), False),
    "silu": (Scalar("silu"), False),
    "swish": (Scalar("silu"), False),
    "tanh": (Scalar("tanh"), False),
    "sigmoid": (Scalar("sigmoid"), False),
    "swiglu": (Scalar("silu"), True),
    "geglu": (Scalar("gelu"), True),
    "reglu": (Scalar("relu"), True),
    "glu": (Scalar("sigmoid"), True),
    "bilinear": (Scalar("identity"), True),
}

SIMPLE_NAMES = tuple(sorted(_SIMPLE))
PARAM_NAMES = ("leaky_relu",)
POWER_NAMES = ("relu",)
COEFF_NAMES = ("poly",)
ALL_NAMES = tuple(sorted({*SIMPLE_NAMES, *PARAM_NAMES, *COEFF_NAMES}))


def simple(name: str) -> Activation | None:
    """The argument-free activation called `name`, or None."""
    entry = _SIMPLE.get(name)
    if entry is None:
        return None
    scalar, gated = entry
    return Activation(name, scalar, gated)


def leaky_relu(alpha: Fraction) -> Activation:
    return Activation(f"leaky_relu({alpha})", Scalar("leaky_relu", param=alpha), False)


def relu_power(k: int) -> Activation:
    """relu^k; `relu^1` is relu itself."""
    if k == 1:
        return Activation("relu", Scalar("relu"), False)
    return Activation(f"relu^{k}", Scalar("relu_pow", power=k), False)


def poly(coeffs: tuple[Fraction, ...]) -> Activation:
    """poly[c0, ..., cn]; trailing zero coefficients are dropped from σ (not from the name)."""
    trimmed = list(coeffs)
    while len(trimmed) > 1 and trimmed[-1] == 0:
        trimmed.pop()
    name = "poly[" + ", ".join(str(c) for c in coeffs) + "]"
    return Activation(name, Scalar("poly", coeffs=tuple(trimmed)), False)


def describe_names() -> str:
    return ", ".join([*SIMPLE_NAMES, "leaky_relu(a)", "relu^k", "poly[c0, ..., cn]"])


def as_json(activation: Activation) -> dict[str, Any]:
    return {"name": activation.name, "gated": activation.gated, "kind": activation.scalar.kind}
