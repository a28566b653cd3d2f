"""What an export says about itself besides its arrays: the hash of the certificate it
stands on (`certificate_sha256`), the record's figures as lines for the screen (`summary`),
and a `.mlp` block that loads the file back (`load_snippet`).

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
bounds, and any construction passed over and why (`choosing.choose`). `write_witness`
fills it, `export/files.py` stores it.
"""

from __future__ import annotations

import hashlib

from ..certify import documents as proofs
from ..decide.decision import Decision
from .layout import FIELDS


def certificate_sha256(decision: Decision) -> str:
    return hashlib.sha256(proofs.encode(decision.certificate or {})).hexdigest()


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
