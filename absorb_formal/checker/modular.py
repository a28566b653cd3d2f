"""Blocks too large to embed: the modular-rank certificate (MATH.md §7) re-checked from the
checker's own exact reading of the weight files (`files.py`: bit fields → integer mantissa
and power of two), never from arrays the prover hands over.

The document stores, for such a block, its matrix sources (file, key, transpose, SHA-256);
`reading.Reading.weights` reads them, after `absorb-prove check` has matched the files'
bytes against those hashes. Residues mod p come from the exact (mantissa, exponent) pairs.
Biases (MATH.md §8.1) are not read: distinct directions are distinct affine keys, and the
subset condition does not involve them.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Protocol


class ExactMatrix(Protocol):
    """An exact matrix as the checker reads it (`files.Dyadic` or `reading.Rational`)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    def column(self, j: int) -> list[Fraction]: ...

    def residues(self, p: int, index: Any) -> list[int]: ...


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
    """Distinct keys on two columns, then a non-zero (m+1)-minor mod p of [vec(d_i u_iᵀ) | vec S]:
    at width m no subset of the d_i u_iᵀ reaches −S/(2a) (MATH.md §4 generic case)."""
    require(len(layers) == 1 and "gate" not in layers[0], "modular rank is for depth-1 ungated")
    up, down = layers[0]["up"], layers[0]["down"]
    m, d = up.shape
    require(width == m, "the generic-case argument decides the block's own width only")
    require(tuple(down.shape) == (d, m), "'down' is not d × m")
    _distinct_keys(up, [int(c) for c in cert["key_columns"]])
    p = int(cert["prime"])
    require(p > 2 and _is_prime(p), f"{p} is not an odd prime")
    rows, cols = [int(r) for r in cert["rows"]], [int(c) for c in cert["cols"]]
    coords = [(r, c) for r in rows for c in cols][: m + 1]
    require(len(set(coords)) == m + 1 and all(0 <= r < d and 0 <= c < d for r, c in coords),
            "the grid does not give m+1 distinct coordinates")
    d_res = {r: down.residues(p, r) for r in set(rows)}
    u_res = {c: up.residues(p, (slice(None), c)) for c in set(cols)}
    matrix = [[a * b % p for a, b in zip(d_res[r], u_res[c], strict=True)]
              + [_residue(skip[r][c], p)] for r, c in coords]
    import flint

    det = int(flint.nmod_mat(matrix, p).det())
    require(det != 0, "the minor is 0 mod p")
    require(det == int(cert["det_mod_p"]), "the stored determinant is wrong")


def _distinct_keys(up: ExactMatrix, columns: list[int]) -> None:
    """Exact ratios u_i[c0] / u_i[c1] pairwise distinct: no two rows of U on one line."""
    c0, c1 = columns
    require(all(0 <= c < up.shape[1] for c in columns), "key columns out of range")
    seen = set()
    for x, y in zip(up.column(c0), up.column(c1), strict=True):
        require(x != 0 or y != 0, f"a row of U is 0 on columns {c0}, {c1}")
        ratio = x / y if y != 0 else None
        require(ratio not in seen, f"two rows of U have the same ratio on columns {c0}, {c1}")
        seen.add(ratio)
