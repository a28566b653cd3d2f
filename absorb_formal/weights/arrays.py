"""`load("file", "key")`: read one matrix (or, for a bias, one vector) from a NumPy `.npz`
(`npz.py`), a `.safetensors` file (`safetensors.py`) or an ONNX model's initializer
(`onnx_file.py`), each reader imported when a file of its format is first read.

Values are kept exact: a float array is the dyadic rationals its bits denote (float16,
bfloat16 and float32 widen to float64 without rounding). Every array is checked here,
whatever its format: a real dtype, a matrix (or a vector, for a bias), every value finite.
A file is read once per version (`version`): its arrays are served again while no byte they
are read from has changed.
"""

from __future__ import annotations

import importlib
import sys
import weakref
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .common import ArrayError, Loaded, Stamp, settled, stamp

# suffix → the module whose `read(path, key, version)` reads it
READERS = {".npz": "npz", ".safetensors": "safetensors", ".onnx": "onnx_file"}


def reader(suffix: str) -> Any:
    """The module of `weights/` that reads files ending in `suffix` (one of READERS)."""
    return importlib.import_module(f"{__package__}.{READERS[suffix]}")


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
        loaded = _cached(path, key, reader(suffix).read)
    except ArrayError:
        raise
    except (OSError, ValueError, KeyError, EOFError) as error:
        if _onnx_error(error):  # its message is the user's
            raise ArrayError(str(error)) from None
        raise ArrayError(f"cannot read {path.name!r}: {error}") from None
    except (TypeError, NotImplementedError):  # np.load on a .npy named .npz, or a zip whose
        # members use a compression zipfile lacks
        raise ArrayError(f"cannot read {path.name!r}: not a NumPy .npz archive") from None
    if not vector:
        return _checked(loaded, path.name, key)
    # Checked as the 1×n matrix it is (finite values, real dtype), returned 1-D.
    row = _checked(replace(loaded, bits=_as_row(loaded.bits, path.name, key)), path.name, key)
    return replace(row, bits=row.bits[0])


def _onnx_error(error: Exception) -> bool:
    """Whether `error` is an `onnx_file.OnnxError` (that module is loaded once an ONNX model
    was read, and only then can one have been raised)."""
    onnx_file = sys.modules.get(f"{__package__}.onnx_file")
    return onnx_file is not None and isinstance(error, onnx_file.OnnxError)


def shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Every array's name and shape in a `.npz` or `.safetensors` file, from the headers
    alone (no value is read); raises ArrayError for a file `load` would refuse as a whole
    (not well-formed, or ambiguous)."""
    suffix = path.suffix.lower()
    if suffix not in (".npz", ".safetensors"):
        raise ArrayError(f"cannot list {path.name!r}: expected a .npz or .safetensors file")
    try:
        return dict(reader(suffix).shapes(path))
    except (OSError, ValueError, EOFError) as error:
        raise ArrayError(f"cannot read {path.name!r}: {error}") from None


@dataclass(frozen=True)
class Reread:
    """A loaded matrix whose values are not held: read again (and checked again) from its
    file when first asked for, and refused unless it is the tensor first read (its
    `Loaded.digest`). What a spec read with `hold=False` keeps of a `load(...)` once it is
    validated: a scan that decides its sublayers in other processes holds only their shapes
    (docs/scan.md)."""

    path: Path
    key: str
    transpose: bool
    shape: tuple[int, int]
    digest: str

    @classmethod
    def of(cls, path: Path, key: str, loaded: Loaded) -> Reread:
        """What to keep of `loaded` (read from `path` under `key`, transposed or not)."""
        shape = loaded.shape
        return cls(path, key, loaded.transpose, (int(shape[0]), int(shape[1])),
                   loaded.digest())

    def array(self) -> np.ndarray:
        loaded = load_array(self.path, self.key)
        if loaded.digest() != self.digest:
            raise ArrayError(f"array {self.key!r} in {self.path.name!r} changed since it was "
                             "read and checked: its values are not used (run again)")
        return (loaded.T if self.transpose else loaded).array()


def load_matrix(path: Path, key: str, vector: bool = False) -> np.ndarray:
    """`load_array(...).array()`: the checked values as a numpy array."""
    return load_array(path, key, vector).array()


# ---- one read per file version ----------------------------------------------------------------

# (path, stamp, key) -> the checked bits; weak: an array lives as long as a Matrix holds it,
# so that one spec loading the same key twice (or `load(...)` and `load(...).T`) reads it once.
_ARRAYS: weakref.WeakValueDictionary[tuple[str, Stamp, str], np.ndarray] = \
    weakref.WeakValueDictionary()
_KINDS: dict[tuple[str, Stamp, str], str] = {}


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
    from . import onnx_file

    model = onnx_file.model(path, stamp(path))
    return [(location, onnx_file.external_path(path.parent, location, path.name, ""))
            for location in model.externals]


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
