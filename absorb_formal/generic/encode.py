"""Formula builders for the generic engine (MATH.md §6): plain blocks with unknown weights,
to sympy (polynomial activations) and to z3 (piecewise activations). Translators only build
formulas; `polynomial.py` and `cegis.py` solve them.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import sympy as sp

from ..activations import Scalar
from ..model import Block

Vec = Sequence[Any]


def unknown_names(width: int, dim: int, depth: int, gated: bool) -> list[dict[str, Any]]:
    """Per layer: names of the unknown entries of up (w×d), down (d×w), gate (w×d)."""
    layers = []
    for layer in range(depth):
        names: dict[str, Any] = {
            "up": [[f"u{layer}_{j}_{k}" for k in range(dim)] for j in range(width)],
            "down": [[f"d{layer}_{r}_{j}" for j in range(width)] for r in range(dim)],
        }
        if gated:
            names["gate"] = [[f"g{layer}_{j}_{k}" for k in range(dim)] for j in range(width)]
        layers.append(names)
    return layers


def flat_names(layers: list[dict[str, Any]]) -> list[str]:
    return [n for layer in layers for key in ("gate", "up", "down") if key in layer
            for row in layer[key] for n in row]


# ---- sympy (polynomial activations) -------------------------------------------------------

def sympy_block(scalar: Scalar, gated: bool, skip: Sequence[Sequence[Fraction]] | None,
                layers: Sequence[dict[str, Any]], x: Sequence[Any]) -> list[Any]:
    """The block's output at symbolic x; entries of `layers` are sympy symbols or rationals."""
    z = sp.Symbol("z")
    sigma = scalar.sympy(z)
    value = list(x)
    for layer in layers:
        up, down = layer["up"], layer["down"]
        pre = [sum((sp.sympify(a) * v for a, v in zip(row, value, strict=True)), sp.Integer(0))
               for row in up]
        if gated:
            gate = [sum((sp.sympify(a) * v for a, v in zip(row, value, strict=True)),
                        sp.Integer(0)) for row in layer["gate"]]
            hidden = [sigma.subs(z, g) * h for g, h in zip(gate, pre, strict=True)]
        else:
            hidden = [sigma.subs(z, h) for h in pre]
        out = [sum((sp.sympify(a) * h for a, h in zip(row, hidden, strict=True)), sp.Integer(0))
               for row in down]
        if skip is not None:
            out = [o + sum((sp.Rational(s) * v for s, v in zip(row, value, strict=True)),
                           sp.Integer(0)) for o, row in zip(out, skip, strict=True)]
        value = out
    return value


def block_layers(block: Block) -> list[dict[str, Any]]:
    assert block.layers is not None
    out = []
    for layer in block.layers:
        entry = {"up": [[sp.Rational(v) for v in r] for r in layer.up.rows],
                 "down": [[sp.Rational(v) for v in r] for r in layer.down.rows]}
        if layer.gate is not None:
            entry["gate"] = [[sp.Rational(v) for v in r] for r in layer.gate.rows]
        out.append(entry)
    return out


def symbol_layers(names: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{key: [[sp.Symbol(n) for n in row] for row in value] for key, value in layer.items()}
            for layer in names]


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
