"""Route each claim or query to the rules that decide it (MATH.md §3–5) and phrase the result."""

from __future__ import annotations

from dataclasses import replace

from ..generic import engine as generic_engine
from ..model import Block, Claim, Query, Spec, Statement
from ..result import DECIDED, ERROR, PROVED, REFUTED, UNKNOWN, Result, unknown
from . import concrete, equivalence, families
from .decision import Decision

ENGINES = ("theory", "generic", "both")


def decide(spec: Spec, statement: Statement, engine: str = "theory") -> Result:
    """Decide one claim or query of `spec`; `unknown` with a reason when no rule applies.

    engine: "theory" (MATH.md §3–5, falling back to the generic engine where no rule decides
    and the size is small), "generic" (§6 only), or "both" (each; disagreement is an error).
    """
    block = spec.blocks[statement.block]
    size = statement.width if statement.width is not None else block.width
    if isinstance(statement, Query):
        return _query(block, size, engine)
    if statement.kind == "equals":
        assert statement.other is not None
        return _equals(block, spec.blocks[statement.other])
    if statement.kind == "min_width":
        return _min_width(block, statement, engine)
    if statement.kind == "family":
        return _claim(families.decide(block, statement.modality, size),
                      expected=True, holds=f"{statement.modality} absorbable at width {size}",
                      fails=f"not {statement.modality} absorbable at width {size}")
    decision, clash = concrete_decision(block, size, engine)
    if clash:
        return Result(ERROR, reason=clash, method="both engines")
    wanted = statement.modality != "not"
    result = _claim(decision, expected=wanted, holds=f"absorbable at width {size}",
                    fails=f"not absorbable at width {size}")
    return replace(result, extra={"decision": {"width": size,
                                               "absorbable": decision.absorbable}})


def concrete_decision(block: Block, size: int, engine: str) -> tuple[Decision, str]:
    """(decision, disagreement message) for 'absorbable at width size' on a concrete block."""
    theory = concrete.at_width(block, size) if engine != "generic" else None
    if engine == "theory" and theory is not None and theory.absorbable is not None:
        return theory, ""
    if engine == "theory" and not generic_engine.applies(block, size):  # "" = it applies
        return generic_engine.at_width(block, size), ""
    if engine == "theory":
        assert theory is not None
        return theory, ""
    generic = generic_engine.at_width(block, size)
    if engine == "generic" or theory is None:
        return generic, ""
    if None not in (theory.absorbable, generic.absorbable) and \
            theory.absorbable != generic.absorbable:
        return theory, (f"INTERNAL ERROR: the engines disagree at width {size}: theory says "
                        f"{_said(theory)} [{theory.method}], generic says {_said(generic)} "
                        f"[{generic.method}] (please report)")
    return (theory if theory.absorbable is not None else generic), ""


def _said(decision: Decision) -> str:
    return "absorbable" if decision.absorbable else "not absorbable"


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


def _minimal(block: Block, engine: str) -> tuple[concrete.MinWidth, str]:
    """The minimal width by the engine(s) asked for, and any disagreement."""
    theory = concrete.minimal_width(block) if engine != "generic" else None
    if engine == "theory" and theory is not None and (
            theory.found or generic_engine.applies(block, 1)):  # a reason: does not apply
        return theory, ""
    value, certificate, reason = generic_engine.minimal_width(block)
    generic = concrete.MinWidth(value is not None, value, generic_engine.method_of(block),
                                certificate, reason)
    if theory is None or not theory.found:
        return (generic if generic.found or theory is None else theory), ""
    if generic.found and engine == "both" and generic.value != theory.value:
        return theory, (f"INTERNAL ERROR: the engines disagree on the min width: theory "
                        f"{theory.value}, generic {generic.value} (please report)")
    return theory, ""


def _min_width(block: Block, claim: Claim, engine: str) -> Result:
    found, clash = _minimal(block, engine)
    if clash:
        return Result(ERROR, reason=clash, method="both engines")
    if not found.found:
        return _bounded(found)
    shown = "none" if found.value is None else str(found.value)
    verdict = f"min width is {shown}"
    outcome = PROVED if found.value == claim.min_width else REFUTED
    return Result(outcome, verdict, found.method, certificate=found.certificate,
                  min_width=found.value)


def _query(block: Block, size: int, engine: str) -> Result:
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
    decision, clash = concrete_decision(block, size, engine)
    if clash:
        return Result(ERROR, reason=clash, method="both engines")
    minimal, clash = _minimal(block, engine)
    if clash:
        return Result(ERROR, reason=clash, method="both engines")
    min_width = minimal.value if minimal.found else None
    tail, extra = "", _bounds_extra(minimal)
    if minimal.found:
        tail = "; min width " + ("none" if minimal.value is None else str(minimal.value))
    elif minimal.bounds is not None:
        tail = "; min width between {} and {}".format(*minimal.bounds)
    if decision.absorbable is None:
        if not minimal.found:
            return replace(unknown(decision.reason + tail), extra=extra)
        return Result(DECIDED, tail.lstrip("; "), minimal.method,
                      certificate=minimal.certificate, min_width=min_width)
    verdict = ("absorbable" if decision.absorbable else "not absorbable") + f" at width {size}"
    if decision.detail:
        verdict += f" ({decision.detail})"
    if minimal.found:
        extra = {"min_width_certificate": minimal.certificate}
    return Result(DECIDED, verdict + tail, decision.method, certificate=decision.certificate,
                  min_width=min_width, extra=extra)


def _bounds_extra(found: concrete.MinWidth) -> dict[str, object]:
    if found.found or found.bounds is None:
        return {}
    return {"min_width_bounds": list(found.bounds), "min_width_certificate": found.certificate}


def _bounded(found: concrete.MinWidth) -> Result:
    """An undecided min width: unknown, with the proved bounds and their certificate if any."""
    if found.bounds is None:
        return unknown(found.reason)
    return Result(UNKNOWN, reason=found.reason, method=found.method,
                  certificate=found.certificate, extra=_bounds_extra(found))
