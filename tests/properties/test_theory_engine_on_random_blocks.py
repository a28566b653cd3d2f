"""The theory engine on random small blocks (docs/rules.md §3–5): witnesses are real, bounds hold,
planted absorbable blocks are found, and the never-rules fire exactly where they should."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from absorb_formal.decide import concrete, families
from absorb_formal.decide.canonical import canonical_form
from absorb_formal.decide.lemmas import properties
from absorb_formal.model import activations as acts
from absorb_formal.model import linalg
from absorb_formal.model.blocks import Block, Layer, Matrix, Skip
from absorb_formal.model.position import Pos

from . import known_truth

RIDGE = [acts.simple("relu"), acts.leaky_relu(Fraction(1, 2)), acts.simple("gelu"),
         acts.simple("silu")]


def make(activation, up, down, skip_rows=None, scale=Fraction(1), gate=None, depth=1):
    d, m = len(up[0]), len(up)
    skip = Skip(d, matrix=Matrix(skip_rows)) if skip_rows is not None else Skip(d, scale=scale)
    layer = Layer(Matrix(up), Matrix(down), Matrix(gate) if gate is not None else None)
    return Block("B", activation, d, m, depth, skip, (layer,) * depth, Pos(1, 1))


def small_case(pick, planted: bool | None = None) -> tuple[Block, bool]:
    """A random small ridge block, and whether its skip was planted (then it is absorbable at
    its own width). `pick`: tests/properties/known_truth.py's Pick (hypothesis) or Seeded."""
    activation = pick.choice(RIDGE)
    d, m = pick.integer(1, 3), pick.integer(1, 5)
    up, down = known_truth.integers(pick, m, d, 2), known_truth.integers(pick, d, m, 2)
    plant = pick.boolean() if planted is None else planted
    if plant:  # S = −2a Σ_{i∈J} d_i u_iᵀ makes J a valid index set (docs/rules.md §4)
        a = properties(activation).odd_linear
        chosen = [i for i in range(m) if pick.boolean()]
        skip = linalg.zeros(d, d)
        for i in chosen:
            column = tuple(row[i] for row in down)
            skip = linalg.add(skip, linalg.outer(column, up[i]), -2 * a)
        return make(activation, up, down, skip), True
    if pick.boolean():
        return make(activation, up, down), False
    return make(activation, up, down, known_truth.integers(pick, d, d, 2)), False


@st.composite
def small_cases(draw, planted: bool | None = None):
    return small_case(known_truth.Pick(draw), planted)


def small_blocks(planted: bool | None = None):
    return small_cases(planted).map(lambda case: case[0])


def assert_same_function(block: Block, stack: tuple[Layer, ...], n: int = 1000) -> None:
    plain = Block("P", block.activation, block.dim, stack[0].up.shape[0], len(stack),
                  Skip(block.dim, scale=Fraction(0)), stack, Pos(1, 1))
    rng = np.random.default_rng(1)
    x = rng.normal(size=(n, block.dim)) * rng.choice([0.1, 1, 10], size=(n, 1))
    want, got = block.evaluate(x), plain.evaluate(x)
    assert np.allclose(got, want, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(want).max()))


SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(small_cases())
def test_every_witness_computes_the_block(case):
    block, planted = case
    for size in (block.width, block.width + 1, block.width + 2 * block.dim):
        decision = concrete.at_width(block, size)
        assert decision.absorbable is not None, decision.reason
        event(f"absorbable: {decision.absorbable}")
        if planted:  # absorbable at its width, so at every larger one (zero neurons)
            assert decision.absorbable is True
        if decision.absorbable:
            rows, cols = decision.witness[0].up.shape  # zero neurons may be left out (§4)
            assert rows <= size and cols == block.dim
            assert_same_function(block, decision.witness)


@SETTINGS
@given(small_blocks(planted=True))
def test_planted_blocks_are_absorbable_at_their_width(block):
    decision = concrete.at_width(block, block.width)
    assert decision.absorbable is True
    assert_same_function(block, decision.witness)


@SETTINGS
@given(small_blocks())
def test_minimal_width_is_bracketed_and_bounded(block):
    found = concrete.minimal_width(block)
    assert found.found, found.reason
    rank_s = linalg.rank(block.skip.rows())
    assert 1 <= found.value <= block.width + 2 * rank_s
    assert concrete.at_width(block, found.value).absorbable is True
    if found.value > 1:
        assert concrete.at_width(block, found.value - 1).absorbable is False


brute_force_generic = known_truth.subset_condition  # Σ_J d_i u_iᵀ = −S/(2a), enumerated


@SETTINGS
@given(small_blocks())
def test_generic_blocks_agree_with_the_papers_condition(block):
    cf = canonical_form(block)
    if cf.p != block.width:  # not generic: merged or dead neurons
        return
    truth = brute_force_generic(block)
    event(f"absorbable: {truth}")
    assert concrete.at_width(block, block.width).absorbable is truth


def _generic_case(pick):
    block, _ = small_case(pick)
    if canonical_form(block).p != block.width:
        return None
    return known_truth.Known(block, brute_force_generic(block), block.width)


def test_generic_blocks_of_a_seeded_sample_see_both_answers():
    known_truth.both_answers(
        _generic_case, lambda known: concrete.at_width(known.block, known.size).absorbable,
        samples=60)


@pytest.mark.parametrize("test", [
    test_every_witness_computes_the_block, test_planted_blocks_are_absorbable_at_their_width,
    test_minimal_width_is_bracketed_and_bounded,
    test_generic_blocks_agree_with_the_papers_condition,
    test_generic_blocks_of_a_seeded_sample_see_both_answers,
], ids=lambda t: t.__name__)
def test_a_prover_that_always_answers_no_fails_the_property_tests(monkeypatch, test):
    from absorb_formal.decide.decision import Decision

    monkeypatch.setattr(concrete, "at_width", lambda *_: Decision(False, "stub"))
    known_truth.fails_with_a_stub(monkeypatch, test)


def test_paper_counterexample_needs_m_plus_d():
    block = make(acts.simple("relu"), [[2, -1], [1, 3], [-1, 1]], [[1, 2, -1], [0, 1, 1]])
    assert concrete.minimal_width(block).value == 5
    assert concrete.at_width(block, 4).absorbable is False


def test_relu_in_one_dimension_is_always_absorbable_at_width_two():
    block = make(acts.simple("relu"), [[3], [-2], [5]], [[1, 7, -1]])
    decision = concrete.at_width(block, 2)
    assert decision.absorbable is True
    assert_same_function(block, decision.witness)


def test_gelu_keys_are_exact_so_scaled_neurons_stay_apart():
    # u and 2u are one key for relu, two keys for gelu.
    up, down = [[1, 0], [2, 0]], [[1, 1], [0, 1]]
    relu_cf = canonical_form(make(acts.simple("relu"), up, down))
    gelu_cf = canonical_form(make(acts.simple("gelu"), up, down))
    assert relu_cf.p == 1 and gelu_cf.p == 2


def test_depth_two_stack_of_absorbable_layers():
    up, down = [[1, 0], [0, 1], [1, 1]], [[-1, 0, Fraction(7, 10)], [0, -1, Fraction(3, 10)]]
    block = make(acts.simple("relu"), up, down, depth=2)
    decision = concrete.at_width(block, 3)
    assert decision.absorbable is True and len(decision.witness) == 2
    assert_same_function(block, decision.witness)


def test_glu_planted_sign_flip():
    up, down, gate = [[1, 0], [0, 1], [1, 1]], [[1, 0, 2], [0, 1, 1]], [[1, 2], [-1, 1], [3, 1]]
    c = Fraction(1, 2)  # sigmoid: σ(z) + σ(−z) = 1
    skip = linalg.zeros(2, 2)
    for i in (0, 2):
        skip = linalg.add(skip, linalg.outer(tuple(r[i] for r in down), up[i]), -2 * c)
    block = make(acts.simple("glu"), up, down, skip, gate=gate)
    decision = concrete.at_width(block, 3)
    assert decision.absorbable is True and decision.detail == "J = {1, 3}"
    assert_same_function(block, decision.witness)
    identity_skip = make(acts.simple("glu"), up, down, gate=gate)
    assert concrete.at_width(identity_skip, 3).absorbable is False


def test_linear_activation_is_decided_by_rank():
    block = make(acts.simple("identity"), [[1, 0], [0, 1]], [[-1, 0], [0, 0]])
    assert concrete.minimal_width(block).value == 1  # Λ = diag(0, 1)
    assert concrete.at_width(block, 1).absorbable is True


# ---- never-rules ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["relu^2", "square", "reglu", "bilinear", "swiglu", "geglu",
                                  "abs", "tanh", "sigmoid"])
def test_never_rules_refute_every_width(name):
    activation = acts.relu_power(2) if name == "relu^2" else acts.simple(name)
    gate = [[1, 1], [2, -1]] if activation.gated else None
    block = make(activation, [[1, 2], [0, 1]], [[1, 0], [3, 1]], gate=gate)
    for size in (1, 2, 40):
        decision = concrete.at_width(block, size)
        assert decision.absorbable is False
        assert decision.method.startswith(("T1", "T2", "T3", "T4"))


def test_homogeneity_point_is_a_real_violation():
    block = make(acts.relu_power(2), [[1, 2], [0, 1]], [[1, 0], [3, 1]])
    certificate = concrete.at_width(block, 2).certificate
    assert certificate["kind"] == "homogeneity point"
    x0 = [Fraction(v) for v in certificate["x0"]]
    t = Fraction(certificate["t"])
    assert block.evaluate_exact([t * v for v in x0]) != tuple(
        t ** 2 * v for v in block.evaluate_exact(x0))


def test_nilpotent_skip_at_depth_two_is_not_called_never():
    nilpotent = [[0, 1], [0, 0]]
    family = Block("F", acts.relu_power(2), 2, 2, 2, Skip(2, matrix=Matrix(nilpotent)), None,
                   Pos(1, 1))
    assert families.decide(family, "never", 2).absorbable is not True


def test_plain_block_absorbs_itself():
    block = make(acts.simple("swiglu"), [[1, 2]], [[1], [1]], scale=Fraction(0),
                 gate=[[1, 1]])
    decision = concrete.at_width(block, 3)
    assert decision.absorbable is True
    assert_same_function(block, decision.witness)


# ---- families (docs/rules.md §4 table) ---------------------------------------------------------

def family(name, d, m, scale=Fraction(1), depth=1):
    activation = acts.relu_power(2) if name == "relu^2" else acts.simple(name)
    return Block("F", activation, d, m, depth, Skip(d, scale=scale), None, Pos(1, 1))


@pytest.mark.parametrize(("block", "size", "expected"), [
    (family("relu", 3, 4), 4, {"never": False, "sometimes": True, "generically not": True,
                               "always": False}),
    (family("relu", 3, 2), 2, {"never": True, "sometimes": False, "generically not": True,
                               "always": False}),
    (family("relu", 1, 3), 3, {"never": False, "sometimes": True, "generically not": False,
                               "always": True}),
    (family("gelu", 1, 3), 3, {"never": False, "sometimes": True, "generically not": True,
                               "always": False}),
    (family("identity", 3, 1), 2, {"never": False, "sometimes": True,
                                   "generically not": True, "always": False}),
    (family("identity", 2, 1), 2, {"never": False, "sometimes": True,
                                   "generically not": False, "always": True}),
    (family("swiglu", 4, 8, depth=3), 8, {"never": True, "sometimes": False,
                                          "generically not": True, "always": False}),
    (family("relu", 3, 2, scale=Fraction(0)), 2, {"never": False, "sometimes": True,
                                                  "always": True, "generically not": False}),
    (family("relu", 3, 4), 10, {"always": True, "never": False}),
    (family("relu", 1000000, 4000000), 4000000, {"sometimes": True, "never": False}),
])
def test_family_table(block, size, expected):
    found = families.facts(block, size)
    for modality, value in expected.items():
        assert found.truth.get(modality) is value, (modality, found.truth)


def test_sometimes_comes_with_an_absorbable_example():
    certificate = families.decide(family("relu", 2, 3), "sometimes", 3).certificate
    example = certificate["example"]
    assert example["witness"]["kind"] == "witness"
