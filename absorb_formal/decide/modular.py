"""Large float-derived blocks in the generic case: the modular-rank certificate
(docs/certificates.md).

At its own width m, a depth-1 O(a)+N block whose m neurons sit alone on m distinct live keys
is absorbable iff `Σ_{i∈J} d_i u_iᵀ = −S/(2a)` for some J (§4, the paper's generic case).
If the m + 1 vectors vec(d_i u_iᵀ) and vec(S) are linearly independent over Q, S is outside
the span of the terms and no J exists. Independence follows from one non-zero (m+1)-minor
of the matrix [vec(d_i u_iᵀ) | vec(S)], and a minor that is non-zero modulo a prime p is
non-zero over Q (every float is a dyadic rational; 2 is invertible mod an odd p).

The exact work is proportional to what the argument reads: m + 1 coordinates on a k×k grid
(k = ⌈√(m+1)⌉ rows of D, k columns of U) and one determinant over Z/p (python-flint's
nmod_mat). That the m keys are distinct is the caller's (`large.key_classes`: residue keys,
O(m·d) vectorised); the checker recomputes it from its own reading.

With biases (docs/rules.md §8.1) keys are affine, and rows with distinct directions are distinct
keys whatever their offsets: distinct residue keys suffice, the subset condition is
unchanged and the biases never enter the minor.
"""

from __future__ import annotations

from fractions import Fraction
from math import isqrt

import numpy as np

from .. import linalg
from ..model import Block, Matrix
from .canonical import ridge
from .decision import Decision

METHOD = "§4 generic case + modular rank"
# A prime below 2^26: FLINT's determinant mod p is about 1.5× faster than mod 2^31 − 1, and
# float mantissas of bf16, fp16 and fp32 weights (≤ 24 bits) are never multiples of it.
PRIME = 67_108_859
GRID_OFFSETS = 3


def decide(block: Block, size: int, distinct_keys: bool) -> Decision | None:
    """Not absorbable at the block's own width, by the modular-rank certificate, or None.
    `distinct_keys`: every row of U is non-zero and alone on its key (shown mod PRIME)."""
    if (not distinct_keys or block.depth != 1 or size != block.width or block.layers is None
            or block.activation.gated or ridge(block.activation) is None):
        return None
    layer = block.layers[0]
    m, d = layer.up.shape
    k = isqrt(m) + 1  # ⌈√(m+1)⌉
    if k > d:
        return None  # m + 1 > d²: the terms and S cannot be independent
    skip = _skip_residues(block, d)
    if skip is None:
        return None
    for offset in range(GRID_OFFSETS):
        rows_, cols_ = _grid(offset, k, d, m)
        det = _minor(layer.up, layer.down, skip, rows_, cols_, m)
        if det is not None and det != 0:
            return Decision(False, METHOD, {
                "kind": "modular rank", "rule": "§4 generic case", "prime": PRIME,
                "rows": rows_, "cols": cols_, "det_mod_p": det,
                "argument": "the m rows of U have pairwise different residue keys mod p "
                            "(each row over its first non-zero entry), so they lie on distinct "
                            "lines and the m keys are distinct; at width m the block is "
                            "absorbable iff a subset of the d_i u_i^T sums to -S/(2a); the "
                            "(m+1)-minor of [vec(d_i u_i^T) | vec(S)] on the first m+1 "
                            "coordinates of rows x cols is non-zero mod p, so vec(S) is "
                            "outside their span"},
                detail=f"{m} distinct keys; a minor of order {m + 1} is {det} mod {PRIME}")
    return None


def _grid(offset: int, k: int, d: int, m: int) -> tuple[list[int], list[int]]:
    """k columns and the ⌈(m+1)/k⌉ rows whose first m + 1 coordinates the minor uses: no
    listed row goes unused (a field nothing reads would be unchecked)."""
    picked = [(offset + i) % d for i in range(k)]
    return picked[: -(-(m + 1) // k)], picked


def _skip_residues(block: Block, d: int) -> np.ndarray | None:
    if block.skip.matrix is not None:
        return block.skip.matrix.residues(range(d), range(d), PRIME)
    value = linalg.residue(Fraction(block.skip.scale or 0), PRIME)
    return None if value is None else np.eye(d, dtype=np.int64) * value


def _minor(up: Matrix, down: Matrix, skip: np.ndarray, rows_: list[int],
           cols_: list[int], m: int) -> int | None:
    """det mod p of the (m+1)×(m+1) matrix: coordinate (r, c) ↦ (d_i[r]·u_i[c] …, S[r, c]);
    residues come from the exact weights (never from float64 copies, which round 0.3, long
    doubles and integers beyond 2^53). None when p divides a denominator."""
    import flint

    coords = [(r, c) for r in rows_ for c in cols_][: m + 1]
    r_idx = np.array([r for r, _ in coords])
    c_idx = np.array([c for _, c in coords])
    d_res = down.residues(rows_, range(m), PRIME)  # k × m
    u_res = up.residues(range(m), cols_, PRIME)  # m × k
    if d_res is None or u_res is None:
        return None
    where_r = {r: n for n, r in enumerate(rows_)}
    where_c = {c: n for n, c in enumerate(cols_)}
    left = d_res[[where_r[r] for r in r_idx], :]  # (m+1) × m
    right = u_res[:, [where_c[c] for c in c_idx]].T  # (m+1) × m
    matrix = np.empty((m + 1, m + 1), dtype=np.int64)
    matrix[:, :m] = (left * right) % PRIME
    matrix[:, m] = skip[r_idx, c_idx]
    # through fmpz_mat: a flat list of Python ints converts faster than nested rows
    entries = flint.fmpz_mat(m + 1, m + 1, matrix.ravel().tolist())
    return int(flint.nmod_mat(entries, PRIME).det())

