"""PyTorch pickle checkpoints (`pytorch_model.bin`, `.pt`): their tensors copied bit for bit
into a safetensors file, which the exact readers (the prover's and the checker's) then read.

torch is optional and loads with `weights_only=True` (no code in the file runs). Nothing is
converted: each tensor's bytes are written as stored, bfloat16 as its 16-bit patterns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .common import CheckpointError as ScanError
from .safetensors import Entry, write_new_file

PICKLE_SUFFIXES = (".bin", ".pt", ".pth")
_CODES = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
          "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8",
          "bool": "BOOL"}


def state_dict(path: Path) -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        raise ScanError(f"{path}: a PyTorch pickle checkpoint needs torch (pip install torch), "
                        "or save it as safetensors first") from None
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many kinds for a bad or unsafe pickle
        raise ScanError(f"{path}: not a PyTorch state dict torch loads with weights_only=True "
                        f"({type(error).__name__}: {str(error)[:200]})") from None
    for key in ("state_dict", "model", "module"):  # common wrappers of a state dict
        if isinstance(loaded, dict) and isinstance(loaded.get(key), dict) and not any(
                isinstance(v, torch.Tensor) for v in loaded.values()):
            loaded = loaded[key]
    if not isinstance(loaded, dict) or not loaded:
        raise ScanError(f"{path}: expected a state dict (names to tensors)")
    tensors = {k: v for k, v in loaded.items() if isinstance(v, torch.Tensor)}
    if not tensors:
        raise ScanError(f"{path}: holds no tensor")
    return tensors


def to_safetensors(path: Path, target: Path) -> Path:
    """Copy every tensor of the pickle at `path` into a new safetensors file `target`."""
    entries: list[Entry] = []
    for name, tensor in state_dict(path).items():
        dtype = str(tensor.dtype).removeprefix("torch.")
        if dtype not in _CODES:
            raise ScanError(f"{path}: tensor {name!r} has dtype {dtype}, which is not read "
                            "exactly here")
        flat = tensor.detach().contiguous()
        if dtype == "bfloat16":
            import torch

            data = flat.view(torch.int16).numpy().view(np.uint16).astype("<u2").tobytes()
        else:
            array = flat.numpy()
            data = array.astype(array.dtype.newbyteorder("<")).tobytes()
        entries.append((name, _CODES[dtype], list(tensor.shape), data))
    try:
        write_new_file(target, entries, {"source": path.name,
                                         "format": "absorb_formal pickle copy 1"})
    except FileExistsError:
        raise ScanError(f"{target}: exists; the copy of {path.name} is not written over it "
                        "(remove it, or scan it directly)") from None
    return target
