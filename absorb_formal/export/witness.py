"""`absorb-prove export`: write the exact witness of an absorbable block as weight arrays.

The witness is the plain block (skip none) that the decision proved equal to the residual
block; its weights are exact rationals. Export rounds each entry to the asked float format
(round to nearest, ties to even: the format's own rounding of the exact value, with no double
rounding) and writes the arrays under the language's field names, so that a spec can
`load(...)` them back:

- depth 1: `up`, `down`, `gate` (gated activations), `up_bias`, `gate_bias`, `down_bias`
  (1-D; only in a biased witness); depth L ≥ 2: `layer1.up`, …, `layerL.down_bias`
  (docs/language.md numbers layers from 1).
- `.safetensors`: F64, F32 or BF16 tensors; the record (`record.py` lists its fields) in
  `__metadata__` (a map of strings). `.npz`: float64 or float32 arrays; the record as a
  JSON string in the 0-d array `__absorb_formal__`. NumPy has no bfloat16, so `--dtype
  bfloat16` needs `.safetensors` or `.onnx`. `.onnx`: the plain block as a graph
  (`export/onnx_block.py`), the arrays as its initializers, the record as its metadata_props.

This module is the whole command (`export`, `write_witness`); its steps take a block and hand
back arrays and figures, so that a later step (such as a normalisation wrapped around the
sublayer) can be added between choosing and writing: the witness (`construction.py`), its
arrays rounded and padded (`layout.py`), their sample error and gate (`sample.py`), the
construction chosen (`choosing.py`), the record's lines and load snippet (`record.py`). Files
are written and read back by `export/files.py`; `to_torch` is in `torch_module.py`.

Export is numeric output, not a deciding path: the verdict and the witness come from
`decide`; rounding happens only in export.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..certify import documents as proofs
from ..export.files import FORMAT, write_arrays
from ..model.blocks import Block
from .choosing import choose, memory_refusal, proved_equal
from .construction import Witness, find_witness
from .record import certificate_sha256
from .rounding import EXIT_NOT_ABSORBABLE, ExportError
from .sample import default_max_error, gate

DTYPES = ("float64", "float32", "bfloat16")
SUFFIXES = (".npz", ".safetensors", ".onnx")
PREFER = ("width", "accuracy")


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


def __getattr__(name: str) -> Any:
    """The names this module offered before export was split (`absorb_formal.export.witness.
    read_export`, ...), from their modules now (`absorb_formal.export.HOMES`)."""
    from . import HOMES

    if HOMES.get(name, __name__) == __name__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(HOMES[name]), name)
