"""What a rule concludes about one concrete question (absorbable at a width, or not)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model.blocks import Layer

# docs/rules.md §8: a biased block is compared with biased plain blocks, where the bias-free rules
# (T1, T4, §4's keys, the generic engine's homogeneous encoding) do not hold as written. Each
# entry point below says so until its part of §8 lands.
BIASED = "blocks with biases: not decided yet (docs/rules.md §8)"


@dataclass(frozen=True)
class Decision:
    """absorbable: True (with witness layers), False (refuted), None (undecided, `reason`)."""

    absorbable: bool | None
    method: str = "none"
    certificate: dict[str, Any] | None = None
    reason: str = ""
    witness: tuple[Layer, ...] | None = None
    detail: str = ""  # a short phrase for the report, e.g. "J = {1, 2}"
    extra: dict[str, Any] = field(default_factory=dict)


def undecided(reason: str) -> Decision:
    return Decision(None, reason=reason)
