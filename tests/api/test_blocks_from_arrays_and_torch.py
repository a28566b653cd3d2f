"""Python builders: blocks from numpy arrays or torch modules, decided and saved."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from absorb_formal import build
from absorb_formal.build import BuildError, from_arrays
from absorb_formal.language import load_file

UP = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32)
DOWN = np.array([[-1, 0, 0.7], [0, -1, 0.3]], dtype=np.float32)


def test_arrays_are_read_exactly_not_as_decimals():
    spec = from_arrays("relu", UP, DOWN)
    block = spec.block()
    assert block.layers is not None
    # float32(0.7) is the dyadic 11744051 / 2^24, not 7/10
    assert block.layers[0].down.rows[0][2] == Fraction(11744051, 2**24)
    result = build.decide(spec)
    assert result.outcome == "proved" and "absorbable at width 3" in result.verdict
    assert "11744051/16777216" in str(result.certificate)


def test_decide_claims_widths_and_min_width():
    spec = from_arrays("relu", UP, DOWN)
    assert build.decide(spec, width=2).outcome == "refuted"
    assert build.decide(spec, "not absorbable", width=2).outcome == "proved"
    assert build.decide(spec, "min width").min_width == 3
    assert build.decide(from_arrays("relu", UP, DOWN, skip=-0.5), "min width").min_width == 5
    with pytest.raises(BuildError, match="claim"):
        build.decide(spec, "sometimes")


def test_skips_and_biases_match_the_language(tmp_path):
    skip = np.array([[2, 0], [1, 2]], dtype=np.float64)
    spec = from_arrays("gelu", UP, DOWN, up_bias=np.array([0.5, -3, 2]), skip=skip)
    block = spec.block()
    assert block.biased and block.layers is not None
    assert block.layers[0].down_bias == (0, 0)  # a bias not given is 0, as in a spec
    assert block.skip.matrix is not None and block.skip.matrix.rows[1][0] == 1
    written = spec.save(tmp_path, "g")
    loaded = load_file(written).blocks["g"]
    assert loaded.biased and loaded.skip.matrix is not None
    assert loaded.layers is not None
    assert loaded.layers[0].up_bias == block.layers[0].up_bias
    assert loaded.layers[0].down.rows == block.layers[0].down.rows
    assert from_arrays("relu", UP, DOWN, skip=Fraction(1, 3)).block().skip.scale == \
        Fraction(1, 3)
    assert from_arrays("relu", UP, DOWN, skip=None).block().is_plain


def test_save_writes_weights_in_their_dtype_and_refuses_to_overwrite(tmp_path, cli):
    spec = from_arrays("relu", UP, DOWN)
    written = spec.save(tmp_path / "out", "mlp0")
    assert written == tmp_path / "out" / "mlp0.mlp"
    assert 'load("mlp0.safetensors", "up")' in written.read_text()
    run = cli(written, "--crosscheck", "0")
    assert run.code == 0 and "absorbable at width 3" in run.out
    before = written.read_bytes()
    with pytest.raises(BuildError, match="already exists"):
        spec.save(tmp_path / "out", "mlp0")
    assert written.read_bytes() == before
    with pytest.raises(BuildError, match="keyword"):
        spec.save(tmp_path / "out", "query")
    assert not (tmp_path / "out" / "query.mlp").exists()


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"activation": "relu", "up": UP, "down": DOWN.T}, "down has shape"),
    ({"activation": "swiglu", "up": UP, "down": DOWN}, "give gate"),
    ({"activation": "relu", "up": UP, "down": DOWN, "gate": UP}, "drop gate"),
    ({"activation": "nope", "up": UP, "down": DOWN}, "activation 'nope'"),
    ({"activation": "relu", "up": UP + np.inf, "down": DOWN}, "non-finite"),
    ({"activation": "relu", "up": UP, "down": DOWN, "skip": "identityx"}, "skip"),
    ({"activation": "relu", "up": UP, "down": DOWN, "up_bias": np.ones(2)}, "up_bias"),
    ({"activation": "relu", "up": UP, "down": DOWN, "skip": np.eye(3)}, "skip has shape"),
])
def test_builder_refusals(kwargs, words):
    with pytest.raises(BuildError, match=words):
        from_arrays(**kwargs)


# ---- layouts and dtypes -----------------------------------------------------------------

def _conv1d_arrays() -> dict[str, np.ndarray]:
    """A GPT-2-style MLP as Hugging Face's Conv1D stores it: input x output (d = 2, m = 5)."""
    rng = np.random.default_rng(3)
    return {"up": rng.normal(size=(2, 5)), "down": rng.normal(size=(5, 2)),
            "up_bias": rng.normal(size=5), "down_bias": rng.normal(size=2)}


def test_conv1d_arrays_are_refused_with_the_layout_that_fits():
    stored = _conv1d_arrays()
    with pytest.raises(BuildError, match=r"up_bias has shape \(5,\); expected \(2,\).*"
                                         r"fits layout='in_out'.*\.T") as refused:
        from_arrays("gelu_tanh", **stored)
    assert "d = 5, m = 2" in str(refused.value)
    read = from_arrays("gelu_tanh", **stored, layout="in_out")
    assert (read.dim, read.width) == (2, 5)
    by_hand = from_arrays("gelu_tanh", stored["up"].T, stored["down"].T,
                          up_bias=stored["up_bias"], down_bias=stored["down_bias"])
    for key in ("up", "down", "up_bias", "down_bias"):
        assert np.array_equal(read.arrays[key], by_hand.arrays[key]), key
    assert read.block().layers == by_hand.block().layers
    x = np.random.default_rng(4).normal(size=(6, 2))
    hidden = x @ stored["up"] + stored["up_bias"]  # Conv1D: x @ W + b
    gelu = 0.5 * hidden * (1 + np.tanh(np.sqrt(2 / np.pi) * (hidden + 0.044715 * hidden**3)))
    want = x + gelu @ stored["down"] + stored["down_bias"]
    assert np.allclose(read.block().evaluate(x), want, rtol=1e-12, atol=1e-12)


def test_dim_tells_a_transposed_block_from_a_swapped_one():
    # No biases and an identity skip: up 3x2 and down 2x3 read as d = 2, m = 3 or, stored
    # input x output, as d = 3, m = 2. Only dim (or the layout) tells.
    assert (from_arrays("relu", UP, DOWN).dim, from_arrays("relu", UP, DOWN).width) == (2, 3)
    with pytest.raises(BuildError, match="not dim = 3.*fits layout='in_out'"):
        from_arrays("relu", UP, DOWN, dim=3)
    swapped = from_arrays("relu", UP, DOWN, dim=np.int64(3), layout="in_out")
    assert (swapped.dim, swapped.width) == (3, 2)
    assert np.array_equal(swapped.arrays["up"], UP.T)
    with pytest.raises(BuildError, match="not dim = 2.*fits layout='out_in'"):
        from_arrays("relu", UP, DOWN, dim=2, layout="in_out")
    with pytest.raises(BuildError, match="not dim = 4") as neither:
        from_arrays("relu", UP, DOWN, dim=4)
    assert "fits layout" not in str(neither.value)


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"layout": "io"}, "layout 'io'"),
    ({"dim": 0}, "dim 0"),
    ({"dim": True}, "dim True"),
    ({"dim": 2.0}, "dim 2.0"),
    ({"gate": UP, "layout": "in_out", "dim": 3}, "not gated"),
])
def test_layout_and_dim_refusals(kwargs, words):
    with pytest.raises(BuildError, match=words):
        from_arrays("relu", UP, DOWN, **kwargs)


def test_gated_in_out_transposes_the_gate_too():
    rng = np.random.default_rng(5)
    gate, up, down = rng.normal(size=(2, 4)), rng.normal(size=(2, 4)), rng.normal(size=(4, 2))
    spec = from_arrays("swiglu", up, down, gate=gate, layout="in_out", dim=2)
    assert np.array_equal(spec.arrays["gate"], gate.T)
    with pytest.raises(BuildError, match=r"gate has shape \(2, 4\); expected \(4, 2\)") \
            as mixed:  # up and down transposed, the gate not: no layout fits all three
        from_arrays("swiglu", up.T, down.T, gate=gate)
    assert "fits layout" not in str(mixed.value)


def test_ml_dtypes_bfloat16_is_read_from_its_bits():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    # values a float16 cannot hold (range and precision), and the bf16 neighbour of 0.7
    values = np.array([[3.0e38, -1.0e-30], [0.7, 1.0], [-2.5, 65504.0]])
    up = values.astype(ml_dtypes.bfloat16)
    bits = up.view(np.uint16).astype(np.uint32)
    expected = [[Fraction(float((b << 16).astype(np.uint32).view(np.float32)))
                 for b in row] for row in bits]
    spec = from_arrays("relu", up, DOWN)
    assert spec.bfloat16 == {"up"}
    block = spec.block()
    assert block.layers is not None
    assert [list(row) for row in block.layers[0].up.rows] == expected
    assert block.layers[0].up.rows[1][0] == Fraction(179, 256)  # bf16(0.7), not 7/10
    widened = from_arrays("relu", up.astype(np.float32), DOWN)
    assert widened.block().layers == block.layers


def test_ml_dtypes_bfloat16_saves_as_bf16_and_reads_back(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    spec = from_arrays("relu", UP.astype(ml_dtypes.bfloat16),
                       np.array([[-1, 0, 0.5], [0, -1, 0.25]]).astype(ml_dtypes.bfloat16))
    assert spec.bfloat16 == {"up", "down"}
    written = spec.save(tmp_path, "bf")
    with open(tmp_path / "bf.safetensors", "rb") as stream:
        size = int.from_bytes(stream.read(8), "little")
        assert stream.read(size).count(b'"BF16"') == 2
    loaded = load_file(written).blocks["bf"]
    assert loaded.layers == spec.block().layers


def test_other_ml_dtypes_formats_are_refused():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    with pytest.raises(BuildError, match="float8_e4m3fn is not a real number format"):
        from_arrays("relu", UP.astype(ml_dtypes.float8_e4m3fn), DOWN)


# ---- torch -----------------------------------------------------------------------------

def test_sequential_linear_gelu_linear():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.GELU(approximate="tanh"),
                              torch.nn.Dropout(0.1), torch.nn.Linear(3, 2))
    spec = build.from_torch(mlp)
    assert spec.activation == "gelu_tanh" and spec.biased
    block = spec.block()
    x = np.random.default_rng(0).normal(size=(16, 2))
    with torch.no_grad():
        want = mlp.eval().double()(torch.from_numpy(x)).numpy() + x
    assert np.allclose(block.evaluate(x), want, rtol=1e-12, atol=1e-12)


def test_llama_style_bfloat16_is_exact_and_swiglu(tmp_path):
    torch = pytest.importorskip("torch")

    class LlamaMLP(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gate_proj = torch.nn.Linear(4, 8, bias=False)
            self.up_proj = torch.nn.Linear(4, 8, bias=False)
            self.down_proj = torch.nn.Linear(8, 4, bias=False)
            self.act_fn = torch.nn.SiLU()

    module = LlamaMLP().to(torch.bfloat16)
    spec = build.from_torch(module)
    assert spec.activation == "swiglu" and spec.bfloat16 == {"up", "gate", "down"}
    assert np.array_equal(spec.arrays["gate"],
                          module.gate_proj.weight.detach().float().numpy())
    result = build.decide(spec)
    assert result.outcome == "refuted" and "never" in result.verdict
    direct = build.from_arrays("swiglu", module.up_proj.weight, module.down_proj.weight,
                               gate=module.gate_proj.weight)  # tensors, requires_grad too
    assert direct.bfloat16 == spec.bfloat16
    assert np.array_equal(direct.arrays["down"], spec.arrays["down"])
    written = spec.save(tmp_path, "llama")
    with open(tmp_path / "llama.safetensors", "rb") as stream:
        size = int.from_bytes(stream.read(8), "little")
        assert b'"BF16"' in stream.read(size)
    loaded = load_file(written).blocks["llama"]
    assert loaded.layers is not None
    assert np.array_equal(loaded.layers[0].up.floats, spec.arrays["up"].astype(np.float64))


def test_gpt2_conv1d_is_transposed():
    torch = pytest.importorskip("torch")

    class Conv1D(torch.nn.Module):  # Hugging Face's: y = x @ W + b, W input × output
        def __init__(self, nf: int, nx: int) -> None:
            super().__init__()
            self.nf = nf
            self.weight = torch.nn.Parameter(torch.randn(nx, nf))
            self.bias = torch.nn.Parameter(torch.randn(nf))

        def forward(self, x):
            return x @ self.weight + self.bias

    class NewGELUActivation(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.gelu(x, approximate="tanh")

    class GPT2MLP(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_fc, self.c_proj = Conv1D(12, 3), Conv1D(3, 12)
            self.act = NewGELUActivation()

        def forward(self, x):
            return self.c_proj(self.act(self.c_fc(x)))

    torch.manual_seed(1)
    module = GPT2MLP().double()
    spec = build.from_torch(module, skip="identity")
    assert spec.activation == "gelu_tanh" and spec.arrays["up"].shape == (12, 3)
    x = np.random.default_rng(1).normal(size=(8, 3))
    with torch.no_grad():
        want = module(torch.from_numpy(x)).numpy() + x
    assert np.allclose(spec.block().evaluate(x), want, rtol=1e-12, atol=1e-12)


def test_fc1_fc2_and_refusals():
    torch = pytest.importorskip("torch")

    class Mlp(torch.nn.Module):
        def __init__(self, norm) -> None:
            super().__init__()
            self.fc1, self.act, self.fc2 = (torch.nn.Linear(2, 4), torch.nn.ReLU(),
                                            torch.nn.Linear(4, 2))
            self.norm = norm

    assert build.from_torch(Mlp(torch.nn.Identity())).activation == "relu"
    with pytest.raises(BuildError, match="LayerNorm"):
        build.from_torch(Mlp(torch.nn.LayerNorm(4)))
    with pytest.raises(BuildError, match="no exact counterpart"):
        build.from_torch(torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Softplus(),
                                             torch.nn.Linear(3, 2)))
    with pytest.raises(BuildError, match="expected LLaMA"):
        build.from_torch(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    leaky = build.from_torch(torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.LeakyReLU(0.25),
                                                 torch.nn.Linear(3, 2)))
    assert leaky.activation == "leaky_relu(1/4)"


def test_export_of_a_built_block_round_trips(tmp_path, cli):
    """from_arrays → save → export → load back `equals` the original."""
    down = np.array([[-1, 0, 0.5], [0, -1, 0.25]])
    written = from_arrays("relu", UP, down).save(tmp_path, "b")
    run = cli("export", written, "b", "--out", tmp_path / "w.npz", "--points", "100")
    assert run.code == 0, run.err
    snippet = run.out[run.out.index("block b_plain"):]
    spec = tmp_path / "both.mlp"
    spec.write_text(written.read_text().replace("query b", "") + snippet +
                    "\nclaim b equals b_plain\n", encoding="utf-8")
    result = cli(spec, "--crosscheck", "0")
    assert result.code == 0, result.out + result.err
    assert isinstance(Path(written), Path)


def test_saved_claims_get_certificates_that_check(tmp_path, cli):
    """save(..., claims=...) writes claim lines: `--certificates` stores one document per
    claim and `check` verifies them; a claim that does not parse leaves nothing written."""
    spec = from_arrays("relu", UP, DOWN)
    written = spec.save(tmp_path / "out", "mlp0", claims=["mlp0 is absorbable",
                                                           "mlp0 is not absorbable at width 2"])
    run = cli(written, "--crosscheck", "0", "--certificates", tmp_path / "proofs")
    assert run.code in (0, 1), run.err
    documents = sorted((tmp_path / "proofs").rglob("*.json"))
    assert len(documents) == 2
    check = cli("check", tmp_path / "proofs")
    assert check.code == 0 and check.out.count("valid —") == 2, check.out
    with pytest.raises(BuildError):
        spec.save(tmp_path / "out", "mlp1", claims=["mlp1 is absorbabel"])
    assert not (tmp_path / "out" / "mlp1.mlp").exists()
    assert not (tmp_path / "out" / "mlp1.safetensors").exists()
