"""The benchmark baselines and instances are measured against the tool, so they must be right:
brute force finds planted subsets and refutes impossible ones, the direct z3 encoding tells
equal pairs from near misses, and planted instances are absorbable by construction."""

from __future__ import annotations

import sys
from fractions import Fraction

import pytest

from ..conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from baselines import brute_force, z3_equivalence  # noqa: E402
from instances import absorb_block, equivalence_pair, subset_terms, target  # noqa: E402

from absorb_formal.decide import concrete, equivalence  # noqa: E402


def _terms(block):
    layer = block.layers[0]
    return subset_terms([list(r) for r in layer.up.rows], [list(r) for r in layer.down.rows])


@pytest.mark.parametrize("seed", range(4))
def test_brute_force_finds_planted_subsets(seed):
    block = absorb_block("relu", 2, 10, seed, planted=True)
    verdict, _, _ = brute_force(_terms(block), target(block), 10.0)
    assert verdict == "found"
    assert concrete.at_width(block, block.width).absorbable is True


def test_brute_force_refutes_an_unreachable_target():
    block = absorb_block("relu", 2, 6, 0, planted=False)
    far = tuple(tuple(Fraction(10**6) for _ in row) for row in target(block))
    assert brute_force(_terms(block), far, 10.0)[0] == "none"


def test_brute_force_crosses_the_chunk_boundary():
    """m > 16 terms: the enumeration splits into low and high halves."""
    terms = [((Fraction(2**i),),) for i in range(18)]
    assert brute_force(terms, ((Fraction(2**17 + 5),),), 10.0)[0] == "found"
    assert brute_force(terms, ((Fraction(2**18),),), 10.0)[0] == "none"


@pytest.mark.parametrize("equal", [True, False])
def test_z3_baseline_and_canonical_forms_agree(equal):
    a, b = equivalence_pair(2, 4, 1, equal)
    assert z3_equivalence(a, b, 30.0)[0] == ("equal" if equal else "different")
    assert equivalence.decide(a, b).equal is equal
