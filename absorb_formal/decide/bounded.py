"""T3 Boundedness (docs/rules.md §3): σ bounded (Bd), ungated. Every plain stack is bounded, while
the block stack is `S^L x + (bounded)`: never absorbable when S^L ≠ 0."""

from __future__ import annotations

from typing import Any

from ..certify import bodies as cert
from ..model.blocks import Block
from . import skip
from .lemmas import Properties

RULE = "T3 boundedness"


def family(block: Block, props: Properties) -> dict[str, Any] | None:
    found = skip.direction(block.skip, block.depth)
    if not props.bounded or block.activation.gated or found is None:
        return None
    index, value = found
    return {"kind": "lemma + direction", "rule": "T3", "property": "Bd",
            "lemma": props.lemmas["Bd"], "depth": block.depth,
            "direction": {"index": index, "skip_power_entry": cert.q(value)},
            "argument": "B(t e_index) = t S^L e_index + bounded is unbounded in t, while "
                        "every plain stack is bounded"}


concrete = family  # the weights play no part: the lemma and S^L decide
