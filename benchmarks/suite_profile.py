"""Hot paths, before and after, measured live in the same run (the "before" code is kept
here, not in the package)."""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any

import numpy as np
from common import median, seconds, table
from instances import absorb_block
from suite_absorb import tool

from absorb_formal.decide.modular import PRIME
from absorb_formal.model import linalg
from absorb_formal.model.exactarray import residues


def _solve_affine_before(columns: Any, target: Any) -> Any:
    """The kernel as it was computed before: a second RREF of the already reduced rows."""
    n, q = len(target), len(columns)
    augmented = [tuple(columns[j][i] for j in range(q)) + (target[i],) for i in range(n)]
    reduced, pivots = linalg.rref(augmented)
    if q in pivots:
        return None, []
    c = [Fraction(0)] * q
    for i, p in enumerate(pivots):
        c[p] = reduced[i][q]
    return tuple(c), linalg.nullspace([row[:q] for row in reduced[: len(pivots)]], q)


def kernel(seeds: int, log: Any) -> tuple[Any, ...]:
    before, after = [], []
    for seed in range(seeds):
        block = absorb_block("relu", 8, 128, seed, False)
        after.append(tool(block, 60.0).seconds)
        saved = linalg.solve_affine
        linalg.solve_affine = _solve_affine_before
        try:
            before.append(tool(block, 60.0).seconds)
        finally:
            linalg.solve_affine = saved
    b, a = median(before), median(after)
    log(f"profile kernel: {b:.2f} s -> {a:.2f} s")
    return ("kernel of the subset system, relu d = 8, m = 128 random (end to end)",
            "second flint RREF of the reduced rows (689-bit entries)", seconds(b),
            "read off the first RREF", seconds(a), f"{b / a:.0f}×")


def modular_residues(log: Any) -> tuple[Any, ...]:
    rng = np.random.default_rng(0)
    values = rng.standard_normal((46, 2048)).astype(np.float32).astype(np.float64)
    start = time.perf_counter()
    slow = [[Fraction(x).numerator * pow(Fraction(x).denominator, -1, PRIME) % PRIME
             for x in row] for row in values.tolist()]
    b = time.perf_counter() - start
    start = time.perf_counter()
    fast = residues(values, PRIME)
    a = time.perf_counter() - start
    assert fast.tolist() == slow
    log(f"profile residues: {b:.3f} s -> {a:.3f} s")
    return ("residues mod p of 46 × 2048 float32 weights (T5 minor)", "Fraction per entry",
            f"{b:.3f}", "numpy frexp, vectorised", f"{a:.4f}", f"{b / a:.0f}×")


def markdown(rows: list[tuple[Any, ...]], z3_rows: list[tuple[Any, ...]]) -> str:
    return "\n\n".join([
        table(("hot path", "before", "s", "after", "s", "speed-up"), rows),
        "Subset search: z3 alone (the solver before this issue) versus the portfolio (z3 up to "
        "24 terms, CP-SAT beyond); relu, median of 2 seeds, limit 20 s per decision:",
        table(("d", "m", "instances", "z3 only s", "z3 verdicts", "portfolio s",
               "portfolio verdicts", "speed-up"), z3_rows)])
