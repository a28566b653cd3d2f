"""What the family rules share (families.py, and bias_families.py for families with biases):
the facts found so far, what "never" and "always" settle, and example members with witnesses.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from ..certify import bodies as cert
from ..model import linalg
from ..model.blocks import Block, Layer, Matrix
from . import concrete
from .lemmas import properties

MAX_EXAMPLE_DIM = 32  # witness blocks are built only for families this small
# What a rule that proves "never" (or "always") settles about all four modalities.
NEVER = {"never": True, "generically not": True, "sometimes": False, "always": False}
ALWAYS = {"always": True, "sometimes": True, "never": False, "generically not": False}


@dataclass
class Facts:
    """truth[modality] ∈ {True, False}; absent = not decided. Each with method + certificate."""

    truth: dict[str, bool] = field(default_factory=dict)
    method: dict[str, str] = field(default_factory=dict)
    certificate: dict[str, dict[str, Any]] = field(default_factory=dict)
    reason: str = ""

    def set(self, modality: str, value: bool, method: str, certificate: dict[str, Any]) -> None:
        if modality not in self.truth:
            self.truth[modality] = value
            self.method[modality] = method
            self.certificate[modality] = certificate

    def set_all(self, truths: dict[str, bool], method: str,
                certificate: dict[str, Any]) -> None:
        for modality, value in truths.items():
            self.set(modality, value, method, certificate)


def with_example(block: Block, size: int, rule: dict[str, Any], why: str) -> dict[str, Any]:
    """Attach a concrete member of the family and its witness when the family is small."""
    if too_big_for_example(block):
        return rule
    # A biased family's example: a member with zero biases, stated bias-free (docs/rules.md §8),
    # whose bias-free witness is a biased plain block with zero biases.
    return attach_example(example_member(replace(block, biased=False), why), size, rule)


def too_big_for_example(block: Block) -> bool:
    return block.dim > MAX_EXAMPLE_DIM or block.width > 4 * MAX_EXAMPLE_DIM or block.depth > 4


def attach_example(member: Block | None, size: int, rule: dict[str, Any]) -> dict[str, Any]:
    """The rule with `member` and its witness at `size`, from the decision procedure itself
    (never asserted); the rule alone when there is no member or no witness."""
    if member is None or too_big_for_example(member):
        return rule
    decision = concrete.at_width(member, size)
    if decision.absorbable is not True:
        return rule
    return cert.with_example(rule, member.layers or (), decision.certificate)


def example_member(block: Block, why: str) -> Block | None:
    """Weights that make the family member absorbable: the first rank(S) neurons carry
    −S/(2a) from a rank factorisation of S; the others are small fixed distinct neurons."""
    a = properties(block.activation).odd_linear
    if a is None:
        return None
    d, m = block.dim, block.width
    terms = linalg.rank_factor(block.skip.rows())
    neurons: list[tuple[tuple[Fraction, ...], tuple[Fraction, ...]]] = []
    for c, y in terms[:m]:
        neurons.append((y, tuple(-x / (2 * a) for x in c)))
    n = 0
    while len(neurons) < m:  # distinct extra neurons u = e_j + (n+1) e_{j+1}, d = e_j
        j = n % d
        u = tuple(Fraction(1) if t == j else Fraction(n + 1) if t == (j + 1) % d and d > 1
                  else Fraction(0) for t in range(d))
        if d == 1:  # u = −(n+2), opposite to the first neuron (rref: y = 1): in the relu
            u = (Fraction(-n - 2),)  # family {u_i > 0} alone carries −S/(2a), width 1 fits
        neurons.append((u, tuple(Fraction(1) if t == j else Fraction(0) for t in range(d))))
        n += 1
    layer = Layer(Matrix([u for u, _ in neurons]),
                  Matrix(linalg.transpose([dv for _, dv in neurons])))
    return replace(block, layers=(layer,) * block.depth)
