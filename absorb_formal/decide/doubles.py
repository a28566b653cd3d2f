"""The doubles witness of large blocks (docs/rules.md §4, §8.1: min width ≤ m + d when d rows
of U are independent), cheaper than spare pairs when d < 2·rank S. The checker's side is
`checker/rules/doubles.py`.

For any neuron i, (d_i − w)σ(ℓ_i) + w σ(−ℓ_i) = d_i σ(ℓ_i) − 2a w ℓ_i (lemma O(a)): moving w
off its down column onto one new neuron (up −u_i, bias −β_i) adds −2a w u_iᵀ to the linear
part and a constant, which the down bias absorbs. With d neurons Δ whose rows U_Δ are
independent, W = −S U_Δ⁻¹/(2a) gives −2a W U_Δ = S: width m + d. The certificate names Δ, a
prime p < 2^21 and det U_Δ mod p (non-zero: U_Δ is invertible over Q), no weights; the
checker recomputes the determinant from its own reading of U. `large.narrowest` chooses
between doubles and spare pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..certify import large as cert
from ..model import exactarray
from ..model.blocks import Block, Matrix
from ..numeric import accelerated
from . import modular
from .canonical import ridge
from .spare import fmpq, object_array, scaled

# below 2^21: det U_Δ by the exact LU of checker/kernel/modlu.py
DOUBLES_PRIME = modular.MINOR_PRIMES[0]
# W = −S U_Δ⁻¹/(2a) is built exactly (python-flint) only up to this d: its entries have about
# d times the bits of a weight (d = 768: gigabytes). Export does not need it: it rounds W
# from enclosures at any d (`enclosed_doubles`), and solves rows exactly only where a ball
# touches a rounding midpoint (any number of them up to this d, a few beyond it).
EXACT_DOUBLES = 160


@dataclass(frozen=True)
class Doubles:
    """d neurons whose rows of U are independent: det U_Δ ≡ det ≠ 0 mod prime."""

    neurons: list[int]
    prime: int
    det: int


def find_doubles(up: Matrix, p: int = DOUBLES_PRIME) -> Doubles | None:
    """The first d rows of U independent mod p: rows 0..d−1 when their determinant is not 0
    mod p (one LU of order d), else the pivot rows of Uᵀ (one LU of d × m). None when U has
    rank < d mod p (then, most likely, over Q too) or p divides a denominator."""
    m, d = up.shape
    if m < d:
        return None
    first = up.residues(range(d), range(d), p)
    if first is None:
        return None
    det = accelerated.det_mod(first, p)
    if det:
        return Doubles(list(range(d)), p, det)
    whole = up.residues(range(m), range(d), p)
    assert whole is not None  # its first rows had residues
    rows = accelerated.pivot_columns(whole.T, p)
    if len(rows) < d:
        return None
    det = accelerated.det_mod(whole[rows], p)
    assert det, "pivot rows mod p have a non-zero determinant mod p"
    return Doubles(rows, p, det)


def certificate(block: Block, found: Doubles) -> dict[str, Any]:
    ridge_ = ridge(block.activation)
    assert ridge_ is not None
    return cert.doubles(block.width + len(found.neurons), ridge_.a, found.neurons, found.prime,
                        found.det)


class TooWide(Exception):
    """The doubles witness is not built exactly beyond EXACT_DOUBLES, or (export) cannot be
    rounded from enclosures (its certificate, which stores no weights, is unaffected)."""


def doubled(block: Block, neurons: list[int]) -> dict[str, np.ndarray]:
    """Doubles on `neurons` (U_Δ invertible): W = −S U_Δ⁻¹/(2a), solved exactly over Q
    (python-flint); new neurons (−u_i, −β_i, w_i); own columns d_i − w_i; down bias
    c + 2a·W β_Δ (= c − S U_Δ⁻¹ β_Δ)."""
    assert block.layers is not None
    layer, d, k = block.layers[0], block.dim, len(neurons)
    if k > EXACT_DOUBLES:
        raise TooWide(f"the doubles witness needs W = -S U^-1/(2a) for a {k}×{k} matrix U of "
                      f"the block's rows, built exactly only up to {EXACT_DOUBLES}")
    ridge_ = ridge(block.activation)
    assert ridge_ is not None
    a = ridge_.a
    ups = exact_rows(layer.up, neurons)
    target = fmpq([[-v / (2 * a) for v in row] for row in zip(*block.skip.rows(), strict=True)])
    solved = fmpq(ups).transpose().solve(target)  # U_Δᵀ Wᵀ = −Sᵀ/(2a)
    w = [[Fraction(int(solved[j, r].p), int(solved[j, r].q)) for j in range(k)]
         for r in range(d)]  # d × k
    own = [list(layer.down.exact_column(i)) for i in neurons]
    betas = [layer.up_bias[i] if layer.up_bias is not None else Fraction(0) for i in neurons]
    out = {"up": object_array([scaled(u, Fraction(-1)) for u in ups], (k, d)),
           "down": object_array(w, (d, k)),
           "columns": np.array(neurons, dtype=np.int64),
           "own_down": object_array([[own[j][r] - w[r][j] for j in range(k)]
                                     for r in range(d)], (d, k))}
    if layer.up_bias is not None:
        out["up_bias"] = object_array([-b for b in betas], (k,))
    if layer.down_bias is not None:
        out["down_bias"] = object_array(
            [c + 2 * a * sum((w[r][j] * betas[j] for j in range(k)), Fraction(0))
             for r, c in enumerate(layer.down_bias)], (d,))
    return out


def exact_rows(matrix: Matrix, rows: list[int]) -> list[list[Fraction]]:
    """The listed rows exactly, without converting the rest of a loaded array."""
    if matrix.loaded is not None:
        return exactarray.fractions(matrix.loaded[rows])
    return [list(matrix.rows[i]) for i in rows]
