"""Activations as mathematics: each knows its formula (sympy), its exact value on Q where it
has one, and its float64 value; `properties.py` proves what MATH.md §2 needs about it.

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
    """A scalar function σ: R → R from the table of LANGUAGE.md.

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


def _erf(z: np.ndarray) -> np.ndarray:
    try:
        from scipy.special import erf  # optional: fast and accurate where installed
    except ImportError:
        return np.frompyfunc(math.erf, 1, 1)(z).astype(np.float64)
    return np.asarray(erf(z), dtype=np.float64)


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
