"""T2∞ Parity at infinity (docs/rules.md §8, "T2 survives only at infinity"): σ even (E) and
positively homogeneous of degree 1 (H(1)), ungated — abs, leaky_relu(−1).

For a plain stack P with biases, `P(tx)/t → P₀(x)` as t → ∞, where P₀ is P with every bias
dropped (H(1) and Lipschitz σ: σ(t w + β)/t → σ(w)); P₀ is even (E). Likewise
`B(tx)/t → B₀(x)`. So B = P forces B₀ even: a rational x0 with `B₀(x0) ≠ B₀(−x0)` refutes
every width. Depth 1: `B₀(x) − B₀(−x) = 2Sx`, so S ≠ 0 suffices (the family form).
Only for biased blocks: bias-free ones are T2's (B₀ = B)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..certify import never as cert
from ..model.blocks import Block
from . import points, skip
from .lemmas import Properties

RULE = "T2∞ parity at infinity"


def _applies(block: Block, props: Properties) -> bool:
    return (block.biased and props.even and props.homogeneous == 1
            and not block.activation.gated)


def _lemmas(props: Properties) -> dict[str, str]:
    return {"E": props.lemmas["E"], "H(1)": props.lemmas["H"]}


def family(block: Block, props: Properties) -> dict[str, Any] | None:
    found = skip.direction(block.skip, 1)
    if not _applies(block, props) or block.depth != 1 or found is None:
        return None
    index, value = found
    return cert.parity_infinity_direction(_lemmas(props), index, value)


def without_biases(block: Block) -> Block:
    """B₀: the same block with every bias dropped (a bias-free block)."""
    assert block.layers is not None
    layers = tuple(replace(layer, up_bias=None, gate_bias=None, down_bias=None)
                   for layer in block.layers)
    return replace(block, biased=False, layers=layers)


def concrete(block: Block, props: Properties) -> dict[str, Any] | None:
    if not _applies(block, props) or not block.activation.is_rational:
        return None
    b0 = without_biases(block)
    found = skip.direction(block.skip, 1) if block.depth == 1 else None
    for x0 in points.candidates(block.dim, found[0] if found else None):
        plus, minus = b0.evaluate_exact(x0), b0.evaluate_exact(tuple(-v for v in x0))
        if plus != minus:
            return cert.parity_point_at_infinity(_lemmas(props), x0, plus, minus)
    return None
