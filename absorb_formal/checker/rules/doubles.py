"""The doubles witness of large blocks (docs/rules.md §4, §8.1: min width ≤ m + d), checked from
the checker's own reading of U.

The witness is the block's own neurons, biases kept, except that each listed neuron i
(i ∈ Δ, |Δ| = d) gives a vector w_i of its down column to one new neuron with up row −u_i and
up bias −β_i. With the lemma O(a), σ(z) − σ(−z) = 2a·z (re-proved from σ's formula by
`lemmas`, through the caller's family),

    (d_i − w_i) σ(ℓ_i) + w_i σ(−ℓ_i) = d_i σ(ℓ_i) − 2a w_i ℓ_i,   ℓ_i = u_i·x + β_i,

so the plain block is the block minus the skip plus −2a W (U_Δ x + β_Δ), W = [w_i]. When the
rows U_Δ are linearly independent, W = −S U_Δ⁻¹/(2a) exists and −2a W U_Δ = S: the linear
parts agree, and the constant S U_Δ⁻¹ β_Δ (none without biases) is taken off the down bias.
Nothing about S, D or the biases needs checking: any S, any down columns (zero or not), any
keys (shared or not) work. What is checked is that U_Δ is invertible over Q: its determinant
modulo the stored prime p, from the exact residues of the weights (`residue_matrix`: the
bits of each float, never a float64 copy), is non-zero — and p divides no denominator (the
residues refuse otherwise; floats have power-of-two denominators), so det U_Δ ≠ 0 over Q.
The determinant is an exact LU mod p on float64 BLAS (`modlu.py`). Width m + d.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..kernel import modlu
from ..kernel.contract import Check, require
from ..kernel.linalg import q, whole
from .modular import Layers


def check(block: dict[str, Any], width: int, cert: dict[str, Any],
          family: tuple[str, Fraction, Fraction | None], layers: Layers) -> None:
    require(cert["check"] == Check.DOUBLES, "not the doubles construction")
    require(block["depth"] == 1 and not block["activation"]["gated"], "depth-1 ungated only")
    kind, a, _ = family
    require(kind in ("relu", "analytic") and a != 0, "doubles need O(a) with a != 0")
    require(q(cert["a"]) == a, f"the stored a is not the re-proved a = {a}")
    require(len(layers) == 1 and "gate" not in layers[0], "depth-1 ungated weights only")
    up = layers[0]["up"]
    m, d = up.shape
    require((m, d) == (int(block["width"]), int(block["dim"])), "'up' is not width × dim")
    neurons = cert["neurons"]
    require(isinstance(neurons, list) and all(type(i) is int for i in neurons)
            and neurons == sorted(set(neurons)) and all(0 <= i < m for i in neurons),
            "the neurons are not increasing indices below m")
    require(len(neurons) == d, f"doubles need d = {d} neurons, {len(neurons)} are listed")
    p = whole(cert["prime"])
    require(modlu.usable(p), f"{p} is not a prime the exact LU works with")
    # only the listed rows are read: another row's denominator cannot refuse the certificate
    rows = np.array([up.residues(p, i) for i in neurons], dtype=np.int64).reshape(d, d)
    det = modlu.det_mod(rows, p)
    require(det != 0, f"the listed rows of U are dependent mod {p}")
    require(det == whole(cert["det_mod_p"]), "the stored determinant is wrong")
    size = whole(cert["width"])
    require(size == m + d, "the width is not m + d")
    require(size <= width, f"the witness has width {size} > {width}")
