"""Biased blocks decided without search (docs/rules.md §8, §8.4): plain blocks
absorb themselves, linear blocks are Λx + γ, stacks of absorbable layers are absorbable, a
block absorbable at its own width is absorbable wider, and a query's decision at its width
follows from a proved min width. Verdicts are compared with an independent computation
(numpy ranks, exact evaluation at random points) and every certificate with the checker."""

from __future__ import annotations

import copy
import json
import random
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from absorb_formal.certify import documents as proofs
from absorb_formal.checker.dispatch import verify
from absorb_formal.checker.kernel.contract import Check
from absorb_formal.decide import decide
from absorb_formal.language.load import load_file
from absorb_formal.model.blocks import Block, Skip
from absorb_formal.model.result import DECIDED, PROVED, REFUTED

F = Fraction


def _vector(values) -> str:
    return "[" + ", ".join(str(F(v)) for v in values) + "]"


def _matrix(rows) -> str:
    return "[" + ", ".join(_vector(r) for r in rows) + "]"


def _layer(rng: random.Random, d: int, m: int) -> dict[str, list]:
    return {"up": [[rng.randint(-2, 2) for _ in range(d)] for _ in range(m)],
            "up_bias": [rng.randint(-3, 3) for _ in range(m)],
            "down": [[rng.randint(-2, 2) for _ in range(m)] for _ in range(d)],
            "down_bias": [rng.randint(-3, 3) for _ in range(d)]}


def _block_text(name: str, act: str, d: int, m: int, skip: str, layers: list[dict]) -> str:
    body = [f"block {name} {{ activation {act} dim {d} width {m} depth {len(layers)} "
            f"skip {skip} bias"]
    for n, layer in enumerate(layers, start=1):
        fields = " ".join(f"{k} = {_matrix(v) if isinstance(v[0], list) else _vector(v)}"
                          for k, v in layer.items())
        body.append(f"  layer {n} {{ {fields} }}" if len(layers) > 1 else f"  {fields}")
    return "\n".join(body) + "\n}\n"


def _decide(folder: Path, text: str):
    """Each statement's result and, for claims, its document as the checker reads it."""
    spec_file = folder / "s.mlp"
    spec_file.write_text(text, encoding="utf-8")
    spec = load_file(spec_file)
    out = []
    for statement in spec.statements:
        result = decide(spec, statement)
        doc = None
        if result.outcome in (PROVED, REFUTED):
            doc = proofs.document(spec, statement, result, spec_file, folder / "c" / "x.json")
        out.append((spec, statement, result, doc))
    return out


def _plain(block: Block, layers) -> Block:
    return Block("P", block.activation, block.dim, layers[0].up.shape[0], block.depth,
                 Skip(block.dim, scale=F(0)), tuple(layers), block.pos, biased=True)


def _agrees(block: Block, layers, rng: random.Random) -> bool:
    plain = _plain(block, layers)
    points = [tuple(F(rng.randint(-30, 30), rng.randint(1, 5)) for _ in range(block.dim))
              for _ in range(20)]
    return all(plain.evaluate_exact(p) == block.evaluate_exact(p) for p in points)


@pytest.mark.parametrize("seed", range(12))
def test_biased_linear_blocks_follow_the_rank_of_their_linear_map(tmp_path, seed):
    """leaky_relu(1) with biases: absorbable at w iff rank(S + DU) <= w (numpy's rank), the
    witness computes the block exactly, and the checker accepts every certificate."""
    rng = random.Random(seed)
    d, m = rng.randint(1, 3), rng.randint(1, 3)
    layer = _layer(rng, d, m)
    rank = int(np.linalg.matrix_rank(np.eye(d) + np.array(layer["down"]) @ np.array(
        layer["up"])))
    widths = sorted({1, max(1, rank - 1), max(1, rank), m})
    text = _block_text("L", "leaky_relu(1)", d, m, "identity", [layer])
    text += "".join(f"claim L is absorbable at width {w}\n" for w in widths)
    text += f"claim min width of L is {max(1, rank)}\n"
    found = _decide(tmp_path, text)
    for (spec, statement, result, doc), w in zip(found, widths + [None], strict=True):
        assert doc is not None and verify(doc).status == "valid", (statement, verify(doc))
        if w is None:
            assert result.outcome == PROVED
            continue
        assert result.outcome == (PROVED if rank <= w else REFUTED), (w, rank)
        if result.outcome == PROVED:
            from absorb_formal.decide import concrete
            decision = concrete.at_width(spec.blocks["L"], w)
            assert _agrees(spec.blocks["L"], decision.witness, rng)


@pytest.mark.parametrize("act", ["sigmoid", "tanh", "relu^3", "swiglu", "gelu"])
def test_plain_biased_blocks_absorb_themselves_and_the_checker_compares_biases(tmp_path, act):
    rng = random.Random(act)
    layer = _layer(rng, 2, 2)
    if act == "swiglu":
        layer["gate"], layer["gate_bias"] = [[1, 2], [0, 1]], [1, -1]
    text = _block_text("P", act, 2, 2, "none", [layer]) + "claim P is absorbable at width 3\n"
    [(spec, _, result, doc)] = _decide(tmp_path, text)
    assert result.outcome == PROVED and verify(doc).status == "valid"
    for name in ("up_bias", "down_bias"):  # a witness with other biases is another block
        forged = json.loads(proofs.encode(doc).decode())
        forged["certificate"]["layers"][0][name][0] = str(F(forged["certificate"]["layers"][0]
                                                            [name][0]) + 1)
        assert verify(forged).status == "invalid", name


@pytest.mark.parametrize("seed", range(8))
def test_biased_stacks_of_flipped_layers_are_absorbable_and_checked(tmp_path, seed):
    """Each relu layer W_down = −W_up⁻¹ (J = every neuron, a = 1/2) with random biases: the
    stack is absorbable (§8.4), its witness agrees with the block at random points, and the
    checker accepts it; a stack with one layer's down doubled is not decided."""
    rng = random.Random(seed)
    layers = []
    for _ in range(rng.randint(2, 3)):
        layer = _layer(rng, 2, 2)
        a, b = rng.choice([(1, 0), (2, 1), (1, 1)]), rng.choice([(0, 1), (1, 2), (-1, 1)])
        up = [list(a), list(b)]
        det = F(up[0][0] * up[1][1] - up[0][1] * up[1][0])
        if det == 0:
            up = [[1, 0], [0, 1]]
            det = F(1)
        inverse = [[F(up[1][1]) / det, -F(up[0][1]) / det], [-F(up[1][0]) / det,
                                                              F(up[0][0]) / det]]
        layer["up"], layer["down"] = up, [[-x for x in row] for row in inverse]
        layers.append(layer)
    text = _block_text("S", "relu", 2, 2, "identity", layers) + "claim S is absorbable\n"
    [(spec, _, result, doc)] = _decide(tmp_path, text)
    assert result.outcome == PROVED and verify(doc).status == "valid"
    from absorb_formal.decide import concrete
    decision = concrete.at_width(spec.blocks["S"], 2)
    assert _agrees(spec.blocks["S"], decision.witness, rng)
    layers[0]["down"] = [[2 * x for x in row] for row in layers[0]["down"]]
    text = _block_text("S", "relu", 2, 2, "identity", layers) + "claim S is absorbable\n"
    [(_, _, result, _)] = _decide(tmp_path, text)
    assert result.outcome not in (PROVED, REFUTED)


def test_a_query_decides_its_width_from_a_proved_min_width(tmp_path):
    """The decision at the block's width follows from the min width."""
    text = ("block Q { activation square dim 2 width 4 bias up = [[1,0],[0,1],[1,1],[1,-1]]\n"
            " up_bias = [1,2,0,0] down = [[1,0,0,0],[0,1,0,0]] }\nquery Q\n")
    [(_, _, result, _)] = _decide(tmp_path, text)
    assert result.outcome == DECIDED and result.min_width is not None
    assert result.extra["decision"] == {"width": 4, "absorbable": result.min_width <= 4}
    assert result.verdict.startswith("absorbable at width 4")


def test_absorbable_at_its_own_width_is_absorbable_wider(tmp_path):
    """The generic engine decides width 2 only; width 5 follows."""
    text = ("block Q { activation square dim 2 width 2 bias up = [[1,0],[0,1]] up_bias = [1,2]\n"
            " down = [[1,0],[0,1]] }\nclaim Q is absorbable at width 5\n"
            "claim Q is absorbable\n")
    (_, _, wide, doc), (_, _, own, _) = _decide(tmp_path, text)
    assert own.outcome == PROVED and wide.outcome == PROVED
    assert verify(doc).status == "valid"


@pytest.mark.parametrize("coeffs", [(0, 0, 1), (1, -2, 1), (3, 2, -1), (0, -2, 1), (2, 5, 3)])
@pytest.mark.parametrize("skip", ["identity", "[[1, 2], [2, 4]]", "[[0, 1], [-1, 3]]"])
def test_degree_two_polynomials_need_pairs_not_quadruples(tmp_path, coeffs, skip):
    """σ of degree 2 with biases: absorbable at m + 2·rank S by the square pairs; the plain
    block they describe equals the block exactly at random rational points (t = −1 when
    4c2 + 2c1 = 0, e.g. poly[0, -2, 1]), and the checker accepts the certificate."""
    from absorb_formal.decide import large

    rng = random.Random(f"{coeffs}{skip}")
    layer = _layer(rng, 2, 3)
    act = f"poly[{', '.join(map(str, coeffs))}]"
    rank = int(np.linalg.matrix_rank(np.eye(2) if skip == "identity" else np.array(
        eval(skip))))  # noqa: S307 - a literal of this test
    width = 3 + 2 * rank
    text = _block_text("P", act, 2, 3, skip, [layer])
    text += f"claim P is absorbable at width {width}\n"
    [(spec, _, result, doc)] = _decide(tmp_path, text)
    assert result.outcome == PROVED and doc["certificate"]["check"] == Check.SQUARE_PAIRS
    assert verify(doc).status == "valid"
    block = spec.blocks["P"]
    assert _agrees(block, [large.witness_layer(block)], rng)
    assert large.witness_layer(block).up.shape[0] == width


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("act", ["silu", "gelu"])
def test_constant_neurons_with_irrational_sigma_change_no_width_verdict(tmp_path, seed, act):
    """A neuron with u = 0 and β ≠ 0 adds d·σ(β), a constant (irrational for
    silu, gelu), which the output bias absorbs (docs/rules.md §8.1). So the verdict at each width
    equals the verdict of the same block with that neuron's constant moved out (d = 0) —
    decided the old way, without any formal constant — wherever both are decided; and the
    checker accepts every certificate."""
    rng = random.Random(seed)
    layer = _layer(rng, 2, 3)
    layer["up"][1] = [0, 0]
    layer["up_bias"][1] = rng.choice([1, -1, 2, F(1, 2)])
    layer["down"][0][1], layer["down"][1][1] = rng.choice([1, -2]), rng.choice([0, 3])
    without = copy.deepcopy(layer)
    without["down"][0][1] = without["down"][1][1] = 0
    claims = "".join(f"claim B is absorbable at width {w}\n" for w in range(1, 8))
    results = []
    for body in (layer, without):
        found = _decide(tmp_path, _block_text("B", act, 2, 3, "identity", [body]) + claims)
        results.append([r.outcome for _, _, r, _ in found])
        for _, statement, _, doc in found:
            if doc is not None:
                assert verify(doc).status == "valid", (statement, verify(doc))
    for w, (mine, theirs) in enumerate(zip(*results, strict=True), start=1):
        if PROVED in (mine, theirs) and REFUTED in (mine, theirs):
            raise AssertionError(f"width {w}: {mine} with the constant neuron, {theirs} without")
    # decided the same at every width: the exact witness's output bias holds d·σ(β)
    # symbolically (docs/rules.md §8.1), so the constant costs no neuron
    assert results[0] == results[1]


def _equality_refutation(tmp_path, text):
    """A document refuting `claim A equals B` with the checker's own forms of A and B."""
    from absorb_formal.checker.kernel import linalg as exact
    from absorb_formal.checker.rules import canonical as forms
    from absorb_formal.model.result import Result

    spec_file = tmp_path / "s.mlp"
    spec_file.write_text(text, encoding="utf-8")
    spec = load_file(spec_file)
    doc = proofs.document(spec, spec.statements[0], Result(REFUTED, "different",
                                                           "§4 canonical forms"),
                          spec_file, tmp_path / "c" / "x.json")
    family = ("analytic", F(1, 2), None)
    sides = []
    for name in ("A", "B"):
        block = doc["blocks"][name]
        form = forms.form(family, 1, exact.skip_rows(block), block["layers"][0], True,
                          block["activation"])
        sides.append(forms.as_json(family, *form))
    assert sides[0] != sides[1]  # the formal constants differ
    doc["certificate"] = {"kind": "canonical forms", "equal": False, "left": sides[0],
                          "right": sides[1]}
    return spec, doc


def test_equality_is_refuted_on_constants_only_when_an_enclosure_separates_them(tmp_path):
    """silu(1) ≈ 0.731 and silu(2) ≈ 1.762: forms that differ only in those constants are
    different functions, which an arb enclosure of silu(1) − silu(2) proves (prover and
    checker alike)."""
    text = ("block A { activation silu dim 1 width 2 bias up = [[1], [0]] up_bias = [0, 1]"
            " down = [[1, 1]] }\n"
            "block B { activation silu dim 1 width 2 bias up = [[1], [0]] up_bias = [0, 2]"
            " down = [[1, 1]] }\nclaim A equals B\n")
    spec, doc = _equality_refutation(tmp_path, text)
    assert verify(doc).status == "valid"
    assert decide(spec, spec.statements[0]).outcome == REFUTED
    # without a separating enclosure (as for numbers that might be equal), no refutation
    from absorb_formal.checker.kernel import symbolic
    from absorb_formal.checker.lemmas import values

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(values, "sign", lambda value: None if symbolic.as_rational(value)
                      is None else 0)
        verdict = verify(doc)
    assert verdict.status == "invalid" and "not proved different" in verdict.reason


def test_the_checker_does_not_refute_equality_on_reflected_constants(tmp_path):
    """silu(−1) = silu(1) − 1 (σ(z) − σ(−z) = z, re-proved by the checker): the constant
    neuron σ(−1) and the constant σ(1) − 1 are one form, so the blocks are equal and a
    refutation is invalid."""
    text = ("block A { activation silu dim 1 width 2 bias up = [[1], [0]] up_bias = [0, -1]"
            " down = [[1, 1]] }\n"
            "block B { activation silu dim 1 width 3 bias up = [[1], [0], [0]]"
            " up_bias = [0, 1, 2] down = [[1, 1, 0]] down_bias = [-1] }\nclaim A equals B\n")
    spec_file = tmp_path / "s.mlp"
    spec_file.write_text(text, encoding="utf-8")
    spec = load_file(spec_file)
    result = decide(spec, spec.statements[0])
    assert result.outcome == PROVED
    doc = proofs.document(spec, spec.statements[0], result, spec_file, tmp_path / "c" / "x.json")
    assert verify(doc).status == "valid"
    doc["outcome"], doc["certificate"]["equal"] = REFUTED, False
    assert verify(doc).status == "invalid"
