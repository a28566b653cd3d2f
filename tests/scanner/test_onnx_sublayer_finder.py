"""The ONNX finder (`scanner/onnx_find.py`): MLP sublayers found by graph pattern in models
built with onnx.helper — each activation arrangement, MatMul+Add, Gemm (transB), Transpose
of a weight, Identity nodes, gated blocks — checked numerically against a small numpy
interpreter of the graph; near misses (constants that merely look like gelu's) skipped with
the reason."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from absorb_formal.scanner.found import FoundBlock, TensorRef  # noqa: E402
from absorb_formal.scanner.onnx_find import find_blocks  # noqa: E402
from absorb_formal.weights.arrays import load_array  # noqa: E402

from ..onnx_eval import run  # noqa: E402

SQRT2 = math.sqrt(2)
SQRT_2_PI = math.sqrt(2 / math.pi)


class Builder:
    def __init__(self, d: int = 4, m: int = 8, seed: int = 0):
        self.d, self.m = d, m
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def const(self, value: float, dtype: Any = np.float32, node: bool = False) -> str:
        name = self.fresh("c")
        tensor = numpy_helper.from_array(np.array(value, dtype=dtype), name)
        if node:
            self.nodes.append(helper.make_node("Constant", [], [name], value=tensor))
        else:
            self.inits.append(tensor)
        return name

    def init(self, array: np.ndarray, name: str) -> str:
        self.inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def op(self, op_type: str, inputs: list[str], domain: str = "", **attrs: Any) -> str:
        out = self.fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"/{out}",
                                           domain=domain or None, **attrs))
        return out

    def linear(self, x: str, fan_in: int, fan_out: int, prefix: str, style: str = "matmul",
               bias: bool = True) -> str:
        w = self.rng.standard_normal((fan_out, fan_in)) / math.sqrt(fan_in)  # out×in
        b = self.rng.standard_normal(fan_out) * 0.1
        if style == "gemm":  # nn.Linear exported as Gemm(x, W, b, transB=1)
            inputs = [x, self.init(w, f"{prefix}.weight")]
            if bias:
                inputs.append(self.init(b, f"{prefix}.bias"))
            return self.op("Gemm", inputs, transB=1)
        if style == "transpose":  # MatMul(x, Transpose(W)) with W out×in
            wt = self.op("Transpose", [self.init(w, f"{prefix}.weight")], perm=[1, 0])
            h = self.op("MatMul", [x, wt])
        else:  # MatMul(x, W) with W in×out (Conv1D, or a pre-transposed nn.Linear)
            h = self.op("MatMul", [x, self.init(w.T.copy(), f"{prefix}.weight")])
        if not bias:
            return h
        b_name = self.init(b, f"{prefix}.bias")
        return self.op("Add", [b_name, h] if style == "bias_first" else [h, b_name])

    def model(self, output: str, residual: bool = True, opset: int = 17,
              width: int | None = None) -> Any:
        """x → output (+ x when residual); `width`: the output's, when not d."""
        y = self.op("Add", ["x", output]) if residual else output
        value = helper.make_tensor_value_info
        graph = helper.make_graph(self.nodes, "g", [value("x", TensorProto.FLOAT, [None, self.d])],
                                  [value(y, TensorProto.FLOAT, [None, width or self.d])],
                                  self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


# ---- activations as exporters write them ------------------------------------------------------

def relu(b: Builder, h: str) -> str:
    return b.op("Relu", [h])


def gelu_torch(b: Builder, h: str) -> str:  # torch: Div √2 → Erf → Add 1 → Mul x → Mul ½
    e = b.op("Erf", [b.op("Div", [h, b.const(SQRT2)])])
    return b.op("Mul", [b.op("Mul", [h, b.op("Add", [e, b.const(1.0)])]), b.const(0.5)])


def gelu_halves_first(b: Builder, h: str) -> str:  # ½x first, Mul by 1/√2, Constant nodes
    half = b.op("Mul", [b.const(0.5, node=True), h])
    e = b.op("Erf", [b.op("Mul", [h, b.const(1 / SQRT2, node=True)])])
    return b.op("Mul", [half, b.op("Add", [b.const(1.0, node=True), e])])


def gelu_double_constants(b: Builder, h: str) -> str:  # float64 constants, Div by 2
    e = b.op("Erf", [b.op("Div", [h, b.const(SQRT2, np.float64)])])
    inner = b.op("Add", [e, b.const(1.0, np.float64)])
    return b.op("Div", [b.op("Mul", [inner, h]), b.const(2.0, np.float64)])


def gelu_tanh_hf(b: Builder, h: str) -> str:  # HF NewGELU: Pow 3, constants apart
    cube = b.op("Mul", [b.const(0.044715), b.op("Pow", [h, b.const(3.0)])])
    t = b.op("Tanh", [b.op("Mul", [b.const(SQRT_2_PI), b.op("Add", [h, cube])])])
    return b.op("Mul", [b.op("Mul", [b.const(0.5), h]), b.op("Add", [b.const(1.0), t])])


def gelu_tanh_folded(b: Builder, h: str) -> str:  # x·x·x, √(2/π)·0.044715 folded
    cube = b.op("Mul", [b.op("Mul", [h, h]), h])
    arg = b.op("Add", [b.op("Mul", [h, b.const(SQRT_2_PI)]),
                       b.op("Mul", [cube, b.const(SQRT_2_PI * 0.044715)])])
    t = b.op("Tanh", [arg])
    return b.op("Mul", [h, b.op("Mul", [b.op("Add", [t, b.const(1.0)]), b.const(0.5)])])


def silu(b: Builder, h: str) -> str:
    return b.op("Mul", [h, b.op("Sigmoid", [h])])


def silu_scaled_by_one(b: Builder, h: str) -> str:  # x·Sigmoid(1.0·x): a Constant node 1.0
    return b.op("Mul", [b.op("Sigmoid", [b.op("Mul", [b.const(1.0, node=True), h])]), h])


def gelu_op(b: Builder, h: str) -> str:
    return b.op("Gelu", [h])


def gelu_op_tanh(b: Builder, h: str) -> str:
    return b.op("Gelu", [h], approximate="tanh")


def tanh(b: Builder, h: str) -> str:
    return b.op("Tanh", [h])


def leaky(b: Builder, h: str) -> str:
    return b.op("LeakyRelu", [h], alpha=0.25)


def fast_gelu(b: Builder, h: str) -> str:
    return b.op("FastGelu", [h], domain="com.microsoft")


def with_identity(b: Builder, h: str) -> str:
    return b.op("Identity", [b.op("Relu", [b.op("Identity", [h])])])


PLAIN = {
    "relu": (relu, "relu"), "gelu_torch": (gelu_torch, "gelu"),
    "gelu_halves_first": (gelu_halves_first, "gelu"),
    "gelu_double_constants": (gelu_double_constants, "gelu"),
    "gelu_tanh_hf": (gelu_tanh_hf, "gelu_tanh"),
    "gelu_tanh_folded": (gelu_tanh_folded, "gelu_tanh"),
    "silu": (silu, "silu"), "silu_scaled_by_one": (silu_scaled_by_one, "silu"),
    "gelu_op": (gelu_op, "gelu"),
    "gelu_op_tanh": (gelu_op_tanh, "gelu_tanh"),
    "tanh": (tanh, "tanh"), "identity_nodes": (with_identity, "relu"),
    "leaky_relu": (leaky, "leaky_relu(1/4)"), "fast_gelu": (fast_gelu, "gelu_tanh"),
}


def mlp(tmp_path: Path, act: Any, style: str = "matmul", bias: bool = True,
        residual: bool = True, name: str = "m.onnx", d: int = 4, m: int = 8) -> Path:
    b = Builder(d, m)
    h = b.linear("x", d, m, "h.0.mlp.c_fc", style, bias)
    y = b.linear(act(b, h), m, d, "h.0.mlp.c_proj", style, bias)
    path = tmp_path / name
    onnx.save(b.model(y, residual, opset=20), str(path))
    return path


# ---- the block a FoundBlock describes, in float64 ----------------------------------------------

def _array(folder: Path, ref: TensorRef | None, vector: bool = False) -> np.ndarray | None:
    if ref is None:
        return None
    array = load_array(folder / ref.file, ref.key, vector=vector).array()
    array = np.asarray(array, dtype=np.float64)
    return array.T if ref.transpose else array


SIGMA = {
    "relu": lambda z: np.maximum(z, 0), "leaky_relu(1/4)": lambda z: np.where(z >= 0, z, z / 4),
    "tanh": np.tanh, "sigmoid": lambda z: 1 / (1 + np.exp(-z)),
    "silu": lambda z: z / (1 + np.exp(-z)),
    "gelu": lambda z: 0.5 * z * (1 + np.vectorize(math.erf)(z / math.sqrt(2))),
    "gelu_tanh": lambda z: 0.5 * z * (1 + np.tanh(SQRT_2_PI * (z + 0.044715 * z**3))),
}
GATES = {"swiglu": "silu", "geglu": "gelu", "reglu": "relu", "glu": "sigmoid"}


def block_output(folder: Path, block: FoundBlock, x: np.ndarray) -> np.ndarray:
    up, down = _array(folder, block.up), _array(folder, block.down)
    assert up.shape == (block.width, block.dim) and down.shape == (block.dim, block.width)
    ub, db = _array(folder, block.up_bias, True), _array(folder, block.down_bias, True)
    z = x @ up.T + (0 if ub is None else ub)
    if block.gate is not None:
        gate, gb = _array(folder, block.gate), _array(folder, block.gate_bias, True)
        g = x @ gate.T + (0 if gb is None else gb)
        hidden = SIGMA[GATES[block.activation]](g) * z
    else:
        hidden = SIGMA[block.activation](z)
    return hidden @ down.T + (0 if db is None else db)


def agrees(path: Path, block: FoundBlock) -> None:
    x = np.random.default_rng(3).standard_normal((32, block.dim))
    model = onnx.load(str(path))
    values = run(model, {"x": x}, str(path.parent))
    output = values[model.graph.output[0].name]
    np.testing.assert_allclose(output, x + block_output(path.parent, block, x), rtol=1e-5,
                               atol=1e-5)


# ---- found -----------------------------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(PLAIN))
def test_each_activation_arrangement_is_found(tmp_path, case):
    act, expected = PLAIN[case]
    path = mlp(tmp_path, act)
    found, skipped = find_blocks(path)
    assert [b.activation for b in found] == [expected], skipped
    [block] = found
    assert (block.dim, block.width, block.name) == (4, 8, "h_0_mlp")
    assert block.up == TensorRef("m.onnx", "h.0.mlp.c_fc.weight", True)  # in×out: .T
    assert block.up_bias == TensorRef("m.onnx", "h.0.mlp.c_fc.bias")
    assert not any("residual" in n for n in block.notes)
    assert skipped == []
    agrees(path, block)


@pytest.mark.parametrize("style", ["gemm", "transpose", "bias_first"])
def test_gemm_transposed_weights_and_bias_order(tmp_path, style):
    path = mlp(tmp_path, gelu_torch, style=style)
    [block], _ = find_blocks(path)
    assert block.activation == "gelu"
    assert block.up.transpose is (style == "bias_first")  # nn.Linear layout: no .T
    agrees(path, block)


def test_without_biases_and_without_a_residual(tmp_path):
    path = mlp(tmp_path, relu, bias=False, residual=False)
    [block], _ = find_blocks(path)
    assert not block.biased
    assert any("no residual Add" in n for n in block.notes)
    x = np.random.default_rng(1).standard_normal((8, 4))
    model = onnx.load(str(path))
    out = run(model, {"x": x})[model.graph.output[0].name]
    np.testing.assert_allclose(out, block_output(tmp_path, block, x), rtol=1e-6)


def gated(tmp_path: Path, act: Any, order: str = "act_first", style: str = "transpose",
          bias: bool = False) -> Path:
    b = Builder(4, 8)
    g = act(b, b.linear("x", 4, 8, "model.layers.0.mlp.gate_proj", style, bias))
    u = b.linear("x", 4, 8, "model.layers.0.mlp.up_proj", style, bias)
    hidden = b.op("Mul", [g, u] if order == "act_first" else [u, g])
    y = b.linear(hidden, 8, 4, "model.layers.0.mlp.down_proj", style, bias)
    path = tmp_path / "gated.onnx"
    onnx.save(b.model(y), str(path))
    return path


@pytest.mark.parametrize("act, name, order", [(silu, "swiglu", "act_first"),
                                              (silu, "swiglu", "up_first"),
                                              (gelu_torch, "geglu", "act_first"),
                                              (relu, "reglu", "up_first")])
def test_gated_blocks(tmp_path, act, name, order):
    path = gated(tmp_path, act, order)
    found, skipped = find_blocks(path)
    assert [b.activation for b in found] == [name], skipped
    [block] = found
    assert block.name == "model_layers_0_mlp"
    assert block.gate == TensorRef("gated.onnx", "model.layers.0.mlp.gate_proj.weight", False)
    agrees(path, block)


def test_gated_blocks_with_biases_and_in_out_weights(tmp_path):
    path = gated(tmp_path, gelu_op, style="matmul", bias=True)
    [block], _ = find_blocks(path)
    assert block.activation == "geglu" and block.gate.transpose and block.gate_bias is not None
    agrees(path, block)


def test_a_gelu_tanh_gate_is_skipped_with_why(tmp_path):
    found, skipped = find_blocks(gated(tmp_path, gelu_tanh_hf))
    assert found == []
    assert any("gelu_tanh, which has no gated activation" in s.why for s in skipped), skipped


def test_two_layers_and_attention_like_linears(tmp_path):
    """Two MLP sublayers, and a linear layer outside any MLP (reported as skipped)."""
    b = Builder(4, 8)
    x = "x"
    for layer in range(2):
        h = b.linear(x, 4, 8, f"h.{layer}.mlp.c_fc")
        y = b.linear(gelu_tanh_hf(b, h), 8, 4, f"h.{layer}.mlp.c_proj")
        x = b.op("Add", [x, y])
    head = b.linear(x, 4, 3, "lm_head", bias=False)
    path = tmp_path / "two.onnx"
    onnx.save(b.model(head, residual=False, width=3), str(path))
    found, skipped = find_blocks(path)
    assert [(f.name, f.activation) for f in found] == [("h_0_mlp", "gelu_tanh"),
                                                        ("h_1_mlp", "gelu_tanh")]
    assert len(skipped) == 1 and "'lm_head.weight', 4 → 3" in skipped[0].why, skipped
    assert all(not any("residual" in n for n in f.notes) for f in found)


def test_external_data_models_are_scanned(tmp_path):
    b = Builder(4, 8)
    y = b.linear(gelu_torch(b, b.linear("x", 4, 8, "fc1")), 8, 4, "fc2")
    path = tmp_path / "ext.onnx"
    onnx.save(b.model(y), str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location="ext.bin", size_threshold=0)  # constants go out too
    [block], _ = find_blocks(path)
    assert block.activation == "gelu" and block.name == "fc1"
    agrees(path, block)


# ---- as exporters write them --------------------------------------------------------------------

def paddle_gelu(b: Builder, h: str) -> str:
    """paddle2onnx's gelu: shape-[1] Constant nodes, x/√2 → Erf → +1 → ·x → ·½."""
    def const(value: float) -> str:
        name = b.fresh("p2o.Constant")
        b.nodes.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(
            np.array([value], np.float32))))
        return name
    e = b.op("Erf", [b.op("Div", [h, const(SQRT2)])])
    return b.op("Mul", [b.op("Mul", [h, b.op("Add", [e, const(1.0)])]), const(0.5)])


def torch_tanh_gelu(b: Builder, h: str) -> str:
    """torch.onnx's gelu(approximate='tanh'): x·(x·x), √(2/π) as √2·(2/√π)·½ folded."""
    cube = b.op("Mul", [h, b.op("Mul", [h, h])])
    inner = b.op("Mul", [b.const(SQRT_2_PI), b.op("Add", [h, b.op("Mul", [b.const(0.044715),
                                                                          cube])])])
    t = b.op("Add", [b.const(1.0), b.op("Tanh", [inner])])
    return b.op("Mul", [b.op("Mul", [b.const(0.5), h]), t])


def test_paddle2onnx_graphs_are_found_and_named_by_their_weights(tmp_path):
    """paddle2onnx: node names p2o.*, weights linear_N.w_0 stored in×out behind Identity
    nodes, biases linear_N.b_0: the block is named by its weights, never by its nodes."""
    b = Builder(4, 8)
    x = "x"
    for layer in range(2):
        names = [f"linear_{2 * layer + i}" for i in range(2)]
        h = x
        for i, (fan_in, fan_out) in enumerate(((4, 8), (8, 4))):
            w = b.rng.standard_normal((fan_in, fan_out)).astype(np.float32)
            weight = b.op("Identity", [b.init(w, f"{names[i]}.w_0")])
            h = b.op("MatMul", [h, weight])
            h = b.op("Add", [h, b.init(b.rng.standard_normal(fan_out), f"{names[i]}.b_0")])
            if i == 0:
                h = paddle_gelu(b, h)
        x = b.op("Add", [x, h])
    for i, node in enumerate(b.nodes):
        node.name = f"p2o.{node.op_type}.{i}"
    path = tmp_path / "paddle.onnx"
    onnx.save(b.model(x, residual=False), str(path))
    found, skipped = find_blocks(path)
    assert [(f.name, f.where, f.activation) for f in found] == [
        ("linear_0", "linear_0.w_0 → linear_1.w_0", "gelu"),
        ("linear_2", "linear_2.w_0 → linear_3.w_0", "gelu")], skipped
    assert skipped == []
    assert not any("p2o" in f.name or "p2o" in f.where for f in found)
    x_in = np.random.default_rng(2).standard_normal((16, 4))
    model = onnx.load(str(path))
    out = run(model, {"x": x_in})[model.graph.output[0].name]
    y = x_in + block_output(tmp_path, found[0], x_in)
    np.testing.assert_allclose(out, y + block_output(tmp_path, found[1], y), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("generated", ["onnx::MatMul_{}", "val_{}"])
def test_torch_tanh_gelu_and_generated_weight_names(tmp_path, generated):
    """torch.onnx writes x·(x·x) for the cube, and names a pre-transposed nn.Linear weight
    `onnx::MatMul_N` (TorchScript exporter) or `val_N` (dynamo): the block is named by its
    biases' module (`fc1.bias` → `fc1`)."""
    b = Builder(4, 8)
    w1 = b.init(b.rng.standard_normal((4, 8)), generated.format(17))
    h = b.op("Add", [b.init(b.rng.standard_normal(8), "fc1.bias"), b.op("MatMul", ["x", w1])])
    w2 = b.init(b.rng.standard_normal((8, 4)), generated.format(18))
    y = b.op("Add", [b.init(b.rng.standard_normal(4), "fc2.bias"),
                     b.op("MatMul", [torch_tanh_gelu(b, h), w2])])
    path = tmp_path / "torch_tanh.onnx"
    onnx.save(b.model(y), str(path))
    [block], skipped = find_blocks(path)
    assert (block.name, block.where, block.activation) == \
        ("fc1", "fc1.bias → fc2.bias", "gelu_tanh"), skipped
    assert block.up == TensorRef("torch_tanh.onnx", generated.format(17), True)
    agrees(path, block)


def test_without_biases_a_generated_weight_name_gives_a_numbered_block(tmp_path):
    b = Builder(4, 8)
    h = b.op("MatMul", ["x", b.init(b.rng.standard_normal((4, 8)), "val_6")])
    y = b.op("MatMul", [relu(b, h), b.init(b.rng.standard_normal((8, 4)), "val_9")])
    [block], _ = find_blocks(_saved(b, y, tmp_path / "dynamo.onnx"))
    assert (block.name, block.where) == ("mlp0", "val_6 → val_9")


def _saved(b: Builder, y: str, path: Path) -> Path:
    onnx.save(b.model(y), str(path))
    return path


def test_an_activation_that_contradicts_the_graph_needs_force(tmp_path):
    from absorb_formal.scanner.find import find_blocks as scan_blocks
    from absorb_formal.scanner.find import open_checkpoint
    from absorb_formal.scanner.found import ScanError

    checkpoint = open_checkpoint(mlp(tmp_path, relu))
    with pytest.raises(ScanError) as error:
        scan_blocks(checkpoint, "gelu")
    message = str(error.value)
    assert "--activation gelu (gelu) contradicts the graph, which computes relu" in message
    assert "--force-activation" in message
    [block], _ = scan_blocks(checkpoint, "gelu", force=True)
    assert block.activation == "gelu"
    [block], _ = scan_blocks(checkpoint, "relu")
    assert block.activation == "relu"


# ---- near misses: skipped, with the reason ----------------------------------------------------

def erf_scaled(c: float) -> Any:
    def act(b: Builder, h: str) -> str:
        e = b.op("Erf", [b.op("Div", [h, b.const(c)])])
        return b.op("Mul", [b.op("Mul", [h, b.op("Add", [e, b.const(1.0)])]), b.const(0.5)])
    return act


def erf_outer(half: float, one: float) -> Any:
    def act(b: Builder, h: str) -> str:
        e = b.op("Erf", [b.op("Div", [h, b.const(SQRT2)])])
        return b.op("Mul", [b.op("Mul", [h, b.op("Add", [e, b.const(one)])]), b.const(half)])
    return act


def tanh_with(a: float, c: float) -> Any:
    def act(b: Builder, h: str) -> str:
        cube = b.op("Mul", [b.const(c), b.op("Pow", [h, b.const(3.0)])])
        t = b.op("Tanh", [b.op("Mul", [b.const(a), b.op("Add", [h, cube])])])
        return b.op("Mul", [b.op("Mul", [b.const(0.5), h]), b.op("Add", [b.const(1.0), t])])
    return act


def quick_gelu(b: Builder, h: str) -> str:  # x·sigmoid(1.702x): not silu
    return b.op("Mul", [h, b.op("Sigmoid", [b.op("Mul", [h, b.const(1.702)])])])


def erf_of_square(b: Builder, h: str) -> str:
    e = b.op("Erf", [b.op("Div", [b.op("Mul", [h, h]), b.const(SQRT2)])])
    return b.op("Mul", [b.op("Mul", [h, b.op("Add", [e, b.const(1.0)])]), b.const(0.5)])


def float16_sqrt2_in_float32(b: Builder, h: str) -> str:  # √2 rounded to float16, stored f32
    return erf_scaled(float(np.float16(SQRT2)))(b, h)


NEAR_MISSES = {
    "√2 written as 1.41": (erf_scaled(1.41), "not x/√2"),
    "√2 one float32 step off twice": (erf_scaled(float(np.nextafter(np.nextafter(
        np.float32(SQRT2), np.float32(2)), np.float32(2)))), "not x/√2"),
    "√2 at float16 precision in a float32": (float16_sqrt2_in_float32, "not x/√2"),
    "½ written 0.5001": (erf_outer(0.5001, 1.0), "not exactly 1/2"),
    "1 written 1.0001": (erf_outer(0.5, 1.0001), "not exactly 1"),
    "0.044715 written 0.045": (tanh_with(SQRT_2_PI, 0.045), "x³ coefficient"),
    "√(2/π) written 0.8": (tanh_with(0.8, 0.044715), "x coefficient"),
    "quick gelu": (quick_gelu, "x·sigmoid(c·x) with c = 1.70200002 (from 'c_3') is not an "
                   "activation the language has exactly (silu needs c = 1)"),
    "sigmoid of x²": (lambda b, h: b.op("Mul", [h, b.op("Sigmoid", [b.op("Mul", [h, h])])]),
                      "sigmoid argument is not c·x"),
    "erf of x²": (erf_of_square, "not x/√2"),
    "√2 written NaN": (erf_scaled(float("nan")), "not a finite number"),
}


@pytest.mark.parametrize("case", sorted(NEAR_MISSES))
def test_look_alikes_are_skipped_with_the_reason(tmp_path, case):
    act, why = NEAR_MISSES[case]
    found, skipped = find_blocks(mlp(tmp_path, act))
    assert found == [], found
    assert any(why in s.why for s in skipped), skipped


def test_one_ulp_either_way_is_the_exporters_rounding_and_accepted(tmp_path):
    """√2 as the float32 next to the nearest one (a double rounding) is still gelu's."""
    up = float(np.nextafter(np.float32(SQRT2), np.float32(2)))
    found, _ = find_blocks(mlp(tmp_path, erf_scaled(up)))
    assert [b.activation for b in found] == ["gelu"]


def test_shapes_and_biases_that_do_not_fit_are_skipped(tmp_path):
    b = Builder(4, 8)
    h = b.linear("x", 4, 8, "fc1")
    y = b.linear(relu(b, h), 8, 3, "fc2")  # 4 → 3: no identity skip
    path = tmp_path / "wide.onnx"
    onnx.save(b.model(y, residual=False, width=3), str(path))
    found, skipped = find_blocks(path)
    assert found == [] and any("mapping 4 values to 3" in s.why for s in skipped)

    b = Builder(4, 8)
    h = b.op("MatMul", ["x", b.init(np.ones((4, 8)), "fc1.weight")])
    h = b.op("Add", [h, b.op("Relu", ["x"])])  # a "bias" computed from the input
    y = b.linear(relu(b, h), 8, 4, "fc2")
    path = tmp_path / "computed_bias.onnx"
    onnx.save(b.model(y), str(path))
    found, skipped = find_blocks(path)
    assert all(block.up_bias is None or block.up_bias.key != h for block in found)


def test_a_weight_in_a_constant_node_that_is_not_read_is_skipped_with_why(tmp_path):
    b = Builder(4, 8)
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.ones(2, np.float32), "v"),
        numpy_helper.from_array(np.array([0, 5], np.int64), "i"), [4, 8])
    b.nodes.append(helper.make_node("Constant", [], ["w_sparse"], sparse_value=sparse))
    y = b.linear(relu(b, b.op("MatMul", ["x", "w_sparse"])), 8, 4, "fc2")
    found, skipped = find_blocks(_saved(b, y, tmp_path / "sparse.onnx"))
    assert found == []
    assert any("whose weight is not read" in s.why and "sparse_value" in s.why
               for s in skipped), skipped


def test_weights_and_biases_in_constant_nodes_are_found_and_loaded_by_output_name(tmp_path):
    """Exporters keep weights in Constant nodes too (behind Identity nodes): each is loaded
    by the Constant's output name, and the block computes what the graph does."""
    b = Builder(4, 8)
    rng = np.random.default_rng(5)
    w1 = b.const(rng.standard_normal((4, 8)), node=True)  # in×out, as MatMul reads it
    b1 = b.const(rng.standard_normal(8), node=True)
    h = b.op("Add", [b.op("MatMul", ["x", b.op("Identity", [w1])]), b1])
    w2 = b.const(rng.standard_normal((8, 4)), node=True)
    y = b.op("MatMul", [silu(b, h), w2])
    path = tmp_path / "const_weights.onnx"
    onnx.save(b.model(y), str(path))
    found, skipped = find_blocks(path)
    assert [(f.activation, f.up.key, f.up_bias.key, f.down.key) for f in found] == \
        [("silu", w1, b1, w2)], skipped
    agrees(path, found[0])


def test_torch_export_if_torch_is_installed(tmp_path):
    torch = pytest.importorskip("torch")

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 4)
            self.act = torch.nn.GELU()

        def forward(self, x: Any) -> Any:
            return x + self.fc2(self.act(self.fc1(x)))

    path = tmp_path / "torch.onnx"
    with warnings.catch_warnings():  # torch >= 2.9 warns that this exporter is the legacy one
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(Block(), (torch.randn(2, 4),), str(path), input_names=["x"],
                          dynamo=False)
    [block], _ = find_blocks(path)
    assert block.activation == "gelu" and (block.dim, block.width) == (4, 8)
    agrees(path, block)


def spec_of(block: FoundBlock) -> str:
    """The block as a spec (as scan writes one): every tensor a load of an initializer."""
    lines = [f"block {block.name} {{", f"    activation {block.activation}",
             f"    dim {block.dim}  width {block.width}"]
    lines += ["    bias"] if block.biased else []
    for field in ("up", "gate", "down", "up_bias", "gate_bias", "down_bias"):
        ref = getattr(block, field)
        if ref is not None:
            lines.append(f'    {field} = load("{ref.file}", "{ref.key}"){".T" * ref.transpose}')
    return "\n".join(lines + ["}", f"query {block.name}", ""])


@pytest.mark.parametrize("case", ["relu", "gelu_tanh_hf"])
def test_a_found_block_is_a_spec_the_prover_decides(cli, tmp_path, case):
    path = mlp(tmp_path, PLAIN[case][0])
    [block], _ = find_blocks(path)
    spec = tmp_path / "found.mlp"
    spec.write_text(spec_of(block), encoding="utf-8")
    run = cli("--timeout", "20", spec)
    assert run.code in (0, 3), run.out + run.err  # decided or unknown, never a spec error
    assert "decided: query h_0_mlp" in run.out, run.out


def test_initializers_listed_as_graph_inputs_are_read_and_noted(tmp_path):
    """Older exporters list every initializer as a graph input too (a default a runtime
    may override): the stored values are read, and the block's notes say so."""
    b = Builder(4, 8)
    y = b.linear(gelu_torch(b, b.linear("x", 4, 8, "fc1")), 8, 4, "fc2")
    model = b.model(y)
    model.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                             for t in model.graph.initializer)
    path = tmp_path / "ir3.onnx"
    onnx.save(model, str(path))
    [block], _ = find_blocks(path)
    assert block.activation == "gelu"
    assert any("'fc1.weight' is also a graph input" in n for n in block.notes), block.notes


def test_a_malformed_graph_with_cycles_ends(tmp_path):
    b = Builder(4, 8)
    h = b.linear("x", 4, 8, "fc1")
    b.nodes.append(helper.make_node("Identity", ["loop"], ["loop"]))
    b.nodes.append(helper.make_node("Mul", ["m2", h], ["m1"]))
    b.nodes.append(helper.make_node("Mul", ["m1", "loop"], ["m2"]))
    y = b.linear("m1", 8, 4, "fc2")
    path = tmp_path / "cycle.onnx"
    onnx.save(b.model(y), str(path))
    found, skipped = find_blocks(path)
    assert found == []


def test_unreadable_models_and_exports_are_refused_before_anything_is_decided(cli, tmp_path):
    """A truncated model is said to be truncated or not ONNX (not a protobuf DecodeError);
    --export of an ONNX model whose graph has no skip to remove is refused before the scan
    runs, so no table is printed; a folder of several models asks which one."""
    path = mlp(tmp_path, relu, residual=False, name="plain.onnx")
    run = cli("scan", path, "--export", tmp_path / "out")
    assert run.code == 2 and "no residual Add of the sublayer's input" in run.err, run.err
    assert run.out == "" and not (tmp_path / "out").exists(), run.out  # nothing was decided
    path = mlp(tmp_path, relu)
    cut = tmp_path / "cut" / "m.onnx"
    cut.parent.mkdir()
    cut.write_bytes(path.read_bytes()[:-7])
    run = cli("scan", cut)
    assert run.code == 2 and "'m.onnx' is not a readable ONNX model: truncated or not ONNX" \
        in run.err and "Traceback" not in run.err, run.err
    mlp(tmp_path / "cut", relu, name="other.onnx")
    run = cli("scan", tmp_path / "cut")
    assert run.code == 2 and "2 .onnx models (m.onnx, other.onnx): name the one to scan" \
        in run.err, run.err


def test_corrupted_models_are_refused_or_scanned_never_crash(tmp_path):
    """Byte flips in models of every pattern: find_blocks returns, or raises ScanError (not
    a model); 6000 flips were run by hand, 300 here."""
    import random

    from absorb_formal.scanner.found import ScanError

    bases = [mlp(tmp_path, gelu_tanh_hf, name="a.onnx").read_bytes(),
             mlp(tmp_path, gelu_torch, style="gemm", name="b.onnx").read_bytes(),
             gated(tmp_path, silu).read_bytes(),
             mlp(tmp_path, leaky, style="transpose", name="c.onnx").read_bytes()]
    rng = random.Random(3)
    outcomes = set()
    for _ in range(300):
        data = bytearray(rng.choice(bases))
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] ^= rng.randint(1, 255)
        path = tmp_path / "f.onnx"
        path.write_bytes(bytes(data))
        try:
            found, _ = find_blocks(path)
            outcomes.add(len(found))
        except ScanError:
            outcomes.add("refused")
    assert outcomes >= {0, 1, "refused"}
