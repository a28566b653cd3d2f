"""Which witness an export writes: the decision's, at the width asked or else at the least
width proved absorbable (`find_witness`), and the wider exact constructions that may replace
it (`alternatives`: after doubles at m + d, the spare pairs at m + 2·rank S, docs/rules.md
§4). The verdict and the witness come from `decide`; nothing is rounded here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..checker.kernel.contract import Check
from ..decide import large
from ..decide.concrete import MinWidth, too_large
from ..decide.decision import Decision
from ..decide.dispatch import _minimal, concrete_decision
from ..decide.spare import upper_bound
from ..model.blocks import Block, Layer
from .rounding import EXIT_NOT_ABSORBABLE, ExportError

# constructions, not stored layers
LARGE_METHODS = (large.METHOD, large.METHOD_DOUBLES, large.METHOD_GATED)


@dataclass(frozen=True)
class Witness:
    """layers: the decision's witness; None for a large block's construction (its own
    neurons plus the added ones, `decide.large`), which is rounded without converting the
    block's weights. width_note: why the width was chosen, when no width was asked and the
    minimal width is only bounded ("" otherwise). widen: a wider exact construction may
    replace this one (no --width was asked, or the caller allows it: `alternatives`)."""

    block: Block
    claim_width: int
    decision: Decision
    layers: tuple[Layer, ...] | None
    width_note: str = ""
    widen: bool = False

    @property
    def construction(self) -> str:
        """The construction's name: the certificate's check for a large one, else
        "the decision's witness"."""
        if self.layers is None:
            return str((self.decision.certificate or {}).get("check", self.decision.method))
        return "the decision's witness"


def find_witness(block: Block, width: int | None, engine: str = "theory",
                 wider: bool = False) -> Witness:
    """The decision's witness at `width`; when None, at the block's minimal width, or, when
    only bounds lo..hi of it are proved, at hi: the least width proved absorbable (found as
    a query finds it, without the exhaustive width search, so in the time a query takes).
    The witness may be replaced by a wider exact construction (`alternatives`) when no
    width was asked or `wider` allows it."""
    if block.layers is None:
        raise ExportError(f"block {block.name} is a family (no weights): nothing to export")
    note, decided = "", None
    asked = width
    if width is None:
        width, note, decided = _default_width(block, engine)
    if width < 1:
        raise ExportError("--width must be at least 1")
    decision, clash = decided or concrete_decision(block, width, engine)
    if clash:
        raise ExportError(clash)
    if decision.absorbable is None:
        raise ExportError(f"whether {block.name} is absorbable at width {width} is unknown: "
                          f"{decision.reason}")
    if decision.absorbable is False:
        raise ExportError(f"block {block.name} is not absorbable at width {width} "
                          f"[{decision.method}]", EXIT_NOT_ABSORBABLE)
    widen = asked is None or wider
    if decision.witness is None and decision.method in LARGE_METHODS:
        return Witness(block, width, decision, None, note, widen)
    if decision.witness is None:
        raise ExportError(f"block {block.name} is absorbable at width {width} "
                          f"[{decision.method}], but the decision holds no rational witness "
                          f"to export ({_why_no_witness(decision)})")
    return Witness(block, width, decision, decision.witness, note, widen)


def alternatives(found: Witness, engine: str = "theory") -> list[Witness]:
    """`found`, then the wider exact constructions that may replace it: the spare pairs at
    m + 2·rank S after doubles at m + d (docs/rules.md §4) when `found.widen`."""
    out = [found]
    if found.widen and found.construction == Check.DOUBLES:
        spare = upper_bound(found.block)
        decision, clash = concrete_decision(found.block, spare, engine)
        if not clash and decision.absorbable and decision.method == large.METHOD:
            out.append(Witness(found.block, spare, decision, None, found.width_note))
    return out


def _why_no_witness(decision: Decision) -> str:
    """Why a proved decision carries no exact layers: a layer of a stack absorbed by linear
    neurons whose σ(γ) is irrational (silu(1), gelu(1)), or else an algebraic witness or a
    large block proved without one."""
    parts = (decision.certificate or {}).get("per_layer") or []
    for n, part in enumerate(parts, start=1):
        if isinstance(part, dict) and part.get("check") == Check.LINEAR_NEURONS:
            return (f"layer {n}'s linear neurons have the down weights p/σ(γ) with "
                    f"σ(γ) = {part.get('sigma_gamma')}, which is not rational; the layer "
                    "alone exports, as the rounded construction")
    return "an algebraic witness, or a large block proved absorbable without one"


def _default_width(block: Block, engine: str
                   ) -> tuple[int, str, tuple[Decision, str] | None]:
    """(width, note, the decision at that width when already made) for an export without
    --width: the minimal width, else the upper end of its proved bounds. As a query: the
    block's own width first, which narrows the bounds."""
    own, clash, known = None, "", None
    if not too_large(block):  # large blocks: the bounds do not use it
        own, clash = concrete_decision(block, block.width, engine)
        if clash:
            raise ExportError(clash)
        known = None if own.absorbable is None else (block.width, own.absorbable)
    found: MinWidth = _minimal(block, engine, known, exhaustive=False)[0]
    if found.found and found.value is None:
        raise ExportError(f"block {block.name} is not absorbable at any width "
                          f"[{found.method}]", EXIT_NOT_ABSORBABLE)
    if found.found:
        assert found.value is not None
        width, note = found.value, ""
    elif found.bounds is not None:
        lo, width = found.bounds
        note = (f"the minimal width is between {lo} and {width} (proved); {width} is the least "
                "width proved absorbable")
    else:
        raise ExportError(f"the minimal width of {block.name} is unknown ({found.reason}) and "
                          "no width is proved absorbable: give --width")
    return width, note, (own, "") if own is not None and width == block.width else None
