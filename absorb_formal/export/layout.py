"""A witness as named arrays: their names (`array_names`: up, down, gate and the biases,
`layerN.` before each in a stack), each neuron of a positively homogeneous σ rescaled by a
power of two (`balanced`), the exact weights rounded once to the dtype (`rounded_arrays`; a
large block's construction from its own arrays, `construction_arrays`), and zero neurons up
to the width (`padded`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ..checker.kernel.contract import Check
from ..decide import doubles, large
from ..model.blocks import Block, Layer, Matrix
from .rounding import Rounded, round_matrix, round_values

FIELDS = ("up", "gate", "down", "up_bias", "gate_bias", "down_bias")


def array_names(depth: int) -> Iterator[tuple[int, str, str]]:
    """(layer index, field, array name) in writing order."""
    for index in range(depth):
        prefix = f"layer{index + 1}." if depth > 1 else ""
        for name in FIELDS:
            yield index, name, prefix + name


HOMOGENEOUS = ("relu", "leaky_relu")  # σ(t z) = t σ(z) for t > 0


def balanced(block: Block, layers: Sequence[Layer]) -> tuple[Layer, ...]:
    """The witness with each neuron of a positively homogeneous σ (relu, leaky_relu; depth
    1, ungated) rescaled by a power of two t: (u, b, d) → (t u, t b, d / t) computes the
    same function, exactly. t brings the neuron's largest up entry and its largest down
    entry within a factor 2 of each other, so that a witness in canonical scale (a key's
    leading entry ±1) does not carry the whole size in one of the two."""
    if (block.activation.gated or block.activation.scalar.kind not in HOMOGENEOUS
            or len(layers) != 1):
        return tuple(layers)
    layer = layers[0]
    ups, downs = [list(r) for r in layer.up.rows], [list(r) for r in layer.down.rows]
    bias = None if layer.up_bias is None else list(layer.up_bias)
    if not all(type(v) is Fraction for v in [*(v for r in ups + downs for v in r),
                                             *(bias or [])]):
        return tuple(layers)  # algebraic or symbolic entries: kept as proved

    def log2(x: Fraction) -> int:  # within one of log2(x), in integers
        return x.numerator.bit_length() - x.denominator.bit_length()

    for i, row in enumerate(ups):
        big_up = max([abs(v) for v in row] + ([abs(bias[i])] if bias else []))
        big_down = max(abs(r[i]) for r in downs)
        if big_up == 0 or big_down == 0:
            continue
        k = (log2(big_down) - log2(big_up)) // 2  # t = 2^k: exact
        if k == 0:
            continue
        t = Fraction(2) ** k
        ups[i] = [v * t for v in row]
        if bias is not None:
            bias[i] *= t
        for r in downs:
            r[i] /= t
    from dataclasses import replace

    return (replace(layer, up=Matrix(ups), down=Matrix(downs),
                    up_bias=None if bias is None else tuple(bias)),)


def rounded_arrays(layers: Sequence[Layer], dtype: str) -> dict[str, Rounded]:
    out: dict[str, Rounded] = {}
    for index, name, key in array_names(len(layers)):
        value = getattr(layers[index], name)
        if value is None:
            continue
        if isinstance(value, Matrix):
            out[key] = round_matrix(value, dtype)
        else:
            out[key] = round_values(list(value), (len(value),), dtype)
    return out


def construction_arrays(block: Block, dtype: str, certificate: dict[str, Any] | None = None
                        ) -> dict[str, Rounded]:
    """A large block's construction (`certificate`'s; None: `spare.construction`'s), rounded:
    its own arrays as arrays (no Fraction per weight), then the neurons `large.added_neurons`
    adds, exactly rounded. Doubles also replace some own down columns and the down bias;
    their weights are rounded from enclosures of the exact ones (`enclosed_doubles`: the
    same bits, without the exact inverse); doubles.TooWide when that cannot settle them."""
    assert block.layers is not None
    layer = block.layers[0]
    added: dict[str, Any]
    if certificate is not None and certificate.get("check") == Check.DOUBLES:
        from .enclosed_doubles import Unsettled, rounded_doubles

        try:
            added = rounded_doubles(block, [int(i) for i in certificate["neurons"]], dtype)
        except Unsettled as error:
            raise doubles.TooWide(str(error)) from None
    else:
        added = {name: round_values(v.ravel().tolist(), v.shape, dtype)
                 for name, v in large.added_neurons(block, certificate).items()}
    out: dict[str, Rounded] = {}
    for name in FIELDS:
        own = getattr(layer, name)
        if own is None and name not in added:
            continue
        if own is None:  # not reached by the constructions (biases exist on both sides)
            own = (Fraction(0),) * block.width
        if name == "down_bias" and name in added:  # doubles: the constant moved into it
            out[name] = added[name]
            continue
        parts = [_own_down(own, added, dtype) if name == "down" and "columns" in added
                 else round_matrix(own, dtype) if isinstance(own, Matrix)
                 else round_values(list(own), (len(own),), dtype)]
        if name in added:
            parts.append(added[name])
        axis = 1 if name == "down" else 0
        out[name] = Rounded(np.concatenate([r.values for r in parts], axis=axis),
                            max(r.max_rel_error for r in parts))
    return out


def _own_down(own: Matrix, added: dict[str, Any], dtype: str) -> Rounded:
    """The own down columns, those that doubles changed replaced by added["own_down"]
    (rounded): the others rounded as an array."""
    d, m = own.shape
    changed = added["columns"]
    keep = np.setdiff1d(np.arange(m), changed)
    fresh = added["own_down"]
    out = np.empty((d, m), dtype=fresh.values.dtype)
    out[:, changed] = fresh.values
    error = fresh.max_rel_error
    if len(keep):
        kept = round_matrix(Matrix(array=own.loaded[:, keep]) if own.loaded is not None
                            else Matrix([[row[j] for j in keep] for row in own.rows]), dtype)
        out[:, keep] = kept.values
        error = max(error, kept.max_rel_error)
    return Rounded(out, error)


def padded(rounded: dict[str, Rounded], width: int) -> dict[str, Rounded]:
    """Zero neurons appended up to `width` (a decision may prove a narrower witness; a zero
    neuron, with a zero column of down, adds exactly 0 to every output)."""
    out = {}
    for key, item in rounded.items():
        field = key.rsplit(".", 1)[-1]
        values = item.values
        if field == "down":
            values = np.pad(values, ((0, 0), (0, width - values.shape[1])))
        elif field != "down_bias":
            values = np.pad(values, ((0, width - values.shape[0]),) + ((0, 0),) * (values.ndim - 1))
        out[key] = Rounded(values, item.max_rel_error)
    return out


def layer_arrays(arrays: dict[str, np.ndarray], depth: int) -> list[dict[str, np.ndarray]]:
    """Per layer {field: array} from arrays named as `array_names` names them."""
    layers: list[dict[str, np.ndarray]] = [{} for _ in range(depth)]
    for index, name, key in array_names(depth):
        if key in arrays:
            layers[index][name] = arrays[key]
    return layers
