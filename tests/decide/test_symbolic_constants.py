"""Exact symbolic constants σ(β) (docs/rules.md §8 "Symbolic constants",
docs/certificates.md "Symbolic values").

Truth comes from mpmath at 60 digits, independently of the prover's arithmetic and of the
checker's arb enclosures: σ values, the witnesses' functions at random points, correct
rounding. Each certificate goes through the checker, and each new field (a symbolic output
bias, sigma_gamma, the min-width parts) is forged: the checker must say invalid."""

from __future__ import annotations

import copy
import random
import re
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

from absorb_formal.checker.dispatch import verify
from absorb_formal.checker.kernel import symbolic as checked
from absorb_formal.checker.lemmas import values as checked_values
from absorb_formal.language.load import load_file
from absorb_formal.model import symbolic
from absorb_formal.model.result import DECIDED, PROVED, REFUTED
from absorb_formal.numeric.floatblock import symbolic_float

from .test_biased_blocks_decided_without_search import _decide as decide_all

F = Fraction
mpmath.mp.dps = 60

SIGMA = {"silu": lambda z: z / (1 + mpmath.exp(-z)),
         "sigmoid": lambda z: 1 / (1 + mpmath.exp(-z)),
         "tanh": mpmath.tanh,
         "gelu": lambda z: z / 2 * (1 + mpmath.erf(z / mpmath.sqrt(2))),
         "gelu_tanh": lambda z: z / 2 * (1 + mpmath.tanh(mpmath.sqrt(2 / mpmath.pi)
                                                         * (z + mpmath.mpf(44715) / 10**6
                                                            * z**3)))}


def mp(value: Fraction) -> mpmath.mpf:
    return mpmath.mpf(value.numerator) / value.denominator


def mp_text(text: str) -> mpmath.mpf:
    """A certificate value's real number, read here with a regex of its own."""
    total = mpmath.mpf(0)
    for sign, term in re.findall(r"(^-?|[+-] )([^ ]+)", text):
        value = mpmath.mpf(1)
        for part in term.split("*"):
            atom = re.fullmatch(r"([a-z_]+)\((-?[\d/]+)\)(?:\^(-?\d+))?", part)
            if atom:
                value *= SIGMA[atom.group(1)](mp(F(atom.group(2)))) ** int(atom.group(3) or 1)
            else:
                value *= mp(F(part))
        total += -value if sign.strip() == "-" else value
    return total


# ---- the value type and its two readings ---------------------------------------------------

def _random_value(rng: random.Random) -> symbolic.Number:
    value: symbolic.Number = F(rng.randint(-5, 5), rng.randint(1, 4))
    for _ in range(rng.randint(1, 3)):
        kind, point = rng.choice(symbolic.KINDS), F(rng.choice([-3, -1, 1, 2]),
                                                    rng.choice([1, 2, 3]))
        atom = symbolic.atom(kind, point)  # a sum at a negative point (reflection)
        factor = atom if rng.random() < .7 else symbolic.inverse(symbolic.atom(kind,
                                                                               abs(point)))
        value = value + F(rng.randint(-4, 4), rng.randint(1, 3)) * factor * (
            atom if rng.random() < .2 else 1)
    return value


@pytest.mark.parametrize("seed", range(40))
def test_values_print_parse_and_round_like_mpmath(seed):
    rng = random.Random(seed)
    value = _random_value(rng)
    text = symbolic.text(value)
    exact = mp_text(text)
    assert float(value) == float(exact)  # correctly rounded (60 digits decide it here)
    assert abs(symbolic_float(text) - float(exact)) <= 1e-12 * max(1, abs(float(exact)))
    parsed = checked.parse(text)
    assert checked.text(parsed) == text  # the checker reads what the prover wrote
    for ball in (checked_values.enclosure(parsed, 128), symbolic.enclosure(value, 128)):
        # the ball holds the 60-digit value, and is narrow (about 2^-128 relative)
        mid, rad = (mpmath.ldexp(int(m), int(e)) for m, e in (ball.mid().man_exp(),
                                                                ball.rad().man_exp()))
        assert abs(exact - mid) <= rad + mpmath.mpf(10) ** -55
        assert rad < mpmath.mpf(10) ** -30 * max(1, abs(exact))
    if abs(exact) > mpmath.mpf(10) ** -40:
        assert checked_values.sign(parsed) == symbolic.sign(value) == (1 if exact > 0 else -1)


def test_the_arithmetic_is_exact():
    a, b = symbolic.atom("silu", F(1)), symbolic.atom("gelu", F(-1, 2))
    assert a * symbolic.inverse(a) == 1 and isinstance(a - a, Fraction)
    assert (3 * a + b) - b == 3 * a and F(1, 2) * (2 * a) == a
    assert symbolic.text(F(3, 2) / a) == "3/2*silu(1)^-1"
    assert symbolic.text(1 - 2 * a + b) == "1/2 + gelu(1/2) - 2*silu(1)"  # gelu(−z) = gelu(z) − z
    assert symbolic.atom("silu", F(0)) == 0 and symbolic.atom("sigmoid", F(0)) == F(1, 2)
    assert symbolic.atom("silu", F(-1)) - a == -1 and symbolic.atom("tanh", F(-2)) == -1 * (
        symbolic.atom("tanh", F(2))) and symbolic.atom("sigmoid", F(-1, 3)) == 1 - (
        symbolic.atom("sigmoid", F(1, 3)))
    with pytest.raises(ValueError):
        symbolic.inverse(1 + a)  # a sum has no inverse in the ring


def test_the_reflections_are_the_checkers():
    """The prover's table σ(p) = c + s·p + t·σ(−p) is the one the checker proves."""
    from absorb_formal.checker.lemmas import relied as lemmas

    for kind in symbolic.KINDS:
        assert lemmas.reflection(kind) == symbolic.REFLECTION[kind]
        for p in (F(1), F(3, 2)):
            reflected = mp_text(symbolic.text(symbolic.atom(kind, -p)))
            assert abs(reflected - SIGMA[kind](-mp(p))) < 1e-50


def test_a_formally_nonzero_value_that_is_zero_has_no_sign():
    """sigmoid(2) = s²/(s² + (1 − s)²) for s = sigmoid(1) (e² = e·e): the Laurent polynomial
    sigmoid(2)·(1 − 2s + 2s²) − s² is formally non-zero and numerically 0."""
    s, s2 = symbolic.atom("sigmoid", F(1)), symbolic.atom("sigmoid", F(2))
    zero = s2 * (1 - 2 * s + 2 * s * s) - s * s
    assert isinstance(zero, symbolic.Symbolic)
    assert abs(mp_text(symbolic.text(zero))) < mpmath.mpf(10) ** -50
    with pytest.raises(ArithmeticError):
        symbolic.sign(zero)
    assert checked_values.sign(checked.parse(symbolic.text(zero))) is None
    assert not symbolic.nonzero(zero)


@pytest.mark.parametrize("text", ["silu(0)", "relu(1)", "silu(1)^0", "0*silu(1)", "silu(1",
                                  "silu(-1)", "3*gelu(-1/2)",
                                  "2 * silu(1)", "silu(1)+1", "--silu(1)", "", "silu(1/0)",
                                  "silu(1)^99", "1 + ", "sigma(1)", "silu(x)"])
def test_the_checker_refuses_malformed_values(text):
    with pytest.raises((checked.Invalid, ValueError, ZeroDivisionError)):
        checked.parse(text)


# ---- blocks --------------------------------------------------------------------------------

def _decide(folder: Path, text: str):
    """(spec, [(result, document or None) per statement])."""
    found = decide_all(folder, text)
    return found[0][0], [(result, doc) for _, _, result, doc in found]


def _forged(doc, path, value):
    forged = copy.deepcopy(doc)
    node = forged["certificate"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return forged


def _mutations(text: str) -> list[str]:
    """Values near a symbolic one: another coefficient, point, σ, exponent, an extra term."""
    out = [text + " + 1", text + " + silu(5)", "2*" + text if not text.startswith("-") else
           text[1:], text.replace("(", "(1+", 1).replace("(1+-", "(-1+", 1)]
    for a, b in (("silu", "gelu"), ("gelu", "silu")):
        if a in text:
            out.append(text.replace(a, b))
    out.append(re.sub(r"\((-?)(\d+)", lambda m: f"({m.group(1)}{int(m.group(2)) + 1}", text,
                      count=1))
    out.append(re.sub(r"\)", ")^-1", text, count=1))
    return [o for o in out if o != text]


CONSTANT = """block C { activation ACT dim 2 width 2 bias up = [[1, 0], [0, 0]]  up_bias = [0, 1]
            down = [[1, 0], [0, 1]] }
claim C is absorbable at width 3
claim C is absorbable at width 4
claim min width of C is 4
query C
"""


@pytest.mark.parametrize("act", ["silu", "gelu", "gelu_tanh"])
def test_constant_neurons_cost_no_neuron(tmp_path, act):
    """docs/rules.md §8.1: one key x₁ (v = e₁) and the constant σ(1)·e₂. Λ = I + a·e₁e₁ᵀ
    needs a double on x₁ and a spare pair: min width 4 exactly, the witness's output bias
    holding σ(1) symbolically (before: bounds 4..5, width 4 unknown)."""
    spec, found = _decide(tmp_path, CONSTANT.replace("ACT", act))
    outcomes = [r.outcome for r, _ in found]
    assert outcomes == [REFUTED, PROVED, PROVED, DECIDED]
    assert found[3][0].min_width == 4
    witness = found[1][1]["certificate"]
    assert witness["layers"][0]["down_bias"][1] == f"{act}(1)"
    assert len(witness["layers"][0]["up"]) == 4
    for _, doc in found[:3]:
        assert verify(doc).status == "valid"
    # the witness's function is the block's (mpmath, at random points)
    _agrees_mp(spec.blocks["C"], witness["layers"][0], act)
    # every symbolic field forged: invalid
    doc = found[1][1]
    for forgery in _mutations(f"{act}(1)"):
        forged = _forged(doc, ("layers", 0, "down_bias", 1), forgery)
        assert verify(forged).status == "invalid", forgery
    below = found[2][1]
    for forgery in _mutations(f"{act}(1)"):
        forged = _forged(below, ("witness", "layers", 0, "down_bias", 1), forgery)
        assert verify(forged).status == "invalid", forgery


def _run(x, act, up, up_bias, down, down_bias, skip):
    """skip·x + down·σ(up·x + up_bias) + down_bias in mpmath."""
    pre = [sum(mp(F(u)) * xi for u, xi in zip(row, x, strict=True)) + b
           for row, b in zip(up, up_bias, strict=True)]
    hidden = [SIGMA[act](p) for p in pre]
    return [skip * xi + sum(mp(F(w)) * h for w, h in zip(row, hidden, strict=True)) + c
            for row, c, xi in zip(down, down_bias, x, strict=True)]


def _agrees_mp(block, layer, act, points=5):
    rng = random.Random(0)
    own = block.layers[0]
    for _ in range(points):
        x = [mpmath.mpf(rng.randint(-20, 20)) / rng.randint(1, 7) for _ in range(block.dim)]
        want = _run(x, act, own.up.rows, [mp(b) for b in own.up_bias], own.down.rows,
                    [mp(c) for c in own.down_bias or (F(0),) * block.dim], 1)
        got = _run(x, act, layer["up"], [mp_text(b) for b in layer["up_bias"]], layer["down"],
                   [mp_text(c) for c in layer["down_bias"]], 0)
        assert all(abs(w - g) < mpmath.mpf(10) ** -40 for w, g in zip(want, got, strict=True))


def test_equality_with_constant_neurons(tmp_path):
    """A's constant neuron σ(3) equals B's two halves; C's σ(1) + σ(2) is another number
    (an enclosure proves it); D's σ(−3) + 3 is σ(3) again (σ(z) − σ(−z) = z)."""
    text = """block A { activation silu dim 1 width 2 bias up = [[0], [1]] up_bias = [3, 0]
  down = [[1, -1]] }
block B { activation silu dim 1 width 3 bias up = [[0], [1], [0]] up_bias = [3, 0, 3]
  down = [[1/2, -1, 1/2]] }
block C { activation silu dim 1 width 3 bias up = [[0], [1], [0]] up_bias = [1, 0, 2]
  down = [[1, -1, 1]] }
block D { activation silu dim 1 width 2 bias up = [[0], [1]] up_bias = [-3, 0]
  down = [[1, -1]] down_bias = [3] }
claim A equals B
claim A equals C
claim A equals D
"""
    _, found = _decide(tmp_path, text)
    assert [r.outcome for r, _ in found] == [PROVED, REFUTED, PROVED]
    assert all(verify(doc).status == "valid" for _, doc in found)
    flipped = _forged(found[1][1], ("equal",), True)
    assert verify(flipped).status == "invalid"


GATED = """block G {{ activation {act} dim 2 width 2 skip {skip} bias
    gate = [[1, 2], [3, -1]]  gate_bias = [0, 1]
    up = [[2, 1], [-1, 1]]    up_bias = [1, 0]
    down = [[1, 2], [0, 1]]   down_bias = [1, -1] }}
claim G is absorbable at width {top}
claim G is not absorbable
claim min width of G is {top}
"""


@pytest.mark.parametrize("act", ["swiglu", "geglu"])
@pytest.mark.parametrize(("skip", "rank"), [("identity", 2), ("[[0, 2], [0, -1]]", 1)])
def test_gated_linear_neurons_with_an_irrational_gate_value(tmp_path, act, skip, rank):
    """docs/rules.md §8: gate row 0, gate bias 1 gives σ(1)(u·x + β): with down p/σ(1), one
    linear neuron per rank-one term of S absorbs the block at m + rank S. The own width is
    refuted (§8.2), so min width ≥ m + 1: decided (m + 1) when rank S = 1."""
    spec, found = _decide(tmp_path, GATED.format(act=act, skip=skip, top=2 + rank))
    value = {"swiglu": "silu(1)", "geglu": "gelu(1)"}[act]
    assert found[0][0].outcome == PROVED and found[1][0].outcome == PROVED
    assert found[2][0].outcome == (PROVED if rank == 1 else "unknown")
    certificate = found[0][1]["certificate"]
    assert certificate["sigma_gamma"] == value and certificate["gamma"] == "1"
    for _, doc in found[:2]:
        assert verify(doc).status == "valid"
    for forgery in [*_mutations(value), "1", "1/2"]:
        forged = _forged(found[0][1], ("sigma_gamma",), forgery)
        assert verify(forged).status == "invalid", forgery
    if rank == 1:
        doc = found[2][1]
        assert doc["certificate"]["kind"] == "minimal width"
        assert doc["certificate"]["below"]["section"] == "§8.2"
        forgeries: tuple[tuple[tuple[str, ...], object], ...] = (
            (("witness", "sigma_gamma"), "2*" + value), (("below",), None), (("width",), 2))
        for path, wrong in forgeries:
            assert verify(_forged(doc, path, wrong)).status == "invalid", path
    # the construction in floats equals the block (numpy), symbolic weights converted
    from absorb_formal.decide import large

    block = spec.blocks["G"]
    gate, up, down, gate_bias, up_bias, down_bias = large.gated_witness_arrays(block)
    assert any(isinstance(v, symbolic.Symbolic) for v in down.ravel())
    f = lambda a: np.array(a, dtype=np.float64)  # noqa: E731 - the check is numeric
    x = np.random.default_rng(1).normal(size=(40, 2))
    hidden = block.activation.scalar.numpy(x @ f(gate).T + f(gate_bias)) * (
        x @ f(up).T + f(up_bias))
    assert np.allclose(hidden @ f(down).T + f(down_bias), block.evaluate(x), atol=1e-9)


def test_exported_symbolic_weights_are_correctly_rounded():
    """export.round_values on symbolic entries: the nearest float of each format."""
    from absorb_formal.export.witness import round_values

    rng = random.Random(3)
    values = [_random_value(rng) for _ in range(30)]
    exact = [mp_text(symbolic.text(v)) for v in values]
    for dtype, bits in (("float64", 53), ("float32", 24)):
        rounded = round_values(values, (len(values),), dtype).values.astype(np.float64)
        for got, want in zip(rounded.tolist(), exact, strict=True):
            with mpmath.workprec(bits):
                nearest = float(+want)  # mpmath rounds to nearest at `bits`
            assert got == nearest


@pytest.mark.parametrize("engine", ["numpy", "torch"])
def test_the_cross_check_evaluates_symbolic_witnesses(tmp_path, engine):
    """A swiglu construction (down p/silu(1), not stored) and a gelu witness (output bias
    gelu(1) in the certificate) pass the float cross-check on numpy and, where installed,
    torch; a wrong symbolic value is caught by it."""
    from absorb_formal.numeric.backends import backend
    from absorb_formal.numeric.crosscheck import crosscheck

    if engine == "torch":
        pytest.importorskip("torch", reason="torch is an optional extra")
    chosen = backend(engine, "cpu" if engine == "torch" else "auto")
    text = (GATED.format(act="swiglu", skip="identity", top=4)
            + CONSTANT.replace("ACT", "gelu"))
    spec, found = _decide(tmp_path, text)
    for result, block in ((found[0][0], spec.blocks["G"]), (found[4][0], spec.blocks["C"])):
        assert result.outcome == PROVED
        checked_ = crosscheck(block, result.certificate, 20_000, chosen)
        assert checked_ is not None and checked_.ok, checked_
    wrong = copy.deepcopy(found[4][0].certificate)
    wrong["layers"][0]["down_bias"][1] = "gelu(2)"
    bad = crosscheck(spec.blocks["C"], wrong, 20_000, chosen)
    assert bad is not None and not bad.ok


@pytest.mark.parametrize(("name", "width"), [("C", 4), ("G", 4)])
def test_export_of_a_symbolic_witness_loads_back_close(cli, tmp_path, name, width):
    """`export` writes a gelu witness (output bias gelu(1)) and a swiglu construction (down
    p/silu(1)) as float64: the loaded arrays compute the block to float accuracy; its
    record's rounding error is that of rounding the symbolic values (about 1e-17)."""
    from absorb_formal.export.witness import read_export

    text = GATED.format(act="swiglu", skip="identity", top=4) + CONSTANT.replace("ACT", "gelu")
    spec = tmp_path / "s.mlp"
    spec.write_text(text, encoding="utf-8")
    run = cli("export", spec, name, "--width", str(width), "--out", tmp_path / "w.npz",
              "--points", "2000")
    assert run.code == 0, run.err
    arrays, record = read_export(tmp_path / "w.npz")
    assert 0 < float(record["max_rounding_rel_error"]) < 1e-15
    block = load_file(spec).blocks[name]
    x = np.random.default_rng(4).normal(size=(200, 2)) * 2
    sigma = block.activation.scalar.numpy
    pre = x @ arrays["up"].T + arrays["up_bias"]
    hidden = sigma(x @ arrays["gate"].T + arrays["gate_bias"]) * pre if "gate" in arrays \
        else sigma(pre)
    got = hidden @ arrays["down"].T + arrays["down_bias"]
    assert np.allclose(got, block.evaluate(x), atol=1e-12)
