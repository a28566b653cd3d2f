"""Exact means exact: every weight reaches the exact path as the value it denotes.

Two ways to a wrong verdict are closed here: a large block decided on float64 copies of its
weights (a literal 0.3, an int64 beyond 2^53), and long-double npz weights rounded through
`float`. Each test fails on a prover that reads values through floats.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from absorb_formal.decide import concrete, large
from absorb_formal.model import exactarray
from absorb_formal.model.blocks import Matrix
from absorb_formal.model.linalg import PRIME

LONG = np.longdouble
X86_EXTENDED = np.finfo(LONG).nmant >= 63


def _residue(x: Fraction) -> int:
    return x.numerator * pow(x.denominator, -1, PRIME) % PRIME


# ---- exact readings of every dtype -------------------------------------------------------

@pytest.mark.skipif(not X86_EXTENDED, reason="the platform's long double is float64")
def test_long_double_entries_are_read_exactly():
    value = -(LONG(1) + LONG(2) ** -60)
    matrix = Matrix(array=np.array([[value, LONG(3) / LONG(7)]], dtype=LONG))
    first = matrix.rows[0][0]
    assert first == -(1 + Fraction(1, 2**60))
    assert first != Fraction(float(value))  # what `float` made of it: -1
    third = matrix.rows[0][1]
    assert abs(third - Fraction(3, 7)) < Fraction(1, 2**62)  # 64 mantissa bits, not 53


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1,
                max_size=12))
def test_long_double_parts_agree_with_float64_on_float64_values(values):
    as_long = np.array([values], dtype=LONG)
    assert Matrix(array=as_long).rows == Matrix(array=np.array([values])).rows


def test_integers_beyond_two_to_the_53_stay_exact():
    big = 2**53 + 1
    array = np.array([[big, -(2**63)], [2**62 + 3, 7]], dtype=np.int64)
    matrix = Matrix(array=array)
    assert matrix.rows[0] == (Fraction(big), Fraction(-(2**63)))
    assert matrix.residues([0, 1], [0, 1], PRIME).tolist() == [
        [_residue(Fraction(v)) for v in row] for row in array.tolist()]
    assert float(matrix.floats[0, 0]) != big  # the float copy rounds: numeric use only


def test_unsigned_64_bit_integers_stay_exact():
    array = np.array([[2**64 - 1, 5]], dtype=np.uint64)
    matrix = Matrix(array=array)
    assert matrix.rows[0][0] == 2**64 - 1
    assert matrix.residues([0], [0, 1], PRIME).tolist() == [[(2**64 - 1) % PRIME, 5]]


@given(st.sampled_from(["float16", "float32", "float64", "longdouble"]),
       st.lists(st.floats(allow_nan=False, allow_infinity=False, width=16), min_size=1,
                max_size=10))
def test_residues_are_those_of_the_exact_values(dtype, values):
    array = np.array([values], dtype=dtype)
    matrix = Matrix(array=array)
    want = [[_residue(v) for v in matrix.rows[0]]]
    assert matrix.residues([0], range(len(values)), PRIME).tolist() == want


def test_literal_residues_are_exact_and_refuse_denominators_divisible_by_p():
    matrix = Matrix([[Fraction(3, 10), Fraction(-7, 3)]])
    assert matrix.residues([0], [0, 1], PRIME).tolist() == [
        [_residue(Fraction(3, 10)), _residue(Fraction(-7, 3))]]
    assert Matrix([[Fraction(1, PRIME)]]).residues([0], [0], PRIME) is None


def test_parts_reconstruct_every_float_format():
    rng = np.random.default_rng(1)
    for dtype in ("float16", "float32", "float64", "longdouble"):
        array = (rng.standard_normal((3, 5)) * 10.0 ** rng.integers(-3, 4, (3, 5))).astype(dtype)
        mantissas, exponents = exactarray.parts(array)
        for m_, e_, v in zip(mantissas.ravel(), exponents.ravel(), array.ravel(), strict=True):
            assert exactarray.fraction(int(m_), int(e_)) == Matrix(array=np.array([[v]])).rows[0][0]


# ---- the two wrong verdicts --------------------------------------------------------------

D, M = 100, 1260  # 2·100·1260 = 252,000 weights: just past the exact-work limit


def _large_absorbable(down_first_column: list[Fraction] | None = None,
                      big_entry: int | None = None, d: int = D, m: int = M):
    """relu, d × m, S = −d₁u₁ᵀ: absorbable at its own width (flip neuron 1)."""
    from absorb_formal.model import activations
    from absorb_formal.model.blocks import Block, Layer, Skip
    from absorb_formal.model.position import Pos

    rng = np.random.default_rng(7)
    up = rng.integers(-10**6, 10**6, (m, d)).astype(np.int64)  # distinct ratios: generic keys
    if big_entry is not None:
        up[0, 0] = big_entry
    down_rows = [[Fraction(int(v)) for v in row] for row in rng.integers(-9, 10, (d, m))]
    if down_first_column is not None:
        for r, value in enumerate(down_first_column):
            down_rows[r][0] = value
    d1 = [row[0] for row in down_rows]
    u1 = [Fraction(int(v)) for v in up[0]]
    skip = Matrix([[-a * b for b in u1] for a in d1])
    layer = Layer(Matrix(array=up), Matrix(down_rows))
    return Block("Big", activations.simple("relu"), d, m, 1, Skip(d, matrix=skip), (layer,),
                 Pos(1, 1))


SMALL = {"d": 30, "m": 200}  # the modular-functional argument at a size the tests can afford


@pytest.mark.parametrize("variant", ["tenths literal", "int64 beyond 2^53"])
def test_the_modular_functional_sees_exact_values(variant):
    if variant == "tenths literal":
        block = _large_absorbable([Fraction(3, 10) + r for r in range(30)], **SMALL)
    else:
        block = _large_absorbable(big_entry=2**53 + 1, **SMALL)
    from absorb_formal.decide import modular

    assert modular.decide(block, 200, True) is None  # vec S in the span: no Y exists
    assert large.decide(block, 200).absorbable is not False  # (the unique solution: J = {1})


def test_the_modular_functional_still_refutes_generic_blocks():
    """The control: the same blocks with S = I are certified not absorbable."""
    from dataclasses import replace

    from absorb_formal.model.blocks import Skip

    for block in (_large_absorbable([Fraction(3, 10)] * 30, **SMALL),
                  _large_absorbable(big_entry=2**53 + 1, **SMALL)):
        decision = large.decide(replace(block, skip=Skip(30, scale=Fraction(1))), 200)
        assert decision.absorbable is False and decision.certificate is not None
        assert decision.certificate["kind"] == "modular functional"


def test_large_absorbable_block_is_not_refuted():
    """A 3/10 among its weights, past the exact-work limit: only the modular path reads it."""
    block = _large_absorbable(down_first_column=[Fraction(3, 10) + r for r in range(D)])
    assert concrete.weight_count(block) > concrete.MAX_EXACT_WEIGHTS
    assert concrete.at_width(block, M).absorbable is not False


@pytest.mark.skipif(not X86_EXTENDED, reason="the platform's long double is float64")
def test_long_double_block_is_decided_on_its_exact_value(tmp_path, cli):
    """U = I, D = diag(−(1+2⁻⁶⁰), −1): not absorbable at width 2 (min width 3); rounded to
    float it would be D = −I, absorbable by flipping both neurons."""
    down = np.array([[-(LONG(1) + LONG(2) ** -60), 0], [0, -1]], dtype=LONG)
    np.savez(tmp_path / "w.npz", up=np.eye(2, dtype=LONG), down=down)
    spec = tmp_path / "ld.mlp"
    spec.write_text('block R {\n  activation relu  dim 2  width 2\n'
                    '  up = load("w.npz", "up")\n  down = load("w.npz", "down")\n}\n'
                    "claim R is not absorbable\nclaim min width of R is 3\n", encoding="utf-8")
    run = cli(str(spec))
    assert run.code == 0, run.out + run.err
    assert run.out.count("proved:") == 2


def test_residues_of_multiples_of_a_small_prime_are_zero():
    """float32 mantissas reach 2^24, past the minors' primes near 2^21: a weight p·2^k must
    give residue 0 (the float floor reduction may land one p too low; the result is mapped
    back into [0, p))."""
    import numpy as np

    from absorb_formal.model import exactarray

    p = 2_097_143
    values = np.array([s * m * p * 2.0**k for s in (1, -1) for m in (1, 3, 7) for k in
                       range(-30, 30)], dtype=np.float32).reshape(1, -1)
    assert set(exactarray.residues(values, p).ravel().tolist()) == {0}
