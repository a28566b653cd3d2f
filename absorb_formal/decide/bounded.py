"""T3 Boundedness (docs/rules.md §3): σ bounded (Bd), ungated. Every plain stack is bounded, while
the block stack is `S^L x + (bounded)`: never absorbable when S^L ≠ 0."""

from __future__ import annotations

from typing import Any

from ..certify import never as cert
from ..model.blocks import Block
from . import skip
from .lemmas import Properties

RULE = "T3 boundedness"


def family(block: Block, props: Properties) -> dict[str, Any] | None:
    found = skip.direction(block.skip, block.depth)
    if not props.bounded or block.activation.gated or found is None:
        return None
    index, value = found
    return cert.boundedness_direction(props.lemmas["Bd"], block.depth, index, value)


concrete = family  # the weights play no part: the lemma and S^L decide
