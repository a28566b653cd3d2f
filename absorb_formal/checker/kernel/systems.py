"""The systems certificates are checked with, built from exact products mod p (`modlu.py`):
the same function builds a system when the prover looks for a certificate and when the checker
re-derives it, so both sides compute it identically.

- the modular functional (docs/certificates.md, "modular functional"): the minor
  [vec(d_i u_iᵀ) | vec S] on a grid, whose LU gives the prover Y (`product_minor`), and the
  one product that checks Y (`on_grid`, `functional_values`);
- the unique subset solution (docs/certificates.md, "unique subset solution"): the m×(m+1)
  system seen through m random rank-one functionals from a fixed seed (`projected_system`,
  and `projected_flip_system` for the §8.2 rows), from `random_residues`.

Every entry is an integer below p held in a float64; each step is an exact product mod p
(`modlu.product_mod`, the bound k·(p−1)² + p < 2^53 raised on by `modlu.product_bound`),
an entry-wise product of two residues (below p² < 2^52) or a sum of d residues (below
d·p < 2^53), reduced; the bounds are raised on, never asserted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .modlu import EXACT, Numpy, product_bound, product_mod, usable


def product_minor(left: np.ndarray, right: np.ndarray, row_pos: np.ndarray,
                  col_pos: np.ndarray, last: np.ndarray, p: int) -> np.ndarray:
    """The (m+1)×(m+1) matrix M[t, i] = left[row_pos[t], i]·right[i, col_pos[t]] mod p
    (i < m), M[t, m] = last[t], as float64 integers in [0, p): the minor of
    [vec(d_i u_iᵀ) | vec S] on the coordinates (row_pos[t], col_pos[t]). A run of
    coordinates on one row r (a grid row) is the block right[:, cols]ᵀ with column i scaled
    by left[r, i]: no gather but of right's columns, and the only full-size array is the
    result. Each product x of two residues is below p² < 2^52, exact in float64, and reduced
    there as x − p·⌊x·fl(1/p)⌋: the computed quotient is within x/p·2^−52 < 1/p of x/p, so
    the floor is ⌊x/p⌋ except for a non-zero multiple of p, which a product of two non-zero
    residues mod a prime never is: the result is x mod p exactly."""
    product_bound(1, p)
    if p >= 1 << 26:
        raise ArithmeticError(f"{p}² is not below 2^52")
    size = len(row_pos)
    m = left.shape[1]
    out = np.empty((size, m + 1), dtype=np.float64)
    left = (np.asarray(left, dtype=np.int64) % p).astype(np.float64)
    right_t = np.ascontiguousarray((np.asarray(right, dtype=np.int64) % p).T.astype(np.float64))
    row_pos, col_pos = np.asarray(row_pos), np.asarray(col_pos)
    starts = [0, *(np.flatnonzero(row_pos[1:] != row_pos[:-1]) + 1).tolist(), size]
    rows_per_band = max(1, (1 << 16) // max(1, m))  # bands of about 2^16 entries (in cache)
    work = np.empty((rows_per_band, m))
    for start, stop in zip(starts[:-1], starts[1:], strict=True):
        factor, cols = left[row_pos[start]], col_pos[start:stop]
        simple = bool((cols == np.arange(cols[0], cols[0] + len(cols))).all())
        block = right_t[cols[0]:cols[0] + len(cols)] if simple else right_t[cols]
        for first in range(0, stop - start, rows_per_band):
            band = out[start + first:min(stop, start + first + rows_per_band), :m]
            scratch = work[:band.shape[0]]
            np.multiply(block[first:first + band.shape[0]], factor, out=band)
            np.multiply(band, 1.0 / p, out=scratch)
            np.floor(scratch, out=scratch)
            scratch *= p
            band -= scratch
    out[:, m] = np.asarray(last, dtype=np.int64) % p
    return out


def random_residues(seed: int, stream: int, rows: int, cols: int, p: int) -> np.ndarray:
    """A rows×cols float64 array of integers in [0, p) drawn from numpy's PCG64 bit generator
    seeded with SeedSequence([seed, stream]) — its raw 64-bit output, whose values numpy keeps
    stable across versions (unlike Generator's methods) — reduced mod p, row after row.
    Reproducible by anyone who knows (seed, stream): certificates store the seed."""
    return next(_random_bands(seed, stream, rows, cols, p, rows))


def _random_bands(seed: int, stream: int, rows: int, cols: int, p: int, band: int
                  ) -> Iterator[np.ndarray]:
    """`random_residues(seed, stream, rows, cols, p)` a band of rows at a time."""
    source = np.random.PCG64(np.random.SeedSequence([seed, stream]))
    for start in range(0, rows, band):
        count = min(band, rows - start)
        raw = source.random_raw(count * cols)
        yield (raw % np.uint64(p)).astype(np.float64).reshape(count, cols)


SYSTEM_BAND = 512  # rows of the projected system built at once (bounds the temporaries)


def projected_system(down: np.ndarray, up: np.ndarray, target: np.ndarray | int,
                     seed: int, p: int) -> np.ndarray:
    """The m×(m+1) float64 array [A | b] mod p of the system Σ_i c_i d_i u_iᵀ = T seen through
    m random rank-one functionals X ↦ p_jᵀ X q_j: A[j, i] = (p_j·d_i)(q_j·u_i) — the
    Hadamard product of P·D and Q·Uᵀ — and b_j = p_jᵀ T q_j, with P, Q the m×d matrices
    `random_residues(seed, 0 / 1, m, d, p)`. down: D mod p (d×m), up: U mod p (m×d),
    target: T mod p (d×d), or an integer t for T = t·I; integers, reduced mod p in int64
    before they become float64. Every step is an exact product mod p (`product_mod`), an
    entry-wise product of two residues (< p² < 2^52) or a sum of d residues (< d·p < 2^53),
    reduced; both bounds are raised on."""
    down_f, up_t, matrix = _system_inputs(down, up, target, p)
    d, m = down.shape
    out = np.empty((m, m + 1))
    bands = zip(_random_bands(seed, 0, m, d, p, SYSTEM_BAND),
                _random_bands(seed, 1, m, d, p, SYSTEM_BAND), strict=True)
    for n, (left, right) in enumerate(bands):
        rows = slice(n * SYSTEM_BAND, n * SYSTEM_BAND + left.shape[0])
        block = out[rows, :m]
        np.multiply(product_mod(left, down_f, p), product_mod(right, up_t, p), out=block)
        Numpy.reduce(block, p)
        out[rows, m] = _bilinear(left, right, matrix, target, p)
    return np.mod(out, p, out=out)


def _system_inputs(down: np.ndarray, up: np.ndarray, target: np.ndarray | int, p: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(D, Uᵀ, T or None for T = t·I) as float64 residues, once the bounds of a projected
    system hold (raised on otherwise)."""
    d = down.shape[0]
    product_bound(1, p)
    if p >= 1 << 26 or d * p >= EXACT:
        raise ArithmeticError(f"residue products mod {p} or sums of {d} are not exact in float64")
    matrix = None if isinstance(target, int | np.integer) else _residues(target, p)
    return _residues(down, p), np.ascontiguousarray(_residues(up, p).T), matrix


def _residues(values: Any, p: int) -> np.ndarray:
    """Integers reduced mod p in int64, then float64 (an unreduced int64 beyond 2^53 would
    round)."""
    return (np.asarray(values, dtype=np.int64) % p).astype(np.float64)


def _bilinear(left: np.ndarray, right: np.ndarray, matrix: np.ndarray | None,
              target: np.ndarray | int, p: int) -> np.ndarray:
    """p_jᵀ T q_j mod p for each row p_j of `left`, q_j of `right` (float64 residues); T the
    residues `matrix`, or, when it is None, the integer `target` times I: p_jᵀ (t·I) q_j =
    t·(p_j·q_j). Each entry-wise product of two residues is below p² < 2^52 and each sum of d
    reduced ones below d·p < 2^53 (the callers raise otherwise)."""
    if matrix is None:
        rhs = np.mod(np.mod(left * right, p).sum(axis=1), p) * (int(target) % p)
    else:
        rhs = (np.mod(product_mod(left, matrix, p) * right, p)).sum(axis=1)
    return np.mod(rhs, p)


def projected_flip_system(down: np.ndarray, up: np.ndarray, gate: np.ndarray,
                          up_weight: np.ndarray, gate_weight: np.ndarray,
                          target: np.ndarray | int, seed: int, p: int) -> np.ndarray:
    """The m×(m+1) float64 array [A | b] mod p of docs/rules.md §8.2's two conditions at once,
    Σ_i c_i d_i ⊗ sym(g_i u_iᵀ) = 0 and Σ_i c_i d_i w_iᵀ = T with w_i = λ_i u_i + μ_i g_i,
    seen through m functionals (X, L) ↦ Σ_r p_{j,r}·b_jᵀ X_r b_j + p_jᵀ L q_j (X_r: the d×d
    slice r of the d×d×d part): A[j, i] = (p_j·d_i)·((b_j·g_i)(b_j·u_i) + q_j·w_i) —
    b_jᵀ sym(g uᵀ) b_j = (b_j·g)(b_j·u), no d³ tensor — and b_j = p_jᵀ T q_j, with P, Q as
    in `projected_system` (streams 0, 1) and B = `random_residues(seed, 2, m, d, p)`: four
    products of m×d by d×m (relu², the case gate = up, μ = 0: three). down: D (d×m), up,
    gate: U, G (m×d), up_weight, gate_weight: λ, μ (m), target: T (d×d) or an integer t for
    T = t·I; integers, reduced mod p in int64 first. W = λ⊙U + μ⊙G is formed in int64 (two
    products of residues and their sum, below 2p² < 2^63) and reduced; every other step is
    an exact product mod p (`product_mod`), an entry-wise product of two residues
    (< p² < 2^52, reduced) or a sum of d residues (< d·p < 2^53); the bounds are raised on."""
    down_f, up_t, matrix = _system_inputs(down, up, target, p)
    d, m = down.shape
    same = gate is up
    gate_t = up_t if same else np.ascontiguousarray(_residues(gate, p).T)
    lam = np.asarray(up_weight, dtype=np.int64) % p
    mu = np.asarray(gate_weight, dtype=np.int64) % p
    lines = lam[:, None] * (np.asarray(up, dtype=np.int64) % p) % p
    if mu.any():
        lines += mu[:, None] * (np.asarray(gate, dtype=np.int64) % p) % p
    lines_t = np.ascontiguousarray(_residues(lines, p).T)
    out = np.empty((m, m + 1))
    bands = zip(_random_bands(seed, 0, m, d, p, SYSTEM_BAND),
                _random_bands(seed, 1, m, d, p, SYSTEM_BAND),
                _random_bands(seed, 2, m, d, p, SYSTEM_BAND), strict=True)
    for n, (left, right, middle) in enumerate(bands):
        rows = slice(n * SYSTEM_BAND, n * SYSTEM_BAND + left.shape[0])
        by_up = product_mod(middle, up_t, p)
        bracket = by_up * (by_up if same else product_mod(middle, gate_t, p))  # < p²
        Numpy.reduce(bracket, p)
        bracket += product_mod(right, lines_t, p)  # two terms of magnitude < p
        Numpy.reduce(bracket, p)
        block = out[rows, :m]
        np.multiply(product_mod(left, down_f, p), bracket, out=block)  # < p²
        Numpy.reduce(block, p)
        out[rows, m] = _bilinear(left, right, matrix, target, p)
    return np.mod(out, p, out=out)


def on_grid(y: list[int], rows: int, cols: int) -> np.ndarray:
    """y, the first len(y) coordinates of a rows × cols grid taken row by row, as that grid
    (float64; 0 on the coordinates after them)."""
    out = np.zeros(rows * cols)
    out[:len(y)] = y
    return out.reshape(rows, cols)


def functional_values(grid: np.ndarray, left: np.ndarray, right: np.ndarray, p: int
                      ) -> np.ndarray:
    """⟨Y, d_i u_iᵀ⟩ = d_iᵀ·Y·u_i mod p for every i (int64 in [0, p)), Y = grid (integers in
    [0, p) on rows × cols), left = D's grid rows mod p (rows × m), right = U's grid columns mod
    p (m × cols): W = Y·rightᵀ (exact, `product_mod`), then Σ_a left[a, i]·W[a, i], each
    product below p² and the sum of len(rows) of them below 2^53 (raised on)."""
    product_bound(grid.shape[0], p)
    if not (usable(p) and (grid >= 0).all() and (grid < p).all()
            and (np.rint(grid) == grid).all()):
        raise ValueError(f"Y must hold integers in [0, {p})")
    w = product_mod(grid, (np.asarray(right, dtype=np.int64) % p).T.astype(np.float64), p)
    w *= (np.asarray(left, dtype=np.int64) % p).astype(np.float64)
    total = w.sum(axis=0)
    total -= np.floor(total * (1.0 / p)) * p
    total = total.astype(np.int64) % p  # exact: integers below 2^53
    return total
