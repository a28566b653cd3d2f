"""Exact integer views of exact matrices: a matrix or vector as Python integers over one
denominator, read from embedded strings, a literal (`Rational`) or a weight file's `Dyadic`
(sign, magnitude and exponent arrays) without a Fraction per entry. Used by the checker's
ray limit and projected blocks (rules/ray_limit.py, rules/sublayer.py) and by the prover's
model (model/blocks.py), so both read a matrix's exact values the same way.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from .linalg import q


def integers(value: Any) -> tuple[np.ndarray, int]:
    """An exact matrix or vector as (object array of Python ints, denominator): the values
    are ints / denominator. Reads embedded strings, a literal (`Rational`) or a file's
    `Dyadic` (sign, magnitude, exponent arrays) without a Fraction per entry."""
    if hasattr(value, "mag") and hasattr(value, "exp"):  # Dyadic: ±mag·2^exp
        neg, mag, exp = value.neg, value.mag, value.exp
    else:
        neg = mag = exp = None
    if mag is not None:
        mag = np.asarray(mag).astype(object)
        exp = np.asarray(exp).astype(np.int64)
        low = int(exp.min()) if exp.size else 0
        ints = mag << (exp - low).astype(object)  # Python ints: no bound to overflow
        ints = np.where(np.asarray(neg), -ints, ints)
        return (ints * (1 << low), 1) if low >= 0 else (ints, 1 << -low)
    rows = value.values if hasattr(value, "values") else value
    fractions = _fractions(rows)
    flat = fractions.ravel().tolist()
    den = math.lcm(*(f.denominator for f in flat)) if flat else 1
    out = np.empty(len(flat), dtype=object)
    out[:] = [f.numerator * (den // f.denominator) for f in flat]
    return out.reshape(fractions.shape), den


def _fractions(rows: Any) -> np.ndarray:
    def conv(x: Any) -> Any:
        return [conv(v) for v in x] if isinstance(x, list | tuple) else (
            x if isinstance(x, Fraction) else q(x))

    items = conv(rows)
    out = np.empty((len(items), len(items[0])) if items and isinstance(items[0], list)
                   else (len(items),), dtype=object)
    if out.ndim == 2:
        for i, row in enumerate(items):
            out[i, :] = row
    else:
        out[:] = items
    return out
