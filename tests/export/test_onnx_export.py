"""`absorb-prove export ... --out FILE.onnx`: the skip-free block as an ONNX graph, evaluated
by a small numpy interpreter of its ops (tests/onnx_eval.py; onnxruntime is not available)
against the residual block it replaces, read back by `load(...)` and by the ONNX finder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from absorb_formal import export  # noqa: E402
from absorb_formal.export.files import read_export  # noqa: E402
from absorb_formal.export.onnx_block import OnnxExportError, onnx_bytes  # noqa: E402
from absorb_formal.export.rounding import ExportError  # noqa: E402
from absorb_formal.language import load_file  # noqa: E402
from absorb_formal.scanner.onnx_find import find_blocks  # noqa: E402

from ..onnx_eval import run  # noqa: E402
from .test_export_command import SPEC, back, exported  # noqa: E402

# block G of test_export's SPEC with the tanh form of gelu
GELU_TANH = "\n" + SPEC[SPEC.index("block G {"):SPEC.index("block S {")].replace(
    "block G", "block T").replace("activation gelu", "activation gelu_tanh")


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "blocks.mlp"
    path.write_text(SPEC + GELU_TANH, encoding="utf-8")
    return path


def graph_output(path: Path, x: np.ndarray) -> np.ndarray:
    model = onnx.load(str(path))
    return run(model, {"x": x})["y"]


@pytest.mark.parametrize(("name", "extra", "tolerance"), [
    ("R", (), 1e-12), ("R7", (), 1e-12), ("G", (), 1e-12), ("T", (), 1e-12),
    ("S", ("--width", "3"), 1e-12), ("P", ("--width", "3"), 1e-12),
    ("G", ("--dtype", "float32"), 1e-5), ("R7", ("--dtype", "bfloat16"), 2e-2),
])
def test_the_graph_computes_the_residual_block(cli, spec, tmp_path, name, extra, tolerance):
    exported(cli, spec, name, "out.onnx", *extra)
    block = load_file(spec).blocks[name]
    x = np.random.default_rng(5).normal(size=(256, 2)) * 3
    got = graph_output(tmp_path / "out.onnx", x)
    want = block.evaluate(x)  # the residual block itself, in float64
    scale = np.abs(want).max() + 1
    assert np.abs(got - want).max() <= tolerance * scale, np.abs(got - want).max()
    # and the graph is not vacuous: it is far from the block without its skip's share
    assert np.abs(got - (want - x)).max() > 0.1


def test_the_record_and_the_arrays_read_back_and_equal_the_block(cli, spec, tmp_path):
    run_ = exported(cli, spec, "G", "g.onnx")
    arrays, record = read_export(tmp_path / "g.onnx")
    assert set(arrays) == {"up", "down", "up_bias", "down_bias"}
    assert record["format"] == export.FORMAT and record["statement"] == "G is absorbable at width 3"
    model = onnx.load(str(tmp_path / "g.onnx"))
    assert {p.key for p in model.metadata_props} >= {"certificate_sha256", "spec_sha256"}
    assert [t.name for t in model.graph.initializer] == ["up", "down", "up_bias", "down_bias"]
    snippet = run_.out[run_.out.index("block G_plain"):]
    assert 'load("g.onnx", "up")' in snippet
    result = back(cli, spec, snippet + "\nclaim G equals G_plain\n")
    assert result.code == 0, result.out + result.err
    assert "proved: G equals G_plain" in result.out


def test_bfloat16_weights_are_stored_as_bfloat16_and_read_back_exactly(cli, spec, tmp_path):
    exported(cli, spec, "R7", "r7.onnx", "--dtype", "bfloat16")
    model = onnx.load(str(tmp_path / "r7.onnx"))
    assert {t.data_type for t in model.graph.initializer} == {onnx.TensorProto.BFLOAT16}
    arrays, _ = read_export(tmp_path / "r7.onnx")
    exported(cli, spec, "R7", "r7.safetensors", "--dtype", "bfloat16")
    same, _ = read_export(tmp_path / "r7.safetensors")
    for key in arrays:
        assert np.array_equal(arrays[key], same[key])


def test_the_finder_reads_the_exported_graph_back(cli, spec, tmp_path):
    for name, activation in (("G", "gelu"), ("T", "gelu_tanh"), ("R", "relu")):
        exported(cli, spec, name, f"{name}.onnx")
        [block], skipped = find_blocks(tmp_path / f"{name}.onnx")
        assert block.activation == activation and skipped == []
        assert block.up.key == "up" and not block.up.transpose  # the language's layout
        assert any("no residual Add" in n for n in block.notes)


def test_activations_without_an_exact_onnx_form_are_refused():
    arrays = {"up": np.ones((2, 1)), "down": np.ones((1, 2))}
    record = {"activation": "leaky_relu(1/3)", "depth": "1", "dim": "1", "dtype": "float64"}
    with pytest.raises(OnnxExportError, match="no exact float32"):
        onnx_bytes(arrays, record)
    record = {**record, "activation": "poly[0, 1/3, 1]"}
    with pytest.raises(OnnxExportError, match="no exact float64"):
        onnx_bytes(arrays, record)
    record = {**record, "activation": "leaky_relu(1/4)"}
    assert onnx_bytes(arrays, record)


def test_a_file_that_is_not_onnx_is_refused(tmp_path):
    (tmp_path / "x.onnx").write_bytes(b"\xff not a model")
    with pytest.raises(ExportError, match="not an ONNX model"):
        read_export(tmp_path / "x.onnx")


def test_without_the_onnx_package_export_refuses_before_deciding(spec, tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_onnx(name, *args, **kwargs):
        if name == "onnx" or name.startswith("onnx."):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_onnx)
    with pytest.raises(ExportError, match=r"pip install 'absorb_formal\[onnx\]'"):
        export.check_out(tmp_path / "r.onnx", "float64", False)
