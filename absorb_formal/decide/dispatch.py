"""Route each claim or query to the rules that decide it (docs/rules.md §3–5) and phrase the
result."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..certify import bodies as cert
from ..checker.kernel.contract import Kind
from ..model.blocks import Block, Claim, Query, Spec, Statement
from ..model.result import DECIDED, ERROR, PROVED, REFUTED, UNKNOWN, Result, unknown
from . import budget, concrete, equivalence, families, integer_forms
from .decision import Decision

ENGINES = ("theory", "generic", "both")


# The negation of a family modality, in words: never and sometimes are each other's; the
# others read "not ...".
NEGATED = {"never": "sometimes", "sometimes": "never"}


def _generic() -> Any:
    """The generic engine (§6), imported on first use: it brings sympy and z3 (about half a
    second of start-up), which most claims never need."""
    from ..generic import engine

    return engine


def decide(spec: Spec, statement: Statement, engine: str = "theory") -> Result:
    """Decide one claim or query of `spec`; `unknown` with a reason when no rule applies.

    engine: "theory" (docs/rules.md §3–5, falling back to the generic engine where no rule decides
    and the size is small), "generic" (§6 only), or "both" (each; disagreement is an error).
    """
    block = spec.blocks[statement.block]
    size = statement.width if statement.width is not None else block.width
    other = getattr(statement, "other", None)
    if block.norm is not None or (other is not None and spec.blocks[other].norm is not None):
        from . import sublayer  # docs/rules.md, normalised sublayers

        return sublayer.decide(spec, statement, engine, decide)
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
                      fails=f"{NEGATED.get(statement.modality, 'not ' + statement.modality)} "
                            f"absorbable at width {size}")
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
    found, clash = _engines_at(block, size, engine)
    if found.absorbable is None and not clash and size > block.width:
        # Absorbable at m implies absorbable at every wider width (zero neurons added; the
        # checker accepts a witness narrower than the width asked): docs/rules.md §1.
        own, clash_own = _engines_at(block, block.width, engine)
        if own.absorbable is True and not clash_own:
            return replace(own, detail=f"absorbable at its own width {block.width}"
                                       + (f": {own.detail}" if own.detail else "")), ""
    return found, clash


def _engines_at(block: Block, size: int, engine: str) -> tuple[Decision, str]:
    theory = concrete.at_width(block, size) if engine != "generic" else None
    if engine == "theory" and theory is not None and theory.absorbable is not None:
        return theory, ""
    if engine == "theory" and not _generic().applies(block, size):  # "" = it applies
        return _generic().at_width(block, size), ""
    if engine == "theory":
        assert theory is not None
        return theory, ""
    generic = _generic().at_width(block, size)
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
    equal, certificate, reason = equivalence.equal_blocks(left, right)
    if equal is None:
        return unknown(reason)
    verdict = "equal as functions" if equal else "different functions"
    assert certificate is not None
    method = (integer_forms.METHOD if certificate["kind"] == Kind.INTEGER_CANONICAL_FORMS
              else equivalence.METHOD)
    return Result(PROVED if equal else REFUTED, verdict, method, certificate=certificate)


def _minimal(block: Block, engine: str, known: tuple[int, bool] | None = None,
             exhaustive: bool = True) -> tuple[concrete.MinWidth, str]:
    """The minimal width by the engine(s) asked for, and any disagreement."""
    theory = (concrete.minimal_width(block, known, exhaustive) if engine != "generic"
              else None)
    if engine == "theory" and theory is not None and (
            theory.found or _generic().applies(block, 1)):  # a reason: does not apply
        return theory, ""
    value, certificate, reason = _generic().minimal_width(block)
    generic = concrete.MinWidth(value is not None, value, _generic().method_of(block),
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


def _bounds(found: concrete.MinWidth) -> dict[str, Any]:
    """Proved bounds of an undecided min width, with their certificate when they have one
    ("minimal width bounds", large blocks)."""
    if found.found or found.bounds is None:
        return {}
    extra: dict[str, Any] = {"min_width_bounds": list(found.bounds)}
    if found.certificate is not None:
        extra["min_width_certificate"] = found.certificate
    return extra


def _query(block: Block, size: int, engine: str) -> Result:
    if not block.is_concrete:
        found = families.facts(block, size)
        proved = [m for m in families.MODALITIES if found.truth.get(m)]
        if not proved:
            return unknown(found.reason or "no rule decides this family")
        methods = sorted({found.method[m] for m in proved})
        verdict = "; ".join(f"{m} absorbable" for m in proved) + f" at width {size}"
        return Result(DECIDED, verdict, ", ".join(methods),
                      certificate=cert.facts({m: found.certificate[m] for m in proved}))
    decision, clash = concrete_decision(block, size, engine)
    if clash:
        return Result(ERROR, reason=clash, method="both engines")
    known = None if decision.absorbable is None else (size, decision.absorbable)
    try:  # a timeout here keeps the decision at `size`, already made
        minimal, clash = _minimal(block, engine, known, exhaustive=False)
    except budget.ClaimTimeout:
        minimal = concrete.MinWidth(False, reason=budget.timeout_reason())
    else:
        if not minimal.found and budget.spent():
            minimal = replace(minimal, reason=f"{budget.timeout_reason()} ({minimal.reason})")
    if clash:
        return Result(ERROR, reason=clash, method="both engines")
    return _query_result(decision, size, minimal)


def _query_result(decision: Decision, size: int, minimal: concrete.MinWidth) -> Result:
    """Both parts of a concrete query: the decision at `size` (verdict, certificate, method)
    first, then the min width (exact, proved bounds, or unknown with its reason); the JSON
    gets "decision" ({width, absorbable}, as claims do; --fit checks against it),
    "min_width_bounds" and "min_width_reason" besides."""
    extra: dict[str, Any] = {"decision": {"width": size, "absorbable": decision.absorbable},
                             **_bounds(minimal)}
    if minimal.found:
        tail = "min width " + ("none" if minimal.value is None else str(minimal.value))
        extra["min_width_certificate"] = minimal.certificate
    elif minimal.bounds is not None:
        lo, hi = minimal.bounds
        tail = f"min width between {lo} and {hi}"
        extra["min_width_reason"] = minimal.reason
    else:
        tail = f"min width unknown ({minimal.reason})"
        extra["min_width_reason"] = minimal.reason
    min_width = minimal.value if minimal.found else None
    if decision.absorbable is None:
        if not minimal.found:  # bounds alone carry no certificate: not a decision
            said = f"; {tail}" if minimal.bounds is not None else ""
            return replace(unknown(decision.reason + said), extra=extra)
        # A proved min width decides every width: absorbable iff size >= it (none: never),
        # since absorbable at w implies absorbable at every w' >= w (zero neurons).
        derived = min_width is not None and size >= min_width
        extra["decision"] = {"width": size, "absorbable": derived}
        verdict = (("absorbable" if derived else "not absorbable") + f" at width {size} "
                   f"(from the min width); {tail}")
        return Result(DECIDED, verdict, minimal.method, certificate=minimal.certificate,
                      min_width=min_width, extra=extra)
    verdict = ("absorbable" if decision.absorbable else "not absorbable") + f" at width {size}"
    if decision.detail:
        verdict += f" ({decision.detail})"
    return Result(DECIDED, f"{verdict}; {tail}", decision.method,
                  certificate=decision.certificate, min_width=min_width, extra=extra)


def _bounded(found: concrete.MinWidth) -> Result:
    """An undecided min width: unknown, with the proved bounds and their certificate if any."""
    if found.bounds is None:
        return unknown(found.reason)
    return Result(UNKNOWN, reason=found.reason, method=found.method,
                  certificate=found.certificate, extra=_bounds(found))
