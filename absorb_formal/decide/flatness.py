"""T4 Flatness (docs/rules.md §3; the paper's linearization argument for SwiGLU/GeGLU).

If plain blocks are flat (F: P(0) = 0, P(y) = o(‖y‖)), every plain stack is o(t) along each
ray at 0, while the block stack is `t S^L x + o(t)`: never absorbable when S^L ≠ 0."""

from __future__ import annotations

from typing import Any

from ..certify import never as cert
from ..model.blocks import Block
from . import skip
from .lemmas import Properties

RULE = "T4 flatness"


def family(block: Block, props: Properties) -> dict[str, Any] | None:
    found = skip.direction(block.skip, block.depth)
    if not props.flat or found is None:
        return None
    index, value = found
    return cert.flatness_direction(block.activation.gated, props.lemmas["F"], block.depth,
                                   index, value)


concrete = family  # the weights play no part: the lemma and S^L decide
