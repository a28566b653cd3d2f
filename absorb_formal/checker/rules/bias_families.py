"""Families with biases (docs/rules.md, "Blocks with biases", "Families with biases (§8.3)"):
the preconditions of the §8.3 rows of a `rule` certificate, re-derived from the block.

The row of the table comes from σ's kind (a relu/gelu family, relu², a degree-2 polynomial, a
gated or bilinear σ); each rule's inequality on m, w and rank S is recomputed, and its lemma
re-proved (σ(z) + σ(−z) = z² for relu², σ(1) ≠ 0 for a linear neuron of a gated σ). Which
modalities each row settles is rules/families.py's table.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..kernel import linalg as exact
from ..kernel.contract import require
from ..kernel.linalg import q
from ..lemmas import relied as lemmas
from ..lemmas import values

GATED_KINDS = ("silu", "gelu", "relu", "sigmoid")  # swiglu, geglu, reglu, glu (§8.2)
# the rules whose neurons have gate row 0 and gate bias γ (the certificate's `gamma`)
LINEAR_NEURON_RULES = ("§8.3 linear neurons", "§8.3 linear neuron in the block")


def row_of(act: dict[str, Any]) -> str | None:
    """The row of docs/rules.md §8.3's table, from σ's kind (its formula is the kind's)."""
    kind = act["kind"]
    if act["gated"]:
        return "gated" if kind in GATED_KINDS else "bilinear" if kind == "identity" else None
    if lemmas.ridge_family(act) is not None:
        return "ridge"
    if kind == "relu_pow" and int(act["power"]) == 2:
        return "relu2"
    if kind == "poly":
        coeffs = list(exact.vec(act["coeffs"]))
        while coeffs and coeffs[-1] == 0:
            coeffs.pop()
        return "square" if len(coeffs) == 3 else "poly" if len(coeffs) > 3 else None
    return None


def preconditions(block: dict[str, Any], rule: str, width: int, cert: dict[str, Any]) -> None:
    """Preconditions of the §8.3 rules (families with biases, depth 1, S != 0)."""
    act, m = block["activation"], block["width"]
    r = exact.skip_rank(block)
    row = row_of(act)
    require(bool(block.get("bias")) and block["depth"] == 1 and r > 0 and row is not None,
            "§8.3 covers biased depth-1 families with S != 0 of its table's activations")
    if rule == "§8.3 rank of S":
        # Sx + const is a plain block of width m + w: im S lies in the span of its m + w
        # output columns; with keys (relu family, relu²) each key needs two of them.
        need = 2 * r if row in ("ridge", "relu2") else r
        require(m + width < need, f"needs m + width < {need}")
    elif rule == "§8.3 relu^2 pairs":
        require(row == "relu2" and lemmas.holds(act, "Sq", 1) and width >= m + 4 * r,
                "needs relu² (re-proved sigma(z) + sigma(-z) = z²) and width >= m + 4 rank S")
    elif rule == "§8.3 square pairs":
        require(row == "square" and width >= m + 2 * r,
                "needs a degree-2 polynomial sigma and width >= m + 2 rank S")
    elif rule == "§8.3 linear neurons":
        _linear_neuron(act, row, cert)
        require(width >= m + r, "needs width >= m + rank S")
    elif rule == "§8.3 genericity":
        require(row in ("ridge", "relu2", "gated") and width == m,
                "needs width = m and keys (relu/gelu family, relu², swiglu/geglu/reglu/glu)")
    elif rule == "§8.3 subset condition":
        require(row == "ridge" and r <= m <= width, "needs relu/gelu family, rank S <= m <= w")
    elif rule == "§8.3 relu^2 flips":
        require(row == "relu2" and lemmas.holds(act, "Sq", 1) and 2 * r <= m <= width,
                "needs relu² (re-proved sigma(z) + sigma(-z) = z²), 2 rank S <= m <= w")
    else:
        require(rule == "§8.3 linear neuron in the block", f"unknown rule {rule!r}")
        _linear_neuron(act, row, cert)
        require(row == "gated" and r <= m <= width, "needs a gated sigma, rank S <= m <= w")


def _linear_neuron(act: dict[str, Any], row: str | None, cert: dict[str, Any]) -> None:
    """Gate row 0 and gate bias γ = 1 make σ(1)(u·x + β): a linear neuron if σ(1) != 0."""
    require(row in ("gated", "bilinear") and q(cert["gamma"]) == 1
            and values.nonzero_at(act, Fraction(1)), "needs a gated sigma with sigma(1) != 0")
