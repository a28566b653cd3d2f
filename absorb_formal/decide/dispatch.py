"""Route each claim or query to the rules that decide it (MATH.md §3–5) and phrase the result."""

from __future__ import annotations

from dataclasses import replace

from ..model import Block, Claim, Query, Spec, Statement
from ..result import DECIDED, PROVED, REFUTED, Result, unknown
from . import concrete, equivalence, families
from .decision import Decision


def decide(spec: Spec, statement: Statement) -> Result:
    """Decide one claim or query of `spec`; `unknown` with a reason when no rule applies."""
    block = spec.blocks[statement.block]
    size = statement.width if statement.width is not None else block.width
    if isinstance(statement, Query):
        return _query(block, size)
    if statement.kind == "equals":
        assert statement.other is not None
        return _equals(block, spec.blocks[statement.other])
    if statement.kind == "min_width":
        return _min_width(block, statement)
    if statement.kind == "family":
        return _claim(families.decide(block, statement.modality, size),
                      expected=True, holds=f"{statement.modality} absorbable at width {size}",
                      fails=f"not {statement.modality} absorbable at width {size}")
    decision = concrete.at_width(block, size)
    wanted = statement.modality != "not"
    result = _claim(decision, expected=wanted, holds=f"absorbable at width {size}",
                    fails=f"not absorbable at width {size}")
    return replace(result, extra={"decision": {"width": size,
                                               "absorbable": decision.absorbable}})


def _claim(decision: Decision, expected: bool, holds: str, fails: str) -> Result:
    """A claim expecting `decision.absorbable == expected`."""
    if decision.absorbable is None:
        return unknown(decision.reason)
    verdict = holds if decision.absorbable else fails
    if decision.detail:
        verdict += f" ({decision.detail})"
    outcome = PROVED if decision.absorbable == expected else REFUTED
    return Result(outcome, verdict, decision.method, certificate=decision.certificate)


def _equals(left: Block, right: Block) -> Result:
    large = concrete.too_large(left) or concrete.too_large(right)
    if large:
        return unknown(large)
    found = equivalence.decide(left, right)
    if found.equal is None:
        return unknown(found.reason)
    verdict = "equal as functions" if found.equal else "different functions"
    return Result(PROVED if found.equal else REFUTED, verdict, equivalence.METHOD,
                  certificate=found.certificate)


def _min_width(block: Block, claim: Claim) -> Result:
    found = concrete.minimal_width(block)
    if not found.found:
        return unknown(found.reason)
    shown = "none" if found.value is None else str(found.value)
    verdict = f"min width is {shown}"
    outcome = PROVED if found.value == claim.min_width else REFUTED
    return Result(outcome, verdict, found.method, certificate=found.certificate,
                  min_width=found.value)


def _query(block: Block, size: int) -> Result:
    if not block.is_concrete:
        found = families.facts(block, size)
        proved = [m for m in families.MODALITIES if found.truth.get(m)]
        if not proved:
            return unknown(found.reason or "no rule decides this family")
        methods = sorted({found.method[m] for m in proved})
        verdict = "; ".join(f"{m} absorbable" for m in proved) + f" at width {size}"
        return Result(DECIDED, verdict, ", ".join(methods),
                      certificate={"kind": "facts",
                                   "facts": {m: found.certificate[m] for m in proved}})
    decision = concrete.at_width(block, size)
    minimal = concrete.minimal_width(block)
    min_width = minimal.value if minimal.found else None
    tail = ""
    if minimal.found:
        tail = "; min width " + ("none" if minimal.value is None else str(minimal.value))
    if decision.absorbable is None:
        if not minimal.found:
            return unknown(decision.reason)
        return Result(DECIDED, tail.lstrip("; "), minimal.method,
                      certificate=minimal.certificate, min_width=min_width)
    verdict = ("absorbable" if decision.absorbable else "not absorbable") + f" at width {size}"
    if decision.detail:
        verdict += f" ({decision.detail})"
    return Result(DECIDED, verdict + tail, decision.method, certificate=decision.certificate,
                  min_width=min_width, extra={"min_width_certificate": minimal.certificate}
                  if minimal.found else {})
