"""A block in float64, from the exact model or from a certificate's JSON witness.

Exact weights need not fit in float64 (`1e500` is a legal literal). Such a block has no
faithful float image, so conversion raises `OutOfRange` and the float checks are skipped
with that reason; they never turn an exact verdict into an error.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..model.activations import Scalar
from ..model.blocks import Block, Layer, Matrix

BIASES = ("up_bias", "gate_bias", "down_bias")

_SMALLEST_NORMAL = sys.float_info.min


class OutOfRange(ValueError):
    """An exact weight has no float64 within relative rounding (overflow or underflow)."""


@dataclass(frozen=True)
class FloatBlock:
    """x ↦ S x + D σ(U x) (or gated) per layer; skip as c·I (matrix None) or a matrix.

    A biased layer (docs/rules.md §8) also holds 1-D "up_bias", "gate_bias" (gated) and
    "down_bias": x ↦ S x + D σ(U x + b) + c."""

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
                    rows += list(layer[name][np.any(layer[name] != 0, axis=1)])
        return rows

    @property
    def terms(self) -> int:
        """The most terms one output entry of one layer sums (skip row plus live neurons)."""
        return self.dim + max((len(layer["up"]) for layer in self.layers), default=0)


def _live(layer: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The layer without its dead neurons (zero column of down): they add exactly 0 to every
    output whatever σ is, and a width-10^6 witness is mostly such neurons."""
    keep = np.flatnonzero(np.any(layer["down"] != 0, axis=0))
    if len(keep) == layer["down"].shape[1]:
        return layer
    return {name: (value[:, keep] if name == "down" else value if name == "down_bias"
                   else value[keep])
            for name, value in layer.items()}


def to_float(value: Fraction) -> float:
    """`value` as the nearest float64, or OutOfRange when that float is infinite, or zero or
    subnormal for a non-zero value (relative precision lost)."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if math.isinf(number) or (value != 0 and abs(number) < _SMALLEST_NORMAL):
        raise OutOfRange("weights beyond float64 range")
    return number


def symbolic_float(text: str) -> float:
    """A symbolic certificate value `r + Σ c Π σ(β)^e` (docs/certificates.md, read by the
    checker's parser) in float64, each σ(β) by the float σ the blocks are evaluated with."""
    from ..checker.kernel.symbolic import parse

    total = 0.0
    for monomial, coefficient in parse(text).items():
        term = to_float(coefficient)
        for (kind, point), exponent in monomial:
            term *= float(Scalar(kind).numpy(np.array([to_float(point)]))[0]) ** exponent
        total += term
    if not math.isfinite(total):
        raise OutOfRange("weights beyond float64 range")
    return total


def _matrix_floats(matrix: Matrix) -> np.ndarray:
    """The matrix in float64. A loaded array of float64 or narrower floats, or of integers, is
    in range already; a long double one is range-checked as a whole (2^2000 is a long double
    and no float64); literal rows, which can be any rational, entry by entry."""
    if matrix._array is not None:  # loaded: no Fraction per entry (7B blocks)
        array = matrix._array
        with np.errstate(over="ignore", under="ignore"):
            floats = matrix.floats
        if array.dtype.kind == "f" and array.dtype.itemsize > 8 and (
                not np.isfinite(floats).all()
                or ((array != 0) & (np.abs(floats) < _SMALLEST_NORMAL)).any()):
            raise OutOfRange("weights beyond float64 range")
        return floats
    return np.array([[to_float(v) for v in row] for row in matrix.rows],
                    dtype=np.float64).reshape(matrix.shape)


def _skip(block: Block) -> tuple[float, np.ndarray | None]:
    skip = block.skip
    if skip.matrix is not None:
        return 0.0, _matrix_floats(skip.matrix)
    scale = skip.scale or Fraction(0)
    return to_float(scale), None


def _bias_floats(layer: Layer) -> dict[str, np.ndarray]:
    """A biased layer's biases in float64 (range-checked like literal weights); {} without."""
    return {name: np.array([to_float(v) for v in getattr(layer, name)], dtype=np.float64)
            for name in BIASES if getattr(layer, name) is not None}


def layer_floats(layer: Layer) -> dict[str, np.ndarray]:
    """One layer in float64, dead neurons kept (a construction may give them work)."""
    return {"up": _matrix_floats(layer.up), "down": _matrix_floats(layer.down),
            **({"gate": _matrix_floats(layer.gate)} if layer.gate is not None else {}),
            **_bias_floats(layer)}


def from_block(block: Block) -> FloatBlock:
    assert block.layers is not None
    layers = tuple(_live(layer_floats(layer)) for layer in block.layers)
    scale, matrix = _skip(block)
    return FloatBlock(block.activation.scalar, block.activation.gated, block.dim, scale,
                      matrix, layers)


def _float(value: Any, memo: dict[str, float]) -> float:
    """A certificate entry as a float: a rational string, a symbolic one (σ at rational
    points, `symbolic_float`), or an algebraic root-of entry. Strings are memoised: a wide
    witness repeats "0" a million times."""
    if isinstance(value, str):
        if value not in memo:
            try:
                exact = Fraction(value)
            except ValueError:
                memo[value] = symbolic_float(value)
            else:
                memo[value] = to_float(exact)
        return memo[value]
    from ..generic.polynomial import value_of

    algebraic = value_of(value)
    number = float(algebraic.evalf(30))
    if not math.isfinite(number) or (number == 0) != bool(algebraic.is_zero):
        raise OutOfRange("weights beyond float64 range")
    return number


def _array(rows: Sequence[Sequence[Any]], columns: int, memo: dict[str, float]) -> np.ndarray:
    return np.array([[_float(v, memo) for v in row] for row in rows],
                    dtype=np.float64).reshape(len(rows), columns)


def _layer_from_json(layer: dict[str, Any], dim: int, memo: dict[str, float]
                     ) -> dict[str, np.ndarray]:
    """One JSON layer, converting only the live neurons' input rows (see `_live`)."""
    down = _array(layer["down"], len(layer["down"][0]) if layer["down"] else 0, memo)
    keep = np.flatnonzero(np.any(down != 0, axis=0)).tolist()
    converted = {"down": down[:, keep]}
    for name in ("up", "gate"):
        if name in layer:
            converted[name] = _array([layer[name][j] for j in keep], dim, memo)
    for name in ("up_bias", "gate_bias"):  # biased witnesses (docs/rules.md §8)
        if name in layer:
            converted[name] = np.array([_float(layer[name][j], memo) for j in keep],
                                       dtype=np.float64)
    if "down_bias" in layer:
        converted["down_bias"] = np.array([_float(v, memo) for v in layer["down_bias"]],
                                          dtype=np.float64)
    return converted


def plain_from_json(block: Block, layers: Sequence[dict[str, Any]]) -> FloatBlock:
    """The plain stack (skip none) whose weights a certificate stores as JSON strings."""
    memo: dict[str, float] = {}
    converted = tuple(_layer_from_json(layer, block.dim, memo) for layer in layers)
    return FloatBlock(block.activation.scalar, block.activation.gated, block.dim, 0.0, None,
                      converted)


def with_layers(block: Block, layers: Sequence[dict[str, Any]]) -> FloatBlock:
    """The block's activation and skip with other (JSON) weights: a family's example member."""
    base = plain_from_json(block, layers)
    scale, matrix = _skip(block)
    return FloatBlock(base.scalar, base.gated, base.dim, scale, matrix, base.layers)
