"""`absorb-prove scan`: finding MLP sublayers by naming convention, deciding them, writing the
spec, certificates and the skip-free checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import absorb_formal
from absorb_formal.scanner.find import ScanError, find_named, language_activation, open_checkpoint
from absorb_formal.weights import safetensors

RNG_SEED = 7


def _save(path: Path, tensors: dict[str, np.ndarray]) -> None:
    if path.suffix == ".npz":
        np.savez(path, **tensors)
    else:
        with open(path, "wb") as stream:
            safetensors.write(stream, tensors, {})


def _planted(d: int, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """up (m×d), down (d×m) with down[:, :d] up[:d] = −I: absorbable at width m (J = 1..d)."""
    up = rng.integers(-3, 4, size=(m, d)).astype(np.float32)
    down = rng.integers(-3, 4, size=(d, m)).astype(np.float32)
    up[:d], down[:, :d] = np.eye(d), -np.eye(d)
    return up, down


def gpt2(folder: Path, activation: str = "relu", layers: int = 2, d: int = 3, m: int = 4,
         norms: bool = True) -> Path:
    """A GPT-2-shaped checkpoint: Conv1D (input × output), layer 0's bare block planted
    absorbable; with `norms`, each layer's ln_2 (the pre-norm beside its MLP), else config.json
    names no model type (an MLP stack whose sublayers are the bare blocks)."""
    rng = np.random.default_rng(RNG_SEED)
    tensors = {"transformer.wte.weight": np.ones((10, d), np.float32)}
    for i in range(layers):
        up, down = _planted(d, m, rng) if i == 0 else (
            rng.integers(-3, 4, size=(m, d)).astype(np.float32),
            rng.integers(-3, 4, size=(d, m)).astype(np.float32))
        if norms:
            tensors[f"transformer.h.{i}.ln_1.weight"] = np.ones(d, np.float32)
            tensors[f"transformer.h.{i}.ln_2.weight"] = np.linspace(0.5, 2, d).astype(np.float32)
            tensors[f"transformer.h.{i}.ln_2.bias"] = np.linspace(-1, 1, d).astype(np.float32)
        tensors[f"transformer.h.{i}.attn.c_attn.weight"] = np.ones((d, 3 * d), np.float32)
        tensors[f"transformer.h.{i}.mlp.c_fc.weight"] = up.T.copy()
        tensors[f"transformer.h.{i}.mlp.c_proj.weight"] = down.T.copy()
    folder.mkdir(parents=True, exist_ok=True)
    _save(folder / "model.safetensors", tensors)
    kind = {"model_type": "gpt2"} if norms else {}
    (folder / "config.json").write_text(json.dumps(
        {**kind, "n_embd": d, "n_inner": m, "activation_function": activation}))
    return folder


def llama_sharded(folder: Path, d: int = 3, m: int = 4) -> Path:
    rng = np.random.default_rng(RNG_SEED)
    folder.mkdir(parents=True, exist_ok=True)
    weight_map = {}
    for i in range(2):
        shard = f"model-0000{i + 1}-of-00002.safetensors"
        names = {f"model.layers.{i}.mlp.{p}.weight": rng.integers(-3, 4, size=shape)
                 .astype(np.float32) for p, shape in (("gate_proj", (m, d)), ("up_proj", (m, d)),
                                                      ("down_proj", (d, m)))}
        names[f"model.layers.{i}.self_attn.q_proj.weight"] = np.ones((d, d), np.float32)
        names[f"model.layers.{i}.post_attention_layernorm.weight"] = np.full(d, 0.5, np.float32)
        _save(folder / shard, names)
        weight_map.update(dict.fromkeys(names, shard))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "llama", "hidden_size": d, "intermediate_size": m, "hidden_act": "silu",
         "rms_norm_eps": 1e-6}))
    return folder


# ---- finding --------------------------------------------------------------------------------

def test_gpt2_conv1d_blocks_are_found_transposed_and_the_rest_listed(tmp_path):
    found, skipped = find_named(open_checkpoint(gpt2(tmp_path / "g")), None)
    assert [b.where for b in found] == ["transformer.h.0.mlp", "transformer.h.1.mlp"]
    block = found[0]
    assert (block.dim, block.width, block.activation) == (3, 4, "relu")
    assert block.up.transpose and block.down.transpose  # Conv1D stores input × output
    assert {s.why for s in skipped} == {"not an MLP sublayer", "read as the norm beside an "
                                        "MLP sublayer (its NORM column)"}
    assert any("attention" in s.where for s in skipped) and any("norm" in s.where
                                                                for s in skipped)
    assert block.norm is not None and block.norm.gamma.key == "transformer.h.0.ln_2.weight"


def test_sharded_llama_blocks_are_gated_swiglu_from_config(tmp_path):
    found, _ = find_named(open_checkpoint(llama_sharded(tmp_path / "l")), None)
    assert [(b.where, b.activation, b.gate is not None) for b in found] == [
        ("model.layers.0.mlp", "swiglu", True), ("model.layers.1.mlp", "swiglu", True)]
    assert found[1].up.file == "model-00002-of-00002.safetensors"


@pytest.mark.parametrize("names, gated, expected", [
    ({"encoder.layer.0.intermediate.dense": (4, 3), "encoder.layer.0.output.dense": (3, 4),
      "encoder.layer.0.attention.output.dense": (3, 3)}, False, "encoder.layer.0"),
    ({"model.decoder.layers.0.fc1": (4, 3), "model.decoder.layers.0.fc2": (3, 4)}, False,
     "model.decoder.layers.0"),
    ({"encoder.block.0.layer.1.DenseReluDense.wi": (4, 3),
      "encoder.block.0.layer.1.DenseReluDense.wo": (3, 4)}, False,
     "encoder.block.0.layer.1.DenseReluDense"),
    ({"encoder.block.0.layer.1.DenseReluDense.wi_0": (4, 3),
      "encoder.block.0.layer.1.DenseReluDense.wi_1": (4, 3),
      "encoder.block.0.layer.1.DenseReluDense.wo": (3, 4)}, True,
     "encoder.block.0.layer.1.DenseReluDense"),
    ({"gpt_neox.layers.0.mlp.dense_h_to_4h": (4, 3), "gpt_neox.layers.0.mlp.dense_4h_to_h": (3, 4)},
     False, "gpt_neox.layers.0.mlp"),
    ({"transformer.h.0.mlp.fc_in": (4, 3), "transformer.h.0.mlp.fc_out": (3, 4)}, False,
     "transformer.h.0.mlp"),
])
def test_each_family_naming_is_found(tmp_path, names, gated, expected):
    tensors = {f"{k}.weight": np.zeros(shape, np.float32) for k, shape in names.items()}
    _save(tmp_path / "w.safetensors", tensors)
    found, _ = find_named(open_checkpoint(tmp_path / "w.safetensors"), "relu")
    assert [b.where for b in found] == [expected]
    assert found[0].activation == ("reglu" if gated else "relu")
    assert (found[0].dim, found[0].width) == (3, 4)


@pytest.mark.parametrize("name, gated, expected", [
    ("gelu_new", False, "gelu_tanh"), ("gelu_pytorch_tanh", False, "gelu_tanh"),
    ("gelu", False, "gelu"), ("silu", True, "swiglu"), ("gelu", True, "geglu"),
    ("relu", True, "reglu"), ("relu2", False, "relu^2"), ("leaky_relu(1/100)", False,
                                                         "leaky_relu(1/100)"),
    ("swiglu", True, "swiglu")])
def test_activation_names_map_to_the_language(name, gated, expected):
    assert language_activation(name, gated, "x") == expected


@pytest.mark.parametrize("name, gated, words", [
    ("quick_gelu", False, "known: gelu"), ("gelu_new", True, "no exact counterpart"),
    ("swiglu", False, "no gate tensor"), ("gated-gelu", False, "no exact counterpart")])
def test_activations_without_an_exact_counterpart_are_errors(name, gated, words):
    with pytest.raises(ScanError, match=words):
        language_activation(name, gated, "x")


def test_a_conv1d_checkpoint_stored_the_other_way_round_is_an_error_naming_the_tensor(
        tmp_path, cli):
    folder = gpt2(tmp_path / "g")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "n_embd": 4}))
    run = cli("scan", folder)
    assert run.code == 2 and "model.safetensors" in run.err and "hidden size" in run.err, run.err


def test_a_conv1d_checkpoint_saved_in_linear_layout_gets_the_transposed_shape(tmp_path, cli):
    """c_fc and c_proj saved as nn.Linear stores them (output × input) under GPT-2's names:
    the error gives the shape that fits and says the tensors look stored the other way round."""
    rng = np.random.default_rng(0)
    tensors = {"transformer.h.0.mlp.c_fc.weight": rng.normal(size=(4, 3)).astype(np.float32),
               "transformer.h.0.mlp.c_proj.weight": rng.normal(size=(3, 4)).astype(np.float32)}
    tmp_path.mkdir(exist_ok=True)
    _save(tmp_path / "model.safetensors", tensors)
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "gpt2", "n_embd": 3, "n_inner": 4, "activation_function": "relu"}))
    run = cli("scan", tmp_path)
    assert run.code == 2 and "expected (3, 4)" in run.err, run.err
    assert "stored the other way round" in run.err


# ---- the command --------------------------------------------------------------------------------

def test_scan_decides_each_sublayer_and_prints_a_table(cli, tmp_path):
    run = cli("scan", gpt2(tmp_path / "g", norms=False))
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0].split()[:3] == ["NAME", "ACTIVATION", "DIM"]
    row0, row1 = lines[1].split(), lines[2].split()
    assert row0[0] == "transformer.h.0.mlp" and row0[5] == "-"  # no norm: the bare block
    assert row0[6] == "yes" and row0[7] == "4" and row0[-3:-1] == ["yes", "4"]
    assert row1[0] == "transformer.h.1.mlp" and row1[6] == "no"
    assert "2 MLP sublayer(s): 1 absorbable, 1 not absorbable" in lines[-1]


def test_a_pre_norm_checkpoint_reports_the_sublayer_first_and_the_bare_block_beside_it(
        cli, tmp_path):
    run = cli("scan", gpt2(tmp_path / "g"))
    assert run.code == 0, run.err
    rows = [line.split() for line in run.out.splitlines()[1:3]]
    # the sublayer x + F(LN(x)): no, at any width; the bare block: layer 0 planted absorbable
    assert [(r[5], r[6], r[7], r[8]) for r in rows] == [("pre", "LN", "no", "none")] * 2
    assert rows[0][-3:-1] == ["yes", "4"] and rows[1][-3] == "no"
    doc = cli("scan", "--json", tmp_path / "g").json()
    first = doc["blocks"][0]
    assert first["norm"] == {"kind": "layernorm", "placement": "pre", "eps": "1e-5"}
    assert first["any_width"] == "no" and first["min_width"] == [None, None]
    assert first["bare"]["absorbable"] == "yes" and first["bare"]["any_width"] == "yes"
    assert "paper's question" in first["bare"]["question"]


def test_a_known_family_whose_norm_tensor_is_missing_is_unknown_with_the_reason(cli, tmp_path):
    folder = gpt2(tmp_path / "g")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "llama",
                                                    "rms_norm_eps": 1e-6}))
    run = cli("scan", "--json", folder)
    assert run.code == 3
    first = run.json()["blocks"][0]
    assert first["absorbable"] == "unknown" and "post_attention_layernorm" in first["reason"]
    assert first["bare"]["absorbable"] == "yes"  # the paper's question is still answered


def test_scan_json_has_the_documented_fields(cli, tmp_path):
    run = cli("scan", "--json", llama_sharded(tmp_path / "l"))
    assert run.code == 0, run.err
    doc = run.json()
    assert [b["absorbable"] for b in doc["blocks"]] == ["no", "no"]  # SwiGLU: never (T4)
    first = doc["blocks"][0]
    assert set(first) >= {"name", "activation", "dim", "width", "bias", "absorbable",
                          "min_width", "method", "seconds"}
    assert first["min_width"] == [None, None] and first["activation"] == "swiglu"
    assert doc["exit_code"] == 0


def test_the_written_spec_reproduces_the_answers_and_its_certificates_check(cli, tmp_path):
    spec = tmp_path / "out" / "gpt2.mlp"
    run = cli("scan", gpt2(tmp_path / "g"), "--write-spec", spec, "--certificates",
              tmp_path / "certs")
    assert run.code == 0, run.err
    text = spec.read_text()
    assert "# expect: proved" in text and "# expect: refuted" in text
    assert "norm pre layernorm { eps 1e-5" in text and "_bare {" in text
    assert cli("--expect", spec).code == 0
    check = cli("check", tmp_path / "certs")  # the sublayer's and the bare block's claims
    assert check.code == 0 and check.out.count(": valid") == 4, check.out
    again = cli("scan", gpt2(tmp_path / "g"), "--write-spec", spec)
    assert again.code == 2 and "exists" in again.err  # never replaced
    assert spec.read_text() == text


def test_usage_errors_are_exit_2_with_a_message(cli, tmp_path):
    assert cli("scan", tmp_path / "nothing").code == 2
    run = cli("scan", gpt2(tmp_path / "g"), "--certificates", tmp_path / "c")
    assert run.code == 2 and "--write-spec" in run.err
    run = cli("scan", gpt2(tmp_path / "g2", activation="quick_gelu"))
    assert run.code == 2 and "quick_gelu" in run.err and "known:" in run.err
    (tmp_path / "model.bin").write_bytes(b"PK")  # not a pickle torch can read: said either way
    run = cli("scan", tmp_path / "model.bin")
    assert run.code == 2 and "model.bin" in run.err and ("torch" in run.err), run.err
    (tmp_path / "notes.txt").write_text("x")
    run = cli("scan", tmp_path / "notes.txt")
    assert run.code == 2 and "expected a folder" in run.err
    # output places that are files or folders are refused before anything is written
    run = cli("scan", gpt2(tmp_path / "g3"), "--write-spec", tmp_path / "s.mlp",
              "--certificates", tmp_path / "notes.txt")
    assert run.code == 2 and "notes.txt is not a folder" in run.err, run.err
    assert not (tmp_path / "s.mlp").exists()
    (tmp_path / "wsdir").mkdir()
    run = cli("scan", gpt2(tmp_path / "g3"), "--write-spec", tmp_path / "wsdir")
    assert run.code == 2 and "a folder; give a file name ending in .mlp" in run.err
    run = cli("scan", gpt2(tmp_path / "g3"), "--write-spec", tmp_path / "notes.txt" / "s.mlp")
    assert run.code == 2 and "notes.txt is not a folder" in run.err
    run = cli("scan", gpt2(tmp_path / "g3"), "--timeout", "nan")
    assert run.code == 2 and "--timeout" in run.err


def test_an_activation_that_contradicts_config_json_needs_force(cli, tmp_path):
    folder = gpt2(tmp_path / "g", activation="relu")
    with pytest.raises(ScanError) as error:
        find_named(open_checkpoint(folder), "gelu_new")
    message = str(error.value)
    assert "--activation gelu_new (gelu_tanh) contradicts config.json's 'relu' (relu)" in \
        message and "--force-activation" in message, message
    found, _ = find_named(open_checkpoint(folder), "gelu_new", force=True)
    assert {b.activation for b in found} == {"gelu_tanh"}
    found, _ = find_named(open_checkpoint(folder), "relu")  # agreeing: no force needed
    assert {b.activation for b in found} == {"relu"}
    run = cli("scan", folder, "--activation", "tanh")
    assert run.code == 2 and "contradicts config.json's 'relu'" in run.err, run.err
    run = cli("scan", folder, "--force-activation")
    assert run.code == 2 and "--force-activation needs --activation" in run.err
    # a config activation the language lacks is no licence to decide another one
    odd = gpt2(tmp_path / "q", activation="quick_gelu")
    with pytest.raises(ScanError, match="'quick_gelu' .an activation the language does not"):
        find_named(open_checkpoint(odd), "gelu")
    assert find_named(open_checkpoint(odd), "gelu", force=True)[0][0].activation == "gelu"


def test_weights_without_config_json_ask_for_activation_saying_why(tmp_path):
    folder = gpt2(tmp_path / "g")
    (folder / "config.json").unlink()
    with pytest.raises(ScanError) as error:
        find_named(open_checkpoint(folder / "model.safetensors"), None)
    assert "there is no config.json beside the weights" in str(error.value)
    assert "give --activation NAME" in str(error.value)
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ScanError, match="config.json names none"):
        find_named(open_checkpoint(folder), None)
    found, _ = find_named(open_checkpoint(folder), "relu")  # nothing to contradict
    assert {b.activation for b in found} == {"relu"}


def test_archives_name_the_model_files_inside_and_say_to_extract(tmp_path):
    import zipfile

    folder = gpt2(tmp_path / "g")
    for suffix in (".zip", ".whl"):
        archive = tmp_path / f"model{suffix}"
        with zipfile.ZipFile(archive, "w") as out:
            out.write(folder / "model.safetensors", "pkg/model.safetensors")
            out.write(folder / "config.json", "pkg/config.json")
            out.writestr("pkg/m.onnx", b"")
        with pytest.raises(ScanError) as error:
            open_checkpoint(archive)
        assert "extract it" in str(error.value)
        assert "pkg/model.safetensors, pkg/m.onnx" in str(error.value), error.value
    empty = tmp_path / "e.zip"
    with zipfile.ZipFile(empty, "w") as out:
        out.writestr("readme.txt", "x")
    with pytest.raises(ScanError, match="no .onnx, .safetensors or .npz file inside"):
        open_checkpoint(empty)
    inside = tmp_path / "download"
    inside.mkdir()
    (tmp_path / "model.zip").rename(inside / "model.zip")
    with pytest.raises(ScanError, match="model.zip: an archive, .* extract it"):
        open_checkpoint(inside)  # a folder holding only an archive: said so


def test_a_sharded_index_naming_a_mistyped_tensor_suggests_the_held_one(tmp_path):
    folder = llama_sharded(tmp_path / "l")
    index = folder / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    shard = data["weight_map"].pop("model.layers.0.mlp.up_proj.weight")
    data["weight_map"]["model.layers.0.mlp.up_prj.weight"] = shard
    index.write_text(json.dumps(data))
    with pytest.raises(ScanError, match="'model.layers.0.mlp.up_prj.weight' is mapped to .*, "
                                        "which does not hold it; did you mean "
                                        "'model.layers.0.mlp.up_proj.weight'"):
        open_checkpoint(folder)


def test_the_api_returns_the_same_answers_as_the_command(cli, tmp_path):
    report = absorb_formal.scan(gpt2(tmp_path / "g", norms=False))
    shown = cli("scan", "--json", tmp_path / "g").json()["blocks"]
    assert [(a.block.where, a.absorbable, list(a.min_width)) for a in report.blocks] == [
        (b["where"], b["absorbable"], b["min_width"]) for b in shown]
    assert report.blocks[0].absorbable == "yes" and report.blocks[1].absorbable == "no"
    lo, hi = report.blocks[1].min_width
    assert lo is not None and lo > 4 and hi is not None  # relu: spare pairs always work


# ---- export ---------------------------------------------------------------------------------

def _relu_mlp(x: np.ndarray, up: np.ndarray, down: np.ndarray) -> np.ndarray:
    return np.maximum(x @ up.T, 0) @ down.T


def _read(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a float32 / float64 safetensors file, as float64."""
    from absorb_formal.weights.arrays import shapes

    out = {}
    for key in shapes(path):
        code, shape, data = safetensors.stored(path, key)
        out[key] = np.frombuffer(data, {"F32": "<f4", "F64": "<f8"}[code]).reshape(shape)
    return {k: v.astype(np.float64) for k, v in out.items()}


def test_export_writes_a_skip_free_checkpoint_with_the_same_names_and_layout(cli, tmp_path):
    folder = gpt2(tmp_path / "g", norms=False)
    run = cli("scan", folder, "--export", tmp_path / "plain", "--json")
    assert run.code == 0, run.err
    width = max(b["min_width"][1] for b in run.json()["blocks"])
    before, after = _read(folder / "model.safetensors"), _read(tmp_path / "plain" /
                                                              "model.safetensors")
    assert set(after) == set(before)
    for name in before:
        if ".mlp." not in name:
            assert np.array_equal(before[name], after[name]), name  # copied bit for bit
    config = json.loads((tmp_path / "plain" / "config.json").read_text())
    assert config["n_inner"] == width and config["absorb_formal"]["width"] == width
    x = np.random.default_rng(0).normal(size=(500, 3)) * 3
    for i in range(2):
        up, down = (before[f"transformer.h.{i}.mlp.c_fc.weight"].T,
                    before[f"transformer.h.{i}.mlp.c_proj.weight"].T)
        new_up, new_down = (after[f"transformer.h.{i}.mlp.c_fc.weight"].T,
                            after[f"transformer.h.{i}.mlp.c_proj.weight"].T)
        assert new_up.shape == (width, 3)  # Conv1D layout kept: stored input × output
        residual = x + _relu_mlp(x, up, down)
        assert np.allclose(_relu_mlp(x, new_up, new_down), residual, atol=1e-9)


def test_exported_tensors_are_proved_equal_to_the_residual_blocks(cli, tmp_path):
    folder = gpt2(tmp_path / "g", norms=False)
    run = cli("scan", folder, "--export", tmp_path / "plain", "--json")
    assert run.code == 0
    width = max(b["min_width"][1] for b in run.json()["blocks"])
    rounding = json.loads((tmp_path / "plain" / "config.json").read_text())["absorb_formal"][
        "max_rounding_rel_error"]
    exact = [i for i in range(2) if rounding[f"transformer.h.{i}.mlp"] == 0]
    assert 0 in exact  # the flip witness of layer 0 has integer weights: stored exactly
    spec = tmp_path / "eq.mlp"
    lines = []
    for i in exact:
        key = f"transformer.h.{i}.mlp"
        lines += [f"block A{i} {{ activation relu dim 3 width 4",
                  f'  up = load("g/model.safetensors", "{key}.c_fc.weight").T',
                  f'  down = load("g/model.safetensors", "{key}.c_proj.weight").T }}',
                  f"block P{i} {{ activation relu dim 3 width {width} skip none",
                  f'  up = load("plain/model.safetensors", "{key}.c_fc.weight").T',
                  f'  down = load("plain/model.safetensors", "{key}.c_proj.weight").T }}',
                  f"claim A{i} equals P{i}"]
    spec.write_text("\n".join(lines) + "\n")
    run = cli(spec)
    assert run.code == 0 and run.out.count(": proved:") == len(exact), run.out + run.err


def test_export_is_refused_when_some_sublayer_has_no_proved_width(cli, tmp_path):
    # the bare SwiGLU blocks (asked for by --export-bare) are never absorbable (T4)
    run = cli("scan", llama_sharded(tmp_path / "l"), "--export", tmp_path / "plain",
              "--export-bare")
    assert run.code == 2 and "no width is proved" in run.err
    assert not (tmp_path / "plain").exists() or not any((tmp_path / "plain").iterdir())


# ---- PyTorch pickles (torch optional) ---------------------------------------------------------

def test_a_pytorch_state_dict_is_copied_bit_for_bit_and_decided_alike(cli, tmp_path):
    torch = pytest.importorskip("torch")
    folder = gpt2(tmp_path / "g")

    state = {}
    for key in _read(folder / "model.safetensors"):
        code, shape, data = safetensors.stored(folder / "model.safetensors", key)
        state[key] = torch.from_numpy(np.frombuffer(data, "<f4").reshape(shape).copy())
    state["transformer.h.0.mlp.c_fc.weight"] = state["transformer.h.0.mlp.c_fc.weight"].to(
        torch.bfloat16)  # exact: small integers
    pickled = tmp_path / "p"
    pickled.mkdir()
    torch.save(state, pickled / "pytorch_model.bin")
    (pickled / "config.json").write_text((folder / "config.json").read_text())
    from_pickle = cli("scan", "--json", pickled)
    assert from_pickle.code == 0, from_pickle.err
    reference = cli("scan", "--json", folder).json()["blocks"]
    assert [(b["absorbable"], b["min_width"]) for b in from_pickle.json()["blocks"]] == [
        (b["absorbable"], b["min_width"]) for b in reference]
    spec = tmp_path / "out" / "p.mlp"
    assert cli("scan", pickled, "--write-spec", spec).code == 0
    copy = tmp_path / "out" / "pytorch_model.safetensors"
    code, shape, data = safetensors.stored(copy, "transformer.h.0.mlp.c_fc.weight")
    assert code == "BF16" and data == state["transformer.h.0.mlp.c_fc.weight"].view(
        torch.int16).numpy().tobytes()
    assert cli("--expect", spec).code == 0
    again = cli("scan", pickled, "--write-spec", tmp_path / "out" / "q.mlp")
    assert again.code == 2 and "exists" in again.err  # the copy is never written over


def test_an_up_tensor_without_its_partners_is_listed_with_what_is_missing(cli, tmp_path):
    _save(tmp_path / "model.safetensors",
          {"model.layers.0.mlp.up_proj.weight": np.ones((4, 3), np.float32)})
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "llama", "hidden_size": 3, "intermediate_size": 4, "hidden_act": "silu"}))
    run = cli("scan", tmp_path, "--json")
    skipped = run.json()["skipped"]
    assert [s["where"] for s in skipped] == ["model.layers.0.mlp.up_proj.weight"], skipped
    assert "model.layers.0.mlp.down_proj.weight" in skipped[0]["why"] and "missing" in \
        skipped[0]["why"]
    assert run.code == 2 and "no MLP sublayer found" in run.err, run.err


def test_a_checkpoint_without_mlp_is_exit_2_and_writes_nothing(cli, tmp_path):
    """Nothing to decide is not success: the skipped tensors are listed, the error says why,
    and no spec or export folder is written."""
    _save(tmp_path / "model.safetensors",
          {"encoder.layer.0.attention.query.weight": np.ones((3, 3), np.float32)})
    run = cli("scan", tmp_path, "--write-spec", tmp_path / "out" / "s.mlp",
              "--export", tmp_path / "free")
    assert run.code == 2 and "no MLP sublayer found" in run.err, run.err
    assert "attention" in run.out
    assert not (tmp_path / "out" / "s.mlp").exists() and not (tmp_path / "free").exists()


def test_no_mlp_prints_no_empty_table(cli, tmp_path):
    _save(tmp_path / "model.safetensors",
          {"encoder.layer.0.attention.query.weight": np.ones((3, 3), np.float32)})
    run = cli("scan", tmp_path)
    assert run.code == 2 and "NAME" not in run.out and "skipped:" in run.out, run.out


# ---- normalised sublayers: what export may write -----------------------------------------

def _encoder(folder: Path, model_type: str, prefix: str, norm: str, d: int, m: int) -> Path:
    """A BERT/ViT-shaped checkpoint: erf gelu with biases (intermediate.dense, output.dense)
    and the LayerNorm `norm` beside the MLP (layer_norm_eps 1e-12)."""
    rng = np.random.default_rng(RNG_SEED)
    tensors = {
        prefix + "intermediate.dense.weight": rng.normal(size=(m, d)).astype(np.float32),
        prefix + "intermediate.dense.bias": rng.normal(size=m).astype(np.float32),
        prefix + "output.dense.weight": rng.normal(size=(d, m)).astype(np.float32),
        prefix + "output.dense.bias": rng.normal(size=d).astype(np.float32),
        prefix + f"{norm}.weight": (1 + 0.1 * rng.normal(size=d)).astype(np.float32),
        prefix + f"{norm}.bias": (0.1 * rng.normal(size=d)).astype(np.float32),
        prefix + "attention.self.query.weight": np.ones((d, d), np.float32),
    }
    folder.mkdir(parents=True, exist_ok=True)
    _save(folder / "model.safetensors", tensors)
    (folder / "config.json").write_text(json.dumps(
        {"model_type": model_type, "hidden_size": d, "intermediate_size": m,
         "hidden_act": "gelu", "layer_norm_eps": 1e-12}))
    return folder


def bert(folder: Path, d: int = 3, m: int = 4) -> Path:
    """A BERT-shaped post-norm checkpoint: output.LayerNorm after the residual sum."""
    return _encoder(folder, "bert", "bert.encoder.layer.0.", "output.LayerNorm", d, m)


def _gelu(z: np.ndarray) -> np.ndarray:
    from math import erf, sqrt

    return 0.5 * z * (1 + np.vectorize(erf)(z / sqrt(2)))


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    centred = x - x.mean(axis=1, keepdims=True)
    return centred / np.sqrt((centred ** 2).mean(axis=1, keepdims=True) + eps) * gamma + beta


def test_a_post_norm_export_keeps_the_models_outputs(cli, tmp_path):
    folder = bert(tmp_path / "b")
    run = cli("scan", folder, "--export", tmp_path / "plain", "--json")
    assert run.code == 0, run.err
    [answer] = run.json()["blocks"]
    assert answer["norm"]["placement"] == "post" and "projected block" in answer["method"]
    before, after = _read(folder / "model.safetensors"), _read(tmp_path / "plain" /
                                                              "model.safetensors")
    p = "bert.encoder.layer.0."
    width = json.loads((tmp_path / "plain" / "config.json").read_text())["absorb_formal"][
        "width"]
    assert after[p + "intermediate.dense.weight"].shape == (width, 3)
    gamma, beta = before[p + "output.LayerNorm.weight"], before[p + "output.LayerNorm.bias"]
    x = np.random.default_rng(1).normal(size=(400, 3)) * 3

    def ffn(t: dict[str, np.ndarray], z: np.ndarray) -> np.ndarray:
        hidden = _gelu(z @ t[p + "intermediate.dense.weight"].T + t[p + "intermediate.dense.bias"])
        return hidden @ t[p + "output.dense.weight"].T + t[p + "output.dense.bias"]

    # the model's own forward pass: LN(x + F(x)) before, LN(P(x)) after (residual dropped)
    original = _layer_norm(x + ffn(before, x), gamma, beta, 1e-12)
    exported = _layer_norm(ffn(after, x), gamma, beta, 1e-12)
    assert np.abs(exported - original).max() < 1e-4 * np.abs(original).max()
    # the bare block computes something else: the projection is what makes P fit
    note = json.loads((tmp_path / "plain" / "config.json").read_text())["absorb_formal"]["note"]
    assert "keep the norm" in note


def test_a_pre_norm_export_is_refused_with_the_theorems_reason(cli, tmp_path):
    folder = gpt2(tmp_path / "g")
    run = cli("scan", folder, "--export", tmp_path / "plain")
    assert run.code == 2 and "§10.2" in run.err and "--export-bare" in run.err, run.err
    assert not (tmp_path / "plain").exists()
    bare = cli("scan", folder, "--export", tmp_path / "bare", "--export-bare")
    assert bare.code == 0, bare.err
    record = json.loads((tmp_path / "bare" / "config.json").read_text())["absorb_formal"]
    assert record["note"].startswith("NOT A DROP-IN REPLACEMENT")
    assert cli("scan", folder, "--export-bare").code == 2  # needs --export


def vit(folder: Path, d: int = 3, m: int = 4) -> Path:
    """A ViT-shaped pre-norm checkpoint: layernorm_after before the MLP."""
    return _encoder(folder, "vit", "vit.encoder.layer.0.", "layernorm_after", d, m)


@pytest.mark.parametrize("make", [gpt2, llama_sharded, vit], ids=["gpt2", "llama", "vit"])
def test_pre_norm_checkpoints_are_no_at_any_width_with_checked_certificates(cli, tmp_path, make):
    folder = make(tmp_path / "model")
    spec = tmp_path / "out" / "model.mlp"
    run = cli("scan", "--json", folder, "--write-spec", spec, "--certificates", tmp_path / "c")
    assert run.code == 0, run.err
    for answer in run.json()["blocks"]:
        assert answer["norm"]["placement"] == "pre", answer
        assert (answer["absorbable"], answer["any_width"], answer["min_width"]) == (
            "no", "no", [None, None]), answer
    check = cli("check", tmp_path / "c")
    assert check.code == 0 and "0 invalid" in check.out and "0 stale" in check.out, check.out
    assert cli("--expect", spec).code == 0
    export = cli("scan", folder, "--export", tmp_path / "plain")
    assert export.code == 2 and "§10.2" in export.err and not (tmp_path / "plain").exists()


def test_a_refused_export_says_why_in_the_json_too(cli, tmp_path):
    run = cli("scan", "--json", gpt2(tmp_path / "g"), "--export", tmp_path / "plain")
    doc = run.json()
    assert run.code == 2 and doc["exit_code"] == 2 and doc["export"] is None
    assert "§10.2" in doc["error"] and doc["error"] in run.err


def test_a_forced_activation_is_said_in_the_output_and_the_spec(cli, tmp_path):
    folder = gpt2(tmp_path / "g", norms=False)
    spec = tmp_path / "s.mlp"
    run = cli("scan", "--json", folder, "--activation", "gelu", "--force-activation",
              "--write-spec", spec)
    assert run.code in (0, 3), run.err
    notes = run.json()["blocks"][0]["notes"]
    assert any("--force-activation: decided as gelu; config.json says 'relu'" in n
               for n in notes), notes
    assert "--force-activation" in spec.read_text()
    assert "--force-activation: decided as gelu" in cli("scan", folder, "--activation", "gelu",
                                                        "--force-activation").out


def test_a_known_family_without_its_eps_is_placed_but_not_decided(cli, tmp_path):
    folder = llama_sharded(tmp_path / "l")
    config = json.loads((folder / "config.json").read_text())
    del config["rms_norm_eps"]
    (folder / "config.json").write_text(json.dumps(config))
    run = cli("scan", "--json", folder)
    first = run.json()["blocks"][0]
    assert run.code == 3 and first["absorbable"] == "unknown" and "rms_norm_eps" in first["reason"]
    assert first["norm"] == {"kind": "rmsnorm", "placement": "pre", "eps": None}
    assert "pre rmsnorm?" in cli("scan", folder).out
