"""`absorb-prove scan MODEL.onnx --export DIR`: the patched ONNX model. Each exported
sublayer's tensors hold its plain witness and its residual Add is gone; the patched model
computes what the original does (checked with the tests' numpy evaluator always, and with
onnxruntime when it is installed); what cannot be rewritten exactly is refused, naming the
tensor, and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

from ..onnx_eval import run  # noqa: E402
from ..scanner.test_onnx_norm_detection import layernorm_op, layernorm_torch, plain_mlp, save  # noqa: E402
from ..scanner.test_onnx_sublayer_finder import Builder, gelu_torch, relu  # noqa: E402
from ..scanner.test_scan_by_naming_convention import _planted  # noqa: E402

D, M = 3, 4


def planted_mlp(b: Builder, x: str, prefix: str, act: Any = relu, constants: bool = False,
                seed: int = 7, gemm: bool = False) -> str:
    """A bias-free MLP whose bare block x + MLP(x) is absorbable at its own width
    (σ(z) − σ(−z) = z for relu and gelu), weights stored in×out for MatMul, as initializers
    or as Constant nodes read through Identity nodes; or (`gemm`) Gemm nodes with transB
    and out×in weights, as nn.Linear exports."""
    up, down = _planted(D, M, np.random.default_rng(seed))
    if gemm:
        h = b.op("Gemm", [x, b.init(up, f"{prefix}.fc1.weight")], transB=1)
        return b.op("Gemm", [act(b, h), b.init(down, f"{prefix}.fc2.weight")], transB=1)

    def weight(array: np.ndarray, name: str) -> str:
        if not constants:
            return b.init(array, name)
        b.nodes.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(
            array.astype(np.float32))))
        return b.op("Identity", [name])

    h = b.op("MatMul", [x, weight(up.T.copy(), f"{prefix}.fc1.weight")])
    return b.op("MatMul", [act(b, h), weight(down.T.copy(), f"{prefix}.fc2.weight")])


def outputs(model: Any, x: np.ndarray) -> np.ndarray:
    return run(model, {"x": x})[model.graph.output[0].name]


def record(folder: Path) -> tuple[Any, dict[str, Any]]:
    model = onnx.load(str(folder / "model.onnx"))
    props = {p.key: p.value for p in model.metadata_props}
    return model, json.loads(props["absorb_formal"])


def relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(a).max())


RUNTIME_BOUND = 2e-6  # float32 arithmetic: the sum x + F(x) and P(x) round differently


def same_outputs(original: Path, patched: Path, bound: float, scale: float = 2.0) -> float:
    """The largest relative difference of the two models' outputs over seeded inputs with
    the numpy evaluator (float64 arithmetic on the stored tensors), which must stay below
    `bound`; and, when installed, with onnxruntime (the models' own float32 arithmetic),
    which must stay below RUNTIME_BOUND."""
    x = np.random.default_rng(11).standard_normal((256, D)) * scale
    before, after = (onnx.load(str(p)) for p in (original, patched))
    worst = relative(outputs(before, x), outputs(after, x))
    assert worst < bound, worst
    try:
        import onnxruntime
    except ImportError:
        return worst
    runs = [onnxruntime.InferenceSession(str(p), providers=["CPUExecutionProvider"])
            .run(None, {"x": x.astype(np.float32)})[0] for p in (original, patched)]
    runtime = relative(runs[0].astype(np.float64), runs[1].astype(np.float64))
    assert runtime < RUNTIME_BOUND, runtime
    return worst


def adds_of(model: Any, value: str) -> list[Any]:
    return [n for n in model.graph.node if n.op_type == "Add" and value in n.input]


# ---- exact rewrites ----------------------------------------------------------------------

@pytest.mark.parametrize("act", [relu, gelu_torch], ids=["relu", "gelu"])
def test_a_bare_mlp_loses_its_residual_add_and_computes_the_same(cli, tmp_path, act):
    b = Builder(D, M)
    path = tmp_path / "bare.onnx"
    onnx.save(b.model(planted_mlp(b, "x", "mlp", act)), str(path))  # y = x + MLP(x)
    scan = cli("scan", path, "--export", tmp_path / "out", "--json")
    assert scan.code == 0, scan.err
    assert scan.json()["export"] == str(tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["model.onnx"]
    model, made = record(tmp_path / "out")
    assert adds_of(onnx.load(str(path)), "x") and not adds_of(model, "x")  # the skip is gone
    # the sum was the graph output: its name stays, as an Identity of the MLP's output
    assert model.graph.output[0].name == onnx.load(str(path)).graph.output[0].name
    [where] = made["skip_absorbed"]
    assert made["widths"][where] == made["widths_proved"][where] >= M
    assert made["note"].startswith("a drop-in replacement")
    assert {p.key for p in model.metadata_props} == {"absorb_formal", "absorb_formal.note"}
    if act is relu:  # the flip witness has integer weights: stored exactly
        assert made["max_rounding_rel_error"][where] == 0
    worst = same_outputs(path, tmp_path / "out" / "model.onnx", 1e-6)
    assert worst < (1e-12 if act is relu else 1e-6)
    check = made["runtime_check"]
    try:
        import onnxruntime  # noqa: F401
        assert check["max_rel_difference"] <= check["allowed"], check
    except ImportError:
        assert check == "not run: onnxruntime is not installed"


@pytest.mark.parametrize("norm", [layernorm_op, layernorm_torch], ids=["op", "decomposed"])
def test_a_post_layernorm_sublayer_keeps_its_norm_and_the_models_outputs(cli, tmp_path, norm):
    """BERT's FFN: MatMul+Add, erf gelu, MatMul+Add, the residual Add of the FFN's input,
    then LayerNormalization (ε 1e-12; the op, or decomposed as torch.onnx writes it below
    opset 17, where several nodes read the sum). The Add is removed, the norm reads the
    plain MLP (the projected block's witness, wider), and the whole model's output stays
    within float32 rounding of the original's."""
    b = Builder(D, M)
    h = layernorm_op(b, "x", "attention.output.LayerNorm")
    ffn = plain_mlp(b, h)
    y = norm(b, b.op("Add", [ffn, h]), "output.LayerNorm", eps=1e-12)
    path = save(b, y, tmp_path / "bert.onnx")
    scan = cli("scan", path, "--export", tmp_path / "out", "--json")
    assert scan.code == 0, scan.err
    [answer] = scan.json()["blocks"]
    assert answer["norm"]["placement"] == "post" and "projected" in answer["method"]
    model, made = record(tmp_path / "out")
    width = made["widths"]["mlp"]
    assert width == answer["min_width"][1] > M
    weights = {t.name: list(t.dims) for t in model.graph.initializer}
    assert weights["mlp.fc1.weight"] == [D, width] and weights["mlp.fc2.weight"] == [width, D]
    assert weights["mlp.fc1.bias"] == [width]
    readers = [n.op_type for n in model.graph.node if ffn in n.input]
    assert readers == (["LayerNormalization"] if norm is layernorm_op
                       else ["ReduceMean", "Sub"]), readers
    assert not adds_of(model, h)
    assert len(model.graph.node) == len(onnx.load(str(path)).graph.node) - 1
    # float32 weights: each rounded once, so the outputs move by a few float32 ulps at most
    worst = same_outputs(path, tmp_path / "out" / "model.onnx", 2e-6)
    assert 0 < made["max_rounding_rel_error"]["mlp"] < 2.0 ** -23
    # each sublayer's choice on screen (stderr beside --json), as for a safetensors export
    assert f"mlp: width {width} (" in scan.err and "largest |weight|" in scan.err, scan.err
    assert worst < 2e-6


def test_stacked_sublayers_each_read_the_one_before_without_its_sum(cli, tmp_path):
    """Two bare sublayers: the second read the first's residual sum; once that Add is gone
    it reads the first plain MLP's output."""
    b = Builder(D, M)
    first = b.op("Add", ["x", planted_mlp(b, "x", "h.0.mlp")])
    path = tmp_path / "stack.onnx"
    onnx.save(b.model(planted_mlp(b, first, "h.1.mlp", seed=8), residual=False), str(path))
    onnx.save(_with_second_residual(onnx.load(str(path)), first), str(path))
    scan = cli("scan", path, "--export", tmp_path / "out")
    assert scan.code == 0, scan.out + scan.err
    model, made = record(tmp_path / "out")
    assert made["skip_absorbed"] == ["h.0.mlp", "h.1.mlp"]
    assert not [n for n in model.graph.node if n.op_type == "Add"]
    assert made["max_rounding_rel_error"]["h.0.mlp"] == 0  # layer 1's witness is rounded
    assert made["max_rounding_rel_error"]["h.1.mlp"] < 2.0 ** -23
    same_outputs(path, tmp_path / "out" / "model.onnx", 1e-6)


def _with_second_residual(model: Any, first: str) -> Any:
    """The graph's output y becomes first + y (the second sublayer's residual)."""
    out = model.graph.output[0]
    model.graph.node.append(helper.make_node("Add", [first, out.name], ["y"], name="/res2"))
    out.name = "y"
    return model


def test_gemm_weights_stay_out_by_in_and_listed_graph_inputs_follow_the_new_shape(
        cli, tmp_path):
    """nn.Linear as Gemm(transB=1): the wider witness is stored out×in like the original;
    an initializer also listed as a graph input (older exporters) gets its new shape there."""
    b = Builder(D, M)
    model = b.model(planted_mlp(b, "x", "mlp", gemm=True))
    model.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                             for t in model.graph.initializer)
    path = tmp_path / "gemm.onnx"
    onnx.save(model, str(path))
    scan = cli("scan", path, "--export", tmp_path / "out")
    assert scan.code == 0, scan.err
    patched, made = record(tmp_path / "out")
    width = made["widths"]["mlp"]
    shapes = {t.name: list(t.dims) for t in patched.graph.initializer}
    assert shapes == {"mlp.fc1.weight": [width, D], "mlp.fc2.weight": [D, width]}
    listed = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim]
              for i in patched.graph.input if i.name in shapes}
    assert listed == shapes
    onnx.checker.check_model(patched)
    same_outputs(path, tmp_path / "out" / "model.onnx", 1e-12)


def test_other_tensors_in_external_data_are_copied_beside_the_model(cli, tmp_path):
    """A head weight large enough to be stored outside the model file: its data file is
    copied bit for bit beside the patched model, which reads it from there."""
    b = Builder(D, M)
    y = b.op("Add", ["x", planted_mlp(b, "x", "mlp")])
    head = b.op("MatMul", [y, b.init(np.random.default_rng(1).standard_normal((D, 300)),
                                     "head.weight")])
    model = b.model(head, residual=False, width=300)
    path = tmp_path / "model" / "ext.onnx"
    path.parent.mkdir()
    onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location="head.data", size_threshold=1024)
    scan = cli("scan", path, "--export", tmp_path / "out")
    assert scan.code == 0, scan.err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["head.data", "model.onnx"]
    assert (tmp_path / "out" / "head.data").read_bytes() == \
        (path.parent / "head.data").read_bytes()
    x = np.random.default_rng(4).standard_normal((64, D))
    before = run(onnx.load(str(path)), {"x": x}, str(path.parent))[head]
    after = run(onnx.load(str(tmp_path / "out" / "model.onnx")), {"x": x},
                str(tmp_path / "out"))[head]
    assert relative(before, after) < 1e-12


def test_weights_in_constant_nodes_are_rewritten_in_place(cli, tmp_path):
    b = Builder(D, M)
    path = tmp_path / "constants.onnx"
    onnx.save(b.model(planted_mlp(b, "x", "mlp", constants=True)), str(path))
    scan = cli("scan", path, "--export", tmp_path / "out")
    assert scan.code == 0, scan.err
    model, made = record(tmp_path / "out")
    width = made["widths"]["mlp"]
    constants = {n.output[0]: numpy_helper.to_array(n.attribute[0].t)
                 for n in model.graph.node if n.op_type == "Constant"}
    assert constants["mlp.fc1.weight"].shape == (D, width)
    assert not model.graph.initializer
    same_outputs(path, tmp_path / "out" / "model.onnx", 1e-12)


# ---- pre-norm: no skip-free form --------------------------------------------------------

def test_a_pre_norm_model_is_refused_and_export_bare_says_not_a_drop_in(cli, tmp_path):
    b = Builder(D, M)
    ln = layernorm_op(b, "x", "ln_2")
    path = tmp_path / "pre.onnx"
    onnx.save(b.model(planted_mlp(b, ln, "mlp")), str(path))  # x + MLP(LN(x))
    refused = cli("scan", path, "--export", tmp_path / "out")
    assert refused.code == 2 and "§10.2" in refused.err and "--export-bare" in refused.err
    assert not (tmp_path / "out").exists()
    bare = cli("scan", path, "--export", tmp_path / "bare", "--export-bare")
    assert bare.code == 0, bare.err
    model, made = record(tmp_path / "bare")
    assert made["note"].startswith("NOT A DROP-IN REPLACEMENT")
    assert made["runtime_check"] == "not run: onnxruntime is not installed" or \
        made["runtime_check"]["allowed"] is None  # measured, never held to the gate
    assert {p.key: p.value for p in model.metadata_props}["absorb_formal.note"] == made["note"]
    assert not adds_of(model, "x")
    # it is not the original model: the plain MLP computes LN(x) + MLP(LN(x)) without x
    x = np.random.default_rng(2).standard_normal((64, D)) * 2
    assert relative(outputs(onnx.load(str(path)), x), outputs(model, x)) > 1e-3


# ---- refusals: nothing written, before anything is decided ---------------------------------

def _refused(cli: Any, path: Path, out: Path, words: str) -> None:
    scan = cli("scan", path, "--export", out)
    assert scan.code == 2 and words in scan.err, scan.err
    assert "Traceback" not in scan.err and scan.out == "" and not out.exists(), scan.out


def test_a_weight_shared_with_another_node_is_refused_naming_it(cli, tmp_path):
    b = Builder(D, M)
    y = b.model(planted_mlp(b, "x", "mlp"))
    y.graph.node.append(helper.make_node("MatMul", ["x", "mlp.fc1.weight"], ["tied"]))
    y.graph.output.append(helper.make_tensor_value_info("tied", onnx.TensorProto.FLOAT,
                                                        [None, M]))
    onnx.save(y, str(tmp_path / "shared.onnx"))
    _refused(cli, tmp_path / "shared.onnx", tmp_path / "out",
             "tensor 'mlp.fc1.weight' is also read by a MatMul node")


def test_a_hidden_value_read_outside_the_mlp_is_refused(cli, tmp_path):
    b = Builder(D, M)
    model = b.model(planted_mlp(b, "x", "mlp"))
    hidden = next(n.output[0] for n in model.graph.node if n.op_type == "Relu")
    model.graph.output.append(helper.make_tensor_value_info(hidden, onnx.TensorProto.FLOAT,
                                                            [None, M]))
    onnx.save(model, str(tmp_path / "leak.onnx"))
    _refused(cli, tmp_path / "leak.onnx", tmp_path / "out",
             f"value {hidden!r} of the MLP is a graph output")


def test_an_mlp_output_read_besides_its_residual_is_refused(cli, tmp_path):
    b = Builder(D, M)
    mlp_out = planted_mlp(b, "x", "mlp")
    model = b.model(mlp_out)
    model.graph.output.append(helper.make_tensor_value_info(mlp_out, onnx.TensorProto.FLOAT,
                                                            [None, D]))
    onnx.save(model, str(tmp_path / "two.onnx"))
    _refused(cli, tmp_path / "two.onnx", tmp_path / "out", "besides the residual Add")


def test_an_mlp_tensor_in_external_data_is_refused_naming_it(cli, tmp_path):
    b = Builder(D, M)
    model = b.model(planted_mlp(b, "x", "mlp"))
    onnx.save(model, str(tmp_path / "ext.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="ext.data", size_threshold=0)
    _refused(cli, tmp_path / "ext.onnx", tmp_path / "out",
             "tensor 'mlp.fc1.weight' is stored as external data")


def test_the_runtime_comparison_refuses_models_that_compute_something_else(tmp_path):
    """Two models that differ (one weight changed) are beyond the runtime bound, and the
    check refuses; measured only (allowed None), it records the difference."""
    pytest.importorskip("onnxruntime")
    from absorb_formal.export.onnx_patch import runtime_bound, runtime_check
    from absorb_formal.scanner.found import ScanError

    paths = []
    for seed in (7, 9):
        b = Builder(D, M)
        paths.append(tmp_path / f"m{seed}.onnx")
        onnx.save(b.model(planted_mlp(b, "x", "mlp", seed=seed)), str(paths[-1]))
    assert 1e-6 < runtime_bound("float32") < 1e-3
    with pytest.raises(ScanError, match="the rewrite is wrong; nothing written"):
        runtime_check(paths[0], paths[1], runtime_bound("float32"))
    measured = runtime_check(paths[0], paths[1], None)
    assert measured["max_rel_difference"] > 1e-2 and measured["allowed"] is None
    assert runtime_check(paths[0], paths[0], runtime_bound("float32"))[
        "max_rel_difference"] == 0


def test_float16_mlp_tensors_are_refused_naming_them(cli, tmp_path):
    """The witness is rounded to float32, float64 or bfloat16; a FLOAT16 weight would need
    a format the rounding does not write."""
    b = Builder(D, M)
    model = b.model(planted_mlp(b, "x", "mlp"))
    for tensor in model.graph.initializer:
        tensor.CopyFrom(numpy_helper.from_array(
            numpy_helper.to_array(tensor).astype(np.float16), tensor.name))
    onnx.save(model, str(tmp_path / "half.onnx"))
    _refused(cli, tmp_path / "half.onnx", tmp_path / "out",
             "tensor 'mlp.fc1.weight' is FLOAT16; the witness is rounded to FLOAT, DOUBLE or "
             "BFLOAT16 only")
