"""What a user would do without absorb_formal: enumerate subsets, or ask z3 directly.

- `brute_force`: every J ⊆ {1..m}, checking Σ_{i∈J} d_i u_iᵀ = −S/(2a) exactly (integers
  after clearing denominators), vectorised with numpy in blocks of 2^16 subsets.
- `z3_equivalence`: the direct encoding of published network-equivalence checkers,
  `∃x: A(x) ≠ B(x)` with If-encoded ReLUs over the reals; unsat means equal.
"""

from __future__ import annotations

import time
from fractions import Fraction
from math import lcm

import numpy as np

from absorb_formal.model.blocks import Block

CHUNK_BITS = 16


def _integers(terms: list, goal: list) -> tuple[np.ndarray, np.ndarray]:
    flat = [[x for row in t for x in row] for t in terms]
    want = [x for row in goal for x in row]
    scale = lcm(*(x.denominator for x in want + [x for f in flat for x in f]))
    return (np.array([[int(x * scale) for x in f] for f in flat], dtype=np.int64),
            np.array([int(x * scale) for x in want], dtype=np.int64))


def brute_force(terms: list, goal: list, limit_s: float) -> tuple[str, float, float]:
    """(verdict "found"/"none"/"timeout", seconds, estimated seconds for the full search)."""
    w, t = _integers(terms, goal)
    m = len(terms)
    low = min(m, CHUNK_BITS)
    masks = ((np.arange(2**low)[:, None] >> np.arange(low)) & 1).astype(np.int64)
    low_sums = masks @ w[:low]  # all subsets of the first `low` terms
    start = time.perf_counter()
    highs = 2 ** (m - low)
    for high in range(highs):
        offset = sum((w[low + j] for j in range(m - low) if high >> j & 1),
                     np.zeros_like(t))
        if np.any(np.all(low_sums + offset == t, axis=1)):
            return "found", time.perf_counter() - start, time.perf_counter() - start
        spent = time.perf_counter() - start
        if spent > limit_s:
            return "timeout", spent, spent * highs / (high + 1)
    spent = time.perf_counter() - start
    return "none", spent, spent


def z3_equivalence(left: Block, right: Block, limit_s: float) -> tuple[str, float]:
    """("equal" | "different" | "timeout", seconds)."""
    import z3

    start = time.perf_counter()
    x = [z3.Real(f"x{j}") for j in range(left.dim)]
    solver = z3.Solver()
    solver.set("timeout", int(limit_s * 1000))
    solver.set("random_seed", 0)
    outs = [_relu_block(b, x) for b in (left, right)]
    solver.add(z3.Or([a != b for a, b in zip(*outs, strict=True)]))
    verdict = solver.check()
    spent = time.perf_counter() - start
    if verdict == z3.unsat:
        return "equal", spent
    return ("different" if verdict == z3.sat else "timeout"), spent


def _relu_block(block: Block, x: list) -> list:
    import z3

    def q(v: Fraction) -> z3.ArithRef:
        return z3.RealVal(f"{v.numerator}/{v.denominator}")

    assert block.layers is not None and block.skip.scale is not None
    layer = block.layers[0]
    hidden = []
    for u in layer.up.rows:
        z = z3.Sum([q(c) * xi for c, xi in zip(u, x, strict=True) if c != 0] or [q(Fraction(0))])
        hidden.append(z3.If(z > 0, z, 0))
    skip = Fraction(block.skip.scale)
    return [q(skip) * x[r] + z3.Sum([q(c) * h for c, h in zip(row, hidden, strict=True) if c])
            for r, row in enumerate(layer.down.rows)]
