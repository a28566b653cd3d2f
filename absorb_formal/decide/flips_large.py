"""Flip sets at scale (docs/rules.md §8.2, "Flip sets at scale: the unique solution mod q"):
the same-width question of large biased depth-1 relu², gated O(a)+N (swiglu, geglu, reglu)
and Og(c) (glu, with or without biases: without, the row is §5's condition) blocks, decided
both ways by the unique solution of §8.2's system mod q, as
`unique_subset` decides §4's generic case.

§8.2's condition on the flip set J is one linear system in c ∈ {0, 1}^m (`flips.py` states it
for small blocks):

- relu²: Σ c_i d_i ⊗ u_i u_iᵀ = 0 and Σ c_i d_i (2β_i u_i)ᵀ = −S;
- gated O(a)+N: Σ c_i d_i ⊗ sym(g_i u_iᵀ) = 0 and Σ c_i d_i (2a(γ_i u_i + β_i g_i))ᵀ = −S;
- Og(c): Σ c_i d_i u_iᵀ = −S/(2c) — §4's system with a = c (`unique_subset.system`).

For the first two, m functionals (X, L) ↦ Σ_r p_{j,r} b_jᵀ X_r b_j + p_jᵀ L q_j (integer p_j,
q_j, b_j from seed 0, `kernel/systems.projected_flip_system`) give the m×m system A·c = b mod q
without a d³ tensor: A[j, i] = (p_j·d_i)((b_j·g_i)(b_j·u_i) + λ_i (q_j·u_i) + μ_i (q_j·g_i)).
If A is invertible mod q, the system has at most one rational solution and it reduces to
the solution ĉ mod q (the argument of `unique_subset`: A = F·K with F integer, det A ≢ 0, no
denominator divisible by q). So a ĉ_i ∉ {0, 1} refutes, and a 0/1 ĉ leaves one candidate J,
tested exactly (python-flint) on both parts:

- linear part: Σ_J d_i v_iᵀ = −S/(2a) (`unique_subset.identity_failure` with rows v_i);
- quadratic part: Σ_J d_{r,i}(g_i u_iᵀ + u_i g_iᵀ) = 0 for every r (relu²: g = u). With C
  the pivot columns of the stacked rows [G_J; U_J] (every column of it is V[:, C]·R with
  R[:, C] = I, so each matrix is Rᵀ·(its C×C block)·R), it holds iff it holds on C × C:
  d·|J|·k² products (k = |C| ≤ min(d, 2|J|)). Beyond MAX_QUADRATIC the claim is `unknown`.

The refutation needs every neuron alive and alone on its key (§8.2's only-if): D's columns
non-zero; the key rows (relu²: [u_i | β_i], u_i ≠ 0; gated: [g_i | γ_i], g_i ≠ 0, and
(u_i, β_i) ≠ 0) on pairwise different residue keys mod p (`modular.affine_keys_distinct`:
different lines of Q^{d+1}, so different keys up to a factor and up to sign). The witness
needs only the identities: relu² flips row u_i, β_i and d_i (c′ = c + Σ_J β_i² d_i); gated
flips g_i and γ_i (c′ = c + 2a Σ_J γ_i β_i d_i); Og(c) flips g_i, γ_i and d_i
(c′ = c + 2c Σ_J β_i d_i) — `flips.py`'s witness, built without converting the block.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..certify import large as cert
from ..checker.kernel import systems
from ..checker.kernel.contract import MAX_QUADRATIC, SEED
from ..model import linalg
from ..model.blocks import Block, Layer
from . import flips, large, modular, unique_subset
from .decision import Decision, undecided

METHOD = "§8.2 flip sets + unique solution mod q"
KEY_METHOD = "§8.2 key count"
# The small path (flips.py, an exact subset search over m terms of d³ + d² entries) is left
# to blocks whose system has at most this many entries; larger ones come here first.
MAX_EXACT_COST = 100_000
# MAX_QUADRATIC (the contract's): products d·|J|·k² of the exact quadratic identity of a
# candidate J attempted (k ≤ 2|J|), as many as the checker checks.


def applies(block: Block) -> bool:
    """A concrete biased depth-1 block whose activation is a row of §8.2's table, or a
    bias-free glu block: the Og(c) row with β = γ = 0 is §5's condition (the other rows
    without biases are T1/T4's, never absorbable, decided before this)."""
    if block.layers is None or block.depth != 1:
        return False
    rule = flips.rule_for(block)
    return rule is not None and (block.biased or rule.name == "Og(c)")


def costly(block: Block) -> bool:
    """Whether the small path's exact system (m terms of d³ + d² entries) is too large."""
    d = block.dim
    return applies(block) and block.width * (d ** 3 + d * d) > MAX_EXACT_COST


_RECENT: list[tuple[Block, Decision | None]] = []  # newest first: a query asks twice
RECENT = 4


def decide(block: Block, size: int) -> Decision | None:
    """The §8.2 decision at width `size` from the one at the block's own width m: a witness
    at m proves every size ≥ m, a refutation at m refutes every size ≤ m (a witness at w < m
    would be one at m, zero neurons added); other widths, and an undecided own width, are
    undecided with the reason; None when the rule does not apply at all."""
    if not applies(block):
        return None
    counted = key_count(block, size)  # below m: the only-if alone, no system to solve
    if counted is not None:
        return counted
    own = own_width(block)
    m = block.width
    if own is None:
        return None
    if own.absorbable is True and size < m:
        return undecided(f"§8.2 proves width {m} ({own.detail}); narrower widths of a large "
                         f"{block.activation} block: no rule decides them")
    if own.absorbable is False and size > m:
        return undecided(f"§8.2 refutes width {m} and every narrower one; wider widths "
                         "below the construction: no rule decides them")
    if own.absorbable is None and size != m:
        return undecided(f"§8.2 leaves the own width {m} open ({own.reason})")
    return own


def key_count(block: Block, size: int) -> Decision | None:
    """Not absorbable at width size < m when every neuron is alive and alone on its key
    (§8.2's only-if: the non-polynomial parts of distinct keys are independent, so a plain
    block equal to B has a neuron on each of its m keys); None otherwise. Any size: the test
    is O(m·d) residues, as for the refutation at m."""
    if not applies(block) or size >= block.width:
        return None
    rule = flips.rule_for(block)
    assert rule is not None
    if alone(block, rule):
        return None
    m = block.width
    return Decision(False, KEY_METHOD,
                    cert.flip_key_count(rule.name, rule.value, large.PRIME, m, size),
                    detail=f"{m} keys need {m} neurons")


def own_width(block: Block) -> Decision | None:
    """Proved or refuted at width m, undecided with the reason, or None (A singular mod
    every prime tried, a residue missing, or more unknowns than equations)."""
    found = next((d for b, d in _RECENT if b is block), None)
    if found is None and not any(b is block for b, _ in _RECENT):
        found = _own_width(block)
    _RECENT[:] = [(block, found)] + [(b, d) for b, d in _RECENT if b is not block]
    del _RECENT[RECENT:]
    return found


def _own_width(block: Block) -> Decision | None:
    rule = flips.rule_for(block)
    assert rule is not None and block.layers is not None
    layer = block.layers[0]
    m, d = block.width, block.dim
    equations = d * d if rule.name == "Og(c)" else d * d * (d + 1) // 2 + d * d
    if m == 0 or m > equations:
        return None  # more unknowns than equations: never a unique solution
    room = unique_subset.memory(m)
    if room:
        return undecided(room)
    candidate = unique_subset.Candidate(
        METHOD, cert.flip_fields(rule.name, rule.value, m), cert.FLIP_SYSTEM,
        lambda chosen: failure(block, rule, chosen),
        lambda chosen: (witness_certificate(rule, chosen, m), flipped(block, rule, chosen)),
        refutable=alone(block, rule))
    if rule.name == "Og(c)":
        factor = -1 / (2 * rule.value)
        return unique_subset.solve(
            block, lambda q: unique_subset.system(block, SEED, q, factor),
            candidate)
    return unique_subset.solve(block, lambda q: system(block, layer, rule, q), candidate)


def alone(block: Block, rule: flips.Rule) -> str:
    """Why some neuron is not shown alive and alone on its key ("" when all are)."""
    assert block.layers is not None
    layer = block.layers[0]
    if not layer.down.nonzero().any(axis=0).all():
        return "a column of D is 0 (a dead neuron: no refutation)"
    betas = _biases(layer.up_bias, block.width)
    if layer.gate is None:
        keyed, offsets = layer.up, betas
    else:
        keyed, offsets = layer.gate, _biases(layer.gate_bias, block.width)
        ups = layer.up.nonzero().any(axis=1) | np.array([b != 0 for b in betas])
        if not ups.all():
            return "a neuron has a zero up row and up bias (a dead neuron: no refutation)"
    distinct = modular.affine_keys_distinct(keyed, offsets)
    if distinct is None:
        return f"a weight is not a unit mod {large.PRIME}, so residue keys prove nothing"
    if not distinct:
        what = "rows of U" if layer.gate is None else "gate rows"
        return (f"two neurons share a residue key, or a key row is 0 ({what} with their "
                "biases): §8.2's only-if needs distinct keys")
    return ""


def _biases(values: tuple[Fraction, ...] | None, m: int) -> tuple[Fraction, ...]:
    """A hidden bias, zeros in a bias-free block (only glu comes here without biases)."""
    return values if values is not None else (Fraction(0),) * m


def system(block: Block, layer: Layer, rule: flips.Rule, q: int) -> np.ndarray | None:
    """[A | b] mod q of the relu² or gated system (`systems.projected_flip_system`), T = −S;
    None when q divides a denominator."""
    found = unique_subset.residues(block, q, Fraction(-1))
    assert layer.up_bias is not None
    betas = _residues(layer.up_bias, q)
    if found is None or betas is None:
        return None
    down, up, target = found
    if layer.gate is None:  # relu²: λ = 2β, μ = 0, g = u
        return systems.projected_flip_system(down, up, up, 2 * betas % q, np.zeros_like(betas),
                                             target, SEED, q)
    m, d = layer.up.shape
    assert layer.gate_bias is not None
    gate = layer.gate.residues(range(m), range(d), q)
    gammas = _residues(layer.gate_bias, q)
    scale = linalg.residue(2 * rule.value, q)
    if gate is None or gammas is None or scale is None:
        return None
    return systems.projected_flip_system(down, up, gate, scale * gammas % q, scale * betas % q,
                                         target, SEED, q)


def _residues(values: tuple[Fraction, ...], q: int) -> np.ndarray | None:
    found = [linalg.residue(v, q) for v in values]
    if any(v is None for v in found):
        return None
    return np.array(found, dtype=np.int64)


def failure(block: Block, rule: flips.Rule, chosen: list[int]) -> tuple[int, ...] | None:
    """The first entry where J's identity fails, exactly: (r, s, t) of the quadratic part
    (s, t among its pivot columns C), else (r, c) of the linear part; None when both hold.
    Raises `unique_subset.TooCostly` beyond MAX_QUADRATIC."""
    assert block.layers is not None
    layer = block.layers[0]
    if rule.name == "Og(c)":
        return unique_subset.identity_failure(block, chosen, rule.value)
    quadratic = quadratic_failure(block, chosen)
    if quadratic is not None:
        return quadratic
    assert layer.up_bias is not None
    ups = [layer.up.exact_row(i) for i in chosen]
    if layer.gate is None:  # 2 Σ β d uᵀ = −S: rows β u, a = 1
        rows = [tuple(layer.up_bias[i] * v for v in u) for i, u in zip(chosen, ups, strict=True)]
    else:  # 2a Σ d (γ u + β g)ᵀ = −S
        assert layer.gate_bias is not None
        rows = [tuple(layer.gate_bias[i] * x + layer.up_bias[i] * y for x, y in zip(
            u, layer.gate.exact_row(i), strict=True)) for i, u in zip(chosen, ups, strict=True)]
    return unique_subset.identity_failure(block, chosen, rule.value, rows)


def quadratic_failure(block: Block, chosen: list[int]) -> tuple[int, int, int] | None:
    """The first (r, s, t), r < d and s, t in the pivot columns C of [G_J; U_J] (row-major
    over r, then C × C), where Σ_J d_{r,i}(g_i u_iᵀ + u_i g_iᵀ) ≠ 0 (relu²: g = u), exactly;
    None when it is 0 on C × C, hence everywhere (docstring above)."""

    assert block.layers is not None
    layer, d = block.layers[0], block.dim
    if not chosen:
        return None
    ups = [layer.up.exact_row(i) for i in chosen]
    gates = ups if layer.gate is None else [layer.gate.exact_row(i) for i in chosen]
    stacked = ups if layer.gate is None else gates + ups
    bound = min(d, len(stacked))
    if d * len(chosen) * bound * bound > MAX_QUADRATIC:
        raise unique_subset.TooCostly(
            f"its exact quadratic identity (up to d·|J|·k² = {d * len(chosen) * bound ** 2:,} "
            f"products, k ≤ {bound} pivot columns) is beyond the {MAX_QUADRATIC:,} attempted")
    reduced, rank = linalg.to_flint(stacked, d).rref()
    pivots = [next(j for j in range(d) if reduced[i, j] != 0) for i in range(rank)]
    terms = []
    for g, u in zip(gates, ups, strict=True):
        gc, uc = [g[j] for j in pivots], [u[j] for j in pivots]
        terms.append([gc[s] * uc[t] + uc[s] * gc[t] for s in range(rank) for t in range(rank)])
    left = linalg.to_flint([list(col) for col in zip(*[layer.down.exact_column(i)
                                                       for i in chosen], strict=True)],
                           len(chosen))
    total = left * linalg.to_flint(terms, rank * rank)
    entries = total.entries()
    index = next((n for n, v in enumerate(entries) if v != 0), None)
    if index is None:
        return None
    r, rest = divmod(index, rank * rank)
    return r, pivots[rest // rank], pivots[rest % rank]


def witness_certificate(rule: flips.Rule, chosen: list[int], m: int) -> dict[str, Any]:
    return cert.flips_at_scale(rule.name, rule.value, [i + 1 for i in chosen], m)


def flipped(block: Block, rule: flips.Rule, chosen: list[int]) -> Layer:
    """§8.2's witness (`flips.flipped`) with the loaded arrays negated as arrays."""
    assert block.layers is not None
    layer = block.layers[0]
    if not block.biased:  # glu (§5): gate rows and down columns of J negated, no biases
        assert rule.name == "Og(c)" and layer.gate is not None
        return Layer(layer.up, unique_subset.negated(layer.down, chosen, columns=True),
                     unique_subset.negated(layer.gate, chosen))
    assert layer.up_bias is not None and layer.down_bias is not None
    picked = set(chosen)

    def neg(v: tuple[Fraction, ...] | None) -> tuple[Fraction, ...] | None:
        return None if v is None else tuple(-x if i in picked else x for i, x in enumerate(v))

    down = layer.down if rule.name == "gated O(a)+N" else unique_subset.negated(
        layer.down, chosen, columns=True)
    shift = flips.constant_shift(layer, rule, picked)
    c_out = tuple(c + s for c, s in zip(layer.down_bias, shift, strict=True))
    if layer.gate is None:
        return Layer(unique_subset.negated(layer.up, chosen), down, None, neg(layer.up_bias),
                     None, c_out)
    return Layer(layer.up, down, unique_subset.negated(layer.gate, chosen), layer.up_bias,
                 neg(layer.gate_bias), c_out)
