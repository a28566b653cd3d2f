"""Linear activations (σ(z) = a·z, e.g. identity, leaky_relu(1)), depth 1 (docs/rules.md §4).

Every block is the linear map Λ = S + a·DU, and a plain block of width m′ realises exactly the
matrices of rank ≤ m′: absorbable at m′ iff rank(Λ) ≤ m′; minimal width max(1, rank Λ).
"""

from __future__ import annotations

from fractions import Fraction

from .. import certificates as cert
from .. import linalg
from ..model import Block, Layer, Matrix
from ..properties import properties
from .decision import Decision

METHOD = "linear rank (§4)"


def slope(block: Block) -> Fraction | None:
    props = properties(block.activation)
    if block.activation.gated or not props.linear or props.odd_linear is None:
        return None
    return props.odd_linear


def lam(block: Block, a: Fraction) -> linalg.Rows:
    assert block.layers is not None
    layer = block.layers[0]
    return linalg.add(block.skip.rows(), linalg.matmul(layer.down.rows, layer.up.rows), a)


def decide_width(block: Block, width: int) -> Decision | None:
    a = slope(block)
    if a is None or block.depth != 1 or block.layers is None:
        return None
    matrix = lam(block, a)
    r = linalg.rank(matrix)
    if r > width:
        return Decision(False, METHOD, {"kind": "linear rank", "Lambda": cert.matrix(matrix),
                                        "rank": r, "width": width,
                                        "argument": "a plain linear block of width w has "
                                                    "rank <= w"}, detail=f"rank {r} > {width}")
    layer = witness(matrix, a, block.dim, width)
    return Decision(True, METHOD, cert.witness([layer], width, "linear maps equal"),
                    witness=(layer,), detail=f"rank {r}")


def witness(matrix: linalg.Rows, a: Fraction, dim: int, width: int) -> Layer:
    """Λ = Σ c_r y_rᵀ as neurons (u = y_r, d = c_r / a), zero-padded to `width`."""
    neurons = [(y, tuple(x / a for x in c)) for c, y in linalg.rank_factor(matrix)]
    zero = tuple(Fraction(0) for _ in range(dim))
    neurons += [(zero, zero)] * (width - len(neurons))
    return Layer(Matrix([u for u, _ in neurons]),
                 Matrix(linalg.transpose([d for _, d in neurons])))


def min_width(block: Block) -> int | None:
    a = slope(block)
    if a is None or block.depth != 1 or block.layers is None:
        return None
    return max(1, linalg.rank(lam(block, a)))
