"""Blocks with biases (docs/rules.md §8, docs/language.md "Biases"), the foundation: the language
(`bias`, `up_bias`, `gate_bias`, `down_bias`, vectors, `.T`), the model's exact and float
evaluation, the JSON both sides embed, and the guard that keeps the bias-free rules away."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from absorb_formal.certify import documents as proofs
from absorb_formal.checker.dispatch import verify
from absorb_formal.checker.readers.reading import Reading
from absorb_formal.decide import decide
from absorb_formal.language import SpecError, load_text
from absorb_formal.language.load import load_file
from absorb_formal.model.result import PROVED, REFUTED, UNKNOWN
from absorb_formal.numeric.backends import NumpyBackend
from absorb_formal.numeric.floatblock import from_block
from tests.weights.test_arrays_read_as_exact_rationals import write_safetensors

F = Fraction
# the example of blocks with biases, one of the example specs
EXAMPLES = Path(__file__).resolve().parents[2] / "specs" / "examples" / "biases.mlp"

# docs/rules.md §8's example: B(x) = x − ¼ relu²(x+1) + ¼ relu²(x−1).
R2 = """block R2 {
    activation relu^2
    dim 1  width 2
    bias
    up      = [[1], [1]]
    up_bias = [1, -1]
    down    = [[-1/4, 1/4]]
}
"""


def _block(text: str, folder: Path, name: str = "B"):
    return load_text(text, "s.mlp", folder).blocks[name]


# ---- the language ---------------------------------------------------------------------------

def test_bias_fields_are_exact_and_missing_biases_are_zero(tmp_path):
    block = _block("""block B { activation swiglu dim 2 width 3
        up = [[1, 0], [0, 1], [1, 1]]  gate = [[1, 1], [0, 1], [2, 0]]
        down = [[1, 0, 0], [0, 1, 0]]
        up_bias = [1/2, -0.25, 1e-3] }""", tmp_path)
    [layer] = block.layers
    assert block.biased
    assert layer.up_bias == (F(1, 2), F(-1, 4), F(1, 1000))
    assert layer.gate_bias == (0, 0, 0) and layer.down_bias == (0, 0)


def test_bias_declaration_alone_and_bias_free_blocks(tmp_path):
    spec = load_text("block F { activation relu dim 2 width 3 bias }\n"
                     "block P { activation relu dim 1 width 1 up = [[1]] down = [[1]] }\n"
                     "block Z { activation relu dim 1 width 1 bias up = [[1]] down = [[1]] }",
                     "s.mlp", tmp_path)
    assert spec.blocks["F"].biased and spec.blocks["F"].layers is None
    plain = spec.blocks["P"].layers[0]
    assert not spec.blocks["P"].biased
    assert (plain.up_bias, plain.gate_bias, plain.down_bias) == (None, None, None)
    zero = spec.blocks["Z"].layers[0]  # declared `bias`, no value: zeros, gate_bias None
    assert (zero.up_bias, zero.gate_bias, zero.down_bias) == ((0,), None, (0,))


def test_stack_layers_take_their_own_biases(tmp_path):
    block = _block("""block B { activation relu dim 1 width 1 depth 2
        layer 1 { up = [[1]] down = [[1]] down_bias = [5] }
        layer 2 { up = [[2]] down = [[1]] up_bias = [-3] } }""", tmp_path)
    first, second = block.layers
    assert block.biased
    assert (first.up_bias, first.down_bias) == ((0,), (5,))
    assert (second.up_bias, second.down_bias) == ((-3,), (0,))


def test_transpose_of_a_literal_and_of_a_load(tmp_path):
    np.savez(tmp_path / "w.npz", c_fc=np.array([[1, 0, 1], [0, 1, 0.5]]))  # d × m, Conv1D
    block = _block("""block B { activation relu dim 2 width 3
        up = load("w.npz", "c_fc").T
        down = [[1, 0], [0, 1], [7/10, 3/10]].T }""", tmp_path)
    [layer] = block.layers
    assert layer.up.rows == ((1, 0), (0, 1), (1, F(1, 2)))
    assert layer.down.rows == ((1, 0, F(7, 10)), (0, 1, F(3, 10)))
    assert not block.biased


@pytest.mark.parametrize("shape", [(3,), (1, 3), (3, 1)])
def test_vector_loads_from_npz_any_of_three_shapes(tmp_path, shape):
    values = np.array([0.1, -2, 3], dtype=np.float32)
    np.savez(tmp_path / "w.npz", b=values.reshape(shape))
    block = _block("""block B { activation relu dim 1 width 3
        up = [[1], [1], [1]]  down = [[1, 1, 1]]
        up_bias = load("w.npz", "b") }""", tmp_path)
    assert block.layers[0].up_bias == (F(float(np.float32(0.1))), -2, 3)  # exact, not 1/10


def test_vector_loads_from_safetensors(tmp_path):
    write_safetensors(tmp_path / "w.safetensors",
                      {"b": ("F32", np.array([0.1, 2.5], dtype=np.float32)),
                       "c": ("BF16", np.array([0x3F80, 0xC040], dtype="<u2"))})  # 1, -3
    block = _block("""block B { activation relu dim 2 width 2
        up = [[1, 0], [0, 1]]  down = [[1, 0], [0, 1]]
        up_bias = load("w.safetensors", "b")  down_bias = load("w.safetensors", "c") }""",
                   tmp_path)
    layer = block.layers[0]
    assert layer.up_bias == (F(float(np.float32(0.1))), F(5, 2))
    assert layer.down_bias == (1, -3)


BODY = "activation relu dim 2 width 3\n up = [[1, 0], [0, 1], [1, 1]]\n" \
       " down = [[1, 0, 0], [0, 1, 0]]\n"
ERRORS = [
    ("up_bias of wrong length", "block B { " + BODY + " up_bias = [1, 2] }", 4, 12,
     "'up_bias' must have 3 entries (one per hidden unit: width m = 3), got 2"),
    ("down_bias of wrong length", "block B { " + BODY + " down_bias = [1, 2, 3] }", 4, 14,
     "'down_bias' must have 2 entries (one per output: dim d = 2), got 3"),
    ("gate_bias on ungated", "block B { " + BODY + " gate_bias = [1, 2, 3] }", 4, 2,
     "'gate_bias' is only for gated activations; relu is ungated"),
    ("bias value on a family", "block B { activation relu dim 2 width 3\n down_bias = [1, 2] }",
     2, 2, "'down_bias' gives a bias value, but block 'B' is a family"),
    ("bias value on a family, in a layer",
     "block B { activation relu dim 2 width 3\n layer 1 { up_bias = [1, 2, 3] } }", 2, 12,
     "is a family"),
    ("bias given twice", "block B { " + BODY + " up_bias = [1, 2, 3]\n up_bias = [1, 2, 3] }",
     5, 2, "'up_bias' is given twice"),
    ("a matrix literal for a bias", "block B { " + BODY + " up_bias = [[1, 2, 3]] }", 4, 12,
     "'up_bias' is a vector: write [v1, v2, ...], got a 1×3 matrix"),
    ("a vector for a matrix", "block B { activation relu dim 1 width 1 up = [1] down = [[1]] }",
     1, 46, "'up' is a matrix: write its rows"),
    ("transpose fits", "block B { activation relu dim 2 width 3\n up = [[1, 0, 1], [0, 1, 1]]\n"
     " down = [[1, 0, 0], [0, 1, 0]] }", 2, 7,
     "'up' must be 3×2 (width × dim), got 2×3; its transpose fits: write '.T' after it"),
    ("transpose written, plain fits", "block B { " + BODY.replace("1]]\n d", "1]].T\n d") + "}",
     2, 7, "got 2×3; without '.T' it fits: remove '.T'"),
    ("transpose of a vector", "block B { " + BODY + " up_bias = [1, 2, 3].T }", 4, 21,
     "unexpected"),
]


@pytest.mark.parametrize(("text", "line", "column", "fragment"),
                         [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_bias_errors_are_positioned(tmp_path, text, line, column, fragment):
    with pytest.raises(SpecError) as caught:
        load_text(text, "s.mlp", tmp_path)
    positions = [(d.pos.line, d.pos.column, d.message) for d in caught.value.diagnostics]
    assert any((ln, col) == (line, column) and fragment in msg for ln, col, msg in positions), \
        positions


def test_a_2d_array_for_a_bias_is_positioned(tmp_path):
    np.savez(tmp_path / "w.npz", b=np.ones((3, 2)))
    with pytest.raises(SpecError) as caught:
        load_text("block B { " + BODY + ' up_bias = load("w.npz", "b") }', "s.mlp", tmp_path)
    [diag] = caught.value.diagnostics
    assert (diag.pos.line, diag.pos.column) == (4, 12)
    assert "has shape (3, 2), not a vector (a 1-D array, or 1×n or n×1)" in diag.message


def test_a_load_whose_transpose_fits_says_so(tmp_path):
    np.savez(tmp_path / "w.npz", up=np.ones((2, 3)))
    with pytest.raises(SpecError) as caught:
        load_text("block B { activation relu dim 2 width 3\n up = load(\"w.npz\", \"up\")\n"
                  " down = [[1, 0, 0], [0, 1, 0]] }", "s.mlp", tmp_path)
    [diag] = caught.value.diagnostics
    assert diag.message.endswith("its transpose fits: write '.T' after it"), diag.message


def test_cli_exit_2_for_a_bias_error(cli, write_spec):
    run = cli(write_spec("block B { " + BODY + " up_bias = [1, 2] }"))
    assert run.code == 2
    assert "spec.mlp:4:12: error: 'up_bias' must have 3 entries" in run.out + run.err


# ---- evaluation -----------------------------------------------------------------------------

def test_exact_evaluation_against_a_hand_computation(tmp_path):
    block = _block(R2, tmp_path, "R2")
    for x in (F(3), F(-2), F(1, 2)):  # docs/rules.md §8: B(x) = x − ¼ relu²(x+1) + ¼ relu²(x−1) = 0
        want = x - F(1, 4) * max(x + 1, 0) ** 2 + F(1, 4) * max(x - 1, 0) ** 2
        assert block.evaluate_exact([x]) == (want,)
    assert block.evaluate_exact([F(3)]) == (0,)  # 3 − 4 + 1
    gated = _block("""block B { activation bilinear dim 1 width 1 skip none
        up = [[2]] gate = [[3]] down = [[5]]
        up_bias = [1] gate_bias = [-1] down_bias = [7] }""", tmp_path)
    # 5·(3x − 1)(2x + 1) + 7 at x = 2: 5·5·5 + 7
    assert gated.evaluate_exact([F(2)]) == (132,)


STACK = """block B {
    activation %s  dim 2  width 3  depth 2  skip [[1, 2], [0, -1/2]]
    layer 1 { up = [[1, -1], [1/2, 2], [0, 1]]  down = [[1, 0, -1], [2, 1, 0]] %s
              up_bias = [1, -2, 1/3]  down_bias = [-1, 1/2] }
    layer 2 { up = [[1, 1], [-1, 0], [3, 1]]  down = [[0, 1, 1], [1, -1, 1/4]] %s
              up_bias = [-1/2, 0, 2] }
}
"""


@pytest.mark.parametrize("activation", ["relu", "relu^2", "abs", "reglu", "bilinear"])
def test_float_evaluation_agrees_with_exact_evaluation(tmp_path, activation):
    gated = activation in ("reglu", "bilinear")
    gates = (" gate = [[1, 0], [1, 1], [-1, 2]] gate_bias = [1/2, -1, 0]" if gated else "",
             " gate = [[0, 1], [2, 1], [1, -1]]" if gated else "")
    block = _block(STACK % (activation, *gates), tmp_path)
    assert block.biased
    points = np.random.default_rng(7).standard_normal((50, 2)) * 3
    exact = np.array([[float(v) for v in block.evaluate_exact([F(p) for p in x])]
                      for x in points])
    assert np.allclose(block.evaluate(points), exact, rtol=1e-12, atol=1e-12)
    numpy = NumpyBackend()
    assert np.allclose(numpy.evaluate(from_block(block), points), exact, rtol=1e-12, atol=1e-12)
    value, size = numpy.evaluate_scaled(from_block(block), points)
    assert np.allclose(value, exact, rtol=1e-12, atol=1e-12)
    assert (abs(exact) <= size * (1 + 1e-12)).all()  # the size bound covers every sum


# ---- JSON: the prover's embedded block and the checker's reading ------------------------------

BIASED_SPEC = """block B {
    activation reglu  dim 2  width 3  depth 2
    layer 1 { up = load("w.npz", "c_fc").T  gate = [[1, 0], [0, 1], [1, 1]]
              down = [[1, 0], [0, 1], [1, 1]].T
              up_bias = load("w.npz", "b")  down_bias = [1/3, -2] }
    layer 2 { up = [[1, 0], [0, 1], [1, 1]]  gate = [[1, 0], [0, 1], [1, 1]]
              down = [[1, 0, 0], [0, 1, 0]]  gate_bias = load("w.npz", "g") }
}
block P { activation relu  dim 1  width 1  up = [[1]]  down = [[-1]] }
block F { activation tanh  dim 2  width 3  bias }
claim B is absorbable
"""


def test_the_checker_reads_a_biased_spec_as_the_prover_embeds_it(tmp_path):
    np.savez(tmp_path / "w.npz", c_fc=np.array([[1, 0, 0.1], [0, 1, 2]], dtype=np.float32),
             b=np.array([[0.5], [-0.1], [3]]), g=np.array([[1, 2, -0.75]], dtype=np.float16))
    spec_file = tmp_path / "s.mlp"
    spec_file.write_text(BIASED_SPEC, encoding="utf-8")
    spec = load_file(spec_file)
    sources, reading = proofs.Sources(spec_file), Reading(spec_file)
    for name in ("B", "P", "F"):
        embedded = json.loads(json.dumps(proofs.block_json(spec.blocks[name], sources)))
        assert reading.block_json(name, by_source=False) == embedded, name
    biased = proofs.block_json(spec.blocks["B"], sources)
    assert biased["bias"] is True
    first, second = biased["layers"]
    assert first["up_bias"] == [str(F(0.5)), str(F(-0.1)), "3"]
    assert first["gate_bias"] == ["0", "0", "0"] and first["down_bias"] == ["1/3", "-2"]
    assert second["gate_bias"] == ["1", "2", "-3/4"] and second["up_bias"] == ["0"] * 3
    assert first["up"][2] == [str(F(float(np.float32(0.1)))), "2"]
    assert proofs.block_json(spec.blocks["F"], sources)["bias"] is True
    plain = proofs.block_json(spec.blocks["P"], sources)  # bias-free: no new key anywhere
    assert "bias" not in plain and set(plain["layers"][0]) == {"up", "down"}


def test_an_edited_bias_is_stale(tmp_path):
    spec_file = tmp_path / "s.mlp"
    spec_file.write_text(R2, encoding="utf-8")
    embedded = proofs.block_json(load_file(spec_file).blocks["R2"], proofs.Sources(spec_file))
    spec_file.write_text(R2.replace("[1, -1]", "[1, -2]"), encoding="utf-8")
    assert Reading(spec_file).block_json("R2", by_source=False) != embedded


# ---- the bias-free rules must not decide biased blocks (docs/rules.md §8) ------------------------

def test_never_rules_do_not_fire_on_biased_blocks():
    spec = load_file(EXAMPLES)
    outcomes = {s.statement: decide(spec, s).outcome for s in spec.statements}
    assert outcomes["R2 is absorbable"] != REFUTED  # T1 would refute it: §8 says absorbable
    assert outcomes["min width of R2 is 2"] != REFUTED
    assert outcomes["SW is always absorbable at width 7"] != REFUTED  # T4 would refute it
    assert outcomes["R2free is never absorbable"] == PROVED  # bias-free: T1 as before
    # §8.2 flip sets (tests/decide/test_bias_flip_sets.py)
    assert outcomes["R2 is absorbable"] == PROVED
    assert outcomes["RB is absorbable"] == PROVED  # §8.1: affine keys, the paper's subset
    # docs/rules.md §8.3 (linear neurons, genericity) and T3 decide these (tests/test_bias_families)
    assert outcomes["SW is always absorbable at width 7"] == PROVED
    assert outcomes["SW is generically not absorbable"] == PROVED
    assert outcomes["TB is never absorbable"] == PROVED
    for statement, outcome in outcomes.items():
        # R2's minimal width: the generic engine (§8.4) refutes width 1
        if not statement.startswith(("R2free", "RB", "SW", "TB", "R2 ", "min width of R2 ")):
            assert outcome == UNKNOWN, statement


def test_dispatch_guard_reason(tmp_path):
    # d = 3: too many unknowns for the generic engine (§8.4), and no theory rule for the
    # minimal width of a relu² block, so the guard's reason shows
    wide = R2.replace("dim 1", "dim 3").replace("[[1], [1]]", "[[1, 0, 0], [1, 0, 0]]") \
        .replace("[[-1/4, 1/4]]", "[[-1/4, 1/4], [0, 0], [0, 0]]")
    spec = load_text(wide + "claim min width of R2 is 2\n", "s.mlp", tmp_path)
    for statement in spec.statements:  # relu²: the §8 square quadruples bound it above,
        result = decide(spec, statement)  # the §8.2 refutation at m = 2 below
        assert result.outcome == UNKNOWN
        assert result.reason.startswith("min width is between 3 and 14")  # m + 4·rank S
    cubic = wide.replace("relu^2", "relu^3")  # no construction either: the guard's reason
    spec = load_text(cubic + "claim min width of R2 is 2\n", "s.mlp", tmp_path)
    for statement in spec.statements:
        result = decide(spec, statement)
        assert result.outcome == UNKNOWN
        assert result.reason == "blocks with biases: not decided yet (docs/rules.md §8)"


def test_the_checker_refuses_a_certificate_on_a_biased_block(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("s.mlp").write_text("block F { activation relu^2 dim 2 width 4 }\n"
                             "claim F is never absorbable\n", encoding="utf-8")
    assert cli("--crosscheck", "0", "--certificates", "out", "s.mlp").code == 0
    doc = json.loads((tmp_path / "out" / "s.mlp.2.json").read_text(encoding="utf-8"))
    assert verify(doc).status == "valid"
    doc["blocks"]["F"]["bias"] = True  # T1's certificate, now about a biased family
    verdict = verify(doc)
    assert verdict.status == "invalid" and "blocks with biases" in verdict.reason


def test_the_checker_reader_transposes_literals_and_refuses_a_vector_transposed():
    from absorb_formal.checker.readers.source import SourceError, read_spec

    block = read_spec("block B { activation relu dim 2 width 3 "
                      "down = [[1, 0], [0, 1], [7/10, 3/10]].T }").blocks["B"]
    assert block.weights["down"] == [[1, 0, F(7, 10)], [0, 1, F(3, 10)]]
    with pytest.raises(SourceError, match="'.T' needs a matrix"):
        read_spec("block B { activation relu dim 1 width 2 up_bias = [1, 2].T }")
