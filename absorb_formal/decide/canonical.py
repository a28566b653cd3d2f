"""Canonical forms of depth-1 blocks with O(a)+N activations (docs/rules.md §4).

`B(x) = Λx + Σ_i d_i e(u_i·x)` with `Λ = S + a·DU` and e the even part of σ.

- relu family (σ is H(1), O(a), N; e = b|z|): a key is a line; neuron `u_i = α_i ū` adds
  `b·|α_i|·d_i` to `v_ū`; `ū` is scaled so its first non-zero entry is 1. ρ = a/b.
- analytic family (σ real-analytic, O(a), N: gelu, gelu_tanh, silu): a key is `{u, −u}`;
  neuron `u_i = ±ū` adds `d_i` to `v_ū`; `ū` is signed so its first non-zero entry is
  positive. ρ = a.

Keys whose v sums to 0 disappear. Two depth-1 blocks whose σ have the same e are equal as
functions iff their canonical forms are equal (independence of ridge functions).

With biases (docs/rules.md §8.1) a key is the affine function ℓ̄ = ū·x + β̄, normalised by ū as
above with β̄ scaled along; keys with parallel ū and different β̄ differ. The form gains the
constant γ = c + a·Σ_{u_i≠0} d_i β_i + Σ_{u_i=0} d_i σ(β_i). A bias-free block compared
with a biased one is read as biased with zero biases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..certify import bodies as cert
from ..model import linalg
from ..model.activations import Activation
from ..model.blocks import Block, Layer
from ..model.symbolic import Symbolic, linear_part, sigma_at
from .lemmas import properties

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
        """Linear part added by a single neuron on a key, per unit of v (docs/rules.md §4)."""
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
    """C(B) = (Λ, {ū ↦ v}); keys sorted for a deterministic, comparable form.

    Biased (docs/rules.md §8.1): `offsets[n]` is key n's β̄ (keys sorted by (ū, β̄)) and `gamma` the
    constant; both None in a bias-free form. The width search reads only the directions ū."""

    ridge: Ridge
    dim: int
    lam: linalg.Rows
    keys: tuple[tuple[Vec, Vec], ...]
    offsets: tuple[Fraction, ...] | None = None
    gamma: Vec | None = None
    # §8.1 constant neurons d·σ(β) whose σ(β) is not rational (silu, gelu: σ(1)), kept
    # formally as (β, Σ d) sorted by β: they only enter the constant, never the search; a
    # witness holds them in its output bias c′ as the exact symbolic Σ d σ(β).
    constants: tuple[tuple[Fraction, Vec], ...] = ()
    # The sign of α for the first neuron on each key (u = α ū): the block's own orientation.
    # Not part of the form (equal functions may differ in it); the width search hands it to
    # the dense-regime LLL search as a reference (a planted J flips few keys from it).
    signs: tuple[int, ...] | None = field(default=None, compare=False)
    # σ itself (activations.Scalar), for the values σ(β) of `constants` (a witness's c′).
    scalar: Any = field(default=None, compare=False)

    @property
    def p(self) -> int:
        return len(self.keys)

    @property
    def biased(self) -> bool:
        return self.gamma is not None

    def offset(self, n: int) -> Fraction:
        return self.offsets[n] if self.offsets is not None else Fraction(0)

    def constant(self) -> list[Any]:
        """The constant γ + Σ_β v_β σ(β) entry by entry, exactly (σ(β) symbolic where it is
        not rational: `symbolic.sigma_at`); a biased form only."""
        assert self.gamma is not None
        out: list[Any] = list(self.gamma)
        for beta, v in self.constants:
            value = sigma_at(self.scalar, beta)
            out = [c + x * value if x else c for c, x in zip(out, v, strict=True)]
        return out

    def index(self) -> dict[tuple[Vec, Fraction], int]:
        """(ū, β̄) ↦ key number (β̄ = 0 in a bias-free form)."""
        return {(u, self.offset(n)): n for n, (u, _) in enumerate(self.keys)}

    def equal(self, other: CanonicalForm) -> bool:
        return (self.lam, self.keys, self.offsets, self.gamma, self.constants) == (
            other.lam, other.keys, other.offsets, other.gamma, other.constants)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"family": self.ridge.family, "a": cert.q(self.ridge.a),
               "b": None if self.ridge.b is None else cert.q(self.ridge.b),
               "Lambda": cert.matrix(self.lam),
               "keys": [{"u": cert.vector(u), "v": cert.vector(v)} for u, v in self.keys]}
        if self.gamma is not None:  # §8.1; absent: bias-free documents keep their bytes
            for n, key in enumerate(out["keys"]):
                key["beta"] = cert.q(self.offset(n))
            out["gamma"] = cert.vector(self.gamma)
            # a constant neuron kept formally reads as a key with u = 0 (no real key has)
            zero = [cert.q(0)] * self.dim
            entries = [((*u, self.offset(n)), key) for n, ((u, _), key)
                       in enumerate(zip(self.keys, out["keys"], strict=True))]
            entries += [((Fraction(0),) * self.dim + (beta,),
                         {"u": zero, "v": cert.vector(v), "beta": cert.q(beta)})
                        for beta, v in self.constants]
            out["keys"] = [key for _, key in sorted(entries, key=lambda e: e[0])]
        return out


class NotRational(ValueError):
    """A constant that the form cannot hold: σ(β) of a σ that is not rational on Q (without
    `symbolic`), or an output bias with other symbolic terms than σ(β) of the block's σ."""


def form_of_layer(ridge_: Ridge, dim: int, skip_rows: linalg.Rows, layer: Layer,
                  biased: bool = False, scalar: Any = None, symbolic: bool = False
                  ) -> CanonicalForm:
    """The canonical form of `x ↦ Sx + D σ(U x + b) + c`; `biased` (or a layer with biases)
    gives the §8.1 form, zero biases where the layer has none. `scalar`: σ, for constant
    neurons σ(β) (None: only σ(0) = 0 is known; NotRational for any other). A σ(β) that is
    not rational (silu, gelu: `symbolic.atom`) needs `symbolic`: then it is kept formally
    in `constants`, and so is each term `c·σ(β)` of a symbolic output bias c (docs/rules.md
    §8.1 "Symbolic constants"), so that a witness whose c′ holds Σ dᵢσ(βᵢ) has the same form
    as the block with those constant neurons."""
    up, down = layer.up.rows, layer.down.rows
    lam = linalg.add(skip_rows, linalg.matmul(down, up), ridge_.a)
    biased = biased or layer.up_bias is not None
    zero = Fraction(0)
    b_up = layer.up_bias or (zero,) * len(up)
    gamma: list[Any] = list(layer.down_bias or (zero,) * dim)
    sums: dict[tuple[Vec, Fraction], list[Fraction]] = {}
    signs: dict[tuple[Vec, Fraction], int] = {}
    for i, u in enumerate(up):
        d = layer.down.column(i)
        if not any(d):
            continue
        if not any(u):  # a constant neuron d_i σ(β_i) (§8.1)
            if b_up[i] != 0:
                if scalar is None:
                    raise NotRational(f"neuron {i + 1} is the constant σ({b_up[i]})")
                _accumulate(gamma, d, sigma_at(scalar, b_up[i]))
            continue
        key, alpha = normalise(u, ridge_.family)
        _accumulate(gamma, d, ridge_.a * b_up[i])  # σ(ℓ) = a·ℓ + e(ℓ): a·d_i·β_i
        weight = ridge_.b * abs(alpha) if ridge_.b is not None else Fraction(1)
        _accumulate(sums.setdefault((key, b_up[i] / alpha), [zero] * dim), d, weight)
        signs.setdefault((key, b_up[i] / alpha), 1 if alpha > 0 else -1)
    found = sorted((k, tuple(v)) for k, v in sums.items() if any(v))
    keys = tuple((u, v) for (u, _), v in found)
    orientation = tuple(signs[k] for k, _ in found)
    if not biased:
        return CanonicalForm(ridge_, dim, lam, keys, signs=orientation, scalar=scalar)
    rational, formal = _split(gamma, scalar, symbolic)
    constants = tuple((beta, tuple(v)) for beta, v in sorted(formal.items()) if any(v))
    return CanonicalForm(ridge_, dim, lam, keys, tuple(beta for (_, beta), _ in found),
                         rational, constants, signs=orientation, scalar=scalar)


def _split(gamma: list[Any], scalar: Any, symbolic: bool
           ) -> tuple[Vec, dict[Fraction, list[Fraction]]]:
    """γ = r + Σ_β v_β σ(β) entry by entry: (r, {β: v_β}); NotRational when an entry has
    another term, or any σ(β) without `symbolic`."""
    formal: dict[Fraction, list[Fraction]] = {}
    rational = []
    for r, value in enumerate(gamma):
        if not isinstance(value, Symbolic):
            rational.append(Fraction(value))
            continue
        part = linear_part(value, scalar.kind) if scalar is not None else None
        if part is None or not symbolic:
            raise NotRational(f"the constant {value} is not rational")
        rational.append(part[0])
        for beta, c in part[1].items():
            formal.setdefault(beta, [Fraction(0)] * len(gamma))[r] += c
    return tuple(rational), formal


def _accumulate(acc: list[Fraction], d: Sequence[Fraction], weight: Fraction) -> None:
    for r in range(len(acc)):
        acc[r] += weight * d[r]


def canonical_form(block: Block, biased: bool = False,
                   symbolic: bool = False) -> CanonicalForm | None:
    """C(B) for a concrete depth-1 block with an O(a)+N activation; None otherwise (also for
    a constant neuron σ(β) that is not rational, §8.1, unless `symbolic`: kept formally for
    the width questions, where constants are free). `biased`: the §8.1 form even for a
    bias-free block (to compare it with a biased one)."""
    found = ridge(block.activation)
    if found is None or block.depth != 1 or block.layers is None:
        return None
    try:
        return form_of_layer(found, block.dim, block.skip.rows(), block.layers[0],
                             biased or block.biased, block.activation.scalar, symbolic)
    except NotRational:
        return None
