"""Blocks too large to embed: the modular-functional certificate (docs/certificates.md)
re-checked from the checker's own exact reading of the weight files (`files.py`: bit fields →
integer mantissa and power of two), never from arrays the prover hands over.

The document stores, for such a block, its matrix sources (file, key, transpose, SHA-256);
`reading.Reading.weights` reads them, after `absorb-prove check` has matched the files'
bytes against those hashes. Residues mod p come from the exact (mantissa, exponent) pairs.
Biases (docs/rules.md §8.1) are not read: distinct directions are distinct affine keys, and the
subset condition does not involve them.

Keys mod p (docs/rules.md §4): each row u of U is scaled by the inverse of its first non-zero entry,
mod p. Parallel rows (one relu key, or u and −u: one gelu key) give one residue key, so rows
with different residue keys lie on different lines, hence on different keys in both families
(and, with biases, on different affine keys). This needs every non-zero entry of U to be
non-zero mod p (else two parallel rows could have different first entries mod p): checked.

The functional (docs/rules.md §4 generic case): with the m neurons alive on m distinct keys,
the block is absorbable at width m iff S + Σ c_i d_i u_iᵀ = 0 with c_i ∈ {0, ±2a}. A Y with
d_iᵀ Y u_i ≡ 0 mod q for every i and ⟨Y, S⟩ ≢ 0 mod q excludes that (pair the identity with
Y and reduce mod q: a, D's rows and U's columns on Y's grid and S there have denominators
prime to q). Checked with one product, O(m·k²) for a k × k grid, and no LU.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

from ..kernel import modlu, systems
from ..kernel.contract import require
from ..kernel.linalg import whole


class ExactMatrix(Protocol):
    """An exact matrix as the checker reads it (`files.Dyadic` or `reading.Rational`)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    def column(self, j: int) -> list[Fraction]: ...

    def row(self, i: int) -> list[Fraction]: ...

    def residues(self, p: int, index: Any) -> list[int]: ...

    def residue_matrix(self, p: int) -> np.ndarray: ...

    def residue_block(self, p: int, rows: list[int] | None, cols: list[int] | None
                      ) -> np.ndarray: ...

    def nonzero(self) -> np.ndarray: ...


Layers = list[dict[str, ExactMatrix]]  # per layer: "up", "down" (and "gate")



def _residue(value: Fraction, p: int) -> int:
    require(value.denominator % p != 0, f"a denominator is divisible by {p}")
    return value.numerator * pow(value.denominator, -1, p) % p


def check(skip: Callable[[int, int], Fraction], width: int, layers: Layers,
          cert: dict[str, Any], slope: Fraction) -> None:
    """Every neuron alive on its own key mod p, then Y: d_iᵀ Y u_i ≡ 0 mod q for every i and
    ⟨Y, S⟩ ≢ 0 mod q — at width m no identity S + Σ c_i d_i u_iᵀ = 0 with c_i ∈ {0, ±2a}
    (`slope` = a) holds (docs/rules.md §4 generic case). `skip(r, c)`: S's entry."""
    require(cert.get("rule") == "§4 generic case", "the modular functional is §4's generic case")
    up, down = depth_one(layers)
    m, d = up.shape
    require(width == m, "the generic-case argument decides the block's own width only")
    p = key_prime(cert)
    distinct, live = key_classes(up, down, p)
    require(distinct, f"two rows of U share a key mod {p} (or a row is 0)")
    require(live == m, "a column of D is 0: not every neuron is alive (no generic case)")
    q = whole(cert["minor_prime"])
    require(q < 2**21 and modlu.usable(q), f"{q} is not an odd prime below 2^21")
    require(slope.denominator % q != 0, f"{q} divides the denominator of a")
    rows, cols = [whole(r) for r in cert["rows"]], [whole(c) for c in cert["cols"]]
    # every listed row and column is read: no field goes unchecked
    require(0 < len(cols) <= m + 1 and (len(rows) - 1) * len(cols) < m + 1,
            "the grid lists rows or columns that Y does not use")
    coords = [(r, c) for r in rows for c in cols][: m + 1]
    require(len(set(coords)) == m + 1 and all(0 <= r < d and 0 <= c < d for r, c in coords),
            "the grid does not give m+1 distinct coordinates")
    y = [whole(v) for v in cert["Y"]]
    require(len(y) == m + 1 and all(0 <= v < q for v in y),
            f"Y must give m+1 residues in [0, {q})")
    values = systems.functional_values(systems.on_grid(y, len(rows), len(cols)),
                                     down.residue_block(q, rows, None),
                                     up.residue_block(q, None, cols), q)
    require(not values.any(), f"Y is not orthogonal to d_i u_i^T mod {q} for every i")
    value = sum(v * _residue(skip(r, c), q) for v, (r, c) in zip(y, coords, strict=True)) % q
    require(value != 0, f"<Y, S> is 0 mod {q}")
    require(value == whole(cert["Y_dot_S"]), "the stored <Y, S> is wrong")


def check_key_count(width: int, layers: Layers, cert: dict[str, Any]) -> None:
    """docs/rules.md §4 "p + |Δ| + 2k ≤ m′": each live key needs a neuron of the plain block. The
    live keys counted: residue-key classes of one row whose column of D is non-zero."""
    up, down = depth_one(layers)
    p = key_prime(cert)
    _, live = key_classes(up, down, p)
    require(whole(cert["keys"]) == live, f"the stored key count is wrong ({live} mod {p})")
    require(whole(cert["width"]) == width, "the certificate is for another width")
    require(width < live, f"{live} live keys fit in width {width}")


def depth_one(layers: Layers) -> tuple[ExactMatrix, ExactMatrix]:
    """(U, D) of a depth-1 ungated block's weights, D d × m."""
    require(len(layers) == 1 and "gate" not in layers[0], "depth-1 ungated blocks only")
    up, down = layers[0]["up"], layers[0]["down"]
    m, d = up.shape
    require(tuple(down.shape) == (d, m), "'down' is not d × m")
    return up, down


def key_prime(cert: dict[str, Any]) -> int:
    """The residue keys' prime the certificate names: an odd prime below 2^31."""
    stored = cert["prime"]  # an integer in the document: int() would pass 67108859.5 or "7"
    require(type(stored) is int, f"the prime is not an integer: {stored!r}")
    p = int(stored)
    require(2 < p < 2**31 and modlu.is_prime(p), f"{p} is not an odd prime below 2^31")
    return p


def key_classes(up: ExactMatrix, down: ExactMatrix, p: int) -> tuple[bool, int]:
    """(every row of U non-zero and alone on its residue key, the number of rows alone on their
    residue key whose column of D is non-zero), from the checker's own exact reading."""
    res, nonzero = up.residue_matrix(p), np.asarray(up.nonzero())
    alone = _keys_alone(res, nonzero, p, "U")
    live = down.nonzero().any(axis=0)
    return bool(nonzero.any(axis=1).all() and alone.all()), int((alone & live).sum())


def affine_keys_distinct(rows: ExactMatrix, offsets: list[Fraction], p: int) -> bool:
    """Whether every row r_i is non-zero and the rows [r_i | o_i] lie on pairwise different
    lines of Q^{d+1} (docs/rules.md §8.2 keys: relu² [u_i | β_i], gated [g_i | γ_i]), by
    residue keys mod p: different residue keys are different lines, hence different keys up
    to a non-zero factor and up to sign."""
    res, nonzero = rows.residue_matrix(p), np.asarray(rows.nonzero())
    if not nonzero.any(axis=1).all():
        return False
    column = np.array([_residue(o, p) for o in offsets], dtype=np.int64).reshape(-1, 1)
    flags = np.array([o != 0 for o in offsets], dtype=bool).reshape(-1, 1)
    return bool(_keys_alone(np.hstack([res, column]), np.hstack([nonzero, flags]), p,
                            "a key row").all())


def _keys_alone(res: np.ndarray, nonzero: np.ndarray, p: int, what: str) -> np.ndarray:
    """Which rows are non-zero and alone on their residue key (the row times the inverse of
    its first non-zero entry, mod p); `res` is overwritten with the keys."""
    require(bool(np.array_equal(res != 0, nonzero)),
            f"a non-zero entry of {what} is a multiple of {p}: residue keys are not sound")
    m = res.shape[0]
    present = nonzero.any(axis=1)
    first = res[np.arange(m), nonzero.argmax(axis=1)]
    scale = np.ones(m, dtype=np.int64)
    base, power = np.where(present, first, 1).astype(np.int64), p - 2
    while power:  # first^(p−2) = first^−1 mod p, square and multiply on the whole column
        if power & 1:
            scale = scale * base % p
        base = base * base % p
        power >>= 1
    res *= scale[:, None]  # in place: the keys (an OPT-size U has 67 million entries)
    res %= p
    return _alone(res, np.asarray(present))


def _alone(keys: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Which rows of `keys` (non-negative int64) are present and equal to no other present
    row, exactly. Rows are first grouped by a 64-bit hash (Σ_j keys[i, j]·w_j mod 2^64, odd
    w_j): equal rows have equal hashes, so only rows sharing a hash are compared, entry by
    entry. Memory O(m) beyond the keys (sorting whole rows would copy them twice)."""
    m, d = keys.shape
    weights = np.arange(d, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) | np.uint64(1)
    hashes = np.zeros(m, dtype=np.uint64)
    step = max(1, (1 << 20) // max(1, d))
    for start in range(0, m, step):  # wrapping uint64 arithmetic: a hash, nothing more
        hashes[start:start + step] = (keys[start:start + step].view(np.uint64)
                                      * weights).sum(axis=1)
    alone = present.copy()
    candidates = np.flatnonzero(present)
    order = candidates[np.argsort(hashes[candidates], kind="stable")]
    ends = np.flatnonzero(np.diff(hashes[order])) + 1
    for group in np.split(order, ends):
        if len(group) > 1:  # a shared hash: compare the rows themselves
            rows = np.ascontiguousarray(keys[group])
            void = rows.view(np.dtype((np.void, rows.dtype.itemsize * d))).ravel()
            _, where, counts = np.unique(void, return_inverse=True, return_counts=True)
            alone[group] = counts[where.ravel()] == 1
    return alone

