"""How far the exported arrays are from the block they replace, measured at seeded inputs
(`sample_error`), and the gate that refuses a file whose error passes the bound (`gate`;
by default 16 machine epsilons of the dtype, `default_max_error`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.blocks import Block
from ..numeric.backends import NumpyBackend, forward
from ..numeric.crosscheck import affordable
from ..numeric.floatblock import FloatBlock, OutOfRange, from_block
from .layout import layer_arrays
from .rounding import ExportError

DEFAULT_POINTS = 10_000
# The sample gate: the largest sample_max_rel_error written without --max-error, per dtype —
# 16 machine epsilons of the format, the float64 cross-check's own allowance per term summed
# (numeric/crosscheck.py ROUNDING): rounding each weight once moves each term by a few ulps.
EPSILON = {"float64": 2.0 ** -52, "float32": 2.0 ** -23, "bfloat16": 2.0 ** -7}
GATE_EPSILONS = 16


def default_max_error(dtype: str) -> float:
    return GATE_EPSILONS * EPSILON[dtype]


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
