"""Each exported sublayer's plain MLP: its construction chosen and gated as `absorb-prove
export` chooses it (`export.choose`, `--prefer`, `--max-error`), rounded to the sublayer's
dtype, and laid out as the checkpoint's own tensors. Shared by the safetensors / npz
checkpoint (`export/checkpoint.py`) and the patched ONNX model (`export/onnx_patch.py`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..scanner.found import ScanError, TensorRef
from ..scanner.run import BlockAnswer, ScanReport
from ..weights.arrays import load_array
from .choosing import Choice, choose
from .construction import find_witness
from .layout import padded
from .rounding import ExportError
from .sample import default_max_error, gate


def chosen(report: ScanReport, answer: BlockAnswer, root: Path, prefer: str,
            max_error: float | None) -> Choice:
    """The sublayer's construction at its proved width, or a wider one (`export.choose`),
    rounded to the sublayer's dtype; ScanError when none passes the gate."""
    assert report.report is not None and report.report.spec is not None
    from ..scanner.run import bare_name

    norm = answer.block.norm
    name = answer.block.name if norm is not None and norm.placement == "post" else \
        bare_name(answer.block)
    model = report.report.spec.blocks[name]
    if model.norm is not None:  # post-norm: P absorbs the reduced block; N stays after it
        from ..decide.sublayer import reduced

        small, _, why = reduced(model)
        if small is None:
            raise ScanError(f"--export: {answer.block.where}: {why}")
        model = small
    dtype = _dtype(root, answer.block.up)
    limit = default_max_error(dtype) if max_error is None else max_error
    try:
        found = find_witness(model, answer.proved_width, wider=True)
        chosen = choose(found, dtype, None, limit, prefer)
        gate(record(chosen, answer.block.where, dtype), limit)
        chosen.figures["sample_max_error_allowed"] = repr(float(limit))
    except ExportError as error:
        raise ScanError(f"--export: {answer.block.where}: {error}") from None
    return chosen


def record(chosen: Choice, where: str, dtype: str | None = None) -> dict[str, str]:
    """The figures of a sublayer's choice, as `export.summary` and `export.gate` read them."""
    note = "; ".join(x for x in (chosen.witness.width_note, chosen.note) if x)
    rounding = max((r.max_rel_error for r in chosen.rounded.values()), default=0.0)
    return {**chosen.figures, "block": where, "dtype": dtype or _dtype_of(chosen),
            "source": "scan",  # the gate's hint: scan writes the checkpoint's own dtype
            "construction": chosen.witness.construction,
            "width": str(chosen.witness.claim_width),
            "max_rounding_rel_error": f"{rounding:.6g}",
            "sample_max_error_allowed": chosen.figures.get("sample_max_error_allowed", "n/a"),
            **({"width_note": note} if note else {})}


def _dtype_of(chosen: Choice) -> str:
    values = next(iter(chosen.rounded.values())).values
    return "bfloat16" if values.dtype == np.uint16 else values.dtype.name


def plain_tensors(answer: BlockAnswer, chosen: Choice, width: int
                   ) -> tuple[dict[str, np.ndarray], float]:
    """The sublayer's plain MLP as tensors named and laid out as its own, in its dtype
    (correctly rounded), and the largest relative rounding error."""
    block = answer.block
    rounded = padded(chosen.rounded, width)
    out = {}
    for field, item in rounded.items():
        ref: TensorRef | None = getattr(block, field)
        if ref is None:  # a bias the witness needs and the input lacks: its usual name
            weight = getattr(block, "down" if field == "down_bias" else
                             "gate" if field == "gate_bias" else "up")
            ref = TensorRef(weight.file, weight.key.removesuffix(".weight") + ".bias")
        values = item.values
        out[ref.key] = values.T if ref.transpose else values
    return out, max((r.max_rel_error for r in rounded.values()), default=0.0)


def _dtype(root: Path, ref: TensorRef) -> str:
    loaded = load_array(root / ref.file, ref.key)
    if loaded.kind == "bf16":
        return "bfloat16"
    return "float64" if loaded.bits.dtype == np.float64 else "float32"
