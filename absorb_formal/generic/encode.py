"""Formula builders for the generic engine (docs/rules.md §6): plain blocks with unknown weights,
to sympy (polynomial activations) and to z3 (piecewise activations). Translators only build
formulas; `polynomial.py` and `cegis.py` solve them.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import sympy as sp

from ..model.activations import Scalar
from ..model.blocks import Block

Vec = Sequence[Any]


# Per layer, the order of the unknowns (part of the certificate format); biases after their
# matrix (docs/rules.md §8.4: the plain comparator's biases are more unknowns).
KEYS = ("gate", "gate_bias", "up", "up_bias", "down", "down_bias")


def is_bias(key: str) -> bool:
    return key.endswith("_bias")


def entries(key: str, value: Any) -> list[Any]:
    """A layer entry's values in order: a bias is a vector, a weight a list of rows."""
    return list(value) if is_bias(key) else [v for row in value for v in row]


def map_layer(layer: dict[str, Any], f: Any) -> dict[str, Any]:
    """The layer with f applied to every value, shapes (vectors, rows) kept."""
    return {k: [f(v) for v in rows] if is_bias(k) else [[f(v) for v in row] for row in rows]
            for k, rows in layer.items()}


def unknown_names(width: int, dim: int, depth: int, gated: bool,
                  biased: bool = False) -> list[dict[str, Any]]:
    """Per layer: names of the unknown entries of up (w×d), down (d×w), gate (w×d); with
    biases (docs/rules.md §8.4) also up_bias `b{l}_{j}`, gate_bias `h{l}_{j}`, down_bias
    `c{l}_{r}`."""
    layers = []
    for layer in range(depth):
        names: dict[str, Any] = {
            "up": [[f"u{layer}_{j}_{k}" for k in range(dim)] for j in range(width)],
            "down": [[f"d{layer}_{r}_{j}" for j in range(width)] for r in range(dim)],
        }
        if gated:
            names["gate"] = [[f"g{layer}_{j}_{k}" for k in range(dim)] for j in range(width)]
        if biased:
            names["up_bias"] = [f"b{layer}_{j}" for j in range(width)]
            names["down_bias"] = [f"c{layer}_{r}" for r in range(dim)]
            if gated:
                names["gate_bias"] = [f"h{layer}_{j}" for j in range(width)]
        layers.append(names)
    return layers


def flat_names(layers: list[dict[str, Any]]) -> list[str]:
    return [n for layer in layers for key in KEYS if key in layer
            for n in entries(key, layer[key])]


def block_names(block: Block, width: int) -> list[dict[str, Any]]:
    """The unknowns of a plain comparator of `block` (biased when the block is)."""
    return unknown_names(width, block.dim, block.depth, block.activation.gated, block.biased)


# ---- sympy (polynomial activations) -------------------------------------------------------

def sympy_block(scalar: Scalar, gated: bool, skip: Sequence[Sequence[Fraction]] | None,
                layers: Sequence[dict[str, Any]], x: Sequence[Any]) -> list[Any]:
    """The block's output at symbolic x; entries of `layers` are sympy symbols or rationals."""
    z = sp.Symbol("z")
    sigma = scalar.sympy(z)
    value = list(x)
    for layer in layers:
        pre = _sympy_affine(layer, "up", value)
        if gated:
            gate = _sympy_affine(layer, "gate", value)
            hidden = [sigma.subs(z, g) * h for g, h in zip(gate, pre, strict=True)]
        else:
            hidden = [sigma.subs(z, h) for h in pre]
        out = _sympy_affine(layer, "down", hidden)
        if skip is not None:
            out = [o + sum((sp.Rational(s) * v for s, v in zip(row, value, strict=True)),
                           sp.Integer(0)) for o, row in zip(out, skip, strict=True)]
        value = out
    return value


def _sympy_affine(layer: dict[str, Any], key: str, value: list[Any]) -> list[Any]:
    """layer[key]·value (+ layer[key_bias] when the layer has biases, docs/rules.md §8)."""
    out = [sum((sp.sympify(a) * v for a, v in zip(row, value, strict=True)), sp.Integer(0))
           for row in layer[key]]
    bias = layer.get(f"{key}_bias")
    return out if bias is None else [o + sp.sympify(b) for o, b in zip(out, bias, strict=True)]


def fraction_layers(block: Block) -> list[dict[str, Any]]:
    """The block's layers as dicts of Fractions (biases included when present)."""
    assert block.layers is not None
    out = []
    for layer in block.layers:
        entry: dict[str, Any] = {"up": [list(r) for r in layer.up.rows],
                                 "down": [list(r) for r in layer.down.rows]}
        if layer.gate is not None:
            entry["gate"] = [list(r) for r in layer.gate.rows]
        for key in ("up_bias", "gate_bias", "down_bias"):
            if getattr(layer, key) is not None:
                entry[key] = list(getattr(layer, key))
        out.append(entry)
    return out


def block_layers(block: Block) -> list[dict[str, Any]]:
    return [map_layer(layer, sp.Rational) for layer in fraction_layers(block)]


def symbol_layers(names: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [map_layer(layer, sp.Symbol) for layer in names]


# ---- z3 (piecewise activations) -----------------------------------------------------------

def z3_sigma(scalar: Scalar, z: Any) -> Any:
    import z3

    kind = scalar.kind
    if kind == "relu":
        return z3.If(z > 0, z, 0)
    if kind == "leaky_relu":
        return z3.If(z >= 0, z, z3.RealVal(str(scalar.param)) * z)
    if kind == "relu_pow":
        return z3.If(z > 0, z ** (scalar.power or 1), 0)
    if kind == "abs":
        return z3.If(z >= 0, z, -z)
    if kind == "identity":
        return z
    if kind == "poly":
        value: Any = z3.RealVal(0)
        for c in reversed(scalar.coeffs):
            value = value * z + z3.RealVal(str(c))
        return value
    raise ValueError(f"{kind} has no exact z3 formula")


def z3_block(scalar: Scalar, gated: bool, skip: Sequence[Sequence[Any]] | None,
             layers: Sequence[dict[str, Any]], x: Sequence[Any]) -> list[Any]:
    """The block's output at x; entries are z3 terms (unknowns or constants)."""
    import z3

    value = list(x)
    for layer in layers:
        pre = [z3.Sum([a * v for a, v in zip(row, value, strict=True)]) for row in layer["up"]]
        if gated:
            gate = [z3.Sum([a * v for a, v in zip(row, value, strict=True)])
                    for row in layer["gate"]]
            hidden = [z3_sigma(scalar, g) * h for g, h in zip(gate, pre, strict=True)]
        else:
            hidden = [z3_sigma(scalar, h) for h in pre]
        out = [z3.Sum([a * h for a, h in zip(row, hidden, strict=True)]) for row in layer["down"]]
        if skip is not None:
            out = [o + z3.Sum([s * v for s, v in zip(row, value, strict=True)])
                   for o, row in zip(out, skip, strict=True)]
        value = out
    return value


def z3_constant(value: Fraction) -> Any:
    import z3

    return z3.RealVal(f"{value.numerator}/{value.denominator}")


def rational_model_value(model: Any, term: Any) -> Fraction | None:
    """The model's value of `term` as a Fraction, or None when it is not rational."""
    import z3

    value = model.eval(term, model_completion=True)
    if z3.is_rational_value(value):
        return Fraction(value.numerator_as_long(), value.denominator_as_long())
    return None
