"""Memory sizes: a size as a user writes it (`--memory 4GB`), what this process may still
take, and what an export holds, so that a request beyond the machine is refused before
anything is allocated (the kernel would otherwise kill the process mid-way).

Estimates are of what grows with the request (arrays of width × d entries); the fixed cost of
the process (Python, numpy, the decision) is not counted. They err on the large side.
"""

from __future__ import annotations

import os
import re
from fractions import Fraction

# Decimal units are powers of 1000, binary ones (KiB, ...) powers of 1024; case does not matter.
UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9,
         "gb": 10**9, "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30,
         "tib": 2**40}
SIZE = re.compile(r"\s*(\d{1,15}(?:\.\d{0,9})?|\.\d{1,9})\s*([A-Za-z]{0,3})\s*")
UNKNOWN = 2**63  # what `available` says when nothing tells it: no limit known
ITEMSIZE = {"float64": 8, "float32": 4, "bfloat16": 2}
# An export holds each entry at the dtype about four times (rounded, padded to the width, the
# file's bytes and their serialisation) and once as float64 (the sample's view): measured at
# about 19 bytes an entry in float64, counted as 40. A witness stored exactly is then
# compared with the block exactly (`export.proved_equal`): measured at about 50 bytes more an
# entry, counted as 64.
COPIES_AT_DTYPE, FLOAT64_BYTES, EXACT_BYTES = 4, 8, 64


def parse_size(text: str) -> int:
    """Bytes from a size: `300MB`, `4GB`, `1.5GiB`, `512k`, `4096` (bytes); ValueError with
    a short message for anything else, or for less than one byte."""
    match = SIZE.fullmatch(text)
    unit = match and UNITS.get(match.group(2).lower())
    if match is None or unit is None:
        raise ValueError(f"{text!r} is not a size (e.g. 300MB, 4GB, 1.5GiB)")
    value = int(Fraction(match.group(1)) * unit)
    if value < 1:
        raise ValueError(f"{text!r} is less than one byte")
    return value


def available() -> int:
    """Bytes this process may still take: MemAvailable, lowered by a cgroup limit and by
    RLIMIT_AS where set (`checker/modlu.bytes_available`); else the free physical pages
    (os.sysconf); else UNKNOWN."""
    from ..checker.kernel.modlu import bytes_available

    found = bytes_available()
    if found is not None:
        return max(found, 0)
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return UNKNOWN


_LIMIT: list[int] = []  # `--memory` of the prover and scan, when given


ENV = "ABSORB_FORMAL_MEMORY"  # carries --memory (in bytes) to the processes a run starts


def set_limit(limit: int | None) -> None:
    """The most memory an exact computation may hold (`--memory SIZE`); None: what is
    available when it starts. Kept in the environment too, so that the processes a scan
    starts (its pool, a local cluster's workers) inherit it."""
    _LIMIT[:] = [] if limit is None else [limit]
    if limit is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = str(limit)


def given() -> int | None:
    """`--memory` if given (here or in a parent process), else None."""
    if _LIMIT:
        return _LIMIT[0]
    inherited = os.environ.get(ENV, "")
    return int(inherited) if inherited.isdigit() and int(inherited) > 0 else None


def limit() -> int:
    """The memory an exact computation may take now: `--memory` if given (here or in a
    parent process), else what is available."""
    found = given()
    return available() if found is None else found


def shown(size: int) -> str:
    """A size for a message: `14.9 GiB`, `512 MiB`, `800 bytes`."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"


def export_bytes(dim: int, width: int, depth: int, gated: bool, biased: bool,
                 dtype: str) -> int:
    """About the bytes the arrays of an export at `width` hold at their peak (see the
    constants above): per layer, up and down (and gate) of width × dim entries and the
    biases. (The exact comparison that may follow is estimated on its own: EXACT_BYTES.)"""
    per_layer = width * dim * (3 if gated else 2)
    if biased:
        per_layer += width * (2 if gated else 1) + dim
    return depth * per_layer * (COPIES_AT_DTYPE * ITEMSIZE.get(dtype, 8) + FLOAT64_BYTES)


def resident() -> int:
    """Bytes this process holds now (its resident set; 0 where it cannot be read)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as stream:
            return int(stream.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return 0


def refusal(need: int, limit: int | None) -> str:
    """Why `need` more bytes are refused ("" when they fit): beyond what is available now
    (`limit` None), or, with what the process already holds, beyond `limit` (`--memory`:
    a bound on the whole process)."""
    if limit is None:
        room = available()
        if need <= room:
            return ""
        return f"it needs about {shown(need)} of memory, beyond the {shown(room)} available"
    need += resident()
    if need <= limit:
        return ""
    return (f"it needs about {shown(need)} of memory with what the process already holds, "
            f"beyond the --memory limit of {shown(limit)}")
