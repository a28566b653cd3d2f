"""The checker's weight files of every format it reads, for `reading.py`: `.npz` and
`.safetensors` through `files.py`, ONNX models through `onnx_file.py`.

An ONNX model whose initializers keep data in external files depends on more than its own
bytes, so for it:
- `version` is the model's stamp followed by each external file's (a missing one as -1s):
  what changes when any byte its arrays are read from does;
- `sha256_file` is the SHA-256 of the text `onnx model with external data`, `model HEX`
  (the model's bytes), then `external HEX LOCATION` for each external file sorted by
  location, each line ending in a newline (the prover's `proofs.sha256_file` writes the
  same). A model without external data is hashed as its bytes, like every other file.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from . import files, onnx_file
from .files import Dyadic, FileError, stamp

Version = tuple[int, ...]  # (size, mtime, ctime, inode, device) per file, concatenated
_HASHES: dict[str, tuple[Version, str]] = {}


def settled(version: Version) -> bool:
    """Every file of the version last changed at least 2 s ago (`files.settled`)."""
    now = time.time_ns()
    return all(now - ctime > 2_000_000_000 for ctime in version[2::5])


def externals(path: Path) -> list[tuple[str, Path]]:
    """An ONNX model's external data files, by location ([] for every other file)."""
    if path.suffix.lower() != ".onnx":
        return []
    main = stamp(path)
    return onnx_file.external_paths(path, main, settled(main))


def version(path: Path) -> Version:
    out: Version = stamp(path)
    for _, external in externals(path):
        try:
            out += stamp(external)
        except OSError:
            out += (-1,) * 5
    return out


def sha256_file(path: Path) -> str:
    if path.suffix.lower() != ".onnx":
        return files.sha256_file(path)
    before, name = version(path), str(path.resolve())
    known = _HASHES.get(name)
    if known is not None and known[0] == before:
        return known[1]
    found = externals(path)
    digest = files.sha256_file(path)
    if found:
        lines = ["onnx model with external data", f"model {digest}"]
        lines += [f"external {files.sha256_file(file)} {location}" for location, file in found]
        digest = hashlib.sha256("".join(f"{line}\n" for line in lines).encode()).hexdigest()
    if version(path) == before and settled(before):  # not changed while hashed, nor just before
        _HASHES[name] = (before, digest)
    return digest


def read_array(path: Path, key: str) -> Dyadic:
    """The array `key` of a `.npz` or `.safetensors` file, or the initializer `key` of an
    `.onnx` model, exactly."""
    if path.suffix.lower() != ".onnx":
        return files.read_array(path, key)
    if not path.is_file():
        raise FileError("does not exist")
    main = stamp(path)
    try:
        return onnx_file.read(path, key, main, settled(main))
    except FileError:
        raise
    except (ValueError, OSError, KeyError, TypeError) as error:
        raise FileError(f"cannot be read: {error}") from None
