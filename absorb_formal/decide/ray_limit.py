"""Pre-norm and sandwich sublayers: the ray limit and the gated Jacobian (docs/rules.md,
"Normalised sublayers", §10.2).

The search is numeric (float64, `numeric/ray_search.py`): it looks for a point x0 and a
direction w at which the branch's limit along rays, `F ∘ N∞` (sandwich: `N₂ ∘ F ∘ N∞`),
has a clearly non-zero derivative. Nothing it computes is trusted: each candidate is
confirmed by the checker's own exact and ball-arithmetic test (`checker/rules/ray_limit.py`)
before it is returned.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..certify import sublayers as certify
from ..checker.rules import ray_limit as kernel
from ..model.blocks import Block, Norm, exact_parts
from ..numeric.ray_search import Search
from .decision import Decision, undecided

METHOD = "§10.2 ray limit"
GATED_METHOD = "§10.2 gated pre-norm Jacobian"
UNGATED = ("relu", "leaky_relu", "relu_pow", "gelu", "gelu_tanh", "silu")
GATED = ("silu", "gelu", "relu")  # swiglu, geglu, reglu
TRIES = 24
CONFIRMS = 4
CLEAR = 1e-8  # a float derivative this large, relative to its terms, is tried first


def gated_rule_applies(block: Block) -> bool:
    """σ gated with σ(0) = 0, RMSNorm (ε > 0) before the FFN and after it, no biases, S ≠ 0."""
    norm = block.norm
    return (norm is not None and norm.placement in ("pre", "sandwich")
            and block.activation.gated and block.activation.scalar.kind in GATED
            and not block.biased and block.depth == 1 and not block.skip.is_zero
            and all(n.kind == "rmsnorm" and n.eps > 0 for n in norm.norms))


def gated(block: Block) -> Decision:
    return Decision(False, GATED_METHOD, certify.gated_jacobian(),
                    detail="its Jacobian at 0 is S; a bias-free plain gated stack's is 0")


def covered(block: Block) -> str:
    """Why the ray limit does not apply ("" when it may)."""
    norm = block.norm
    assert norm is not None
    act = block.activation
    if block.depth != 1:
        return "a norm clause is decided for depth 1"
    if act.gated and act.scalar.kind not in GATED:
        return f"no ray-limit rule for gated σ = {act.name} (swiglu, geglu, reglu)"
    if not act.gated and act.scalar.kind not in UNGATED:
        return (f"no ray-limit rule for σ = {act.name} (relu, leaky_relu, relu^k, gelu, "
                "gelu_tanh, silu)")
    first = norm.norms[0]
    if block.dim < (3 if first.kind == "layernorm" else 2):
        return (f"a {first.kind} of dim {block.dim} takes finitely many values along rays "
                "(N∞ is locally constant), so no ray-limit point exists; not decided")
    for n in norm.norms:
        if n.eps == 0:
            return "ε = 0 is not covered (docs/rules.md, normalised sublayers)"
        if n.gamma is not None and any(g == 0 for g in n.gamma):
            return "γ has a zero entry: not covered"
    return ""


def decide(block: Block) -> Decision:
    """Not absorbable at any width, by a confirmed ray-limit point; or undecided, with why."""
    why = covered(block)
    if why:
        return undecided(why)
    assert block.layers is not None and block.norm is not None
    data = Search(block)
    layer = _checker_layer(block)
    json = _checker_block(block)
    rng = np.random.default_rng(20261204)
    proposals: list[tuple[float, list[Fraction], list[Fraction]]] = []
    for _ in range(TRIES):
        x0, w = _candidate(block.norm.norms[0], block.dim, rng)
        strength = data.strength(x0, w, block.norm)
        if strength > 0:
            proposals.append((strength, x0, w))
        if strength > CLEAR:
            break  # clearly non-zero in floats: confirm it first
    proposals.sort(key=lambda p: -p[0])  # the clearest first; faint ones may still hold
    for _, x0, w in proposals[:CONFIRMS]:
        cert = certify.ray_limit(x0, w)
        try:
            kernel.check(json, layer, cert)
        except (kernel.Invalid, ArithmeticError, ValueError, RecursionError):  # not confirmed
            continue
        kept = ("; keeping the norm does not help either: S x0 ≠ 0"
                if any(block.skip.apply(tuple(x0))) else "")
        return Decision(False, METHOD, cert, detail="the branch's limit along rays moves at "
                                                    "x0: no plain stack of any depth" + kept)
    return undecided("no point found where the branch's limit along rays moves (docs/rules.md "
                     "§10.2): the branch may be constant on the norm's image (relu neurons "
                     "dead there, gelu or silu saturated), or move too little for the float "
                     "search to propose a point; not decided")


def _candidate(first: Norm, d: int, rng: np.random.Generator
               ) -> tuple[list[Fraction], list[Fraction]]:
    """x0 with small integer entries in Ω, and an integer w ⊥ y0 (and ⊥ 1 for LayerNorm)."""
    while True:
        x0 = [Fraction(int(v)) for v in rng.integers(-4, 5, size=d)]
        y0 = kernel.centred({"kind": first.kind}, x0)
        if any(y0):
            break
    raw = [Fraction(int(v)) for v in rng.integers(-4, 5, size=d)]
    w = kernel.centred({"kind": first.kind}, raw)
    norm2 = sum((v * v for v in y0), Fraction(0))
    along = sum((a * b for a, b in zip(w, y0, strict=True)), Fraction(0)) / norm2
    w = [a - along * b for a, b in zip(w, y0, strict=True)]
    den = math.lcm(*(v.denominator for v in w))
    return x0, [v * den for v in w]


def _checker_layer(block: Block) -> dict[str, Any]:
    layer = block.layers[0]  # type: ignore[index]
    out: dict[str, Any] = {"up": exact_parts(layer.up), "down": exact_parts(layer.down)}
    if layer.gate is not None:
        out["gate"] = exact_parts(layer.gate)
    for name in ("up_bias", "gate_bias"):
        value = getattr(layer, name)
        if value is not None:
            out[name] = [str(v) for v in value]
    return out


def _checker_block(block: Block) -> dict[str, Any]:
    from ..certify.documents import activation_json, norm_json

    assert block.norm is not None
    return {"dim": block.dim, "width": block.width, "depth": block.depth,
            "activation": activation_json(block), "norm": norm_json(block.norm),
            "skip": {"scale": "0"}, "layers": None, **({"bias": True} if block.biased else {})}
