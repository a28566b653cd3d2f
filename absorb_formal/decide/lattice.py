"""Lattice reduction for the dense subset regime (docs/rules.md §4, issue 21 item 5).

The 0/1 system `Σ_j A_ij b_j = t_i` (A, t the integer rows of `subset.integer_rows`) has many
more unknowns than equations when m > d²; then CP-SAT's search may find no solution in time
although one exists (a planted J in relu d = 4, m = 96). A solution b is a very short vector
of the lattice spanned by the rows of

    [ I_m  0 | N·Aᵀ ]
    [ 0    1 | −N·tᵀ ]

namely (b, 1, 0): its last d² coordinates vanish, and its norm is √(|J| + 1), far below the
lattice's other vectors when the entries of A are large against |J|. LLL (python-flint's
`fmpz_mat.lll`, exact integer arithmetic), repeated on randomly mixed bases, finds such a
vector often, not always: it is a *heuristic search*. What it finds is only a candidate J,
which `subset.solve` re-checks exactly (Σ_{j∈J} W_j = T in rationals) before any witness is
built; when it finds nothing, nothing is concluded (no refutation comes from here).

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

from .. import budget, linalg

# The scale N of the equation coordinates: large enough that a reduced vector with a
# non-zero equation part is long, small enough to keep the integers (and LLL) cheap.
SCALE = 64
# One reduction costs about (m + 1)^3 operations on numbers of the size of N·A; beyond this
# many unknowns it is not tried (d = 8, m = 256: tens of seconds for one, finding nothing).
MAX_TERMS = 200
MIN_REMAINING_MS = 2_000
# When one reduction misses J, the reduced basis is shuffled and mixed by a few random
# unimodular row operations (seeded) and reduced again, up to MAX_TRIES times and within
# SHARE of the time left (the rest is CP-SAT's): integer weights in ±1..9 at d = 4, m = 96
# are found after 2–8 reductions where one finds nothing.
MAX_TRIES = 60
SHARE = 1 / 2
DELTA = 0.999  # LLL's Lovász parameter (FLINT's exact integer LLL)


def find(rows: list[list[int]], terms: int, timeout_ms: int,
         reference: tuple[int, ...] | None = None) -> tuple[int, ...] | None:
    """A candidate J (0-based indices) with Σ_{j∈J} rows[i][j] = rows[i][terms] for every i,
    from LLL reductions of the embedding lattice; None when none shows up (which proves
    nothing). The caller re-checks the candidate exactly.

    `reference` R: J is looked for as R Δ F with F short — the lattice of F has the columns
    of R negated and the target less Σ_{j∈R} column j — alternately with R = ∅. (A planted
    skip flips few of the block's own neurons, whose orientation the width search passes.)"""
    left = budget.remaining_ms(timeout_ms)
    if terms > MAX_TERMS or left < MIN_REMAINING_MS:
        return None
    from flint import fmpz_mat

    m = terms
    references = [()] if not reference else [tuple(sorted(set(reference))), ()]
    bases = [_embedding(rows, m, set(r)) for r in references]
    rng = random.Random(0)
    started = time.monotonic()
    for attempt in range(MAX_TRIES):
        which = attempt % len(bases)
        reduced = fmpz_mat(bases[which]).lll(False, DELTA)
        vectors = [[int(reduced[i, k]) for k in range(reduced.ncols())]
                   for i in range(reduced.nrows())]
        found = _subset_in(vectors, m)
        if found is not None:
            return tuple(sorted(set(found) ^ set(references[which])))
        spent_ms = (time.monotonic() - started) * 1000
        if spent_ms * (attempt + 2) / (attempt + 1) > SHARE * left:
            return None  # another reduction would overrun this search's share of the time
        bases[which] = _mixed(vectors, rng)
    return None


def _embedding(rows: list[list[int]], m: int, flipped: set[int]) -> list[list[int]]:
    """The rows of [I_m 0 | N·A'ᵀ; 0 1 | −N·t'ᵀ] with A' = A, columns in `flipped` negated,
    and t' = t − Σ_{j∈flipped} A_j: a 0/1 solution F of A'F = t' is J = flipped Δ F."""
    sign = [-1 if j in flipped else 1 for j in range(m)]
    rhs = [row[m] - sum(row[j] for j in flipped) for row in rows]
    basis = [[1 if k == j else 0 for k in range(m)] + [0]
             + [SCALE * sign[j] * row[j] for row in rows] for j in range(m)]
    basis.append([0] * m + [1] + [-SCALE * t for t in rhs])
    return basis


def _subset_in(vectors: list[list[int]], m: int) -> tuple[int, ...] | None:
    """J from a vector ±(1_J, 1, 0) among the reduced basis vectors."""
    for v in vectors:
        if v[m] in (1, -1) and not any(v[m + 1:]):
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

