"""Run the numeric checks on a decided result and attach their figures (the verdicts stay
exact; these are the float sanity checks a practitioner reads at a glance)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TextIO

from ..checker.kernel.contract import Kind
from ..model.blocks import Block
from ..model.result import ERROR, Result
from .backends import Backend
from .crosscheck import crosscheck
from .floatblock import OutOfRange
from .sanity import sanity


@dataclass(frozen=True)
class Options:
    points: int
    engine: Backend
    fit: bool = False
    fit_restarts: int = 8
    progress: TextIO | None = None


def attach(block: Block, result: Result, options: Options, width: int | None) -> Result:
    if result.certificate is None or options.points <= 0:
        return result
    extra = dict(result.extra)
    verdict = result.verdict
    checked, certificate = block, result.certificate
    if block.norm is not None and certificate.get("kind") == Kind.NORMALISED_SUBLAYER:
        # post-norm (Lemma P): the witness replaces the reduced block; N is applied to both
        from ..decide.sublayer import reduced

        small = reduced(block)[0]
        if small is not None:
            checked, certificate = small, certificate["certificate"]
    try:
        found = crosscheck(checked, certificate, options.points, options.engine,
                           options.progress)
    except OutOfRange as error:  # no float image: the exact verdict stands unchecked
        found = None
        extra["crosscheck"] = {"skipped": str(error)}
        verdict += f"; cross-check skipped: {error}"
    if found is not None:
        extra["crosscheck"] = found.as_json()
        verdict += f"; {found.phrase()}"
        if not found.ok:
            return replace(result, outcome=ERROR, verdict=verdict, extra=extra,
                           reason=f"INTERNAL ERROR: a witness differs from its block by "
                                  f"{found.max_rel_error:.3g} > {found.tolerance:.3g} in "
                                  "floats (this is a bug; please report it)")
    try:
        figure = sanity(checked, certificate, options.engine)
    except OutOfRange as error:
        figure = {"skipped": str(error)}
    if figure is not None:
        extra["sanity"] = figure
    # search_stack fits ungated stacks of any depth, with or without biases
    fits = not block.activation.gated or (block.depth == 1 and not block.biased)
    if options.fit and width is not None and block.is_concrete and fits:
        from .fit import fit_alarm, phrase

        try:  # a post-norm sublayer is fitted as its reduced block (Lemma P), like its witness
            alarm, report = fit_alarm(checked, width, result, options.fit_restarts,
                                      options.engine)
        except OutOfRange as error:
            alarm, report = "", {"skipped": str(error)}
        extra["fit"] = report
        verdict += f"; {phrase(report)}"
        if alarm:
            return replace(result, outcome=ERROR, verdict=verdict, extra=extra, reason=alarm)
    return replace(result, verdict=verdict, extra=extra)
