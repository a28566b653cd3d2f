"""T2 Parity (docs/rules.md §3): σ even (E), ungated. Every plain stack is even, so a block with
`B(x0) ≠ B(−x0)` is never absorbable; at depth 1 that holds whenever S ≠ 0
(`B(x) − B(−x) = 2Sx`)."""

from __future__ import annotations

from typing import Any

from ..certify import never as cert
from ..model.blocks import Block
from . import points, skip
from .lemmas import Properties

RULE = "T2 parity"


def _applies(block: Block, props: Properties) -> bool:
    return props.even and not block.activation.gated


def family(block: Block, props: Properties) -> dict[str, Any] | None:
    found = skip.direction(block.skip, 1)
    if not _applies(block, props) or block.depth != 1 or found is None:
        return None
    index, value = found
    return cert.parity_direction(props.lemmas["E"], index, value)


def concrete(block: Block, props: Properties) -> dict[str, Any] | None:
    if not _applies(block, props) or not block.activation.is_rational:
        return None
    found = skip.direction(block.skip, 1) if block.depth == 1 else None
    for x0 in points.candidates(block.dim, found[0] if found else None):
        plus, minus = block.evaluate_exact(x0), block.evaluate_exact(tuple(-v for v in x0))
        if plus != minus:
            return cert.parity_point(props.lemmas["E"], x0, plus, minus)
    return None
