"""Export of large blocks: the doubles witness at the proved width m + d past the order
the exact inverse reaches, the error measured against the block's output, weight growth on
screen and in the file, a width change said on screen, and `--prefer width|accuracy`."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from absorb_formal import export
from absorb_formal.checker.kernel.contract import Check
from absorb_formal.decide import doubles
from absorb_formal.export.enclosed_doubles import _exact_rows
from absorb_formal.export.files import read_export
from absorb_formal.language.load import load_text
from absorb_formal.numeric.backends import NumpyBackend
from absorb_formal.numeric.crosscheck import compare
from absorb_formal.numeric.floatblock import FloatBlock, from_block

D, M = 200, 400  # d past 160, the order the exact inverse used to be built to
POINTS = "600"


def gelu_block(folder: Path, scale: float) -> str:
    """An erf-gelu block with biases, float32 weights, identity skip. The first d rows of U
    (those doubles use) are an orthogonal matrix times `scale`: W = −U_Δ⁻¹/(2a) has entries
    about 1/(scale·√d), so a small scale makes the doubles' weights large."""
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.standard_normal((D, D)))
    up = np.vstack([q, rng.standard_normal((M - D, D)) / np.sqrt(D)]) * scale
    np.savez(folder / "w.npz", up=up.astype(np.float32),
             down=(rng.standard_normal((D, M)) * 0.05).astype(np.float32),
             b=(rng.standard_normal(M) * 0.1).astype(np.float32),
             c=(rng.standard_normal(D) * 0.1).astype(np.float32))
    text = f"""block Big {{
    activation gelu  dim {D}  width {M}  skip identity  bias
    up = load("w.npz", "up")
    down = load("w.npz", "down")
    up_bias = load("w.npz", "b")
    down_bias = load("w.npz", "c")
}}
"""
    (folder / "big.mlp").write_text(text, encoding="utf-8")
    return text


def gelu(z: np.ndarray) -> np.ndarray:
    return z * (1 + np.frompyfunc(math.erf, 1, 1)(z / math.sqrt(2)).astype(np.float64)) / 2


def plain(arrays: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """The exported plain block at the rows of x, in float64, by numpy alone."""
    f = {k: np.asarray(v, dtype=np.float64) for k, v in arrays.items()}
    return gelu(x @ f["up"].T + f["up_bias"]) @ f["down"].T + f["down_bias"]


def original(folder: Path, x: np.ndarray) -> np.ndarray:
    w = {k: v.astype(np.float64) for k, v in np.load(folder / "w.npz").items()}
    return x + gelu(x @ w["up"].T + w["b"]) @ w["down"].T + w["c"]


def exported(tmp_path: Path, cli, scale: float, name: str, *extra: str):
    """`absorb-prove export` of `gelu_block(scale)` to float32 without --width: the run,
    the arrays and the record written."""
    gelu_block(tmp_path, scale)
    out = tmp_path / name
    run = cli("export", tmp_path / "big.mlp", "Big", "--out", out, "--dtype", "float32",
              "--points", POINTS, *extra)
    assert run.code == 0, run.err
    return (run, *read_export(out))


def test_doubles_past_order_160_export_at_the_proved_width(tmp_path, cli):
    """d = 200: the proved upper width m + d is written (doubles), not the spare pairs'
    m + 2d; the file, evaluated by numpy, matches the block within the gate; W's rows are
    the exact values correctly rounded (two rows checked against an exact solve)."""
    run, arrays, record = exported(tmp_path, cli, 1.0, "plain.npz")
    assert record["width"] == str(M + D) and record["construction"] == Check.DOUBLES
    assert arrays["up"].shape == (M + D, D) and arrays["up"].dtype == np.float32
    assert "instead of the proved" not in run.out  # no width change
    x = np.random.default_rng(5).standard_normal((200, D))
    want = original(tmp_path, x)
    off = np.abs(plain(arrays, x) - want).max() / np.median(np.abs(want).max(axis=1))
    allowed = float(record["sample_max_error_allowed"])
    assert allowed == export.default_max_error("float32") and off <= allowed
    block = load_text((tmp_path / "big.mlp").read_text(), "big.mlp", tmp_path).blocks["Big"]
    neurons = list(range(D))  # doubles take the first d rows (independent mod p)
    for r, exact in _exact_rows(block, neurons, [0, D - 1]).items():
        want_row = export.round_values(exact["down"], (D,), "float32").values
        assert np.array_equal(arrays["down"][r, M:], want_row)
        own = export.round_values(exact["own_down"], (D,), "float32").values
        assert np.array_equal(arrays["down"][r, :D], own)
        bias = export.round_values(exact["down_bias"], (1,), "float32").values
        assert arrays["down_bias"][r] == bias[0]


def test_weight_growth_and_the_output_error_are_on_screen_and_in_the_file(tmp_path, cli):
    run, _, record = exported(tmp_path, cli, 0.02, "plain.safetensors")
    before, after = float(record["weight_max_abs_before"]), float(record["weight_max_abs_after"])
    assert before < 0.5 < 5 < after  # W = −U_Δ⁻¹/(2a) with U_Δ 0.02 × orthogonal
    assert f"largest |weight|: {before:.6g} before, {after:.6g} after" in run.out
    assert f"{float(record['sample_max_rel_error']):.6g} with the float32 weights" in run.out
    assert float(record["sample_max_rel_error_in_dtype_arith"]) > \
        float(record["sample_original_rel_error_in_dtype_arith"])  # worse than the block's own


def test_the_gate_measures_against_the_output_not_the_terms(tmp_path, cli):
    """Doubles whose weights grew a thousandfold: off by more than the gate allows of the
    output, though the old figure (against the size of the terms summed) was far below it.
    Asked for at m + d, nothing is written."""
    text = gelu_block(tmp_path, 0.0005)
    out = tmp_path / "plain.npz"
    run = cli("export", tmp_path / "big.mlp", "Big", "--width", str(M + D), "--out", out,
              "--dtype", "float32", "--points", POINTS)
    assert run.code == 2 and "of the block's output" in run.err and "nothing written" in run.err
    assert not out.exists()
    block = load_text(text, "big.mlp", tmp_path).blocks["Big"]
    found = export.find_witness(block, M + D)
    rounded, figures = export.built(found, "float32", int(POINTS))
    assert float(figures["sample_max_rel_error"]) > export.default_max_error("float32")
    arrays = {k: r.as_float64() for k, r in rounded.items()}
    terms = compare(from_block(block), FloatBlock(block.activation.scalar, False, D, 0.0, None,
                                                  (arrays,)), int(POINTS), NumpyBackend())
    assert terms.max_rel_error < export.default_max_error("float32") / 100


def test_a_width_change_is_said_on_screen_with_its_reason(tmp_path, cli):
    """No --width: doubles at m + d fail the gate, so the spare pairs at m + 2d are written,
    and the screen (not only the file) says which width, instead of which, and why."""
    run, _, record = exported(tmp_path, cli, 0.0005, "plain.npz")
    assert record["width"] == str(M + 2 * D) and record["construction"] == Check.SPARE_PAIRS
    said = (f"width {M + 2 * D} ({Check.SPARE_PAIRS}) instead of the proved {M + D} "
            f"({Check.DOUBLES}): {Check.DOUBLES} at width {M + D} is off by")
    assert said in run.out and said in record["width_note"]
    assert float(record["sample_max_rel_error"]) <= float(record["sample_max_error_allowed"])


@pytest.mark.parametrize("prefer", ["width", "accuracy"])
def test_prefer_chooses_between_the_exact_constructions(tmp_path, cli, prefer):
    """Both constructions pass the gate here; width takes doubles at m + d, accuracy the one
    with the least error computed in float32 (the spare pairs, whose added weights are
    exact), and says what it compared."""
    run, _, record = exported(tmp_path, cli, 0.02, "plain.npz", "--prefer", prefer)
    text = (tmp_path / "big.mlp").read_text(encoding="utf-8")
    assert record["prefer"] == prefer
    block = load_text(text, "big.mlp", tmp_path).blocks["Big"]
    options = export.alternatives(export.find_witness(block, None))
    assert [o.claim_width for o in options] == [M + D, M + 2 * D]
    errors = {o.claim_width: float(export.built(o, "float32", int(POINTS))[1][
        "sample_max_rel_error_in_dtype_arith"]) for o in options}
    if prefer == "width":
        assert record["width"] == str(M + D) and "instead of" not in record["width_note"]
    else:
        best = min(errors, key=lambda w: (errors[w], w))
        assert best == M + 2 * D and record["width"] == str(best)
        assert "--prefer accuracy" in record["width_note"] and "--prefer accuracy" in run.out
    assert float(record["sample_max_rel_error_in_dtype_arith"]) == \
        errors[int(record["width"])]


def test_prefer_must_be_width_or_accuracy(tmp_path, cli):
    gelu_block(tmp_path, 1.0)
    run = cli("export", tmp_path / "big.mlp", "Big", "--out", tmp_path / "p.npz",
              "--prefer", "speed")
    assert run.code == 2 and "--prefer" in run.err and not (tmp_path / "p.npz").exists()


def gpt2_checkpoint(folder: Path, scale: float) -> Path:
    """One GPT-2-shaped MLP (Conv1D layout, biases, gelu_new) with the weights of
    `gelu_block(scale)`, in float32 safetensors."""
    from ..scanner.test_scan_by_naming_convention import _save

    folder.mkdir()
    gelu_block(folder, scale)
    w = dict(np.load(folder / "w.npz"))
    _save(folder / "model.safetensors", {
        "transformer.wte.weight": np.ones((10, D), np.float32),
        "transformer.h.0.mlp.c_fc.weight": w["up"].T.copy(),
        "transformer.h.0.mlp.c_fc.bias": w["b"],
        "transformer.h.0.mlp.c_proj.weight": w["down"].T.copy(),
        "transformer.h.0.mlp.c_proj.bias": w["c"]})
    # no model_type and no norm tensor: an MLP stack whose sublayers are the bare blocks (a
    # GPT-2 with its ln_2 is pre-norm, and has no skip-free form: docs/rules.md §10.2)
    (folder / "config.json").write_text(json.dumps(
        {"n_embd": D, "n_inner": M, "activation_function": "gelu_new"}))
    return folder


@pytest.mark.parametrize("prefer", ["width", "accuracy"])
def test_scan_export_writes_the_proved_width_and_says_what_it_chose(tmp_path, cli, prefer):
    """scan --export: the sublayer's doubles at m + d (prefer width), or the spare pairs at
    m + 2d (prefer accuracy: more accurate here), with its width, construction, errors and
    weight growth on screen and in config.json."""
    folder = gpt2_checkpoint(tmp_path / "g", 0.02)
    run = cli("scan", folder, "--export", tmp_path / "plain", "--prefer", prefer)
    assert run.code == 0, run.err
    config = json.loads((tmp_path / "plain" / "config.json").read_text())
    entry = config["absorb_formal"]
    width, construction = ((M + D, Check.DOUBLES) if prefer == "width"
                           else (M + 2 * D, Check.SPARE_PAIRS))
    assert config["n_inner"] == width and entry["prefer"] == prefer
    errors = entry["errors"]["transformer.h.0.mlp"]
    assert errors["construction"] == construction
    assert f"transformer.h.0.mlp: width {width} ({construction})" in run.out
    assert (f"largest |weight|: {float(errors['weight_max_abs_before']):.6g} before, "
            f"{float(errors['weight_max_abs_after']):.6g} after") in run.out
    if prefer == "accuracy":
        note = entry["width_notes"]["transformer.h.0.mlp"]
        assert f"instead of the proved {M + D}" in note and note in run.out


def tie_block(folder: Path) -> object:
    """d = 8: U_Δ = 2·P (P a permutation), so W = −Pᵀ/2 (gelu: a = 1/2) has exact zeros,
    and one own down entry 1 + 2^-24 makes d_i − w_i = 3/2 + 2^-24, a float32 tie."""
    d, m = 8, 16
    rng = np.random.default_rng(3)
    perm = np.eye(d)[rng.permutation(d)]
    up = np.vstack([2 * perm, rng.integers(-3, 4, (m - d, d))]).astype(np.float64)
    down = rng.integers(-3, 4, (d, m)).astype(np.float64)
    j = int(np.argmax(perm[:, 0]))  # the neuron whose w has its −1/2 in row 0
    down[0, j] = 1 + 2.0 ** -24
    np.savez(folder / "t.npz", up=up, down=down, b=np.arange(m, dtype=np.float64) / 4,
             c=np.ones(d))
    text = f"""block T {{
    activation gelu  dim {d}  width {m}  skip identity  bias
    up = load("t.npz", "up")  up_bias = load("t.npz", "b")
    down = load("t.npz", "down")  down_bias = load("t.npz", "c")
}}
"""
    return load_text(text, "t.mlp", folder).blocks["T"]


def test_entries_on_a_midpoint_or_exactly_zero_are_rounded_from_exact_rows(tmp_path,
                                                                            monkeypatch):
    """Balls around an exact zero or a tie cannot settle the rounding: those rows are solved
    exactly, and every array is bit for bit the exact witness rounded (ties to even)."""
    from absorb_formal.export import enclosed_doubles

    block = tie_block(tmp_path)
    solved: list[int] = []
    exact_rows = enclosed_doubles._exact_rows

    def counted(block, neurons, rows):
        solved.extend(rows)
        return exact_rows(block, neurons, rows)

    monkeypatch.setattr(enclosed_doubles, "_exact_rows", counted)
    neurons = list(range(8))
    exact = doubles.doubled(block, neurons)
    for dtype in ("float32", "bfloat16", "float64"):
        solved.clear()
        got = enclosed_doubles.rounded_doubles(block, neurons, dtype)
        assert solved, dtype  # the zeros (and the tie) went to the exact rows
        for name in ("down", "own_down", "down_bias", "up", "up_bias"):
            want = export.round_values(exact[name].ravel().tolist(), exact[name].shape, dtype)
            assert np.array_equal(np.ascontiguousarray(got[name].values).view(np.uint8),
                                  np.ascontiguousarray(want.values).view(np.uint8)), name
    assert exact["own_down"][0, int(np.argmax(np.load(tmp_path / "t.npz")["up"][:8, 0]))] \
        == Fraction(3, 2) + Fraction(1, 2**24)  # the tie is there


def test_too_many_unsettled_rows_past_the_exact_limit_are_refused(tmp_path, monkeypatch):
    from absorb_formal.export import enclosed_doubles

    monkeypatch.setattr(doubles, "EXACT_DOUBLES", 4)
    monkeypatch.setattr(enclosed_doubles, "EXACT_ROWS", 2)
    with pytest.raises(enclosed_doubles.Unsettled, match="too close to a rounding boundary"):
        enclosed_doubles.rounded_doubles(tie_block(tmp_path), list(range(8)), "float32")


def test_scan_export_is_refused_when_no_construction_passes_the_gate(tmp_path, cli):
    folder = gpt2_checkpoint(tmp_path / "g", 1.0)
    run = cli("scan", folder, "--export", tmp_path / "plain", "--max-error", "1e-30")
    assert run.code == 2, run.out + run.err
    assert "--export: transformer.h.0.mlp: the float32 arrays" in run.err
    assert "nothing written" in run.err and "Traceback" not in run.err
    assert not (tmp_path / "plain").exists() or not any((tmp_path / "plain").iterdir())
