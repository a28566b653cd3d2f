"""Finding MLP sublayers in a checkpoint: its files, its tensors' names and shapes, its
`config.json`, and the naming conventions of the common model families.

Nothing here reads a weight value: blocks are described by `TensorRef`s, which the generated
spec loads (`load("FILE", "KEY")`), so the prover and the checker each read the values
exactly, from the files themselves.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from ..language import SpecError, activation_named
from ..language.errors import did_you_mean
from ..weights.arrays import ArrayError, shapes
from .found import FoundBlock, ScanError, Skipped, TensorRef

# ---- activations: config.json names → the language's ---------------------------------------

ACTIVATION_KEYS = ("hidden_activation", "hidden_act", "activation_function", "dense_act_fn",
                   "feed_forward_proj", "ffn_activation", "activation")
# Hugging Face (ACT2FN) names of activations the language has exactly.
PLAIN_NAMES = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_tanh",
               "gelu_pytorch_tanh": "gelu_tanh", "gelu_tanh": "gelu_tanh", "silu": "silu",
               "swish": "silu", "tanh": "tanh", "sigmoid": "sigmoid", "relu2": "relu^2",
               "identity": "identity", "linear": "identity"}
GATED_NAMES = {"silu": "swiglu", "gelu": "geglu", "relu": "reglu", "sigmoid": "glu",
               "identity": "bilinear"}


def known_names() -> str:
    return ", ".join(sorted(PLAIN_NAMES))


def language_activation(name: str, gated: bool, where: str) -> str:
    """The language's activation for a config's (or `--activation`'s) name — a Hugging Face
    name (`gelu_new`, `silu`, ...) or the language's own (`relu^2`, `leaky_relu(1/100)`,
    `swiglu`) — for a plain or a gated block; ScanError when it has none."""
    raw = name.strip()
    if raw.startswith("gated-"):  # T5's feed_forward_proj: "gated-gelu" is gelu_new, gated
        raw, gated = ("gelu_new" if raw == "gated-gelu" else raw[len("gated-"):]), True
    plain = PLAIN_NAMES.get(raw)
    if plain is None:
        try:
            act = activation_named(raw)
        except SpecError:
            raise ScanError(f"{where}: activation {name!r} is not one absorb_formal knows "
                            f"exactly (known: {known_names()}, or any activation of the "
                            "language: --activation takes any of these)") from None
        if act.gated:
            if not gated:
                raise ScanError(f"{where}: activation {name!r} is gated, but the block has no "
                                "gate tensor")
            return act.name
        plain = act.name
    if not gated:
        return plain
    if plain not in GATED_NAMES:
        raise ScanError(f"{where}: a gated block with activation {name!r} ({plain}) has no "
                        f"exact counterpart in the language (gated: "
                        f"{', '.join(f'{k} -> {v}' for k, v in GATED_NAMES.items())}); give "
                        "--activation NAME --force-activation to decide another activation "
                        "instead")
    return GATED_NAMES[plain]


def config_activation(config: dict[str, Any]) -> str | None:
    for key in ACTIVATION_KEYS:
        value = config.get(key)
        if isinstance(value, str) and value:
            return value
    return None


# ---- the checkpoint's files and tensors -------------------------------------------------------

@dataclass
class Checkpoint:
    """root: the folder the tensor files are relative to; tensors: name → (file, shape);
    config: the parsed config.json, or {}; path: what the user gave."""

    path: Path
    root: Path
    tensors: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    kind: str = "safetensors"  # safetensors | npz | onnx


WEIGHT_SUFFIXES = (".safetensors", ".npz")


PICKLES = (".bin", ".pt", ".pth")


def _pickle_of(path: Path) -> Path | None:
    """The PyTorch pickle a scan of `path` reads, if it reads one."""
    if path.is_file() and path.suffix.lower() in PICKLES:
        return path
    if path.is_dir() and not any(p.suffix.lower() in WEIGHT_SUFFIXES + (".onnx",)
                                 for p in path.iterdir()):
        found = [p for p in sorted(path.iterdir()) if p.suffix.lower() in PICKLES
                 and p.is_file()]
        if len(found) == 1:
            return found[0]
    return None


def needs_copies(path: Path) -> bool:
    return _pickle_of(path) is not None


def open_checkpoint(path: Path, copies: Path | None = None) -> Checkpoint:
    """The checkpoint at `path`: a folder (config.json with model.safetensors, sharded
    weights with model.safetensors.index.json, .safetensors/.npz files, or one PyTorch
    pickle), or one .safetensors, .npz, .onnx or PyTorch pickle file. A pickle's tensors are
    first copied bit for bit into `copies`/NAME.safetensors (a new file; torch needed)."""
    if not path.exists():
        raise ScanError(f"{path}: no such file or folder")
    pickle = _pickle_of(path)
    if pickle is not None:
        if copies is None:
            raise ScanError(f"{path}: a PyTorch pickle: its tensors need a folder to be "
                            "copied into")
        from ..weights.pickles import to_safetensors

        copy = to_safetensors(pickle, copies / f"{pickle.stem}.safetensors")
        checkpoint = Checkpoint(path, copies, config=_config_beside(pickle))
        _add_file(checkpoint, copy.name)
        return checkpoint
    if path.is_dir():
        return _folder(path)
    suffix = path.suffix.lower()
    if suffix in ARCHIVES:
        raise ScanError(_archive(path))
    if suffix == ".onnx":
        return Checkpoint(path, path.parent, {}, _config_beside(path), "onnx")
    if suffix not in WEIGHT_SUFFIXES:
        raise ScanError(f"{path}: expected a folder, or a .safetensors, .npz or .onnx file")
    checkpoint = Checkpoint(path, path.parent, config=_config_beside(path),
                            kind=suffix.lstrip("."))
    _add_file(checkpoint, path.name)
    return checkpoint


ARCHIVES = (".zip", ".whl")


def _archive(path: Path) -> str:
    """Why a .zip or .whl is not read, naming the model files inside it."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            members = [n for n in archive.namelist()
                       if n.lower().endswith((".onnx", ".safetensors", ".npz"))]
    except (OSError, zipfile.BadZipFile) as error:
        return f"{path}: an archive, and not a readable one ({error})"
    if not members:
        return (f"{path}: an archive with no .onnx, .safetensors or .npz file inside; scan "
                "reads a checkpoint folder or file, not an archive")
    return (f"{path}: an archive, which scan does not read; extract it and give one of the "
            f"model files inside (or its folder): {', '.join(members[:10])}"
            + (f", ... ({len(members)} in all)" if len(members) > 10 else ""))


def _config_beside(path: Path) -> dict[str, Any]:
    config = path.parent / "config.json"
    return _read_config(config) if config.is_file() else {}


def _read_config(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ScanError(f"{path}: not a readable JSON config ({error})") from None
    if not isinstance(data, dict):
        raise ScanError(f"{path}: expected a JSON object")
    return data


def _folder(folder: Path) -> Checkpoint:
    config = _read_config(folder / "config.json") if (folder / "config.json").is_file() else {}
    checkpoint = Checkpoint(folder, folder, config=config)
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        data = _read_config(index)
        weight_map = data.get("weight_map")
        if not isinstance(weight_map, dict) or not all(
                isinstance(v, str) for v in weight_map.values()):
            raise ScanError(f"{index}: expected a 'weight_map' of tensor names to files")
        for file in sorted(set(weight_map.values())):
            _add_file(checkpoint, file, only={k for k, v in weight_map.items() if v == file})
        missing = sorted(set(weight_map) - set(checkpoint.tensors))
        if missing:
            held = sorted(set(shapes_of(folder / weight_map[missing[0]])) - set(weight_map))
            raise ScanError(f"{index}: tensor {missing[0]!r} is mapped to "
                            f"{weight_map[missing[0]]!r}, which does not hold it"
                            f"{did_you_mean(missing[0], held)}")
        return checkpoint
    files = sorted(p.name for p in folder.iterdir() if p.suffix.lower() in WEIGHT_SUFFIXES)
    if (folder / "model.safetensors").is_file():
        files = ["model.safetensors"]
    if not files:
        onnx = sorted(folder.glob("*.onnx"))
        if len(onnx) == 1:
            return Checkpoint(onnx[0], folder, {}, config, "onnx")
        if len(onnx) > 1:
            raise ScanError(f"{folder}: {len(onnx)} .onnx models ({', '.join(p.name for p in onnx)}"
                            "): name the one to scan (scan FOLDER/MODEL.onnx)")
        archives = sorted(p for p in folder.iterdir() if p.suffix.lower() in ARCHIVES)
        if archives:
            raise ScanError(_archive(archives[0]))
        raise ScanError(f"{folder}: no model.safetensors, model.safetensors.index.json, "
                        ".safetensors, .npz, single .onnx or single PyTorch pickle file")
    for file in files:
        _add_file(checkpoint, file)
    checkpoint.kind = "npz" if all(f.endswith(".npz") for f in files) else "safetensors"
    return checkpoint


def shapes_of(path: Path) -> dict[str, tuple[int, ...]]:
    """The shape of every tensor of a weight file; ScanError when it cannot be listed."""
    if not path.is_file():
        raise ScanError(f"{path}: no such file")
    try:
        return shapes(path)
    except ArrayError as error:
        raise ScanError(f"{path}: {error}") from None


def _add_file(checkpoint: Checkpoint, file: str, only: set[str] | None = None) -> None:
    path = checkpoint.root / file
    found = shapes_of(path)
    for key, shape in found.items():
        if only is not None and key not in only:
            continue
        if key in checkpoint.tensors:
            raise ScanError(f"{path}: tensor {key!r} is also in "
                            f"{checkpoint.tensors[key][0]!r}: which one is meant is ambiguous")
        checkpoint.tensors[key] = (file, shape)


# ---- naming conventions -----------------------------------------------------------------------

@dataclass(frozen=True)
class Convention:
    """Tensors PREFIX + up / gate / down (+ `.weight`, `.bias`) of one family's MLP.
    layout: "out_in" (nn.Linear, m×d for up) or "in_out" (GPT-2's Conv1D, d×m for up)."""

    family: str
    up: str
    down: str
    gate: str | None = None
    layout: str = "out_in"


CONVENTIONS = (
    Convention("GPT-2 (Conv1D)", "mlp.c_fc", "mlp.c_proj", layout="in_out"),
    Convention("GPT-J", "mlp.fc_in", "mlp.fc_out"),
    Convention("GPT-NeoX", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h"),
    Convention("BERT / RoBERTa / ViT", "intermediate.dense", "output.dense"),
    Convention("OPT / Phi", "fc1", "fc2"),
    Convention("T5 (gated)", "DenseReluDense.wi_1", "DenseReluDense.wo", "DenseReluDense.wi_0"),
    Convention("T5", "DenseReluDense.wi", "DenseReluDense.wo"),
    Convention("LLaMA / Mistral / Qwen / Gemma", "mlp.up_proj", "mlp.down_proj",
               "mlp.gate_proj"),
    Convention("Mixtral expert", "w3", "w2", "w1"),
)
# Tensors of these kinds are passed over by name (said in the summary, one line per kind).
OTHER_KINDS = (("attention", re.compile(r"attn|attention|self_attn|q_proj|k_proj|v_proj|"
                                        r"o_proj|c_attn|query|key|value|SelfAttention|"
                                        r"EncDecAttention|relative_attention")),
               ("norm", re.compile(r"norm|ln_|layer_norm|LayerNorm|\.ln\d|ln_f")),
               ("embedding", re.compile(r"embed|wte|wpe|shared\.weight|lm_head|position")),
               ("fused MLP (gate and up in one tensor)", re.compile(r"gate_up_proj")))


def block_name(where: str) -> str:
    """A block name for a sublayer path: `transformer.h.0.mlp` → `transformer_h_0_mlp`."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", where).strip("_") or "mlp"
    return name if re.match(r"[A-Za-z_]", name) else f"b_{name}"


def find_named(checkpoint: Checkpoint, activation: str | None, force: bool = False
               ) -> tuple[list[FoundBlock], list[Skipped]]:
    """Every MLP sublayer the naming conventions find, in checkpoint order, and what was
    passed over. `activation` (a --activation value) is decided where config.json names
    none; where it names one, the two must agree unless `force`."""
    tensors = checkpoint.tensors
    taken: set[str] = set()
    found: list[FoundBlock] = []
    skipped: list[Skipped] = []
    named = Named(activation, config_activation(checkpoint.config), force,
                  _config_path(checkpoint.path))
    hidden = _hidden_size(checkpoint.config)
    partial: dict[str, str] = {}  # up tensors whose convention's other tensors are missing
    prefixes: dict[str, str] = {}  # a block's where → its tensors' prefix (its norm is near)
    for convention in CONVENTIONS:
        pattern = re.compile(r"^(?P<prefix>(?:.*\.)?)" + re.escape(convention.up) + r"\.weight$")
        for key in tensors:
            match = pattern.match(key)
            if match is None or key in taken:
                continue
            prefix = match.group("prefix")
            names = {part: prefix + getattr(convention, part) for part in ("up", "down", "gate")
                     if getattr(convention, part) is not None}
            missing = [f"{n}.weight" for n in names.values() if f"{n}.weight" not in tensors]
            if missing:
                partial.setdefault(key, f"named as {convention.family} names an MLP's up "
                                        f"tensor, but {', '.join(missing)} is missing")
                continue
            where = _module(prefix, convention)
            prefixes[where] = prefix
            try:
                found.append(_block(checkpoint, convention, names, where, named, hidden))
            except ScanError as error:
                raise ScanError(f"{checkpoint.path}: {error}") from None
            taken |= {f"{n}.{s}" for n in names.values() for s in ("weight", "bias")}
    order = {key: i for i, key in enumerate(tensors)}
    found.sort(key=lambda b: order[b.up.key])
    from .norms import attach, used  # the norm beside each sublayer, by config.json's family

    found = attach(found, tensors, checkpoint.config, prefixes)
    if named.force and named.asked is not None and named.config is not None \
            and named.asked != named.config:  # said in the spec's comment and the output
        found = [_renoted(b, f"--force-activation: decided as {b.activation}; config.json "
                             f"says {named.config!r}") for b in found]
    norms = used(found)
    if norms:  # read as part of a sublayer: said so, not passed over as "not an MLP"
        skipped.append(Skipped(f"{len(norms)} norm tensor(s), e.g. {norms[0]}",
                               "read as the norm beside an MLP sublayer (its NORM column)"))
        taken |= set(norms)
    for key, why in partial.items():  # an up tensor without its partners: said as such
        if key not in taken:
            skipped.append(Skipped(key, why))
            taken.add(key)
    skipped += _passed_over(tensors, taken)
    names_seen: dict[str, int] = {}
    unique = []
    for block in found:  # two sublayers whose paths sanitise alike keep distinct names
        count = names_seen.get(block.name, 0)
        names_seen[block.name] = count + 1
        unique.append(block if not count else _renamed(block, f"{block.name}_{count + 1}"))
    return unique, skipped


def _module(prefix: str, convention: Convention) -> str:
    """The sublayer's module path: the prefix and what its tensors' names share
    (`h.0.` + `mlp.c_fc`/`mlp.c_proj` → `h.0.mlp`)."""
    parts = [name.split(".") for name in (convention.up, convention.down)]
    common = []
    for a, b in zip(*parts, strict=False):
        if a != b:
            break
        common.append(a)
    return (prefix + ".".join(common)).rstrip(".") or convention.up


def _renoted(block: FoundBlock, note: str) -> FoundBlock:
    from dataclasses import replace
    return replace(block, notes=(*block.notes, note))


def _renamed(block: FoundBlock, name: str) -> FoundBlock:
    from dataclasses import replace
    return replace(block, name=name)


def _hidden_size(config: dict[str, Any]) -> int | None:
    for key in ("hidden_size", "n_embd", "d_model", "dim"):
        if isinstance(config.get(key), int):
            return int(config[key])
    return None


@dataclass(frozen=True)
class Named:
    """The activation asked for (--activation), the one config.json names, whether the
    first may contradict the second, and where config.json would be."""

    asked: str | None
    config: str | None
    force: bool
    config_file: Path

    def activation(self, gated: bool, where: str) -> str:
        """The language's activation to decide for a plain or gated block."""
        if self.asked is None and self.config is None:
            if not self.config_file.is_file():
                raise ScanError(f"{where}: no activation: there is no config.json beside the "
                                f"weights ({self.config_file}) to name it; give --activation "
                                f"NAME (known: {known_names()})")
            raise ScanError(f"{where}: no activation: {self.config_file} names none (keys "
                            f"{', '.join(ACTIVATION_KEYS)}); give --activation NAME "
                            f"(known: {known_names()})")
        if self.asked is None:
            return language_activation(str(self.config), gated, where)
        asked = language_activation(self.asked, gated, where)
        if self.config is not None and not self.force:
            try:
                stated = language_activation(self.config, gated, where)
            except ScanError:
                stated = None
            if stated != asked:
                said = f"{stated}" if stated else "an activation the language does not have"
                contradicts(where, self.asked, asked,
                            f"config.json's {self.config!r} ({said})")
        return asked


def contradicts(where: str, asked: str, meant: str, stated: str) -> NoReturn:
    """ScanError: --activation names another activation than the model states."""
    raise ScanError(f"{where}: --activation {asked} ({meant}) contradicts {stated}: deciding "
                    "it would answer for another function than the model computes; give "
                    "--force-activation to decide it anyway")


def _config_path(path: Path) -> Path:
    """Where the checkpoint's config.json is read from."""
    return (path if path.is_dir() else path.parent) / "config.json"


def _block(checkpoint: Checkpoint, convention: Convention, names: dict[str, str], where: str,
           activation: Named, hidden: int | None) -> FoundBlock:
    tensors = checkpoint.tensors

    def ref(name: str, transpose: bool) -> TensorRef:
        return TensorRef(tensors[name][0], name, transpose)

    def shape(name: str) -> tuple[int, ...]:
        return tensors[name][1]

    def tensor(name: str) -> str:
        return f"tensor {name!r} (in {tensors[name][0]})"

    flip = convention.layout == "in_out"
    up_shape = shape(f"{names['up']}.weight")
    down_shape = shape(f"{names['down']}.weight")
    for name, found in ((names["up"], up_shape), (names["down"], down_shape)):
        if len(found) != 2:
            raise ScanError(f"{where}: {tensor(name + '.weight')} has shape {found}, expected a "
                            "matrix")
    m, d = (up_shape[1], up_shape[0]) if flip else up_shape
    wanted_down = (m, d) if flip else (d, m)
    if down_shape != wanted_down:
        raise ScanError(f"{where}: {tensor(names['down'] + '.weight')} has shape {down_shape}, "
                        f"expected {wanted_down} for an up tensor of shape {up_shape} "
                        f"({'input × output, Conv1D' if flip else 'output × input, nn.Linear'})")
    if hidden is not None and d != hidden:
        if m == hidden:  # the other way round: the width is the other size
            expected, hint = (up_shape[::-1], "; it looks stored the other way round")
        else:
            expected, hint = ((hidden, m) if flip else (m, hidden)), ""
        raise ScanError(f"{where}: {tensor(names['up'] + '.weight')} has shape {up_shape}: "
                        f"input size {d}, but config.json's hidden size is {hidden}; "
                        f"expected {expected} "
                        f"({'input × output, Conv1D' if flip else 'output × input, nn.Linear'},"
                        f" as {convention.family} stores it){hint}")
    gate = None
    if "gate" in names:
        gate_shape = shape(f"{names['gate']}.weight")
        if gate_shape != up_shape:
            raise ScanError(f"{where}: {tensor(names['gate'] + '.weight')} has shape {gate_shape}, "
                            f"expected {up_shape} (as the up tensor)")
        gate = ref(f"{names['gate']}.weight", flip)
    act = activation.activation(gate is not None, where)
    biases: dict[str, TensorRef | None] = {}
    for part, size in (("up", m), ("gate", m), ("down", d)):
        key = f"{names[part]}.bias" if part in names else None
        if key is None or key not in tensors:
            biases[part] = None
            continue
        if tuple(shape(key)) not in ((size,), (1, size), (size, 1)):
            raise ScanError(f"{where}: {tensor(key)} has shape {shape(key)}, expected "
                            f"({size},)")
        biases[part] = ref(key, False)
    return FoundBlock(block_name(where), where, act, d, m, ref(f"{names['up']}.weight", flip),
                      ref(f"{names['down']}.weight", flip), gate, biases["up"], biases["gate"],
                      biases["down"], (convention.family,))


def _passed_over(tensors: dict[str, Any], taken: set[str]) -> list[Skipped]:
    """What was not taken, grouped by kind: one entry per kind with a count and an example."""
    groups: dict[str, list[str]] = {}
    for key in tensors:
        if key in taken:
            continue
        kind = next((k for k, pattern in OTHER_KINDS if pattern.search(key)), "other")
        groups.setdefault(kind, []).append(key)
    why = {"other": "no MLP naming convention matches",
           "fused MLP (gate and up in one tensor)": "an MLP whose gate and up share one tensor: "
           "the language loads whole tensors, so it is not decided"}
    return [Skipped(f"{len(keys)} {kind} tensor(s), e.g. {keys[0]}",
                    why.get(kind, "not an MLP sublayer")) for kind, keys in groups.items()]


def find_blocks(checkpoint: Checkpoint, activation: str | None, force: bool = False
                ) -> tuple[list[FoundBlock], list[Skipped]]:
    """The MLP sublayers of a checkpoint: by naming convention, or by graph pattern (ONNX).
    `activation` (--activation) must agree with the activation config.json names or the
    graph computes, unless `force` (--force-activation)."""
    if checkpoint.kind == "onnx":
        from . import onnx_find  # says when the optional onnx package is missing

        found, skipped = onnx_find.find_blocks(checkpoint.path)
        if activation is not None:
            found = [_with_activation(b, activation, force, checkpoint.path) for b in found]
        return found, skipped
    return find_named(checkpoint, activation, force)


def _with_activation(block: FoundBlock, activation: str, force: bool, path: Path
                     ) -> FoundBlock:
    from dataclasses import replace

    asked = language_activation(activation, block.gate is not None, f"{path}: {block.where}")
    if block.activation and asked != block.activation and not force:
        contradicts(f"{path}: {block.where}", activation, asked,
                    f"the graph, which computes {block.activation}")
    notes = block.notes
    if block.activation and asked != block.activation:  # forced: said in the spec and output
        notes += (f"--force-activation: decided as {asked}, but the graph computes "
                  f"{block.activation}",)
    return replace(block, activation=asked, notes=notes)
