"""NumPy `.npz` archives: arrays read exactly as stored (`load(...)`), and written with the
export record as the JSON string of the 0-d array `__absorb_formal__`.

An archive is read only when every array has one meaning: each member is `NAME.npy`, no name
occurs twice, and a member holds exactly the data bytes its header announces (numpy and other
readers disagree on the rest). No pickle is ever loaded.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..language.errors import did_you_mean, listed
from .common import ArrayError, Loaded, Stamp

RECORD = "__absorb_formal__"  # the member holding the export record


def read(path: Path, key: str, _: Stamp) -> Loaded:
    """Member `KEY.npy` of the zip, and only if no other member could be read as `key`."""
    try:
        with open(path, "rb") as stream, zipfile.ZipFile(stream) as archive:
            names = archive.namelist()
            arrays = sorted(n[:-4] for n in names if n.endswith(".npy"))
            if key + ".npy" not in names:
                raise ArrayError(f"{path.name!r} has no array {key!r}"
                                 f"{did_you_mean(key, arrays)} (it has: {listed(arrays)})")
            _unambiguous(names, path.name)
            if key in names:  # numpy's own np.load(...)[key] would read this member instead
                raise ArrayError(f"{path.name!r} is ambiguous: it has both a member {key!r} "
                                 f"and {key + '.npy'!r}, which readers take for array {key!r} "
                                 "differently; refused")
            blob = archive.read(key + ".npy")
    except zipfile.BadZipFile as error:  # said as `load` says any unreadable file
        raise ValueError(str(error)) from None
    return Loaded(_npy(blob, path.name, key), "plain")


def shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Every array's name and shape, from the members' headers alone (ValueError for an
    archive that `read` refuses as a whole)."""
    try:
        with open(path, "rb") as stream, zipfile.ZipFile(stream) as archive:
            names = archive.namelist()
            _unambiguous(names, path.name)
            out = {}
            for name in names:
                with archive.open(name) as member:
                    version = np.lib.format.read_magic(member)
                    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                   else np.lib.format.read_array_header_2_0)
                    out[name[:-4]] = tuple(read_header(member)[0])
            return out
    except zipfile.BadZipFile as error:
        raise ValueError(str(error)) from None


def _unambiguous(names: list[str], file: str) -> None:
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


# ---- writing ---------------------------------------------------------------------------------

def write(stream: BinaryIO, arrays: dict[str, np.ndarray], record: dict[str, str]) -> None:
    """The arrays, and `record` as the JSON string of the 0-d array RECORD."""
    members: dict[str, Any] = {**arrays, RECORD: np.array(json.dumps(record))}
    np.savez(stream, **members)


def record(path: Path) -> Any:
    """The JSON value of the RECORD member, None when there is none."""
    with open(path, "rb") as stream, np.load(stream, allow_pickle=False) as archive:
        return json.loads(str(archive[RECORD])) if RECORD in archive.files else None
