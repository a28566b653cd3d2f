"""The generic engine's answers as Decisions, with exactly checked witnesses."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import sympy as sp

from ..certify import bodies as cert
from ..decide.decision import Decision, undecided
from ..model.blocks import Block, Layer, Matrix
from . import cegis, encode, polynomial

POLY_METHOD = "generic: polynomial equations (§6)"
CEGIS_METHOD = "generic: counterexample-guided synthesis (§6)"
MAX_MIN_WIDTH_SEARCH = 6


def applies(block: Block, width: int) -> str:
    """"" when the generic engine can try this question, else why not."""
    if not block.is_concrete:
        return "the generic engine decides concrete blocks only"
    if polynomial.applies(block):
        return "" if polynomial.sizes_ok(block, width) else (
            f"too many unknowns for the polynomial engine (limit {polynomial.MAX_UNKNOWNS})")
    if cegis.applies(block):
        return "" if cegis.sizes_ok(block, width) else (
            f"too many unknowns for synthesis (limit {cegis.MAX_UNKNOWNS})")
    return f"the generic engine covers polynomial and piecewise activations, not " \
           f"{block.activation}"


def at_width(block: Block, width: int) -> Decision:
    why = applies(block, width)
    if why:
        return undecided(why)
    if polynomial.applies(block):
        status, found, reason = polynomial.solve(block, width)
        method = POLY_METHOD
    else:
        status, found, reason = cegis.solve(block, width)
        method = CEGIS_METHOD
    if status == "unknown":
        return undecided(f"generic engine: {reason}")
    if status == "not absorbable":
        return Decision(False, method, found, detail="no plain block of this width")
    if method == POLY_METHOD:
        return _polynomial_witness(block, width, found)
    layers = found["layers"]
    stack = tuple(_layer(layer) for layer in layers)
    return Decision(True, method, cert.synthesised_witness(stack, width, found["smtlib"]),
                    witness=stack, detail="synthesised and verified")


def _layer(layer: dict[str, Any]) -> Layer:
    """A witness layer from its dict (biases, docs/rules.md §8.4, when the block has them)."""
    exact = encode.map_layer(layer, Fraction)

    def bias(key: str) -> tuple[Fraction, ...] | None:
        return tuple(exact[key]) if key in exact else None

    return Layer(Matrix(exact["up"]), Matrix(exact["down"]),
                 Matrix(exact["gate"]) if "gate" in exact else None,
                 up_bias=bias("up_bias"), gate_bias=bias("gate_bias"),
                 down_bias=bias("down_bias"))


def _polynomial_witness(block: Block, width: int, found: dict[str, Any]) -> Decision:
    values = found["values"]
    names = encode.block_names(block, width)
    layers_json = [encode.map_layer(layer, values.__getitem__) for layer in names]
    if not identity_holds(block, layers_json):  # never state a witness that is not one
        raise AssertionError("internal error: generic witness fails the exact identity")
    rational = all("rational" in v for v in values.values())
    stack = tuple(_layer(encode.map_layer(layer, lambda v: v["rational"]))
                  for layer in layers_json) if rational else None
    shown = [encode.map_layer(layer, lambda v: v.get("rational", v)) for layer in layers_json]
    return Decision(True, POLY_METHOD, cert.polynomial_witness(width, shown), witness=stack,
                    detail="exact " + ("rational" if rational else "algebraic") + " solution")


def identity_holds(block: Block, layers: list[dict[str, Any]]) -> bool:
    """P − B ≡ 0 as polynomials in x, with exact (rational or algebraic) weights."""
    x = [sp.Symbol(f"x{k}") for k in range(block.dim)]
    exact = [encode.map_layer(layer, polynomial.value_of) for layer in layers]
    scalar, gated = block.activation.scalar, block.activation.gated
    plain = encode.sympy_block(scalar, gated, None, exact, x)
    target = encode.sympy_block(scalar, gated, block.skip.rows(), encode.block_layers(block), x)
    t = sp.Symbol("t")
    for p, b in zip(plain, target, strict=True):
        for coefficient in sp.Poly(sp.expand(p - b), *x).coeffs():
            if coefficient != 0 and sp.minimal_polynomial(coefficient, t) != t:
                return False
    return True


def method_of(block: Block) -> str:
    return POLY_METHOD if polynomial.applies(block) else CEGIS_METHOD


def minimal_width(block: Block) -> tuple[int | None, dict[str, Any] | None, str]:
    """(least absorbing width, certificate, reason) by deciding widths 1, 2, … in turn."""
    below: Decision | None = None
    if applies(block, 1):
        return None, None, applies(block, 1)
    for w in range(1, MAX_MIN_WIDTH_SEARCH + 1):
        decision = at_width(block, w)
        if decision.absorbable is None:
            return None, None, decision.reason
        if decision.absorbable:
            return w, cert.minimal_width(w, decision.certificate,
                                         below.certificate if below else None), ""
        below = decision
    return None, None, f"not absorbable up to width {MAX_MIN_WIDTH_SEARCH}"
