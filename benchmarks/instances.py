"""Seeded benchmark instances: random and planted ReLU/GELU blocks, equivalence pairs.

Weights are small fractions (numerators in [−9, 9], denominators in 1..4). "Planted" sets
S = −2a·Σ_{i∈J} d_i u_iᵀ for a random J, so the block is absorbable by construction
(docs/rules.md §4); "random" keeps S = I.
"""

from __future__ import annotations

import random
from fractions import Fraction

from absorb_formal.model import activations as acts
from absorb_formal.model import linalg
from absorb_formal.model.blocks import Block, Layer, Matrix, Skip
from absorb_formal.model.position import Pos

A = Fraction(1, 2)  # odd slope of relu and gelu


def _entry(rng: random.Random) -> Fraction:
    return Fraction(rng.randint(-9, 9), rng.randint(1, 4))


def weights(d: int, m: int, rng: random.Random) -> tuple[list[list[Fraction]], ...]:
    up = [[_entry(rng) for _ in range(d)] for _ in range(m)]
    down = [[_entry(rng) for _ in range(m)] for _ in range(d)]
    return up, down


def subset_terms(up: list[list[Fraction]], down: list[list[Fraction]]) -> list[linalg.Rows]:
    """The paper's terms d_i u_iᵀ, one per neuron."""
    return [linalg.outer([row[i] for row in down], up[i]) for i in range(len(up))]


def absorb_block(activation: str, d: int, m: int, seed: int, planted: bool) -> Block:
    rng = random.Random(f"{activation}/{d}/{m}/{seed}/{planted}")
    up, down = weights(d, m, rng)
    skip = Skip(d, scale=Fraction(1))
    if planted:
        s = linalg.zeros(d, d)
        for term in [t for t in subset_terms(up, down) if rng.random() < 0.5]:
            s = linalg.add(s, term, -2 * A)
        skip = Skip(d, matrix=Matrix(s))
    return Block("B", acts.simple(activation), d, m, 1, skip,
                 (Layer(Matrix(up), Matrix(down)),), Pos(1, 1))


def target(block: Block) -> linalg.Rows:
    """−S/(2a), the matrix a subset of the terms must reach."""
    if block.skip.matrix is not None:
        s = block.skip.matrix.rows
    else:
        s = linalg.identity(block.dim, Fraction(block.skip.scale or 0))
    return tuple(tuple(-x / (2 * A) for x in row) for row in s)


def equivalence_pair(d: int, m: int, seed: int, equal: bool) -> tuple[Block, Block]:
    """B = A with neurons permuted and positively rescaled; a near miss also moves one
    weight of B by 1/1000 (the functions then differ)."""
    rng = random.Random(f"eq/{d}/{m}/{seed}")
    up, down = weights(d, m, rng)
    order = list(range(m))
    rng.shuffle(order)
    scale = [Fraction(rng.randint(1, 5), rng.randint(1, 5)) for _ in range(m)]
    up_b = [[x * scale[i] for x in up[i]] for i in order]
    down_b = [[row[i] / scale[i] for i in order] for row in down]
    if not equal:
        down_b[0][0] += Fraction(1, 1000)
    relu = acts.simple("relu")
    skip = Skip(d, scale=Fraction(1))

    def make(name: str, u: list[list[Fraction]], w: list[list[Fraction]]) -> Block:
        return Block(name, relu, d, m, 1, skip, (Layer(Matrix(u), Matrix(w)),), Pos(1, 1))

    return make("A", up, down), make("B", up_b, down_b)
