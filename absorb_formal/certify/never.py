"""Certificates of the never-rules (docs/rules.md §3, §8): T1 homogeneity, T2 parity, T3
boundedness, T4 flatness, T2∞ parity at infinity (`decide/homogeneity.py`, `parity.py`,
`bounded.py`, `flatness.py`, `parity_infinity.py`).

A family, or a concrete block the rule reads no weight of, gets `lemma + direction`: the
proved property of σ and a direction e_j with S^L e_j ≠ 0 (`direction`: j and the entry of
S^L that shows it). A concrete block whose weights decide gets the point where the block
breaks the property, with both exact values (`homogeneity point`, `parity point`, `parity
point at infinity`).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from ..checker.kernel.contract import Kind
from .bodies import q, vector

# T2∞: why B₀ must be even (B₀, P₀: the block and the plain stack with every bias dropped).
PARITY_AT_INFINITY = ("B(t x)/t -> B0(x) and P(t x)/t -> P0(x) as t -> oo (sigma H(1)), where "
                      "B0, P0 drop every bias; P0 is even (sigma E), so B = P needs B0 even")


def _direction(index: int, value: Fraction) -> dict[str, Any]:
    """e_index, with the entry of S^L that makes S^L e_index ≠ 0."""
    return {"index": index, "skip_power_entry": q(value)}


def homogeneity_direction(degree: int | None, lemma: str, block_degree: int, index: int,
                          value: Fraction) -> dict[str, Any]:
    """T1 at depth 1: σ is H(degree), the block degree K ≠ 1, S e_index ≠ 0."""
    return {"kind": Kind.LEMMA_DIRECTION, "rule": "T1", "property": f"H({degree})",
            "lemma": lemma, "block_degree": block_degree, "depth": 1,
            "direction": _direction(index, value),
            "argument": "B(t x) - t^K B(x) = (t - t^K) S x != 0 at x = e_index, t = 2, "
                        "while every plain block is homogeneous of degree K"}


def homogeneity_point(degree: int | None, lemma: str, total: int, x0: Sequence[Fraction],
                      t: Fraction, at_t_x0: Sequence[Any], at_x0: Sequence[Any]
                      ) -> dict[str, Any]:
    """T1 on a concrete block: B(t x0) ≠ t^total B(x0), total = K^L."""
    return {"kind": Kind.HOMOGENEITY_POINT, "rule": "T1", "property": f"H({degree})",
            "lemma": lemma, "degree": total, "x0": vector(x0), "t": q(t),
            "B_at_t_x0": vector(at_t_x0), "B_at_x0": vector(at_x0)}


def parity_direction(lemma: str, index: int, value: Fraction) -> dict[str, Any]:
    """T2 at depth 1: σ even, S e_index ≠ 0."""
    return {"kind": Kind.LEMMA_DIRECTION, "rule": "T2", "property": "E", "lemma": lemma,
            "depth": 1, "direction": _direction(index, value),
            "argument": "B(x) - B(-x) = 2 S x != 0 at x = e_index, while every plain block "
                        "is even"}


def parity_point(lemma: str, x0: Sequence[Fraction], plus: Sequence[Any],
                 minus: Sequence[Any]) -> dict[str, Any]:
    """T2 on a concrete block: B(x0) ≠ B(−x0)."""
    return {"kind": Kind.PARITY_POINT, "rule": "T2", "property": "E", "lemma": lemma,
            "x0": vector(x0), "B_at_x0": vector(plus), "B_at_minus_x0": vector(minus)}


def parity_infinity_direction(lemmas: dict[str, str], index: int,
                              value: Fraction) -> dict[str, Any]:
    """T2∞ at depth 1 (biased blocks): σ even and H(1), S e_index ≠ 0."""
    return {"kind": Kind.LEMMA_DIRECTION, "rule": "T2∞", "property": "E, H(1)",
            "lemma": lemmas, "depth": 1, "direction": _direction(index, value),
            "argument": PARITY_AT_INFINITY + "; B0(x) - B0(-x) = 2 S x != 0 at x = e_index"}


def parity_point_at_infinity(lemmas: dict[str, str], x0: Sequence[Fraction],
                             plus: Sequence[Any], minus: Sequence[Any]) -> dict[str, Any]:
    """T2∞ on a concrete biased block: B₀(x0) ≠ B₀(−x0)."""
    return {"kind": Kind.PARITY_POINT_AT_INFINITY, "rule": "T2∞", "property": "E, H(1)",
            "lemma": lemmas, "x0": vector(x0), "B0_at_x0": vector(plus),
            "B0_at_minus_x0": vector(minus), "argument": PARITY_AT_INFINITY}


def boundedness_direction(lemma: str, depth: int, index: int, value: Fraction
                          ) -> dict[str, Any]:
    """T3: σ bounded, S^L e_index ≠ 0 (the weights play no part)."""
    return {"kind": Kind.LEMMA_DIRECTION, "rule": "T3", "property": "Bd", "lemma": lemma,
            "depth": depth, "direction": _direction(index, value),
            "argument": "B(t e_index) = t S^L e_index + bounded is unbounded in t, while "
                        "every plain stack is bounded"}


def flatness_direction(gated: bool, lemma: str, depth: int, index: int, value: Fraction
                       ) -> dict[str, Any]:
    """T4: plain blocks flat, S^L e_index ≠ 0 (the weights play no part)."""
    return {"kind": Kind.LEMMA_DIRECTION, "rule": "T4", "property": "F", "gated": gated,
            "lemma": lemma, "depth": depth, "direction": _direction(index, value),
            "argument": "B(t e_index)/t -> S^L e_index != 0 as t -> 0+, while P(t x)/t -> 0 "
                        "for every plain stack P"}
