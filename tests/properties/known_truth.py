"""Small concrete blocks whose truth is known by construction, on both sides.

A property test whose truth is always the same cannot tell a prover from a stub that always
gives that answer. These generators build both sides, and the tests record how often each
occurred (`hypothesis.event`), and a seeded sample asserts that both occur (`both_answers`):

- generic ridge blocks (docs/rules.md §4): the skip S = −2a Σ_{i∈J} d_i u_iᵀ planted for a random J
  (absorbable at width m), or the same S moved by ±1/10^k in one entry (off every subset sum,
  which are multiples of 2a with integer weights). Either way the truth is re-established by
  enumerating every index set J, which decides the generic case (each neuron alone on its key).
- never-activations (T1–T4): a skip of zero (a plain block, absorbable at width ≥ m) or the
  identity (never absorbable).

One generator serves hypothesis (`Pick(data.draw)` or a composite's `draw`) and a seeded
`random.Random` (`Seeded(rng)`), so the share of each answer is asserted on a fixed sample.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from absorb_formal.decide.canonical import canonical_form
from absorb_formal.decide.lemmas import properties
from absorb_formal.model import activations as acts
from absorb_formal.model import linalg
from absorb_formal.model.activations import Activation
from absorb_formal.model.blocks import Block, Layer, Matrix, Skip
from absorb_formal.model.position import Pos

NEVER = ["relu^2", "relu^3", "square", "abs", "tanh", "sigmoid", "swiglu", "geglu", "reglu",
         "bilinear"]
PLAIN_TOO = ["relu", "gelu", "glu", "identity"]  # absorbable only with a zero skip here


class Pick:
    """Choices drawn by hypothesis (`draw` is `data.draw` or a composite's `draw`)."""

    def __init__(self, draw: Callable[[Any], Any]):
        self.draw = draw

    def integer(self, low: int, high: int) -> int:
        return self.draw(st.integers(low, high))

    def boolean(self) -> bool:
        return self.draw(st.booleans())

    def choice(self, items: Sequence[Any]) -> Any:
        return self.draw(st.sampled_from(items))


class Seeded:
    """The same choices from a seeded generator (a fixed sample, for `both_answers`)."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def boolean(self) -> bool:
        return self.rng.random() < 0.5

    def choice(self, items: Sequence[Any]) -> Any:
        return self.rng.choice(list(items))


@dataclass(frozen=True)
class Known:
    block: Block
    absorbable: bool  # the truth at width `size`
    size: int


def named(name: str) -> Activation:
    return acts.relu_power(int(name[-1])) if name.startswith("relu^") else acts.simple(name)


def block_of(activation: Activation, up, down, skip_rows, gate=None) -> Block:
    d, m = len(up[0]), len(up)
    layer = Layer(Matrix(up), Matrix(down), Matrix(gate) if gate is not None else None)
    return Block("B", activation, d, m, 1, Skip(d, matrix=Matrix(skip_rows)), (layer,),
                 Pos(1, 1))


def integers(pick, rows: int, cols: int, bound: int = 3) -> list[list[Fraction]]:
    return [[Fraction(pick.integer(-bound, bound)) for _ in range(cols)] for _ in range(rows)]


def subset_condition(block: Block) -> bool:
    """The paper's generic-case condition by enumeration: Σ_{i∈J} d_i u_iᵀ = −S/(2a)."""
    layer = block.layers[0]
    a = properties(block.activation).odd_linear
    target = tuple(tuple(-x / (2 * a) for x in row) for row in block.skip.rows())
    for r in range(block.width + 1):
        for chosen in itertools.combinations(range(block.width), r):
            total = linalg.zeros(block.dim, block.dim)
            for i in chosen:
                total = linalg.add(total, linalg.outer(layer.down.column(i), layer.up.rows[i]))
            if total == target:
                return True
    return False


def planted_or_moved(pick, ridge: Sequence[Activation], dims=(2, 3),
                     widths=(1, 4)) -> Known | None:
    """A generic ridge block, its skip planted (absorbable) or moved off (not); None when the
    weights are not generic (merged or dead neurons), where enumeration is not the truth."""
    activation = pick.choice(ridge)
    d, m = pick.integer(*dims), pick.integer(*widths)
    up, down = integers(pick, m, d), integers(pick, d, m)
    a = properties(activation).odd_linear
    skip = linalg.zeros(d, d)
    for i in range(m):
        if pick.boolean():
            skip = linalg.add(skip, linalg.outer([r[i] for r in down], up[i]), -2 * a)
    planted = pick.boolean()
    if not planted:
        rows = [list(r) for r in skip]
        k, j = pick.integer(0, d - 1), pick.integer(0, d - 1)
        rows[k][j] += Fraction(pick.choice([-1, 1]), 10 ** pick.integer(1, 6))
        skip = rows
    block = block_of(activation, up, down, skip)
    if canonical_form(block).p != m:
        return None
    truth = subset_condition(block)
    assert truth is planted, "the construction itself is wrong"
    return Known(block, truth, m)


def zero_or_identity_skip(pick) -> Known:
    """S = 0: a plain block, absorbable at any width ≥ m. S = I with a never-activation:
    not absorbable at any width (T1–T4)."""
    zero = pick.boolean()
    activation = named(pick.choice([*NEVER, *PLAIN_TOO] if zero else NEVER))
    d, m = pick.integer(1, 3), pick.integer(1, 4)
    gate = integers(pick, m, d) if activation.gated else None
    skip = linalg.zeros(d, d) if zero else linalg.identity(d)
    block = block_of(activation, integers(pick, m, d), integers(pick, d, m), skip, gate)
    return Known(block, zero, m + pick.integer(0, 3))


def both_answers(make: Callable[[Seeded], Known | None], decide: Callable[[Known], Any],
                 samples: int = 40, seed: int = 0, share: float = 0.25) -> Counter:
    """Decide a seeded sample: every decision must be the truth, and each answer must be the
    truth of at least `share` of the decided instances (a one-answer prover cannot pass)."""
    rng, seen = random.Random(seed), Counter()
    for _ in range(samples):
        known = make(Seeded(rng))
        if known is None:
            seen["not generic"] += 1
            continue
        assert decide(known) is known.absorbable, known.block
        seen[known.absorbable] += 1
    decided = seen[True] + seen[False]
    assert seen[True] >= share * decided and seen[False] >= share * decided, seen
    return seen


def fails_with_a_stub(monkeypatch, test: Callable[[], None]) -> None:
    """Run a property test under a stub prover (already patched in) and require it to fail.
    A hypothesis test runs without its example database, so that the stub's counterexamples
    are not replayed in later runs (hypothesis keeps its settings on the test function)."""
    from hypothesis import settings

    current = getattr(test, "_hypothesis_internal_use_settings", None)
    if current is not None:
        monkeypatch.setattr(test, "_hypothesis_internal_use_settings",
                            settings(current, database=None, max_examples=30))
    try:
        test()
    except (AssertionError, ExceptionGroup):
        return
    raise AssertionError(f"{test.__name__} passes with a prover that always answers no")
