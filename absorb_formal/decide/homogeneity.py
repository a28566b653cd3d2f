"""T1 Homogeneity (docs/rules.md §3): σ is H(k) and the block degree K ≠ 1.

Every plain stack is positively homogeneous of degree K^L, so a block that is not, is never
absorbable, at any width. At depth 1, `B(tx) − t^K B(x) = (t − t^K) S x`, so S ≠ 0 suffices
(families); a concrete block needs a point `x0, t` with `B(t x0) ≠ t^(K^L) B(x0)`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..certify import never as cert
from ..model.blocks import Block
from . import points, skip
from .lemmas import Properties

RULE = "T1 homogeneity"
SCALES = (Fraction(2), Fraction(1, 2), Fraction(3))


def degree(block: Block, props: Properties) -> int | None:
    """K, the block's homogeneity degree, when it is proved and ≠ 1."""
    k = props.block_degree(block.activation.gated)
    return k if k is not None and k != 1 else None


def family(block: Block, props: Properties) -> dict[str, Any] | None:
    """Lemma H(k) + a direction with S x0 ≠ 0 (depth 1 only, as docs/rules.md states T1)."""
    k = degree(block, props)
    found = skip.direction(block.skip, 1)
    if k is None or block.depth != 1 or found is None:
        return None
    index, value = found
    return cert.homogeneity_direction(props.homogeneous, props.lemmas["H"], k, index, value)


def concrete(block: Block, props: Properties) -> dict[str, Any] | None:
    """A homogeneity point, found by exact evaluation at small rational points."""
    k = degree(block, props)
    if k is None or not block.activation.is_rational:
        return None
    total = k ** block.depth
    found = skip.direction(block.skip, 1) if block.depth == 1 else None
    for x0 in points.candidates(block.dim, found[0] if found else None):
        base = block.evaluate_exact(x0)
        for t in SCALES:
            scaled = block.evaluate_exact(tuple(t * v for v in x0))
            expected = tuple(t ** total * v for v in base)
            if scaled != expected:
                return cert.homogeneity_point(props.homogeneous, props.lemmas["H"], total, x0,
                                              t, scaled, base)
    return None
