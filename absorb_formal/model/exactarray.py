"""The exact values of loaded weight arrays (Exact means exact: README, "Guarantees").

Every finite binary float is a dyadic rational `M·2^E` with an integer mantissa M. This module
reads that pair without rounding for every float format numpy can hold — float16, float32 and
float64 through float64's `frexp` (exact: each widens to float64 without loss), and the
platform's long double through its own `frexp` and 32-bit chunks (never through `float`,
which would round 64 mantissa bits to 53). Integer arrays are exact as they stand, at any size.

Exact work asks for values in three ways: as `Fraction`s (small blocks, whole rows or
columns) and as residues modulo a prime (the modular-functional certificate of large blocks,
docs/rules.md §7), computed from (M, E) directly so that no value is ever converted to a
nearby float — float16 and float32 (bfloat16 arrives as float32) straight from their bit
fields, vectorised, with no Python object per entry.
"""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np

_CHUNK = 2**32


def is_long_double(array: np.ndarray) -> bool:
    """A float format wider than float64 (x86 80-bit extended, or IEEE binary128)."""
    return array.dtype.kind == "f" and array.dtype.itemsize > 8


def parts(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(M, E) with array = M·2^E exactly, element by element; M is int64 where it fits,
    else Python ints (object array). Integer arrays give E = 0."""
    if array.dtype.kind in "iub":
        if array.dtype.kind == "u" and array.dtype.itemsize == 8:
            return array.astype(object), np.zeros(array.shape, dtype=np.int64)
        return array.astype(np.int64), np.zeros(array.shape, dtype=np.int64)
    if array.dtype.kind != "f":
        raise TypeError(f"no exact reading for dtype {array.dtype}")
    if not is_long_double(array):
        mantissa, exponent = np.frexp(array.astype(np.float64))  # exact for f2, f4, f8
        return ((mantissa * 2.0**53).astype(np.int64),
                exponent.astype(np.int64) - 53)
    return _long_double_parts(array)


def _long_double_parts(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Long double: frexp is exact in the type itself; the scaled mantissa is an integer
    of up to nmant + 1 bits, peeled off in 32-bit chunks (each exact in float64)."""
    bits = np.finfo(array.dtype).nmant + 1
    mantissa, exponent = np.frexp(array)
    scaled = np.ldexp(np.abs(mantissa), bits)  # an exact integer in the long double type
    negative = mantissa < 0
    total = np.zeros(array.shape, dtype=object)
    shift = 0
    while shift < bits:
        chunk = np.fmod(scaled, _CHUNK)  # exact: fmod never rounds
        scaled = (scaled - chunk) / _CHUNK  # exact: an integer divided by a power of two
        total = total + np.left_shift(chunk.astype(np.int64).astype(object), shift)
        shift += 32
    total = np.where(negative, -total, total)
    return total, exponent.astype(np.int64) - bits


def fraction(mantissa: int, exponent: int) -> Fraction:
    return Fraction(mantissa * 2**exponent) if exponent >= 0 else Fraction(mantissa,
                                                                              2**-exponent)


def fractions(array: np.ndarray) -> list[list[Fraction]]:
    """Every entry of a 2-D array as the exact rational it denotes."""
    if array.dtype.kind in "iub":
        return [[Fraction(v) for v in row] for row in array.tolist()]  # Python ints: exact
    if not is_long_double(array):  # a float64 (or narrower) value's integer ratio is exact
        return [[Fraction(*v.as_integer_ratio()) for v in row]
                for row in array.astype(np.float64).tolist()]
    mantissas, exponents = parts(array)
    return [[fraction(int(mv), int(ev)) for mv, ev in zip(mr, er, strict=True)]
            for mr, er in zip(mantissas.tolist(), exponents.tolist(), strict=True)]


BAND = 1 << 18  # entries converted at once: the temporaries stay a few MB (and in cache)


def residues(array: np.ndarray, p: int) -> np.ndarray:
    """Each entry mod an odd prime p < 2^31, as int64: M·2^E ↦ (M mod p)·(2^E mod p) mod p.
    A band of rows at a time, so that memory beyond the int64 result stays bounded (an
    OPT-size `up` has 67 million entries)."""
    if array.ndim != 2 or array.size <= BAND:
        return _residues(array, p)
    out = np.empty(array.shape, dtype=np.int64)
    step = max(1, BAND // max(1, array.shape[1]))
    for start in range(0, array.shape[0], step):
        out[start:start + step] = _residues(array[start:start + step], p)
    return out


# IEEE formats read from their bits: numpy dtype → (unsigned view, exponent bits, fraction bits)
_BITS = {np.dtype(np.float16): (np.uint16, 5, 10), np.dtype(np.float32): (np.uint32, 8, 23)}


def _residues(array: np.ndarray, p: int) -> np.ndarray:
    if array.dtype in _BITS and p < 2**26:
        return _float_residues(array, p)
    mantissas, exponents = parts(array)
    if mantissas.dtype == object:
        whole = np.array([int(v) % p for v in mantissas.ravel()],
                         dtype=np.int64).reshape(mantissas.shape)
    else:
        whole = mantissas % p
    # few distinct exponents: 2^E mod p once per exponent, then a table lookup (no per-entry
    # Python call: a GPT-2-sized matrix has millions of entries)
    if not exponents.size:
        return whole % p
    low = int(exponents.min())
    table = np.array([pow(2, s % (p - 1), p) for s in range(low, int(exponents.max()) + 1)],
                     dtype=np.int64)  # float exponents span a few thousand values at most
    return (whole * table[exponents - low]) % p


def _float_residues(array: np.ndarray, p: int) -> np.ndarray:
    """float16 / float32 (and bfloat16, widened to float32 by its bits) straight from the bits:
    value = ±mag·2^(field − bias − fbits) (subnormals: field 1, no implicit bit), so the residue
    is ±mag·T[field] mod p with T a table of 2^(field − bias − fbits) mod p over the 2^ebits
    fields. With p < 2^26 (the caller's condition): |x| = mag·T < 2^24·2^26 is exact in
    float64, and x − p·⌊x·fl(1/p)⌋ is x mod p exactly — the computed quotient is within
    |x/p|·2^−52 < 2^−28 of x/p, while x/p is at least 1/p > 2^−26 away from every integer
    unless x is a multiple of p, so the floor is ⌊x/p⌋ and the result in [0, p). A multiple
    of p (mag a multiple of p: possible once p ≤ 2^24, the minors' primes near 2^21) may get
    the floor one low, giving p instead of 0: the last np.mod (exact on integers below 2^53)
    maps it to 0."""
    unsigned, ebits, fbits = _BITS[array.dtype]
    table = _power_table(array.dtype, p)
    bits = array.view(unsigned)
    field = ((bits >> fbits) & ((1 << ebits) - 1)).astype(np.intp)
    mag = (bits & ((1 << fbits) - 1)).astype(np.float64)
    mag += table[1][field]  # the implicit bit of normal numbers
    mag *= table[0][field]
    np.copysign(mag, array, out=mag)  # ±mag·T
    quotient = mag * (1.0 / p)
    np.floor(quotient, out=quotient)
    quotient *= p
    mag -= quotient
    np.mod(mag, p, out=mag)
    return mag.astype(np.int64)


@functools.cache
def _power_table(dtype: np.dtype, p: int) -> tuple[np.ndarray, np.ndarray]:
    """(2^(field − bias − fbits) mod p, the implicit bit 2^fbits or 0) for every exponent
    field of the format (subnormals: field 0 scales like field 1)."""
    _, ebits, fbits = _BITS[dtype]
    bias = (1 << (ebits - 1)) - 1
    shifts = [max(field, 1) - bias - fbits for field in range(1 << ebits)]
    powers = np.array([pow(2, e % (p - 1), p) for e in shifts], dtype=np.float64)
    implicit = np.array([float(1 << fbits) if field else 0.0 for field in range(1 << ebits)])
    return powers, implicit
