"""`load("file", "key")`: read one matrix (or, for a bias, one vector) from a NumPy `.npz`
or a `.safetensors` file.

Values are kept exact: a float array is the dyadic rationals its bits denote (float16,
bfloat16 and float32 widen to float64 without rounding). The safetensors format (8-byte
little-endian header length, JSON header, raw little-endian data) is read directly, so no
extra dependency is needed and a malformed file gives a clear message, not a crash.
"""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np


class ArrayError(ValueError):
    """A load that cannot give a finite real matrix; the message is for the user."""


_SAFETENSORS_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
    "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}


def load_matrix(path: Path, key: str, vector: bool = False) -> np.ndarray:
    """The 2-D array stored under `key`, checked finite; raises ArrayError otherwise.

    With `vector` (a bias, MATH.md §8): a 1-D array, or a 1×n or n×1 one, returned 1-D.
    Reshaping moves no value, so exactness is kept."""
    if not path.is_file():
        raise ArrayError(f"cannot load: file {str(path)!r} does not exist")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npz":
            array = _from_npz(path, key)
        elif suffix == ".safetensors":
            array = _from_safetensors(path, key)
        else:
            raise ArrayError(f"cannot load {path.name!r}: expected a .npz or .safetensors file")
    except ArrayError:
        raise
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as error:
        raise ArrayError(f"cannot read {path.name!r}: {error}") from None
    except (TypeError, NotImplementedError):  # np.load on a .npy named .npz, or a zip whose
        # members use a compression zipfile lacks
        raise ArrayError(f"cannot read {path.name!r}: not a NumPy .npz archive") from None
    if not vector:
        return _checked(array, path.name, key)
    # Checked as the 1×n matrix it is (finite values, real dtype), returned 1-D.
    return _checked(_as_row(array, path.name, key), path.name, key)[0]


def _as_row(array: np.ndarray, file: str, key: str) -> np.ndarray:
    """A vector stored 1-D, 1×n or n×1 (Hugging Face stores biases 1-D) as a 1×n matrix."""
    if array.ndim == 1 or (array.ndim == 2 and 1 in array.shape):
        return array.reshape(1, -1)
    raise ArrayError(f"array {key!r} in {file!r} has shape {tuple(array.shape)}, not a vector "
                     "(a 1-D array, or 1×n or n×1)")


def _from_npz(path: Path, key: str) -> np.ndarray:
    # np.load leaves its file open when the archive is corrupt: own the handle.
    with open(path, "rb") as stream, np.load(stream, allow_pickle=False) as archive:
        if key not in archive.files:
            raise ArrayError(f"{path.name!r} has no array {key!r} "
                             f"(it has: {', '.join(sorted(archive.files)[:10]) or 'none'})")
        return np.asarray(archive[key])


def _from_safetensors(path: Path, key: str) -> np.ndarray:
    with open(path, "rb") as stream:
        head = stream.read(8)
        if len(head) < 8:
            raise ArrayError(f"{path.name!r} is not a safetensors file (too short)")
        size = int.from_bytes(head, "little")
        total = path.stat().st_size
        if size > min(total - 8, 100_000_000):
            raise ArrayError(f"{path.name!r} has a corrupt safetensors header")
        header = _safetensors_header(stream.read(size), path.name)
        if key not in header or key == "__metadata__":
            names = sorted(k for k in header if k != "__metadata__")[:10]
            raise ArrayError(f"{path.name!r} has no tensor {key!r} "
                             f"(it has: {', '.join(names) or 'none'})")
        dtype, shape, start, end = _safetensors_entry(header[key], key, total - 8 - size)
        count = math.prod(shape)
        stream.seek(8 + size + start)
        if dtype == "BF16":  # bfloat16 is the top half of a float32: widen exactly
            # One pass from file to uint32 (6.8x faster than bytes -> astype -> shift on a
            # LLaMA-7B MLP: benchmarks/RESULTS.md, profiling).
            half = np.fromfile(stream, dtype="<u2", count=count)
            bits = np.left_shift(half, 16, dtype=np.uint32)
            return bits.view(np.float32).reshape(shape)
        raw = stream.read(end - start)
    return np.frombuffer(raw, dtype=_SAFETENSORS_DTYPES[dtype]).reshape(shape)


def _safetensors_header(raw: bytes, name: str) -> dict[str, Any]:
    """The JSON header as a dict of tensor entries (and `__metadata__`, a dict of strings),
    every entry's structure checked, so that reading it afterwards cannot fail on types."""
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ArrayError(f"{name!r} has a corrupt safetensors header (not UTF-8 JSON)") from None
    if not isinstance(header, dict):
        raise ArrayError(f"{name!r} has a corrupt safetensors header (not a JSON object)")
    metadata = header.get("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise ArrayError(f"{name!r} has a corrupt safetensors header "
                         "(__metadata__ is not a map of strings)")
    for tensor, entry in header.items():
        if tensor != "__metadata__" and not _well_formed(entry):
            raise ArrayError(f"{name!r} has a corrupt safetensors header (entry {tensor!r} "
                             "needs dtype: a string, shape: a list of integers >= 0, and "
                             "data_offsets: two integers)")
    return header


def _naturals(value: Any) -> bool:
    """A JSON list of integers >= 0 (true and false are no integers here)."""
    return isinstance(value, list) and all(type(v) is int and v >= 0 for v in value)


def _well_formed(entry: Any) -> bool:
    return (isinstance(entry, dict) and isinstance(entry.get("dtype"), str)
            and _naturals(entry.get("shape")) and _naturals(entry.get("data_offsets"))
            and len(entry["data_offsets"]) == 2)


def _safetensors_entry(entry: dict[str, Any], key: str, data_size: int
                       ) -> tuple[str, list[int], int, int]:
    """(dtype, shape, start, end) of a well-formed entry whose dtype is supported and whose
    offsets hold exactly its elements inside the data section."""
    dtype, shape, (start, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype == "BF16":
        width = 2
    elif dtype in _SAFETENSORS_DTYPES:
        width = np.dtype(_SAFETENSORS_DTYPES[dtype]).itemsize
    else:
        raise ArrayError(f"tensor {key!r} has unsupported dtype {dtype[:20]!r}")
    if not start <= end <= data_size or end - start != math.prod(shape) * width:
        raise ArrayError(f"tensor {key!r} has corrupt data offsets")
    return dtype, shape, start, end


def _checked(array: np.ndarray, file: str, key: str) -> np.ndarray:
    if array.dtype.kind not in "fiub":
        raise ArrayError(f"array {key!r} in {file!r} has dtype {array.dtype}, not real numbers")
    if array.ndim != 2:
        raise ArrayError(f"array {key!r} in {file!r} has shape {tuple(array.shape)}, "
                         "not a matrix")
    if array.dtype.kind == "f":
        if array.dtype.itemsize < 4:
            array = array.astype(np.float32)  # float16 widens exactly
        if not np.isfinite(array).all():
            bad = np.argwhere(~np.isfinite(array))[0]
            raise ArrayError(f"array {key!r} in {file!r} holds a non-finite value "
                             f"at [{bad[0]}, {bad[1]}]")
    elif array.dtype.kind == "b":
        array = array.astype(np.int64)
    return np.ascontiguousarray(array)
