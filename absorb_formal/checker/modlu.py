"""Exact linear algebra modulo a small prime, carried out by float64 BLAS (the idea of
FFLAS-FFPACK): determinants and ranks of integer matrices mod p, used by the checker and,
through this one module, by the prover (decide/modular.py).

Why floats are exact here. Every value this module keeps is an integer of magnitude at most
p − 1, stored in a float64 (53-bit significand: every integer of magnitude below 2^53 is
represented exactly, and a sum, difference or product of such integers whose exact value is
below 2^53 in magnitude is computed without rounding). A matrix product of an n×k and a k×n
block of such entries has every partial sum, in any summation order, with or without fused
multiply-add, of magnitude at most k·(p−1)²; so when k·(p−1)² + p < 2^53 every dot product,
and the subtraction from an entry of magnitude < p that follows, is exact. Reduction mod p
is x − p·rint(x·fl(1/p)): the computed quotient is within 0.5 + 2/p < 1 of x/p, so the
result is an integer ≡ x of magnitude ≤ p − 1, and every step of it is exact (q·p and
x − q·p are integers below 2^53). `_product_bound` raises when the bound fails, and every
product splits its inner dimension into pieces of at most `inner_limit(p)` (2,048 for the
primes below 2^21 used here), reducing in between (delayed reduction). This is exact integer
arithmetic on float hardware, not a float view of any weight: the inputs are residues
computed exactly from the weights' bits. (It assumes a classical matrix product — BLAS
dgemm, numpy's own loop, cuBLAS — never Strassen-like schemes, whose intermediate sums
are bounded differently.)

Why the checker owns it. The checker imports nothing from the prover; the prover may use the
checker's primitives. Sharing this one module, tested against FLINT (tests/test_modlu.py),
makes the determinant one trusted component, like python-flint was before it, instead of two
copies that could drift apart.

Algorithm: a recursive, rank-revealing LU on columns (Toledo's recursion): factor the left
half, apply its row swaps to the right half, solve with the left half's unit-lower
triangle, update the Schur complement with one matrix product, factor it. Work O(n^ω) in
BLAS, memory: the matrix itself plus bounded temporaries.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

EXACT = 2**53  # float64 represents every integer of magnitude below this exactly
BASE = 16  # columns below which the elimination goes column by column
ROWS_PER_PRODUCT = 1024  # rows of a product computed at once (bounds the temporaries)
SEARCH_FROM = 2**21  # minor primes: the largest primes below 2^21, in decreasing order


def inner_limit(p: int) -> int:
    """The longest inner dimension k with k·(p−1)² + p < 2^53 (exact float64 dot products)."""
    return (EXACT - 1 - p) // ((p - 1) ** 2)


def _product_bound(k: int, p: int) -> None:
    """The exactness bound of every product this module computes; raised, not `assert`ed,
    so that it survives `python -O`."""
    if not (p > 2 and k * (p - 1) ** 2 + p < EXACT):
        raise ArithmeticError(f"a product of inner dimension {k} mod {p} is not exact in "
                              "float64")


def is_prime(p: int) -> bool:
    """Trial division (p < 2^31: at most 46,341 candidates)."""
    if p < 2 or p >= 2**31:
        return False
    if p % 2 == 0:
        return p == 2
    f = 3
    while f * f <= p:
        if p % f == 0:
            return False
        f += 2
    return True


def primes(count: int, below: int = SEARCH_FROM) -> list[int]:
    """The `count` largest primes below `below`, decreasing: the minor's primes, in the order
    the prover tries them and the checker requires them."""
    found: list[int] = []
    candidate = below - 1
    while len(found) < count and candidate > 2:
        if is_prime(candidate):
            found.append(candidate)
        candidate -= 1
    return found


def usable(p: int) -> bool:
    """An odd prime small enough for blocks of BASE columns to multiply exactly."""
    return is_prime(p) and p > 2 and inner_limit(p) >= BASE


# ---- the float64 backend (numpy); `torch_backend` runs the same steps on a GPU -----------

class _Numpy:
    name = "numpy"

    @staticmethod
    def reduce(x: Any, p: int) -> None:
        """x ← x − p·rint(x/p) in place: an integer ≡ x mod p of magnitude ≤ p − 1."""
        quotient = x * (1.0 / p)
        np.rint(quotient, out=quotient)
        quotient *= p
        x -= quotient

    @staticmethod
    def product(a: Any, b: Any) -> Any:
        return a @ b

    @staticmethod
    def sub_product(c: Any, a: Any, b: Any, p: int) -> None:
        """c ← c − a·b, reduced, through one scratch buffer (no fresh temporaries)."""
        work = _scratch(*c.shape)
        np.matmul(a, b, out=work)
        np.subtract(c, work, out=c)
        np.multiply(c, 1.0 / p, out=work)
        np.rint(work, out=work)
        work *= p
        c -= work

    @staticmethod
    def integers_below(a: Any, p: int) -> bool:
        """Every entry an integer of magnitude below p (what the bound assumes)."""
        return bool((np.abs(a) < p).all() and (np.rint(a) == a).all())

    @staticmethod
    def first_nonzero(column: Any) -> int | None:
        found = np.flatnonzero(column)
        return int(found[0]) if found.size else None

    @staticmethod
    def swap_rows(a: Any, i: int, j: int) -> None:
        a[[i, j]] = a[[j, i]]

    @staticmethod
    def take_rows(a: Any, order: Any) -> None:
        """a ← a[order] in place, a band of columns at a time (bounded temporaries)."""
        step = max(1, (1 << 22) // max(1, a.shape[0]))
        for start in range(0, a.shape[1], step):
            a[:, start:start + step] = a[order, start:start + step]

    @staticmethod
    def arange(n: int) -> Any:
        return np.arange(n)

    @staticmethod
    def identity_like(a: Any) -> Any:
        return np.eye(a.shape[0], dtype=a.dtype)

    @staticmethod
    def to_list(v: Any) -> list[int]:
        return [int(x) for x in v.tolist()]


_SCRATCH: list[Any] = []  # one reusable buffer: no page faults from fresh temporaries


def _scratch(rows: int, cols: int) -> Any:
    size = rows * cols
    if not _SCRATCH or _SCRATCH[0].size < size:
        _SCRATCH[:] = [np.empty(max(size, 1 << 16))]
    return _SCRATCH[0][:size].reshape(rows, cols)


def _sub_product(c: Any, a: Any, b: Any, p: int, xp: Any) -> None:
    """c ← (c − a·b) mod p in place; entries of a, b, c of magnitude < p. The inner dimension
    is cut into pieces of at most inner_limit(p), each product exact (module docstring)."""
    k = a.shape[1]
    if k == 0:
        return
    piece = min(k, inner_limit(p))
    _product_bound(piece, p)
    for row in range(0, c.shape[0], ROWS_PER_PRODUCT):
        rows = slice(row, row + ROWS_PER_PRODUCT)
        for start in range(0, k, piece):
            xp.sub_product(c[rows], a[rows, start:start + piece], b[start:start + piece], p)


def _solve_lower(lower: Any, b: Any, p: int, xp: Any) -> None:
    """b ← L⁻¹ b mod p in place, L unit lower triangular (its strict lower part in `lower`;
    diagonal and upper part ignored)."""
    r = lower.shape[0]
    if r <= BASE:  # L⁻¹ of the small triangle (row by row on the identity), then one product
        inverse = xp.identity_like(lower)
        for i in range(1, r):
            _sub_product(inverse[i:i + 1], lower[i:i + 1, :i], inverse[:i], p, xp)
        solved = xp.product(inverse, b)  # inner dimension r ≤ BASE: exact
        _product_bound(r, p)
        xp.reduce(solved, p)
        b[...] = solved
        return
    h = r // 2
    _solve_lower(lower[:h, :h], b[:h], p, xp)
    _sub_product(b[h:], lower[h:, :h], b[:h], p, xp)
    _solve_lower(lower[h:, h:], b[h:], p, xp)


class Singular(Exception):
    """A column without a pivot, where only a full-rank factorisation was asked for."""


def _factor(a: Any, p: int, xp: Any, full: bool) -> tuple[list[int], Any]:
    """Row-echelon LU of `a` (mod p, in place): the pivot columns (increasing) and the row
    order applied to `a` (pivot k in row k, its multipliers below it in its column)."""
    m, n = a.shape
    if n <= BASE:
        return _factor_columns(a, p, xp, full)
    h = n // 2
    left, right = a[:, :h], a[:, h:]
    pivots, order = _factor(left, p, xp, full)
    if not _identity(order, xp):
        xp.take_rows(right, order)
    r = len(pivots)
    if r:
        contiguous = pivots == list(range(r))
        top = left[:r, :r] if contiguous else left[:r][:, pivots]
        below = left[r:, :r] if contiguous else left[r:][:, pivots]
        _solve_lower(top, right[:r], p, xp)
        _sub_product(right[r:], below, right[:r], p, xp)
    if r == m:
        return pivots, order
    more, order2 = _factor(right[r:], p, xp, full)
    if not _identity(order2, xp):
        xp.take_rows(left[r:], order2)
        order = order.clone() if xp.name == "torch" else order.copy()
        order[r:] = order[r:][order2]
    return pivots + [h + c for c in more], order


def _identity(order: Any, xp: Any) -> bool:
    return bool((order == xp.arange(order.shape[0])).all())


def _factor_columns(a: Any, p: int, xp: Any, full: bool) -> tuple[list[int], Any]:
    """Column by column: find a non-zero pivot, swap it up, store the multipliers
    (entry · pivot⁻¹ mod p), update the columns to its right. Products < (p−1)² < 2^53."""
    m, n = a.shape
    _product_bound(1, p)
    order = xp.arange(m)
    pivots: list[int] = []
    r = 0
    for j in range(n):
        if r == m:
            break
        found = xp.first_nonzero(a[r:, j])
        if found is None:
            if full:
                raise Singular
            continue
        if found:
            xp.swap_rows(a, r, r + found)
            order[[r, r + found]] = order[[r + found, r]]
        inverse = pow(int(a[r, j]), -1, p)
        column = a[r + 1:, j]
        column *= inverse
        xp.reduce(column, p)
        if j + 1 < n:
            _sub_product(a[r + 1:, j + 1:], a[r + 1:, j:j + 1], a[r:r + 1, j + 1:], p, xp)
        pivots.append(j)
        r += 1
    return pivots, order


def _parity(order: list[int]) -> int:
    """(−1)^(number of transpositions) of a permutation, by its cycles."""
    seen, sign = [False] * len(order), 1
    for start in range(len(order)):
        if seen[start]:
            continue
        length, i = 0, start
        while not seen[i]:
            seen[i], i, length = True, order[i], length + 1
        if length % 2 == 0:
            sign = -sign
    return sign


def _as_floats(matrix: Any, p: int, xp: Any) -> Any:
    if xp.name == "torch":
        return matrix
    out = np.array(matrix, dtype=np.int64) % p  # exact: integers, reduced before widening
    return out.astype(np.float64)


def det_floats(work: Any, p: int, xp: Any = _Numpy) -> int:
    """det mod p of a square float64 array of integers in [0, p), destroyed in place."""
    n = work.shape[0]
    if not usable(p):
        raise ValueError(f"{p} is not a prime this module can work with")
    if not xp.integers_below(work, p):
        raise ValueError(f"the matrix must hold integers of magnitude below {p}")
    if n == 0:
        return 1
    try:
        pivots, order = _factor(work, p, xp, True)
    except Singular:
        return 0
    if len(pivots) < n:
        return 0
    det = _parity(xp.to_list(order)) % p
    for value in xp.to_list(work.diagonal()):
        det = det * value % p
    return det


def solve_floats(work: Any, p: int) -> list[int] | None:
    """The unique x with A·x ≡ b (mod p), for the n×(n+1) float64 array [A | b] of integers
    in [0, p) (destroyed in place); None when A is singular mod p. The LU of [A | b] leaves
    U | L⁻¹P·b (the elimination of the last column is that of b); back substitution then
    runs in int64: each product of two residues is below p² and a row's sum below n·p² <
    2^63, raised on otherwise."""
    n = work.shape[0]
    if work.shape[1] != n + 1:
        raise ValueError("solve_floats takes an n×(n+1) matrix [A | b]")
    if not usable(p):
        raise ValueError(f"{p} is not a prime this module can work with")
    if not _Numpy.integers_below(work, p):
        raise ValueError(f"the matrix must hold integers of magnitude below {p}")
    if not n * (p - 1) ** 2 + p < 2**63:
        raise ArithmeticError(f"back substitution of order {n} mod {p} overflows int64")
    if n == 0:
        return []
    try:
        pivots, _ = _factor(work, p, _Numpy, True)
    except Singular:
        return None
    if pivots != list(range(n)):
        return None
    upper = np.rint(work).astype(np.int64) % p  # the entries are integers already: exact
    x = np.zeros(n, dtype=np.int64)
    for i in range(n - 1, -1, -1):
        rest = int(upper[i, i + 1:n] @ x[i + 1:]) if i + 1 < n else 0
        x[i] = (int(upper[i, n]) - rest) * pow(int(upper[i, i]), -1, p) % p
    return [int(v) for v in x]


def solve_mod(matrix: Any, rhs: Any, p: int) -> list[int] | None:
    """x with matrix·x ≡ rhs (mod p) for a square integer matrix (numpy, any integer entries:
    reduced exactly first); None when it is singular mod p."""
    a = np.array(matrix, dtype=np.int64) % p
    b = np.array(rhs, dtype=np.int64).reshape(-1, 1) % p
    return solve_floats(np.hstack([a, b]).astype(np.float64), p)


def det_mod(matrix: Any, p: int) -> int:
    """det of an integer matrix mod p (numpy, any integer entries: reduced exactly first)."""
    return det_floats(_as_floats(matrix, p, _Numpy), p)


def rank_mod(matrix: Any, p: int) -> int:
    """rank of an integer matrix over Z/p."""
    return len(pivot_columns(matrix, p))


def pivot_columns(matrix: Any, p: int) -> list[int]:
    """The pivot columns of an integer matrix over Z/p, increasing: each column that is not
    in the span (mod p) of the columns before it. Columns independent mod p are independent
    over Q when p divides no denominator (a non-zero minor mod p is non-zero)."""
    if not usable(p):
        raise ValueError(f"{p} is not a prime this module can work with")
    work = _as_floats(matrix, p, _Numpy)
    if 0 in work.shape:
        return []
    if not _Numpy.integers_below(work, p):
        raise ValueError(f"the matrix must hold integers of magnitude below {p}")
    return _factor(work, p, _Numpy, False)[0]


def bytes_needed(n: int) -> int:
    """Memory for the determinant of order n: the float64 matrix, one band of a product and
    of a row permutation, and a margin for the arrays the minor is built from."""
    return 8 * n * n + 8 * ROWS_PER_PRODUCT * n + 8 * (1 << 22) * 3 + (64 << 20)


def bytes_available() -> int | None:
    """Memory this process may still take: MemAvailable (Linux), lowered by a cgroup limit
    and by RLIMIT_AS where set; None where none of these can be read."""
    found: list[int] = []
    try:
        with open("/proc/meminfo", encoding="ascii") as stream:
            for line in stream:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as stream:
            limit = stream.read().strip()
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as stream:
            current = int(stream.read().strip())
        if limit != "max":
            found.append(int(limit) - current)
    except (OSError, ValueError):
        pass
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            with open("/proc/self/statm", encoding="ascii") as stream:
                size = int(stream.read().split()[0]) * resource.getpagesize()
            found.append(soft - size)
    except (OSError, ValueError, ImportError):
        pass
    return min(found) if found else None


def product_minor(left: np.ndarray, right: np.ndarray, row_pos: np.ndarray,
                  col_pos: np.ndarray, last: np.ndarray, p: int) -> np.ndarray:
    """The (m+1)×(m+1) matrix M[t, i] = left[row_pos[t], i]·right[i, col_pos[t]] mod p
    (i < m), M[t, m] = last[t], as float64 integers in [0, p): the minor of
    [vec(d_i u_iᵀ) | vec S] on the coordinates (row_pos[t], col_pos[t]). Built a band of rows
    at a time in int64 (products < p² < 2^63), so the only full-size array is the result."""
    size = len(row_pos)
    m = left.shape[1]
    out = np.empty((size, m + 1), dtype=np.float64)
    left, right = left % p, right % p
    step = max(1, (1 << 22) // max(1, m))
    for start in range(0, size, step):
        band = slice(start, start + step)
        out[band, :m] = left[row_pos[band], :] * right[:, col_pos[band]].T % p
    out[:, m] = np.asarray(last, dtype=np.int64) % p
    return out


def product_mod(a: np.ndarray, b: np.ndarray, p: int) -> np.ndarray:
    """(a·b) mod p as float64 integers in [0, p), for float64 a, b holding integers in [0, p):
    the inner dimension is cut into pieces of at most inner_limit(p) (each product exact,
    module docstring), reduced in between."""
    k = a.shape[1]
    out = np.zeros((a.shape[0], b.shape[1]))
    piece = max(1, min(k, inner_limit(p)))
    _product_bound(piece, p)
    for start in range(0, k, piece):
        out += a[:, start:start + piece] @ b[start:start + piece]
        _Numpy.reduce(out, p)  # |out| < p + piece·(p−1)² < 2^53 before each reduction
    return np.mod(out, p, out=out)


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
    target: T mod p (d×d), or an integer t for T = t·I. Every step is an exact product mod p
    (`product_mod`) or an entry-wise product of two residues (< p² < 2^53), reduced."""
    d, m = down.shape
    down_f = np.asarray(down, dtype=np.float64) % p
    up_t = np.ascontiguousarray(np.asarray(up, dtype=np.float64).T % p)
    matrix = None if isinstance(target, int | np.integer) else \
        np.asarray(target, dtype=np.float64) % p
    out = np.empty((m, m + 1))
    bands = zip(_random_bands(seed, 0, m, d, p, SYSTEM_BAND),
                _random_bands(seed, 1, m, d, p, SYSTEM_BAND), strict=True)
    for n, (left, right) in enumerate(bands):
        rows = slice(n * SYSTEM_BAND, n * SYSTEM_BAND + left.shape[0])
        block = out[rows, :m]
        np.multiply(product_mod(left, down_f, p), product_mod(right, up_t, p), out=block)
        _Numpy.reduce(block, p)
        if matrix is None:  # p_jᵀ (t·I) q_j = t·(p_j·q_j); a sum of d residues < d·p
            rhs = np.mod(np.mod(left * right, p).sum(axis=1), p) * (int(target) % p)
        else:
            rhs = (np.mod(product_mod(left, matrix, p) * right, p)).sum(axis=1)
        out[rows, m] = np.mod(rhs, p)
    return np.mod(out, p, out=out)


def torch_backend() -> Any | None:
    """The same steps on a CUDA device (torch float64), or None without torch or a GPU."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None

    class _Torch(_Numpy):  # product and swap_rows as for numpy
        name = "torch"

        @staticmethod
        def reduce(x: Any, p: int) -> None:
            x -= torch.round(x * (1.0 / p)) * p

        @staticmethod
        def sub_product(c: Any, a: Any, b: Any, p: int) -> None:
            c -= a @ b
            c -= torch.round(c * (1.0 / p)) * p

        @staticmethod
        def integers_below(a: Any, p: int) -> bool:
            return bool((a.abs() < p).all() and (torch.round(a) == a).all())

        @staticmethod
        def first_nonzero(column: Any) -> int | None:
            found = torch.nonzero(column)
            return int(found[0, 0]) if found.shape[0] else None

        @staticmethod
        def take_rows(a: Any, order: Any) -> None:
            a.copy_(a[order])

        @staticmethod
        def arange(n: int) -> Any:
            return torch.arange(n, device="cuda")

        @staticmethod
        def identity_like(a: Any) -> Any:
            return torch.eye(a.shape[0], dtype=a.dtype, device=a.device)

        @staticmethod
        def to_list(v: Any) -> list[int]:
            return [int(x) for x in v.cpu().tolist()]

    # TF32 never applies to float64; ask for full precision regardless
    torch.backends.cuda.matmul.allow_tf32 = False
    return _Torch


def det_floats_gpu(work: np.ndarray, p: int) -> int | None:
    """det_floats on the GPU (the array copied to the device), or None without one."""
    backend = torch_backend()
    if backend is None:
        return None
    import torch

    return det_floats(torch.from_numpy(work).to("cuda"), p, backend)


GPU_FROM = 2048  # order from which a CUDA device, when present, takes the determinant


def det_auto(work: np.ndarray, p: int) -> int:
    """det_floats, on a CUDA device (torch) when one is present, the order is at least
    GPU_FROM and ABSORB_FORMAL_GPU is not 0; else on the CPU. The same steps either way.
    torch is imported only where an NVIDIA driver is visible (it costs seconds)."""
    if (work.shape[0] >= GPU_FROM and os.environ.get("ABSORB_FORMAL_GPU", "1") != "0"
            and os.path.exists("/proc/driver/nvidia/version")):
        found = det_floats_gpu(work, p)
        if found is not None:
            return found
    return det_floats(work, p)
