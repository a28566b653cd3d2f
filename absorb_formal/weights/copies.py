"""A weight file copied with some tensors replaced (`scan --export`): every other tensor is
copied bit for bit, as stored, in the input's format (`.npz` members, safetensors entries)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from . import safetensors


def write_replacing(root: Path, tensors: dict[str, tuple[str, tuple[int, ...]]],
                    replaced: dict[str, np.ndarray], target: Path) -> None:
    """A new file `target` (FileExistsError when it exists) holding every tensor of
    `tensors` (name → (its file under `root`, shape)), those in `replaced` with the new
    values (float64, float32, or uint16 bfloat16 bit patterns), then the new ones."""
    names = list(tensors) + [k for k in replaced if k not in tensors]
    if target.suffix == ".npz":  # members copied as stored; replaced ones written anew
        with open(target, "xb") as stream, zipfile.ZipFile(stream, "w") as archive:
            for name in names:
                if name in replaced:
                    member = io.BytesIO()
                    np.lib.format.write_array(member, np.ascontiguousarray(replaced[name]))
                    archive.writestr(f"{name}.npy", member.getvalue())
                else:
                    with zipfile.ZipFile(root / tensors[name][0]) as source:
                        archive.writestr(f"{name}.npy", source.read(f"{name}.npy"))
        return
    entries: list[safetensors.Entry] = []
    for name in names:
        if name in replaced:
            array = np.ascontiguousarray(replaced[name])
            entries.append((name, safetensors.CODES[array.dtype.name], list(array.shape),
                            array.astype(array.dtype.newbyteorder("<")).tobytes()))
        else:
            entries.append((name, *safetensors.stored(root / tensors[name][0], name)))
    safetensors.write_new_file(target, entries, {"format": "absorb_formal scan export 1"})
