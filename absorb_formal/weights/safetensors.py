"""safetensors files: tensors read exactly as stored (`load(...)`), and written, with a
record in `__metadata__`.

The format (8-byte little-endian header length, a JSON header, raw little-endian data) is
read directly, so no extra dependency is needed and a malformed file gives a clear message,
not a crash: a header is read only when every entry is well formed, no key occurs twice, and
the tensors' byte ranges tile the data section exactly, as the format requires.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..language.errors import did_you_mean, listed
from .common import ArrayError, Loaded, Stamp, settled, stamp

DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
    "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}
_HEADERS: dict[str, tuple[Stamp, dict[str, Any], int]] = {}  # per file: header, its size


def read(path: Path, key: str, version: Stamp) -> Loaded:
    with open(path, "rb") as stream:
        header, size = _header(path, stream, version)
        if key not in header or key == "__metadata__":
            names = sorted(k for k in header if k != "__metadata__")
            raise ArrayError(f"{path.name!r} has no tensor {key!r}"
                             f"{did_you_mean(key, names)} (it has: {listed(names)})")
        dtype, shape, start, end = _entry(header[key], key, version[0] - 8 - size)
        count = math.prod(shape)
        stream.seek(8 + size + start)
        # One read from file to an array that owns its bytes (no mapping: a file rewritten or
        # truncated later cannot change, or fault, the values already read).
        code = "<u2" if dtype == "BF16" else DTYPES[dtype]
        bits = np.fromfile(stream, dtype=code, count=count)
    if bits.size != count:
        raise ArrayError(f"{path.name!r}: tensor {key!r} is cut short")
    return Loaded(bits.reshape(shape), "bf16" if dtype == "BF16" else "plain")


def shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Every tensor's name and shape, from the checked header alone."""
    with open(path, "rb") as stream:
        header, _ = _header(path, stream, stamp(path))
    return {k: tuple(e["shape"]) for k, e in header.items() if k != "__metadata__"}


def stored(path: Path, key: str) -> tuple[str, list[int], bytes]:
    """A tensor exactly as stored (dtype code, shape, bytes), through the same checked header
    as `load`: for copying a tensor without converting it."""
    with open(path, "rb") as stream:
        version = stamp(path)
        header, size = _header(path, stream, version)
        if key not in header or key == "__metadata__":
            raise ArrayError(f"{path.name!r} has no tensor {key!r}")
        entry = header[key]
        start, end = entry["data_offsets"]
        stream.seek(8 + size + start)
        data = stream.read(end - start)
    if len(data) != end - start:
        raise ArrayError(f"{path.name!r}: tensor {key!r} is cut short")
    return entry["dtype"], list(entry["shape"]), data


def _header(path: Path, stream: Any, version: Stamp) -> tuple[dict[str, Any], int]:
    """The file's checked JSON header and its length (parsed once per file version)."""
    name = str(path.resolve())
    known = _HEADERS.get(name)
    if known is not None and known[0] == version:
        return known[1], known[2]
    head = stream.read(8)
    if len(head) < 8:
        raise ArrayError(f"{path.name!r} is not a safetensors file (too short)")
    size = int.from_bytes(head, "little")
    if size > 100_000_000:
        raise ArrayError(f"{path.name!r} has a corrupt safetensors header")
    if size > version[0] - 8:
        raise ArrayError(f"{path.name!r} is truncated: its header alone needs {size} bytes "
                         f"after the first 8, and the file has {version[0] - 8}")
    header = _parsed(stream.read(size), path.name)
    _tiled(header, version[0] - 8 - size, path.name)
    if settled(version):
        _HEADERS[name] = (version, header, size)
    return header, size


def _parsed(raw: bytes, name: str) -> dict[str, Any]:
    """The JSON header as a dict of tensor entries (and `__metadata__`, a dict of strings),
    every entry's structure checked, so that reading it afterwards cannot fail on types."""
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_once)
    except _Twice as twice:
        raise ArrayError(f"{name!r} is ambiguous: its safetensors header names {twice} twice, "
                         "and readers differ on which entry they take; refused") from None
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


class _Twice(Exception):
    """A JSON object with a repeated key (json.loads would keep the last silently)."""


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Twice(repr(key))
        out[key] = value
    return out


def _tiled(header: dict[str, Any], data_size: int, name: str) -> None:
    """The tensors' byte ranges cover the data section exactly, without overlap or gap, as
    the safetensors format requires (its own library refuses other files)."""
    ranges = sorted(tuple(e["data_offsets"]) for k, e in header.items() if k != "__metadata__")
    at = 0
    for start, end in ranges:
        if start != at or end < start:
            raise ArrayError(f"{name!r} has a corrupt safetensors header: tensor data "
                             f"{'overlaps' if start < at else 'leaves a gap'} at byte {at}")
        at = end
    if at > data_size:
        raise ArrayError(f"{name!r} is truncated: its header describes {at} data bytes, the "
                         f"file holds {data_size} ({at - data_size} missing)")
    if at != data_size:
        raise ArrayError(f"{name!r} has a corrupt safetensors header: the tensors end at "
                         f"data byte {at}, and {data_size - at} more bytes follow them")


def _naturals(value: Any) -> bool:
    """A JSON list of integers >= 0 (true and false are no integers here)."""
    return isinstance(value, list) and all(type(v) is int and v >= 0 for v in value)


def _well_formed(entry: Any) -> bool:
    return (isinstance(entry, dict) and isinstance(entry.get("dtype"), str)
            and _naturals(entry.get("shape")) and _naturals(entry.get("data_offsets"))
            and len(entry["data_offsets"]) == 2)


def _entry(entry: dict[str, Any], key: str, data_size: int) -> tuple[str, list[int], int, int]:
    """(dtype, shape, start, end) of a well-formed entry whose dtype is supported and whose
    offsets hold exactly its elements inside the data section."""
    dtype, shape, (start, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype == "BF16":
        width = 2
    elif dtype in DTYPES:
        width = np.dtype(DTYPES[dtype]).itemsize
    else:
        raise ArrayError(f"tensor {key!r} has unsupported dtype {dtype[:20]!r}")
    if not start <= end <= data_size or end - start != math.prod(shape) * width:
        raise ArrayError(f"tensor {key!r} has corrupt data offsets")
    return dtype, shape, start, end


def record(path: Path) -> Any:
    """The `__metadata__` of the header as written (not checked: for reading an export's
    record back)."""
    with open(path, "rb") as stream:
        size = int.from_bytes(stream.read(8), "little")
        return json.loads(stream.read(size)).get("__metadata__")


# ---- writing ---------------------------------------------------------------------------------

CODES = {"float64": "F64", "float32": "F32", "float16": "F16", "uint16": "BF16",
         "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8"}
Entry = tuple[str, str, list[int], bytes]  # name, safetensors dtype code, shape, raw bytes


def write(stream: BinaryIO, arrays: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    """numpy arrays as tensors (uint16 arrays are bfloat16 bit patterns); ValueError for a
    dtype without a code in CODES."""
    entries = []
    for key, array in arrays.items():
        if array.dtype.name not in CODES:
            raise ValueError(f"array {key!r}: dtype {array.dtype} has no safetensors code here")
        data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
        entries.append((key, CODES[array.dtype.name], list(array.shape), data))
    write_entries(stream, entries, metadata)


def write_entries(stream: BinaryIO, entries: list[Entry], metadata: dict[str, str]) -> None:
    """Tensors given as stored, in order, as one safetensors file: the data section
    8-aligned and tiled exactly, as the format requires."""
    header: dict[str, Any] = {"__metadata__": metadata}
    offset = 0
    for name, code, shape, data in entries:
        header[name] = {"dtype": code, "shape": shape,
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data section starts 8-aligned
    stream.write(len(raw).to_bytes(8, "little"))
    stream.write(raw)
    for *_, data in entries:
        stream.write(data)


def write_new_file(target: Path, entries: list[Entry], metadata: dict[str, str]) -> None:
    """`write_entries` into a file that must not exist yet (FileExistsError otherwise)."""
    with open(target, "xb") as stream:
        write_entries(stream, entries, metadata)
