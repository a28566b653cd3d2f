"""Facts about the skip S that the rules need: S^L ≠ 0, a direction x0 with S^L x0 ≠ 0, rank.

A skip `c·I` is handled without building a d×d matrix, so families with huge `dim` are
decided in constant time.
"""

from __future__ import annotations

from fractions import Fraction

from ..model import linalg
from ..model.blocks import Skip


def power(skip: Skip, n: int) -> linalg.Rows:
    """S^n as exact rows (only for matrix skips or small d); S itself for n = 1 (no product:
    a loaded d = 1024 skip would cost a minute of rational products for nothing)."""
    if n == 0:
        return linalg.identity(skip.dim)
    result = tuple(tuple(row) for row in skip.rows())
    for _ in range(n - 1):
        result = linalg.matmul(skip.rows(), result)
    return result


def power_nonzero(skip: Skip, n: int) -> bool:
    if skip.matrix is None:
        return skip.scale != 0
    return not linalg.is_zero(power(skip, n))


def direction(skip: Skip, n: int) -> tuple[int, Fraction] | None:
    """(j, c): x0 = e_j has S^n x0 ≠ 0, c = a non-zero entry of that column; None if S^n = 0.

    Returned as an index so that a huge identity skip needs no d-vector."""
    if skip.matrix is None:
        return (0, skip.scale ** n) if skip.scale else None
    rows = power(skip, n)
    for j in range(skip.dim):
        for row in rows:
            if row[j] != 0:
                return j, row[j]
    return None


def rank(skip: Skip) -> int:
    if skip.matrix is None:
        return skip.dim if skip.scale else 0
    return linalg.rank(skip.matrix.rows)
