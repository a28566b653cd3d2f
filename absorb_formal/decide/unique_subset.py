"""Large blocks in the generic case, decided both ways: the unique solution of the subset system
modulo p (docs/rules.md §4, "The generic case at scale").

At its own width m, a depth-1 O(a)+N block whose m neurons sit alone on m distinct live keys
is absorbable iff `Σ_{i∈J} d_i u_iᵀ = −S/(2a)` for some index set J (§4, §8.1). Write it
as the linear system K·c = t in c ∈ Q^m, K's column i being vec(d_i u_iᵀ) (a Khatri–Rao
product, d² rows) and t = vec(−S/(2a)); J is a 0/1 solution. Look at it through m
rank-one functionals X ↦ p_jᵀ X q_j with integer p_j, q_j drawn from seed 0 (a rank-one
projection F: A = F·K, b = F·t; `checker/kernel/systems.projected_system`, exact on float64 BLAS).
If A is invertible mod a prime q, it is invertible over Q, so K has full column rank and
K·c = t has at most one rational solution c*, which satisfies A·c* = b; q divides no
denominator of c* (Cramer: they divide det A and the denominators of A and b, whose residues
exist), so c* ≡ ĉ (mod q) for the unique ĉ with A·ĉ ≡ b. (Random functionals: rank-one
tensors span the dual of Q^{d×d}, so when K has full column rank some m of them make A
invertible, and random ones do with probability ≥ 1 − 2m/q per try; a singular A only means
`None`.) Hence:

- some ĉ_i ∉ {0, 1}: c* (if it exists) is not 0/1 (0 and 1 reduce to 0 and 1): no J, the
  block is not absorbable at width m;
- ĉ is 0/1: the only candidate is J = {i : ĉ_i = 1}. The identity Σ_J d_i u_iᵀ = −S/(2a)
  is then tested exactly over Q (python-flint fmpq_mat, every weight the rational its bits
  denote). It holds: absorbable, by the §4 witness (negate the rows of U, and their up
  biases, in J; keep D; the down bias absorbs the constant); it fails: no J (any 0/1
  solution would reduce to ĉ, hence be J).

The refutation needs distinct live keys (the caller's residue keys, `modular.key_classes`;
d_i ≠ 0 also follows from det A ≠ 0); the witness needs nothing but the identity. Work: two
products of m×d by d×m mod q, one LU of order m (as for the modular functional), and |J|·d²
rational products for the exact identity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..certify import large as cert
from ..checker.kernel import modlu, systems
from ..checker.kernel.contract import SEED
from ..model import linalg
from ..model.blocks import Block, Layer, Matrix
from ..numeric import accelerated
from . import modular
from .canonical import ridge
from .decision import Decision, undecided

METHOD = "§4 generic case + unique solution mod q"
PRIMES = 2  # a singular A mod q is tried mod the next prime, then the answer is None
# The functionals' seed is the contract's SEED: fixed, so that the certificate needs no field
# for it (any seed that makes A invertible gives the same solution, so a stored seed could not
# be checked). A singular A has probability at most 2m/q per prime when K has full column rank.


def decide(block: Block) -> Decision | None:
    """Proved or refuted at the block's own width, or None (A singular mod every prime tried:
    K is likely not of full column rank, e.g. m > d²). The caller has checked
    that the m rows of U are non-zero and alone on distinct residue keys."""
    assert block.layers is not None
    found = ridge(block.activation)
    if found is None or found.a == 0 or block.depth != 1 or block.activation.gated:
        return None
    layer = block.layers[0]
    m, d = layer.up.shape
    if m == 0 or m > d * d:
        return None  # more unknowns than equations: never a unique solution
    room = memory(m)
    if room:
        return undecided(room)
    factor = -1 / (2 * found.a)
    a = found.a
    return solve(block, lambda q: system(block, SEED, q, factor), Candidate(
        METHOD, cert.subset_fields(), cert.SUBSET_SYSTEM,
        lambda flips: identity_failure(block, flips, a),
        lambda flips: (witness_certificate(block, flips, a), flipped(block, flips, a))))


@dataclass(frozen=True)
class Candidate:
    """What a rule does with the unique solution mod q (this module's §4 generic case, or
    a §8.2 row of `flips_large`): its method, the fields its certificates share (rule, …),
    the refutation's argument, the exact test of a 0/1 candidate J (`failure`: the first
    entry where J's identity fails, None when it holds; it may raise `TooCostly`) and the
    witness of a J that passes it (certificate, plain layer). `refutable`: "" when a
    refutation's precondition holds (distinct live keys), else why it does not (then only
    the witness may come out)."""

    method: str
    fields: dict[str, Any]
    argument: str
    failure: Callable[[list[int]], tuple[int, ...] | None]
    witness: Callable[[list[int]], tuple[dict[str, Any], Layer]]
    refutable: str = ""


class TooCostly(Exception):
    """The exact test of a candidate J is beyond what is attempted (the message says why)."""


def solve(block: Block, build: Callable[[int], np.ndarray | None],
          candidate: Candidate) -> Decision | None:
    """The unique solution of the projected system `build(q)` ([A | b] mod q, None when q
    divides a denominator) mod the first PRIMES primes until A is invertible, concluded by
    `conclude`; None when A is singular mod each or a residue is missing."""
    tried: list[int] = []
    for q in modlu.primes(PRIMES):
        work = build(q)
        if work is None:
            return None  # q divides a denominator: no residues (the checker needs them)
        tried.append(q)
        solution = accelerated.solve_floats(work, q)
        if solution is not None:
            return conclude(block, solution, tried, candidate)
    return None


def residues(block: Block, q: int, factor: Fraction
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray | int] | None:
    """D (d×m), U (m×d) and T = factor·S (d×d, or an integer t for T = t·I) mod q, from the
    exact weights; None when q divides a denominator."""
    assert block.layers is not None
    layer = block.layers[0]
    m, d = layer.up.shape
    up = layer.up.residues(range(m), range(d), q)
    down = layer.down.residues(range(d), range(m), q)
    scale = linalg.residue(factor, q)
    if up is None or down is None or scale is None:
        return None
    target: np.ndarray | int
    if block.skip.matrix is not None:
        skip = block.skip.matrix.residues(range(d), range(d), q)
        if skip is None:
            return None
        target = skip * scale % q
    else:
        value = linalg.residue(Fraction(block.skip.scale or 0), q)
        if value is None:
            return None
        target = value * scale % q
    return down, up, target


def memory(m: int) -> str:
    """Why the system of order m is not attempted ("" when it fits in the memory left)."""
    need, have = modlu.bytes_needed(m + 1), modlu.bytes_available()
    if have is not None and need > have:
        return (f"the subset system of order {m} needs about {need / 2**30:.1f} GiB "
                f"and {max(have, 0) / 2**30:.1f} GiB are available: not attempted")
    return ""


def system(block: Block, seed: int, q: int, factor: Fraction) -> np.ndarray | None:
    """[A | b] mod q (`systems.projected_system`): D, U and T = factor·S as residues of the
    exact weights; None when q divides a denominator."""
    found = residues(block, q, factor)
    if found is None:
        return None
    return systems.projected_system(*found, seed, q)


def conclude(block: Block, solution: list[int], tried: list[int],
             candidate: Candidate) -> Decision:
    def refuted(**outcome: Any) -> dict[str, Any]:
        return cert.unique_solution(candidate.fields, modular.PRIME, tried, candidate.argument,
                                    **outcome)

    q = tried[-1]
    method = candidate.method
    wrong = next((i for i, v in enumerate(solution) if v > 1), None)
    if wrong is not None:
        if candidate.refutable:
            return undecided(f"the unique solution mod {q} is not 0/1, but {candidate.refutable}")
        return Decision(False, method, refuted(neuron=wrong + 1, value=solution[wrong]),
                        detail=f"the unique solution mod {q} has c_{wrong + 1} = "
                               f"{solution[wrong]}, not 0 or 1")
    flips = [i for i, v in enumerate(solution) if v == 1]
    shown = "{" + ", ".join(str(i + 1) for i in flips) + "}"
    try:
        failure = candidate.failure(flips)
    except TooCostly as why:
        return undecided(f"the only candidate is J = {shown} (|J| = {len(flips)}), and {why}")
    if failure is None:
        certificate, layer = candidate.witness(flips)
        return Decision(True, method, certificate, witness=(layer,), detail=f"J = {shown}")
    if candidate.refutable:
        return undecided(f"the only candidate J = {shown} fails, but {candidate.refutable}")
    return Decision(False, method, refuted(flips=[i + 1 for i in flips],
                                           coordinate=list(failure)),
                    detail=f"the only candidate J = {shown} fails at entry {failure}")


def witness_certificate(block: Block, flips: list[int], a: Fraction) -> dict[str, Any]:
    return cert.rows_negated(block.width, a, [i + 1 for i in flips])


def flipped(block: Block, flips: list[int], a: Fraction) -> Layer:
    """The §4 witness: the rows of U and their up biases in J negated, D kept, the down bias
    c + 2a·Σ_J β_i d_i (σ(−ℓ) = σ(ℓ) − 2aℓ: flipping neuron i adds −2a d_i (u_i·x + β_i),
    the identity cancels S x against the u parts, the bias the β parts). A loaded U stays
    an array (negation is exact)."""
    assert block.layers is not None
    layer = block.layers[0]
    up = negated(layer.up, flips)
    up_bias = down_bias = None
    if layer.up_bias is not None:
        chosen = set(flips)
        up_bias = tuple(-b if i in chosen else b for i, b in enumerate(layer.up_bias))
        shift = [Fraction(0)] * block.dim
        for i in flips:
            if layer.up_bias[i]:
                for r, v in enumerate(layer.down.exact_column(i)):
                    shift[r] += 2 * a * layer.up_bias[i] * v
        base = layer.down_bias or (Fraction(0),) * block.dim
        down_bias = tuple(c + s for c, s in zip(base, shift, strict=True))
    return Layer(up, layer.down, up_bias=up_bias, down_bias=down_bias)


def negated(matrix: Matrix, rows: list[int], columns: bool = False) -> Matrix:
    """The matrix with the listed rows (or columns) negated, exactly; a loaded array stays
    an array (`_signed`), literal rows stay rows."""
    values = _signed(matrix.loaded)
    if values is not None:
        if columns:
            values[:, rows] = -values[:, rows]
        else:
            values[rows] = -values[rows]
        return Matrix(array=values)
    chosen = set(rows)
    if columns:
        return Matrix([[-v if j in chosen else v for j, v in enumerate(r)]
                       for r in matrix.rows])
    return Matrix([[-v for v in r] if i in chosen else list(r)
                   for i, r in enumerate(matrix.rows)])


def _signed(loaded: np.ndarray | None) -> np.ndarray | None:
    """A copy of a loaded array in a dtype where negating any entry is exact: floats as they
    are, integers as int64 when every entry fits with its negation (uint8 would wrap 1 to
    255, int8 keep −128); None otherwise (literal rows, or uint64/int64 beyond ±(2^63 − 1):
    the exact rows are negated instead)."""
    if loaded is None:
        return None
    if loaded.dtype.kind == "f":
        return np.array(loaded, copy=True)
    if loaded.dtype.kind not in "iu" or loaded.size == 0:
        return None
    bound = 2**63 - 1
    if int(loaded.max()) > bound or int(loaded.min()) < -bound:
        return None
    return loaded.astype(np.int64)


def identity_failure(block: Block, flips: list[int], a: Fraction,
                     rows: list[tuple[Fraction, ...]] | None = None) -> tuple[int, int] | None:
    """The first entry (row, column) where Σ_J d_i v_iᵀ ≠ −S/(2a), exactly (python-flint
    fmpq_mat on the rationals the weights denote), or None when the identity holds; v_i the
    rows of U in J, or `rows` (one per flip, in order: a §8.2 row's linear part)."""
    import flint

    assert block.layers is not None
    layer, d = block.layers[0], block.dim
    left = flint.fmpq_mat(d, len(flips), [_q(v) for v in _interleave(
        [layer.down.exact_column(i) for i in flips], d)])
    vectors = rows if rows is not None else [layer.up.exact_row(i) for i in flips]
    right = flint.fmpq_mat(len(flips), d, [_q(v) for row in vectors for v in row])
    total = left * right if flips else flint.fmpq_mat(d, d)
    factor = _q(-1 / (2 * a))
    if block.skip.matrix is not None:  # one conversion of S, one scalar product (no Fractions)
        target = linalg.to_flint(block.skip.matrix.rows, d) * factor
    else:
        target = flint.fmpq_mat(d, d)
        value = _q(Fraction(block.skip.scale or 0)) * factor
        for r in range(d):
            target[r, r] = value
    if total == target:
        return None
    difference = (total - target).entries()
    index = next(n for n, v in enumerate(difference) if v != 0)
    return divmod(index, d)


def _interleave(columns: list[tuple[Fraction, ...]], d: int) -> list[Fraction]:
    """Row-major entries of the d×|J| matrix whose columns are given."""
    return [column[r] for r in range(d) for column in columns]


def _q(value: Fraction) -> Any:
    import flint

    return flint.fmpq(value.numerator, value.denominator)
