"""Canonical forms of depth-1 blocks with O(a)+N activations (MATH.md §4).

`B(x) = Λx + Σ_i d_i e(u_i·x)` with `Λ = S + a·DU` and e the even part of σ.

- relu family (σ is H(1), O(a), N; e = b|z|): a key is a line; neuron `u_i = α_i ū` adds
  `b·|α_i|·d_i` to `v_ū`; `ū` is scaled so its first non-zero entry is 1. ρ = a/b.
- analytic family (σ real-analytic, O(a), N: gelu, gelu_tanh, silu): a key is `{u, −u}`;
  neuron `u_i = ±ū` adds `d_i` to `v_ū`; `ū` is signed so its first non-zero entry is
  positive. ρ = a.

Keys whose v sums to 0 disappear. Two depth-1 blocks whose σ have the same e are equal as
functions iff their canonical forms are equal (independence of ridge functions).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .. import certificates as cert
from .. import linalg
from ..activations import Activation
from ..model import Block, Layer
from ..properties import properties

Vec = tuple[Fraction, ...]


@dataclass(frozen=True)
class Ridge:
    """How σ splits as `a·z + e(z)`; `family` is "relu" (e = b|z|) or "analytic"."""

    family: str
    a: Fraction
    b: Fraction | None
    sigma: str  # the scalar function, to tell analytic e's apart

    @property
    def rho(self) -> Fraction:
        """Linear part added by a single neuron on a key, per unit of v (MATH.md §4)."""
        return self.a / self.b if self.b is not None else self.a

    def same_e(self, other: Ridge) -> bool:
        """Whether two activations share e up to the normalisation in v (so forms compare)."""
        if self.family == "relu" and other.family == "relu":
            return True  # v already carries b: the functions are Λx + Σ v|ū·x|
        return self.family == other.family and self.sigma == other.sigma


def ridge(activation: Activation) -> Ridge | None:
    """The ridge structure of an ungated O(a)+N activation with σ(0) = 0, else None."""
    props = properties(activation)
    a = props.odd_linear
    if activation.gated or a is None or not props.nonpoly_even or props.sigma_at_zero != 0:
        return None
    if props.homogeneous == 1 and activation.is_rational:
        b = activation.scalar.exact(Fraction(1)) - a  # e is even and H(1): e(z) = e(1)|z|
        return Ridge("relu", a, b, "relu-family") if b != 0 else None
    if props.analytic:
        return Ridge("analytic", a, None, repr(activation.scalar))
    return None


def normalise(u: Vec, family: str) -> tuple[Vec, Fraction]:
    """(ū, α) with u = α ū: relu family scales the first non-zero entry to 1, the analytic
    family only fixes its sign."""
    lead = next(x for x in u if x != 0)
    alpha = lead if family == "relu" else Fraction(1 if lead > 0 else -1)
    return tuple(x / alpha for x in u), alpha


@dataclass(frozen=True)
class CanonicalForm:
    """C(B) = (Λ, {ū ↦ v}); keys sorted for a deterministic, comparable form."""

    ridge: Ridge
    dim: int
    lam: linalg.Rows
    keys: tuple[tuple[Vec, Vec], ...]

    @property
    def p(self) -> int:
        return len(self.keys)

    def equal(self, other: CanonicalForm) -> bool:
        return self.lam == other.lam and self.keys == other.keys

    def as_json(self) -> dict[str, Any]:
        return {"family": self.ridge.family, "a": cert.q(self.ridge.a),
                "b": None if self.ridge.b is None else cert.q(self.ridge.b),
                "Lambda": cert.matrix(self.lam),
                "keys": [{"u": cert.vector(u), "v": cert.vector(v)} for u, v in self.keys]}


def form_of_layer(ridge_: Ridge, dim: int, skip_rows: linalg.Rows,
                  layer: Layer) -> CanonicalForm:
    """The canonical form of `x ↦ Sx + D σ(U x)`."""
    up, down = layer.up.rows, layer.down.rows
    lam = linalg.add(skip_rows, linalg.matmul(down, up), ridge_.a)
    sums: dict[Vec, list[Fraction]] = {}
    for i, u in enumerate(up):
        d = layer.down.column(i)
        if not any(u) or not any(d):
            continue
        key, alpha = normalise(u, ridge_.family)
        weight = ridge_.b * abs(alpha) if ridge_.b is not None else Fraction(1)
        acc = sums.setdefault(key, [Fraction(0)] * dim)
        for r in range(dim):
            acc[r] += weight * d[r]
    keys = tuple(sorted((k, tuple(v)) for k, v in sums.items() if any(v)))
    return CanonicalForm(ridge_, dim, lam, keys)


def canonical_form(block: Block) -> CanonicalForm | None:
    """C(B) for a concrete depth-1 block with an O(a)+N activation; None otherwise."""
    found = ridge(block.activation)
    if found is None or block.depth != 1 or block.layers is None:
        return None
    return form_of_layer(found, block.dim, block.skip.rows(), block.layers[0])
