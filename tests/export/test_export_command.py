"""`absorb-prove export`: the exact witness written as arrays, and loaded back."""

from __future__ import annotations

import hashlib
import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from absorb_formal import export
from absorb_formal.certify import documents as proofs
from absorb_formal.export import choosing
from absorb_formal.export import files as export_files
from absorb_formal.export.files import read_export
from absorb_formal.export.rounding import ExportError, round_values
from absorb_formal.language import load_file
from absorb_formal.model.blocks import Matrix

SPEC = """\
block R {
    activation relu
    dim 2  width 3
    up    = [[1, 0], [0, 1], [1, 1]]
    down  = [[-1, 0, 1/2], [0, -1, 1/4]]
}
block R7 {
    activation relu
    dim 2  width 3
    up    = [[1, 0], [0, 1], [1, 1]]
    down  = [[-1, 0, 7/10], [0, -1, 3/10]]
}
block G {
    activation gelu
    dim 2  width 3
    up        = [[1, 0], [0, 1], [1, 1]]
    up_bias   = [1/2, -3, 2]
    down      = [[-1, 0, 3/4], [0, -1, 1/4]]
    down_bias = [0, 1]
}
block S {
    activation relu
    dim 2  width 3  depth 2
    layer 1 { up = [[1, 0], [0, 1], [1, 1]]   down = [[-1, 0, 1/2], [0, -1, 3/8]] }
    layer 2 { up = [[1, 0], [1, -1], [0, 1]]  down = [[-1, 1/2, 0], [0, -1/2, -1]] }
}
block Sw {
    activation swiglu
    dim 2  width 2
    up   = [[1, 0], [0, 1]]
    gate = [[1, 1], [0, 1]]
    down = [[1, 0], [0, 1]]
}
block F { activation relu  dim 2  width 3 }
block P {
    activation glu
    dim 2  width 3
    skip [[-3, -2], [-1, -1]]
    gate = [[1, 2], [-1, 1], [3, 1]]
    up   = [[1, 0], [0, 1], [1, 1]]
    down = [[1, 0, 2], [0, 1, 1]]
}
"""


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "blocks.mlp"
    path.write_text(SPEC, encoding="utf-8")
    return path


def exported(cli, spec: Path, name: str, out: str, *extra: str):
    run = cli("export", spec, name, "--out", spec.parent / out, "--points", "2000", *extra)
    assert run.code == 0, run.err
    assert run.err == ""
    return run


def back(cli, spec: Path, text: str):
    """Decide `text` added to the original spec, beside the exported files."""
    path = spec.parent / "back.mlp"
    path.write_text(SPEC + text, encoding="utf-8")
    return cli(path, "--crosscheck", "0")


def test_relu_float64_export_loads_back_equal(cli, spec):
    run = exported(cli, spec, "R", "r.npz")
    assert "R is absorbable at width 3" in run.out
    arrays, record = read_export(spec.parent / "r.npz")
    assert sorted(arrays) == ["down", "up"]
    assert record["max_rounding_rel_error"] == "0"
    assert float(record["sample_max_rel_error"]) < 1e-12
    assert record["dtype"] == "float64" and arrays["up"].dtype == np.float64
    assert "width_note" not in record  # the minimal width (3) is proved exactly
    # the printed block is a spec that loads the file back
    snippet = run.out[run.out.index("block R_plain"):]
    result = back(cli, spec, snippet + "\nclaim R equals R_plain\n")
    assert result.code == 0, result.out + result.err
    assert "proved: R equals R_plain" in result.out


def test_export_without_width_takes_the_least_width_proved_absorbable(cli, tmp_path):
    """A generic relu block of width 20 in d = 4 (integer weights): its minimal width is
    only bounded, lo..hi, as `query` says; export without --width writes the witness at hi,
    the least width proved absorbable, and says so, instead of failing."""
    rng = np.random.default_rng(0)

    def rows(a: np.ndarray) -> str:
        return "[" + ", ".join("[" + ", ".join(map(str, r)) + "]" for r in a.tolist()) + "]"

    spec = tmp_path / "generic.mlp"
    spec.write_text(f"block R {{\n activation relu  dim 4  width 20\n"
                    f" up = {rows(rng.integers(-5, 6, size=(20, 4)))}\n"
                    f" down = {rows(rng.integers(-5, 6, size=(4, 20)))}\n}}\nquery R\n",
                    encoding="utf-8")
    [query] = cli(spec, "--json", "--crosscheck", "0").json()["files"][0]["results"]
    lo, hi = query["min_width_bounds"]
    assert 20 < lo < hi
    out = tmp_path / "plain.npz"
    # the witness's weights are ten times the block's: float64 arithmetic alone puts it
    # about 17 epsilons of the output off, past the default gate of 16 (measured against
    # the output: the old figure, against the terms summed, hid that)
    run = cli("export", spec, "R", "--out", out, "--points", "500", "--max-error", "1e-12")
    assert run.code == 0, run.err
    note = (f"the minimal width is between {lo} and {hi} (proved); {hi} is the least width "
            "proved absorbable")
    assert f"R is absorbable at width {hi}" in run.out and note in run.out
    arrays, record = read_export(out)
    assert record["width"] == str(hi) and record["width_note"] == note
    assert arrays["up"].shape == (hi, 4) and arrays["down"].shape == (4, hi)
    assert float(record["sample_max_rel_error"]) < 1e-12
    both = spec.with_name("claims.mlp")
    both.write_text(spec.read_text().replace("query R", f"claim R is absorbable at width {hi}\n"
                                             f"claim R is not absorbable at width {lo - 1}"))
    assert cli(both, "--crosscheck", "0").code == 0
    exact = exported(cli, spec, "R", "w.npz", "--width", str(hi),
                     "--max-error", "1e-12")  # asked for: no note
    assert "least width" not in exact.out
    assert "width_note" not in read_export(tmp_path / "w.npz")[1]


def test_a_stack_without_width_is_exported_at_its_least_proved_width(cli, spec, tmp_path):
    """The depth-2 stack S: min width only bounded (1..3, as `query S` says): exported at 3."""
    run = cli("export", spec, "S", "--out", tmp_path / "s.npz", "--points", "500")
    assert run.code == 0, run.err
    assert "the minimal width is between 1 and 3 (proved); 3 is the least width proved " \
           "absorbable" in run.out
    assert read_export(tmp_path / "s.npz")[1]["width"] == "3"


def test_biased_gelu_export_to_safetensors_loads_back_equal(cli, spec):
    exported(cli, spec, "G", "g.safetensors")
    arrays, record = read_export(spec.parent / "g.safetensors")
    assert set(arrays) == {"up", "down", "up_bias", "down_bias"}
    assert arrays["up_bias"].ndim == 1 and arrays["down_bias"].shape == (2,)
    result = back(cli, spec, """
block GP {
    activation gelu  dim 2  width 3  skip none
    up = load("g.safetensors", "up")          up_bias = load("g.safetensors", "up_bias")
    down = load("g.safetensors", "down")      down_bias = load("g.safetensors", "down_bias")
}
claim G equals GP
""")
    assert result.code == 0, result.out + result.err


def test_a_corrupted_export_is_not_equal(cli, spec, tmp_path):
    exported(cli, spec, "R", "r.npz")
    arrays, _ = read_export(tmp_path / "r.npz")
    down = arrays["down"].copy()
    down[0, 2] += 2.0**-20
    np.savez(tmp_path / "bad.npz", up=arrays["up"], down=down)
    result = back(cli, spec, """
block B { activation relu  dim 2  width 3  skip none
          up = load("bad.npz", "up")  down = load("bad.npz", "down") }
claim R equals B
""")
    assert result.code == 1
    assert "refuted: R equals B" in result.out


def test_depth_two_stack_round_trip_is_exact(cli, spec, tmp_path):
    run = exported(cli, spec, "S", "s.npz", "--width", "3")
    arrays, record = read_export(tmp_path / "s.npz")
    assert sorted(arrays) == ["layer1.down", "layer1.up", "layer2.down", "layer2.up"]
    assert record["max_rounding_rel_error"] == "0"  # a dyadic witness: float64 holds it
    snippet = run.out[run.out.index("block S_plain"):]
    (tmp_path / "back.mlp").write_text(SPEC + snippet, encoding="utf-8")
    loaded = load_file(tmp_path / "back.mlp")
    original, plain = loaded.blocks["S"], loaded.blocks["S_plain"]
    assert plain.is_plain and plain.depth == 2
    found = export.find_witness(original, 3)
    assert plain.layers is not None
    for mine, theirs in zip(plain.layers, found.layers, strict=True):
        assert mine.up.rows == theirs.up.rows and mine.down.rows == theirs.down.rows
    # `equals` compares depth-1 blocks only: check the stack exactly at rational points
    rng = np.random.default_rng(1)
    for _ in range(20):
        x = [Fraction(int(v), 7) for v in rng.integers(-50, 50, size=2)]
        assert plain.evaluate_exact(x) == original.evaluate_exact(x)


def test_record_names_certificate_spec_and_errors(cli, spec, tmp_path):
    exported(cli, spec, "R7", "r7.safetensors", "--dtype", "float32")
    arrays, record = read_export(tmp_path / "r7.safetensors")
    assert record["spec_sha256"] == hashlib.sha256(spec.read_bytes()).hexdigest()
    assert record["width"] == record["claim_width"] == "3"
    assert record["dtype"] == "float32"
    # the certificate --certificates stores for `R7 is absorbable` hashes to the record's
    spec.write_text(SPEC + "claim R7 is absorbable\n", encoding="utf-8")
    assert cli(spec, "--certificates", tmp_path / "certs", "--crosscheck", "0").code == 0
    stored = json.loads(next((tmp_path / "certs").rglob("*.json")).read_text())
    assert hashlib.sha256(proofs.encode(stored["certificate"])).hexdigest() == \
        record["certificate_sha256"]
    # 7/10 has no float32: the rounding figure says so, and it is at most half an ulp
    assert 0 < float(record["max_rounding_rel_error"]) <= 2.0**-24
    with open(tmp_path / "r7.safetensors", "rb") as stream:
        size = int.from_bytes(stream.read(8), "little")
        header = json.loads(stream.read(size))
    assert header["up"]["dtype"] == "F32"


def test_bfloat16_export_rounds_and_reports_it(cli, spec, tmp_path):
    exported(cli, spec, "R7", "r7.safetensors", "--dtype", "bfloat16")
    with open(tmp_path / "r7.safetensors", "rb") as stream:
        size = int.from_bytes(stream.read(8), "little")
        header = json.loads(stream.read(size))
    assert header["down"]["dtype"] == "BF16" and size % 8 == 0
    arrays, record = read_export(tmp_path / "r7.safetensors")
    assert 0 < float(record["max_rounding_rel_error"]) <= 2.0**-8
    assert float(record["sample_max_abs_error"]) > 0
    result = back(cli, spec, """
block B { activation relu  dim 2  width 3  skip none
          up = load("r7.safetensors", "up")  down = load("r7.safetensors", "down") }
claim R7 equals B
""")
    assert result.code == 1  # 7/10 is not a bfloat16: the export is close, not equal


@pytest.mark.parametrize(("value", "dtype"), [
    (Fraction(7, 10), "float32"), (Fraction(1, 3), "bfloat16"), (Fraction(-7, 10), "bfloat16"),
    (Fraction(2**24 + 1), "float32"), (Fraction(2**24 + 3), "float32"),
    (Fraction(257), "bfloat16"), (Fraction(259), "bfloat16"),
    (Fraction(1, 2**140), "float32"), (Fraction(2**53 + 1, 2**53 * 3), "bfloat16"),
])
def test_rounding_is_to_nearest_with_ties_to_even(value, dtype):
    rounded = round_values([value], (1,), dtype).as_float64()[0]
    exact = Fraction(rounded)
    # no value of the format lies closer: its neighbours are one step either side
    kind = np.float32
    step_up = np.nextafter(kind(rounded), kind(np.inf))
    step_down = np.nextafter(kind(rounded), kind(-np.inf))
    if dtype == "bfloat16":
        ulp = Fraction(float(step_up) - float(rounded)) * 2**16 if rounded else None
        neighbours = [exact + ulp, exact - ulp] if ulp else []
    else:
        neighbours = [Fraction(float(step_up)), Fraction(float(step_down))]
    for other in neighbours:
        assert abs(exact - value) <= abs(other - value)
    # ties go to the even mantissa: 2^24 + 1 → 2^24, 2^24 + 3 → 2^24 + 4; 257 → 256, 259 → 260
    ties = {Fraction(2**24 + 1): 2**24, Fraction(2**24 + 3): 2**24 + 4,
            Fraction(257): 256, Fraction(259): 260}
    if value in ties:
        assert rounded == ties[value]


@pytest.mark.parametrize(("value", "want"), [
    (257.0, 256.0), (259.0, 260.0), (1 + 2.0**-8, 1.0), (1 + 2.0**-8 + 2.0**-40, 1 + 2.0**-7),
    (-(1 + 3 * 2.0**-8), -(1 + 2.0**-6)), (2.0**-130, 2.0**-130), (2.0**-140, 0.0),
    (0.1, 0.10009765625),
])
def test_arrays_round_to_bfloat16_to_nearest_even(value, want):
    rounded = export.round_matrix(Matrix(array=np.array([[value]])), "bfloat16")
    assert rounded.values.dtype == np.uint16
    assert rounded.as_float64()[0, 0] == want


def test_loaded_arrays_are_rounded_without_fractions():
    matrix = Matrix(array=np.array([[0.1, 1.0 + 2.0**-30], [3.0, -2.5]], dtype=np.float64))
    rounded = export.round_matrix(matrix, "float32")
    assert rounded.values.dtype == np.float32
    assert rounded.values[1, 1] == -2.5 and rounded.values[0, 1] == 1.0
    assert 0 < rounded.max_rel_error <= 2.0**-24
    assert export.round_matrix(matrix, "float64").max_rel_error == 0


@pytest.mark.parametrize(("args", "code", "words"), [
    (("R", "--width", "1"), 1, "not absorbable at width 1"),
    (("Sw",), 1, "not absorbable at any width"),
    (("Nope",), 2, "no block named 'Nope'"),
    (("F",), 2, "family"),
    (("S", "--width", "2"), 2, "unknown"),
])
def test_refusals(cli, spec, tmp_path, args, code, words):
    run = cli("export", spec, *args, "--out", tmp_path / "x.npz")
    assert run.code == code
    assert "error: " in run.err and words in run.err
    assert "Traceback" not in run.err
    assert not (tmp_path / "x.npz").exists()


def test_a_stack_exports_at_the_least_width_proved_absorbable(cli, spec, tmp_path):
    """S (depth 2) has proved min-width bounds since the stack rules (docs/rules.md §9, §5):
    export without --width writes the witness at the upper bound, and says so."""
    asked = tmp_path / "q.mlp"
    asked.write_text(SPEC + "query S\n", encoding="utf-8")
    query = cli("--json", asked).json()["files"][0]["results"]
    found = next(r for r in query if r["statement"] == "query S")
    width = found["min_width"] or found["min_width_bounds"][1]
    run = cli("export", spec, "S", "--out", tmp_path / "x.npz")
    assert run.code == 0 and f"S is absorbable at width {width}" in run.out, run.err


@pytest.mark.parametrize(("out", "extra", "words"), [
    ("x.txt", (), "must end in .npz, .safetensors or .onnx"),
    ("x.npz", ("--dtype", "bfloat16"), "NumPy has no bfloat16"),
    ("missing/x.npz", (), "no such folder"),
])
def test_bad_outputs(cli, spec, tmp_path, out, extra, words):
    run = cli("export", spec, "R", "--out", tmp_path / out, *extra)
    assert run.code == 2 and words in run.err


def test_never_overwrites_without_force(cli, spec, tmp_path):
    target = tmp_path / "r.npz"
    target.write_bytes(b"mine")
    run = cli("export", spec, "R", "--out", target)
    assert run.code == 2 and "already exists" in run.err and "--force" in run.err
    assert target.read_bytes() == b"mine"
    assert cli("export", spec, "R", "--out", target, "--force", "--points", "0").code == 0
    assert read_export(target)[1]["sample_note"].startswith("not measured")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_help_documents_export(cli):
    run = cli("export", "--help")
    assert run.code == 0
    for words in ("layer1.up", "certificate_sha256", "--force", "bfloat16 needs .safetensors",
                  "1 the block is not absorbable"):
        assert words in run.out
    assert "absorb-prove export SPEC NAME" in cli("--help").out


def test_default_sample_shrinks_for_large_blocks():
    small = {"up": np.zeros((3, 2)), "down": np.zeros((2, 3))}
    large = {"up": np.zeros((3072, 768)), "down": np.zeros((768, 3072))}
    assert export.default_points(small) == export.DEFAULT_POINTS
    assert 100 <= export.default_points(large) < export.DEFAULT_POINTS
    from absorb_formal.numeric.crosscheck import WORK

    assert export.default_points(large) * 2 * 3072 * 768 <= WORK


def test_read_export_refuses_other_files(tmp_path):
    np.savez(tmp_path / "plain.npz", up=np.eye(2))
    with pytest.raises(ExportError, match="not written by"):
        read_export(tmp_path / "plain.npz")



@pytest.mark.parametrize(("name", "out", "extra"), [
    ("G", "g.safetensors", ()), ("S", "s.npz", ("--width", "3")),
    ("R7", "r7.safetensors", ("--dtype", "bfloat16")),
    ("P", "p.npz", ("--dtype", "float32", "--width", "3")),
])
def test_to_torch_matches_numpy(cli, spec, tmp_path, name, out, extra):
    torch_ = pytest.importorskip("torch")
    exported(cli, spec, name, out, *extra)
    arrays, record = read_export(tmp_path / out)
    module = export.to_torch(tmp_path / out, dtype=torch_.float64)
    block = load_file(spec).blocks[name]
    x = np.random.default_rng(2).normal(size=(64, 2)) * 3
    with torch_.no_grad():
        got = module(torch_.from_numpy(x)).numpy()
    from absorb_formal.numeric.backends import NumpyBackend
    from absorb_formal.numeric.floatblock import FloatBlock

    plain = FloatBlock(block.activation.scalar, block.activation.gated, block.dim, 0.0, None,
                       tuple({k: np.asarray(v, dtype=np.float64) for k, v in layer.items()}
                             for layer in export.layer_arrays(arrays, block.depth)))
    want = NumpyBackend().evaluate(plain, x)
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12)
    if record["dtype"] == "float64":  # and the exact witness computes the block itself
        assert np.allclose(got, block.evaluate(x), rtol=1e-9, atol=1e-9)


def test_to_torch_refuses_activations_without_a_module(tmp_path):
    pytest.importorskip("torch")
    spec = tmp_path / "a.mlp"
    spec.write_text("block A { activation abs  dim 1  width 2  skip none "
                    "up = [[1], [2]]  down = [[1, 1]] }\n", encoding="utf-8")
    assert export.export(spec, "A", tmp_path / "a.npz", points=0)["activation"] == "abs"
    with pytest.raises(ExportError, match="torch has no module"):
        export.to_torch(tmp_path / "a.npz")


def test_a_narrower_witness_is_padded_to_the_width_asked(cli, spec, tmp_path):
    found = export.find_witness(load_file(spec).blocks["R"], 4)
    assert found.layers[0].up.shape[0] == 3  # the decision keeps 3 neurons
    run = exported(cli, spec, "R", "r4.npz", "--width", "4")
    arrays, record = read_export(tmp_path / "r4.npz")
    assert record["width"] == "4" and arrays["up"].shape == (4, 2)
    assert arrays["down"].shape == (2, 4) and not arrays["down"][:, 3:].any()
    result = back(cli, spec, run.out[run.out.index("block R_plain"):] +
                  "\nclaim R equals R_plain\n")
    assert result.code == 0, result.out + result.err


def test_the_sample_gate_writes_nothing_beyond_max_error(cli, spec, tmp_path):
    target = tmp_path / "r7.npz"
    target.write_bytes(b"mine")
    # 7/10 in float32 is off by about 7e-8 of the output: beyond 1e-12, within the default
    run = cli("export", spec, "R7", "--out", target, "--dtype", "float32", "--force",
              "--points", "2000", "--max-error", "1e-12")
    assert run.code == 2 and "beyond the 1e-12 allowed; nothing written" in run.err
    assert target.read_bytes() == b"mine"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    exported(cli, spec, "R7", "r7.npz", "--dtype", "float32", "--force")
    record = read_export(target)[1]
    assert float(record["sample_max_error_allowed"]) == export.default_max_error("float32")
    assert 0 < float(record["sample_max_rel_error"]) <= float(record["sample_max_error_allowed"])


def test_the_gate_compares_the_figure_measured_to_the_last_bit(cli, spec, tmp_path):
    """The record holds the measured error exactly (it reads back as the same float), and
    the gate compares that: --max-error equal to it writes, one ulp below it writes nothing
    (a 6-digit rounding of it would have let a slightly larger error through, or not)."""
    exported(cli, spec, "R7", "r7.npz", "--dtype", "float32", "--points", "500")
    measured = float(read_export(tmp_path / "r7.npz")[1]["sample_max_rel_error"])
    assert measured > 0
    again = ("export", spec, "R7", "--dtype", "float32", "--points", "500", "--max-error")
    assert cli(*again, repr(measured), "--out", tmp_path / "a.npz").code == 0
    below = cli(*again, repr(math.nextafter(measured, 0)), "--out", tmp_path / "b.npz")
    assert below.code == 2 and "nothing written" in below.err, below.err
    assert not (tmp_path / "b.npz").exists()


def test_the_sample_gate_catches_arrays_that_do_not_compute_the_block(cli, spec, tmp_path,
                                                                      monkeypatch):
    """A rounding step that moved one weight by 1% (a bug export must never ship): the
    default float64 gate refuses the file."""
    rounded = export.rounded_arrays

    def off(layers, dtype):
        out = rounded(layers, dtype)
        down = out["down"]
        values = down.values.copy()
        values.flat[np.argmax(np.abs(values))] *= 1.01
        out["down"] = type(down)(values, down.max_rel_error)
        return out

    monkeypatch.setattr(choosing, "rounded_arrays", off)
    run = cli("export", spec, "R", "--out", tmp_path / "r.npz", "--points", "2000")
    assert run.code == 2 and "nothing written" in run.err, run.out
    assert not (tmp_path / "r.npz").exists()


@pytest.mark.parametrize("value", ["-1", "nan", "x"])
def test_max_error_must_be_a_number_at_least_0(cli, spec, tmp_path, value):
    run = cli("export", spec, "R", "--out", tmp_path / "r.npz", "--max-error", value)
    assert run.code == 2 and "--max-error" in run.err


def test_a_file_system_that_refuses_the_file_is_an_error_not_a_traceback(cli, spec, tmp_path,
                                                                         monkeypatch):
    def full(out, fill, force):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export_files, "_write_new", full)
    run = cli("export", spec, "R", "--out", tmp_path / "r.npz", "--points", "100")
    assert run.code == 2 and "r.npz: cannot write: No space left on device" in run.err
    assert "Traceback" not in run.err


def test_max_error_without_a_sample_is_refused(cli, spec, tmp_path):
    run = cli("export", spec, "R", "--out", tmp_path / "r.npz", "--points", "0",
              "--max-error", "1e-30")
    assert run.code == 2 and "--max-error needs the sample" in run.err
    assert not (tmp_path / "r.npz").exists()


def test_an_exported_relu_witness_is_balanced_and_still_exact(tmp_path):
    """A relu witness in canonical scale (each key's leading entry ±1) carries a neuron's
    whole size in its down column; export rescales each neuron by a power of two (exact for
    positively homogeneous σ), so the largest weight stays near the block's, and the stored
    arrays are still proved equal to the block."""
    from absorb_formal.export.witness import export

    spec = tmp_path / "s.mlp"
    # D_J U_J = -I, J = {1, 2}: U_J = [[1/256, 1], [1, 0]], D_J = -U_J^-1. Neuron 1's key
    # in canonical scale is (1, 256): its up row alone would grow 256-fold
    spec.write_text("block R { activation relu dim 2 width 3 "
                    "up = [[1/256, 1], [1, 0], [1, 1]] "
                    "down = [[0, -1, 1/2], [-1, 1/256, 1/4]] }\n")
    record = export(spec, "R", tmp_path / "R.safetensors")
    assert float(record["weight_max_abs_after"]) <= 2 * float(record["weight_max_abs_before"])
    assert record["equals"].startswith("proved"), record["equals"]
