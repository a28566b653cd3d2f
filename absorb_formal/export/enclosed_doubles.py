"""The doubles witness (docs/rules.md §4, `decide.large`), correctly rounded from enclosures.

Doubles need W = −S U_Δ⁻¹/(2a) for the d × d matrix U_Δ of the listed rows of U. Its exact
entries are rationals of about d times the bits of a weight: the exact inverse of a float32
matrix of order 384 takes minutes and hundreds of megabytes, of order 1024 gigabytes
(RESULTS.md §9). Export does not need them written out, only each entry's rounding to the
asked format, so this module finds it from rigorous enclosures:

1. Arb's preconditioned solve (python-flint `arb_mat.solve`, 128 bits, then 256 and 512 when
   it cannot prove U_Δ invertible) encloses every entry of W, of the new down columns
   d_i − w_i and of the new down bias c − S U_Δ⁻¹ β_Δ in a ball that contains the exact
   value (ball arithmetic: every operation's rounding is in the radius).
2. A candidate r per entry (the ball's midpoint rounded to the format) is the correctly
   rounded value when the ball lies strictly between the midpoints to r's neighbours in
   the format: every number in it, the exact value too, rounds to r (ties to even never
   arise: a tie is on a midpoint, which the ball must not touch).
3. An entry whose ball touches a midpoint (an exact tie, an exact zero of W, or a value
   within about 2^-120 of a midpoint) is computed exactly instead: its row of W solves
   U_Δᵀ x = −S[r, :]ᵀ/(2a) over Q (python-flint), and the row's entries of W, of the new
   down columns and of the down bias are rounded from their exact values.

So the arrays written are bit for bit those the exact witness rounds to, as for every other
construction; the relative rounding error recorded is an upper bound on the exact one
(tight to about 30 digits) for the enclosed entries.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..decide import doubles, spare
from ..decide.canonical import ridge
from ..model.blocks import Block, Matrix

PRECISIONS = (128, 256, 512)
# Rows computed exactly when their enclosures do not settle the rounding: each costs one
# exact solve of order d (about 0.6 s at d = 384, 12 s at 1024). More than this, and a
# block too large for the exact inverse, is refused (TooWide): export writes spare pairs.
EXACT_ROWS = 16
_WIDEN = 2.0 ** -50  # float() of an exact arb endpoint is within an ulp; this covers it
_TINY = 1e-300


class Unsettled(Exception):
    """Some entries could not be rounded from their enclosures (message: how many)."""


def _arb_matrix(rows: list[list[Any]]) -> Any:
    import flint

    return flint.arb_mat(len(rows), len(rows[0]) if rows else 0,
                         [_arb(v) for row in rows for v in row])


def _arb(value: Any) -> Any:
    import flint

    if isinstance(value, float):
        return flint.arb(value)  # exact: a float64 is a dyadic rational
    value = Fraction(value)
    return flint.arb(flint.fmpq(value.numerator, value.denominator))


def _rows_of(matrix: Matrix, rows: list[int]) -> list[list[Any]]:
    """The listed rows as exact float64 values when the matrix is a loaded float array
    (exact: float16/32/64 are dyadic rationals of float64), else as Fractions."""
    array = matrix.loaded
    if array is not None and array.dtype.kind == "f" and array.dtype.itemsize <= 8:
        return array[rows].astype(np.float64).tolist()
    return [list(r) for r in doubles.exact_rows(matrix, rows)]


def enclosures(block: Block, neurons: list[int]) -> dict[str, Any]:
    """Balls (python-flint arb_mat) around the exact "down" (d × k: W), "own_down" (d × k:
    the listed neurons' down columns minus W) and "down_bias" (d × 1) of the doubles
    witness. Unsettled when Arb cannot prove U_Δ invertible at the largest precision."""
    import flint

    assert block.layers is not None
    layer = block.layers[0]
    ridge_ = ridge(block.activation)
    assert ridge_ is not None
    a = Fraction(ridge_.a)
    ups = _rows_of(layer.up, neurons)
    own = _rows_of(Matrix(array=layer.down.loaded.T) if layer.down.loaded is not None
                   else Matrix([list(c) for c in zip(*layer.down.rows, strict=True)]),
                   neurons)  # k × d: the listed neurons' down columns
    betas = [layer.up_bias[i] for i in neurons] if layer.up_bias is not None else None
    saved = flint.ctx.prec
    try:
        for prec in PRECISIONS:
            flint.ctx.prec = prec
            try:  # U_Δᵀ Wᵀ = −Sᵀ/(2a)
                target = _skip_transposed(block) * _arb(-1 / (2 * a))
                wt = _arb_matrix(ups).transpose().solve(target)
            except ZeroDivisionError:  # not proved invertible at this precision
                continue
            w = wt.transpose()
            out = {"down": w, "own_down": _arb_matrix(own).transpose() - w}
            if layer.down_bias is not None:
                beta = _arb_matrix([[b] for b in (betas or [Fraction(0)] * len(neurons))])
                bias = _arb_matrix([[c] for c in layer.down_bias])
                out["down_bias"] = bias + (w * beta) * _arb(2 * a)
            return out
    finally:
        flint.ctx.prec = saved
    raise Unsettled(f"Arb could not prove the {len(neurons)}×{len(neurons)} matrix of the "
                    f"doubled rows invertible at {PRECISIONS[-1]} bits")


def _skip_transposed(block: Block) -> Any:
    """Sᵀ as an arb_mat: c·I without d² conversions, a matrix from its exact entries (a
    loaded float array as its float64 values, exact)."""
    import flint

    d = block.dim
    if block.skip.matrix is None:
        out = flint.arb_mat(d, d)
        c = _arb(Fraction(block.skip.scale or 0))
        for i in range(d):
            out[i, i] = c
        return out
    return _arb_matrix(_rows_of(block.skip.matrix, list(range(d)))).transpose()


# ---- rounding a ball ---------------------------------------------------------------------

def _as_float64(values: np.ndarray, dtype: str) -> np.ndarray:
    from .rounding import bf16_to_float32

    if dtype == "bfloat16":
        return bf16_to_float32(values).astype(np.float64)
    return values.astype(np.float64)


def _neighbours(values: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """The format's next values below and above each, as float64 (±inf past the range)."""
    if dtype != "bfloat16":
        kind = np.float64 if dtype == "float64" else np.float32
        v = values.astype(kind)
        return (np.nextafter(v, kind(-np.inf)).astype(np.float64),
                np.nextafter(v, kind(np.inf)).astype(np.float64))
    # bfloat16 bit patterns as sign-magnitude integers, stepped by one (−0 and +0 are 0)
    bits = values.astype(np.int64)
    key = np.where(bits & 0x8000, -(bits & 0x7FFF), bits)

    def back(k: np.ndarray) -> np.ndarray:
        pattern = np.where(k < 0, 0x8000 | -k, k).astype(np.uint16)
        return _as_float64(pattern, dtype)

    return back(key - 1), back(key + 1)


def round_balls(balls: Any, dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values in `dtype` (bfloat16 as bits), settled mask, relative error bound) for an
    arb_mat of balls: an entry is settled when its whole ball rounds to its candidate."""
    import flint

    from .rounding import _finish

    rows, cols = balls.nrows(), balls.ncols()
    entries = balls.entries()
    mids = np.array([float(x) for x in entries], dtype=np.float64)
    finite = np.isfinite(mids)
    candidates = _finish(np.where(finite, mids, 0.0), np.where(finite, mids, 0.0), dtype) \
        if finite.all() or dtype != "bfloat16" else None
    if candidates is None:
        raise Unsettled("an enclosure is not finite")
    with np.errstate(over="ignore", invalid="ignore"):
        r = _as_float64(candidates, dtype)
        below, above = _neighbours(candidates, dtype)
    # the exact value x rounds to r when r − (r − below)/2 < x < r + (above − r)/2; the
    # halves of gaps between adjacent floats of a format are exact in float64 (normal range)
    half_down = (r - below) / 2
    half_up = (above - r) / 2
    saved = flint.ctx.prec
    flint.ctx.prec = 128
    try:
        diffs = [x - flint.arb(float(v)) for x, v in zip(entries, r.tolist(), strict=True)]
        low = np.array([float(e.lower()) for e in diffs], dtype=np.float64)
        high = np.array([float(e.upper()) for e in diffs], dtype=np.float64)
    finally:
        flint.ctx.prec = saved
    low = low - np.abs(low) * _WIDEN - _TINY
    high = high + np.abs(high) * _WIDEN + _TINY
    with np.errstate(invalid="ignore", over="ignore"):
        settled = (finite & np.isfinite(r) & np.isfinite(below) & np.isfinite(above)
                   & (r != 0) & (low > -half_down) & (high < half_up))
        off = np.maximum(np.abs(low), np.abs(high))
        # x = r + e with low ≤ e ≤ high (both of r's sign side when settled: |e| < |r|/2)
        least = np.minimum(np.abs(r + low), np.abs(r + high)) * (1 - _WIDEN)
        error = np.where(settled, off * (1 + _WIDEN) / np.maximum(least, _TINY), np.inf)
    shape = (rows, cols)
    return candidates.reshape(shape), settled.reshape(shape), error.reshape(shape)


def rounded_doubles(block: Block, neurons: list[int], dtype: str) -> dict[str, Any]:
    """The doubles construction's added and changed arrays, correctly rounded to `dtype`,
    as `export.Rounded`: "up" (k × d, −u_i), "up_bias" (−β_i, when biased), "down" (W),
    "own_down" (d × k), "down_bias" (when biased), and "columns" (the listed neurons, as
    an int array, not rounded). Unsettled when more than EXACT_ROWS rows need exact values
    and the block is beyond doubles.EXACT_DOUBLES, or Arb fails."""
    from .rounding import Rounded, round_matrix, round_values

    assert block.layers is not None
    layer, d, k = block.layers[0], block.dim, len(neurons)
    balls = enclosures(block, neurons)
    out: dict[str, Any] = {}
    rounded = {name: round_balls(ball, dtype) for name, ball in balls.items()}
    unsettled_rows = sorted(set().union(*(np.flatnonzero(~s.all(axis=1)).tolist()
                                          for _, s, _ in rounded.values())))
    if len(unsettled_rows) > EXACT_ROWS and k > doubles.EXACT_DOUBLES:
        raise Unsettled(f"{len(unsettled_rows)} rows of the doubles witness lie too close to "
                        "a rounding boundary to round from enclosures, and the exact inverse "
                        f"of order {k} is built only up to {doubles.EXACT_DOUBLES}")
    errors = {name: float(np.max(e[s], initial=0.0)) for name, (_, s, e) in rounded.items()}
    values = {name: v.copy() for name, (v, _, _) in rounded.items()}
    for r, exact in _exact_rows(block, neurons, unsettled_rows).items():
        for name, row in exact.items():
            fixed = round_values(row, (len(row),), dtype)
            values[name][r] = fixed.values
            errors[name] = max(errors[name], fixed.max_rel_error)
    out["down"] = Rounded(values["down"], errors["down"])
    out["own_down"] = Rounded(values["own_down"], errors["own_down"])
    if "down_bias" in values:
        out["down_bias"] = Rounded(values["down_bias"].reshape(d), errors["down_bias"])
    up = layer.up.loaded
    # 0 − u, not −u: a zero stays +0, as the exact witness rounds it
    out["up"] = round_matrix(Matrix(array=0 - up[neurons]) if up is not None else
                             Matrix([[-v for v in row] for row in doubles.exact_rows(
                                 layer.up, neurons)]), dtype)
    if layer.up_bias is not None:
        out["up_bias"] = round_values([-layer.up_bias[i] for i in neurons], (k,), dtype)
    out["columns"] = np.array(neurons, dtype=np.int64)
    return out


def _exact_rows(block: Block, neurons: list[int], rows: list[int]
                ) -> dict[int, dict[str, list[Fraction]]]:
    """Rows r of W, of the new down columns and of the down bias, exactly: x solves
    U_Δᵀ x = −S[r, :]ᵀ/(2a) over Q (one exact solve per row)."""
    if not rows:
        return {}
    assert block.layers is not None
    layer = block.layers[0]
    ridge_ = ridge(block.activation)
    assert ridge_ is not None
    a = Fraction(ridge_.a)
    ups = spare.fmpq(doubles.exact_rows(layer.up, neurons)).transpose()
    skip = [list(r) for r in block.skip.rows()]
    betas = [layer.up_bias[i] for i in neurons] if layer.up_bias is not None else None
    out = {}
    for r in rows:
        rhs = spare.fmpq([[Fraction(v) * (-1 / (2 * a))] for v in skip[r]])
        solved = ups.solve(rhs)
        w = [Fraction(int(solved[j, 0].p), int(solved[j, 0].q)) for j in range(len(neurons))]
        own = layer.down.exact_row(r)
        found = {"down": w, "own_down": [own[i] - w[j] for j, i in enumerate(neurons)]}
        if layer.down_bias is not None:
            found["down_bias"] = [layer.down_bias[r] + 2 * a * sum(
                (wj * bj for wj, bj in zip(w, betas or [], strict=False)), Fraction(0))]
        out[r] = found
    return out
