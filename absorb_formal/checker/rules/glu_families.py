"""GLU families without biases (docs/rules.md, "GLU sign flips", families): the preconditions
of the `§5` rules of a `rule` certificate, re-derived from the block (depth 1, no biases,
S ≠ 0, Og(c) with c = σ(0) ≠ 0 and σ − c analytic and not a polynomial, re-proved; then the
rule's inequality on m, w and rank S). Which modalities each rule settles is
rules/families.py's table.
"""

from __future__ import annotations

from typing import Any

from ..kernel import linalg as exact
from ..kernel.contract import require
from ..lemmas import relied as lemmas


def preconditions(block: dict[str, Any], rule: str, width: int) -> None:
    """Preconditions of the bias-free glu family rules (docs/rules.md "GLU sign flips"):
    depth 1, no biases, S != 0, Og(c) with c = σ(0) != 0 and σ − c analytic and not a
    polynomial (OgN, re-proved)."""
    act, m = block["activation"], block["width"]
    r = exact.skip_rank(block)
    c = lemmas.value_at_zero(act) if act["gated"] else None  # Og(c) at z = 0: c = σ(0)
    require(not block.get("bias") and block["depth"] == 1 and r > 0 and c is not None
            and c != 0 and lemmas.holds(act, "OgN", c),
            "§5's family rules cover bias-free depth-1 Og(c) families, c = sigma(0) != 0 "
            "(re-proved), with S != 0")
    if rule == "§5 rank of S":  # Jacobian at 0: S = c(D'U' - DU), rank <= m + w
        require(m + width < r, f"needs m + width < rank S = {r}")
    elif rule == "§5 linear neurons":  # gate row 0: c·d (u·x), one per rank-one term
        require(width >= m + r, "needs width >= m + rank S")
    elif rule == "§5 linear neurons in the block":
        require(m + width >= r, "needs m + width >= rank S")
    else:
        require(rule == "§5 genericity", f"unknown rule {rule!r}")
        require(width <= m, "needs width <= m")
