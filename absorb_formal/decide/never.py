"""The never-rules T1–T4 (docs/rules.md §3), tried in order; each fires only on proved properties.

With biases (docs/rules.md §8) only T3 and T2∞ survive: biased plain blocks are neither
homogeneous (T1) nor flat (T4), and not even (T2) — only even at infinity (T2∞)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model.blocks import Block
from . import bounded, flatness, homogeneity, parity, parity_infinity
from .lemmas import properties

RULES = (homogeneity, parity, bounded, flatness)
BIASED_RULES = (bounded, parity_infinity)  # docs/rules.md §8: the rules that survive biases


@dataclass(frozen=True)
class NeverProof:
    rule: str
    certificate: dict[str, Any]


def never(block: Block, cheap: bool = False) -> NeverProof | None:
    """A proof that no plain stack of any width equals the block (family: for any weights).

    `cheap`: use only the lemma forms, which hold for every weight and read no weight — for
    concrete blocks too large for exact evaluation."""
    props = properties(block.activation)
    for rule in BIASED_RULES if block.biased else RULES:
        concrete = block.is_concrete and not cheap
        found = rule.concrete(block, props) if concrete else rule.family(block, props)
        if found is not None:
            return NeverProof(rule.RULE, found)
    return None
