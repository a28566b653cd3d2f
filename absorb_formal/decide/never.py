"""The never-rules T1–T4 (MATH.md §3), tried in order; each fires only on proved properties."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model import Block
from ..properties import properties
from . import bounded, flatness, homogeneity, parity

RULES = (homogeneity, parity, bounded, flatness)


@dataclass(frozen=True)
class NeverProof:
    rule: str
    certificate: dict[str, Any]


def never(block: Block) -> NeverProof | None:
    """A proof that no plain stack of any width equals the block (family: for any weights)."""
    props = properties(block.activation)
    for rule in RULES:
        found = rule.concrete(block, props) if block.is_concrete else rule.family(block, props)
        if found is not None:
            return NeverProof(rule.RULE, found)
    return None
