"""docs/rules.md §8.1: relu/gelu-family depth-1 blocks with biases — affine keys, the constant γ,
the width search over them, equality, and the checker's re-derivation of each certificate.

Truth comes from elsewhere than the width search: at the block's own width, with every neuron
alive on its own key, absorbable iff some J has Σ_J d_i u_iᵀ = −S/(2a) (§8.1, brute force over
the 2^m index sets); witnesses are evaluated exactly at random rational points (relu is
rational on Q); equality against permuted / rescaled / perturbed copies."""

from __future__ import annotations

import itertools
import json
import random
from fractions import Fraction

from absorb_formal.checker.dispatch import verify
from absorb_formal.decide import decide
from absorb_formal.language import load_text
from absorb_formal.model.result import PROVED, REFUTED

F = Fraction


def _mat(rows) -> str:
    return "[" + ", ".join("[" + ", ".join(str(x) for x in r) + "]" for r in rows) + "]"


def _vec(v) -> str:
    return "[" + ", ".join(str(x) for x in v) + "]"


def _spec(name, act, up, b, down, c) -> str:
    return (f"block {name} {{ activation {act} dim {len(down)} width {len(up)}\n"
            f"  up = {_mat(up)}\n  up_bias = {_vec(b)}\n  down = {_mat(down)}\n"
            f"  down_bias = {_vec(c)} }}\n")


def _planted(rng: random.Random, plant: bool):
    """d = 2, m = 3: rows 1, 2 = e1, e2 scaled, row 3 generic; J = {1, 2} reaches −I when
    planted (relu: a = 1/2, −S/(2a) = −I); otherwise d_2 is moved off."""
    s1, s2 = rng.choice([1, 2, -3]), rng.choice([1, -1, 3])
    up = [[s1, 0], [0, s2], [rng.randint(1, 4), rng.randint(1, 4)]]
    down = [[F(-1, s1), 0, F(rng.randint(-9, 9), 10)], [0, F(-1, s2), F(rng.randint(-9, 9), 10)]]
    if not plant:
        down[1][1] *= rng.choice([2, F(1, 3), -1])
    b = [rng.randint(-5, 5) for _ in range(3)]
    c = [rng.randint(-3, 3) for _ in range(2)]
    return up, b, down, c


def _brute_force(up, down) -> bool:
    """∃ J: Σ_J d_i u_iᵀ = −I (identity skip, a = 1/2)."""
    for r in range(len(up) + 1):
        for J in itertools.combinations(range(len(up)), r):
            total = [[sum((F(down[p][i]) * up[i][q] for i in J), F(0)) for q in range(2)]
                     for p in range(2)]
            if total == [[-1, 0], [0, -1]]:
                return True
    return False


def _evaluate(up, b, down, c, x, skip=True):
    pre = [sum((F(u) * v for u, v in zip(row, x, strict=True)), F(0)) + bi
           for row, bi in zip(up, b, strict=True)]
    hidden = [max(p, F(0)) for p in pre]
    out = [sum((F(dd) * h for dd, h in zip(row, hidden, strict=True)), F(0)) + ci
           for row, ci in zip(down, c, strict=True)]
    return [o + (xi if skip else 0) for o, xi in zip(out, x, strict=True)]


def _documents(cli, tmp_path, text):
    spec = tmp_path / "s.mlp"
    spec.write_text(text, encoding="utf-8")
    run = cli("--crosscheck", "0", "--certificates", str(tmp_path / "out"), str(spec))
    assert run.code in (0, 1), run.out + run.err  # 1: some claim is refuted
    return [json.loads(p.read_text(encoding="utf-8")) for p in (tmp_path / "out").glob("*.json")]


def test_planted_and_moved_off_biased_relu_blocks(cli, tmp_path):
    rng = random.Random(1)
    seen = {True: 0, False: 0}
    for n in range(12):
        up, b, down, c = _planted(rng, plant=n % 2 == 0)
        truth = _brute_force(up, down)
        seen[truth] += 1
        text = _spec("B", "relu", up, b, down, c) + "claim B is absorbable\n"
        spec = load_text(text, "s.mlp", tmp_path)
        result = decide(spec, spec.statements[0])
        assert result.outcome == (PROVED if truth else REFUTED), (up, b, down)
        if truth:  # the witness is a biased plain block equal to B at random rational points
            layer = result.certificate["layers"][0]
            wu, wd = layer["up"], layer["down"]
            wb, wc = layer["up_bias"], layer["down_bias"]
            for _ in range(20):
                x = [F(rng.randint(-40, 40), rng.randint(1, 7)) for _ in range(2)]
                got = _evaluate([[F(v) for v in r] for r in wu], [F(v) for v in wb],
                                [[F(v) for v in r] for r in wd], [F(v) for v in wc], x,
                                skip=False)
                assert got == _evaluate(up, b, down, c, x)
    assert seen[True] >= 4 and seen[False] >= 4


def test_certificates_of_biased_blocks_are_valid(cli, tmp_path):
    rng = random.Random(2)
    text = ""
    for n in range(4):
        up, b, down, c = _planted(rng, plant=n % 2 == 0)
        text += _spec(f"B{n}", "relu", up, b, down, c)
        text += f"claim B{n} is absorbable\nclaim min width of B{n} is 3\n"
    text += _spec("G", "gelu", [[1, 0], [0, 1], [1, 1]], [F(1, 2), -3, 2],
                  [[-1, 0, F(7, 10)], [0, -1, F(3, 10)]], [0, 1]) + "claim G is absorbable\n"
    docs = _documents(cli, tmp_path, text)
    assert {d["outcome"] for d in docs} == {"proved", "refuted"}
    for doc in docs:
        assert verify(doc).status == "valid", (doc["claim"], verify(doc).reason)


def test_a_tampered_bias_invalidates_the_witness(cli, tmp_path):
    text = _spec("B", "relu", [[1, 0], [0, 1], [1, 1]], [1, -2, 5],
                 [[-1, 0, F(7, 10)], [0, -1, F(3, 10)]], [1, 1]) + "claim B is absorbable\n"
    (doc,) = _documents(cli, tmp_path, text)
    assert verify(doc).status == "valid"
    for field in ("up_bias", "down_bias"):
        bad = json.loads(json.dumps(doc))
        bad["certificate"]["layers"][0][field][0] = "7"
        assert verify(bad).status == "invalid", field
    bad = json.loads(json.dumps(doc))
    del bad["certificate"]["layers"][0]["up_bias"]  # a bias-free witness for a biased block
    assert verify(bad).status == "invalid"


def test_equality_on_permuted_rescaled_and_perturbed_copies(cli, tmp_path):
    rng = random.Random(3)
    seen = {True: 0, False: 0}
    for act in ("relu", "gelu", "leaky_relu(1/5)"):
        for n in range(4):
            up, b, down, c = _planted(rng, plant=True)
            order = list(range(3))
            rng.shuffle(order)
            scale = [F(rng.choice([1, 2, 3])) if act != "gelu" else F(1) for _ in range(3)]
            up2 = [[scale[i] * v for v in up[i]] for i in order]
            b2 = [scale[i] * b[i] for i in order]
            down2 = [[row[i] / scale[i] for i in order] for row in down]
            c2 = list(c)
            equal = n % 2 == 0
            if not equal:
                b2[0] += 1  # the same direction, another offset: another key
            text = (_spec("A", act, up, b, down, c) + _spec("B", act, up2, b2, down2, c2)
                    + "claim A equals B\n")
            spec = load_text(text, "s.mlp", tmp_path)
            result = decide(spec, spec.statements[0])
            assert result.outcome == (PROVED if equal else REFUTED), (act, n)
            seen[equal] += 1
    assert seen[True] and seen[False]
    bias_free = ("block R { activation relu dim 2 width 3 up = [[1, 0], [0, 1], [1, 1]]\n"
                 "  down = [[-1, 0, 7/10], [0, -1, 3/10]] }\n")
    text = (bias_free + _spec("Z", "relu", [[2, 0], [0, 1], [1, 1]], [0, 0, 0],
                              [[F(-1, 2), 0, F(7, 10)], [0, -1, F(3, 10)]], [0, 0])
            + _spec("C", "relu", [[1, 0], [0, 1], [1, 1]], [0, 0, 0],
                    [[-1, 0, F(7, 10)], [0, -1, F(3, 10)]], [0, 1])
            + "claim R equals Z\nclaim R equals C\n")
    docs = _documents(cli, tmp_path, text)
    outcomes = {d["claim"]["other"]: d["outcome"] for d in docs}
    assert outcomes == {"Z": "proved", "C": "refuted"}
    for doc in docs:
        assert verify(doc).status == "valid"


def test_relu_in_d1_with_distinct_kinks_is_not_absorbable_at_width_2(tmp_path):
    text = _spec("D", "relu", [[1], [1]], [0, 1], [[1, 1]], [0]) + \
        "claim D is absorbable at width 2\nclaim min width of D is 3\n"
    spec = load_text(text.replace("dim 1", "dim 1"), "s.mlp", tmp_path)
    assert [decide(spec, s).outcome for s in spec.statements] == [REFUTED, PROVED]


def test_a_non_rational_constant_neuron_leaves_the_keys_to_decide(tmp_path):
    """silu(3) is irrational, but a constant neuron only enters the constant, free through
    the output bias (§8.1): x₂ needs a spare pair, so width 2 is refuted and width 3 proved,
    the exact witness's output bias holding silu(3) symbolically; S equals itself."""
    text = _spec("S", "silu", [[0, 0], [1, 0]], [3, 0], [[1, -1], [0, 0]], [0, 0])
    spec = load_text(text + "claim S is absorbable\nclaim S is absorbable at width 3\n"
                     "claim S equals S\n", "s.mlp", tmp_path)
    results = [decide(spec, s) for s in spec.statements]
    assert [r.outcome for r in results] == ["refuted", "proved", "proved"]
    [layer] = results[1].certificate["layers"]
    assert layer["down_bias"] == ["silu(3)", "0"] and len(layer["up"]) == 3
