"""Blocks too large to embed: their weights arrive as arrays, authenticated by SHA-256, and
the modular-rank certificate (MATH.md §7) is re-checked from them.

The document stores, for such a block, only `{"sha256", "weights"}`; `absorb-prove check`
reloads the spec and hands the float arrays in. `digest` is the one definition of that hash
(the prover's document writer calls it too), so the arrays checked are the arrays certified.
"""

from __future__ import annotations

import hashlib
from fractions import Fraction
from typing import Any

import numpy as np

Arrays = list[dict[str, np.ndarray]]  # per layer: "up", "down" (and "gate"), float64


class Invalid(Exception):
    """The modular-rank certificate does not hold for these weights."""


def require(condition: bool, reason: str) -> None:
    if not condition:
        raise Invalid(reason)


def digest(layers: Arrays) -> str:
    """SHA-256 over each layer's gate, up, down (those present): shape, then float64 bytes."""
    h = hashlib.sha256()
    for layer in layers:
        for name in ("gate", "up", "down"):
            if name in layer:
                array = np.ascontiguousarray(layer[name], dtype=np.float64)
                h.update(repr(tuple(int(n) for n in array.shape)).encode())
                h.update(array.tobytes())
    return h.hexdigest()


def authenticate(stored: dict[str, Any], layers: Arrays | None) -> Arrays:
    require(layers is not None, "the block's weights are not embedded; give them to the "
                                "checker (absorb-prove check reloads them from the spec)")
    assert layers is not None
    require(digest(layers) == stored["sha256"], "the given weights do not match the SHA-256 "
                                                "the certificate was issued for")
    return layers


def _is_prime(p: int) -> bool:
    import sympy

    return bool(sympy.isprime(p))


def _residue(x: float | Fraction, p: int) -> int:
    value = Fraction(x)
    require(value.denominator % p != 0, f"a denominator is divisible by {p}")
    return value.numerator * pow(value.denominator, -1, p) % p


def check(skip: list[list[Fraction]], width: int, layers: Arrays, cert: dict[str, Any]) -> None:
    """Distinct keys on two columns, then a non-zero (m+1)-minor mod p of [vec(d_i u_iᵀ) | vec S]:
    at width m no subset of the d_i u_iᵀ reaches −S/(2a) (MATH.md §4 generic case)."""
    require(len(layers) == 1 and "gate" not in layers[0], "modular rank is for depth-1 ungated")
    up, down = layers[0]["up"], layers[0]["down"]
    m, d = up.shape
    require(width == m, "the generic-case argument decides the block's own width only")
    _distinct_keys(up, [int(c) for c in cert["key_columns"]])
    p = int(cert["prime"])
    require(p > 2 and _is_prime(p), f"{p} is not an odd prime")
    rows, cols = [int(r) for r in cert["rows"]], [int(c) for c in cert["cols"]]
    coords = [(r, c) for r in rows for c in cols][: m + 1]
    require(len(set(coords)) == m + 1 and all(0 <= r < d and 0 <= c < d for r, c in coords),
            "the grid does not give m+1 distinct coordinates")
    d_res = {r: [_residue(x, p) for x in down[r].tolist()] for r in set(rows)}
    u_res = {c: [_residue(x, p) for x in up[:, c].tolist()] for c in set(cols)}
    matrix = [[a * b % p for a, b in zip(d_res[r], u_res[c], strict=True)]
              + [_residue(skip[r][c], p)] for r, c in coords]
    import flint

    det = int(flint.nmod_mat(matrix, p).det())
    require(det != 0, "the minor is 0 mod p")
    require(det == int(cert["det_mod_p"]), "the stored determinant is wrong")


def _distinct_keys(up: np.ndarray, columns: list[int]) -> None:
    c0, c1 = columns
    seen = set()
    for x, y in zip(up[:, c0].tolist(), up[:, c1].tolist(), strict=True):
        require(x != 0 or y != 0, f"a row of U is 0 on columns {c0}, {c1}")
        ratio = Fraction(x) / Fraction(y) if y != 0 else None
        require(ratio not in seen, f"two rows of U have the same ratio on columns {c0}, {c1}")
        seen.add(ratio)
