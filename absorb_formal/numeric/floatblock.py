"""A block in float64, from the exact model or from a certificate's JSON witness."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..activations import Scalar
from ..model import Block


@dataclass(frozen=True)
class FloatBlock:
    """x ↦ S x + D σ(U x) (or gated) per layer; skip as c·I (matrix None) or a matrix."""

    scalar: Scalar
    gated: bool
    dim: int
    skip_scale: float
    skip_matrix: np.ndarray | None
    layers: tuple[dict[str, np.ndarray], ...]

    def normals(self) -> list[np.ndarray]:
        """The kink hyperplanes' normals: every non-zero row of up and gate."""
        rows = []
        for layer in self.layers:
            for name in ("up", "gate"):
                if name in layer:
                    rows += [r for r in layer[name] if np.any(r)]
        return rows


def from_block(block: Block) -> FloatBlock:
    assert block.layers is not None
    layers = tuple({"up": layer.up.floats, "down": layer.down.floats,
                    **({"gate": layer.gate.floats} if layer.gate is not None else {})}
                   for layer in block.layers)
    skip = block.skip
    return FloatBlock(block.activation.scalar, block.activation.gated, block.dim,
                      float(skip.scale or 0), None if skip.matrix is None else skip.matrix.floats,
                      layers)


def _float(value: Any) -> float:
    """A certificate entry as a float: a rational string, or an algebraic root-of entry."""
    if isinstance(value, str):
        return float(Fraction(value))
    from ..generic.polynomial import value_of

    return float(value_of(value).evalf(30))


def _array(rows: Sequence[Sequence[Any]]) -> np.ndarray:
    return np.array([[_float(v) for v in row] for row in rows], dtype=np.float64)


def plain_from_json(block: Block, layers: Sequence[dict[str, Any]]) -> FloatBlock:
    """The plain stack (skip none) whose weights a certificate stores as JSON strings."""
    converted = tuple({name: _array(value) for name, value in layer.items()} for layer in layers)
    return FloatBlock(block.activation.scalar, block.activation.gated, block.dim, 0.0, None,
                      converted)


def with_layers(block: Block, layers: Sequence[dict[str, Any]]) -> FloatBlock:
    """The block's activation and skip with other (JSON) weights: a family's example member."""
    base = plain_from_json(block, layers)
    skip = block.skip
    return FloatBlock(base.scalar, base.gated, base.dim, float(skip.scale or 0),
                      None if skip.matrix is None else skip.matrix.floats, base.layers)
