"""What the readers of `weights/` share: `Loaded`, an array as the bits its file holds;
`ArrayError`, a file or key that `load(...)` refuses (the message is for the user); and a
file's `stamp`, which changes when its bytes do (a file read is served again only while its
stamp is unchanged and it has `settled`)."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

Stamp = tuple[int, ...]  # (size, mtime, ctime, inode, device) per file read, concatenated
SETTLED_NS = 2_000_000_000


class CheckpointError(ValueError):
    """A checkpoint that cannot be read: the message names the file, the tensor and what was
    expected (`scanner.found.ScanError` is this class)."""


class ArrayError(ValueError):
    """A load that cannot give a finite real matrix; the message is for the user."""


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

    def digest(self) -> str:
        """SHA-256 of the array as stored: its kind, dtype, shape and bytes (the transpose
        flag aside): the same for the same tensor read from any file format."""
        bits = self.bits
        found = hashlib.sha256(f"{self.kind} {bits.dtype.str} {list(bits.shape)}\n".encode())
        found.update(memoryview(bits if bits.flags.c_contiguous else bits.copy(order="C")
                                ).cast("B"))
        return found.hexdigest()

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


def stamp(path: Path) -> Stamp:
    """What changes when a file's bytes do: size, mtime, ctime (set by the kernel on every
    write, not settable by a user), inode and device."""
    st = path.stat()
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def settled(before: Stamp) -> bool:
    """Every file of a version last changed at least 2 s ago: where timestamps are coarse (a
    few ms per tick), a same-size rewrite within one tick keeps its stamp, so a younger file
    is never cached."""
    now = time.time_ns()
    return all(now - ctime > SETTLED_NS for ctime in before[2::5])
