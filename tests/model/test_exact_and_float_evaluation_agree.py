"""Exact and float evaluation of blocks agree at random rational points (docs/rules.md §1)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from absorb_formal.model import activations as acts
from absorb_formal.model.blocks import Block, Layer, Matrix, Skip
from absorb_formal.model.position import Pos

small = st.fractions(min_value=-3, max_value=3, max_denominator=4)

RATIONAL_ACTIVATIONS = st.one_of(
    st.sampled_from(["relu", "abs", "square", "identity", "reglu", "bilinear"]).map(acts.simple),
    small.map(acts.leaky_relu),
    st.integers(1, 4).map(acts.relu_power),
    st.lists(small, min_size=1, max_size=4).map(lambda c: acts.poly(tuple(c))),
)


def matrix(rows: int, cols: int) -> st.SearchStrategy[Matrix]:
    return st.lists(st.lists(small, min_size=cols, max_size=cols),
                    min_size=rows, max_size=rows).map(Matrix)


@st.composite
def blocks(draw: st.DrawFn) -> Block:
    activation = draw(RATIONAL_ACTIVATIONS)
    d, m, depth = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 2))
    skip = draw(st.one_of(small.map(lambda c: Skip(d, scale=c)),
                          matrix(d, d).map(lambda s: Skip(d, matrix=s))))
    layers = tuple(Layer(draw(matrix(m, d)), draw(matrix(d, m)),
                         draw(matrix(m, d)) if activation.gated else None)
                   for _ in range(depth))
    return Block("B", activation, d, m, depth, skip, layers, Pos(1, 1))


@settings(max_examples=300, deadline=None)
@given(blocks(), st.data())
def test_exact_and_float_evaluation_agree(block, data):
    points = data.draw(st.lists(st.lists(small, min_size=block.dim, max_size=block.dim),
                                min_size=1, max_size=5))
    floats = block.evaluate(np.array([[float(v) for v in p] for p in points]))
    for point, got in zip(points, floats, strict=True):
        exact = block.evaluate_exact(point)
        assert all(isinstance(v, Fraction) for v in exact)
        assert np.allclose(got, [float(v) for v in exact], rtol=1e-9, atol=1e-9)


def test_known_value_of_the_paper_example():
    # R of relu_absorbable.mlp at x = (1, 2): Ux = (1, 2, 3), relu = same,
    # Dσ = (-1 + 21/10, -2 + 9/10) = (11/10, -11/10), plus x.
    up = Matrix([[1, 0], [0, 1], [1, 1]])
    down = Matrix([[-1, 0, Fraction(7, 10)], [0, -1, Fraction(3, 10)]])
    block = Block("R", acts.simple("relu"), 2, 3, 1, Skip(2, scale=Fraction(1)),
                  (Layer(up, down),), Pos(1, 1))
    assert block.evaluate_exact([1, 2]) == (Fraction(21, 10), Fraction(9, 10))


def test_gated_block_and_depth_two():
    # bilinear: B(x) = x + D((Gx) ⊙ (Ux)); with all-ones 1×1 weights B(x) = x + x², twice.
    one = Matrix([[1]])
    block = Block("G", acts.simple("bilinear"), 1, 1, 2, Skip(1, scale=Fraction(1)),
                  (Layer(one, one, one), Layer(one, one, one)), Pos(1, 1))
    assert block.evaluate_exact([Fraction(1)]) == (Fraction(6),)  # 1 → 2 → 2 + 4
    assert block.evaluate(np.array([[1.0]])).tolist() == [[6.0]]


def test_float_evaluation_of_every_activation_is_finite():
    rng = np.random.default_rng(0)
    for name in acts.SIMPLE_NAMES:
        activation = acts.simple(name)
        gate = Matrix([[1, -1], [2, 0]]) if activation.gated else None
        block = Block("B", activation, 2, 2, 1, Skip(2, scale=Fraction(1)),
                      (Layer(Matrix([[1, 2], [0, 1]]), Matrix([[1, 0], [1, 1]]), gate),),
                      Pos(1, 1))
        values = block.evaluate(rng.normal(size=(1000, 2)) * 10)
        assert values.shape == (1000, 2) and np.isfinite(values).all()
