"""Blocks from Python: numpy arrays or torch modules, decided directly or saved as a spec.

    from absorb_formal import build
    spec = build.from_arrays("relu", up, down, skip="identity")   # or build.from_torch(mlp)
    # GPT-2's Conv1D weights are stored input x output: from_arrays(..., layout="in_out")
    build.decide(spec)                        # a Result, as `absorb-prove` reports it
    spec.save("checked", "mlp0")              # checked/mlp0.safetensors + checked/mlp0.mlp

Exact: every float is the exact dyadic rational its bits denote (bfloat16 and float16 widen
to float32 without rounding); nothing is rounded on the way to a verdict. The checker reads
its own data, so `save` writes the weights in their own dtype and a `.mlp` file that
`load(...)`s them: `absorb-prove --certificates DIR FOLDER/NAME.mlp` then certifies the
same block from files anyone can re-read.

torch is never imported here: `from_torch` reads modules by their attribute names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from . import language
from .decide import budget
from .decide import decide as decide_statement
from .export.files import write_arrays, write_new
from .export.rounding import ExportError, bf16_to_float32
from .language import SpecError, load_file
from .language.load import MAX_SPEC_BYTES
from .model import exactarray
from .model.activations import Activation
from .model.blocks import Block, Claim, Layer, Matrix, Query, Skip, Spec
from .model.position import Pos
from .model.result import Result, unknown

WEIGHTS = ("up", "gate", "down")
BIASES = ("up_bias", "gate_bias", "down_bias")
CLAIMS = ("absorbable", "not absorbable", "min width", "query")


class BuildError(ValueError):
    """A block that cannot be built or saved; the message says why."""


def activation_named(name: str) -> Activation:
    """The language's activation `name` (`relu`, `leaky_relu(1/100)`, `swiglu`, ...)."""
    try:
        return language.activation_named(name)
    except SpecError as error:
        raise BuildError(f"activation {name!r}: {error.diagnostics[0].message}") from None


@dataclass(frozen=True, eq=False)
class BlockSpec:
    """One depth-1 block: its activation, arrays (exact as stored) and skip."""

    activation: str
    arrays: dict[str, np.ndarray]  # up, down, gate (gated), and any biases given
    skip: str | Fraction | np.ndarray = "identity"  # "identity", "none", c, or a d×d array
    name: str = "B"
    bfloat16: frozenset[str] = field(default_factory=frozenset)  # arrays holding bf16 values

    @property
    def dim(self) -> int:
        return int(self.arrays["up"].shape[1])

    @property
    def width(self) -> int:
        return int(self.arrays["up"].shape[0])

    @property
    def biased(self) -> bool:
        return any(name in self.arrays for name in BIASES)

    def block(self) -> Block:
        """The exact model block (the same a spec loading these arrays gives)."""
        act = activation_named(self.activation)
        zeros = (Fraction(0),)

        def bias(name: str, size: int) -> tuple[Fraction, ...] | None:
            if name in self.arrays:
                return tuple(exactarray.fractions(self.arrays[name].reshape(1, -1))[0])
            if not self.biased or (name == "gate_bias" and not act.gated):
                return None
            return zeros * size  # a biased block: a bias not given is 0

        gate = self.arrays.get("gate")
        layer = Layer(Matrix(array=self.arrays["up"]), Matrix(array=self.arrays["down"]),
                      None if gate is None else Matrix(array=gate),
                      up_bias=bias("up_bias", self.width),
                      gate_bias=bias("gate_bias", self.width),
                      down_bias=bias("down_bias", self.dim))
        return Block(self.name, act, self.dim, self.width, 1, self._skip(), (layer,),
                     Pos(1, 1), biased=self.biased)

    def _skip(self) -> Skip:
        if isinstance(self.skip, np.ndarray):
            return Skip(self.dim, matrix=Matrix(array=self.skip))
        if isinstance(self.skip, Fraction):
            return Skip(self.dim, scale=self.skip)
        return Skip(self.dim, scale=Fraction(1 if self.skip == "identity" else 0))

    def spec_text(self, weights_file: str, name: str | None = None,
                  claims: Sequence[str] = ()) -> str:
        """A `.mlp` file declaring this block (as `name`), its arrays loaded from
        `weights_file` (relative to the spec's folder), `query NAME`, then one `claim` line
        per statement of `claims` (e.g. "NAME is not absorbable": claims get certificates
        with `absorb-prove --certificates`, queries do not)."""
        name = name or self.name
        lines = [f"# written by absorb_formal.build: {weights_file} holds the weights as given",
                 f"block {name} {{", f"    activation {self.activation}",
                 f"    dim {self.dim}  width {self.width}", f"    skip {self._skip_text()}"]
        for key in (*WEIGHTS, *BIASES):
            if key in self.arrays:
                lines.append(f'    {key} = load("{weights_file}", "{key}")')
        return "\n".join([*lines, "}", f"query {name}", *(f"claim {c}" for c in claims), ""])

    def _skip_text(self) -> str:
        if isinstance(self.skip, np.ndarray):
            rows = exactarray.fractions(self.skip)
            return "[" + ", ".join("[" + ", ".join(map(str, r)) + "]" for r in rows) + "]"
        return str(self.skip)

    def save(self, folder: str | Path, name: str | None = None,
             claims: Sequence[str] = ()) -> Path:
        """Write FOLDER/NAME.safetensors (the arrays in their own dtype) and FOLDER/NAME.mlp
        (the block, loading them, `query NAME` and `claims`, see `spec_text`); return the .mlp
        path. A claim that does not parse is a BuildError, and nothing stays written. Existing
        files are never overwritten (BuildError)."""
        folder, name = Path(folder), name or self.name
        weights, spec_file = folder / f"{name}.safetensors", folder / f"{name}.mlp"
        for path in (weights, spec_file):
            if path.exists():
                raise BuildError(f"{path}: already exists; not overwritten")
        text = self.spec_text(weights.name, name, claims)
        if len(text.encode()) > MAX_SPEC_BYTES:
            raise BuildError(f"the skip matrix makes {spec_file.name} larger than a spec may "
                             f"be ({MAX_SPEC_BYTES} bytes)")
        folder.mkdir(parents=True, exist_ok=True)
        stored = {key: _bits(value) if key in self.bfloat16 else value
                  for key, value in self.arrays.items()}
        try:
            write_arrays(weights, stored, {"written_by": "absorb_formal.build"})
            write_new(spec_file, lambda stream: stream.write(text.encode()))
        except ExportError as error:
            raise BuildError(str(error)) from None
        try:
            load_file(spec_file)  # the spec reads back (shapes, names, values) or we say so
        except SpecError as error:
            spec_file.unlink()  # both files are ours, written just now
            weights.unlink()
            raise BuildError(f"the written spec does not read back:\n{error.format()}") from None
        return spec_file


def _bits(array: np.ndarray) -> np.ndarray:
    """float32 values that are bfloat16 values, as their bfloat16 bit patterns (exact)."""
    return (array.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _array(value: Any, name: str, ndim: int) -> tuple[np.ndarray, bool]:
    """(a real array kept exact, was it bfloat16): float16 widened to float32, integers as
    int64, finite. A torch tensor is read through `tensor_array`, an ml_dtypes bfloat16
    array through its bits (both widened exactly to float32)."""
    bf16 = False
    if hasattr(value, "detach"):
        array, bf16 = tensor_array(value, name)
    else:
        array = np.asarray(value)
        if array.dtype.name == "bfloat16" and array.dtype.itemsize == 2:  # ml_dtypes
            array, bf16 = bf16_to_float32(array.view(np.uint16)), True
    if array.dtype.kind == "b" or array.dtype.kind not in "fiu":
        raise BuildError(f"{name}: dtype {array.dtype} is not a real number format (read "
                         "exactly: IEEE float16/32/64, bfloat16 (torch or ml_dtypes), "
                         "integers)")
    if array.dtype.kind in "iu":
        if array.size and int(np.abs(array.astype(object)).max()) >= 2**63:
            raise BuildError(f"{name}: integers beyond int64")
        array = array.astype(np.int64)
    elif array.dtype.itemsize < 4:
        array = array.astype(np.float32)  # float16 widens exactly
    if ndim == 1 and array.ndim == 2 and 1 in array.shape:
        array = array.reshape(-1)
    if array.ndim != ndim:
        raise BuildError(f"{name}: expected a {ndim}-D array, got shape {array.shape}")
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise BuildError(f"{name}: holds a non-finite value")
    return np.ascontiguousarray(array), bf16


LAYOUTS = ("out_in", "in_out")


def from_arrays(activation: str, up: Any, down: Any, *, gate: Any = None, up_bias: Any = None,
                gate_bias: Any = None, down_bias: Any = None,
                skip: str | float | int | Fraction | Any | None = "identity",
                name: str = "B", layout: str = "out_in", dim: int | None = None) -> BlockSpec:
    """A depth-1 block `S x + down σ(up x + up_bias) + down_bias` (gated: `down (σ(gate x +
    gate_bias) ⊙ (up x + up_bias)) + down_bias`) from arrays: up m×d, down d×m, gate m×d,
    biases 1-D. skip: "identity", "none" or None, a number c (S = c·I), or a d×d array.

    layout: how the weight matrices are stored. "out_in" (default): output × input, as
      torch's nn.Linear (LLaMA, T5, BERT, ViT): up m×d, down d×m, gate m×d. "in_out":
      input × output, as Hugging Face's Conv1D (GPT-2) and JAX/Flax kernels: up d×m,
      down m×d, gate d×m, read transposed.
    dim: d (the model's hidden size), when known. It is checked against the arrays, and it
      is what tells a transposed up and down apart from a block with d and m swapped when
      nothing else does (no biases, a scalar skip). Arrays that fit only in the other
      layout are refused, with the layout that fits.

    Arrays are numpy arrays, ml_dtypes bfloat16 arrays or torch tensors; every value is
    read exactly (a float is the dyadic it denotes); bfloat16 arrays are marked to be saved
    as BF16 again."""
    if layout not in LAYOUTS:
        raise BuildError(f"layout {layout!r}: 'out_in' (nn.Linear: output x input) or "
                         "'in_out' (Conv1D, JAX: input x output)")
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int | np.integer)
                            or dim < 1):
        raise BuildError(f"dim {dim!r}: a positive integer (the model's hidden size d)")
    dim = None if dim is None else int(dim)
    given = {"up": up, "down": down, "gate": gate, "up_bias": up_bias,
             "gate_bias": gate_bias, "down_bias": down_bias}
    read = {key: _array(value, key, 1 if key in BIASES else 2)
            for key, value in given.items() if value is not None}
    stored = {key: array for key, (array, _) in read.items()}
    skip_value = _skip(skip)
    act = activation_named(activation)
    _check_shapes(stored, skip_value, layout, dim)
    arrays = {key: np.ascontiguousarray(array.T) if layout == "in_out" and key in WEIGHTS
              else array for key, array in stored.items()}
    m, d = arrays["up"].shape
    if act.gated != ("gate" in arrays):
        raise BuildError(f"{activation} is {'' if act.gated else 'not '}gated: "
                         f"{'give' if act.gated else 'drop'} gate")
    if "gate_bias" in arrays and not act.gated:
        raise BuildError("gate_bias on an ungated activation")
    if m < 1 or d < 1:
        raise BuildError("up must have at least one row and one column")
    bfloat16 = frozenset(key for key, (_, bf16) in read.items() if bf16)
    return BlockSpec(activation, arrays, skip_value, name, bfloat16)


def _expected_shapes(m: int, d: int, layout: str) -> dict[str, tuple[int, ...]]:
    """The shape each array has, as stored in `layout`, in a block of width m and dim d."""
    up, down = ((m, d), (d, m)) if layout == "out_in" else ((d, m), (m, d))
    return {"up": up, "down": down, "gate": up, "up_bias": (m,), "gate_bias": (m,),
            "down_bias": (d,), "skip": (d, d)}


def _misfits(arrays: dict[str, np.ndarray], skip: Any, layout: str, dim: int | None
             ) -> list[str]:
    """What does not fit a block whose up is stored in `layout` (d and m read off up)."""
    rows, columns = arrays["up"].shape
    m, d = (rows, columns) if layout == "out_in" else (columns, rows)
    expected = _expected_shapes(m, d, layout)
    shapes = {key: array.shape for key, array in arrays.items()}
    if isinstance(skip, np.ndarray):
        shapes["skip"] = skip.shape
    found = [f"{key} has shape {shape}; expected {expected[key]}"
             for key, shape in shapes.items() if shape != expected[key]]
    if dim is not None and d != dim:
        found.insert(0, f"up has shape {arrays['up'].shape}, which gives d = {d}, not "
                        f"dim = {dim}")
    return found


def _check_shapes(arrays: dict[str, np.ndarray], skip: Any, layout: str,
                  dim: int | None) -> None:
    """BuildError unless every array fits `layout`; when they all fit the other layout, the
    message says so (a transposed Conv1D or nn.Linear weight)."""
    misfits = _misfits(arrays, skip, layout, dim)
    if not misfits:
        return
    rows, columns = arrays["up"].shape
    m, d = (rows, columns) if layout == "out_in" else (columns, rows)
    where = f"{misfits[0]} (layout={layout!r}: d = {d}, m = {m} from up)"
    other = LAYOUTS[1 - LAYOUTS.index(layout)]
    if not _misfits(arrays, skip, other, dim):
        stored = "input x output (HF Conv1D, JAX)" if other == "in_out" else \
            "output x input (nn.Linear)"
        where += (f"; every array fits layout={other!r}: the weights are stored {stored}, "
                  f"so pass layout={other!r}, or transpose them (.T, as a spec writes "
                  "load(...).T)")
    raise BuildError(where)


def _skip(skip: Any) -> str | Fraction | np.ndarray:
    if skip is None or (isinstance(skip, str) and skip == "none"):
        return "none"
    if isinstance(skip, str):
        if skip != "identity":
            raise BuildError(f"skip {skip!r}: use 'identity', 'none', a number or a d×d array")
        return "identity"
    if isinstance(skip, bool):
        raise BuildError("skip: a bool is not a number")
    if isinstance(skip, int | float | Fraction | np.floating | np.integer):
        value = Fraction(skip.item() if isinstance(skip, np.generic) else skip)  # exact
        return "identity" if value == 1 else "none" if value == 0 else value
    return _array(skip, "skip", 2)[0]  # its shape: _check_shapes


def decide(spec: BlockSpec | Block, claim: str = "absorbable", *, width: int | None = None,
           engine: str = "theory", timeout: float = 60.0) -> Result:
    """Decide a claim about the block, as `absorb-prove` does (the same `Result`):
    "absorbable" / "not absorbable" (at `width`, default the block's own: proved or
    refuted), "min width" (a query: `Result.min_width` holds the least width, None when no
    width is enough or unknown) or "query"."""
    if claim not in CLAIMS:
        raise BuildError(f"claim {claim!r}: one of {', '.join(CLAIMS)}")
    block = spec.block() if isinstance(spec, BlockSpec) else spec
    pos = Pos(1, 1)
    statement: Claim | Query
    if claim in ("absorbable", "not absorbable"):
        statement = Claim("absorbable", block.name, "not" if claim.startswith("not") else "",
                          width, None, None, pos)
    else:
        statement = Query(block.name, width, pos)
    whole = Spec("<python>", {block.name: block}, (statement,))
    try:
        with budget.limit(timeout):
            return decide_statement(whole, statement, engine)
    except budget.ClaimTimeout:
        return unknown(f"timeout after {timeout:g} s")


# ---- torch modules, by attribute names ----------------------------------------------------

_ACTIVATIONS = {  # class or function name → the language's activation
    "ReLU": "relu", "relu": "relu", "GELU": "gelu", "gelu": "gelu",
    "GELUActivation": "gelu", "NewGELUActivation": "gelu_tanh",
    "GELUTanh": "gelu_tanh", "PytorchGELUTanh": "gelu_tanh", "gelu_new": "gelu_tanh",
    "SiLU": "silu", "silu": "silu", "SiLUActivation": "silu", "Tanh": "tanh", "tanh": "tanh",
    "Sigmoid": "sigmoid", "sigmoid": "sigmoid", "Identity": "identity",
}
_GATED = {"silu": "swiglu", "gelu": "geglu", "relu": "reglu", "sigmoid": "glu",
          "identity": "bilinear"}


def activation_of(module: Any) -> str:
    """The language's name for a torch activation module (or function)."""
    kind = getattr(module, "__name__", None) or type(module).__name__
    if kind == "LeakyReLU":
        return f"leaky_relu({Fraction(float(module.negative_slope))})"  # the exact float
    if kind == "GELU" and getattr(module, "approximate", "none") == "tanh":
        return "gelu_tanh"
    if kind not in _ACTIVATIONS:
        raise BuildError(f"activation {kind}: no exact counterpart in the language "
                         f"(known: {', '.join(sorted(set(_ACTIVATIONS)))}, LeakyReLU)")
    return _ACTIVATIONS[kind]


def tensor_array(tensor: Any, name: str) -> tuple[np.ndarray, bool]:
    """(numpy array, was bfloat16) of a torch tensor or parameter; bfloat16 → float32 is
    exact (a bfloat16 is the top half of a float32)."""
    value = tensor.detach().cpu()
    bf16 = str(value.dtype) == "torch.bfloat16"
    if bf16:
        value = value.float()
    try:
        return value.numpy(), bf16
    except TypeError as error:
        raise BuildError(f"{name}: {error}") from None


def _linear(module: Any, name: str, conv1d: bool = False) -> tuple[Any, Any]:
    """(weight out × in, bias or None) of nn.Linear, or of HF Conv1D (weight in × out)."""
    weight = module.weight
    if conv1d and not hasattr(module, "in_features"):  # Conv1D: x @ W + b
        weight = weight.t()
    return weight, getattr(module, "bias", None)


def from_torch(module: Any, skip: Any = "identity", name: str = "B") -> BlockSpec:
    """A block from a torch MLP, read by its parts (no transformers import):
    LLaMA-style (`gate_proj`, `up_proj`, `down_proj`, `act_fn`: SiLU → swiglu),
    GPT-2 (`c_fc`, `c_proj`: Conv1D, weight input × output; `act`: gelu_new → gelu_tanh),
    `fc1`/`act`/`fc2` (timm, ViT), or `nn.Sequential(Linear, activation, Linear)` (Dropout
    and Identity entries skipped). The residual's skip is `skip` (the module has none)."""
    parts: dict[str, Any]
    if all(hasattr(module, a) for a in ("gate_proj", "up_proj", "down_proj")):
        scalar = activation_of(_part(module, "act_fn"))
        if scalar not in _GATED:
            raise BuildError(f"a gated MLP with {scalar}: no gated activation in the language")
        parts = {"up": _linear(module.up_proj, "up_proj"),
                 "gate": _linear(module.gate_proj, "gate_proj"),
                 "down": _linear(module.down_proj, "down_proj")}
        act = _GATED[scalar]
    elif hasattr(module, "c_fc") and hasattr(module, "c_proj"):
        act = activation_of(_part(module, "act"))
        parts = {"up": _linear(module.c_fc, "c_fc", True),
                 "down": _linear(module.c_proj, "c_proj", True)}
    elif hasattr(module, "fc1") and hasattr(module, "fc2"):
        norm = getattr(module, "norm", None)
        if norm is not None and type(norm).__name__ != "Identity":
            raise BuildError(f"fc1/fc2 with a {type(norm).__name__} between them: not a plain "
                             "MLP block")
        act = activation_of(_part(module, "act"))
        parts = {"up": _linear(module.fc1, "fc1"), "down": _linear(module.fc2, "fc2")}
    else:
        steps = [m for m in _children(module)
                 if type(m).__name__ not in ("Dropout", "Identity")]
        if len(steps) != 3 or not all(hasattr(steps[i], "weight") for i in (0, 2)):
            raise BuildError("expected LLaMA (gate_proj, up_proj, down_proj, act_fn), GPT-2 "
                             "(c_fc, c_proj, act), fc1/act/fc2, or Sequential(Linear, "
                             "activation, Linear)")
        act = activation_of(steps[1])
        parts = {"up": _linear(steps[0], "0"), "down": _linear(steps[2], "2")}
    tensors = {field_name: tensor for key, (weight, bias) in parts.items()
               for field_name, tensor in ((key, weight), (f"{key}_bias", bias))
               if tensor is not None}
    return from_arrays(act, **tensors, skip=skip, name=name)


def _children(module: Any) -> list[Any]:
    children = getattr(module, "children", None)
    if children is None:
        raise BuildError(f"{type(module).__name__}: not a torch module")
    return list(children())


def _part(module: Any, attribute: str) -> Any:
    found = getattr(module, attribute, None)
    if found is None:
        raise BuildError(f"the module has no {attribute!r} activation")
    return found
