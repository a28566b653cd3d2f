"""T2, parity (docs/rules.md, "Never-rules (any width)", "T2 parity"): the checker's side of
`parity point`.

σ even (E, re-proved) and ungated: every plain stack is even, so a point x0 with
B(x0) ≠ B(−x0), evaluated exactly, shows the block never absorbable. Biases refute T2 (only
T2∞ survives them: rules/parity_infinity.py).
"""

from __future__ import annotations

from typing import Any

from ..kernel import linalg as exact
from ..kernel.contract import require
from ..lemmas import relied as lemmas
from .truths import NEVER


def point(block: dict[str, Any], cert: dict[str, Any]) -> dict[str, bool]:
    """A `parity point`: never absorbable (the truth table it shows)."""
    act = block["activation"]
    require(not block.get("bias"), "T2 does not hold with biases: T2∞ (docs/rules.md §8)")
    require(cert["rule"] == "T2" and cert["property"] == "E", "a parity point is T2 with E")
    require(not act["gated"] and lemmas.holds(act, "E"), "T2 needs an even, ungated σ")
    require(act["kind"] in exact.RATIONAL_KINDS, "σ not rational on Q")
    x0 = exact.vec(cert["x0"])
    plus = exact.evaluate(block, block["layers"], x0)
    minus = exact.evaluate(block, block["layers"], [-v for v in x0])
    require(plus != minus, "B(x0) = B(-x0): no violation")
    require(exact.vec(cert["B_at_x0"]) == plus and exact.vec(cert["B_at_minus_x0"]) == minus,
            "the stored values of B differ from exact evaluation")
    return NEVER
