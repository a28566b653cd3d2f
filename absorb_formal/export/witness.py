"""`absorb-prove export`: write the exact witness of an absorbable block as weight arrays.

The witness is the plain block (skip none) that the decision proved equal to the residual
block; its weights are exact rationals. Export rounds each entry to the asked float format
(round to nearest, ties to even: the format's own rounding of the exact value, with no double
rounding) and writes the arrays under the language's field names, so that a spec can
`load(...)` them back:

- depth 1: `up`, `down`, `gate` (gated activations), `up_bias`, `gate_bias`, `down_bias`
  (1-D; only in a biased witness); depth L ≥ 2: `layer1.up`, …, `layerL.down_bias`
  (docs/language.md numbers layers from 1).
- `.safetensors`: F64, F32 or BF16 tensors; the record below in `__metadata__` (a map of
  strings). `.npz`: float64 or float32 arrays; the record as a JSON string in the 0-d array
  `__absorb_formal__`. NumPy has no bfloat16, so `--dtype bfloat16` needs `.safetensors`
  or `.onnx`. `.onnx`: the plain block as a graph (`export/onnx_block.py`), the arrays as its
  initializers, the record as its metadata_props.

The record (all values strings): format, spec, spec_sha256, block, activation, depth, dim,
width (the exported hidden width), claim_width, statement, method, construction (a large
block's: own neurons + doubles / spare pairs / ...; else the decision's witness), prefer,
certificate_sha256 (of the canonical bytes, `proofs.encode`, of the certificate object that
`absorb-prove --certificates` stores for the claim `NAME is absorbable at width W`), dtype,
arrays, max_rounding_rel_error (max over entries of |rounded − exact| / |exact|), the sample
figures of `sample_error` (errors against the block's output at seeded standard-normal
inputs, and the largest |weight| before and after; "n/a" with the reason in sample_note
when the block has no float64 image), sample_max_error_allowed (the gate: a larger
sample_max_rel_error writes nothing; default 16 machine epsilons of the dtype, `--max-error`
sets it; the error figures are written to full precision, `repr` of the float, and the gate
compares them); width_note, when the width was not asked or not the proved one: the proved
bounds, and any construction passed over and why (`choose`).

Entry points (`export`, `find_witness`, `alternatives`, `choose`, `built`, `sample_error`,
`write_witness`) take a block and hand back arrays and figures, so that a later step (such
as a normalisation wrapped around the sublayer) can be added between choosing and writing.

This module is numeric output, not a deciding path: the verdict and the witness come from
`decide`; rounding happens only here.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..certify import documents as proofs
from ..checker.kernel.contract import Check
from ..decide import doubles, large
from ..decide.concrete import MinWidth, too_large
from ..decide.decision import Decision
from ..decide.dispatch import _minimal, concrete_decision
from ..decide.spare import upper_bound
from ..model.blocks import Block, Layer, Matrix
from ..model.memory import EXACT_BYTES, export_bytes, refusal
from ..numeric.backends import NumpyBackend, forward
from ..numeric.crosscheck import affordable
from ..numeric.floatblock import FloatBlock, OutOfRange, from_block
from .rounding import EXIT_ERROR as EXIT_ERROR
from .rounding import EXIT_NOT_ABSORBABLE, ExportError, Rounded, round_matrix, round_values
from .rounding import EXIT_OK as EXIT_OK
from .rounding import bf16_to_float32 as bf16_to_float32

FORMAT = "absorb_formal export 1"
META_KEY = "__absorb_formal__"
DTYPES = ("float64", "float32", "bfloat16")
SUFFIXES = (".npz", ".safetensors", ".onnx")
DEFAULT_POINTS = 10_000
# The sample gate: the largest sample_max_rel_error written without --max-error, per dtype —
# 16 machine epsilons of the format, the float64 cross-check's own allowance per term summed
# (numeric/crosscheck.py ROUNDING): rounding each weight once moves each term by a few ulps.
EPSILON = {"float64": 2.0 ** -52, "float32": 2.0 ** -23, "bfloat16": 2.0 ** -7}
GATE_EPSILONS = 16
FIELDS = ("up", "gate", "down", "up_bias", "gate_bias", "down_bias")

# constructions, not stored layers
LARGE_METHODS = (large.METHOD, large.METHOD_DOUBLES, large.METHOD_GATED)

# ---- the witness --------------------------------------------------------------------------

@dataclass(frozen=True)
class Witness:
    """layers: the decision's witness; None for a large block's construction (its own
    neurons plus the added ones, `decide.large`), which is rounded without converting the
    block's weights. width_note: why the width was chosen, when no width was asked and the
    minimal width is only bounded ("" otherwise). widen: a wider exact construction may
    replace this one (no --width was asked, or the caller allows it: `alternatives`)."""

    block: Block
    claim_width: int
    decision: Decision
    layers: tuple[Layer, ...] | None
    width_note: str = ""
    widen: bool = False

    @property
    def construction(self) -> str:
        """The construction's name: the certificate's check for a large one, else
        "the decision's witness"."""
        if self.layers is None:
            return str((self.decision.certificate or {}).get("check", self.decision.method))
        return "the decision's witness"


def find_witness(block: Block, width: int | None, engine: str = "theory",
                 wider: bool = False) -> Witness:
    """The decision's witness at `width`; when None, at the block's minimal width, or, when
    only bounds lo..hi of it are proved, at hi: the least width proved absorbable (found as
    a query finds it, without the exhaustive width search, so in the time a query takes).
    The witness may be replaced by a wider exact construction (`alternatives`) when no
    width was asked or `wider` allows it."""
    if block.layers is None:
        raise ExportError(f"block {block.name} is a family (no weights): nothing to export")
    note, decided = "", None
    asked = width
    if width is None:
        width, note, decided = _default_width(block, engine)
    if width < 1:
        raise ExportError("--width must be at least 1")
    decision, clash = decided or concrete_decision(block, width, engine)
    if clash:
        raise ExportError(clash)
    if decision.absorbable is None:
        raise ExportError(f"whether {block.name} is absorbable at width {width} is unknown: "
                          f"{decision.reason}")
    if decision.absorbable is False:
        raise ExportError(f"block {block.name} is not absorbable at width {width} "
                          f"[{decision.method}]", EXIT_NOT_ABSORBABLE)
    widen = asked is None or wider
    if decision.witness is None and decision.method in LARGE_METHODS:
        return Witness(block, width, decision, None, note, widen)
    if decision.witness is None:
        raise ExportError(f"block {block.name} is absorbable at width {width} "
                          f"[{decision.method}], but the decision holds no rational witness "
                          f"to export ({_why_no_witness(decision)})")
    return Witness(block, width, decision, decision.witness, note, widen)


def alternatives(found: Witness, engine: str = "theory") -> list[Witness]:
    """`found`, then the wider exact constructions that may replace it: the spare pairs at
    m + 2·rank S after doubles at m + d (docs/rules.md §4) when `found.widen`."""
    out = [found]
    if found.widen and found.construction == Check.DOUBLES:
        spare = upper_bound(found.block)
        decision, clash = concrete_decision(found.block, spare, engine)
        if not clash and decision.absorbable and decision.method == large.METHOD:
            out.append(Witness(found.block, spare, decision, None, found.width_note))
    return out


def _why_no_witness(decision: Decision) -> str:
    """Why a proved decision carries no exact layers: a layer of a stack absorbed by linear
    neurons whose σ(γ) is irrational (silu(1), gelu(1)), or else an algebraic witness or a
    large block proved without one."""
    parts = (decision.certificate or {}).get("per_layer") or []
    for n, part in enumerate(parts, start=1):
        if isinstance(part, dict) and part.get("check") == Check.LINEAR_NEURONS:
            return (f"layer {n}'s linear neurons have the down weights p/σ(γ) with "
                    f"σ(γ) = {part.get('sigma_gamma')}, which is not rational; the layer "
                    "alone exports, as the rounded construction")
    return "an algebraic witness, or a large block proved absorbable without one"


def _default_width(block: Block, engine: str
                   ) -> tuple[int, str, tuple[Decision, str] | None]:
    """(width, note, the decision at that width when already made) for an export without
    --width: the minimal width, else the upper end of its proved bounds. As a query: the
    block's own width first, which narrows the bounds."""
    own, clash, known = None, "", None
    if not too_large(block):  # large blocks: the bounds do not use it
        own, clash = concrete_decision(block, block.width, engine)
        if clash:
            raise ExportError(clash)
        known = None if own.absorbable is None else (block.width, own.absorbable)
    found: MinWidth = _minimal(block, engine, known, exhaustive=False)[0]
    if found.found and found.value is None:
        raise ExportError(f"block {block.name} is not absorbable at any width "
                          f"[{found.method}]", EXIT_NOT_ABSORBABLE)
    if found.found:
        assert found.value is not None
        width, note = found.value, ""
    elif found.bounds is not None:
        lo, width = found.bounds
        note = (f"the minimal width is between {lo} and {width} (proved); {width} is the least "
                "width proved absorbable")
    else:
        raise ExportError(f"the minimal width of {block.name} is unknown ({found.reason}) and "
                          "no width is proved absorbable: give --width")
    return width, note, (own, "") if own is not None and width == block.width else None


def array_names(depth: int) -> Iterator[tuple[int, str, str]]:
    """(layer index, field, array name) in writing order."""
    for index in range(depth):
        prefix = f"layer{index + 1}." if depth > 1 else ""
        for name in FIELDS:
            yield index, name, prefix + name


HOMOGENEOUS = ("relu", "leaky_relu")  # σ(t z) = t σ(z) for t > 0


def balanced(block: Block, layers: Sequence[Layer]) -> tuple[Layer, ...]:
    """The witness with each neuron of a positively homogeneous σ (relu, leaky_relu; depth
    1, ungated) rescaled by a power of two t: (u, b, d) → (t u, t b, d / t) computes the
    same function, exactly. t brings the neuron's largest up entry and its largest down
    entry within a factor 2 of each other, so that a witness in canonical scale (a key's
    leading entry ±1) does not carry the whole size in one of the two."""
    if (block.activation.gated or block.activation.scalar.kind not in HOMOGENEOUS
            or len(layers) != 1):
        return tuple(layers)
    layer = layers[0]
    ups, downs = [list(r) for r in layer.up.rows], [list(r) for r in layer.down.rows]
    bias = None if layer.up_bias is None else list(layer.up_bias)
    if not all(type(v) is Fraction for v in [*(v for r in ups + downs for v in r),
                                             *(bias or [])]):
        return tuple(layers)  # algebraic or symbolic entries: kept as proved

    def log2(x: Fraction) -> int:  # within one of log2(x), in integers
        return x.numerator.bit_length() - x.denominator.bit_length()

    for i, row in enumerate(ups):
        big_up = max([abs(v) for v in row] + ([abs(bias[i])] if bias else []))
        big_down = max(abs(r[i]) for r in downs)
        if big_up == 0 or big_down == 0:
            continue
        k = (log2(big_down) - log2(big_up)) // 2  # t = 2^k: exact
        if k == 0:
            continue
        t = Fraction(2) ** k
        ups[i] = [v * t for v in row]
        if bias is not None:
            bias[i] *= t
        for r in downs:
            r[i] /= t
    from dataclasses import replace

    return (replace(layer, up=Matrix(ups), down=Matrix(downs),
                    up_bias=None if bias is None else tuple(bias)),)


def rounded_arrays(layers: Sequence[Layer], dtype: str) -> dict[str, Rounded]:
    out: dict[str, Rounded] = {}
    for index, name, key in array_names(len(layers)):
        value = getattr(layers[index], name)
        if value is None:
            continue
        if isinstance(value, Matrix):
            out[key] = round_matrix(value, dtype)
        else:
            out[key] = round_values(list(value), (len(value),), dtype)
    return out


def construction_arrays(block: Block, dtype: str, certificate: dict[str, Any] | None = None
                        ) -> dict[str, Rounded]:
    """A large block's construction (`certificate`'s; None: `spare.construction`'s), rounded:
    its own arrays as arrays (no Fraction per weight), then the neurons `large.added_neurons`
    adds, exactly rounded. Doubles also replace some own down columns and the down bias;
    their weights are rounded from enclosures of the exact ones (`enclosed_doubles`: the
    same bits, without the exact inverse); doubles.TooWide when that cannot settle them."""
    assert block.layers is not None
    layer = block.layers[0]
    added: dict[str, Any]
    if certificate is not None and certificate.get("check") == Check.DOUBLES:
        from .enclosed_doubles import Unsettled, rounded_doubles

        try:
            added = rounded_doubles(block, [int(i) for i in certificate["neurons"]], dtype)
        except Unsettled as error:
            raise doubles.TooWide(str(error)) from None
    else:
        added = {name: round_values(v.ravel().tolist(), v.shape, dtype)
                 for name, v in large.added_neurons(block, certificate).items()}
    out: dict[str, Rounded] = {}
    for name in FIELDS:
        own = getattr(layer, name)
        if own is None and name not in added:
            continue
        if own is None:  # not reached by the constructions (biases exist on both sides)
            own = (Fraction(0),) * block.width
        if name == "down_bias" and name in added:  # doubles: the constant moved into it
            out[name] = added[name]
            continue
        parts = [_own_down(own, added, dtype) if name == "down" and "columns" in added
                 else round_matrix(own, dtype) if isinstance(own, Matrix)
                 else round_values(list(own), (len(own),), dtype)]
        if name in added:
            parts.append(added[name])
        axis = 1 if name == "down" else 0
        out[name] = Rounded(np.concatenate([r.values for r in parts], axis=axis),
                            max(r.max_rel_error for r in parts))
    return out


def _own_down(own: Matrix, added: dict[str, Any], dtype: str) -> Rounded:
    """The own down columns, those that doubles changed replaced by added["own_down"]
    (rounded): the others rounded as an array."""
    d, m = own.shape
    changed = added["columns"]
    keep = np.setdiff1d(np.arange(m), changed)
    fresh = added["own_down"]
    out = np.empty((d, m), dtype=fresh.values.dtype)
    out[:, changed] = fresh.values
    error = fresh.max_rel_error
    if len(keep):
        kept = round_matrix(Matrix(array=own.loaded[:, keep]) if own.loaded is not None
                            else Matrix([[row[j] for j in keep] for row in own.rows]), dtype)
        out[:, keep] = kept.values
        error = max(error, kept.max_rel_error)
    return Rounded(out, error)


def padded(rounded: dict[str, Rounded], width: int) -> dict[str, Rounded]:
    """Zero neurons appended up to `width` (a decision may prove a narrower witness; a zero
    neuron, with a zero column of down, adds exactly 0 to every output)."""
    out = {}
    for key, item in rounded.items():
        field = key.rsplit(".", 1)[-1]
        values = item.values
        if field == "down":
            values = np.pad(values, ((0, 0), (0, width - values.shape[1])))
        elif field != "down_bias":
            values = np.pad(values, ((0, width - values.shape[0]),) + ((0, 0),) * (values.ndim - 1))
        out[key] = Rounded(values, item.max_rel_error)
    return out


def layer_arrays(arrays: dict[str, np.ndarray], depth: int) -> list[dict[str, np.ndarray]]:
    """Per layer {field: array} from arrays named as `array_names` names them."""
    layers: list[dict[str, np.ndarray]] = [{} for _ in range(depth)]
    for index, name, key in array_names(depth):
        if key in arrays:
            layers[index][name] = arrays[key]
    return layers


def default_points(arrays: dict[str, np.ndarray]) -> int:
    """DEFAULT_POINTS, fewer for large blocks (at least 100): points × weights ≤ WORK."""
    return affordable(DEFAULT_POINTS, sum(int(a.size) for a in arrays.values()), floor=100)


SAMPLE_INPUTS = ("rows of a standard normal (seeded): unit RMS per coordinate, the scale of a "
                 "LayerNorm output with gain 1")
SAMPLE_SEED = 0


def sample_error(block: Block, arrays: dict[str, np.ndarray], points: int | None,
                 dtype: str = "float64") -> dict[str, str]:
    """How far the exported plain block (`arrays`: the rounded weights as float64) is from
    the block, relative to the block's output, at `points` seeded inputs (SAMPLE_INPUTS;
    None: `default_points`), and the weights' largest magnitudes before and after:

    - sample_max_rel_error (the gate's figure): max over the points of ‖E(x) − B(x)‖∞,
      divided by sample_output_scale, the median over the points of ‖B(x)‖∞ (the block's
      typical output size); B is the block (its exact weights' float64 image), E the
      exported arrays, both computed in float64: what the rounded weights and the
      construction cost, apart from the arithmetic they will run in;
    - sample_max_rel_error_in_dtype_arith: the same with E computed in `sample_arith`, the
      arithmetic the dtype runs in (float64; float32 for float32 and bfloat16, as the ONNX
      graph and torch on CPU compute bfloat16 weights), σ rounded to it after each use;
    - sample_original_rel_error_in_dtype_arith: B itself computed in that arithmetic (the
      residual block as the original model runs it): the baseline to compare with;
    - sample_max_abs_error: max |E(x) − B(x)|, both in float64;
    - weight_max_abs_before / weight_max_abs_after: the largest |weight| (biases included,
      skip excluded) of the block and of the exported arrays."""
    after = max((float(np.abs(a).max(initial=0.0)) for a in arrays.values()), default=0.0)
    if points is None:
        points = default_points(arrays)
    unmeasured = {"sample_points": "0", "sample_max_abs_error": "n/a",
                  "sample_max_rel_error": "n/a", "sample_max_rel_error_in_dtype_arith": "n/a",
                  "sample_original_rel_error_in_dtype_arith": "n/a",
                  "weight_max_abs_before": "n/a", "weight_max_abs_after": repr(after)}
    if points <= 0:
        return {**unmeasured, "sample_note": "not measured (--points 0)"}
    try:
        reference = from_block(block)
    except OutOfRange as error:
        return {**unmeasured, "sample_note": f"not measured: {error}"}
    before = max((float(np.abs(a).max(initial=0.0)) for layer in reference.layers
                  for a in layer.values()), default=0.0)
    exported = FloatBlock(block.activation.scalar, block.activation.gated, block.dim, 0.0,
                          None, tuple({k: np.asarray(v, dtype=np.float64) for k, v in layer.items()}
                                 for layer in layer_arrays(arrays, block.depth)))
    arith = np.float64 if dtype == "float64" else np.float32
    x = np.random.default_rng(SAMPLE_SEED).standard_normal((points, block.dim))
    sizes, off, off_arith, off_original = [], [], [], []
    for start in range(0, points, 256):
        rows = x[start:start + 256]
        want = _evaluate(reference, rows, np.float64)
        sizes.append(np.abs(want).max(axis=1, initial=0.0))
        off.append(_off(_evaluate(exported, rows, np.float64), want))
        if arith is not np.float64:
            off_arith.append(_off(_evaluate(exported, rows, arith), want))
            off_original.append(_off(_evaluate(reference, rows, arith), want))
    # the block's typical output size: the median over the points of ‖B(x)‖∞ (a point where
    # the output happens to nearly vanish would make a per-point ratio mean nothing)
    scale = max(float(np.median(np.concatenate(sizes))), np.finfo(np.float64).tiny)

    def relative(parts: list[np.ndarray]) -> float:
        return float(np.nan_to_num(np.concatenate(parts), nan=np.inf).max(initial=0.0)) / scale

    worst = relative(off)
    worst_arith = worst if arith is np.float64 else relative(off_arith)
    original = 0.0 if arith is np.float64 else relative(off_original)
    # repr: the shortest text that reads back as the same float, so the gate compares (and
    # the file records) the figure measured, not a 6-digit rounding of it
    return {"sample_points": str(points), "sample_inputs": SAMPLE_INPUTS,
            "sample_output_scale": repr(scale), "sample_arith": np.dtype(arith).name,
            "sample_max_abs_error": repr(float(np.concatenate(off).max(initial=0.0))),
            "sample_max_rel_error": repr(worst),
            "sample_max_rel_error_in_dtype_arith": repr(worst_arith),
            "sample_original_rel_error_in_dtype_arith": repr(original),
            "weight_max_abs_before": repr(before), "weight_max_abs_after": repr(after)}


def _off(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """‖got − want‖∞ per row (NaN where either is NaN)."""
    return np.abs(got - want).max(axis=1, initial=0.0)


def _evaluate(block: FloatBlock, x: np.ndarray, arith: Any) -> np.ndarray:
    """The block at the rows of x, computed in `arith` (float64 or float32; σ evaluated in
    float64 and rounded to it), as float64."""
    if arith is np.float64:
        return NumpyBackend().evaluate(block, x)
    cast = FloatBlock(block.scalar, block.gated, block.dim, block.skip_scale,
                      None if block.skip_matrix is None else block.skip_matrix.astype(arith),
                      tuple({k: v.astype(arith) for k, v in layer.items()}
                            for layer in block.layers))

    def sigma(z: np.ndarray) -> np.ndarray:
        return block.scalar.numpy(z).astype(arith)

    with np.errstate(over="ignore", invalid="ignore"):
        return forward(cast, x.astype(arith), sigma, np.asarray, False)[0].astype(np.float64)


def certificate_sha256(decision: Decision) -> str:
    return hashlib.sha256(proofs.encode(decision.certificate or {})).hexdigest()


# ---- files ------------------------------------------------------------------------------

def check_out(out: Path, dtype: str, force: bool) -> str:
    """The output format ("npz" or "safetensors"), or ExportError before any work is done."""
    if dtype not in DTYPES:
        raise ExportError(f"unknown --dtype {dtype!r} (known: {', '.join(DTYPES)})")
    suffix = out.suffix.lower()
    if suffix not in SUFFIXES:
        raise ExportError(f"{out}: the output must end in .npz, .safetensors or .onnx")
    if suffix == ".onnx":
        from .onnx_block import OnnxExportError, onnx_package

        try:
            onnx_package()  # before any work is done
        except OnnxExportError as error:
            raise ExportError(f"{out}: {error}") from None
    if suffix == ".npz" and dtype == "bfloat16":
        raise ExportError(f"{out}: NumPy has no bfloat16 type; write bfloat16 to a "
                          ".safetensors file")
    if out.is_dir():
        raise ExportError(f"{out}: is a folder")
    if out.exists() and not force:
        raise ExportError(f"{out}: already exists; not overwritten (use --force to replace it)")
    if not out.parent.is_dir():
        raise ExportError(f"{out}: no such folder {str(out.parent)!r}")
    return suffix[1:]


def write_arrays(out: Path, arrays: dict[str, np.ndarray], metadata: dict[str, str],
                 force: bool = False) -> None:
    """Write `.npz` or `.safetensors`; uint16 arrays are bfloat16 bit patterns (safetensors
    only). Atomic; without `force`, never replaces a file (even one made meanwhile)."""
    if out.suffix.lower() == ".npz":
        members: dict[str, Any] = {**arrays, META_KEY: np.array(json.dumps(metadata))}
        write_new(out, lambda stream: np.savez(stream, **members), force)
    elif out.suffix.lower() == ".onnx":
        from .onnx_block import OnnxExportError, onnx_bytes

        try:
            data = onnx_bytes(arrays, metadata)
        except OnnxExportError as error:
            raise ExportError(f"{out}: {error}") from None
        write_new(out, lambda stream: stream.write(data), force)
    else:
        write_new(out, lambda stream: _write_safetensors(stream, arrays, metadata), force)


def write_new(out: Path, fill: Callable[[BinaryIO], object], force: bool = False) -> None:
    """Write a file through a temporary beside it. Without `force`, the last step is a hard
    link, which fails when the name exists: nothing a user has is ever overwritten. A file
    system that refuses (no such folder, no permission, no hard links, full) is an ExportError
    naming the file, never a traceback."""
    try:
        _write_new(out, fill, force)
    except OSError as error:
        raise ExportError(f"{out}: cannot write: {error.strerror or error}") from None


def _write_new(out: Path, fill: Callable[[BinaryIO], object], force: bool) -> None:
    handle, temporary = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            fill(stream)
        os.chmod(temporary, 0o666 & ~proofs._UMASK)
        if force:
            os.replace(temporary, out)
        else:
            try:
                os.link(temporary, out)
            except FileExistsError:
                raise ExportError(f"{out}: already exists; not overwritten (use --force to "
                                  "replace it)") from None
    finally:
        Path(temporary).unlink(missing_ok=True)


_CODES = {"float64": "F64", "float32": "F32", "float16": "F16", "uint16": "BF16",
          "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8"}


def _write_safetensors(stream: BinaryIO, arrays: dict[str, np.ndarray],
                       metadata: dict[str, str]) -> None:
    entries = []
    for key, array in arrays.items():
        if array.dtype.name not in _CODES:
            raise ExportError(f"array {key!r}: dtype {array.dtype} has no safetensors code here")
        data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
        entries.append((key, _CODES[array.dtype.name], list(array.shape), data))
    write_entries(stream, entries, metadata)


Entry = tuple[str, str, list[int], bytes]  # name, safetensors dtype code, shape, raw bytes


def write_entries(stream: BinaryIO, entries: list[Entry], metadata: dict[str, str]) -> None:
    """Tensors given as stored, in order, as one safetensors file: the data section
    8-aligned and tiled exactly, as the format requires."""
    header: dict[str, Any] = {"__metadata__": metadata}
    offset = 0
    for name, code, shape, data in entries:
        header[name] = {"dtype": code, "shape": shape,
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data section starts 8-aligned
    stream.write(len(raw).to_bytes(8, "little"))
    stream.write(raw)
    for *_, data in entries:
        stream.write(data)


def write_safetensors_new(target: Path, entries: list[Entry], metadata: dict[str, str]) -> None:
    """`write_entries` into a file that must not exist yet (FileExistsError otherwise)."""
    with open(target, "xb") as stream:
        write_entries(stream, entries, metadata)


def read_export(path: Path | str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The arrays (bfloat16 widened exactly to float32) and the record of an exported file."""
    from ..weights.arrays import ArrayError, load_matrix

    path = Path(path)
    try:
        metadata = _record(path)
        arrays = {}
        for name in metadata["arrays"].split(","):
            vector = name.rsplit(".", 1)[-1].endswith("_bias")
            arrays[name] = load_matrix(path, name, vector=vector)
    except ArrayError as error:
        raise ExportError(str(error)) from None
    return arrays, metadata


def _record(path: Path) -> dict[str, str]:
    """The export record stored in the file; ExportError when there is none."""
    if not path.is_file():
        raise ExportError(f"{path}: no such file")
    try:
        if path.suffix.lower() == ".npz":
            with open(path, "rb") as stream, np.load(stream, allow_pickle=False) as archive:
                record = json.loads(str(archive[META_KEY])) if META_KEY in archive.files \
                    else None
        elif path.suffix.lower() == ".onnx":
            from .onnx_block import onnx_record

            record = onnx_record(path)
        else:
            with open(path, "rb") as stream:
                size = int.from_bytes(stream.read(8), "little")
                record = json.loads(stream.read(size)).get("__metadata__")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ExportError(f"{path}: cannot read the export record: {error}") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ExportError(f"{path}: not written by `absorb-prove export` (no {FORMAT!r} record)")
    return record


# ---- the whole command ------------------------------------------------------------------

def default_max_error(dtype: str) -> float:
    return GATE_EPSILONS * EPSILON[dtype]


PREFER = ("width", "accuracy")


def export(spec_file: Path | str, name: str, out: Path | str, width: int | None = None,
           dtype: str = "float64", force: bool = False, points: int | None = None,
           engine: str = "theory", max_error: float | None = None,
           prefer: str = "width", memory: int | None = None) -> dict[str, str]:
    """Decide block `name` of the spec and write its witness to `out`; return the record.
    Nothing is written when the sample's output-relative error passes `max_error` (default:
    `default_max_error(dtype)`). `prefer` chooses among exact constructions (`choose`).
    `memory`: the most bytes the process may hold (None: no more than is available now); a
    width whose arrays are estimated beyond it is refused before deciding or allocating
    (`memory_refusal`).
    Raises ExportError (with its exit code) and SpecError (spec errors)."""
    from ..language import load_file

    spec_file, out = Path(spec_file), Path(out)
    check_out(out, dtype, force)
    check_prefer(prefer)
    spec = load_file(spec_file)
    if name not in spec.blocks:
        known = ", ".join(sorted(spec.blocks)) or "none"
        raise ExportError(f"{spec_file}: no block named {name!r} (blocks: {known})")
    block, sublayer = exported_block(spec.blocks[name])
    why = "" if width is None else memory_refusal(block, width, dtype, memory)
    if why:
        raise ExportError(f"block {name} at width {width}: {why}; nothing written")
    found = find_witness(block, width, engine)
    return write_witness(found, out, dtype, force, points, {
        "spec": str(spec_file), "spec_sha256": proofs.sha256_file(spec_file), **sublayer},
        max_error, prefer, engine, memory)


def memory_refusal(block: Block, width: int, dtype: str, memory: int | None) -> str:
    """Why exporting `block`'s witness at `width` in `dtype` is refused for want of memory
    ("" when its estimate fits `memory`, None: what is available now: `model/memory.py`)."""
    return refusal(export_bytes(block.dim, width, block.depth, block.activation.gated,
                                block.biased, dtype), memory)


def exported_block(block: Block) -> tuple[Block, dict[str, str]]:
    """The block whose witness replaces a sublayer, and what the record must say about it
    (docs/rules.md §10): a post-norm block's reduced block, whose witness P the model runs
    as N(P(x)); a pre-norm or sandwich block has none (ExportError, with the reason)."""
    if block.norm is None:
        return block, {}
    if block.norm.placement != "post":
        raise ExportError(
            f"block {block.name} is a {block.norm.placement}-norm sublayer x + F(N(x)): no "
            "plain MLP of any width or depth computes it once its branch moves along rays "
            "(docs/rules.md §10.2), so there is nothing to export. Its bare block (the same "
            "block without the norm clause) is the paper's question; a witness for it is not "
            "a drop-in replacement", EXIT_NOT_ABSORBABLE)
    from ..decide.sublayer import reduced

    small, how, why = reduced(block)
    if small is None:
        raise ExportError(f"block {block.name}: {why}")
    return small, {"sublayer": f"post-norm: the MLP replaces the {how}; the model computes "
                               f"N(MLP(x)): run it without the residual connection and keep "
                               f"the norm {block.norm.describe()} after it"}


def check_prefer(prefer: str) -> None:
    if prefer not in PREFER:
        raise ExportError(f"unknown --prefer {prefer!r} (known: {', '.join(PREFER)})")


@dataclass
class Choice:
    """The construction chosen (`choose`): its witness, rounded arrays (padded to its
    width), measured figures (`sample_error`), and the note saying why, when another than
    the first was taken or the width changed ("" otherwise)."""

    witness: Witness
    rounded: dict[str, Rounded]
    figures: dict[str, str]
    note: str


def built(found: Witness, dtype: str, points: int | None
          ) -> tuple[dict[str, Rounded], dict[str, str]]:
    """The witness rounded to `dtype` and padded to its width, and its sample figures;
    doubles.TooWide when a doubles construction cannot be rounded (`enclosed_doubles`)."""
    rounded = padded(rounded_arrays(balanced(found.block, found.layers), dtype)
                     if found.layers is not None
                     else construction_arrays(found.block, dtype, found.decision.certificate),
                     found.claim_width)
    return rounded, sample_error(found.block, {k: r.as_float64() for k, r in rounded.items()},
                                 points, dtype)


def _figure(figures: dict[str, str], key: str) -> float:
    try:
        return float(figures[key])
    except (KeyError, ValueError):
        return math.inf


def choose(found: Witness, dtype: str, points: int | None, max_error: float,
           prefer: str = "width", engine: str = "theory", memory: int | None = None) -> Choice:
    """Among `alternatives(found)` (in order of width): with prefer "width", the first that
    can be built and passes the gate (`max_error` on sample_max_rel_error), else the first
    built (which the gate then refuses); with "accuracy", the one with the least
    sample_max_rel_error_in_dtype_arith (ties: the narrower). The note names every
    construction passed over and why; ExportError when none can be built (one whose
    memory estimate passes `memory` is not tried: `memory_refusal`)."""
    options = alternatives(found, engine)
    made: list[tuple[Witness, dict[str, Rounded], dict[str, str]]] = []
    passed: list[str] = []
    for option in options:
        label = f"{option.construction} at width {option.claim_width}"
        why = memory_refusal(option.block, option.claim_width, dtype, memory)
        if why:
            passed.append(f"{label} was not built ({why})")
            continue
        try:
            rounded, figures = built(option, dtype, points)
        except doubles.TooWide as error:
            passed.append(f"{label} was not built ({error})")
            continue
        made.append((option, rounded, figures))
        if prefer == "width":
            if _passes(figures, max_error):
                break
            off = _figure(figures, "sample_max_rel_error")
            passed.append(f"{label} is off by {off:.3g} of the output, beyond the "
                          f"{max_error:.3g} allowed (--max-error {off * 1.1:.2g} accepts it)")
    if not made:
        hint = ""
        if found.construction == Check.DOUBLES and not found.widen:
            hint = (f"; --width {upper_bound(found.block)} exports the spare-pair "
                     "construction")
        raise ExportError("; ".join(passed) + hint)
    if prefer == "width":
        pick = next((m for m in made if _passes(m[2], max_error)), made[0])
    else:
        def key(m: tuple[Witness, dict[str, Rounded], dict[str, str]]) -> tuple[float, int]:
            return _figure(m[2], "sample_max_rel_error_in_dtype_arith"), m[0].claim_width

        pick = min(made, key=key)
        arith = pick[2].get("sample_arith", dtype)
        passed += [f"--prefer accuracy: {m[0].construction} at width {m[0].claim_width} is "
                   f"off by {_figure(m[2], 'sample_max_rel_error_in_dtype_arith'):.3g} of the "
                   f"output computed in {arith}, {pick[0].construction} at width "
                   f"{pick[0].claim_width} by "
                   f"{_figure(pick[2], 'sample_max_rel_error_in_dtype_arith'):.3g}"
                   for m in made if m is not pick
                   and math.isfinite(_figure(pick[2], "sample_max_rel_error_in_dtype_arith"))]
        if len(made) > 1 and pick[2]["sample_max_rel_error"] == "n/a":
            passed.append("--prefer accuracy: no error measured (no sample), so the "
                          "narrowest construction was taken")
    witness, rounded, figures = pick
    note = "; ".join(passed)
    if witness.claim_width != found.claim_width:
        note = (f"width {witness.claim_width} ({witness.construction}) instead of the proved "
                f"{found.claim_width} ({found.construction}): {note}")
    return Choice(witness, rounded, figures, note)


def _passes(figures: dict[str, str], max_error: float) -> bool:
    if figures["sample_max_rel_error"] == "n/a":
        return True
    return float(figures["sample_max_rel_error"]) <= max_error


def write_witness(found: Witness, out: Path, dtype: str, force: bool, points: int | None,
                  source: dict[str, str], max_error: float | None = None,
                  prefer: str = "width", engine: str = "theory",
                  memory: int | None = None) -> dict[str, str]:
    limit = default_max_error(dtype) if max_error is None else max_error
    chosen = choose(found, dtype, points, limit, prefer, engine, memory)
    witness, rounded = chosen.witness, chosen.rounded
    block = witness.block
    arrays = {key: r.values for key, r in rounded.items()}
    notes = "; ".join(n for n in (witness.width_note, chosen.note) if n)
    record = {
        "format": FORMAT, **source, "block": block.name, "activation": block.activation.name,
        "depth": str(block.depth), "dim": str(block.dim), "width": str(witness.claim_width),
        "claim_width": str(witness.claim_width),
        "statement": f"{block.name} is absorbable at width {witness.claim_width}",
        "method": witness.decision.method, "construction": witness.construction,
        "prefer": prefer,
        "certificate_sha256": certificate_sha256(witness.decision),
        "dtype": dtype, "arrays": ",".join(arrays),
        "max_rounding_rel_error": f"{max(r.max_rel_error for r in rounded.values()):.6g}",
        **chosen.figures,
        **({"width_note": notes} if notes else {}),
    }
    gate(record, limit)
    record["equals"] = proved_equal(block, rounded, memory)
    write_arrays(out, arrays, record, force)
    return record


def proved_equal(block: Block, rounded: dict[str, Rounded], memory: int | None = None) -> str:
    """Whether the stored arrays, read back as the exact values they hold, compute `block`:
    `claim block equals plain` decided by the canonical forms (in exact integers beyond the
    exact-work limit), at any size. Tried when the stored values are the exact witness
    (rounding error 0) of a depth-1 block and its estimate fits `memory` (None: what is
    available now); the answer, or why it was not tried."""
    if block.depth != 1 or block.layers is None:
        return "not tried: canonical forms compare depth-1 blocks"
    if any(r.max_rel_error != 0 for r in rounded.values()):
        return ("not tried: the stored values round the exact witness (their error is "
                "measured above, not proved zero)")
    why = refusal(EXACT_BYTES * sum(r.values.size for r in rounded.values()), memory)
    if why:
        return f"not tried: the exact comparison {why}"
    from dataclasses import replace

    from ..decide.equivalence import equal_blocks
    from ..model.exactarray import fractions

    values = layer_arrays({k: r.as_float64() for k, r in rounded.items()}, 1)[0]
    matrices = {k: Matrix(array=v) for k, v in values.items() if k in ("up", "gate", "down")}
    biases = {k: tuple(fractions(v.reshape(1, -1))[0]) for k, v in values.items()
              if k.endswith("_bias")}
    plain = replace(block, name=f"{block.name}_plain", skip=replace(block.skip, scale=Fraction(0),
                                                                    matrix=None),
                    width=matrices["up"].shape[0], norm=None,
                    layers=(Layer(matrices["up"], matrices["down"], matrices.get("gate"),
                                  biases.get("up_bias"), biases.get("gate_bias"),
                                  biases.get("down_bias")),))
    equal, _, reason = equal_blocks(block, plain)
    if equal is None:
        return f"unknown: {reason}"
    return ("proved: the stored MLP equals the block (canonical forms, exactly)" if equal
            else "REFUTED: the stored MLP differs from the block (please report)")


def gate(record: dict[str, str], max_error: float) -> None:
    """Refuse (ExportError, exit 2) a file whose measured output-relative sample error
    passes `max_error`: the rounded arrays would not compute the block the proof is about.
    The bound is recorded (`sample_max_error_allowed`); an unmeasured sample ("n/a") is not
    gated and says so."""
    record["sample_max_error_allowed"] = repr(float(max_error))
    if record["sample_max_rel_error"] == "n/a":
        return
    measured = float(record["sample_max_rel_error"])
    if not measured <= max_error:  # NaN is refused too
        growth = ""
        if record.get("weight_max_abs_before", "n/a") != "n/a":
            growth = (f"its largest weight is {float(record['weight_max_abs_after']):.3g}, "
                      f"the block's {float(record['weight_max_abs_before']):.3g}; ")
        raise ExportError(
            f"the {record['dtype']} arrays ({record.get('construction', '')} at width "
            f"{record['width']}) are off by {measured:.6g} of the block's output (the largest "
            f"|exported - block| over {record['sample_points']} sample points, over the "
            f"median largest |block|), beyond the {max_error:.6g} allowed; nothing written ("
            + growth + ("a wider --dtype, or " if record["dtype"] != "float64"
                        and record.get("source") != "scan" else "")
            + "--max-error to accept more"
            + (f"; {record['width_note']}" if record.get("width_note") else "") + ")")


def summary(record: dict[str, str]) -> list[str]:
    """The record's figures as lines for the screen: rounding, the output-relative errors
    (gate figure, in the dtype's arithmetic, the original's own there), weight growth."""
    lines = [f"max rounding error {record['max_rounding_rel_error']} (relative, entrywise)"]
    if record["sample_max_rel_error"] == "n/a":
        return lines + [f"sample error {record.get('sample_note', 'not measured')}"]
    arith = record.get("sample_arith", "float64")
    lines.append(
        f"error relative to the block's output over {record['sample_points']} sample points "
        f"(standard normal rows): {_g(record['sample_max_rel_error'])} with the {record['dtype']} "
        f"weights computed in float64 (allowed {_g(record['sample_max_error_allowed'])}); "
        f"computed in {arith}: {_g(record['sample_max_rel_error_in_dtype_arith'])} (the "
        f"original block in {arith}: {_g(record['sample_original_rel_error_in_dtype_arith'])})"
        if arith != "float64" else
        f"error relative to the block's output over {record['sample_points']} sample points "
        f"(standard normal rows): {_g(record['sample_max_rel_error'])} (allowed "
        f"{_g(record['sample_max_error_allowed'])}); max abs error "
        f"{_g(record['sample_max_abs_error'])}")
    before, after = record["weight_max_abs_before"], record["weight_max_abs_after"]
    growth = "" if before == "n/a" or float(before) == 0 else \
        f" (x{float(after) / float(before):.3g})"
    lines.append(f"largest |weight|: {_g(before)} before, {_g(after)} after{growth}")
    if record.get("equals"):
        what = "the projected block" if "projected block" in record.get("sublayer", "") else \
            "the block"
        lines.append(f"equals {what}: {record['equals']}")
    if record.get("sublayer"):
        lines.append(record["sublayer"])
    return lines


def _g(figure: str) -> str:
    """A recorded figure (full precision, or "n/a") shown with 6 significant digits."""
    try:
        return f"{float(figure):.6g}"
    except ValueError:
        return figure


def load_snippet(record: dict[str, str], shown: str, name: str | None = None) -> str:
    """A `.mlp` block that loads the exported file back (path as `shown`)."""
    name = name or f"{record['block']}_plain"
    depth = int(record["depth"])
    lines = [f"block {name} {{", f"    activation {record['activation']}",
             f"    dim {record['dim']}  width {record['width']}" +
             (f"  depth {depth}" if depth > 1 else "") + "  skip none"]
    names = record["arrays"].split(",")
    for layer in range(depth):
        prefix = f"layer{layer + 1}." if depth > 1 else ""
        fields = [f'{f} = load("{shown}", "{prefix}{f}")' for f in FIELDS if prefix + f in names]
        if depth > 1:
            lines.append(f"    layer {layer + 1} {{ " + "  ".join(fields) + " }")
        else:
            lines += [f"    {f}" for f in fields]
    return "\n".join(lines + ["}"])


# ---- torch ------------------------------------------------------------------------------

def _torch_activation(record: dict[str, str]) -> tuple[bool, Callable[[], Any]]:
    """(gated, a maker of the torch module of σ); ExportError for a σ torch lacks."""
    import torch.nn as nn

    from ..language import SpecError, activation_named

    try:
        activation = activation_named(record["activation"])
    except SpecError as error:
        raise ExportError(f"the record's activation {record['activation']!r}: "
                          f"{error.diagnostics[0].message}") from None
    scalar = activation.scalar
    makers: dict[str, Callable[[], Any]] = {
        "relu": nn.ReLU, "gelu": nn.GELU, "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
        "silu": nn.SiLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "identity": nn.Identity,
        "leaky_relu": lambda: nn.LeakyReLU(float(scalar.param or 0)),
    }
    if scalar.kind not in makers:
        raise ExportError(f"torch has no module for {record['activation']!r}")
    return activation.gated, makers[scalar.kind]


def to_torch(path: Path | str, dtype: Any = None) -> Any:
    """An `nn.Module` computing the exported plain block: per layer Linear (up, and gate when
    gated) → activation → Linear (down), biases where exported; a stack is an
    `nn.Sequential` of layers. Parameters are in the file's dtype unless `dtype` is given.
    torch is imported here only (pip install torch)."""
    try:
        import torch
        import torch.nn as nn
    except ImportError:
        raise ExportError("to_torch needs torch (pip install torch)") from None
    arrays, record = read_export(path)
    gated, make = _torch_activation(record)
    depth, dim = int(record["depth"]), int(record["dim"])
    if dtype is None:
        dtype = {"float64": torch.float64, "float32": torch.float32,
                 "bfloat16": torch.bfloat16}[record["dtype"]]

    class PlainLayer(nn.Module):
        """x ↦ down σ(up x + b) + c, or down (σ(gate x + g) ⊙ (up x + b)) + c."""

        def __init__(self, weights: dict[str, np.ndarray]):
            super().__init__()
            width = weights["up"].shape[0]
            self.up = _linear(dim, width, weights["up"], weights.get("up_bias"))
            self.gate = (_linear(dim, width, weights["gate"], weights.get("gate_bias"))
                         if gated else None)
            self.act = make()
            self.down = _linear(width, dim, weights["down"], weights.get("down_bias"))

        def forward(self, x: Any) -> Any:
            if self.gate is None:
                return self.down(self.act(self.up(x)))
            return self.down(self.act(self.gate(x)) * self.up(x))

    def _linear(fan_in: int, fan_out: int, weight: np.ndarray, bias: np.ndarray | None) -> Any:
        layer = nn.Linear(fan_in, fan_out, bias=bias is not None, dtype=dtype)
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(np.array(weight)).to(dtype))
            if bias is not None:
                layer.bias.copy_(torch.from_numpy(np.array(bias)).to(dtype))
        return layer

    layers = [PlainLayer(weights) for weights in layer_arrays(arrays, depth)]
    return layers[0] if depth == 1 else nn.Sequential(*layers)

