"""Linear activations (σ(z) = a·z, e.g. identity, leaky_relu(1)), depth 1 (docs/rules.md §4).

Every block is the linear map Λ = S + a·DU, and a plain block of width m′ realises exactly the
matrices of rank ≤ m′: absorbable at m′ iff rank(Λ) ≤ m′; minimal width max(1, rank Λ).
With biases (docs/rules.md §8, "identity: biases change nothing but a constant") the block is
x ↦ Λx + γ, γ = c + a·D b; a biased plain block of width m′ is any rank-≤ m′ map plus any
constant (its output bias), so the rule is the same and the witness carries γ as its output
bias (hidden biases 0).
"""

from __future__ import annotations

from fractions import Fraction

from ..certify import widths as cert
from ..model import linalg
from ..model.blocks import Block, Layer, Matrix
from .decision import Decision
from .lemmas import properties

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
        return Decision(False, METHOD, cert.linear_rank(matrix, r, width),
                        detail=f"rank {r} > {width}")
    layer = witness(matrix, a, block.dim, width, constant(block, a))
    return Decision(True, METHOD, cert.linear_maps_equal(layer, width),
                    witness=(layer,), detail=f"rank {r}")


def constant(block: Block, a: Fraction) -> tuple[Fraction, ...] | None:
    """γ = c + a·D b of a biased block (None without biases)."""
    assert block.layers is not None
    layer = block.layers[0]
    if not block.biased:
        return None
    zero = Fraction(0)
    b = layer.up_bias or (zero,) * block.width
    c = layer.down_bias or (zero,) * block.dim
    return tuple(c[r] + a * sum((x * y for x, y in zip(row, b, strict=True)), zero)
                 for r, row in enumerate(layer.down.rows))


def witness(matrix: linalg.Rows, a: Fraction, dim: int, width: int,
            gamma: tuple[Fraction, ...] | None = None) -> Layer:
    """Λ = Σ c_r y_rᵀ as neurons (u = y_r, d = c_r / a), zero-padded to `width`; with a
    constant γ (biased, docs/rules.md §8) hidden biases 0 and output bias γ."""
    neurons = [(y, tuple(x / a for x in c)) for c, y in linalg.rank_factor(matrix)]
    zero = tuple(Fraction(0) for _ in range(dim))
    neurons += [(zero, zero)] * (width - len(neurons))
    return Layer(Matrix([u for u, _ in neurons]),
                 Matrix(linalg.transpose([d for _, d in neurons])),
                 up_bias=None if gamma is None else (Fraction(0),) * width, down_bias=gamma)


def min_width(block: Block) -> int | None:
    a = slope(block)
    if a is None or block.depth != 1 or block.layers is None:
        return None
    return max(1, linalg.rank(lam(block, a)))
