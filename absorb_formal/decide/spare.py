"""The constructions that absorb a large block without reading more than its shapes, S and σ
(docs/rules.md §4 "Large blocks at every width", §8): the block's own neurons, kept as they
are, plus a few neurons per rank-one term p_k q_kᵀ of S. The checker's side is
`checker/rules/spare.py`; the doubles, which also change some own neurons, are `doubles.py`.

- S = Σ_k p_k q_kᵀ (`factorisation`): S = cI: q_k = e_k (d terms, = rank S); a matrix S: an
  exact skeleton S = S[:,C]·S[R,C]⁻¹·S[R,:] with |C| = rank S. Certificates name C (and R),
  never weights; the checker re-derives each lemma and the skeleton identity.
- Spare pairs (depth 1, ungated, σ = a·z + e(z), a ≠ 0, e non-polynomial: `applies`):
  p_k/(2a)·(σ(q_k·x) − σ(−q_k·x)) = p_k·(q_k·x) by O(a), σ(z) − σ(−z) = 2az; the down bias
  is unchanged. Width m + 2·rank S, the bound of §4.
- Linear neurons (gated; biased, or glu without biases): a neuron with gate row 0 and gate
  bias γ computes σ(γ)·(u·x + β). With σ(γ) ≠ 0 (reglu, bilinear: γ = 1; glu: γ = 0,
  σ(0) = 1/2; swiglu, geglu: γ = 1 and the symbolic σ(1) = silu(1), gelu(1), docs/rules.md
  §8 "Symbolic constants") one linear neuron p_k/σ(γ)·σ(γ)(q_k·x) per term: width
  m + rank S.
- Square pairs (biased, σ a polynomial of degree exactly 2, e.g. square:
  x = ((x+1)² − (x−1)²)/4): σ(ℓ + t) − σ(t − ℓ) = k·ℓ with k = 4·c2·t + 2·c1, so
  p/k·(σ(q·x + t) − σ(−q·x + t)) = p (q·x); t = 1, or −1 when 4c2 + 2c1 = 0. Width
  m + 2·rank S, the down bias unchanged.
- Square quadruples (biased relu², and kin whose even part is v/2·z²): σ(z) + σ(−z) = v z²,
  so p·ℓ = p/(4v)·(σ(ℓ+1) + σ(−ℓ−1) − σ(ℓ−1) − σ(−ℓ+1)) with ℓ = q·x: width m + 4·rank S.

`added_neurons` builds the neurons a construction adds, exactly; `large.witness_fields`
puts them after the own ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..certify import large as cert
from ..model import symbolic
from ..model.blocks import Block
from .canonical import ridge
from .lemmas import properties


def applies(block: Block) -> bool:
    found = ridge(block.activation)
    return (block.depth == 1 and block.layers is not None and not block.activation.gated
            and found is not None and found.a != 0)


def gate_constant(block: Block) -> tuple[Fraction, symbolic.Number] | None:
    """(γ, σ(γ)) with σ(γ) ≠ 0 proved, for a biased depth-1 gated block; else None. σ(γ) is
    rational (reglu, bilinear: γ = 1; glu: γ = 0, σ(0) = 1/2) or, for a σ irrational on
    Q \\ {0} with σ(0) = 0 (swiglu, geglu), the symbolic σ(1) (`symbolic.atom`, its sign
    proved by an arb enclosure). A bias-free block has no gate bias: γ = 0 only, when
    σ(0) ≠ 0 (glu: the gate row 0 alone makes a linear neuron ½·(u·x))."""
    if not block.activation.gated or block.depth != 1 or block.layers is None:
        return None
    if not block.biased:
        at_zero = properties(block.activation).sigma_at_zero
        return (Fraction(0), at_zero) if at_zero else None
    scalar = block.activation.scalar
    if scalar.is_rational:
        at_one = scalar.exact(Fraction(1))
        return (Fraction(1), at_one) if at_one != 0 else None
    at_zero = properties(block.activation).sigma_at_zero
    if at_zero:
        return Fraction(0), at_zero
    if scalar.kind not in symbolic.KINDS:
        return None
    at_one = symbolic.atom(scalar.kind, Fraction(1))
    return (Fraction(1), at_one) if symbolic.nonzero(at_one) else None


def square_constant(block: Block) -> Fraction | None:
    """v with σ(z) + σ(−z) = v z² (relu²: 1, square: 2, a polynomial whose even part is c2·z²:
    2·c2), for a biased depth-1 ungated block."""
    if (block.activation.gated or not block.biased or block.depth != 1
            or block.layers is None):
        return None
    scalar = block.activation.scalar
    if scalar.kind == "relu_pow" and scalar.power == 2:
        return Fraction(1)
    if scalar.kind == "poly":  # square and kin: even part c2·z² exactly, so v = 2·c2
        c = [Fraction(x) for x in scalar.coeffs] + [Fraction(0)] * 3
        if c[0] == 0 and c[2] != 0 and all(x == 0 for x in c[4::2]):
            return 2 * c[2]
    return None


def pair_constant(block: Block) -> tuple[Fraction, Fraction] | None:
    """(t, k) with σ(z + t) − σ(t − z) = k·z, k ≠ 0, for a biased depth-1 ungated block whose
    σ is a polynomial of degree exactly 2 (k = 4·c2·t + 2·c1; t = 1, else −1)."""
    if (block.activation.gated or not block.biased or block.depth != 1
            or block.layers is None or block.activation.scalar.kind != "poly"):
        return None
    c = [Fraction(x) for x in block.activation.scalar.coeffs]
    while c and c[-1] == 0:
        c.pop()
    if len(c) != 3:
        return None
    t = Fraction(1) if 2 * c[2] + c[1] != 0 else Fraction(-1)
    return t, 4 * c[2] * t + 2 * c[1]


def construction(block: Block) -> dict[str, Any] | None:
    """The certificate of the construction that absorbs this large block at its width, if
    any: spare pairs (O(a)+N), linear neurons (biased gated), square pairs (degree-2
    polynomials), square quadruples (relu²)."""
    if applies(block):
        return spare_certificate(block)
    if gate_constant(block) is not None:
        return linear_certificate(block)
    if pair_constant(block) is not None:
        return square_pairs_certificate(block)
    if square_constant(block) is not None:
        return square_certificate(block)
    return None


@dataclass(frozen=True)
class Factorisation:
    """S = Σ_k p_k q_kᵀ. Matrix skip: a skeleton S = S[:,C]·S[R,C]⁻¹·S[R,:] with |C| = |R| =
    rank S (p_k = S[:,C_k], q_k = row k of S[R,C]⁻¹·S[R,:]); S = cI: C = every column,
    p_k = c·e_k, q_k = e_k, rows None."""

    columns: list[int]
    rows: list[int] | None


def factorisation(block: Block) -> Factorisation:
    if block.skip.matrix is None:
        return Factorisation(list(range(block.dim)) if block.skip.scale else [], None)
    rows = [list(r) for r in block.skip.matrix.rows]
    return Factorisation(pivots(rows), pivots([list(c) for c in zip(*rows, strict=True)]))


def pivots(rows: list[list[Fraction]]) -> list[int]:
    """The pivot columns of the reduced row echelon form (exact, python-flint fmpq_mat)."""
    reduced, rank = fmpq(rows).rref()
    found = []
    for i in range(rank):
        found.append(next(j for j in range(reduced.ncols()) if reduced[i, j] != 0))
    return found


def fmpq(rows: list[list[Fraction]]) -> Any:
    import flint

    return flint.fmpq_mat(len(rows), len(rows[0]) if rows else 0,
                          [flint.fmpq(v.numerator, v.denominator) for r in rows for v in r])


def rank_one_terms(block: Block) -> list[tuple[list[Fraction], list[Fraction]]]:
    """The (p_k, q_k) of `factorisation`, exactly."""
    found, d = factorisation(block), block.dim
    if found.rows is None:
        c, zero, one = Fraction(block.skip.scale or 0), Fraction(0), Fraction(1)
        # one shared zero: d² entries for S = cI, of which d are not zero
        return [([c if r == k else zero for r in range(d)],
                 [one if r == k else zero for r in range(d)]) for k in found.columns]
    assert block.skip.matrix is not None
    s = [list(r) for r in block.skip.matrix.rows]
    core = fmpq([[s[r][c] for c in found.columns] for r in found.rows]).inv()
    q = core * fmpq([s[r] for r in found.rows])
    return [([s[r][c] for r in range(d)],
             [Fraction(int(q[k, j].p), int(q[k, j].q)) for j in range(d)])
            for k, c in enumerate(found.columns)]


def upper_bound(block: Block) -> int:
    """The spare-pair construction's width, m + 2·rank S."""
    return block.width + 2 * len(factorisation(block).columns)


def _terms(block: Block, per_term: int) -> tuple[int, list[int], list[int] | None]:
    """(width, columns, rows) of a construction adding `per_term` neurons per rank-one term."""
    found = factorisation(block)
    return block.width + per_term * len(found.columns), found.columns, found.rows


def spare_certificate(block: Block) -> dict[str, Any]:
    ridge_ = ridge(block.activation)
    assert ridge_ is not None
    return cert.spare_pairs(*_terms(block, 2), ridge_.a)


def linear_certificate(block: Block) -> dict[str, Any]:
    gamma = gate_constant(block)
    assert gamma is not None
    return cert.linear_neurons(*_terms(block, 1), gamma[0], symbolic.text(gamma[1]))


def square_certificate(block: Block) -> dict[str, Any]:
    v = square_constant(block)
    assert v is not None
    return cert.square_quadruples(*_terms(block, 4), v)


def square_pairs_certificate(block: Block) -> dict[str, Any]:
    pair = pair_constant(block)
    assert pair is not None
    return cert.square_pairs(*_terms(block, 2), *pair)


def added_neurons(block: Block) -> dict[str, np.ndarray]:
    """The neurons the construction (`construction`: spare pairs, linear neurons, square pairs
    or quadruples) adds to the block's own, as exact object arrays of Fractions: "up" (k×d),
    "down" (d×k), and "up_bias", "gate", "gate_bias" (k, k×d, k) where the witness has them.
    The own neurons are kept as they are, so a large witness never converts the block's
    weights."""
    assert block.layers is not None
    layer, d = block.layers[0], block.dim
    terms = rank_one_terms(block)
    zero = Fraction(0)
    if applies(block):  # p/(2a)·(σ(q·x) − σ(−q·x)) = p (q·x)
        a = ridge(block.activation).a  # type: ignore[union-attr]
        ups = [u for _, q in terms for u in (q, scaled(q, Fraction(-1)))]
        downs = [c for p, _ in terms
                 for c in (scaled(p, 1 / (2 * a)), scaled(p, -1 / (2 * a)))]
        biases = [zero] * len(ups)
        gates: list[list[Fraction]] | None = None
        gate_biases: list[Fraction] = []
    elif (gamma := gate_constant(block)) is not None:  # gate row 0, gate bias γ: σ(γ)(q·x)
        ups = [q for _, q in terms]
        downs = [scaled(p, 1 / gamma[1]) for p, _ in terms]
        biases = [zero] * len(ups)
        gates, gate_biases = [[zero] * d for _ in ups], [gamma[0]] * len(ups)
    elif (pair := pair_constant(block)) is not None:  # p/k·(σ(ℓ + t) − σ(−ℓ + t)) = p ℓ
        t, k = pair
        ups = [u for _, q in terms for u in (q, scaled(q, Fraction(-1)))]
        downs = [c for p, _ in terms for c in (scaled(p, 1 / k), scaled(p, -1 / k))]
        biases, gates, gate_biases = [t] * len(ups), None, []
    else:  # p/(4v)·(σ(ℓ+1) + σ(−ℓ−1) − σ(ℓ−1) − σ(−ℓ+1)) = p ℓ, ℓ = q·x
        v = square_constant(block)
        assert v is not None
        ups, downs, biases, gates, gate_biases = [], [], [], None, []
        for p_, q in terms:
            for sign, offset, weight in ((1, 1, 1), (-1, -1, 1), (1, -1, -1), (-1, 1, -1)):
                ups.append(scaled(q, Fraction(sign)))
                biases.append(Fraction(offset))
                downs.append(scaled(p_, weight / (4 * v)))
    out = {"up": object_array(ups, (len(ups), d)), "down": object_array(downs, (len(ups), d)).T}
    if layer.up_bias is not None or any(biases):
        out["up_bias"] = object_array(biases, (len(ups),))
    if gates is not None:
        out["gate"] = object_array(gates, (len(ups), d))
        if layer.gate_bias is not None or any(gate_biases):  # bias-free glu: none
            out["gate_bias"] = object_array(gate_biases, (len(ups),))
    return out


def scaled(vector: list[Fraction], factor: Fraction) -> list[Fraction]:
    """factor·vector; zero entries (most of them, for S = cI) skip Fraction arithmetic."""
    return [v * factor if v else v for v in vector]


def object_array(values: list[Any], shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(shape, dtype=object)
    if values:
        out[...] = values
    return out

