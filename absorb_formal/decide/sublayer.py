"""Claims about a block with a norm clause: the sublayer the model computes (docs/rules.md,
"Normalised sublayers", §10).

- post-norm, ε > 0, γ without a zero entry: Lemma P makes the claim a claim about a reduced
  block, decided by every existing rule: the bare block (RMSNorm) or the projected block
  `(ΠS, ΠD, Πc)` (LayerNorm). Its certificate is wrapped as `normalised sublayer`, naming
  the reduction; the checker builds the reduced block itself.
- pre-norm and sandwich: never absorbable, at any width and depth, by the gated rule or a
  ray-limit point (decide/ray_limit.py); else unknown with the reason.
- `equals` with a norm clause, ε = 0, γ with a zero entry, depth > 1: unknown, with why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from typing import Any

from ..certify import sublayers as certify
from ..model.blocks import Block, Claim, Matrix, Query, Skip, Spec, Statement
from ..model.result import DECIDED, PROVED, REFUTED, Result, unknown
from . import ray_limit
from .decision import Decision
from .family_facts import NEVER

PROJECTED, BARE = "projected block", "bare block"

Decide = Callable[[Spec, Statement, str], Result]


def degenerate(block: Block) -> str:
    """Why §10 does not decide this sublayer ("" when it may)."""
    assert block.norm is not None
    if block.depth != 1:
        return "a norm clause is decided for depth 1 (docs/rules.md, normalised sublayers)"
    for n in block.norm.norms:
        if n.eps == 0:
            return ("ε = 0: the norm is scale invariant, which §10 does not cover "
                    "(docs/rules.md, normalised sublayers)")
        if n.gamma is not None and any(g == 0 for g in n.gamma):
            return "γ has a zero entry: the norm forgets a coordinate, which §10 does not cover"
    return ""


def reduced(block: Block) -> tuple[Block | None, str, str]:
    """(the reduced block, PROJECTED or BARE, why not) for a post-norm sublayer."""
    assert block.norm is not None and block.norm.placement == "post"
    why = degenerate(block)
    if why:
        return None, "", why
    if block.norm.norms[0].kind == "rmsnorm":
        return block.bare(), BARE, ""
    if not block.is_concrete:
        return None, PROJECTED, ("a post-norm LayerNorm family: the projected family (ΠS, ΠD) "
                                 "is not a family of the language")
    return projected(block), PROJECTED, ""


def _centre(rows: tuple[tuple[Fraction, ...], ...]) -> list[list[Fraction]]:
    d = len(rows)
    means = [sum(col, Fraction(0)) / d for col in zip(*rows, strict=True)]
    return [[v - mu for v, mu in zip(row, means, strict=True)] for row in rows]


def projected(block: Block) -> Block:
    """`x ↦ ΠS x + ΠD σ(U x + b) + Πc`, Π = I − 11ᵀ/d (Theorem 10.1), without the norm."""
    assert block.layers is not None
    layers = []
    for layer in block.layers:
        bias = layer.down_bias
        centred = None if bias is None else tuple(r[0] for r in _centre(tuple((v,)
                                                                              for v in bias)))
        down = (layer.down.centred() if layer.down.loaded is not None
                else Matrix(_centre(layer.down.rows)))
        layers.append(replace(layer, down=down, down_bias=centred))
    skip = Skip(block.dim, matrix=Matrix(_centre(block.skip.rows())))
    return replace(block, norm=None, skip=skip, layers=tuple(layers))


def decide(spec: Spec, statement: Statement, engine: str, decide_block: Decide) -> Result:
    """Decide a claim or query about a block with a norm clause."""
    block = spec.blocks[statement.block]
    if isinstance(statement, Claim) and statement.kind == "equals":
        return unknown("'equals' compares blocks; with a norm clause it is not decided yet")
    assert block.norm is not None
    if block.norm.placement == "post":
        small, how, why = reduced(block)
        if small is None:
            return unknown(f"post-norm sublayer: {why}")
        inner = decide_block(replace(spec, blocks={**spec.blocks, block.name: small}),
                             statement, engine)
        return _wrapped(inner, how)
    why = degenerate(block)
    if why:
        return unknown(f"{block.norm.placement}-norm sublayer: {why}")
    if engine == "generic":  # the generic engine knows no theorem, and encodes no norm
        return unknown(f"{block.norm.placement}-norm sublayer: the generic engine encodes no "
                       "norm (the theory engine decides it by docs/rules.md §10.2)")
    if ray_limit.gated_rule_applies(block):
        found = ray_limit.gated(block)
    elif not block.is_concrete:
        return unknown(f"{block.norm.placement}-norm family: only the gated rule (swiglu, geglu,"
                       " reglu; RMSNorm; no biases) decides families")
    else:
        found = ray_limit.decide(block)
    if found.absorbable is None:
        return unknown(f"{block.norm.placement}-norm sublayer: {found.reason}")
    return _never(statement, found, block.width)


def _wrap(cert: dict[str, Any] | None, how: str) -> dict[str, Any] | None:
    return None if cert is None else certify.normalised_sublayer(how, cert)


def _wrapped(result: Result, how: str) -> Result:
    extra = dict(result.extra)
    for key in ("min_width_certificate",):
        if extra.get(key) is not None:
            extra[key] = _wrap(extra[key], how)
    method = f"{result.method} (post-norm: the {how})" if result.method != "none" else \
        result.method
    reason = f"post-norm sublayer, the {how}: {result.reason}" if result.reason else ""
    return replace(result, certificate=_wrap(result.certificate, how), method=method,
                   reason=reason, extra=extra)


def _never(statement: Statement, found: Decision, own: int) -> Result:
    """A never-proof answers every width: absorbable claims refuted, min width none."""
    width = statement.width if statement.width is not None else own
    said = f"not absorbable at any width ({found.detail})"
    if isinstance(statement, Query):
        return Result(DECIDED, f"{said}; min width none", found.method,
                      certificate=found.certificate, min_width=None,
                      extra={"decision": {"width": width, "absorbable": False},
                             "min_width_certificate": found.certificate,
                             "any_width": "no"})
    if statement.kind == "family":
        holds = NEVER[statement.modality]
        return Result(PROVED if holds else REFUTED, f"never absorbable ({found.detail})",
                      found.method, certificate=found.certificate)
    if statement.kind == "min_width":
        outcome = PROVED if statement.min_width is None else REFUTED
        return Result(outcome, "min width is none", found.method,
                      certificate=found.certificate, min_width=None)
    outcome = PROVED if statement.modality == "not" else REFUTED
    return Result(outcome, said, found.method, certificate=found.certificate,
                  extra={"decision": {"width": width, "absorbable": False}})
