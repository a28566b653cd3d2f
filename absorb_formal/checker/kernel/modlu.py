"""Exact linear algebra modulo a small prime, carried out by float64 BLAS (the idea of
FFLAS-FFPACK): determinants, ranks, pivot columns, solutions and left null vectors of integer
matrices mod p. This is the checker's one trusted modular component; the prover uses it too
(through `numeric/accelerated.py`, which adds BLAS thread control and a CUDA backend around
these same steps), so there is one implementation, tested against FLINT
(tests/checker/test_modular_lu_against_flint.py), rather than two copies that could drift apart.

Why floats are exact here. Every value this module keeps is an integer of magnitude at most
p − 1, stored in a float64 (53-bit significand: every integer of magnitude below 2^53 is
represented exactly, and a sum, difference or product of such integers whose exact value is
below 2^53 in magnitude is computed without rounding). A matrix product of an n×k and a k×n
block of such entries has every partial sum, in any summation order, with or without fused
multiply-add, of magnitude at most k·(p−1)²; so when k·(p−1)² + p < 2^53 every dot product,
and the subtraction from an entry of magnitude < p that follows, is exact. Reduction mod p
is x − p·rint(x·fl(1/p)): the computed quotient is within 0.5 + 2/p < 1 of x/p, so the
result is an integer ≡ x of magnitude ≤ p − 1, and every step of it is exact (q·p and
x − q·p are integers below 2^53). `product_bound` raises when the bound fails, and every
product splits its inner dimension into pieces of at most `inner_limit(p)` (2,048 for the
primes below 2^21 used here), reducing in between (delayed reduction). This is exact integer
arithmetic on float hardware, not a float view of any weight: the inputs are residues
computed exactly from the weights' bits. (It assumes a classical matrix product — BLAS
dgemm, numpy's own loop, cuBLAS — never Strassen-like schemes, whose intermediate sums
are bounded differently.)

Backends. Every step goes through a backend `xp` (`Numpy`, the checker's plain path): it only
says how to multiply, reduce and move rows, so any backend computes the same residues. The
certificates' systems built from these products are in `systems.py`; the out-of-core LU
(decide/outofcore.py) drives `factor`, `solve_lower` and `sub_product` panel by panel.

Algorithm. A left-looking block LU without row exchanges (Crout): per block column of BLOCK
columns, one product brings its panel up to date, the diagonal block is eliminated column by
column, and products with its triangles' inverses give its part of L and U (2n³/3 flops in
BLAS plus O(n²·BLOCK)). A zero pivot hands the Schur complement to a recursive, rank-revealing
LU with row exchanges (Toledo's recursion on columns). Memory: the matrix plus bounded
temporaries.

`functional_floats`: from M[order] = L·U, the last row v of L⁻¹ gives y with
yᵀ·M = (0, …, 0, U[n−1, n−1]), found with one back-substitution and checked with one product.
"""

from __future__ import annotations

from typing import Any

import numpy as np

EXACT = 2**53  # float64 represents every integer of magnitude below this exactly
BASE = 16  # columns below which the recursive (pivoting) elimination goes column by column
BLOCK = 128  # columns of a diagonal block of the left-looking LU without row exchanges
ROWS_PER_PRODUCT = 1024  # rows of a product computed at once (bounds the temporaries)
SEARCH_FROM = 2**21  # minor primes: the largest primes below 2^21, in decreasing order


def inner_limit(p: int) -> int:
    """The longest inner dimension k with k·(p−1)² + p < 2^53 (exact float64 dot products)."""
    return (EXACT - 1 - p) // ((p - 1) ** 2)


def product_bound(k: int, p: int) -> None:
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


# ---- the float64 backend: numpy (numeric/accelerated.py subclasses it) ---------------

class Numpy:
    """The plain numpy backend: each product on numpy's own BLAS, as configured."""

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
        """Every entry an integer of magnitude below p (what the bound assumes); a band of
        rows at a time (bounded temporaries)."""
        step = max(1, (1 << 18) // max(1, a.shape[1] if a.ndim > 1 else 1))
        for start in range(0, a.shape[0], step):
            band = a[start:start + step]
            if not ((np.abs(band) < p).all() and (np.rint(band) == band).all()):
                return False
        return True

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

    @staticmethod
    def copy(a: Any) -> Any:
        return a.copy()

    @staticmethod
    def strict_lower(a: Any) -> Any:
        return np.tril(a, -1)

    @staticmethod
    def strict_upper(a: Any) -> Any:
        return np.triu(a, 1)

    @staticmethod
    def from_list(values: list[int], like: Any) -> Any:
        return np.array(values, dtype=np.float64)

    @staticmethod
    def zeros(n: int, like: Any) -> Any:
        return np.zeros(n, dtype=np.float64)


_SCRATCH: list[Any] = []  # one reusable buffer: no page faults from fresh temporaries


def _scratch(rows: int, cols: int) -> Any:
    size = rows * cols
    if not _SCRATCH or _SCRATCH[0].size < size:
        _SCRATCH[:] = [np.empty(max(size, 1 << 16))]
    return _SCRATCH[0][:size].reshape(rows, cols)


def sub_product(c: Any, a: Any, b: Any, p: int, xp: Any) -> None:
    """c ← (c − a·b) mod p in place; entries of a, b, c of magnitude < p. The inner dimension
    is cut into pieces of at most inner_limit(p), each product exact (module docstring)."""
    k = a.shape[1]
    if k == 0:
        return
    piece = min(k, inner_limit(p))
    product_bound(piece, p)
    for row in range(0, c.shape[0], ROWS_PER_PRODUCT):
        rows = slice(row, row + ROWS_PER_PRODUCT)
        for start in range(0, k, piece):
            xp.sub_product(c[rows], a[rows, start:start + piece], b[start:start + piece], p)


def solve_lower(lower: Any, b: Any, p: int, xp: Any) -> None:
    """b ← L⁻¹ b mod p in place, L unit lower triangular (its strict lower part in `lower`;
    diagonal and upper part ignored)."""
    r = lower.shape[0]
    if r <= BASE:  # L⁻¹ of the small triangle (row by row on the identity), then one product
        inverse = xp.identity_like(lower)
        for i in range(1, r):
            sub_product(inverse[i:i + 1], lower[i:i + 1, :i], inverse[:i], p, xp)
        product_bound(r, p)
        solved = xp.product(inverse, b)  # inner dimension r ≤ BASE: exact
        xp.reduce(solved, p)
        b[...] = solved
        return
    h = r // 2
    solve_lower(lower[:h, :h], b[:h], p, xp)
    sub_product(b[h:], lower[h:, :h], b[:h], p, xp)
    solve_lower(lower[h:, h:], b[h:], p, xp)


def _times(a: Any, b: Any, p: int, xp: Any) -> Any:
    """(a·b) mod p as a new array; inner dimension at most inner_limit(p) (a small square
    factor: the triangle inverses)."""
    product_bound(a.shape[1], p)
    out = xp.product(a, b)
    xp.reduce(out, p)
    return out


def _right_multiply(x: Any, t: Any, p: int, xp: Any) -> None:
    """x ← x·t mod p in place, t square of order ≤ inner_limit(p); a band of rows at a time
    (each band's product is taken before it is overwritten)."""
    product_bound(t.shape[0], p)
    for row in range(0, x.shape[0], ROWS_PER_PRODUCT):
        band = x[row:row + ROWS_PER_PRODUCT]
        band[...] = _times(band, t, p, xp)


def _left_multiply(t: Any, x: Any, p: int, xp: Any) -> None:
    """x ← t·x mod p in place, t square of order ≤ inner_limit(p); a band of columns at a
    time."""
    product_bound(t.shape[0], p)
    step = max(1, (1 << 22) // max(1, x.shape[0]))
    for col in range(0, x.shape[1], step):
        band = x[:, col:col + step]
        band[...] = _times(t, band, p, xp)


def _eliminate_block(t: Any, p: int, xp: Any) -> bool:
    """t ← L\\U in place (unit lower L below the diagonal, U on and above it), with no row
    exchanges; False at a zero pivot (t is then partly eliminated). Delayed reduction: after
    j rank-one updates (factors reduced, of magnitude < p) an entry has magnitude at most
    (p − 1) + j·(p − 1)², below 2^53 for j ≤ inner_limit(p) (raised on), and only the row and
    column about to be used are reduced."""
    b = t.shape[0]
    product_bound(b, p)
    for j in range(b):
        row, column = t[j, j:], t[j + 1:, j]
        xp.reduce(row, p)
        pivot = int(row[0]) % p
        if pivot == 0:
            return False
        if j + 1 < b:
            xp.reduce(column, p)
            column *= pow(pivot, -1, p)
            xp.reduce(column, p)
            t[j + 1:, j + 1:] -= column[:, None] * row[None, 1:]
    return True


def _inverse_unit_lower(t: Any, p: int, xp: Any) -> Any:
    """L⁻¹ mod p, L = I + N unit lower triangular (N: the strict lower part of t, order
    ≤ inner_limit(p)). By halves, [[A, 0], [C, B]]⁻¹ = [[A⁻¹, 0], [−B⁻¹·C·A⁻¹, B⁻¹]]; below
    BASE rows L⁻¹ = Σ_k (−N)^k = Π_i (I + (−N)^(2^i)), N being nilpotent."""
    n = t.shape[0]
    if n > BASE:
        h = n // 2
        out = xp.identity_like(t)
        out[:h, :h] = _inverse_unit_lower(t[:h, :h], p, xp)
        out[h:, h:] = _inverse_unit_lower(t[h:, h:], p, xp)
        out[h:, :h] = -_times(out[h:, h:], _times(t[h:, :h], out[:h, :h], p, xp), p, xp)
        return out
    return _series(-xp.strict_lower(t), p, xp)


def _series(power: Any, p: int, xp: Any) -> Any:
    """Σ_k M^k mod p for M = `power` strictly triangular (nilpotent, order n ≤ BASE): the
    terms below 2^i summed by doubling, Σ_{k < 2s} M^k = Σ_{k < s} M^k · (I + M^s)."""
    result = xp.identity_like(power) + power
    span = 2
    while span < power.shape[0]:  # result = Σ_{k < span} M^k
        power = _times(power, power, p, xp)
        result = result + _times(result, power, p, xp)
        xp.reduce(result, p)
        span *= 2
    return result


def _inverse_upper(t: Any, p: int, xp: Any) -> Any:
    """U⁻¹ mod p, U the upper triangle of t with a non-zero diagonal. By halves,
    [[A, C], [0, B]]⁻¹ = [[A⁻¹, −A⁻¹·C·B⁻¹], [0, B⁻¹]]; below BASE rows U = (I + N)·D with N
    strictly upper (N = U·D⁻¹ − I), so U⁻¹ = D⁻¹·(I + N)⁻¹ = D⁻¹·Σ_k (−N)^k."""
    n = t.shape[0]
    if n > BASE:
        h = n // 2
        out = xp.identity_like(t)
        out[:h, :h] = _inverse_upper(t[:h, :h], p, xp)
        out[h:, h:] = _inverse_upper(t[h:, h:], p, xp)
        out[:h, h:] = -_times(out[:h, :h], _times(t[:h, h:], out[h:, h:], p, xp), p, xp)
        return out
    inverses = [pow(int(v) % p, -1, p) for v in xp.to_list(t.diagonal())]
    d_inv = xp.from_list(inverses, t)
    power = xp.strict_upper(t) * d_inv[None, :]  # N = strict part of U·D⁻¹
    xp.reduce(power, p)
    result = _series(-power, p, xp)
    result *= d_inv[:, None]
    xp.reduce(result, p)
    return result


def _crout(a: Any, p: int, xp: Any) -> int:
    """LU of the square `a` without row exchanges, in place, a block column at a time
    (left-looking): returns n when done (a = L\\U), else the first row k0 of the block whose
    elimination met a zero pivot — then a[:, :k0] holds L's first columns, a[:k0] U's first
    rows, and a[k0:, k0:] the Schur complement of a[:k0, :k0] (reduced), the rest for the
    pivoting LU."""
    n = a.shape[0]
    b = min(BLOCK, inner_limit(p))
    for k0 in range(0, n, b):
        k1 = min(k0 + b, n)
        sub_product(a[k0:, k0:k1], a[k0:, :k0], a[:k0, k0:k1], p, xp)  # panel up to date
        block = xp.copy(a[k0:k1, k0:k1])
        if not _eliminate_block(block, p, xp):
            sub_product(a[k0:, k1:], a[k0:, :k0], a[:k0, k1:], p, xp)  # the Schur complement
            return k0
        a[k0:k1, k0:k1] = block
        if k1 < n:
            sub_product(a[k0:k1, k1:], a[k0:k1, :k0], a[:k0, k1:], p, xp)
            _left_multiply(_inverse_unit_lower(block, p, xp), a[k0:k1, k1:], p, xp)  # U
            _right_multiply(a[k1:, k0:k1], _inverse_upper(block, p, xp), p, xp)  # L
    return n


def _lu(a: Any, p: int, xp: Any) -> Any | None:
    """a[order] = L·U in place (L unit lower below the diagonal, U on and above it) for a
    square `a`: the row order, or None when `a` is singular mod p. Without row exchanges
    while every diagonal block has its pivots (`_crout`), the rest by the pivoting LU."""
    n = a.shape[0]
    done = _crout(a, p, xp)
    order = xp.arange(n)
    if done == n:
        return order
    try:
        pivots, rest = factor(a[done:, done:], p, xp, True)
    except Singular:
        return None
    if len(pivots) < n - done:
        return None
    if not _identity(rest, xp):
        xp.take_rows(a[done:, :done], rest)
        order[done:] = done + rest
    return order


class Singular(Exception):
    """A column without a pivot, where only a full-rank factorisation was asked for."""


def factor(a: Any, p: int, xp: Any, full: bool) -> tuple[list[int], Any]:
    """Row-echelon LU of `a` (mod p, in place): the pivot columns (increasing) and the row
    order applied to `a` (pivot k in row k, its multipliers below it in its column)."""
    m, n = a.shape
    if n <= BASE:
        return _factor_columns(a, p, xp, full)
    h = n // 2
    left, right = a[:, :h], a[:, h:]
    pivots, order = factor(left, p, xp, full)
    if not _identity(order, xp):
        xp.take_rows(right, order)
    r = len(pivots)
    if r:
        contiguous = pivots == list(range(r))
        top = left[:r, :r] if contiguous else left[:r][:, pivots]
        below = left[r:, :r] if contiguous else left[r:][:, pivots]
        solve_lower(top, right[:r], p, xp)
        sub_product(right[r:], below, right[:r], p, xp)
    if r == m:
        return pivots, order
    more, order2 = factor(right[r:], p, xp, full)
    if not _identity(order2, xp):
        xp.take_rows(left[r:], order2)
        order = xp.copy(order)
        order[r:] = order[r:][order2]
    return pivots + [h + c for c in more], order


def _identity(order: Any, xp: Any) -> bool:
    return bool((order == xp.arange(order.shape[0])).all())


def _factor_columns(a: Any, p: int, xp: Any, full: bool) -> tuple[list[int], Any]:
    """Column by column: find a non-zero pivot, swap it up, store the multipliers
    (entry · pivot⁻¹ mod p), update the columns to its right. Products < (p−1)² < 2^53."""
    m, n = a.shape
    product_bound(1, p)
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
            sub_product(a[r + 1:, j + 1:], a[r + 1:, j:j + 1], a[r:r + 1, j + 1:], p, xp)
        pivots.append(j)
        r += 1
    return pivots, order


def parity(order: list[int]) -> int:
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


def _as_floats(matrix: Any, p: int) -> Any:
    out = np.array(matrix, dtype=np.int64) % p  # exact: integers, reduced before widening
    return out.astype(np.float64)


def _checked(work: Any, p: int, xp: Any) -> None:
    if not usable(p):
        raise ValueError(f"{p} is not a prime this module can work with")
    if not xp.integers_below(work, p):
        raise ValueError(f"the matrix must hold integers of magnitude below {p}")


def det_floats(work: Any, p: int, xp: Any = Numpy) -> int:
    """det mod p of a square float64 array of integers of magnitude < p, destroyed in
    place."""
    _checked(work, p, xp)
    if work.shape[0] == 0:
        return 1
    order = _lu(work, p, xp)
    if order is None:
        return 0
    det = parity(xp.to_list(order)) % p
    for value in xp.to_list(work.diagonal()):
        det = det * value % p
    return det


def last_row_of_inverse(lower: Any, p: int, xp: Any) -> Any:
    """v with vᵀ·L = e_lastᵀ mod p (the last row of L⁻¹), L unit lower triangular (its strict
    lower part in `lower`), in [0, p). Backwards: v_j = −Σ_{i>j} v_i·L[i, j], by blocks
    of BLOCK rows: the solved entries' share by one product (exact pieces), then within the
    block one dot product of fewer than BLOCK terms per entry (below BLOCK·(p−1)² < 2^53)."""
    n = lower.shape[0]
    v = xp.zeros(n, lower)
    v[n - 1] = 1
    b = min(BLOCK, inner_limit(p))
    product_bound(b, p)
    for end in range(n - 1, -1, -b):  # block [start, end] (end included), right to left
        start = max(0, end - b + 1)
        if end + 1 < n:  # contributions of the solved v[end+1:] to this block's entries
            part = v[start:end + 1][None, :]
            sub_product(part, v[end + 1:][None, :], lower[end + 1:, start:end + 1], p, xp)
        for j in range(end - 1, start - 1, -1):  # within the block: one entry at a time
            share = v[j + 1:end + 1] @ lower[j + 1:end + 1, j]
            v[j] = (v[j] - share) % p  # integers below 2^53: an exact float remainder
    xp.reduce(v, p)
    v[v < 0] += p
    return v


def functional_floats(work: Any, p: int, xp: Any = Numpy) -> tuple[list[int], int] | None:
    """(y, c) with yᵀ·M ≡ (0, …, 0, c) mod p and c ≠ 0, M the square float64 array of
    integers of magnitude < p (destroyed in place), or None when M is singular mod p. y is
    orthogonal to every column but the last: the last column is outside the span of the
    others mod p. From M[order] = L·U: v = last row of L⁻¹, y[order] = v, c = U[n−1, n−1]."""
    _checked(work, p, xp)
    n = work.shape[0]
    if n == 0:
        return None
    order = _lu(work, p, xp)
    if order is None:
        return None
    v = xp.to_list(last_row_of_inverse(work, p, xp))
    y = [0] * n
    for position, row in enumerate(xp.to_list(order)):
        y[row] = v[position]
    return y, int(work[n - 1, n - 1]) % p


def solve_floats(work: Any, p: int, xp: Any = Numpy) -> list[int] | None:
    """The unique x with A·x ≡ b (mod p), for the n×(n+1) float64 array [A | b] of integers
    in [0, p) (destroyed in place); None when A is singular mod p. A[order] = L·U by the LU
    above (`_lu`), then b[order] ← L⁻¹·b[order] (`solve_lower`, exact products), and back
    substitution in int64: each product of two residues is below p² and a row's sum below
    n·p² < 2^63, raised on otherwise. `xp`: a numpy backend (the back substitution is
    numpy's)."""
    n = work.shape[0]
    if work.shape[1] != n + 1:
        raise ValueError("solve_floats takes an n×(n+1) matrix [A | b]")
    if not usable(p):
        raise ValueError(f"{p} is not a prime this module can work with")
    if not Numpy.integers_below(work, p):
        raise ValueError(f"the matrix must hold integers of magnitude below {p}")
    if not n * (p - 1) ** 2 + p < 2**63:
        raise ArithmeticError(f"back substitution of order {n} mod {p} overflows int64")
    if n == 0:
        return []
    square = work[:, :n]
    order = _lu(square, p, xp)
    if order is None:
        return None
    rhs = work[order, n:]  # a copy, in the LU's row order
    solve_lower(square, rhs, p, xp)
    upper = np.rint(square).astype(np.int64) % p  # the entries are integers already: exact
    y = np.rint(rhs[:, 0]).astype(np.int64) % p
    x = np.zeros(n, dtype=np.int64)
    for i in range(n - 1, -1, -1):
        rest = int(upper[i, i + 1:n] @ x[i + 1:]) if i + 1 < n else 0
        x[i] = (int(y[i]) - rest) * pow(int(upper[i, i]), -1, p) % p
    return [int(v) for v in x]


def solve_mod(matrix: Any, rhs: Any, p: int) -> list[int] | None:
    """x with matrix·x ≡ rhs (mod p) for a square integer matrix (numpy, any integer entries:
    reduced exactly first); None when it is singular mod p."""
    a = np.array(matrix, dtype=np.int64) % p
    b = np.array(rhs, dtype=np.int64).reshape(-1, 1) % p
    return solve_floats(np.hstack([a, b]).astype(np.float64), p)


def det_mod(matrix: Any, p: int, xp: Any = Numpy) -> int:
    """det of an integer matrix mod p (numpy, any integer entries: reduced exactly first)."""
    return det_floats(_as_floats(matrix, p), p, xp)


def rank_mod(matrix: Any, p: int) -> int:
    """rank of an integer matrix over Z/p."""
    return len(pivot_columns(matrix, p))


def pivot_columns(matrix: Any, p: int, xp: Any = Numpy) -> list[int]:
    """The pivot columns of an integer matrix over Z/p, increasing: each column that is not
    in the span (mod p) of the columns before it. Columns independent mod p are independent
    over Q when p divides no denominator (a non-zero minor mod p is non-zero)."""
    if not usable(p):
        raise ValueError(f"{p} is not a prime this module can work with")
    work = _as_floats(matrix, p)
    if 0 in work.shape:
        return []
    if not Numpy.integers_below(work, p):
        raise ValueError(f"the matrix must hold integers of magnitude below {p}")
    return factor(work, p, xp, False)[0]


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


def product_mod(a: np.ndarray, b: np.ndarray, p: int) -> np.ndarray:
    """(a·b) mod p as float64 integers in [0, p), for float64 a, b holding integers in [0, p):
    the inner dimension is cut into pieces of at most inner_limit(p) (each product exact,
    module docstring), reduced in between."""
    k = a.shape[1]
    out = np.zeros((a.shape[0], b.shape[1]))
    piece = max(1, min(k, inner_limit(p)))
    product_bound(piece, p)
    for start in range(0, k, piece):
        out += a[:, start:start + piece] @ b[start:start + piece]
        Numpy.reduce(out, p)  # |out| < p + piece·(p−1)² < 2^53 before each reduction
    return np.mod(out, p, out=out)
