"""T1, homogeneity (docs/rules.md, "Never-rules (any width)", "T1 homogeneity"): the checker's
side of `homogeneity point`.

σ is H(k), so every plain stack of depth L is positively homogeneous of degree K^L (K = k, or
k + 1 when gated); a point x0 and t > 0 with B(t x0) ≠ t^(K^L) B(x0), evaluated exactly,
shows the block is not, hence never absorbable. The lemma H(k) is re-proved; biases refute T1.
"""

from __future__ import annotations

from typing import Any

from ..kernel import linalg as exact
from ..kernel.contract import require
from ..kernel.linalg import q, whole
from ..lemmas import relied as lemmas
from .truths import NEVER


def degree(block: dict[str, Any], cert: dict[str, Any]) -> int:
    """K from the stored property H(k), re-proved: K = k (+ 1 when gated), K ≠ 1."""
    prop = cert["property"]
    require(prop.startswith("H(") and prop.endswith(")"), "T1 needs H(k)")
    k = int(prop[2:-1])
    require(lemmas.holds(block["activation"], "H", k), f"H({k}) is not re-proved")
    big_k = k + (1 if block["activation"]["gated"] else 0)
    require(big_k != 1, "T1 needs block degree K != 1")
    return big_k


def point(block: dict[str, Any], cert: dict[str, Any]) -> dict[str, bool]:
    """A `homogeneity point`: never absorbable (the truth table it shows)."""
    require(cert["rule"] == "T1", "a homogeneity point is rule T1")
    require(not block.get("bias"), "T1 does not hold with biases (docs/rules.md §8)")
    big_k = degree(block, cert)
    total = big_k ** block["depth"]
    require(whole(cert["degree"]) == total, "wrong degree K^L")
    require(block["activation"]["kind"] in exact.RATIONAL_KINDS, "σ not rational on Q")
    x0, t = exact.vec(cert["x0"]), q(cert["t"])
    require(t > 0, "t must be positive")
    at_tx = exact.evaluate(block, block["layers"], [t * v for v in x0])
    at_x = exact.evaluate(block, block["layers"], x0)
    require(at_tx != tuple(t**total * v for v in at_x), "B(t x0) = t^(K^L) B(x0): no violation")
    require(exact.vec(cert["B_at_t_x0"]) == at_tx and exact.vec(cert["B_at_x0"]) == at_x,
            "the stored values of B differ from exact evaluation")
    return NEVER
