"""Blocks too large to embed: the modular-rank certificate (docs/certificates.md) re-checked
from the checker's own exact reading of the weight files (`files.py`: bit fields → integer mantissa
and power of two), never from arrays the prover hands over.

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
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Protocol

import numpy as np


class ExactMatrix(Protocol):
    """An exact matrix as the checker reads it (`files.Dyadic` or `reading.Rational`)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    def column(self, j: int) -> list[Fraction]: ...

    def residues(self, p: int, index: Any) -> list[int]: ...

    def residue_matrix(self, p: int) -> np.ndarray: ...

    def nonzero(self) -> np.ndarray: ...


Layers = list[dict[str, ExactMatrix]]  # per layer: "up", "down" (and "gate")


class Invalid(Exception):
    """The modular-rank certificate does not hold for these weights."""


def require(condition: bool, reason: str) -> None:
    if not condition:
        raise Invalid(reason)


def _is_prime(p: int) -> bool:
    import sympy

    return bool(sympy.isprime(p))


def _residue(value: Fraction, p: int) -> int:
    require(value.denominator % p != 0, f"a denominator is divisible by {p}")
    return value.numerator * pow(value.denominator, -1, p) % p


def check(skip: list[list[Fraction]], width: int, layers: Layers, cert: dict[str, Any]) -> None:
    """Distinct keys mod p, then a non-zero (m+1)-minor mod p of [vec(d_i u_iᵀ) | vec S]:
    at width m no subset of the d_i u_iᵀ reaches −S/(2a) (docs/rules.md §4 generic case)."""
    require(cert.get("rule") == "§4 generic case", "modular rank is §4's generic case")
    up, down = _depth_one(layers)
    m, d = up.shape
    require(width == m, "the generic-case argument decides the block's own width only")
    p = _prime(cert)
    distinct, _ = key_classes(up, down, p)
    require(distinct, f"two rows of U share a key mod {p} (or a row is 0)")
    rows, cols = [int(r) for r in cert["rows"]], [int(c) for c in cert["cols"]]
    # every listed row and column is read: no field goes unchecked
    require(0 < len(cols) <= m + 1 and (len(rows) - 1) * len(cols) < m + 1,
            "the grid lists rows or columns that the minor does not use")
    coords = [(r, c) for r in rows for c in cols][: m + 1]
    require(len(set(coords)) == m + 1 and all(0 <= r < d and 0 <= c < d for r, c in coords),
            "the grid does not give m+1 distinct coordinates")
    d_res, u_res = down.residue_matrix(p), up.residue_matrix(p)
    r_idx, c_idx = [r for r, _ in coords], [c for _, c in coords]
    matrix = np.empty((m + 1, m + 1), dtype=np.int64)
    matrix[:, :m] = d_res[r_idx, :] * u_res[:, c_idx].T % p
    matrix[:, m] = [_residue(skip[r][c], p) for r, c in coords]
    import flint

    det = int(flint.nmod_mat(flint.fmpz_mat(m + 1, m + 1, matrix.ravel().tolist()), p).det())
    require(det != 0, "the minor is 0 mod p")
    require(det == int(cert["det_mod_p"]), "the stored determinant is wrong")


def check_key_count(width: int, layers: Layers, cert: dict[str, Any]) -> None:
    """docs/rules.md §4 "p + |Δ| + 2k ≤ m′": each live key needs a neuron of the plain block. The
    live keys counted: residue-key classes of one row whose column of D is non-zero."""
    up, down = _depth_one(layers)
    p = _prime(cert)
    _, live = key_classes(up, down, p)
    require(int(cert["keys"]) == live, f"the stored key count is wrong ({live} mod {p})")
    require(int(cert["width"]) == width, "the certificate is for another width")
    require(width < live, f"{live} live keys fit in width {width}")


def _depth_one(layers: Layers) -> tuple[ExactMatrix, ExactMatrix]:
    require(len(layers) == 1 and "gate" not in layers[0], "depth-1 ungated blocks only")
    up, down = layers[0]["up"], layers[0]["down"]
    m, d = up.shape
    require(tuple(down.shape) == (d, m), "'down' is not d × m")
    return up, down


def _prime(cert: dict[str, Any]) -> int:
    p = int(cert["prime"])
    require(2 < p < 2**31 and _is_prime(p), f"{p} is not an odd prime below 2^31")
    return p


def key_classes(up: ExactMatrix, down: ExactMatrix, p: int) -> tuple[bool, int]:
    """(every row of U non-zero and alone on its residue key, the number of rows alone on their
    residue key whose column of D is non-zero), from the checker's own exact reading."""
    res, nonzero = up.residue_matrix(p), up.nonzero()
    require(bool(np.array_equal(res != 0, nonzero)),
            f"a non-zero entry of U is a multiple of {p}: residue keys are not sound")
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
    keys = np.ascontiguousarray(res * scale[:, None] % p)
    rows = keys.view(np.dtype((np.void, keys.dtype.itemsize * keys.shape[1]))).ravel()
    _, where, counts = np.unique(rows[present], return_inverse=True, return_counts=True)
    alone = np.zeros(m, dtype=bool)
    alone[present] = counts[where.ravel()] == 1
    live = down.nonzero().any(axis=0)
    return bool(present.all() and alone.all()), int((alone & live).sum())

