"""Cases decided exactly rather than left `unknown`: relu-family families in d = 1 at
every width, concrete O(a)+N blocks at and above the width bound (docs/rules.md §4), and d = 1
stacks (§5). Every certificate goes through the independent checker."""

from __future__ import annotations

import copy
import importlib
import itertools
import json
import random
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from absorb_formal.checker.dispatch import verify
from absorb_formal.checker.kernel.contract import Invalid
from absorb_formal.decide import concrete, families, skip, width
from absorb_formal.decide.canonical import canonical_form
from absorb_formal.model import activations as acts
from absorb_formal.model import linalg
from absorb_formal.model.blocks import Block, Skip
from absorb_formal.model.position import Pos

from ..properties.test_theory_engine_on_random_blocks import make, small_blocks

# the width search's checker module
checker = importlib.import_module("absorb_formal.checker.rules.width")
LEAKY = acts.leaky_relu(Fraction(1, 5))


def family(activation, m, scale=Fraction(1), depth=1):
    return Block("F", activation, 1, m, depth, Skip(1, scale=scale), None, Pos(1, 1))


ALWAYS = {"always": True, "sometimes": True, "never": False, "generically not": False}
WIDTH_ONE = {"always": False, "sometimes": True, "never": False, "generically not": True}


@pytest.mark.parametrize(("block", "size", "expected"), [
    (family(acts.simple("relu"), 1), 2, ALWAYS),      # m = 1, between m and m + 2 rank S
    (family(acts.simple("relu"), 3), 4, ALWAYS),      # m < w < m + 2 rank S
    (family(acts.simple("relu"), 5), 2, ALWAYS),      # 2 <= w < m
    (family(LEAKY, 1, depth=3, scale=Fraction(2)), 2, ALWAYS),  # a stack
    (family(acts.simple("relu"), 3), 1, WIDTH_ONE),
    (family(LEAKY, 4, scale=Fraction(-3, 2)), 1, WIDTH_ONE),
    (family(acts.simple("relu"), 1), 1, WIDTH_ONE),   # m = 1: the §4 table's generic case
    (family(acts.simple("relu"), 3, scale=Fraction(0)), 2, ALWAYS),  # skip none, w < m
    # S = 0: every u_i > 0 (an open set) gives c relu(x); relu(x) + relu(-x) needs two.
    (family(LEAKY, 3, scale=Fraction(0)), 1, {"always": False, "sometimes": True,
                                              "never": False, "generically not": False}),
])
def test_relu_family_in_one_dimension_at_every_width(block, size, expected):
    found = families.facts(block, size)
    assert found.truth == expected, found.reason


def test_gelu_in_one_dimension_keeps_its_keys():
    # e is not homogeneous for gelu: no one-line rule, width 1 below m stays undecided.
    assert "always" not in families.facts(family(acts.simple("gelu"), 3), 1).truth


# ---- the family certificates, through the checker -----------------------------------------

FAMILY_SPEC = """\
block F2 { activation relu  dim 1  width 1 }
block F { activation relu  dim 1  width 3 }
block L { activation leaky_relu(1/5)  dim 1  width 2  depth 3  skip 2 }
claim F2 is always absorbable at width 2
claim F is always absorbable at width 4
claim F is generically not absorbable at width 1
claim F is sometimes absorbable at width 1
claim F is always absorbable at width 1
claim L is always absorbable at width 2
block P { activation relu  dim 1  width 3  skip none }
claim P is generically not absorbable at width 1
claim P is always absorbable at width 2
"""


def certificates(cli, write_spec, tmp_path: Path, text: str) -> dict[int, dict[str, Any]]:
    """Prove a spec into tmp_path; the documents by claim line."""
    out = tmp_path / "proofs"
    run = cli("--crosscheck", "0", "--certificates", out, write_spec(text))
    assert run.code in (0, 1), run.out + run.err
    return {int(p.name.split(".")[-2]): json.loads(p.read_text(encoding="utf-8"))
            for p in out.rglob("*.json")}


def test_family_certificates_check(cli, write_spec, tmp_path):
    docs = certificates(cli, write_spec, tmp_path, FAMILY_SPEC)
    outcomes = {line: doc["outcome"] for line, doc in docs.items()}
    assert outcomes == {4: "proved", 5: "proved", 6: "proved", 7: "proved", 8: "refuted",
                        9: "proved", 11: "refuted", 12: "proved"}
    for line, doc in docs.items():
        assert verify(doc).status == "valid", (line, verify(doc).reason)
    assert "example" in docs[7]["certificate"]  # "sometimes" shows a member and its witness


@pytest.mark.parametrize(("line", "tamper"), [
    (5, lambda doc: doc["blocks"]["F"].update(dim=2)),           # d = 2: keys are not one line
    (6, lambda doc: doc["blocks"]["F"]["activation"].update(     # gelu: keys stay exact
        kind="gelu", name="gelu")),
    (6, lambda doc: (doc["claim"].update(width=2),              # the width-1 rule at width 2
                     doc["certificate"].update(width=2))),
    (6, lambda doc: doc["blocks"]["F"].update(depth=2)),         # width 1: depth 1 only
    (4, lambda doc: (doc["claim"].update(width=1),              # width >= 2 rule at width 1
                     doc["certificate"].update(width=1))),
    (6, lambda doc: doc["blocks"]["F"].update(skip={"scale": "0"})),  # S = 0: not generic
    (11, lambda doc: doc["blocks"]["P"].update(skip={"scale": "1"})),  # S != 0: generic
])
def test_checker_holds_the_one_dimension_rules_to_their_preconditions(cli, write_spec,
                                                                      tmp_path, line, tamper):
    doc = copy.deepcopy(certificates(cli, write_spec, tmp_path, FAMILY_SPEC)[line])
    tamper(doc)
    assert verify(doc).status == "invalid"


# ---- concrete blocks above the search's reach ---------------------------------------------

def random_block(seed: int, d: int, m: int, skip_rows=None) -> Block:
    rng = random.Random(seed)
    up = [[Fraction(rng.randint(-9, 9)) for _ in range(d)] for _ in range(m)]
    down = [[Fraction(rng.randint(-9, 9)) for _ in range(m)] for _ in range(d)]
    return make(acts.simple("relu"), up, down, skip_rows)


def test_fourteen_single_keys_min_width_and_every_width_above():
    block = random_block(7, 3, 14)  # identity skip: m + 2 rank S = 20
    assert canonical_form(block).p == 14
    assert concrete.at_width(block, 16).absorbable is False  # needs the 2^14 sign walk
    for size in (17, 20, 999):
        decision = concrete.at_width(block, size)
        assert decision.absorbable is True, decision.reason
        assert decision.witness[0].up.shape[0] == 17  # zero neurons beyond 17 are left out
    assert concrete.minimal_width(block).value == 17


def test_own_neurons_give_m_plus_two_rank_s():
    # rank S = 1 in d = 4, 17 single keys: the sign walk (2^17) is out of reach, but the
    # block's own neurons with one spare pair for S fit in m + 2 = 19.
    s = [[1, 2, 0, -1], [0, 0, 0, 0], [2, 4, 0, -2], [0, 0, 0, 0]]
    block = random_block(11, 4, 17, [[Fraction(x) for x in row] for row in s])
    decision = concrete.at_width(block, 19)
    assert decision.absorbable is True, decision.reason


def test_concrete_certificates_check(cli, write_spec, tmp_path):
    spec = Path(__file__).resolve().parents[2] / "specs" / "min_width" / "widths.mlp"
    text = spec.read_text(encoding="utf-8")
    start = text.index("block R14")
    text = text[start:].replace("claim min width of R14 is 17\n", "")  # checked above
    docs = certificates(cli, write_spec, tmp_path, text + "claim R14 is absorbable at width 16\n")
    assert {doc["outcome"] for doc in docs.values()} >= {"proved", "refuted"}
    for line, doc in docs.items():
        assert doc["outcome"] != "unknown", line
        assert verify(doc).status == "valid", (line, verify(doc).reason)
    wide = next(doc for doc in docs.values() if doc["claim"]["width"] == 999)
    assert int(wide["certificate"]["width"]) == 17  # narrower than asked: accepted


@settings(deadline=None)
@given(small_blocks())
def test_upper_bound_is_at_most_m_plus_two_rank_s(block):
    cf = canonical_form(block)
    bound = width.upper_bound(cf, block.layers[0])
    assert bound.cost <= block.width + 2 * skip.rank(block.skip)
    layer = width.build(cf, bound, max(bound.cost, 1))  # raises unless the forms agree
    assert layer.up.shape[0] == max(bound.cost, 1)


# ---- the sign walk (prover and checker) ----------------------------------------------------

def rows(rng: random.Random, d: int, b: int) -> linalg.Rows:
    return tuple(tuple(Fraction(rng.randint(-3, 3), rng.randint(1, 3)) for _ in range(b))
                 for _ in range(d))


@pytest.mark.parametrize("negated", [set(c) for n in range(5)
                                     for c in itertools.combinations(range(4), n)])
def test_checker_sign_walk_visits_every_sign_vector(negated):
    # M_s Q = −target + Σ_{s_ℓ = −} terms[ℓ]: plant a zero at one sign vector.
    rng = random.Random(3)
    terms = [rows(rng, 3, 3) for _ in range(4)]
    target = linalg.zeros(3, 3)
    for i in negated:
        target = linalg.add(target, terms[i])
    with pytest.raises(Invalid):
        checker._signs_refuted(terms, target, 0)
    checker._signs_refuted(terms, linalg.add(target, rows(rng, 3, 3)), 0)  # generic: none


@settings(deadline=None)
@given(small_blocks(), st.integers(1, 2))
def test_prover_sign_walk_agrees_with_brute_force(block, k):
    cf = canonical_form(block)
    singles = list(range(cf.p))
    basis = width.complement(cf, ())
    found = width.low_rank_signs(cf, singles, basis, k)
    brute = [dict(zip(singles, bits, strict=True))
             for bits in itertools.product((1, -1), repeat=len(singles))
             if linalg.rank(width.times(width.m_matrix(cf, dict(zip(singles, bits,
                                                                     strict=True))), basis)) <= k]
    assert (found is None) == (not brute)
    if found is not None:
        assert linalg.rank(width.times(width.m_matrix(cf, found), basis)) <= k


def test_stack_of_one_dimension_layers_of_different_witness_widths(cli, write_spec, tmp_path):
    # Layer 1 is absorbable with one neuron (s + Σ_{u>0} d u = 1 − 1 = 0), layer 2 needs two.
    text = """\
block C {
    activation relu
    dim 1  width 1  depth 2
    layer 1 { up = [[1]]  down = [[-1]] }
    layer 2 { up = [[1]]  down = [[1]] }
}
claim C is absorbable at width 5
"""
    doc = certificates(cli, write_spec, tmp_path, text)[7]
    assert doc["outcome"] == "proved" and verify(doc).status == "valid", verify(doc).reason
