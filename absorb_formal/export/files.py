"""The files `absorb-prove export` writes and reads back: arrays with their record.

The record (a map of strings, `export/record.py` lists its fields) sits where each format
keeps metadata: a safetensors file's `__metadata__`, the JSON string member
`__absorb_formal__` of a `.npz`, an ONNX model's metadata_props (`export/onnx_block.py`,
which writes the graph). Every file is written through a temporary beside it and never
replaces one a user has, unless asked to (`write_new`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..weights import npz, safetensors
from .rounding import ExportError

FORMAT = "absorb_formal export 1"  # the record's "format" field


def write_arrays(out: Path, arrays: dict[str, np.ndarray], metadata: dict[str, str],
                 force: bool = False) -> None:
    """Write `.npz`, `.safetensors` or `.onnx`; uint16 arrays are bfloat16 bit patterns
    (safetensors and ONNX only). Atomic; without `force`, never replaces a file (even one
    made meanwhile)."""
    if out.suffix.lower() == ".npz":
        write_new(out, lambda stream: npz.write(stream, arrays, metadata), force)
    elif out.suffix.lower() == ".onnx":
        from .onnx_block import OnnxExportError, onnx_bytes

        try:
            data = onnx_bytes(arrays, metadata)
        except OnnxExportError as error:
            raise ExportError(f"{out}: {error}") from None
        write_new(out, lambda stream: stream.write(data), force)
    else:
        try:
            write_new(out, lambda stream: safetensors.write(stream, arrays, metadata), force)
        except ValueError as error:  # a dtype safetensors has no code for
            raise ExportError(str(error)) from None


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
    from ..certify.documents import _UMASK  # read once, where certificates are written

    handle, temporary = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            fill(stream)
        os.chmod(temporary, 0o666 & ~_UMASK)
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


def read_export(path: Path | str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The arrays (bfloat16 widened exactly to float32) and the record of an exported file."""
    from ..weights.arrays import ArrayError, load_matrix

    path = Path(path)
    try:
        metadata = read_record(path)
        arrays = {}
        for name in metadata["arrays"].split(","):
            vector = name.rsplit(".", 1)[-1].endswith("_bias")
            arrays[name] = load_matrix(path, name, vector=vector)
    except ArrayError as error:
        raise ExportError(str(error)) from None
    return arrays, metadata


def read_record(path: Path) -> dict[str, str]:
    """The export record stored in the file; ExportError when there is none."""
    if not path.is_file():
        raise ExportError(f"{path}: no such file")
    record: Any
    try:
        if path.suffix.lower() == ".npz":
            record = npz.record(path)
        elif path.suffix.lower() == ".onnx":
            from .onnx_block import onnx_record

            record = onnx_record(path)
        else:
            record = safetensors.record(path)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ExportError(f"{path}: cannot read the export record: {error}") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ExportError(f"{path}: not written by `absorb-prove export` (no {FORMAT!r} record)")
    return record
