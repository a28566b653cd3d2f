"""The never-rules T1–T4 and T2∞ in lemma form (docs/rules.md, "Never-rules (any width)"):
the checker's side of `lemma + direction`, for families and concrete blocks alike.

The rule's property of σ is re-proved (H(k) with K ≠ 1, E, Bd, F, or E and H(1)), the rule
must hold for this block (T1, T2 and T4 fail with biases, docs/rules.md §8; T1, T2 and T2∞
by lemma need depth 1), and the direction is the first j with S^L e_j ≠ 0, its first non-zero
entry as stored: then no plain stack equals the block, at any width.
"""

from __future__ import annotations

from typing import Any

from ..kernel import linalg as exact
from ..kernel.contract import require
from ..kernel.linalg import q, whole
from ..lemmas import relied as lemmas
from .homogeneity import degree
from .parity_infinity import even_homogeneous
from .truths import NEVER

RULES = ("T1", "T2", "T3", "T4", "T2∞")
PROPERTIES = {"T2": "E", "T3": "Bd", "T4": "F", "T2∞": "E, H(1)"}  # T1: H(k) from k
BIASED_RULES = ("T3", "T2∞")  # docs/rules.md §8: the never-rules that survive biases


def lemma(block: dict[str, Any], cert: dict[str, Any]) -> dict[str, bool]:
    """A `lemma + direction`: never absorbable (the truth table it shows)."""
    rule = cert["rule"]
    require(rule in RULES, f"unknown rule {rule!r}")
    require(not block.get("bias") or rule in BIASED_RULES,
            f"{rule} does not hold for blocks with biases (docs/rules.md §8)")
    act, depth = block["activation"], block["depth"]
    power = depth
    require(whole(cert["depth"]) == depth, "the stored depth is not the block's")
    if rule == "T1":
        require(whole(cert["block_degree"]) == degree(block, cert), "the stored K is wrong")
        require(depth == 1, "T1 by lemma needs depth 1")
    else:
        require(cert["property"] == PROPERTIES[rule], f"{rule} is proved by "
                                                      f"{PROPERTIES[rule]}")
    if rule == "T4":
        require(cert["gated"] is act["gated"], "the stored 'gated' is not the block's")
    if rule == "T2":
        require(not act["gated"] and lemmas.holds(act, "E"), "E not re-proved (ungated)")
        require(depth == 1, "T2 by lemma needs depth 1")
    elif rule == "T2∞":  # §8: B0(x) - B0(-x) = 2Sx at depth 1, B0 even if absorbable
        even_homogeneous(act)
        require(depth == 1, "T2∞ by lemma needs depth 1")
    elif rule == "T3":
        require(not act["gated"] and lemmas.holds(act, "Bd"), "Bd not re-proved (ungated)")
    else:
        require(lemmas.holds(act, "F"), "F not re-proved")
    index = whole(cert["direction"]["index"])
    column = exact.skip_power_column(block, power, index)
    require(any(column), "S^L e_index = 0")
    # The direction is the first one that works, so that it is determined, not chosen.
    require(not any(any(exact.skip_power_column(block, power, j)) for j in range(index)),
            "a smaller index has S^L e_j != 0: the direction is the first such j")
    entry = next(x for x in column if x != 0)
    require(q(cert["direction"]["skip_power_entry"]) == entry,
            "the stored entry of S^L e_index is wrong")
    return NEVER
