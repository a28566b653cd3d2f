"""The half-activation bound for ReLU stacks of any depth (docs/rules.md §9; docs/rules.md,
"Depth ≥ 2: the half-activation bound").

Lemma H: a plain ReLU stack (any depth, biases allowed) whose first layer has m′ neurons is
affine, on some open set, with a Jacobian of rank ≤ ⌊m′/2⌋ (of y and −y, one activates at most
half of the first layer's non-constant neurons far out). A residual stack's Jacobian on an
open set where it is affine is a product Π_k (S + D_k diag(c·a_k) U_k) of *pattern matrices*,
a_k ∈ {0,1}^m (σ = c·relu; biases do not enter). So with r the least rank over all pattern
products, no plain stack of first width m′ < 2r equals the block: "not absorbable at width m′"
for m′ < 2r, and min width ≥ 2r.

How r is bounded from below, exactly:
- per layer, the *norm test*: S invertible and Σ_i |c|·‖S⁻¹d_i‖·‖u_i‖ < 1 (ℓ∞ or ℓ1 operator
  norms of the rank-one terms, exact rationals) makes every pattern matrix non-singular;
- else every one of the 2^m patterns (m ≤ 2^MAX_PATTERN_BITS): a Gray-code walk of rank-one
  updates modulo the prime 2^61 − 1 (python-flint); a pattern of full rank mod p is
  non-singular over Q, and the others get their exact rank over Q. The least rank r_k and
  the first pattern (in binary order) that attains it are recorded;
- across layers: every layer non-singular gives r = d; with a singular layer, the products
  are enumerated when there are at most MAX_TUPLES of them, else Sylvester's inequality
  rank(AB) ≥ rank A + rank B − d gives r ≥ Σ_k r_k − (L − 1)·d.

Guard rails: σ must be c·relu, proved with sympy (ungated, H(1), σ(z) = 0 for z < 0,
σ(1) = c ≠ 0): leaky ReLU, GELU, SiLU (whose derivative never vanishes: the first layer keeps
full rank) and gated blocks never get this rule.

Upper bounds at depth ≥ 2 (docs/rules.md §5, §9): a stack of absorbable layers is absorbable at the
largest layer width (narrower witnesses padded with dead neurons); `minimal_width` brackets
the min width between 2r and that width, and decides it when they meet.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import flint

from ..certify import bodies as cert
from ..certify import widths
from ..checker.kernel.contract import MAX_PATTERN_BITS, MAX_TUPLES
from ..model import linalg
from ..model.activations import Activation
from ..model.blocks import Block, Layer
from .decision import Decision
from .lemmas import properties

METHOD = "§9 half-activation bound"
STACK_METHOD = "§9 half-activation bound + stack of per-layer witnesses"
RULE = "§9 half-activation bound"  # the family rule (generically not, w < 2d, S invertible)
PRIME = 2**61 - 1  # a Mersenne prime: residues of a full-rank pattern prove non-singularity
# MAX_PATTERN_BITS (2^14 patterns per layer) and MAX_TUPLES (pattern products across layers)
# are the contract's: the checker's caps.


@functools.cache
def slope(activation: Activation) -> Fraction | None:
    """c with σ = c·relu, proved with sympy: ungated, H(1), σ(z) = 0 for every z < 0 and
    σ(1) = c ≠ 0 rational; None otherwise (its derivative does not vanish on a half-line)."""
    if activation.gated or properties(activation).homogeneous != 1:
        return None
    import sympy as sp

    p = sp.Symbol("p", positive=True)
    z = sp.Symbol("z", real=True)
    sigma = activation.scalar.sympy(z)
    if sp.simplify(sp.piecewise_fold(sigma.subs(z, -p))) != 0:
        return None
    c = sp.simplify(sigma.subs(z, sp.Integer(1)))
    if not c.is_Rational or c == 0:
        return None
    return Fraction(int(c.p), int(c.q))


@dataclass(frozen=True)
class Bound:
    """rank: the proved lower bound r on every pattern product's rank (None: undecided, with
    `reason`); fields: the certificate's, without the width."""

    rank: int | None
    fields: dict[str, Any] | None = None
    reason: str = ""


_CACHE: dict[int, tuple[Block, Bound]] = {}


def bound(block: Block) -> Bound:
    """The least pattern rank r of a concrete c·relu stack (kept for the last blocks: a claim,
    its min width and a query ask for the same block)."""
    hit = _CACHE.get(id(block))
    if hit is not None and hit[0] is block:
        return hit[1]
    found = _bound(block)
    if len(_CACHE) > 64:
        _CACHE.clear()
    _CACHE[id(block)] = (block, found)
    return found


def _bound(block: Block) -> Bound:
    c = slope(block.activation)
    if c is None:
        return Bound(None, reason=f"{block.activation}'s derivative does not vanish on a "
                                  "half-line: the half-activation bound (§9) needs c·relu")
    if block.layers is None:
        return Bound(None, reason="a family has no patterns to enumerate")
    d = block.dim
    s = [list(r) for r in block.skip.rows()]
    inverse = _inverse(s)
    entries: list[dict[str, Any]] = []
    ranks: list[int] = []
    walks: list[Walk | None] = []
    for n, layer in enumerate(block.layers, start=1):
        norm = _norm_test(inverse, layer, c) if inverse is not None else None
        if norm is not None:
            entries.append(widths.norm_test(norm[0], norm[1]))
            ranks.append(d)
            walks.append(None)
            continue
        m = layer.up.shape[0]
        if m > MAX_PATTERN_BITS:
            return Bound(None, reason=f"layer {n}: the norm test does not hold and its 2^{m} "
                                      f"patterns are too many to enumerate (limit "
                                      f"2^{MAX_PATTERN_BITS}): the half-activation bound (§9) "
                                      "is not computed")
        walk = _walk(s, layer, c)
        least, pattern = walk.least
        entries.append(widths.pattern_test(least, _indices(pattern)))
        ranks.append(least)
        walks.append(walk)
    least: list[list[int]] | None = None
    if all(r == d for r in ranks):
        combine, rank = "non-singular", d
    elif len(ranks) == 1:
        combine, rank = "one layer", ranks[0]
    elif _tuples(block) <= MAX_TUPLES:
        rank, tuple_ = _least_product(s, block.layers, c, walks)
        combine, least = "products", [_indices(a) for a in tuple_]
    else:
        combine, rank = "sylvester", max(0, sum(ranks) - (len(ranks) - 1) * d)
    return Bound(int(rank), widths.half_activation_bound(entries, combine, rank, least))


def _tuples(block: Block) -> int:
    total = 1
    for layer in block.layers or ():
        total *= 2 ** layer.up.shape[0]
    return total


def _indices(pattern: int) -> list[int]:
    return [i + 1 for i in range(pattern.bit_length()) if pattern >> i & 1]


def _inverse(s: list[list[Fraction]]) -> linalg.Rows | None:
    if linalg.rank(s) < len(s):
        return None
    return linalg.from_flint(linalg.to_flint(s).inv())


def _norm_test(inverse: linalg.Rows, layer: Layer, c: Fraction) -> tuple[str, Fraction] | None:
    """("inf" or "one", Σ_i |c|·‖S⁻¹d_i‖·‖u_i‖) when the smaller sum is below 1: then
    ‖S⁻¹ D diag(c a) U‖ < 1 for every pattern a, and S + D diag(c a) U = S(I + …) is
    invertible (ℓ∞ operator norm of v wᵀ: ‖v‖∞‖w‖₁; ℓ1: ‖v‖₁‖w‖∞)."""
    sums = {"inf": Fraction(0), "one": Fraction(0)}
    for i, u in enumerate(layer.up.rows):
        w = [linalg.dot(row, layer.down.column(i)) for row in inverse]
        sums["inf"] += abs(c) * max((abs(x) for x in w), default=Fraction(0)) * sum(
            (abs(x) for x in u), Fraction(0))
        sums["one"] += abs(c) * sum((abs(x) for x in w), Fraction(0)) * max(
            (abs(x) for x in u), default=Fraction(0))
    name = min(sums, key=lambda k: (sums[k], k))
    return (name, sums[name]) if sums[name] < 1 else None


def _residues(rows: list[list[Fraction]] | linalg.Rows) -> Any:
    """The matrix modulo PRIME (nmod_mat), or None when PRIME divides a denominator."""
    values = []
    for row in rows:
        for x in row:
            if x.denominator % PRIME == 0:
                return None
            values.append(x.numerator * pow(x.denominator, -1, PRIME) % PRIME)
    return flint.nmod_mat(len(rows), len(rows[0]) if rows else 0, values, PRIME)


@dataclass
class Walk:
    """Every pattern of one layer: least (rank, first pattern in binary order with it), and
    the pattern matrices modulo p (kept only while products may be enumerated)."""

    least: tuple[int, int]
    residues: dict[int, Any]


def pattern_matrix(s: list[list[Fraction]], layer: Layer, c: Fraction,
                   pattern: int) -> linalg.Rows:
    """S + c·Σ_{i ∈ pattern} d_i u_iᵀ, exactly."""
    active = [i for i in range(layer.up.shape[0]) if pattern >> i & 1]
    if not active:
        return tuple(tuple(r) for r in s)
    total = linalg.sum_of_outers([layer.down.column(i) for i in active],
                                 [layer.up.rows[i] for i in active], [c] * len(active))
    return linalg.add(s, total)


def _walk(s: list[list[Fraction]], layer: Layer, c: Fraction) -> Walk:
    d, m = len(s), layer.up.shape[0]
    keep = 2 ** m <= MAX_TUPLES
    steps = [_residues(linalg.outer(layer.down.column(i), layer.up.rows[i], c)) for i in range(m)]
    current = _residues(s)
    exact_only = current is None or any(x is None for x in steps)
    best = (d + 1, 0)
    kept: dict[int, Any] = {}
    pattern = 0
    for t in range(2 ** m):
        if t:
            j = (t & -t).bit_length() - 1
            on = not pattern >> j & 1
            pattern ^= 1 << j
            if not exact_only:
                current = current + steps[j] if on else current - steps[j]
        rank = d if not exact_only and current.rank() == d else \
            linalg.rank(pattern_matrix(s, layer, c, pattern))
        best = min(best, (rank, pattern))
        if keep and not exact_only:
            kept[pattern] = current
    return Walk(best, kept)


def _least_product(s: list[list[Fraction]], layers: tuple[Layer, ...], c: Fraction,
                   walks: list[Walk | None]) -> tuple[int, tuple[int, ...]]:
    """The least rank of M_L(a_L)⋯M_1(a_1) over every tuple, and the first tuple (layer 1's
    pattern first, each in binary order) that attains it."""
    d = len(s)
    import itertools

    best: tuple[int, tuple[int, ...]] = (d + 1, ())
    ranges = [range(2 ** layer.up.shape[0]) for layer in layers]
    for tuple_ in itertools.product(*ranges):
        product = None
        exact_needed = False
        for k, a in enumerate(tuple_):
            walk = walks[k]
            factor = walk.residues.get(a) if walk is not None else None
            if factor is None:
                factor = _residues(pattern_matrix(s, layers[k], c, a))
            if factor is None:
                exact_needed = True
                break
            product = factor if product is None else factor * product
        rank = d if not exact_needed and product is not None and product.rank() == d else \
            _exact_product_rank(s, layers, c, tuple_)
        best = min(best, (rank, tuple_))
    return best


def _exact_product_rank(s: list[list[Fraction]], layers: tuple[Layer, ...], c: Fraction,
                        tuple_: tuple[int, ...]) -> int:
    product: linalg.Rows | None = None
    for layer, a in zip(layers, tuple_, strict=True):
        factor = pattern_matrix(s, layer, c, a)
        product = factor if product is None else linalg.matmul(factor, product)
    assert product is not None
    return linalg.rank(product)


def certificate(found: Bound, size: int) -> dict[str, Any]:
    assert found.fields is not None
    return widths.half_activation_at(found.fields, size)


def refute(block: Block, size: int) -> Decision | None:
    """'Not absorbable at width size' when size < 2r; None when the rule says nothing."""
    found = bound(block)
    if found.rank is None or size >= 2 * found.rank:
        return None
    return Decision(False, METHOD, certificate(found, size),
                    detail=f"every pattern Jacobian has rank >= {found.rank}: a plain ReLU "
                           f"stack needs width >= {2 * found.rank}")


def why_silent(block: Block, size: int) -> str:
    """Why `refute` said nothing at `size` (for unknown reasons)."""
    found = bound(block)
    if found.rank is None:
        return found.reason
    return (f"the half-activation bound (§9) gives min width >= {max(1, 2 * found.rank)} "
            f"(least pattern rank {found.rank}), which width {size} meets")


# ---- families --------------------------------------------------------------------------------

def family(block: Block, size: int) -> dict[str, Any] | None:
    """The family rule: a c·relu stack (any depth, biases allowed) with S invertible is
    generically not absorbable at any width w < 2d (each pattern determinant is a non-zero
    polynomial in the weights: at D = 0 it is det S), so the rule certificate, or None."""
    if slope(block.activation) is None or size >= 2 * block.dim:
        return None
    from . import skip

    r = skip.rank(block.skip)
    if r != block.dim:
        return None
    return cert.rule(RULE, size,
                     "S invertible: every pattern determinant det(S + D diag(c a) U) is a "
                     "non-zero polynomial in the weights (det S at D = 0), so generic "
                     "weights make every pattern product non-singular (r = d), and Lemma H "
                     "needs width >= 2d", rank=r)
