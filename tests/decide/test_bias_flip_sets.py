"""docs/rules.md §8.2 flip sets: biased depth-1 relu², swiglu / reglu and glu at their own width.

Random blocks with a planted index set J (and the same blocks with S moved off) are decided
and compared with a brute force over every J ⊆ {1..m} that expands Σ_J (flip change) + S x
with sympy and asks for a constant: independent of decide/subset.py and of the checker's
stacked system. Witnesses are evaluated exactly at random rational points (relu², reglu), and
every certificate goes through the checker, which must also reject tampered ones."""

from __future__ import annotations

import copy
import itertools
import random
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest
import sympy as sp

from absorb_formal.certify import documents as proofs
from absorb_formal.checker.dispatch import verify
from absorb_formal.decide import concrete, decide
from absorb_formal.decide.decision import Decision
from absorb_formal.language.load import load_file
from absorb_formal.model.blocks import Skip
from absorb_formal.model.result import PROVED, REFUTED, UNKNOWN

F = Fraction
SLOPE = {"relu^2": F(1), "swiglu": F(1, 2), "reglu": F(1, 2), "glu": F(1, 2)}


def _q(rng: random.Random, nonzero: bool = False) -> Fraction:
    while True:
        v = F(rng.randint(-3, 3), rng.choice((1, 2)))
        if v or not nonzero:
            return v


def _vec(rng: random.Random, d: int) -> list[Fraction]:
    while True:
        v = [_q(rng) for _ in range(d)]
        if any(v):
            return v


def _neuron(rng, d, act):
    n = {"u": _vec(rng, d), "b": _q(rng), "d": _vec(rng, d)}
    if act != "relu^2":
        n["g"], n["c"] = _vec(rng, d), _q(rng)
    return n


def _planted(rng: random.Random, act: str, d: int, pairs: int, extra: int):
    """Neurons and S such that J = the planted neurons solves §8.2's condition: relu² and
    gated O(a)+N use pairs whose quadratic parts cancel (same u (and g), opposite d)."""
    neurons, skip = [], [[F(0)] * d for _ in range(d)]
    for _ in range(pairs):
        a = _neuron(rng, d, act)
        if act == "glu":
            planted = [a]
            lin = [(a["d"], a["u"], 2 * SLOPE[act])]
        else:
            b = dict(a, d=[-x for x in a["d"]], b=a["b"] + _q(rng, nonzero=True))
            if act == "relu^2":
                lin = [(n["d"], n["u"], 2 * n["b"]) for n in (a, b)]
            else:
                b["c"] = a["c"] + _q(rng, nonzero=True)
                lin = [(n["d"], [n["c"] * x + n["b"] * y
                                 for x, y in zip(n["u"], n["g"], strict=True)],
                        2 * SLOPE[act]) for n in (a, b)]
            planted = [a, b]
        neurons += planted
        for dv, w, scale in lin:
            for r in range(d):
                for s in range(d):
                    skip[r][s] -= scale * dv[r] * w[s]
    neurons += [_neuron(rng, d, act) for _ in range(extra)]
    rng.shuffle(neurons)
    return neurons, skip


def _key(v, scaled):
    lead = next(x for x in v if x)
    return tuple(x / lead for x in v) if scaled else (v if lead > 0 else [-x for x in v])


def _generic(neurons, act) -> bool:
    """Every neuron alive and alone on its key, by the test's own reading of §8.2."""
    keys = set()
    for n in neurons:
        if act == "relu^2":
            key = _key(n["u"] + [n["b"]], True)
        else:
            if not any(n["u"]) and n["b"] == 0:
                return False
            key = _key(n["g"] + [n["c"]], act in ("reglu",))
        if tuple(key) in keys:
            return False
        keys.add(tuple(key))
    return True


def _truth(neurons, skip, act) -> bool:
    """Brute force: some J makes Σ_J change_i(x) + S x constant (as polynomials in x)."""
    d = len(skip)
    xs = sp.symbols(f"x0:{d}")
    rat = sp.Rational

    def affine(v, b):
        return sum(rat(str(c)) * x for c, x in zip(v, xs, strict=True)) + rat(str(b))

    slope = rat(str(SLOPE[act]))
    changes = []
    for n in neurons:
        w = affine(n["u"], n["b"])
        if act == "relu^2":
            scalar = w**2
        elif act == "glu":
            scalar = 2 * slope * w
        else:
            scalar = 2 * slope * affine(n["g"], n["c"]) * w
        changes.append([rat(str(dr)) * scalar for dr in n["d"]])
    linear = [sum(rat(str(skip[r][s])) * xs[s] for s in range(d)) for r in range(d)]
    for size in range(len(neurons) + 1):
        for chosen in itertools.combinations(range(len(neurons)), size):
            total = [sp.expand(linear[r] + sum(changes[i][r] for i in chosen))
                     for r in range(d)]
            if all(not sp.Poly(t, *xs).as_expr().free_symbols for t in total):
                return True
    return False


def _text(name, act, neurons, skip) -> str:
    def m(rows):
        return "[" + ", ".join("[" + ", ".join(str(x) for x in r) + "]" for r in rows) + "]"

    def v(items):
        return "[" + ", ".join(str(x) for x in items) + "]"

    d = len(skip)
    lines = [f"block {name} {{", f"  activation {act}", f"  dim {d} width {len(neurons)}",
             "  bias", f"  skip {m(skip)}", f"  up = {m([n['u'] for n in neurons])}",
             f"  up_bias = {v([n['b'] for n in neurons])}",
             f"  down = {m([[n['d'][r] for n in neurons] for r in range(d)])}",
             "  down_bias = " + v([F(r + 1, 3) for r in range(d)])]
    if act != "relu^2":
        lines += [f"  gate = {m([n['g'] for n in neurons])}",
                  f"  gate_bias = {v([n['c'] for n in neurons])}"]
    return "\n".join(lines + ["}", f"claim {name} is absorbable", ""])


def _cases(act: str, count: int, seed: int):
    """(neurons, skip) pairs: planted, and the same with one entry of S moved off."""
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        d = rng.choice((1, 2))
        pairs = rng.randint(1, 2 if act == "glu" else 1)
        neurons, skip = _planted(rng, act, d, pairs, rng.randint(0, 2))
        if not _generic(neurons, act) or len(neurons) > 5:
            continue
        moved = [row[:] for row in skip]
        moved[rng.randrange(d)][rng.randrange(d)] += _q(rng, nonzero=True)
        out += [(neurons, skip), (neurons, moved)]
    return out


ACTS = ("relu^2", "swiglu", "reglu", "glu")


def _spec(tmp_path: Path, act: str, neurons, skip):
    path = tmp_path / "s.mlp"
    path.write_text(_text("B", act, neurons, skip), encoding="utf-8")
    spec = load_file(path)
    return spec, path


def check_prover(tmp_path: Path, decider) -> dict[bool, int]:
    """decider(block, size) -> Decision must match the brute force on every case."""
    seen = {True: 0, False: 0}
    for n, act in enumerate(ACTS):
        for neurons, skip in _cases(act, 6, seed=100 + n):
            spec, _ = _spec(tmp_path, act, neurons, skip)
            block = spec.blocks["B"]
            want = _truth(neurons, skip, act)
            got = decider(block, block.width).absorbable
            assert got is want, (act, neurons, skip)
            seen[want] += 1
    return seen


def test_flip_sets_match_the_brute_force_over_index_sets(tmp_path):
    seen = check_prover(tmp_path, concrete.at_width)
    assert seen[True] >= 12 and seen[False] >= 8, seen  # both answers, often


def test_a_prover_that_always_says_no_fails(tmp_path):
    with pytest.raises(AssertionError):
        check_prover(tmp_path, lambda block, size: Decision(False))


def _points(rng, d):
    return [[F(rng.randint(-9, 9), rng.randint(1, 5)) for _ in range(d)] for _ in range(20)]


@pytest.mark.parametrize("act", ["relu^2", "reglu"])
def test_witnesses_equal_the_block_at_rational_points(tmp_path, act):
    rng = random.Random(7)
    for neurons, skip in _cases(act, 4, seed=200)[::2]:  # the planted ones: absorbable
        spec, _ = _spec(tmp_path, act, neurons, skip)
        block = spec.blocks["B"]
        found = concrete.at_width(block, block.width)
        assert found.absorbable is True and found.witness is not None
        plain = replace(block, skip=Skip(block.dim, scale=F(0)), layers=found.witness)
        for x in _points(rng, block.dim):
            assert plain.evaluate_exact(x) == block.evaluate_exact(x)


def _document(tmp_path: Path, act: str, neurons, skip):
    spec, path = _spec(tmp_path, act, neurons, skip)
    claim = spec.statements[0]
    result = decide(spec, claim)
    return result, proofs.document(spec, claim, result, path, tmp_path / "c.json")


@pytest.mark.parametrize("act", ACTS)
def test_the_checker_accepts_flip_certificates_and_rejects_tampering(tmp_path, act):
    outcomes = set()
    for neurons, skip in _cases(act, 3, seed=300):
        assert len(neurons) >= 2
        result, doc = _document(tmp_path, act, neurons, skip)
        assert result.outcome in (PROVED, REFUTED), result.reason
        outcomes.add(result.outcome)
        assert verify(doc).status == "valid", verify(doc).reason
        cert = doc["certificate"]
        broken = copy.deepcopy(doc)
        if result.outcome == PROVED:
            layer = broken["certificate"]["layers"][0]
            layer["down_bias"][0] = str(F(layer["down_bias"][0]) + 1)  # c′ off by one
        else:  # neuron 2 moved onto neuron 1's key: §8.2's only-if no longer holds
            layer = broken["blocks"]["B"]["layers"][0]
            for name in ("gate", "gate_bias") if "gate" in layer else ("up", "up_bias"):
                layer[name][1] = layer[name][0]
            assert "shares its key" in verify(broken).reason
            if cert["kind"] == "separating functional":
                wrong = copy.deepcopy(doc)
                wrong["certificate"]["Y_dot_target"] = "12345"
                assert verify(wrong).status == "invalid"
        assert verify(broken).status == "invalid"
        other = copy.deepcopy(doc)
        other["certificate"]["value"] = "3"  # a constant the checker does not re-derive
        assert verify(other).status == "invalid"
    assert PROVED in outcomes


def test_without_biases_no_flip_set_exists(tmp_path):
    """β = γ = 0: every relu² or gated condition is refuted when S ≠ 0 (T1, T4 recovered)."""
    for n, act in enumerate(("relu^2", "swiglu", "reglu")):
        rng = random.Random(400 + n)
        for _ in range(4):
            neurons = [dict(_neuron(rng, 2, act), b=F(0), c=F(0)) for _ in range(2)]
            if not _generic(neurons, act):
                continue
            spec, _ = _spec(tmp_path, act, neurons, [[F(1), F(0)], [F(0), F(1)]])
            block = spec.blocks["B"]
            assert concrete.at_width(block, block.width).absorbable is False


def test_shared_keys_dead_neurons_and_other_widths_stay_unknown(tmp_path):
    neurons = [{"u": [F(1)], "b": F(1), "d": [F(-1, 4)]},
               {"u": [F(2)], "b": F(2), "d": [F(1, 4)]}]  # one key x + 1, up to a factor
    spec, _ = _spec(tmp_path, "relu^2", neurons, [[F(1)]])
    block = spec.blocks["B"]
    assert concrete.at_width(block, 2).absorbable is None
    r2 = [{"u": [F(1)], "b": F(1), "d": [F(-1, 4)]}, {"u": [F(1)], "b": F(-1), "d": [F(1, 4)]}]
    spec, _ = _spec(tmp_path, "relu^2", r2, [[F(1)]])
    block = spec.blocks["B"]
    below = concrete.at_width(block, 1)  # below the own width: the key count (two keys)
    assert below.absorbable is False and below.method == "§8.2 key count", below
    assert concrete.at_width(block, 3).absorbable is True  # a width-2 witness fits in 3
    stack = replace(block, depth=2, layers=block.layers * 2)  # each layer absorbable at 2 alone
    assert concrete.at_width(stack, 2).absorbable is True  # so the stack (per-layer certificates)
    assert concrete.at_width(stack, 1).absorbable is None
    assert decide(spec, spec.statements[0]).outcome == PROVED
    dead = [dict(r2[0]), dict(r2[1], d=[F(0)])]
    spec, _ = _spec(tmp_path, "relu^2", dead, [[F(1)]])
    assert decide(spec, spec.statements[0]).outcome == UNKNOWN
