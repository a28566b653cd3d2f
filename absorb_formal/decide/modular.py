"""Large float-derived blocks in the generic case: the modular-functional certificate
(docs/certificates.md).

At its own width m, a depth-1 O(a)+N block whose m neurons sit alone on m distinct live keys
is absorbable iff `S + Σ_i c_i d_i u_iᵀ = 0` for some c_i ∈ {0, ±2a} (§4, the paper's generic
case: `Σ_{i∈J} d_i u_iᵀ = −S/(2a)`). A matrix Y of integers with `d_iᵀ Y u_i ≡ 0 (mod q)` for
every i and `⟨Y, S⟩ ≢ 0 (mod q)` rules every such identity out: pairing it with Y and reducing
mod q (every weight and a have denominators prime to q — powers of two, for floats) would give
`⟨Y, S⟩ ≡ 0`. Y is found on m + 1 coordinates of a k×k grid (k = ⌈√(m+1)⌉ rows of D, k columns
of U): it is orthogonal mod q to the first m columns of the minor M = [vec(d_i u_iᵀ) | vec S]
on those coordinates and not to the last, which exists exactly when M is non-singular mod q,
and is then the last row of M⁻¹ up to a factor. The prover's work is one exact LU of order
m + 1 over Z/q, q below 2^21 (`checker/kernel/modlu.py`: every product exact in float64 BLAS, the
bound k·(q−1)² < 2^53 raised on; tested against FLINT), and a back-substitution; the
checker's is one product of O(m·k²), without any LU. A minor singular mod q is tried mod the
next prime, then on another grid. That the m keys are distinct is the caller's
(`large.key_classes`: residue keys, O(m·d) vectorised); the checker recomputes it from its
own reading.

With biases (docs/rules.md §8.1) keys are affine, and rows with distinct directions are distinct
keys whatever their offsets: distinct residue keys suffice, the subset condition is
unchanged and the biases never enter Y's test.
"""

from __future__ import annotations

from fractions import Fraction
from math import isqrt

import numpy as np

from ..checker.kernel import modlu, systems
from ..model import linalg
from ..model.blocks import Block, Matrix
from ..numeric import accelerated
from .canonical import ridge
from .decision import Decision, undecided

METHOD = "§4 generic case + modular functional"
# The keys' prime (large.key_classes): below 2^26, so that no mantissa of a bf16, fp16 or fp32
# weight (≤ 24 bits) is a multiple of it.
PRIME = 67_108_859
# The functional's primes: the largest below 2^21, so that the LU runs exactly on float64 BLAS
# (checker/kernel/modlu.py: k·(p−1)² < 2^53 for products of inner dimension k ≤ 2,048). A minor that
# is singular mod the first (a false zero has probability about m/p) is tried mod the next.
MINOR_PRIMES = [2_097_143, 2_097_133]  # = modlu.primes(2) (tests/test_modlu.py)
GRID_OFFSETS = 3


def decide(block: Block, size: int, distinct_keys: bool, retries: bool = True
           ) -> Decision | None:
    """Not absorbable at the block's own width, by the modular-functional certificate, or None;
    undecided, saying why, when the minor would not fit in the memory left (never killed for
    want of memory). `distinct_keys`: every row of U is non-zero and alone on its key.
    `retries`: a minor singular mod the first prime is tried mod the next and on other grids
    (else None at once: the caller has a test that decides both ways)."""
    found = ridge(block.activation)
    if (not distinct_keys or block.depth != 1 or size != block.width or block.layers is None
            or block.activation.gated or found is None):
        return None
    layer = block.layers[0]
    m, d = layer.up.shape
    k = isqrt(m) + 1  # ⌈√(m+1)⌉
    if k > d or not layer.down.nonzero().any(axis=0).all():
        return None  # m + 1 > d²: no room for Y; or a dead neuron: not the generic case
    need, have = modlu.bytes_needed(m + 1), modlu.bytes_available()
    if have is not None and need > have:
        return undecided(f"the modular-functional minor of order {m + 1} needs about "
                         f"{need / 2**30:.1f} GiB and {max(have, 0) / 2**30:.1f} GiB are "
                         "available: not attempted (docs/rules.md, modular functional)")
    for offset in range(GRID_OFFSETS if retries else 1):
        rows_, cols_ = grid(offset, k, d, m + 1)
        for q in MINOR_PRIMES if retries else MINOR_PRIMES[:1]:
            if found.a.denominator % q == 0:
                continue
            functional = _functional(block, layer.up, layer.down, rows_, cols_, m, q)
            if functional is None:
                continue  # singular mod q, or q divides a denominator: the next prime
            y, value = functional
            return Decision(False, METHOD, {
                "kind": "modular functional", "rule": "§4 generic case", "prime": PRIME,
                "minor_prime": q, "rows": rows_, "cols": cols_, "Y": y, "Y_dot_S": value,
                "argument": "the m rows of U have pairwise different residue keys mod prime "
                            "(each row over its first non-zero entry) and every column of D "
                            "is non-zero, so the m neurons sit alive on m distinct keys; at "
                            "width m the block is then absorbable iff S + sum_i c_i d_i u_i^T "
                            "= 0 with every c_i in {0, 2a, -2a}; Y (on the first m+1 "
                            "coordinates of rows x cols, row by row) has d_i^T Y u_i = 0 mod "
                            "minor_prime for every i and <Y, S> = Y_dot_S != 0 mod "
                            "minor_prime, which rules every such identity out"},
                detail=f"{m} distinct keys; a functional mod {q} vanishes on the {m} terms "
                       f"and is {value} on S")
    return None


def grid(offset: int, k: int, d: int, count: int) -> tuple[list[int], list[int]]:
    """k columns and the ⌈count/k⌉ rows whose first `count` coordinates (row-major) Y uses:
    no listed row goes unused (a field nothing reads would be unchecked)."""
    picked = [(offset + i) % d for i in range(k)]
    return picked[: -(-count // k)], picked


def _skip_residues(block: Block, rows_: list[int], cols_: list[int], p: int
                   ) -> np.ndarray | None:
    """S mod p on rows_ × cols_ (int64), None when p divides a denominator."""
    if block.skip.matrix is not None:
        return block.skip.matrix.residues(rows_, cols_, p)
    value = linalg.residue(Fraction(block.skip.scale or 0), p)
    if value is None:
        return None
    return (np.array(rows_)[:, None] == np.array(cols_)[None, :]).astype(np.int64) * value


def _functional(block: Block, up: Matrix, down: Matrix, rows_: list[int], cols_: list[int],
                m: int, q: int) -> tuple[list[int], int] | None:
    """(y, ⟨Y, S⟩ mod q): y on the first m + 1 coordinates of rows_ × cols_, orthogonal mod q
    to every d_i u_iᵀ there and not to S; None when the minor is singular mod q or q divides a
    denominator. Residues come from the exact weights (never from float64 copies, which round
    0.3, long doubles and integers beyond 2^53); the LU is checker/kernel/modlu.py's. The prover
    re-checks y as the checker will (one product, O(m·k²))."""
    coords = [(r, c) for r in rows_ for c in cols_][: m + 1]
    where_r = {r: n for n, r in enumerate(rows_)}
    where_c = {c: n for n, c in enumerate(cols_)}
    r_pos = np.array([where_r[r] for r, _ in coords])
    c_pos = np.array([where_c[c] for _, c in coords])
    d_res = down.residues(rows_, range(m), q)  # k × m
    u_res = up.residues(range(m), cols_, q)  # m × k
    skip = _skip_residues(block, rows_, cols_, q)
    if d_res is None or u_res is None or skip is None:
        return None
    last = skip[r_pos, c_pos]
    found = accelerated.functional_auto(systems.product_minor(d_res, u_res, r_pos, c_pos, last,
                                                              q), q)
    if found is None:
        return None
    y, value = found
    y_grid = systems.on_grid(y, len(rows_), len(cols_))
    assert not systems.functional_values(y_grid, d_res, u_res, q).any(), "Y is not orthogonal"
    assert value == int(np.dot(np.array(y, dtype=object), last.astype(object)) % q) != 0
    return y, value
