"""T4 Flatness (docs/rules.md §3; the paper's linearization argument for SwiGLU/GeGLU).

If plain blocks are flat (F: P(0) = 0, P(y) = o(‖y‖)), every plain stack is o(t) along each
ray at 0, while the block stack is `t S^L x + o(t)`: never absorbable when S^L ≠ 0."""

from __future__ import annotations

from typing import Any

from ..certify import bodies as cert
from ..model.blocks import Block
from . import skip
from .lemmas import Properties

RULE = "T4 flatness"


def family(block: Block, props: Properties) -> dict[str, Any] | None:
    found = skip.direction(block.skip, block.depth)
    if not props.flat or found is None:
        return None
    index, value = found
    return {"kind": "lemma + direction", "rule": "T4", "property": "F",
            "gated": block.activation.gated, "lemma": props.lemmas["F"],
            "depth": block.depth,
            "direction": {"index": index, "skip_power_entry": cert.q(value)},
            "argument": "B(t e_index)/t -> S^L e_index != 0 as t -> 0+, while P(t x)/t -> 0 "
                        "for every plain stack P"}


concrete = family  # the weights play no part: the lemma and S^L decide
