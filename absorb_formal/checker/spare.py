"""The spare-pair witness of large blocks (MATH.md §4, §8.1: min width ≤ m + 2·rank S),
checked without the block's weights.

The witness is the block's own neurons (same up, biases, down; down bias unchanged) plus, for
each listed column k of S, the pair S[:,k]/(2a)·(σ(x_k) − σ(−x_k)). With the lemma O(a),
σ(z) − σ(−z) = 2az (re-proved from σ's formula by `lemmas`, through the caller's family), the
pairs add Σ_k S[:,k]·x_k, which is S·x exactly when S vanishes off the listed columns. So the
plain block equals B, and its width is m + 2·#columns.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from .exact import q, skip_rows

CHECK = "own neurons + spare pairs"


class Invalid(Exception):
    """The spare-pair witness does not hold."""


def require(condition: bool, reason: str) -> None:
    if not condition:
        raise Invalid(reason)


def check(block: dict[str, Any], width: int, cert: dict[str, Any],
          family: tuple[str, Fraction, Fraction | None]) -> None:
    require(cert["check"] == CHECK, "not the spare-pair construction")
    require(block["depth"] == 1 and not block["activation"]["gated"], "depth-1 ungated only")
    kind, a, _ = family
    require(kind in ("relu", "analytic") and a != 0, "spare pairs need O(a) with a != 0")
    require(q(cert["a"]) == a, f"the stored a is not the re-proved a = {a}")
    d, m = int(block["dim"]), int(block["width"])
    columns = [int(k) for k in cert["columns"]]
    require(all(0 <= k < d for k in columns) and columns == sorted(set(columns)),
            "the columns are not increasing indices below d")
    listed = set(columns)
    skip = block["skip"]
    if "matrix" in skip:
        rows = skip_rows(block)
        require(all(row[k] == 0 for row in rows for k in range(d) if k not in listed),
                "S has a non-zero column that is not listed")
    else:
        require(q(skip["scale"]) == 0 or listed == set(range(d)),
                "S = cI with c != 0 needs every column")
    size = int(cert["width"])
    require(size == m + 2 * len(columns), "the width is not m + 2·#columns")
    require(size <= width, f"the witness has width {size} > {width}")
