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
(`key_classes` below: residue keys, O(m·d) vectorised); the checker recomputes it from its
own reading.

With biases (docs/rules.md §8.1) keys are affine, and rows with distinct directions are distinct
keys whatever their offsets: distinct residue keys suffice, the subset condition is
unchanged and the biases never enter Y's test.

Residue keys (§4 keys mod p: `key_classes`, `affine_keys_distinct`, also read by the key
counts of `large.py` and `flips_large.py`): row u_i scaled by the inverse of its first
non-zero entry, mod p. Parallel rows — one relu key (a line), or u and −u (one gelu key) —
have one residue key, so different residue keys are different lines, hence different keys in
both families (§8.1: different affine keys too). Sound only if every non-zero entry of U is
non-zero mod p, which is tested (else nothing is concluded).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from fractions import Fraction
from math import isqrt
from pathlib import Path

import numpy as np

from ..certify import large as cert
from ..checker.kernel import modlu, systems
from ..model import linalg, memory
from ..model.blocks import Block, Matrix
from ..numeric import accelerated
from . import outofcore
from .canonical import ridge
from .decision import Decision, undecided

METHOD = "§4 generic case + modular functional"
# The keys' prime (`key_classes`): below 2^26, so that no mantissa of a bf16, fp16 or fp32
# weight (≤ 24 bits) is a multiple of it.
PRIME = 67_108_859
# The functional's primes: the largest below 2^21, so that the LU runs exactly on float64 BLAS
# (checker/kernel/modlu.py: k·(p−1)² < 2^53 for products of inner dimension k ≤ 2,048). A minor that
# is singular mod the first (a false zero has probability about m/p) is tried mod the next.
MINOR_PRIMES = modlu.primes(2)  # 2,097,143 and 2,097,133
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
    budget = memory.limit()
    if modlu.bytes_needed(m + 1) > budget:  # out of core, or not at all
        try:
            outofcore.check_fits(m + 1, budget, Path(tempfile.gettempdir()))
        except outofcore.DoesNotFit as why:
            return undecided(f"the modular-functional minor of order {m + 1} does not fit: "
                             f"{why}; not attempted (docs/rules.md, modular functional)")
    for offset in range(GRID_OFFSETS if retries else 1):
        rows_, cols_ = grid(offset, k, d, m + 1)
        for q in MINOR_PRIMES if retries else MINOR_PRIMES[:1]:
            if found.a.denominator % q == 0:
                continue
            functional = _functional(block, layer.up, layer.down, rows_, cols_, m, q)
            if functional is None:
                continue  # singular mod q, or q divides a denominator: the next prime
            y, value = functional
            return Decision(
                False, METHOD, cert.modular_functional(PRIME, q, rows_, cols_, y, value),
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
    budget = memory.limit()
    if modlu.bytes_needed(m + 1) <= budget:
        found = accelerated.functional_auto(
            systems.product_minor(d_res, u_res, r_pos, c_pos, last, q), q)
    else:  # the minor on disk, a band of rows at a time (decide/outofcore.py)
        found = outofcore.functional(
            lambda a, b: systems.product_minor(d_res, u_res, r_pos[a:b], c_pos[a:b], last[a:b],
                                               q),
            m + 1, q, budget)
    if found is None:
        return None
    y, value = found
    y_grid = systems.on_grid(y, len(rows_), len(cols_))
    assert not systems.functional_values(y_grid, d_res, u_res, q).any(), "Y is not orthogonal"
    assert value == int(np.dot(np.array(y, dtype=object), last.astype(object)) % q) != 0
    return y, value


# ---- residue keys (docs/rules.md §4 "keys mod p"; checker: checker/rules/modular.py) ------

@dataclass(frozen=True)
class KeyClasses:
    """distinct: every row of U non-zero and alone on its residue key; live: rows alone on
    their residue key whose column of D is non-zero (each a live key of the canonical form)."""

    distinct: bool
    live: int


def key_classes(up: Matrix, down: Matrix, p: int = PRIME) -> KeyClasses | None:
    """Residue-key classes of the rows of U; None when p divides a denominator or a non-zero
    entry (then residue keys could split one exact key)."""
    m, d = up.shape
    nonzero = up.nonzero()
    found = _alone(up.residues(range(m), range(d), p), nonzero, p)
    if found is None:
        return None
    present = nonzero.any(axis=1)
    live = down.nonzero().any(axis=0)
    return KeyClasses(bool(present.all() and found.all()), int((found & live).sum()))


def affine_keys_distinct(rows: Matrix, offsets: tuple[Fraction, ...], p: int = PRIME
                         ) -> bool | None:
    """Whether the affine functions x ↦ r_i·x + o_i (rows r_i of `rows`, offsets o_i) lie
    on pairwise different lines of Q^{d+1} — different keys up to a non-zero factor, hence
    up to sign too (docs/rules.md §8.2) — by residue keys of the rows [r_i | o_i] mod p;
    every r_i must be non-zero (else False). None when p divides a denominator or a non-zero
    entry (then residue keys could split one exact key, and nothing is concluded)."""
    m, d = rows.shape
    res = rows.residues(range(m), range(d), p)
    offset = [linalg.residue(o, p) for o in offsets]
    if res is None or any(v is None for v in offset):
        return None
    nonzero = rows.nonzero()
    if not nonzero.any(axis=1).all():
        return False
    found = _alone(np.hstack([res, np.array(offset, dtype=np.int64).reshape(m, 1)]),
                   np.hstack([nonzero, np.array([o != 0 for o in offsets]).reshape(m, 1)]), p)
    return None if found is None else bool(found.all())


def _alone(res: np.ndarray | None, nonzero: np.ndarray, p: int) -> np.ndarray | None:
    """Which rows are non-zero and alone on their residue key (the row over its first
    non-zero entry, mod p); None when `res` is None or a non-zero entry is 0 mod p."""
    if res is None or not np.array_equal(res != 0, nonzero):
        return None
    m, d = res.shape
    present = nonzero.any(axis=1)
    first = res[np.arange(m), nonzero.argmax(axis=1)]
    inverse = _inverse(np.where(present, first, 1), p)
    keys = np.ascontiguousarray(res * inverse[:, None] % p)
    rows = keys.view(np.dtype((np.void, keys.dtype.itemsize * d))).ravel()
    _, where, counts = np.unique(rows[present], return_inverse=True, return_counts=True)
    alone = np.zeros(m, dtype=bool)
    alone[present] = counts[where.ravel()] == 1
    return alone


def _inverse(values: np.ndarray, p: int) -> np.ndarray:
    """values^(p−2) mod p element-wise (Fermat), square and multiply in int64 (p < 2^31)."""
    out, base, power = np.ones_like(values), values.astype(np.int64) % p, p - 2
    while power:
        if power & 1:
            out = out * base % p
        base = base * base % p
        power >>= 1
    return out
