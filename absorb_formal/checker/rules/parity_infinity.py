"""T2∞, parity at infinity (docs/rules.md, "Never-rules (any width)", "T2∞ parity at
infinity", §8): the checker's side of `parity point at infinity`, for biased blocks.

σ even and H(1) (re-proved), ungated: B(tx)/t → B0(x) as t → ∞, B0 the block with every bias
dropped, and every plain stack's limit P0 is even; so B0(x0) ≠ B0(−x0), evaluated exactly,
shows the block never absorbable.
"""

from __future__ import annotations

from typing import Any

from ..kernel import linalg as exact
from ..kernel.contract import require
from ..lemmas import relied as lemmas
from .truths import NEVER


def even_homogeneous(act: dict[str, Any]) -> None:
    """σ ungated, E and H(1), re-proved (what T2∞ needs, by point or by lemma)."""
    require(not act["gated"] and lemmas.holds(act, "E") and lemmas.holds(act, "H", 1),
            "T2∞ needs an ungated sigma with E and H(1), re-proved")


def point(block: dict[str, Any], cert: dict[str, Any]) -> dict[str, bool]:
    """A `parity point at infinity`: never absorbable (the truth table it shows)."""
    act = block["activation"]
    require(cert["rule"] == "T2∞" and cert["property"] == "E, H(1)",
            "a parity point at infinity is T2∞ with E and H(1)")
    even_homogeneous(act)
    require(act["kind"] in exact.RATIONAL_KINDS, "σ not rational on Q")
    free = {key: value for key, value in block.items() if key != "bias"}  # B0: no bias at all
    bare = [{name: layer[name] for name in ("up", "down")} for layer in block["layers"]]
    x0 = exact.vec(cert["x0"])
    plus = exact.evaluate(free, bare, x0)
    minus = exact.evaluate(free, bare, [-v for v in x0])
    require(plus != minus, "B0(x0) = B0(-x0): no violation")
    require(exact.vec(cert["B0_at_x0"]) == plus and exact.vec(cert["B0_at_minus_x0"]) == minus,
            "the stored values of B0 differ from exact evaluation")
    return NEVER
