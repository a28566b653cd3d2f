"""`scan --export DIR`: the skip-free checkpoint.

Each MLP sublayer is replaced by the plain MLP proved equal to its residual x + MLP(x), at
the least width the scan proved — or, where that construction (doubles at m + d) cannot be
rounded or misses the error gate, or `--prefer accuracy` finds a wider one more accurate, at
the spare pairs' width m + 2d, said on screen and in `width_notes` (`export.choose`) —
every sublayer padded with zero neurons to the largest, so that one config width fits all.
Each sublayer's error against its output and its weight growth are printed and recorded
under "errors"; a sublayer that no construction brings within the gate is refused.
Tensor names and layouts stay as in the input (GPT-2's Conv1D stays input × output); every
other tensor is copied bit for bit; config.json's width keys are updated, and an
`absorb_formal` entry lists the sublayers that lost their skip: the model code must run
those without the residual around them. An ONNX model is patched instead: its sublayers'
tensors rewritten in place and their residual Adds removed (`onnx_patch.py`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

from ..scanner.found import ScanError
from ..scanner.run import BlockAnswer, ScanReport
from ..weights.copies import write_replacing
from .choosing import proved_equal
from .plain import chosen as chosen_plain
from .plain import plain_tensors, record
from .record import summary
from .sample import SAMPLE_INPUTS

WIDTH_KEYS = ("n_inner", "intermediate_size", "d_ff", "ffn_dim", "encoder_ffn_dim",
              "decoder_ffn_dim", "ffn_hidden_size", "mlp_dim")


def unexportable(kind: str, path: Path, bare: bool = False) -> str:
    """Why a checkpoint of this kind has no skip-free checkpoint written, or '' (for an ONNX
    model: what its graph shows before anything is decided, `onnx_patch.problem`)."""
    if kind in ("safetensors", "npz"):
        return ""
    if kind == "onnx":
        from .onnx_patch import problem

        return problem(path, bare)
    return f"--export writes safetensors, npz and ONNX models; {path} is {kind}"


def export_checkpoint(report: ScanReport, out: Path, prefer: str = "width",
                      max_error: float | None = None, lines: list[str] | None = None,
                      bare: bool = False) -> Path:
    """Write the skip-free checkpoint of a scanned safetensors / npz checkpoint to `out`
    (a new or empty folder), or the patched model of an ONNX one (`onnx_patch`); ScanError
    when some sublayer has no proved width, or when no
    exact construction of it passes the error gate (`max_error`, default 16 machine
    epsilons of its dtype, against the block's output). `prefer` chooses between
    constructions as `absorb-prove export --prefer` does. `lines`, when given, receives
    what the screen should show: per sublayer, the width, construction, errors and weight
    growth, and any change of width with its reason.

    What replaces each sublayer is what the model computes (docs/rules.md §10): a post-norm
    sublayer N(x + F(x)) becomes N(P(x)), P proved to absorb the reduced block; a pre-norm
    or sandwich sublayer has nothing to export (§10.2), and is refused with that reason
    unless `bare` asks for the bare blocks' witnesses, which the record then says are not
    drop-in replacements."""
    if report.report is None or report.report.spec is None or not report.blocks:
        raise ScanError("--export: nothing was decided, so there is nothing to export")
    if report.interrupted:
        raise ScanError("--export: the scan was interrupted")
    scanned, report = report, _exported(report, bare)
    missing = [a for a in report.blocks if a.proved_width is None]
    if missing:
        raise ScanError("--export: no width is proved to absorb " + ", ".join(
            f"{a.block.where} ({a.absorbable} at width {a.block.width}; min width "
            f"{_shown(a)})" for a in missing[:5]) + ": there is no skip-free checkpoint to "
            "write")
    checkpoint = report.checkpoint
    assert checkpoint is not None
    if checkpoint.kind == "onnx":  # the graph patched: weights replaced, residual Adds cut
        from .onnx_patch import export_onnx

        return export_onnx(scanned, report, out, prefer, max_error, lines)
    if problem := unexportable(checkpoint.kind, report.path):
        raise ScanError(problem)
    chosen = {a.block.where: chosen_plain(report, a, checkpoint.root, prefer, max_error)
              for a in report.blocks}
    # the widths exported: the proved ones, or wider constructions where the proved one
    # cannot be built or misses the gate (the notes say which and why)
    width = max(c.witness.claim_width for c in chosen.values())
    notes = {where: n for where, c in chosen.items()
             if (n := "; ".join(x for x in (c.witness.width_note, c.note) if x))}
    replaced: dict[str, np.ndarray] = {}
    rounding: dict[str, float] = {}
    for answer in report.blocks:
        tensors, rounding[answer.block.where] = plain_tensors(
            answer, chosen[answer.block.where], width)
        replaced.update(tensors)
    # the stored tensors proved equal to each block where they are its exact witness
    equals = {where: proved_equal(c.witness.block, c.rounded)
              for where, c in chosen.items()}
    if lines is not None:
        for where, c in chosen.items():
            lines.append(f"{where}: width {c.witness.claim_width} ({c.witness.construction})")
            lines += [f"  {line}" for line in summary(record(c, where))
                      if not line.startswith("max rounding")]
            lines.append(f"  equals the block: {equals[where]}")
            if where in notes:
                lines.append(f"  {notes[where]}")
    staging = Path(tempfile.mkdtemp(prefix=".absorb-export-", dir=out.parent
                                    if out.parent.exists() else None))
    try:
        name = "model.safetensors" if checkpoint.kind == "safetensors" else "model.npz"
        write_replacing(checkpoint.root, checkpoint.tensors, replaced, staging / name)
        config = dict(checkpoint.config)
        for key in WIDTH_KEYS:
            if key in config:
                config[key] = width
        if not any(key in config for key in WIDTH_KEYS) and config.get("model_type") == "gpt2":
            config["n_inner"] = width
        config["absorb_formal"] = {
            "skip_absorbed": [a.block.where for a in report.blocks], "width": width,
            "note": _note(report, bare),
            "widths_proved": {a.block.where: a.proved_width for a in report.blocks},
            **({"width_notes": notes} if notes else {}),
            "prefer": prefer, "sample_inputs": SAMPLE_INPUTS,
            # per sublayer: the construction, its output-relative errors and weight growth
            # (`absorb_formal.export.sample.sample_error`)
            "errors": {where: {k: v for k, v in record(c, where).items()
                               if k.startswith(("sample_max", "sample_original", "weight_",
                                                "construction", "sample_arith"))}
                       for where, c in chosen.items()},
            # largest |stored − exact| / |exact| over each sublayer's entries: 0 means the
            # stored tensors are the exact witness, and `equals` proves them equal
            "max_rounding_rel_error": {k: float(f"{v:.6g}") for k, v in rounding.items()},
            "equals": equals}
        (staging / "config.json").write_text(json.dumps(config, indent=2) + "\n",
                                             encoding="utf-8")
        out.mkdir(parents=True, exist_ok=True)
        for item in staging.iterdir():
            target = out / item.name
            if target.exists():
                raise ScanError(f"{target}: exists; not replaced")
            shutil.move(str(item), target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


PRE_NORM = ("pre", "sandwich")


def _exported(report: ScanReport, bare: bool) -> ScanReport:
    """The answers whose witnesses are written: each sublayer's own, or (`bare`) the bare
    blocks'. A pre-norm sublayer is refused unless `bare`: no plain MLP replaces it."""
    from dataclasses import replace

    placed = [a for a in report.blocks if a.block.norm is not None
              and a.block.norm.placement in PRE_NORM]
    if placed and not bare:
        first = placed[0]
        more = f" and {len(placed) - 1} more" if len(placed) > 1 else ""
        raise ScanError(
            f"--export: {first.block.where}{more}: the model computes a "
            f"{first.block.norm.placement}-norm sublayer x + F(N(x)) there (answer "
            f"{first.absorbable}, min width {_shown(first)}). No plain MLP of any width or "
            "depth computes it once its branch moves along rays (docs/rules.md §10.2), so "
            "this model has no skip-free checkpoint. --export-bare writes the bare blocks' "
            "witnesses (x + F(x), the paper's question) instead; they are not drop-in "
            "replacements")
    if not bare:
        return report
    from ..scanner.run import bare_name

    # the bare answer, about the spec's bare block (NAME_bare), without the norm
    return replace(report, blocks=[replace(a.bare, block=replace(
        a.block, norm=None, name=bare_name(a.block))) if a.bare is not None else a
        for a in report.blocks])


def _note(report: ScanReport, bare: bool) -> str:
    if bare and any(a.block.name.endswith("_bare") for a in report.blocks):
        return ("NOT A DROP-IN REPLACEMENT: each listed MLP computes the bare block x + MLP(x) "
                "of the original (the paper's question), but the model computes its norm "
                "beside it (pre-norm x + MLP(N(x))): swapping these in changes the model's "
                "outputs")
    if any(a.block.norm is not None and a.block.norm.placement == "post"
           for a in report.blocks):
        return ("each listed MLP sublayer alone computes what the original's residual sum "
                "gives its norm: run it without the residual connection around it and keep "
                "the norm after it (post-norm: the model computes N(MLP(x)))")
    return ("each listed MLP sublayer alone computes x + MLP(x) of the original model: run "
            "it without the residual connection around it")


def _shown(answer: BlockAnswer) -> str:
    lo, hi = answer.min_width
    return "none" if lo is None and hi is None else f"{lo}..{hi if hi is not None else ''}"
