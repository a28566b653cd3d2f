"""GLU families without biases (docs/rules.md, "GLU sign flips", families): depth 1, S ≠ 0,
r = rank S, a gate σ with Og(c), c = σ(0) ≠ 0 (glu: ½), σ − c odd, analytic and not a
polynomial (lemma OgN). At width w:

- **never** if m + w < r (`§5 rank of S`): at x = 0 a neuron d·σ(g·x)(u·x) has Jacobian
  σ(0)·d uᵀ = c·d uᵀ, so if a plain block P of width w equals B, S = c(D′U′ − DU) has rank at
  most m + w;
- **always** at w ≥ m + r (`§5 linear neurons`): a neuron with gate row 0 computes c·d (u·x),
  so one per rank-one term p qᵀ of S (up q, down p/c) adds S x to the block's own neurons;
- **sometimes** iff m + w ≥ r (`§5 linear neurons in the block`): a member whose first
  min(m, r) neurons are such linear neurons cancelling as many rank-one terms of S (the others
  dead) equals the linear map of the remaining terms, rank r − min(m, r) ≤ w, which w linear
  neurons compute;
- **generically not** at w ≤ m (`§5 genericity`): generic weights put the block in §5's
  generic case (every neuron alone on its key ±g_i, d_i ≠ 0, u_i ≠ 0), where width m needs an
  index set J with Σ_J d_i u_iᵀ = −S/(2c): J = ∅ fails as S ≠ 0, and every other J is a
  proper algebraic condition (scale a d_i); a witness at w < m would be one at m.

Between m + 1 and m + r − 1, "generically not" and "always" stay `unknown`. The example of
"sometimes" (m ≥ r, w ≥ m) is a member in §5's generic case whose first r neurons carry
−S/(2c), with the witness §5's sign flips find for it. The checker re-derives each rule's
preconditions (checker/dispatch.py `_glu_family_rule`).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

from ..certify import bodies as cert
from ..model import linalg
from ..model.blocks import Block, Layer, Matrix
from .family_facts import ALWAYS, NEVER, Facts, attach_example, too_big_for_example
from .lemmas import properties

RANK = "§5 rank of S"
LINEAR = "§5 linear neurons"
IN_BLOCK = "§5 linear neurons in the block"
GENERIC = "§5 genericity"


def constant(block: Block) -> Fraction | None:
    """c = σ(0) ≠ 0 of a bias-free depth-1 Og(c) family (σ − c odd, analytic, not a
    polynomial: proved properties), else None."""
    act = block.activation
    if block.biased or block.depth != 1 or block.layers is not None or not act.gated:
        return None
    props = properties(act)
    c = props.gated_const
    return c if c and props.gated_odd_part else None


def _rule(name: str, r: int, size: int, argument: str) -> dict[str, Any]:
    return cert.rule(name, size, argument, rank=r)


def table(block: Block, size: int, r: int, out: Facts) -> None:
    """The facts above for a family `constant` covers (nothing otherwise, or when S = 0)."""
    c = constant(block)
    if c is None or r == 0:
        return
    m = block.width
    if m + size < r:
        out.set_all(NEVER, RANK, _rule(
            RANK, r, size, "at x = 0 a neuron d sigma(g.x)(u.x) has Jacobian sigma(0) d u^T, so "
            "a plain block of width w equal to B gives S = sigma(0)(D'U' - DU), of rank at "
            "most m + w"))
        return
    sometimes = _rule(IN_BLOCK, r, size,
                      "a member whose first min(m, rank S) neurons have gate row 0 (sigma(0) "
                      "(u.x) d, linear) cancelling as many rank-one terms of S, the rest dead, "
                      "is the linear map of the remaining terms, of rank at most w: w linear "
                      "neurons compute it")
    if size >= m:
        sometimes = attach_example(None if too_big_for_example(block) else member(block, c),
                                   size, sometimes)
    out.set("sometimes", True, IN_BLOCK, sometimes)
    out.set("never", False, IN_BLOCK, sometimes)
    if size >= m + r:
        out.set_all(ALWAYS, LINEAR, _rule(
            LINEAR, r, size, "keep the m neurons and add one neuron with gate row 0 per "
            "rank-one term p q^T of S: up q, down p/sigma(0), which computes p q^T x"))
    elif size <= m:
        generic = _rule(GENERIC, r, size,
                        "generic weights put every neuron alone on its key +-g_i with d_i, u_i "
                        "!= 0 (§5's generic case): width m needs J with sum_J d_i u_i^T = "
                        "-S/(2c), a proper algebraic condition for each J as S != 0; a witness "
                        "narrower than m is one at m")
        out.set("generically not", True, GENERIC, generic)
        out.set("always", False, GENERIC, generic)


def member(block: Block, c: Fraction) -> Block | None:
    """A member in §5's generic case absorbable at width m: per rank-one term p qᵀ of S a
    neuron with gate q, up q and down −p/(2c) (flipping these r neurons cancels S), then
    neurons with gate e_j + (n+1)·e_{j+1} (d = 1: n + 2), up and down e_j, on keys ±g of their
    own. None when rank S > m."""
    d, m = block.dim, block.width
    terms = linalg.rank_factor(block.skip.rows())
    if len(terms) > m:
        return None
    zero, one = Fraction(0), Fraction(1)
    neurons = [(q, q, tuple(-x / (2 * c) for x in p)) for p, q in terms]
    seen = {_key(g) for g, _, _ in neurons}
    n = 0
    while len(neurons) < m:
        j = n % d
        gate = (Fraction(n + 2),) if d == 1 else tuple(
            one if t == j else Fraction(n + 1) if t == (j + 1) % d else zero for t in range(d))
        unit = tuple(one if t == j else zero for t in range(d))
        if _key(gate) not in seen:
            seen.add(_key(gate))
            neurons.append((gate, unit, unit))
        n += 1
    layer = Layer(Matrix([u for _, u, _ in neurons]),
                  Matrix([tuple(down[r] for _, _, down in neurons) for r in range(d)]),
                  Matrix([g for g, _, _ in neurons]))
    return replace(block, layers=(layer,))


def _key(gate: tuple[Fraction, ...]) -> tuple[Fraction, ...]:
    """A gate row up to sign (§5's keys: σ(2z) is another function than σ(z))."""
    return max(gate, tuple(-x for x in gate))
