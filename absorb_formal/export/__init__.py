"""Exports: a proved witness written as weight arrays (`witness.py`), correctly rounded
(`rounding.py`, `enclosed_doubles.py`), as an ONNX graph (`onnx_block.py`), and a whole
checkpoint with its MLP sublayers' skips absorbed (`checkpoint.py`, `plain.py`,
`onnx_patch.py`).

The Python API keeps its names: `absorb_formal.export.export(...)`, `read_export`,
`to_torch`, `ExportError`, … load from `witness.py` on first use.
"""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    witness = importlib.import_module(f"{__name__}.witness")
    try:
        return getattr(witness, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
