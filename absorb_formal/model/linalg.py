"""Exact rational linear algebra for the prover, on python-flint's `fmpq_mat`.

Matrices come in and go out as tuples of `Fraction` rows; flint does the elimination, in C:
one to two orders of magnitude faster than sympy's matrices at the sizes the rules meet. The
checker has its own, independent, pure-Python elimination.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import flint

Rows = tuple[tuple[Fraction, ...], ...]
Vec = tuple[Fraction, ...]
ZERO = Fraction(0)


def _q(x: Fraction | int) -> flint.fmpq | int:
    if type(x) is int:
        return x
    x = Fraction(x)
    if x.denominator == 1:
        return x.numerator  # flint takes ints directly: a third of the conversion cost
    return flint.fmpq(x.numerator, x.denominator)


def to_flint(rows: Sequence[Sequence[Fraction]], ncols: int | None = None) -> flint.fmpq_mat:
    n = len(rows)
    m = ncols if ncols is not None else (len(rows[0]) if n else 0)
    return flint.fmpq_mat(n, m, [_q(v) for row in rows for v in row])


def from_flint(mat: flint.fmpq_mat) -> Rows:
    return tuple(tuple(Fraction(int(v.p), int(v.q)) for v in row) for row in mat.tolist())


def rank(rows: Sequence[Sequence[Fraction]]) -> int:
    if not rows or not rows[0]:
        return 0
    return int(to_flint(rows).rank())


def rref(rows: Sequence[Sequence[Fraction]]) -> tuple[Rows, list[int]]:
    """Reduced row echelon form and its pivot columns."""
    if not rows or not rows[0]:
        return tuple(tuple(r) for r in rows), []
    reduced, r = to_flint(rows).rref()
    out = from_flint(reduced)
    pivots = []
    for row in out[:r]:
        pivots.append(next(j for j, v in enumerate(row) if v != 0))
    return out, pivots


def transpose(rows: Sequence[Sequence[Fraction]]) -> Rows:
    return tuple(zip(*rows, strict=True)) if rows else ()


def matmul(a: Sequence[Sequence[Fraction]], b: Sequence[Sequence[Fraction]]) -> Rows:
    """a·b, multiplied by flint (Fraction sums cost 10-100× more at d = 16, m = 256)."""
    if not a or not b or not b[0]:
        return tuple(tuple(ZERO for _ in (b[0] if b else ())) for _ in a)
    return from_flint(to_flint(a) * to_flint(b))


def sum_of_outers(left: Sequence[Sequence[Fraction]], right: Sequence[Sequence[Fraction]],
                  scales: Sequence[Fraction]) -> Rows:
    """Σ_ℓ scales_ℓ · left_ℓ right_ℓᵀ (left_ℓ, right_ℓ as sequences), as one product."""
    if not left:
        return ()
    columns = transpose([tuple(c * x for x in vec) for c, vec in zip(scales, left,
                                                                      strict=True)])
    return matmul(columns, right)


def add(a: Sequence[Sequence[Fraction]], b: Sequence[Sequence[Fraction]],
        scale: Fraction = Fraction(1)) -> Rows:
    """a + scale·b."""
    return tuple(tuple(x + scale * y for x, y in zip(ra, rb, strict=True))
                 for ra, rb in zip(a, b, strict=True))


def outer(u: Sequence[Fraction], v: Sequence[Fraction], scale: Fraction = Fraction(1)) -> Rows:
    """scale · u vᵀ."""
    return tuple(tuple(scale * x * y for y in v) for x in u)


def zeros(n: int, m: int) -> Rows:
    return tuple(tuple(ZERO for _ in range(m)) for _ in range(n))


def identity(n: int, scale: Fraction = Fraction(1)) -> Rows:
    return tuple(tuple(scale if i == j else ZERO for j in range(n)) for i in range(n))


def is_zero(rows: Sequence[Sequence[Fraction]]) -> bool:
    return all(v == 0 for row in rows for v in row)


def nullspace(rows: Sequence[Sequence[Fraction]], ncols: int) -> list[Vec]:
    """A basis of {x : A x = 0} (A with `ncols` columns)."""
    if not rows:
        return [tuple(Fraction(int(i == j)) for j in range(ncols)) for i in range(ncols)]
    reduced, pivots = rref(rows)
    return _kernel(reduced, pivots, ncols)


def _kernel(reduced: Rows, pivots: list[int], ncols: int) -> list[Vec]:
    """The nullspace read off a reduced row echelon form: one vector per free column."""
    free = [j for j in range(ncols) if j not in pivots]
    basis = []
    for f in free:
        x = [ZERO] * ncols
        x[f] = Fraction(1)
        for i, p in enumerate(pivots):
            x[p] = -reduced[i][f]
        basis.append(tuple(x))
    return basis


def particular(columns: Sequence[Vec], target: Vec) -> Vec | None:
    """One c with Σ c_j columns_j = target, or None; reads only the RREF's last column (the
    generic engine's cofactor systems have ~300k entries: converting all of them back to
    Fractions cost more than the elimination)."""
    n, q = len(target), len(columns)
    augmented = [tuple(columns[j][i] for j in range(q)) + (target[i],) for i in range(n)]
    if not augmented:
        return tuple(ZERO for _ in range(q))
    reduced, rank = to_flint(augmented).rref()
    c = [ZERO] * q
    pivot = -1
    for i in range(int(rank)):  # pivots increase along the rows
        pivot = next(j for j in range(pivot + 1, q + 1) if reduced[i, j] != 0)
        if pivot == q:
            return None
        value = reduced[i, q]
        c[pivot] = Fraction(int(value.p), int(value.q))
    return tuple(c)


def solve_affine(columns: Sequence[Vec], target: Vec) -> tuple[Vec | None, list[Vec]]:
    """All c with Σ c_j columns_j = target: (particular solution or None, nullspace basis)."""
    n = len(target)
    q = len(columns)
    augmented = [tuple(columns[j][i] for j in range(q)) + (target[i],) for i in range(n)]
    reduced, pivots = rref(augmented)
    if q in pivots:
        return None, []
    c = [ZERO] * q
    for i, p in enumerate(pivots):
        c[p] = reduced[i][q]
    # The coefficient part of the RREF is already reduced: re-running the elimination on its
    # large entries cost 6.5 s of 6.6 s at d = 8, m = 128 (benchmarks/RESULTS.md, profiling).
    return tuple(c), _kernel(reduced, pivots, q)


def separating_vector(columns: Sequence[Vec], target: Vec) -> Vec | None:
    """y with y·column = 0 for every column and y·target ≠ 0, if target ∉ span(columns)."""
    n = len(target)
    if columns:
        left = nullspace([tuple(col) for col in columns], n)
    else:
        left = [tuple(Fraction(int(i == j)) for j in range(n)) for i in range(n)]
    for y in left:
        if dot(y, target) != 0:
            return y
    return None


PRIME = 2_147_483_647  # 2^31 − 1: residues multiply within int64


def residue(x: Fraction, p: int = PRIME) -> int | None:
    """x mod p (x's denominator inverted), or None when p divides the denominator."""
    if x.denominator % p == 0:
        return None
    return x.numerator * pow(x.denominator, -1, p) % p


def quick_separation(columns: Sequence[Vec], target: Vec) -> Vec | None:
    """A separating y (y·column = 0 for every column, y·target = 1) when the columns and the
    target are independent modulo a prime — then they are independent over Q as well.

    The exact work is one square solve on q+1 coordinates picked modulo p (d = 16, m = 128:
    0.05 s instead of a 1.1 s rational nullspace). None when the test does not apply."""
    n, q = len(target), len(columns)
    if q + 1 > n:
        return None
    rows = [tuple(col[i] for col in columns) + (target[i],) for i in range(n)]
    found = [residue(r[j]) for j in range(q + 1) for r in rows]
    entries = [v for v in found if v is not None]
    if len(entries) < len(found):
        return None
    mod = flint.nmod_mat(q + 1, n, entries, PRIME)
    reduced, rank = mod.rref()
    if rank < q + 1:
        return None
    picked = [next(i for i in range(n) if int(reduced[r, i]) != 0) for r in range(q + 1)]
    square = to_flint([rows[i] for i in picked]).transpose()  # (q+1) × (q+1), invertible
    rhs = flint.fmpq_mat(q + 1, 1, [0] * q + [1])
    solution = [Fraction(int(v.p), int(v.q)) for v in square.solve(rhs).entries()]
    y = [ZERO] * n
    for i, value in zip(picked, solution, strict=True):
        y[i] = value
    y_vec = tuple(y)
    # Checked exactly, not asserted: the answer is a proof step and must survive `python -O`.
    if any(dot(y_vec, col) != 0 for col in columns) or dot(y_vec, target) != 1:
        return None
    return y_vec


def dot(x: Sequence[Fraction], y: Sequence[Fraction]) -> Fraction:
    return sum((a * b for a, b in zip(x, y, strict=True)), ZERO)


def rank_factor(rows: Sequence[Sequence[Fraction]]) -> list[tuple[Vec, Vec]]:
    """Rank-one terms (c_r, y_r) with Σ c_r y_rᵀ = A and as many terms as rank(A)."""
    if is_zero(rows):
        return []
    reduced, pivots = rref(rows)
    # A = C R with R the non-zero rows of rref(A) and C the pivot columns of A.
    terms = []
    for i, p in enumerate(pivots):
        c = tuple(row[p] for row in rows)
        terms.append((c, tuple(reduced[i])))
    return terms


def vec(rows: Sequence[Sequence[Fraction]]) -> Vec:
    """Row-major flattening."""
    return tuple(v for row in rows for v in row)
