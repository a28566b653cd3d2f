"""Gated blocks with Og(c) (docs/rules.md, "GLU sign flips", §5): the checker's side of the
witness `GLU sign-flip identity` and of the GLU refutations (`separating functional`, `subset
search` on a gated block).

σ(−z) = 2c − σ(z) with σ − c analytic and not a polynomial (OgN, re-proved for the stored c):
negating gate row i and down column i changes the linear part by −2c·d_i u_iᵀ, so at width m
the generic block is absorbable iff Σ_J d_i u_iᵀ = −S/(2c) for some J (the terms and target
are derived here; rules/subset.py checks the refutation).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..kernel import linalg as exact
from ..kernel.contract import require
from ..kernel.linalg import q
from ..lemmas import relied as lemmas
from . import subset


def witness(block: dict[str, Any], plain: dict[str, Any], cert: dict[str, Any]) -> None:
    """`GLU sign-flip identity`: the stored layer is the block with the gate rows and down
    columns of J negated, and Σ_J d_i u_iᵀ = −S/(2c)."""
    act = block["activation"]
    c = q(cert["c"])
    require(act["gated"] and lemmas.holds(act, "OgN", c),
            "Og(c) with sigma - c analytic and non-polynomial (§5) is not re-proved")
    require(block["depth"] == 1, "§5 covers depth 1")
    mine = block["layers"][0]
    up, gate, down = (exact.mat(mine[n]) for n in ("up", "gate", "down"))
    p_up, p_gate, p_down = (exact.mat(plain[n]) for n in ("up", "gate", "down"))
    m = len(up)
    listed = cert["J"]
    require(isinstance(listed, list) and all(type(j) is int for j in listed),
            "J is not a list of neuron numbers")
    flips = {j - 1 for j in listed}
    require(all(0 <= j < m for j in flips) and len(flips) == len(listed),
            "J is not a set of neurons 1..m")
    require(len(p_up) >= m and p_up[:m] == up, "the witness must keep 'up'")
    require(all(not any(row[m:]) for row in p_down), "extra witness neurons must be zero")
    for i in range(m):
        sign = -1 if i in flips else 1
        require(p_gate[i] == tuple(sign * x for x in gate[i]), f"gate row {i + 1}")
        require(all(pr[i] == sign * r[i] for pr, r in zip(p_down, down, strict=True)),
                f"down column {i + 1}")
    total = exact.zeros(block["dim"], block["dim"])
    for i in flips:
        total = exact.combine(total, exact.outer([r[i] for r in down], up[i]), Fraction(1))
    target = exact.combine(exact.zeros(block["dim"], block["dim"]), exact.skip_rows(block),
                           -1 / (2 * c))
    require(total == target, "sum over J of d_i u_i^T is not -S/(2c)")


def refutation(block: dict[str, Any], width: int, cert: dict[str, Any]) -> None:
    """A separating functional or subset search of the GLU system: not absorbable at
    `width` ≤ m."""
    act = block["activation"]
    c = q(cert["c"])
    require(act["gated"] and lemmas.holds(act, "OgN", c),
            "Og(c) with sigma - c analytic and non-polynomial (§5) is not re-proved")
    # at w < m too: a plain block of width w < m padded with zero neurons is one of width m
    require(block["depth"] == 1 and width <= block["width"], "§5: depth 1, width at most m")
    layer = block["layers"][0]
    gate, up, down = (exact.mat(layer[n]) for n in ("gate", "up", "down"))
    keys = set()
    for i, g in enumerate(gate):
        column = [r[i] for r in down]
        require(any(g) and any(up[i]) and any(column), f"neuron {i + 1} is degenerate")
        key = max(g, tuple(-x for x in g))
        require(key not in keys, "two neurons share a gate key: not generic")
        keys.add(key)
    d = block["dim"]
    terms = [exact.outer([r[i] for r in down], up[i]) for i in range(len(up))]
    target = exact.combine(exact.zeros(d, d), exact.skip_rows(block), -1 / (2 * c))
    subset.refutation(terms, target, cert)
