"""`load("file", "key")`: read one matrix (or, for a bias, one vector) from a NumPy `.npz`,
a `.safetensors` file or an ONNX model's initializer (`onnx_file.py`).

Values are kept exact: a float array is the dyadic rationals its bits denote (float16,
bfloat16 and float32 widen to float64 without rounding). The safetensors format (8-byte
little-endian header length, JSON header, raw little-endian data) is read directly, so no
extra dependency is needed and a malformed file gives a clear message, not a crash. ONNX
models are parsed by the onnx package (an optional extra).
"""

from __future__ import annotations

import io
import json
import math
import time
import weakref
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..language.errors import did_you_mean, listed
from . import onnx_file
from .onnx_file import OnnxError


class ArrayError(ValueError):
    """A load that cannot give a finite real matrix; the message is for the user."""


_SAFETENSORS_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
    "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}


@dataclass(frozen=True)
class Loaded:
    """A loaded array, checked (real dtype, finite), kept as the bits its file holds.

    bfloat16 stays as its uint16 bit patterns and float16 as float16 until a value is asked
    for (`array()`): a rule that reads no weight (a never-rule on a LLaMA-size block) then
    costs no widening pass. `transpose` is applied as a view (no copy); every exact reader
    (`exactarray`) reads any memory layout."""

    bits: np.ndarray
    kind: str  # "bf16" (bits: uint16) or "plain" (bits: the array itself)
    transpose: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        shape = tuple(int(n) for n in self.bits.shape)
        return shape[::-1] if self.transpose else shape

    @property
    def T(self) -> Loaded:  # noqa: N802 - the spec's own spelling
        return replace(self, transpose=not self.transpose)

    def array(self) -> np.ndarray:
        """The values: bfloat16 and float16 widened to float32, bool to int64, exactly (each
        float is the same dyadic rational after widening)."""
        bits = self.bits
        if self.kind == "bf16":  # bfloat16 is the top half of a float32
            values = np.left_shift(bits, 16, dtype=np.uint32).view(np.float32)
        elif bits.dtype.kind == "f" and bits.dtype.itemsize < 4:
            values = bits.astype(np.float32)  # float16 widens exactly
        elif bits.dtype.kind == "b":
            values = bits.astype(np.int64)
        else:
            values = bits
        return values.T if self.transpose else values


def load_array(path: Path, key: str, vector: bool = False) -> Loaded:
    """The array stored under `key`, checked (a real matrix, every value finite), its values
    not yet widened; raises ArrayError otherwise.

    With `vector` (a bias, docs/rules.md §8): a 1-D array, or a 1×n or n×1 one, returned 1-D.
    Reshaping moves no value, so exactness is kept. A file is read once per version: its
    header and arrays are served again while its (size, mtime, ctime, inode) is unchanged."""
    if not path.is_file():
        raise ArrayError(f"cannot load: file {str(path)!r} does not exist")
    suffix = path.suffix.lower()
    if suffix not in READERS:
        raise ArrayError(f"cannot load {path.name!r}: expected a .npz, .safetensors or .onnx "
                         "file")
    try:
        loaded = _cached(path, key, READERS[suffix])
    except ArrayError:
        raise
    except OnnxError as error:
        raise ArrayError(str(error)) from None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as error:
        raise ArrayError(f"cannot read {path.name!r}: {error}") from None
    except (TypeError, NotImplementedError):  # np.load on a .npy named .npz, or a zip whose
        # members use a compression zipfile lacks
        raise ArrayError(f"cannot read {path.name!r}: not a NumPy .npz archive") from None
    if not vector:
        return _checked(loaded, path.name, key)
    # Checked as the 1×n matrix it is (finite values, real dtype), returned 1-D.
    row = _checked(replace(loaded, bits=_as_row(loaded.bits, path.name, key)), path.name, key)
    return replace(row, bits=row.bits[0])


def shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Every array's name and shape in a `.npz` or `.safetensors` file, from the headers
    alone (no value is read); raises ArrayError for a file `load` would refuse as a whole
    (not well-formed, or ambiguous)."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".safetensors":
            with open(path, "rb") as stream:
                header, _ = _header(path, stream, stamp(path))
            return {k: tuple(e["shape"]) for k, e in header.items() if k != "__metadata__"}
        if suffix == ".npz":
            with open(path, "rb") as stream, zipfile.ZipFile(stream) as archive:
                names = archive.namelist()
                _unambiguous_npz(names, path.name)
                out = {}
                for name in names:
                    with archive.open(name) as member:
                        version = np.lib.format.read_magic(member)
                        read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                else np.lib.format.read_array_header_2_0)
                        out[name[:-4]] = tuple(read(member)[0])
                return out
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        raise ArrayError(f"cannot read {path.name!r}: {error}") from None
    raise ArrayError(f"cannot list {path.name!r}: expected a .npz or .safetensors file")


def stored(path: Path, key: str) -> tuple[str, list[int], bytes]:
    """A safetensors tensor exactly as stored (dtype code, shape, bytes), through the same
    checked header as `load`: for copying a tensor without converting it."""
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


def load_matrix(path: Path, key: str, vector: bool = False) -> np.ndarray:
    """`load_array(...).array()`: the checked values as a numpy array."""
    return load_array(path, key, vector).array()


# ---- one read per file version ----------------------------------------------------------------

Stamp = tuple[int, ...]  # (size, mtime, ctime, inode, device) per file read, concatenated
# (path, stamp, key) -> the checked bits; weak: an array lives as long as a Matrix holds it,
# so that one spec loading the same key twice (or `load(...)` and `load(...).T`) reads it once.
_ARRAYS: weakref.WeakValueDictionary[tuple[str, Stamp, str], np.ndarray] = \
    weakref.WeakValueDictionary()
_KINDS: dict[tuple[str, Stamp, str], str] = {}
_HEADERS: dict[str, tuple[Stamp, dict[str, Any], int]] = {}  # safetensors: header, its size


def stamp(path: Path) -> Stamp:
    """What changes when a file's bytes do: size, mtime, ctime (set by the kernel on every
    write, not settable by a user), inode and device."""
    st = path.stat()
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def version(path: Path) -> Stamp:
    """`stamp(path)`, followed for an ONNX model with external data by the stamp of each
    external file (in `external_files` order; a missing one as -1s): what changes when any
    byte that the model's initializers are read from does."""
    out = stamp(path)
    for _, external in external_files(path):
        try:
            out += stamp(external)
        except OSError:
            out += (-1,) * 5
    return out


def external_files(path: Path) -> list[tuple[str, Path]]:
    """(location as the model writes it, path) of every external data file of an ONNX
    model's initializers, sorted by location; [] for every other file."""
    if path.suffix.lower() != ".onnx":
        return []
    model = _onnx_model(path, stamp(path))
    return [(location, onnx_file.external_path(path.parent, location, path.name, ""))
            for location in model.externals]


SETTLED_NS = 2_000_000_000


def settled(before: Stamp) -> bool:
    """Every file of a version last changed at least 2 s ago: where timestamps are coarse (a
    few ms per tick), a same-size rewrite within one tick keeps its stamp, so a younger file
    is never cached."""
    now = time.time_ns()
    return all(now - ctime > SETTLED_NS for ctime in before[2::5])


def _cached(path: Path, key: str, read: Any) -> Loaded:
    before = version(path)
    name = (str(path.resolve()), before, key)
    found = _ARRAYS.get(name)
    if found is not None:
        return Loaded(found, _KINDS[name])
    loaded = read(path, key, before)
    if version(path) == before and settled(before):  # not changed while read: serve it again
        loaded.bits.flags.writeable = False  # shared: nobody may change it
        _ARRAYS[name] = loaded.bits
        _KINDS[name] = loaded.kind
        weakref.finalize(loaded.bits, _KINDS.pop, name, None)  # both entries go together
    return loaded


def _as_row(array: np.ndarray, file: str, key: str) -> np.ndarray:
    """A vector stored 1-D, 1×n or n×1 (Hugging Face stores biases 1-D) as a 1×n matrix."""
    if array.ndim == 1 or (array.ndim == 2 and 1 in array.shape):
        return array.reshape(1, -1)
    raise ArrayError(f"array {key!r} in {file!r} has shape {tuple(array.shape)}, not a vector "
                     "(a 1-D array, or 1×n or n×1)")


def _from_npz(path: Path, key: str, _: Stamp) -> Loaded:
    """Member `KEY.npy` of the zip, and only if no other member could be read as `key`."""
    with open(path, "rb") as stream, zipfile.ZipFile(stream) as archive:
        names = archive.namelist()
        arrays = sorted(n[:-4] for n in names if n.endswith(".npy"))
        if key + ".npy" not in names:
            raise ArrayError(f"{path.name!r} has no array {key!r}"
                             f"{did_you_mean(key, arrays)} (it has: {listed(arrays)})")
        _unambiguous_npz(names, path.name)
        if key in names:  # numpy's own np.load(...)[key] would read this member instead
            raise ArrayError(f"{path.name!r} is ambiguous: it has both a member {key!r} and "
                             f"{key + '.npy'!r}, which readers take for array {key!r} "
                             "differently; refused")
        blob = archive.read(key + ".npy")
    return Loaded(_npy(blob, path.name, key), "plain")


def _unambiguous_npz(names: list[str], file: str) -> None:
    """An .npz whose arrays each have one meaning: every member is `NAME.npy`, and no name
    occurs twice (a zip may store a name twice; readers differ on which copy they read)."""
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ArrayError(f"{file!r} is ambiguous: member {twice[0]!r} occurs "
                         f"{names.count(twice[0])} times; refused")
    other = sorted(n for n in names if not n.endswith(".npy"))
    if other:
        raise ArrayError(f"{file!r} is ambiguous: member {other[0]!r} is not a .npy array, and "
                         "readers differ on whether it stands for an array; refused")


def _npy(blob: bytes, file: str, key: str) -> np.ndarray:
    """A `.npy` member, with exactly the data bytes its header announces (numpy ignores
    trailing bytes; another reader might not)."""
    stream = io.BytesIO(blob)
    version = np.lib.format.read_magic(stream)
    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                   else np.lib.format.read_array_header_2_0)
    shape, _, dtype = read_header(stream)
    if dtype.hasobject:
        raise ArrayError(f"array {key!r} in {file!r} holds Python objects, not numbers")
    expected = stream.tell() + math.prod(shape) * dtype.itemsize
    if len(blob) != expected:
        raise ArrayError(f"array {key!r} in {file!r} has {len(blob) - stream.tell()} data "
                         f"bytes, its header announces {expected - stream.tell()}")
    stream.seek(0)
    return np.asarray(np.lib.format.read_array(stream, allow_pickle=False))


def _from_safetensors(path: Path, key: str, version: Stamp) -> Loaded:
    with open(path, "rb") as stream:
        header, size = _header(path, stream, version)
        if key not in header or key == "__metadata__":
            names = sorted(k for k in header if k != "__metadata__")
            raise ArrayError(f"{path.name!r} has no tensor {key!r}"
                             f"{did_you_mean(key, names)} (it has: {listed(names)})")
        dtype, shape, start, end = _safetensors_entry(header[key], key, version[0] - 8 - size)
        count = math.prod(shape)
        stream.seek(8 + size + start)
        # One read from file to an array that owns its bytes (no mapping: a file rewritten or
        # truncated later cannot change, or fault, the values already read).
        code = "<u2" if dtype == "BF16" else _SAFETENSORS_DTYPES[dtype]
        bits = np.fromfile(stream, dtype=code, count=count)
    if bits.size != count:
        raise ArrayError(f"{path.name!r}: tensor {key!r} is cut short")
    return Loaded(bits.reshape(shape), "bf16" if dtype == "BF16" else "plain")


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
    header = _safetensors_header(stream.read(size), path.name)
    _tiled(header, version[0] - 8 - size, path.name)
    if settled(version):
        _HEADERS[name] = (version, header, size)
    return header, size


def _safetensors_header(raw: bytes, name: str) -> dict[str, Any]:
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


def _onnx_model(path: Path, version: Stamp) -> onnx_file.Model:
    """The parsed model, kept for one file version at a time (a model can be large; a spec
    loads many initializers of one model)."""
    name = str(path.resolve())
    known = _ONNX.get(name)
    if known is not None and known[0] == version:
        return known[1]
    model = onnx_file.parse(path)
    if settled(version):
        _ONNX.clear()
        _ONNX[name] = (version, model)
    return model


_ONNX: dict[str, tuple[Stamp, onnx_file.Model]] = {}


def _from_onnx(path: Path, key: str, version: Stamp) -> Loaded:
    model = _onnx_model(path, version[:5])
    bits, kind = onnx_file.tensor_bits(onnx_file.tensor_of(model, key), model, key)
    return Loaded(bits, kind)


READERS = {".npz": _from_npz, ".safetensors": _from_safetensors, ".onnx": _from_onnx}

# IEEE formats: the exponent field's mask, all ones for NaN and the infinities.
_EXPONENT = {("bf16", 2): 0x7F80, ("f", 2): 0x7C00, ("f", 4): 0x7F80_0000,
             ("f", 8): 0x7FF0_0000_0000_0000}
_CHUNK = 1 << 18  # elements per pass of the finiteness test (stays in cache)


def _checked(loaded: Loaded, file: str, key: str) -> Loaded:
    bits = loaded.bits
    kind = "bf16" if loaded.kind == "bf16" else bits.dtype.kind
    if kind not in "fiub" and kind != "bf16":
        raise ArrayError(f"array {key!r} in {file!r} has dtype {bits.dtype}, not real numbers")
    if bits.ndim != 2:
        raise ArrayError(f"array {key!r} in {file!r} has shape {tuple(bits.shape)}, "
                         "not a matrix")
    if kind == "b" and (bits.view(np.uint8) > 1).any():  # numpy reads any non-zero as True
        raise ArrayError(f"array {key!r} in {file!r} holds a bool byte that is neither 0 nor 1")
    if kind in ("f", "bf16"):
        bad = _first_nonfinite(bits, _EXPONENT.get((kind, bits.dtype.itemsize)))
        if bad is not None:
            row, column = np.unravel_index(bad, bits.shape)
            raise ArrayError(f"array {key!r} in {file!r} holds a non-finite value "
                             f"at [{row}, {column}]")
    return loaded


def _first_nonfinite(bits: np.ndarray, mask: int | None) -> int | None:
    """The flat (row-major) index of the first NaN or infinity, None if all are finite.

    IEEE formats are tested on their bit patterns, a chunk at a time (no float copy, no
    whole-array temporary): a value is finite iff its exponent field is not all ones. Other
    formats (long double) go through np.isfinite."""
    flat = np.ascontiguousarray(bits).reshape(-1)
    if mask is None:
        finite = np.isfinite(flat)
        return None if finite.all() else int(np.argmin(finite))
    unsigned = np.dtype(f"u{flat.dtype.itemsize}").newbyteorder(flat.dtype.byteorder)
    words = flat.view(unsigned)
    scratch = np.empty(min(_CHUNK, words.size), dtype=words.dtype)
    for begin in range(0, words.size, _CHUNK):
        part = scratch[:min(_CHUNK, words.size - begin)]
        np.bitwise_and(words[begin:begin + _CHUNK], mask, out=part)
        if part.max() == mask:
            return begin + int(np.argmax(part == mask))
    return None
