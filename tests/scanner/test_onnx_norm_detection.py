"""The norm beside each ONNX MLP sublayer (`scanner/onnx_norms.py`, `FoundBlock.norm`): the
op (LayerNormalization, SimplifiedLayerNormalization) or the decomposed subgraph exporters
write, its ε as the exact value of the stored float, γ and β, and its placement (pre, post,
sandwich) read from the graph. Each found arrangement is checked numerically: the sublayer
the FoundBlock and its FoundNorm describe computes what the graph computes."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from absorb_formal.language.numbers import parse_decimal  # noqa: E402
from absorb_formal.scanner.found import FoundBlock, FoundNorm, TensorRef  # noqa: E402
from absorb_formal.scanner.onnx_find import find_blocks  # noqa: E402

from ..onnx_eval import run  # noqa: E402
from .test_onnx_sublayer_finder import Builder, _array, block_output, gelu_torch, silu  # noqa: E402

EPS32 = "0.00000999999974737875163555145263671875"  # the float32 nearest 1e-5, exactly
EPS32_6 = "0.0000009999999974752427078783512115478515625"  # the float32 nearest 1e-6


# ---- norms as exporters write them --------------------------------------------------------------

def scale_shift(b: Builder, prefix: str, shift: bool = True) -> tuple[str, str | None]:
    gamma = b.init(1 + 0.1 * b.rng.standard_normal(b.d), f"{prefix}.weight")
    beta = b.init(0.1 * b.rng.standard_normal(b.d), f"{prefix}.bias") if shift else None
    return gamma, beta


def layernorm_op(b: Builder, x: str, prefix: str, eps: float | None = None) -> str:
    gamma, beta = scale_shift(b, prefix)
    attrs = {} if eps is None else {"epsilon": eps}
    return b.op("LayerNormalization", [x, gamma, beta], axis=-1, **attrs)


def mean(b: Builder, x: str) -> str:
    return b.op("ReduceMean", [x], axes=[-1], keepdims=1)  # opset < 18: axes an attribute


def layernorm_torch(b: Builder, x: str, prefix: str, eps: float = 1e-5) -> str:
    """torch.onnx below opset 17: ReduceMean → Sub → Pow 2 → ReduceMean → Add ε → Sqrt → Div
    → Mul γ → Add β, ε a Constant node."""
    gamma, beta = scale_shift(b, prefix)
    centred = b.op("Sub", [x, mean(b, x)])
    var = mean(b, b.op("Pow", [centred, b.const(2.0)]))
    root = b.op("Sqrt", [b.op("Add", [var, b.const(eps, node=True)])])
    return b.op("Add", [b.op("Mul", [b.op("Div", [centred, root]), gamma]), beta])


def rmsnorm_llama(b: Builder, x: str, prefix: str, eps: float = 1e-6) -> str:
    """HF LLaMA's RMSNorm exported: Pow 2 → ReduceMean → Add ε → Sqrt → Reciprocal → Mul x
    → Mul γ (γ first)."""
    gamma, _ = scale_shift(b, prefix, shift=False)
    var = mean(b, b.op("Pow", [x, b.const(2.0)]))
    inv = b.op("Reciprocal", [b.op("Sqrt", [b.op("Add", [var, b.const(eps)])])])
    return b.op("Mul", [gamma, b.op("Mul", [x, inv])])


def rmsnorm_torch_legacy(b: Builder, x: str, prefix: str, eps: float = 1e-6) -> str:
    """torch.onnx (TorchScript exporter) of x·rsqrt(mean x² + ε)·γ: rsqrt as Div(1, Sqrt),
    every constant a Constant node."""
    gamma, _ = scale_shift(b, prefix, shift=False)
    var = mean(b, b.op("Pow", [x, b.const(2.0, node=True)]))
    root = b.op("Sqrt", [b.op("Add", [var, b.const(eps, node=True)])])
    inv = b.op("Div", [b.const(1.0, node=True), root])
    return b.op("Mul", [gamma, b.op("Mul", [x, inv])])


def rmsnorm_op(b: Builder, x: str, prefix: str, eps: float | None = None) -> str:
    gamma, _ = scale_shift(b, prefix, shift=False)
    attrs = {} if eps is None else {"epsilon": eps}
    return b.op("SimplifiedLayerNormalization", [x, gamma], axis=-1, **attrs)


def plain_mlp(b: Builder, x: str) -> str:
    h = b.linear(x, b.d, b.m, "mlp.fc1")
    return b.linear(gelu_torch(b, h), b.m, b.d, "mlp.fc2")


def gated_mlp(b: Builder, x: str) -> str:
    g = silu(b, b.linear(x, b.d, b.m, "mlp.gate_proj", "transpose", False))
    u = b.linear(x, b.d, b.m, "mlp.up_proj", "transpose", False)
    return b.linear(b.op("Mul", [g, u]), b.m, b.d, "mlp.down_proj", "transpose", False)


def save(b: Builder, y: str, path: Path, opset: int = 17) -> Path:
    onnx.save(b.model(y, residual=False, opset=opset), str(path))
    return path


# ---- what a FoundBlock with its FoundNorm computes, in float64 -----------------------------------

def _unplaced(block: FoundBlock) -> bool:
    """No norm read, or one whose placement is unknown (the sublayer is then not decided:
    never taken for the bare block)."""
    return block.norm is None or (block.norm.placement == "unknown"
                                  and block.norm.source in block.notes)


def apply_norm(folder: Path, norm: FoundNorm, x: np.ndarray) -> np.ndarray:
    eps = float(parse_decimal(norm.eps))
    if norm.kind == "layernorm":
        x = x - x.mean(axis=-1, keepdims=True)
    out = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    gamma, beta = _array(folder, norm.gamma, True), _array(folder, norm.beta, True)
    return out * (1 if gamma is None else gamma) + (0 if beta is None else beta)


def sublayer(folder: Path, block: FoundBlock, x: np.ndarray) -> np.ndarray:
    norm = block.norm
    if norm is None:
        return x + block_output(folder, block, x)
    if norm.placement == "pre":
        return x + block_output(folder, block, apply_norm(folder, norm, x))
    if norm.placement == "post":
        return apply_norm(folder, norm, x + block_output(folder, block, x))
    assert norm.placement == "sandwich" and norm.second is not None
    inner = block_output(folder, block, apply_norm(folder, norm, x))
    return x + apply_norm(folder, norm.second, inner)


def agrees(path: Path, block: FoundBlock) -> None:
    x = np.random.default_rng(4).standard_normal((16, block.dim)) * 2 + 0.5
    model = onnx.load(str(path))
    out = run(model, {"x": x})[model.graph.output[0].name]
    np.testing.assert_allclose(out, sublayer(path.parent, block, x), rtol=1e-5, atol=1e-5)


def only(path: Path) -> FoundBlock:
    found, skipped = find_blocks(path)
    assert len(found) == 1 and skipped == [], (found, skipped)
    return found[0]


# ---- placements --------------------------------------------------------------------------------

@pytest.mark.parametrize("norm, kind, eps", [
    (layernorm_op, "layernorm", EPS32),  # the op's default epsilon: a float32 1e-5
    (layernorm_torch, "layernorm", EPS32),
    (rmsnorm_llama, "rmsnorm", EPS32_6),
    (rmsnorm_torch_legacy, "rmsnorm", EPS32_6),
    (rmsnorm_op, "rmsnorm", EPS32)])
def test_a_pre_norm_is_found_with_its_exact_epsilon_and_tensors(tmp_path, norm, kind, eps):
    b = Builder(4, 8)
    y = b.op("Add", ["x", plain_mlp(b, norm(b, "x", "ln_2"))])
    block = only(save(b, y, tmp_path / "pre.onnx"))
    found = block.norm
    assert found is not None and (found.kind, found.placement) == (kind, "pre"), block.notes
    assert found.gamma == TensorRef("pre.onnx", "ln_2.weight")
    assert found.beta == (TensorRef("pre.onnx", "ln_2.bias") if kind == "layernorm" else None)
    assert found.second is None and found.eps == eps
    agrees(tmp_path / "pre.onnx", block)


def test_epsilon_is_the_stored_floats_exact_value(tmp_path):
    """ε = 1e-6 as a float32 Constant of the decomposed RMSNorm, and as a LayerNormalization
    attribute (float32 too): the exact value of that float, not 1/10⁶."""
    b = Builder(4, 8)
    y = b.op("Add", ["x", plain_mlp(b, rmsnorm_llama(b, "x", "norm", eps=1e-6))])
    stored = Fraction(float(np.float32(1e-6)))
    block = only(save(b, y, tmp_path / "r.onnx"))
    assert parse_decimal(block.norm.eps) == stored != Fraction(1, 10**6)
    assert block.norm.eps == EPS32_6

    b = Builder(4, 8)
    y = b.op("Add", ["x", plain_mlp(b, layernorm_op(b, "x", "ln", eps=1e-6))])
    block = only(save(b, y, tmp_path / "l.onnx"))
    assert parse_decimal(block.norm.eps) == stored
    agrees(tmp_path / "l.onnx", block)


def test_a_post_norm_reads_the_residual_sum(tmp_path):
    """BERT: the MLP reads the previous sublayer's norm, and its own norm reads x + MLP(x).
    The norm before it is not its pre-norm: the residual adds the MLP's input, not that
    norm's input."""
    b = Builder(4, 8)
    h = layernorm_op(b, "x", "attention.output.LayerNorm")
    y = layernorm_torch(b, b.op("Add", [plain_mlp(b, h), h]), "output.LayerNorm")
    path = save(b, y, tmp_path / "post.onnx")
    block = only(path)
    assert block.norm is not None and (block.norm.kind, block.norm.placement) == \
        ("layernorm", "post"), block.notes
    assert block.norm.gamma.key == "output.LayerNorm.weight"
    model = onnx.load(str(path))
    x = np.random.default_rng(4).standard_normal((16, 4))
    values = run(model, {"x": x})
    np.testing.assert_allclose(values[model.graph.output[0].name],
                               sublayer(tmp_path, block, values[h]), rtol=1e-5, atol=1e-5)


def test_a_sandwich_norm_is_the_norm_before_and_the_norm_on_the_output(tmp_path):
    """Gemma 2: x + N2(MLP(N1(x))), N1 and N2 RMSNorms, a gated MLP."""
    b = Builder(4, 8)
    inner = rmsnorm_llama(b, gated_mlp(b, rmsnorm_op(b, "x", "pre_feedforward_layernorm")),
                          "post_feedforward_layernorm")
    path = save(b, b.op("Add", ["x", inner]), tmp_path / "sandwich.onnx")
    block = only(path)
    norm = block.norm
    assert norm is not None and norm.placement == "sandwich", block.notes
    assert norm.gamma.key == "pre_feedforward_layernorm.weight" and norm.eps == EPS32
    assert norm.second is not None and norm.second.gamma.key == \
        "post_feedforward_layernorm.weight"
    assert block.activation == "swiglu"
    assert not any("residual" in n for n in block.notes)
    agrees(path, block)


def test_without_a_norm_the_norm_is_none_and_nothing_is_said(tmp_path):
    b = Builder(4, 8)
    block = only(save(b, b.op("Add", ["x", plain_mlp(b, "x")]), tmp_path / "bare.onnx"))
    assert block.norm is None and block.notes == ("activation read as gelu from its "
                                                  "subgraph's constants",)


def test_a_norm_whose_residual_is_elsewhere_is_left_unknown_with_a_note(tmp_path):
    """The MLP reads N(x), but the residual adds N(x) itself (neither pre nor post)."""
    b = Builder(4, 8)
    h = layernorm_op(b, "x", "ln")
    block = only(save(b, b.op("Add", [h, plain_mlp(b, h)]), tmp_path / "odd.onnx"))
    assert _unplaced(block)
    assert any("placement is not known" in n for n in block.notes), block.notes


def test_a_norm_that_only_looks_alike_is_no_norm(tmp_path):
    """The decomposed pattern over the wrong axis, or with a Pow of 3, is not a norm; nor
    is x·(2/√(mean x² + ε)) (a Div of 2, not 1, by the root)."""
    b = Builder(4, 8)
    var = mean(b, b.op("Pow", ["x", b.const(2.0)]))
    inv = b.op("Div", [b.const(2.0), b.op("Sqrt", [b.op("Add", [var, b.const(1e-6)])])])
    h = b.op("Mul", ["x", inv])
    block = only(save(b, b.op("Add", ["x", plain_mlp(b, h)]), tmp_path / "two.onnx"))
    assert _unplaced(block)
    for case in ("axis", "power"):
        b = Builder(4, 8)
        gamma, beta = scale_shift(b, "ln")
        centred = b.op("Sub", ["x", mean(b, "x")])
        var = b.op("ReduceMean", [b.op("Pow", [centred, b.const(3.0 if case == "power"
                                                                else 2.0)])],
                   axes=[0] if case == "axis" else [-1], keepdims=1)
        root = b.op("Sqrt", [b.op("Add", [var, b.const(1e-5)])])
        h = b.op("Add", [b.op("Mul", [b.op("Div", [centred, root]), gamma]), beta])
        block = only(save(b, b.op("Add", ["x", plain_mlp(b, h)]), tmp_path / f"{case}.onnx"))
        assert _unplaced(block), case


def constant_pre_norm(path: Path, d: int, m: int, activation: Any
                      ) -> tuple[Path, tuple[str, str, str, str]]:
    """x + W2 act(W1 LayerNormalization(x)), γ, β, W1 and W2 all in Constant nodes (as
    paddle2onnx and some torch exports write them); the model and those four names."""
    b = Builder(d, m)
    gamma = b.const(1 + 0.1 * b.rng.standard_normal(d), node=True)
    beta = b.const(0.1 * b.rng.standard_normal(d), node=True)
    h = b.op("LayerNormalization", ["x", gamma, beta], epsilon=1e-5)
    w1 = b.const(b.rng.standard_normal((d, m)), node=True)
    w2 = b.const(b.rng.standard_normal((m, d)), node=True)
    y = b.op("MatMul", [activation(b, b.op("MatMul", [h, w1])), w2])
    return save(b, b.op("Add", ["x", y]), path), (gamma, beta, w1, w2)


def test_constant_node_norm_tensors_and_weights(tmp_path):
    """γ, β and every weight held in Constant nodes, named by their outputs."""
    path, (gamma, beta, w1, w2) = constant_pre_norm(tmp_path / "constants.onnx", 4, 8, silu)
    block = only(path)
    assert (block.up.key, block.down.key) == (w1, w2)
    assert block.norm is not None and block.norm.placement == "pre"
    assert (block.norm.gamma.key, block.norm.beta.key) == (gamma, beta)
    agrees(path, block)


def test_two_pre_norm_layers_each_with_its_own_norm(tmp_path):
    """A stack: each sublayer's norm is the one before it, read from its residual."""
    b = Builder(4, 8)
    x = "x"
    for layer in range(2):
        h = layernorm_torch(b, x, f"h.{layer}.ln_2")
        up = b.linear(h, 4, 8, f"h.{layer}.mlp.c_fc")
        x = b.op("Add", [x, b.linear(gelu_torch(b, up), 8, 4, f"h.{layer}.mlp.c_proj")])
    found, skipped = find_blocks(save(b, x, tmp_path / "stack.onnx"))
    assert skipped == []
    assert [(f.name, f.norm.placement, f.norm.gamma.key) for f in found] == [
        ("h_0_mlp", "pre", "h.0.ln_2.weight"), ("h_1_mlp", "pre", "h.1.ln_2.weight")]


def test_a_norm_op_with_a_non_finite_epsilon_is_no_norm(tmp_path):
    b = Builder(4, 8)
    y = b.op("Add", ["x", plain_mlp(b, layernorm_op(b, "x", "ln", eps=float("nan")))])
    block = only(save(b, y, tmp_path / "nan.onnx"))
    assert _unplaced(block)
    assert any("LayerNormalization node '/layernormalization_" in n and "is not read as a norm"
               in n for n in block.notes), block.notes


def test_a_bare_sublayer_before_the_next_pre_norm_is_not_post_norm(tmp_path):
    """x + MLP(x), its sum read by the next layer's pre-norm and by the next residual Add:
    the stream of a pre-norm model, not N(x + MLP(x))."""
    b = Builder(4, 8)
    s = b.op("Add", ["x", plain_mlp(b, "x")])
    nxt = b.op("Add", [s, b.linear(layernorm_op(b, s, "next.ln_1"), 4, 4, "next.attn")])
    found, _ = find_blocks(save(b, nxt, tmp_path / "stream.onnx"))
    [block] = [f for f in found if f.up.key == "mlp.fc1.weight"]
    assert block.norm is None and not any("norm" in n for n in block.notes), block


def test_a_norm_hidden_behind_an_op_that_is_not_read_is_said_unknown(tmp_path):
    """A pre-norm whose output is Cast before the MLP reads it: the residual adds x, not the
    MLP's input, so something unread lies between them, and the note says so."""
    b = Builder(4, 8)
    h = b.op("Cast", [layernorm_op(b, "x", "ln")], to=1)
    block = only(save(b, b.op("Add", ["x", plain_mlp(b, h)]), tmp_path / "cast.onnx"))
    assert _unplaced(block)
    assert any("adds another value than the sublayer's input" in n for n in block.notes), \
        block.notes


@pytest.mark.parametrize("opset, post", [(14, False), (17, False), (14, True), (17, True)])
def test_torch_exports_of_normed_sublayers_if_torch_is_installed(tmp_path, opset, post):
    """torch.onnx (TorchScript exporter): LayerNorm decomposed at opset 14, the op at 17;
    pre-norm (GPT-2) and post-norm (BERT) placements, eps 1e-5 and 1e-12."""
    torch = pytest.importorskip("torch")
    import warnings

    class Sublayer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln = torch.nn.LayerNorm(4, eps=1e-12 if post else 1e-5)
            self.fc1, self.fc2 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 4)
            with torch.no_grad():
                self.ln.weight.add_(0.1 * torch.randn(4))
                self.ln.bias.add_(0.1 * torch.randn(4))

        def forward(self, x: Any) -> Any:
            if post:
                return self.ln(x + self.fc2(torch.nn.functional.gelu(self.fc1(x))))
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(x))))

    path = tmp_path / "torch.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Sublayer().eval(), (torch.randn(2, 4),), str(path),
                          input_names=["x"], dynamo=False, opset_version=opset)
    block = only(path)
    assert (block.norm.kind, block.norm.placement) == ("layernorm", "post" if post else "pre")
    assert block.norm.eps == ("0.0000000000009999999960041972002500187954865396022796630859375"
                              if post else EPS32)
    assert (block.norm.gamma.key, block.norm.beta.key) == ("ln.weight", "ln.bias")
    agrees(path, block)


def test_a_pre_norm_onnx_model_with_constant_weights_is_no_at_any_width_and_not_exported(
        tmp_path, cli):
    """The model the issue came from, in small: LayerNorm before a SiLU FFN written
    x·Sigmoid(1.0·x), every weight and γ, β in Constant nodes. The sublayer is refused at
    every width with checked certificates; the bare block is still answered; --export
    writes nothing (the sublayer has no skip-free form)."""
    from .test_onnx_sublayer_finder import silu_scaled_by_one

    path, _ = constant_pre_norm(tmp_path / "model.onnx", 3, 4, silu_scaled_by_one)
    spec = tmp_path / "out" / "model.mlp"
    run = cli("scan", "--json", path, "--write-spec", spec, "--certificates", tmp_path / "c")
    assert run.code == 0, run.err
    [answer] = run.json()["blocks"]
    assert answer["activation"] == "silu" and answer["norm"]["placement"] == "pre"
    assert (answer["absorbable"], answer["min_width"], answer["any_width"]) == (
        "no", [None, None], "no")
    assert answer["method"] == "§10.2 ray limit" and answer["bare"]["absorbable"] != "unknown"
    check = cli("check", tmp_path / "c")
    assert check.code == 0 and check.out.count(": valid") == 2, check.out
    assert cli("--expect", spec).code == 0
    refused = cli("scan", path, "--export", tmp_path / "plain")
    assert refused.code == 2 and "§10.2" in refused.err and not (tmp_path / "plain").exists()
