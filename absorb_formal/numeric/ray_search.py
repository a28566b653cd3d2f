"""The float search behind the ray limit (docs/rules.md §10.2): a heuristic that proposes a
point x0 and a direction w at which the branch's limit along rays, `F ∘ N∞`, has a clearly
non-zero derivative, and the output coordinate(s) where it shows. Nothing here decides:
`decide/ray_limit.py` has every proposal confirmed by the checker's exact and Arb test."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..model.blocks import Block


class Search:
    """The block's FFN in float64, for the search only."""

    def __init__(self, block: Block):
        layer = block.layers[0]  # type: ignore[index]
        self.act = block.activation
        self.up = layer.up.floats
        self.down = layer.down.floats
        self.gate = None if layer.gate is None else layer.gate.floats
        m = block.width
        self.b = _floats(layer.up_bias, m)
        self.g = _floats(layer.gate_bias, m)

    def strength(self, x0: list[Fraction], w: list[Fraction], norm: Any) -> float:
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            found = self._strength(x0, w, norm)
        return found if np.isfinite(found) else 0.0

    def _strength(self, x0: list[Fraction], w: list[Fraction], norm: Any) -> float:
        """How far from 0 the derivative of F ∘ N∞ at x0 along w looks in floats, relative to
        the terms' size (0: a relu neuron sits at its kink, or nothing moves)."""
        first = norm.norms[0]
        d = len(x0)
        x = np.array([float(v) for v in x0])
        y = x - x.mean() if first.kind == "layernorm" else x
        gamma = _floats(first.gamma, d, 1.0)
        beta = _floats(first.beta, d)
        rho = math.sqrt(float((y * y).sum()) / d)
        n_inf = gamma * y / rho + beta
        direction = gamma * np.array([float(v) for v in w]) / rho
        z = self.up @ n_inf + self.b
        kind = self.act.scalar.kind
        scaled = self.up * gamma
        moving = (np.ptp(scaled, axis=1) if first.kind == "layernorm"
                  else np.abs(scaled).max(axis=1)) != 0  # a constant pre-activation: no kink
        if self.gate is None:
            near = np.abs(z[moving]) < 1e-9 * (1 + np.abs(z).max())
            if kind in ("relu", "leaky_relu") and bool(near.any()):
                return 0.0
            g = self.down @ (_slope(kind, z, self.act) * (self.up @ direction))
        else:
            zg = self.gate @ n_inf + self.g
            if kind == "relu" and np.min(np.abs(zg)) < 1e-9 * (1 + np.abs(zg).max()):
                return 0.0
            g = self.down @ (_slope(kind, zg, self.act) * (self.gate @ direction) * z
                             + _value(kind, zg) * (self.up @ direction))
        scale = float(np.abs(self.down).sum(axis=1).max()) * (1 + float(np.abs(z).max()))
        if norm.placement == "sandwich" and norm.norms[1].kind == "layernorm":
            return float(g.max() - g.min()) / scale  # N₂'s Jacobian kills span(1)
        return float(np.abs(g).max()) / scale


def _floats(v: Any, n: int, fill: float = 0.0) -> np.ndarray:
    return np.full(n, fill) if v is None else np.array([float(x) for x in v])


def _slope(kind: str, z: np.ndarray, act: Any) -> np.ndarray:
    if kind == "relu":
        return (z > 0).astype(float)
    if kind == "leaky_relu":
        return np.where(z > 0, 1.0, float(act.scalar.param))
    if kind == "relu_pow":
        k = act.scalar.power
        return k * np.maximum(z, 0) ** (k - 1)
    if kind == "gelu":
        erf = np.vectorize(math.erf)
        return 0.5 * (1 + erf(z / math.sqrt(2))) + z * np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    if kind == "gelu_tanh":
        k, c = math.sqrt(2 / math.pi), 0.044715
        t = np.tanh(k * (z + c * z ** 3))
        return 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * k * (1 + 3 * c * z * z)
    s = 1 / (1 + np.exp(-z))  # silu
    return s * (1 + z * (1 - s))


def _value(kind: str, z: np.ndarray) -> np.ndarray:
    if kind == "relu":
        return np.maximum(z, 0)
    if kind == "gelu":
        erf = np.vectorize(math.erf)
        return 0.5 * z * (1 + erf(z / math.sqrt(2)))
    return z / (1 + np.exp(-z))  # silu
