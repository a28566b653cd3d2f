"""Lattice reduction for the dense subset regime (docs/rules.md §4, "The dense regime").

The 0/1 system `Σ_j A_ij b_j = t_i` (A, t the integer rows of `subset.integer_rows`) has many
more unknowns than equations when m > d²; then CP-SAT's search may find no solution in time
although one exists (a planted J in relu d = 4, m = 96). A solution b gives the vector
(b, 1) of the *kernel lattice*

    L = {(x, s) ∈ Z^(m+1) : A x = s·t},

of dimension m + 1 − rank, and (b, 1) has norm √(|J| + 1), far below the lattice's other
vectors when the entries of A are large against |J| (its determinant grows with them). L is
computed exactly once — a basis of all of it, by LLL reductions that add the equations a
block at a time — and then reduced by LLL (python-flint's `fmpz_mat.lll`, exact integer
arithmetic), repeatedly on randomly mixed bases: a *heuristic search*. What it finds is only
a candidate J, which `subset.solve` re-checks exactly (Σ_{j∈J} W_j = T in rationals) before
any witness is built; when it finds nothing, nothing is concluded (no refutation comes from
here).

Where it stops: benchmarks/RESULTS.md, §8 (the dense subset regime).

`obstruction` is the exact counterpart for refutations: when T is not an *integer*
combination of the terms (a Hermite normal form decides this), a rational functional Y with
`⟨Y, W_ℓ⟩ ∈ Z` for every term and `⟨Y, T⟩ ∉ Z` proves that no subset (no integer
combination at all) reaches T; the checker needs only exact dot products.
"""

from __future__ import annotations

import random
import time
from fractions import Fraction
from math import gcd, lcm

from ..model import linalg
from . import budget

# The kernel lattice is computed EQUATIONS_PER_STEP equations at a time: the basis so far,
# with the new equations' values scaled by KERNEL_SCALE appended, is LLL-reduced, and the
# vectors whose appended part vanishes span the new kernel (checked: there must be as many as
# the basis less the rank of the values; else the scale grows). 16 at a time: relu d = 8,
# m = 256 in 11–17 s on a loaded 2-core machine (one equation at a time: 56 s).
EQUATIONS_PER_STEP = 16
KERNEL_SCALE = 2**20
# The kernel costs about (m + 1)^4 operations: relu d = 8, m = 192 takes a few seconds,
# m = 256 11–17 s here, more than CP-SAT can spare, so it is not tried beyond this many terms.
MAX_TERMS = 200
MIN_REMAINING_MS = 2_000
# When one reduction misses J, the reduced basis is shuffled and mixed by a few random
# unimodular row operations (seeded) and reduced again, up to MAX_TRIES times and within
# SHARE of the time left (the rest is CP-SAT's): integer weights in ±1..9 at d = 4, m = 96
# are found after 1–17 reductions (0.1 s each) where one finds nothing.
MAX_TRIES = 60
SHARE = 1 / 2
DELTA = 0.99  # LLL's Lovász parameter (FLINT's exact integer LLL)


def find(rows: list[list[int]], terms: int, timeout_ms: int,
         reference: tuple[int, ...] | None = None) -> tuple[int, ...] | None:
    """A candidate J (0-based indices) with Σ_{j∈J} rows[i][j] = rows[i][terms] for every i,
    from LLL reductions of the kernel lattice; None when none shows up (which proves
    nothing). The caller re-checks the candidate exactly.

    `reference` R: J is looked for as R Δ F with F short — the kernel lattice in the
    coordinates (F, s), F_j = s − x_j for j ∈ R (a unimodular change) — alternately with
    R = ∅. (A planted skip flips few of the block's own neurons, whose orientation the width
    search passes.)"""
    left = budget.remaining_ms(timeout_ms)
    if terms > MAX_TERMS or left < MIN_REMAINING_MS:
        return None
    m = terms
    started = time.monotonic()
    deadline = started + SHARE * left / 1000
    kernel = _kernel(rows, m, deadline)
    if kernel is None:
        return None
    references = [()] if not reference else [tuple(sorted(set(reference))), ()]
    bases = [_flipped(kernel, m, set(r)) for r in references]
    rng = random.Random(0)
    for attempt in range(MAX_TRIES):
        which = attempt % len(bases)
        vectors = _lll(bases[which])
        found = _subset_in(vectors, m)
        if found is not None:
            return tuple(sorted(set(found) ^ set(references[which])))
        spent = time.monotonic() - started
        if started + spent * (attempt + 2) / (attempt + 1) > deadline:
            return None  # another reduction would overrun this search's share of the time
        bases[which] = _mixed(vectors, rng)
    return None


def _lll(basis: list[list[int]]) -> list[list[int]]:
    from flint import fmpz_mat

    reduced = fmpz_mat(basis).lll(False, DELTA)
    return [[int(x) for x in row] for row in reduced.tolist()]


def _kernel(rows: list[list[int]], m: int, deadline: float) -> list[list[int]] | None:
    """A basis of L = {(x, s) ∈ Z^(m+1) : Σ_j rows[i][j]·x_j = s·rows[i][m] for every i}, or
    None past the deadline. Each step keeps the combinations of the basis so far that satisfy
    the next equations too: in an LLL-reduced basis of [B | N·V] (V the equations' values on
    B) the vectors with a zero V-part span that kernel exactly when there are
    rows(B) − rank(V) of them (the others' V-parts are then independent); N grows until
    they are."""
    from flint import fmpz_mat

    n = m + 1
    equations = [row[:m] + [-row[m]] for row in rows]
    basis = [[1 if k == j else 0 for k in range(n)] for j in range(n)]
    for first in range(0, len(equations), EQUATIONS_PER_STEP):
        if time.monotonic() > deadline:
            return None
        block = equations[first:first + EQUATIONS_PER_STEP]
        values = [[sum(b * e for b, e in zip(vector, eq, strict=True) if b) for eq in block]
                  for vector in basis]
        wanted = len(basis) - fmpz_mat(values).rank()
        scale = KERNEL_SCALE
        while True:
            reduced = _lll([vector + [scale * v for v in vs]
                            for vector, vs in zip(basis, values, strict=True)])
            kept = [row[:n] for row in reduced if not any(row[n:])]
            if len(kept) == wanted:
                break
            scale *= KERNEL_SCALE
        basis = kept
    return basis


def _flipped(basis: list[list[int]], m: int, flipped: set[int]) -> list[list[int]]:
    """The basis in the coordinates (F, s) with F_j = s − x_j for j in `flipped`: a 0/1
    solution F of the flipped system is J = flipped Δ F."""
    return [[v[m] - x if j in flipped else x for j, x in enumerate(v[:m])] + [v[m]]
            for v in basis]


def _subset_in(vectors: list[list[int]], m: int) -> tuple[int, ...] | None:
    """J from a vector ±(1_J, 1) among the reduced basis vectors (every vector of L
    satisfies the equations; the caller re-checks J anyway)."""
    for v in vectors:
        if v[m] in (1, -1):
            bits = [v[m] * x for x in v[:m]]
            if all(b in (0, 1) for b in bits):
                return tuple(k for k in range(m) if bits[k])
    return None


def _mixed(vectors: list[list[int]], rng: random.Random) -> list[list[int]]:
    """The same lattice in another basis: shuffled, then m random row additions ±."""
    out = [list(v) for v in vectors]
    rng.shuffle(out)
    for _ in range(len(out)):
        i, j = rng.randrange(len(out)), rng.randrange(len(out))
        if i != j:
            sign = rng.choice((-1, 1))
            out[i] = [a + sign * b for a, b in zip(out[i], out[j], strict=True)]
    return out


def obstruction(columns: list[linalg.Vec], goal: linalg.Vec,
                hermite: bool = True) -> linalg.Vec | None:
    """Y with ⟨Y, c⟩ ∈ Z for every column c and ⟨Y, goal⟩ ∉ Z, or None when the goal is an
    integer combination of the columns (or outside their span: the span test's case).

    Each equation (coordinate) i is scaled by s_i to coprime integer coefficients (if its
    right-hand side is then not an integer, Y = s_i·e_i already works); the integer lattice
    the scaled columns span has the Hermite basis B (rows). If the goal's coefficients c in
    that basis are not all integers, c_k ∉ Z, and y with B·y = e_k (on B's pivot
    coordinates) gives ⟨y, b_j⟩ = δ_jk: every column, an integer combination of the
    b_j, pairs to an integer, the goal to c_k. Y_i = s_i·y_i undoes the scaling.
    `hermite=False`: the single equations only (milliseconds; the Hermite normal form costs
    about a second at 256×64 on a loaded 2-core machine)."""
    from flint import fmpz_mat

    kept: list[int] = []
    scales: list[Fraction] = []
    for i, rhs in enumerate(goal):
        row = [col[i] for col in columns]
        if not any(row):
            continue  # 0 = rhs: the span test's case when rhs != 0
        # scaled to coprime integer coefficients; the right-hand side then may be a fraction
        scale = Fraction(lcm(*(v.denominator for v in row)))
        scale /= gcd(*(int(v * scale) for v in row))
        if (rhs * scale).denominator != 1:  # one equation alone has no integer solution
            return tuple(scale if j == i else Fraction(0) for j in range(len(goal)))
        kept.append(i)
        scales.append(scale)
    if not kept or not hermite:
        return None
    lattice_rows = [[int(col[i] * s) for i, s in zip(kept, scales, strict=True)]
                    for col in columns]
    target = [goal[i] * s for i, s in zip(kept, scales, strict=True)]
    reduced = fmpz_mat(lattice_rows).hnf()
    basis: list[list[int]] = []
    pivots: list[int] = []
    for r in range(reduced.nrows()):
        entries = [int(reduced[r, j]) for j in range(reduced.ncols())]
        lead = next((j for j, v in enumerate(entries) if v), None)
        if lead is None:
            break
        basis.append(entries)
        pivots.append(lead)
    coefficients: list[Fraction] = []
    for j, pivot in enumerate(pivots):
        done = sum((coefficients[i] * basis[i][pivot] for i in range(j)), Fraction(0))
        coefficients.append((target[pivot] - done) / basis[j][pivot])
    rest = [t - sum((c * b[i] for c, b in zip(coefficients, basis, strict=True)), Fraction(0))
            for i, t in enumerate(target)]
    if any(rest):
        return None  # outside the rational span: the separating functional's case
    k = next((j for j, c in enumerate(coefficients) if c.denominator != 1), None)
    if k is None:
        return None  # an integer combination: no lattice argument
    # B restricted to its pivot columns is upper triangular: solve B_piv · y = e_k.
    r = len(basis)
    y = [Fraction(0)] * r
    for j in reversed(range(r)):
        value = Fraction(1 if j == k else 0) - sum(
            (Fraction(basis[j][pivots[i]]) * y[i] for i in range(j + 1, r)), Fraction(0))
        y[j] = value / basis[j][pivots[j]]
    out = [Fraction(0)] * len(goal)
    for j, pivot in enumerate(pivots):
        out[kept[pivot]] = y[j] * scales[pivot]
    return tuple(out)

