"""Exports: a proved witness written as weight arrays (`witness.py`, the whole command: the
witness `construction.py`, its arrays `layout.py`, their sample error `sample.py`, the
construction chosen `choosing.py`, the record `record.py`), correctly rounded (`rounding.py`,
`enclosed_doubles.py`), as an ONNX graph (`onnx_block.py`), as a PyTorch module
(`torch_module.py`), and a whole checkpoint with its MLP sublayers' skips absorbed
(`checkpoint.py`, `plain.py`, `onnx_patch.py`). The export's files, arrays with their record,
are written and read back by `files.py`, through the formats of `weights/`.

The Python API keeps its names: `absorb_formal.export.export(...)`, `read_export`,
`to_torch`, `ExportError`, … each load from its module (HOMES) on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {
    "witness": ("DTYPES", "PREFER", "SUFFIXES", "check_out", "check_prefer", "export",
                "exported_block", "write_witness"),
    "construction": ("LARGE_METHODS", "Witness", "alternatives", "find_witness"),
    "layout": ("FIELDS", "HOMOGENEOUS", "array_names", "balanced", "construction_arrays",
               "layer_arrays", "padded", "rounded_arrays"),
    "sample": ("DEFAULT_POINTS", "EPSILON", "GATE_EPSILONS", "SAMPLE_INPUTS", "SAMPLE_SEED",
               "default_max_error", "default_points", "gate", "sample_error"),
    "choosing": ("Choice", "built", "choose", "memory_refusal", "proved_equal"),
    "record": ("certificate_sha256", "load_snippet", "summary"),
    "torch_module": ("to_torch",),
    "rounding": ("EXIT_ERROR", "EXIT_NOT_ABSORBABLE", "EXIT_OK", "ExportError", "Rounded",
                 "bf16_to_float32", "round_matrix", "round_values"),
}
# public name → the module that defines it (the files: absorb_formal.export.files)
HOMES = {name: f"{__name__}.{module}" for module, names in _MODULES.items() for name in names}
HOMES.update(dict.fromkeys(("FORMAT", "read_export", "write_arrays", "write_new"),
                           "absorb_formal.export.files"))


def __getattr__(name: str) -> Any:
    if name not in HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(HOMES[name]), name)
