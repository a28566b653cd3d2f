"""Large float-derived blocks in the generic case: the modular-rank certificate
(docs/certificates.md).

At its own width m, a depth-1 O(a)+N block whose m neurons sit alone on m distinct live keys
is absorbable iff `Σ_{i∈J} d_i u_iᵀ = −S/(2a)` for some J (§4, the paper's generic case).
If the m + 1 vectors vec(d_i u_iᵀ) and vec(S) are linearly independent over Q, S is outside
the span of the terms and no J exists. Independence follows from one non-zero (m+1)-minor
of the matrix [vec(d_i u_iᵀ) | vec(S)], and a minor that is non-zero modulo a prime p is
non-zero over Q (every float is a dyadic rational; 2 is invertible mod an odd p).

The exact work is proportional to what the argument reads: m + 1 coordinates on a k×k grid
(k = ⌈√(m+1)⌉ rows of D, k columns of U) and one determinant over Z/p for a prime p below
2^21 (`checker/modlu.py`: a blocked LU whose every product is exact in float64 BLAS, the
bound k·(p−1)² < 2^53 raised on; tested against FLINT). A minor 0 mod p is tried mod the
next prime before the grid is moved. That the m keys are distinct is the caller's
(`large.key_classes`: residue keys, O(m·d) vectorised); the checker recomputes it from its
own reading.

With biases (docs/rules.md §8.1) keys are affine, and rows with distinct directions are distinct
keys whatever their offsets: distinct residue keys suffice, the subset condition is
unchanged and the biases never enter the minor.
"""

from __future__ import annotations

import importlib.util
import sys
from fractions import Fraction
from math import isqrt
from pathlib import Path
from types import ModuleType

import numpy as np

from .. import linalg
from ..model import Block, Matrix
from .canonical import ridge
from .decision import Decision, undecided

METHOD = "§4 generic case + modular rank"
# The keys' prime (large.key_classes): below 2^26, so that no mantissa of a bf16, fp16 or fp32
# weight (≤ 24 bits) is a multiple of it.
PRIME = 67_108_859
# The minor's primes: the largest below 2^21, so that its LU runs exactly on float64 BLAS
# (checker/modlu.py: k·(p−1)² < 2^53 for products of inner dimension k ≤ 2,048). A minor that
# is 0 mod the first is tried mod the next (a false zero has probability about 1/p); the
# primes tried are recorded, and the checker recomputes the determinant mod each.
MINOR_PRIMES = [2_097_143, 2_097_133]  # = modlu.primes(2) (tests/test_modlu.py)
GRID_OFFSETS = 3


def modlu() -> ModuleType:
    """checker/modlu.py, the exact LU both sides share, loaded by its path: importing it
    through the `checker` package would run the checker's __init__, whose imports (sympy,
    z3) cost about half a second that the prover does not need. Registered under its own
    name, so the checker, when imported later, finds and uses this same module."""
    name = "absorb_formal.checker.modlu"
    found = sys.modules.get(name)
    if found is None:
        spec = importlib.util.spec_from_file_location(
            name, Path(__file__).resolve().parent.parent / "checker" / "modlu.py")
        assert spec is not None and spec.loader is not None
        found = importlib.util.module_from_spec(spec)
        sys.modules[name] = found
        spec.loader.exec_module(found)
    return found


def decide(block: Block, size: int, distinct_keys: bool, retries: bool = True
           ) -> Decision | None:
    """Not absorbable at the block's own width, by the modular-rank certificate, or None;
    undecided, saying why, when the minor would not fit in the memory left (never killed for
    want of memory). `distinct_keys`: every row of U is non-zero and alone on its key.
    `retries`: a minor 0 mod the first prime is tried mod the next and on other grids (else
    None at once: the caller has a test that decides both ways)."""
    if (not distinct_keys or block.depth != 1 or size != block.width or block.layers is None
            or block.activation.gated or ridge(block.activation) is None):
        return None
    layer = block.layers[0]
    m, d = layer.up.shape
    k = isqrt(m) + 1  # ⌈√(m+1)⌉
    if k > d:
        return None  # m + 1 > d²: the terms and S cannot be independent
    need, have = modlu().bytes_needed(m + 1), modlu().bytes_available()
    if have is not None and need > have:
        return undecided(f"the modular-rank minor of order {m + 1} needs about "
                         f"{need / 2**30:.1f} GiB and {max(have, 0) / 2**30:.1f} GiB are "
                         "available: not attempted (docs/rules.md, modular rank)")
    for offset in range(GRID_OFFSETS if retries else 1):
        rows_, cols_ = grid(offset, k, d, m + 1)
        tried: list[int] = []
        for p in MINOR_PRIMES if retries else MINOR_PRIMES[:1]:
            det = _minor(block, layer.up, layer.down, rows_, cols_, m, p)
            if det is None:
                break  # p divides a denominator: the next grid (the checker needs the prefix)
            tried.append(p)
            if det != 0:
                return Decision(False, METHOD, {
                    "kind": "modular rank", "rule": "§4 generic case", "prime": PRIME,
                    "minor_primes": tried, "rows": rows_, "cols": cols_, "det_mod_p": det,
                    "argument": "the m rows of U have pairwise different residue keys mod "
                                "prime (each row over its first non-zero entry), so they lie "
                                "on distinct lines and the m keys are distinct; at width m "
                                "the block is absorbable iff a subset of the d_i u_i^T sums "
                                "to -S/(2a); the (m+1)-minor of [vec(d_i u_i^T) | vec(S)] on "
                                "the first m+1 coordinates of rows x cols is 0 modulo every "
                                "minor prime but the last, and det_mod_p (non-zero) modulo "
                                "the last, so vec(S) is outside their span"},
                    detail=f"{m} distinct keys; a minor of order {m + 1} is {det} mod {p}")
    return None


def grid(offset: int, k: int, d: int, count: int) -> tuple[list[int], list[int]]:
    """k columns and the ⌈count/k⌉ rows whose first `count` coordinates (row-major) a minor
    uses: no listed row goes unused (a field nothing reads would be unchecked)."""
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


def _minor(block: Block, up: Matrix, down: Matrix, rows_: list[int], cols_: list[int],
           m: int, p: int) -> int | None:
    """det mod p of the (m+1)×(m+1) matrix: coordinate (r, c) ↦ (d_i[r]·u_i[c] …, S[r, c]);
    the determinant from checker/modlu.py's exact LU. None when p divides a denominator."""
    work = augmented(block, up, down, rows_, cols_, m + 1, p, Fraction(1))
    return None if work is None else modlu().det_auto(work, p)


def augmented(block: Block, up: Matrix, down: Matrix, rows_: list[int], cols_: list[int],
              count: int, p: int, factor: Fraction) -> np.ndarray | None:
    """The count×(m+1) float64 array mod p: coordinate (r, c) ↦ (d_i[r]·u_i[c] for each i,
    factor·S[r, c]), on the first `count` coordinates of rows_ × cols_ (row-major); residues
    come from the exact weights (never from float64 copies, which round 0.3, long doubles and
    integers beyond 2^53). None when p divides a denominator."""
    m = up.shape[0]
    coords = [(r, c) for r in rows_ for c in cols_][:count]
    where_r = {r: n for n, r in enumerate(rows_)}
    where_c = {c: n for n, c in enumerate(cols_)}
    r_pos = np.array([where_r[r] for r, _ in coords])
    c_pos = np.array([where_c[c] for _, c in coords])
    d_res = down.residues(rows_, range(m), p)  # k × m
    u_res = up.residues(range(m), cols_, p)  # m × k
    skip = _skip_residues(block, rows_, cols_, p)
    scale = linalg.residue(factor, p)
    if d_res is None or u_res is None or skip is None or scale is None:
        return None
    last = skip[r_pos, c_pos] * scale % p
    return modlu().product_minor(d_res, u_res, r_pos, c_pos, last, p)
