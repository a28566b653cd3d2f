"""The checker's own reading of weight files: exact values from raw bytes, and SHA-256.

Nothing here comes from the prover or from NumPy's float conversions: every float is decoded
from its bit fields with integer operations (sign, biased exponent, fraction → an integer
mantissa and a power of two), so a value is exactly the dyadic rational its bits denote.

- `.npz`: a zip of `.npy` files; the `.npy` header (magic, version, a Python-literal dict
  with `descr`, `fortran_order`, `shape`) is parsed here.
- `.safetensors`: 8-byte little-endian header length, a JSON header, then raw data at the
  header's offsets.
(ONNX models: `onnx_file.py`, which decodes with `decode` here; `weights.py` serves both.)

Dtypes: float16, bfloat16, float32, float64, x86 80-bit extended (`<f16`, `<f12`), signed
and unsigned integers of 1, 2, 4 or 8 bytes, bool. NaN and infinities are refused. A `<f16`
array means "this platform's long double" (numpy's own convention, which the prover follows):
on x86 the 80-bit extended value in the first 10 bytes, the rest padding that numpy leaves
uninitialised (so it is ignored, not refused: refusing it made valid certificates of genuine
x86 files invalid). The checker reads it only where the platform's long double is x86
extended, and refuses entries that are not canonical x86 values (an explicit integer bit
disagreeing with the exponent), which catches nearly every value of an IEEE binary128 file
(aarch64, POWER) moved to x86 — a file that numpy itself would misread there.
"""

from __future__ import annotations

import ast
import hashlib
import json
import struct
import sys
import time
import zipfile
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from .shape import json_integer

NPY_HEADER_LIMIT = 10000  # numpy's default max_header_size


class FileError(ValueError):
    """A weight file the checker cannot read exactly; the message says why."""


Stamp = tuple[int, int, int, int, int]
_HASHES: dict[str, tuple[Stamp, str]] = {}
_HEADERS: dict[str, tuple[Stamp, Any, int]] = {}  # safetensors: parsed header, its length


def stamp(path: Path) -> Stamp:
    """What changes when a file's bytes do: size, mtime, ctime (set by the kernel on every
    write; no user can set it), inode and device."""
    st = path.stat()
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def settled(version: Stamp) -> bool:
    """Last changed at least 2 s ago: where timestamps are coarse, a same-size rewrite within
    one clock tick keeps the stamp, so a younger file is read again every time."""
    return time.time_ns() - version[2] > 2_000_000_000


def sha256_file(path: Path) -> str:
    """SHA-256 of a file's bytes (streamed: weight files can be gigabytes), computed once per
    version of the file (`stamp`): the certificates of one check share their weight files."""
    before, name = stamp(path), str(path.resolve())
    known = _HASHES.get(name)
    if known is not None and known[0] == before:
        return known[1]
    h = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            h.update(chunk)
    digest = h.hexdigest()
    if stamp(path) == before and settled(before):  # not changed while hashed, nor just before
        _HASHES[name] = (before, digest)
    return digest


@dataclass(frozen=True)
class Dyadic:
    """An array of exact values (-1)^neg · mag · 2^exp, element-wise (integers: exp = 0)."""

    neg: np.ndarray  # bool
    mag: np.ndarray  # uint64
    exp: np.ndarray  # int64

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(n) for n in self.mag.shape)

    @property
    def T(self) -> Dyadic:  # noqa: N802 - the spec's own spelling of a transpose
        return Dyadic(self.neg.T, self.mag.T, self.exp.T)

    def reshape(self, shape: tuple[int, ...]) -> Dyadic:
        return Dyadic(self.neg.reshape(shape), self.mag.reshape(shape), self.exp.reshape(shape))

    def fractions(self, index: tuple[int | slice, ...] | slice | int = ()) -> list:
        """Exact `Fraction`s of `self[index]` (nested lists like `tolist`)."""
        neg, mag, exp = (np.asarray(a[index]) for a in (self.neg, self.mag, self.exp))
        flat = [_fraction(n, m, e) for n, m, e in
                zip(neg.ravel().tolist(), mag.ravel().tolist(), exp.ravel().tolist(),
                    strict=True)]
        out = np.empty(len(flat), dtype=object)
        out[:] = flat
        return out.reshape(mag.shape).tolist()


    def row(self, i: int) -> list[Fraction]:
        return self.fractions(i)

    def column(self, j: int) -> list[Fraction]:
        return self.fractions((slice(None), j))

    def rows(self) -> list[list[Fraction]]:
        return self.fractions()

    def residues(self, p: int, index: tuple[int, ...] | slice | int = ()) -> list[int]:
        """`self[index]` (1-D) mod p, from the exact (mantissa, exponent) pairs."""
        if p % 2 == 0:
            raise FileError("residues need an odd modulus")
        neg, mag, exp = (np.asarray(a[index]).ravel() for a in (self.neg, self.mag, self.exp))
        if p < 1 << 31:  # vectorised, in exact integer arithmetic
            return Dyadic(neg, mag, exp).residue_matrix(p).tolist()
        return [(-1 if n else 1) * m * pow(2, e, p) % p
                for n, m, e in zip(neg.tolist(), mag.tolist(), exp.tolist(), strict=True)]

    def nonzero(self) -> np.ndarray:
        """Which entries are non-zero (mag ≠ 0), as a bool array of the same shape."""
        return np.asarray(self.mag != 0)

    def residue_block(self, p: int, rows: list[int] | None, cols: list[int] | None
                      ) -> np.ndarray:
        """The entries on rows × cols (None: all) mod p, as `residue_matrix`."""
        index = np.ix_(range(self.shape[0]) if rows is None else rows,
                       range(self.shape[1]) if cols is None else cols)
        return Dyadic(self.neg[index], self.mag[index], self.exp[index]).residue_matrix(p)

    def residue_matrix(self, p: int) -> np.ndarray:
        """Every entry mod an odd prime p < 2^31 (int64), vectorised: mag mod p times 2^exp mod
        p, from a table over the few exponents that occur; a band of entries at a time (the
        only full-size array is the result)."""
        if p % 2 == 0 or p >= 2**31:
            raise FileError("residues need an odd modulus below 2^31")
        out = np.empty(self.mag.shape, dtype=np.int64)
        if not self.exp.size:
            return out
        low = int(self.exp.min())
        table = np.array([pow(2, e, p) for e in range(low, int(self.exp.max()) + 1)],
                         dtype=np.int64)
        flat_out, neg, mag, exp = (a.reshape(-1) for a in (out, self.neg, self.mag, self.exp))
        for start in range(0, flat_out.size, _BAND):
            part = slice(start, start + _BAND)
            whole = (mag[part] % np.uint64(p)).astype(np.int64)
            whole = np.where(neg[part], (p - whole) % p, whole)
            flat_out[part] = whole * table[exp[part].astype(np.int64) - low] % p
        return out


_BAND = 1 << 20  # entries decoded or reduced at once


def _fraction(neg: bool, mag: int, exp: int) -> Fraction:
    value = Fraction(mag << exp) if exp >= 0 else Fraction(mag, 1 << -exp)
    return -value if neg else value


# ---- decoding raw bits ---------------------------------------------------------------------

# name → (total bits, exponent bits, fraction bits) of the IEEE binary formats
_IEEE = {"f2": (16, 5, 10), "bf16": (16, 8, 7), "f4": (32, 8, 23), "f8": (64, 11, 52)}


def _ieee(bits: np.ndarray, total: int, ebits: int, fbits: int) -> Dyadic:
    """IEEE binary: sign | biased exponent | fraction; subnormals have exponent 1 − bias.
    Decoded a band at a time into compact arrays (mag uint32 up to 24 bits of mantissa,
    exp int16: every binary format's exponents fit), so that an OPT-size matrix costs
    about 7 bytes an entry, not 17, and no full-size temporaries."""
    bias = (1 << (ebits - 1)) - 1
    flat = bits.reshape(-1)
    neg = np.empty(flat.shape, dtype=bool)
    mag = np.empty(flat.shape, dtype=np.uint32 if fbits < 32 else np.uint64)
    exp = np.empty(flat.shape, dtype=np.int16)
    for start in range(0, flat.size, _BAND):
        part = flat[start:start + _BAND].astype(np.uint64)
        field = ((part >> np.uint64(fbits)) & np.uint64((1 << ebits) - 1)).astype(np.int64)
        fraction = part & np.uint64((1 << fbits) - 1)
        if (field == (1 << ebits) - 1).any():
            raise FileError("holds a NaN or an infinity")
        normal = field != 0
        mag[start:start + _BAND] = np.where(normal, fraction | np.uint64(1 << fbits), fraction)
        exp[start:start + _BAND] = np.where(normal, field, 1) - bias - fbits
        neg[start:start + _BAND] = (part >> np.uint64(total - 1)).astype(bool)
    return Dyadic(neg.reshape(bits.shape), mag.reshape(bits.shape), exp.reshape(bits.shape))


def _x86_extended(raw: np.ndarray) -> Dyadic:
    """x86 80-bit extended in the first 10 bytes of each item: a 64-bit mantissa with an
    explicit integer bit, then sign | 15-bit exponent (bias 16383)."""
    mag = raw[:, :8].copy().view("<u8")[:, 0].astype(np.uint64)
    top = raw[:, 8:10].copy().view("<u2")[:, 0].astype(np.int64)
    field, neg = top & 0x7FFF, (top >> 15).astype(bool)
    if (field == 0x7FFF).any():
        raise FileError("holds a NaN or an infinity")
    integer_bit = (mag >> np.uint64(63)).astype(bool)
    if (integer_bit != (field != 0)).any():
        raise FileError("is not in the x86 80-bit long double layout (an integer bit "
                        "disagrees with its exponent): refused rather than guessed")
    exp = np.where(field != 0, field, 1) - 16383 - 63
    return Dyadic(neg, mag, exp.astype(np.int64))


def _integers(raw: np.ndarray, signed: bool, order: str) -> Dyadic:
    width = raw.shape[1]
    if width not in (1, 2, 4, 8):
        raise FileError(f"has {width}-byte integers (1, 2, 4 or 8 are read)")
    values = raw.copy().view(f"{order}{'i' if signed else 'u'}{width}")[:, 0]
    neg = values < 0
    if signed:
        # |INT64_MIN| = 2^63 fits in uint64: negate in unsigned arithmetic (two's complement)
        wide = values.astype(np.int64).view(np.uint64)
        mag = np.where(neg, (~wide) + np.uint64(1), wide)
    else:
        mag = values.astype(np.uint64)
    return Dyadic(neg, mag, np.zeros(values.shape, dtype=np.int64))


def decode(data: bytes, kind: str, width: int, order: str, count: int) -> Dyadic:
    """`count` items of a dtype (`kind` f/i/u/b/bf16, `width` bytes, byte `order` < or >)."""
    if len(data) != count * width:
        raise FileError(f"holds {len(data)} data bytes, {count * width} expected")
    raw = np.frombuffer(data, dtype=np.uint8).reshape(count, width)
    if order == ">":
        raw = raw[:, ::-1]  # from here on, every item is little-endian
    if kind == "b" and width == 1:
        if (raw > 1).any():
            raise FileError("holds a bool byte that is neither 0 nor 1")
        return _integers(raw, False, "<")
    if kind in ("i", "u"):
        return _integers(raw, kind == "i", "<")
    if kind == "bf16" or (kind == "f" and width in (2, 4, 8)):
        name = "bf16" if kind == "bf16" else f"f{width}"
        total, ebits, fbits = _IEEE[name]
        bits = raw.copy().view(f"<u{width}")[:, 0]
        return _ieee(bits, total, ebits, fbits)
    if kind == "f" and width in (12, 16) and order == "<":
        if np.finfo(np.longdouble).nmant != 63:
            raise FileError("holds long doubles, which the checker reads only where the "
                            "platform's long double is x86 80-bit extended")
        return _x86_extended(raw)
    raise FileError(f"has dtype {kind}{width} ({order}), which the checker does not read")


# ---- .npy / .npz ---------------------------------------------------------------------------

def _npy(blob: bytes) -> Dyadic:
    if blob[:6] != b"\x93NUMPY" or len(blob) < 10:
        raise FileError("is not a .npy array (bad magic)")
    major = blob[6]
    if blob[7] != 0:  # numpy writes (and reads) only versions 1.0, 2.0 and 3.0
        raise FileError(f"has .npy version {major}.{blob[7]}, which numpy does not write")
    if major == 1:
        (size,), start = struct.unpack("<H", blob[8:10]), 10
    elif major in (2, 3):
        (size,), start = struct.unpack("<I", blob[8:12]), 12
    else:
        raise FileError(f"has .npy version {major}, which the checker does not read")
    if size > NPY_HEADER_LIMIT:  # numpy's own reader refuses these (max_header_size)
        raise FileError(f"has a .npy header of {size} bytes (over {NPY_HEADER_LIMIT})")
    try:
        header = ast.literal_eval(blob[start:start + size].decode("utf-8" if major == 3
                                                                   else "latin1"))
    except (ValueError, SyntaxError, UnicodeDecodeError) as error:
        raise FileError(f"has a malformed .npy header: {error}") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise FileError("has a malformed .npy header")
    descr, fortran, shape = header["descr"], header["fortran_order"], header["shape"]
    if not (isinstance(descr, str) and isinstance(fortran, bool) and isinstance(shape, tuple)
            and all(isinstance(n, int) and n >= 0 for n in shape)):
        raise FileError(f"has an unsupported .npy header {header!r}")
    order, kind, width = _descr(descr)
    count = int(np.prod(shape, dtype=object)) if shape else 1
    values = decode(blob[start + size:], kind, width, order, count)
    if fortran:
        return values.reshape(tuple(reversed(shape))).T
    return values.reshape(shape)


def _descr(descr: str) -> tuple[str, str, int]:
    """`<f8` → ("<", "f", 8); `|b1` / `|u1` have no byte order."""
    if len(descr) < 3 or descr[0] not in "<>|=" or descr[1] not in "fiub" \
            or not (descr[2:].isascii() and descr[2:].isdigit()):
        raise FileError(f"has dtype {descr!r}, not real numbers the checker reads")
    if descr[0] == "=":  # native order, as numpy reads it: this machine's
        return ("<" if sys.byteorder == "little" else ">"), descr[1], int(descr[2:])
    return ("<" if descr[0] == "|" else descr[0]), descr[1], int(descr[2:])


def _from_npz(path: Path, key: str) -> Dyadic:
    """Array `key` is member `KEY.npy`. A file that another reader could read another way is
    refused: a name stored twice, a member not named `*.npy` (numpy's `np.load(f)[key]` takes
    a member named plainly `key` before `KEY.npy`), or `key` itself a member's name."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            if key + ".npy" not in names:
                arrays = sorted(n[:-4] for n in names if n.endswith(".npy"))
                raise FileError(f"has no array {key!r} (it has: "
                                f"{', '.join(arrays[:10]) or 'none'})")
            seen: set[str] = set()
            for name in names:
                if name in seen:
                    raise FileError(f"is ambiguous: member {name!r} is stored twice")
                seen.add(name)
                if not name.endswith(".npy"):
                    raise FileError(f"is ambiguous: member {name!r} is not a .npy array")
            if key in seen:
                raise FileError(f"is ambiguous: members {key!r} and {key + '.npy'!r} both "
                                f"stand for array {key!r}")
            return _npy(archive.read(key + ".npy"))
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise FileError(f"is not a well-formed .npz: {error}") from None


# ---- .safetensors --------------------------------------------------------------------------

_SAFETENSORS = {"F64": ("f", 8), "F32": ("f", 4), "F16": ("f", 2), "BF16": ("bf16", 2),
                "I64": ("i", 8), "I32": ("i", 4), "I16": ("i", 2), "I8": ("i", 1),
                "U64": ("u", 8), "U32": ("u", 4), "U16": ("u", 2), "U8": ("u", 1),
                "BOOL": ("b", 1)}


def _from_safetensors(path: Path, key: str) -> Dyadic:
    with open(path, "rb") as stream:
        version = stamp(path)
        total = version[0]
        header, size = _safetensors_header(path, stream, version)
        if not isinstance(header, dict) or key == "__metadata__" or key not in header:
            names = sorted(k for k in header if k != "__metadata__") \
                if isinstance(header, dict) else []
            raise FileError(f"has no tensor {key!r} (it has: {', '.join(names[:10]) or 'none'})")
        entry = header[key]
        try:
            kind, width = _SAFETENSORS[entry["dtype"]]
            shape = tuple(int(n) for n in entry["shape"])
            start, end = (int(n) for n in entry["data_offsets"])
        except (KeyError, TypeError, ValueError) as error:
            raise FileError(f"tensor {key!r}: unsupported or malformed entry ({error})") from None
        if not 0 <= start <= end <= total - 8 - size or min(shape, default=0) < 0:
            raise FileError(f"tensor {key!r} has corrupt data offsets")
        stream.seek(8 + size + start)
        data = stream.read(end - start)
    count = int(np.prod(shape, dtype=object)) if shape else 1
    return decode(data, kind, width, "<", count).reshape(shape)


def _safetensors_header(path: Path, stream: Any, version: Stamp) -> tuple[Any, int]:
    """The parsed JSON header and its length, read once per version of the file."""
    name = str(path.resolve())
    known = _HEADERS.get(name)
    if known is not None and known[0] == version:
        return known[1], known[2]
    head = stream.read(8)
    size = int.from_bytes(head, "little") if len(head) == 8 else -1
    if size > version[0] - 8 >= 0:
        raise FileError(f"is truncated: its .safetensors header alone needs {size} bytes "
                        f"after the first 8, and the file has {version[0] - 8}")
    if not 0 < size <= version[0] - 8:
        raise FileError("is not a well-formed .safetensors file (header length)")
    try:
        header = json.loads(stream.read(size).decode("utf-8"), object_pairs_hook=_unique,
                            parse_int=json_integer)
    except FileError:  # a key named twice (_unique)
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as error:  # json's or json_integer's
        raise FileError(f"has a malformed .safetensors header: {error}") from None
    _layout(header, version[0] - 8 - size)
    if settled(version):
        _HEADERS[name] = (version, header, size)
    return header, size


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are distinct (json's default keeps the last of a repeated
    key silently; other readers take the first or refuse)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        twice = next(k for i, (k, _) in enumerate(pairs) if k in dict(pairs[:i]))
        raise FileError(f"is ambiguous: its safetensors header names {twice!r} twice")
    return out


def _layout(header: Any, data_size: int) -> None:
    """Every entry well-formed (dtype a string, shape and data_offsets lists of integers),
    and the entries' byte ranges tile the data section: no overlap, no gap, nothing after
    (the safetensors format's own rule; its library refuses every other file)."""
    if not isinstance(header, dict):
        raise FileError("has a malformed .safetensors header (not a JSON object)")
    spans = []
    for name, entry in header.items():
        if name == "__metadata__":
            if not (isinstance(entry, dict) and all(isinstance(v, str) for v in entry.values())):
                raise FileError("has a malformed .safetensors header (__metadata__)")
            continue
        if not (isinstance(entry, dict) and isinstance(entry.get("dtype"), str)
                and _whole_numbers(entry.get("shape"))
                and _whole_numbers(entry.get("data_offsets"))
                and len(entry["data_offsets"]) == 2):
            raise FileError(f"has a malformed .safetensors entry {name!r}")
        spans.append((entry["data_offsets"][0], entry["data_offsets"][1]))
    end = 0
    for first, last in sorted(spans):
        if first != end or last < first:
            raise FileError(f"has a malformed .safetensors header: tensor data does not tile "
                            f"the data section at byte {end}")
        end = last
    if end > data_size:
        raise FileError(f"is truncated: its .safetensors header describes {end} data bytes, "
                        f"the file holds {data_size} ({end - data_size} missing)")
    if end != data_size:
        raise FileError(f"has a malformed .safetensors header: the tensors end at data byte "
                        f"{end}, and {data_size - end} more bytes follow them")


def _whole_numbers(value: Any) -> bool:
    return isinstance(value, list) and all(type(v) is int and v >= 0 for v in value)


def read_array(path: Path, key: str) -> Dyadic:
    """The array stored under `key` in a `.npz` or `.safetensors` file, exactly."""
    if not path.is_file():
        raise FileError("does not exist")
    suffix = path.suffix.lower()
    if suffix not in (".npz", ".safetensors"):
        raise FileError("is neither a .npz nor a .safetensors file")
    try:
        return (_from_npz if suffix == ".npz" else _from_safetensors)(path, key)
    except FileError:
        raise
    except (struct.error, ValueError, OSError, KeyError, TypeError) as error:
        raise FileError(f"cannot be read: {error}") from None
