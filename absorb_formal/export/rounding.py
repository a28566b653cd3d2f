"""Exact values to floats, correctly rounded (export's rounding primitives): a witness's
exact rationals (or symbolic σ values) rounded once to float64, float32 or bfloat16, with the
largest relative rounding error. Shared by `export` and `enclosed_doubles`, so that neither
imports the other."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..model.blocks import Matrix
from ..model.symbolic import Symbolic

EXIT_OK, EXIT_NOT_ABSORBABLE, EXIT_ERROR = 0, 1, 2


class ExportError(Exception):
    """Export refused; `code` is the exit status (1: not absorbable, 2: any other error)."""

    def __init__(self, message: str, code: int = EXIT_ERROR):
        super().__init__(message)
        self.code = code


# ---- exact values to floats, correctly rounded ------------------------------------------

@dataclass
class Rounded:
    """One weight in the target format (bfloat16 as its uint16 bit patterns), and the largest
    |rounded − exact| / |exact| over its entries."""

    values: np.ndarray  # float64 or float32, or uint16 bits for bfloat16
    max_rel_error: float

    def as_float64(self) -> np.ndarray:
        if self.values.dtype == np.uint16:
            return bf16_to_float32(self.values).astype(np.float64)
        return self.values.astype(np.float64)


def bf16_to_float32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns as float32 (exact: bfloat16 is the top half of a float32)."""
    return np.left_shift(bits.astype(np.uint32), 16).view(np.float32)


def _odd64(nearest: np.ndarray, above: np.ndarray, inexact: np.ndarray) -> np.ndarray:
    """Round-to-odd in float64 from the nearest float64 of each exact value: truncate towards
    zero, then set the last bit where inexact. Rounding a round-to-odd value with p ≥ q + 2
    bits to q bits gives the correctly rounded value of the exact one (no double rounding)."""
    truncated = np.where(above, np.nextafter(nearest, 0.0), nearest)
    bits = truncated.view(np.uint64) | inexact.astype(np.uint64)
    return bits.view(np.float64)


def _to_bfloat16(odd64: np.ndarray) -> np.ndarray:
    """float64 (round-to-odd of the exact values) → bfloat16 bits, round to nearest even."""
    with np.errstate(over="ignore"):
        near32 = odd64.astype(np.float32)
    if not np.isfinite(near32).all():
        raise ExportError("a witness weight is beyond the bfloat16 range")
    back = near32.astype(np.float64)
    above = np.abs(back) > np.abs(odd64)
    truncated = np.where(above, np.nextafter(near32, np.float32(0)), near32)
    bits = truncated.view(np.uint32).astype(np.uint64) | (back != odd64).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    out = rounded.astype(np.uint16)
    if ((out & 0x7F80) == 0x7F80).any():
        raise ExportError("a witness weight is beyond the bfloat16 range")
    return out


def _finish(nearest: np.ndarray, odd: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "float64":
        return nearest
    if dtype == "float32":
        with np.errstate(over="ignore"):
            out = odd.astype(np.float32)
        if not np.isfinite(out).all():
            raise ExportError("a witness weight is beyond the float32 range")
        return out
    return _to_bfloat16(odd)


def round_matrix(matrix: Matrix, dtype: str) -> Rounded:
    """A witness matrix in `dtype`. A loaded array (float16/32/64 or small integers: exact in
    float64) is rounded as an array, with no Fraction per entry; literal or computed rows go
    through their exact values."""
    array = matrix._array
    if array is not None and _float64_exact(array):
        exact = array.astype(np.float64)
        rounded = _finish(exact, exact, dtype)
        return Rounded(rounded, _array_rel_error(rounded, exact))
    return round_values([v for row in matrix.rows for v in row], matrix.shape, dtype)


def _float64_exact(array: np.ndarray) -> bool:
    if array.dtype.kind == "f":
        return array.dtype.itemsize <= 8
    if array.dtype.kind in "iub":
        return array.size == 0 or int(np.abs(array.astype(object)).max()) <= 2**53
    return False


def round_values(flat: Sequence[Any], shape: tuple[int, ...], dtype: str) -> Rounded:
    """Exact rationals, in row-major order, rounded to `dtype` and shaped `shape`. Zeros
    (most entries of a construction's added neurons) are exact in every format and skip the
    per-entry work. An entry may be symbolic (σ at rational points, `symbolic.Symbolic`:
    silu(1) in a swiglu construction's down weights or a gelu witness's output bias): it
    converts to the nearest float64 and compares with floats exactly, through enclosures."""
    where = [i for i, v in enumerate(flat) if v]
    values = [flat[i] for i in where]
    try:
        nonzero = np.array([float(v) for v in values], dtype=np.float64)
    except OverflowError:
        raise ExportError("a witness weight is beyond the float64 range") from None
    if not np.isfinite(nonzero).all():
        raise ExportError("a witness weight is beyond the float64 range")
    exact_of = [Fraction(x) for x in nonzero.tolist()]
    size = len(flat)
    index = np.array(where, dtype=np.int64)
    nearest = np.zeros(size, dtype=np.float64)
    above = np.zeros(size, dtype=np.bool_)
    inexact = np.zeros(size, dtype=np.bool_)
    nearest[index] = nonzero
    above[index] = [abs(x) > abs(v) for x, v in zip(exact_of, values, strict=True)]
    inexact[index] = [x != v for x, v in zip(exact_of, values, strict=True)]
    rounded = _finish(nearest, _odd64(nearest, above, inexact), dtype)
    wide = Rounded(rounded, 0.0).as_float64()
    worst = Fraction(0)
    for i in np.flatnonzero(inexact | (wide != nearest)).tolist():
        value = flat[i]
        if value != 0:
            error = abs(Fraction(wide[i]) - value) / abs(value) if not isinstance(
                value, Symbolic) else Fraction(float(abs(Fraction(wide[i]) - value))
                                               / float(abs(value)))  # a sum has no inverse
            worst = max(worst, error)
    return Rounded(rounded.reshape(shape), float(worst))


def _array_rel_error(rounded: np.ndarray, exact: np.ndarray) -> float:
    """max |rounded − exact| / |exact| over non-zero entries of an exact float64 array (the
    difference of two floats this close is exact; the quotient is rounded once)."""
    wide = Rounded(rounded, 0.0).as_float64()
    changed = wide != exact
    if not changed.any():
        return 0.0
    return float((np.abs(wide[changed] - exact[changed]) / np.abs(exact[changed])).max())


