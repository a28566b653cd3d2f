"""docs/rules.md §9, "Depth ≥ 2: the half-activation bound":
the prover's least pattern rank against a brute force, the checker against the prover, and the
guard rails — for each, a block where the rule must stay silent."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from fractions import Fraction as F

import pytest

from absorb_formal.checker.kernel.contract import Invalid, Kind
from absorb_formal.checker.rules import half_activation as checker_half
from absorb_formal.checker.rules.families import truth as family_truth
from absorb_formal.decide import concrete, families
from absorb_formal.decide import half_activation as H
from absorb_formal.model import linalg
from absorb_formal.model.activations import as_json as activation_json
from absorb_formal.model.activations import leaky_relu, relu_power, simple
from absorb_formal.model.blocks import Block, Layer, Matrix, Skip
from absorb_formal.model.position import Pos

RELU = simple("relu")


def make(d: int, layers: list[tuple[list[list[int]], list[list[int]]]], activation=RELU,
         skip: Skip | None = None, biased: bool = False) -> Block:
    built = []
    for up, down in layers:
        m = len(up)
        extra = {"up_bias": (F(1),) * m, "down_bias": (F(-1),) * d} if biased else {}
        built.append(Layer(Matrix([tuple(map(F, r)) for r in up]),
                           Matrix([tuple(map(F, r)) for r in down]), **extra))
    return Block("B", activation, d, len(layers[0][0]), len(layers), skip or Skip(d, scale=F(1)),
                 tuple(built), Pos(1, 1), biased=biased)


def random_block(rng: random.Random, d: int, m: int, depth: int, spread: int = 2) -> Block:
    def row(n: int) -> list[int]:
        return [rng.randint(-spread, spread) for _ in range(n)]
    return make(d, [([row(d) for _ in range(m)], [row(m) for _ in range(d)])
                    for _ in range(depth)])


def as_json(block: Block) -> dict:
    """The block as a certificate document embeds it (the checker's input)."""
    layers = []
    for layer in block.layers or ():
        entry = {"up": [[str(x) for x in r] for r in layer.up.rows],
                 "down": [[str(x) for x in r] for r in layer.down.rows]}
        if layer.up_bias is not None:
            entry["up_bias"] = [str(x) for x in layer.up_bias]
            entry["down_bias"] = [str(x) for x in layer.down_bias or ()]
        layers.append(entry)
    act = activation_json(block.activation)
    skip = ({"scale": str(block.skip.scale)} if block.skip.matrix is None
            else {"matrix": [[str(x) for x in r] for r in block.skip.matrix.rows]})
    out = {"name": "B", "activation": act, "dim": block.dim, "width": block.width,
           "depth": block.depth, "skip": skip, "layers": layers if block.layers else None}
    if block.biased:
        out["bias"] = True
    return out


def brute_least_rank(block: Block) -> int:
    """min over every tuple of patterns of rank(Π_k (S + D_k diag(a_k) U_k)), from scratch."""
    s = block.skip.rows()
    mats = []
    for layer in block.layers or ():
        m = layer.up.shape[0]
        options = []
        for bits in itertools.product((0, 1), repeat=m):
            mat = [list(r) for r in s]
            for i, on in enumerate(bits):
                if on:
                    for a in range(block.dim):
                        for b in range(block.dim):
                            mat[a][b] += layer.down.rows[a][i] * layer.up.rows[i][b]
            options.append(mat)
        mats.append(options)
    best = block.dim
    for choice in itertools.product(*mats):
        product = choice[0]
        for factor in choice[1:]:
            product = linalg.matmul(factor, product)
        best = min(best, linalg.rank(product))
    return best


@pytest.mark.parametrize("seed", range(12))
def test_the_least_pattern_rank_is_the_brute_forces_and_the_checker_agrees(seed):
    rng = random.Random(seed)
    d, m, depth = rng.choice([(2, 2, 2), (2, 3, 2), (3, 2, 2), (2, 1, 3), (2, 3, 1)])
    block = random_block(rng, d, m, depth, spread=1 + seed % 3)
    found = H.bound(block)
    assert found.rank == brute_least_rank(block)
    if found.rank:  # the certificate at the widest refuted width is accepted by the checker
        cert = H.certificate(found, 2 * found.rank - 1)
        checker_half.check(as_json(block), 2 * found.rank - 1, cert)
        with pytest.raises(Invalid):  # and not one width further
            checker_half.check(as_json(block), 2 * found.rank, {**cert, "width": 2 * found.rank})


def test_the_norm_test_decides_small_updates_and_is_checked():
    block = make(2, [([[1, 0], [0, 1], [1, 1]], [[1, 0, 1], [0, 1, 1]])] * 2)
    small = Block("B", RELU, 2, 3, 2, Skip(2, scale=F(10)), block.layers, Pos(1, 1))
    found = H.bound(small)
    assert found.rank == 2 and found.fields is not None
    assert [e["test"] for e in found.fields["layers"]] == ["norm", "norm"]
    cert = H.certificate(found, 3)
    checker_half.check(as_json(small), 3, cert)
    wrong = {**cert, "layers": [{**cert["layers"][0], "sum": "1/1000"}, cert["layers"][1]]}
    with pytest.raises(Invalid, match="norm sum"):
        checker_half.check(as_json(small), 3, wrong)


def test_sylvester_combines_layers_too_many_to_multiply():
    # layer 1 has a singular pattern (neuron 1: 1 + u·d = 0), m = 7 at depth 2: 2^14 tuples
    up = [[1, 0]] + [[k, 1] for k in range(2, 8)]
    down = [[-1, 1, 0, 1, 0, 1, 0], [0, 0, 1, 0, 1, 0, 1]]
    block = make(2, [(up, down), (up, down)])
    found = H.bound(block)
    assert found.fields is not None and found.fields["combine"] == "sylvester"
    ranks = [e["least_rank"] for e in found.fields["layers"]]
    assert found.rank == max(0, sum(ranks) - 2)
    if found.rank:
        checker_half.check(as_json(block), 2 * found.rank - 1,
                           H.certificate(found, 2 * found.rank - 1))


# ---- guard rails: the rule stays silent ------------------------------------------------------

@pytest.mark.parametrize("name", ["leaky_relu(1/5)", "gelu", "silu", "gelu_tanh", "swiglu",
                                  "reglu", "abs", "relu^2", "identity"])
def test_the_rule_never_fires_without_a_vanishing_derivative(name):
    activation = (leaky_relu(F(1, 5)) if name.startswith("leaky") else
                  relu_power(2) if name == "relu^2" else simple(name))
    assert activation is not None
    assert H.slope(activation) is None
    if activation.gated:
        return
    block = replace(random_block(random.Random(1), 2, 3, 2), activation=activation)
    assert H.refute(block, 1) is None
    assert H.family(replace(block, layers=None), 3) is None
    decision = concrete.at_width(block, 1)
    assert decision.method != H.METHOD


def test_the_checker_refuses_the_bound_for_leaky_relu_and_gelu():
    block = make(2, [([[1, 2], [1, 1], [3, 1]], [[1, 1, 1], [2, 1, 1]])] * 2)
    found = H.bound(block)
    assert found.rank == 2
    cert = H.certificate(found, 3)
    doc = as_json(block)
    checker_half.check(doc, 3, cert)  # valid for relu
    for act in ({"name": "leaky_relu(1/5)", "kind": "leaky_relu", "param": "1/5"},
                {"name": "gelu", "kind": "gelu", "param": None}):
        other = dict(doc, activation={**doc["activation"], **act})
        with pytest.raises(Invalid, match="derivative"):
            checker_half.check(other, 3, cert)


def test_a_singular_pattern_leaves_widths_between_2r_and_2d_alone():
    # the paper's absorbable layer has pattern (1, 1, 0) with S + D_a U_a = 0: r = 0
    paper = ([[1, 0], [0, 1], [1, 1]], [[-1, 0, F(7, 10)], [0, -1, F(3, 10)]])
    other = ([[2, -1], [1, 3], [-1, 1]], [[1, 2, -1], [0, 1, 1]])
    block = make(2, [paper, other])
    assert H.bound(block).rank == 0
    assert H.refute(block, 1) is None and H.refute(block, 3) is None
    # one singular pattern (1 + u_2·d_2 = 0): r = 1 refutes width 1 only, never 2d - 1 = 3
    one = make(2, [([[1, 2], [0, 1], [3, 1]], [[1, 0, 1], [2, -1, 1]]), other])
    assert H.bound(one).rank == 1
    assert H.refute(one, 1) is not None
    assert H.refute(one, 2) is None and H.refute(one, 3) is None
    assert concrete.at_width(one, 3).absorbable is None


def test_the_checker_rejects_a_claim_that_needs_r_equal_d_when_a_pattern_is_singular():
    other = ([[2, -1], [1, 3], [-1, 1]], [[1, 2, -1], [0, 1, 1]])
    one = make(2, [([[1, 2], [0, 1], [3, 1]], [[1, 0, 1], [2, -1, 1]]), other])
    cert = H.certificate(H.bound(one), 3)
    with pytest.raises(Invalid):
        checker_half.check(as_json(one), 3, cert)
    forged = {**cert, "rank": 2}
    with pytest.raises(Invalid):
        checker_half.check(as_json(one), 3, forged)


# ---- stacks: refutations, min width, biases ------------------------------------------------

def test_a_stack_below_2d_is_refuted_and_its_min_width_decided_when_the_bounds_meet():
    block = random_block(random.Random(0), 2, 3, 2, spread=3)
    assert H.bound(block).rank == 2
    refuted = concrete.at_width(block, 3)
    assert refuted.absorbable is False and refuted.method == H.METHOD
    found = concrete.minimal_width(block)
    assert found.found or found.bounds is not None
    if found.found:
        assert found.value == 4 and found.method == H.STACK_METHOD
        assert found.certificate["below"]["kind"] == Kind.HALF_ACTIVATION_BOUND
    else:
        assert found.bounds[0] == 4


def test_biased_stacks_get_the_same_bound_and_padded_witnesses():
    base = random_block(random.Random(0), 2, 3, 2, spread=3)
    biased = replace(base, biased=True, layers=tuple(
        replace(layer, up_bias=(F(1), F(-2), F(1, 2)), down_bias=(F(3), F(-1)))
        for layer in base.layers or ()))
    assert H.bound(biased).rank == H.bound(base).rank == 2
    assert concrete.at_width(biased, 3).absorbable is False
    above = concrete.at_width(biased, 7)  # m + 2·rank S: each layer absorbable
    assert above.absorbable is True and above.witness is not None
    assert all(layer.up_bias is not None and len(layer.up_bias) == layer.up.shape[0]
               for layer in above.witness)


# ---- families ----------------------------------------------------------------------------------

def test_relu_families_below_2d_are_generically_not_absorbable_at_any_depth():
    fam = Block("F", RELU, 3, 4, 3, Skip(3, scale=F(1)), None, Pos(1, 1))
    decision = families.decide(fam, "generically not", 4)
    assert decision.absorbable is True and decision.method == H.METHOD
    assert families.decide(fam, "always", 4).absorbable is False
    table = family_truth(as_json(fam), 4, decision.certificate, lambda *part: None)
    assert table["generically not"]
    with pytest.raises(Invalid):  # width 2d is not below 2d
        checker_half.check_family(as_json(fam), 6)
    assert H.family(fam, 6) is None
    singular = replace(fam, skip=Skip(3, matrix=Matrix([(F(1), F(0), F(0)), (F(0),) * 3,
                                                        (F(0), F(0), F(1))])))
    assert H.family(singular, 4) is None
    with pytest.raises(Invalid, match="invertible"):
        checker_half.check_family(as_json(singular), 4)


# ---- --fit on stacks: it finds a flip witness, and fails where §9 refutes ----------------

def test_the_stack_fit_finds_a_flipped_stack_and_fails_below_the_bound():
    from absorb_formal.numeric.backends import NumpyBackend
    from absorb_formal.numeric.fit import FIT_TOLERANCE, search_stack

    paper = ([[1, 0], [0, 1], [1, 1]], [[-1, 0, F(7, 10)], [0, -1, F(3, 10)]])
    second = ([[1, 0], [1, -1], [3, 1]], [[-1, 0, 2], [-1, 1, 1]])
    absorbable = make(2, [paper, second])  # each layer: J = {1, 2} flips
    error, runs = search_stack(absorbable, 3, 2, NumpyBackend(), steps=200)
    assert error <= FIT_TOLERANCE and runs == 2  # the informed start's sign sweep
    refuted = make(2, [([[1, 2]], [[1], [1]]), ([[2, -1]], [[3], [1]])])
    assert H.refute(refuted, 3) is not None
    error, _ = search_stack(refuted, 3, 2, NumpyBackend(), steps=200)
    assert error > 1e-2
