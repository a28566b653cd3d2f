"""The construction an export writes (`choose`): each alternative is built (`built`: rounded,
padded, measured) unless its memory estimate is refused (`memory_refusal`), then the
narrowest within the gate is taken (--prefer width) or the most accurate in the dtype's
arithmetic (--prefer accuracy). `proved_equal` says whether the stored values provably
compute the block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from ..checker.kernel.contract import Check
from ..decide import doubles
from ..decide.spare import upper_bound
from ..model.blocks import Block, Layer, Matrix
from ..model.memory import EXACT_BYTES, export_bytes, refusal
from .construction import Witness, alternatives
from .layout import balanced, construction_arrays, layer_arrays, padded, rounded_arrays
from .rounding import ExportError, Rounded
from .sample import sample_error


def memory_refusal(block: Block, width: int, dtype: str, memory: int | None) -> str:
    """Why exporting `block`'s witness at `width` in `dtype` is refused for want of memory
    ("" when its estimate fits `memory`, None: what is available now: `model/memory.py`)."""
    return refusal(export_bytes(block.dim, width, block.depth, block.activation.gated,
                                block.biased, dtype), memory)


@dataclass
class Choice:
    """The construction chosen (`choose`): its witness, rounded arrays (padded to its
    width), measured figures (`sample_error`), and the note saying why, when another than
    the first was taken or the width changed ("" otherwise)."""

    witness: Witness
    rounded: dict[str, Rounded]
    figures: dict[str, str]
    note: str


def built(found: Witness, dtype: str, points: int | None
          ) -> tuple[dict[str, Rounded], dict[str, str]]:
    """The witness rounded to `dtype` and padded to its width, and its sample figures;
    doubles.TooWide when a doubles construction cannot be rounded (`enclosed_doubles`)."""
    rounded = padded(rounded_arrays(balanced(found.block, found.layers), dtype)
                     if found.layers is not None
                     else construction_arrays(found.block, dtype, found.decision.certificate),
                     found.claim_width)
    return rounded, sample_error(found.block, {k: r.as_float64() for k, r in rounded.items()},
                                 points, dtype)


def _figure(figures: dict[str, str], key: str) -> float:
    try:
        return float(figures[key])
    except (KeyError, ValueError):
        return math.inf


def choose(found: Witness, dtype: str, points: int | None, max_error: float,
           prefer: str = "width", engine: str = "theory", memory: int | None = None) -> Choice:
    """Among `alternatives(found)` (in order of width): with prefer "width", the first that
    can be built and passes the gate (`max_error` on sample_max_rel_error), else the first
    built (which the gate then refuses); with "accuracy", the one with the least
    sample_max_rel_error_in_dtype_arith (ties: the narrower). The note names every
    construction passed over and why; ExportError when none can be built (one whose
    memory estimate passes `memory` is not tried: `memory_refusal`)."""
    options = alternatives(found, engine)
    made: list[tuple[Witness, dict[str, Rounded], dict[str, str]]] = []
    passed: list[str] = []
    for option in options:
        label = f"{option.construction} at width {option.claim_width}"
        why = memory_refusal(option.block, option.claim_width, dtype, memory)
        if why:
            passed.append(f"{label} was not built ({why})")
            continue
        try:
            rounded, figures = built(option, dtype, points)
        except doubles.TooWide as error:
            passed.append(f"{label} was not built ({error})")
            continue
        made.append((option, rounded, figures))
        if prefer == "width":
            if _passes(figures, max_error):
                break
            off = _figure(figures, "sample_max_rel_error")
            passed.append(f"{label} is off by {off:.3g} of the output, beyond the "
                          f"{max_error:.3g} allowed (--max-error {off * 1.1:.2g} accepts it)")
    if not made:
        hint = ""
        if found.construction == Check.DOUBLES and not found.widen:
            hint = (f"; --width {upper_bound(found.block)} exports the spare-pair "
                     "construction")
        raise ExportError("; ".join(passed) + hint)
    if prefer == "width":
        pick = next((m for m in made if _passes(m[2], max_error)), made[0])
    else:
        def key(m: tuple[Witness, dict[str, Rounded], dict[str, str]]) -> tuple[float, int]:
            return _figure(m[2], "sample_max_rel_error_in_dtype_arith"), m[0].claim_width

        pick = min(made, key=key)
        arith = pick[2].get("sample_arith", dtype)
        passed += [f"--prefer accuracy: {m[0].construction} at width {m[0].claim_width} is "
                   f"off by {_figure(m[2], 'sample_max_rel_error_in_dtype_arith'):.3g} of the "
                   f"output computed in {arith}, {pick[0].construction} at width "
                   f"{pick[0].claim_width} by "
                   f"{_figure(pick[2], 'sample_max_rel_error_in_dtype_arith'):.3g}"
                   for m in made if m is not pick
                   and math.isfinite(_figure(pick[2], "sample_max_rel_error_in_dtype_arith"))]
        if len(made) > 1 and pick[2]["sample_max_rel_error"] == "n/a":
            passed.append("--prefer accuracy: no error measured (no sample), so the "
                          "narrowest construction was taken")
    witness, rounded, figures = pick
    note = "; ".join(passed)
    if witness.claim_width != found.claim_width:
        note = (f"width {witness.claim_width} ({witness.construction}) instead of the proved "
                f"{found.claim_width} ({found.construction}): {note}")
    return Choice(witness, rounded, figures, note)


def _passes(figures: dict[str, str], max_error: float) -> bool:
    if figures["sample_max_rel_error"] == "n/a":
        return True
    return float(figures["sample_max_rel_error"]) <= max_error


def proved_equal(block: Block, rounded: dict[str, Rounded], memory: int | None = None) -> str:
    """Whether the stored arrays, read back as the exact values they hold, compute `block`:
    `claim block equals plain` decided by the canonical forms (in exact integers beyond the
    exact-work limit), at any size. Tried when the stored values are the exact witness
    (rounding error 0) of a depth-1 block and its estimate fits `memory` (None: what is
    available now); the answer, or why it was not tried."""
    if block.depth != 1 or block.layers is None:
        return "not tried: canonical forms compare depth-1 blocks"
    if any(r.max_rel_error != 0 for r in rounded.values()):
        return ("not tried: the stored values round the exact witness (their error is "
                "measured above, not proved zero)")
    why = refusal(EXACT_BYTES * sum(r.values.size for r in rounded.values()), memory)
    if why:
        return f"not tried: the exact comparison {why}"
    from dataclasses import replace

    from ..decide.equivalence import equal_blocks
    from ..model.exactarray import fractions

    values = layer_arrays({k: r.as_float64() for k, r in rounded.items()}, 1)[0]
    matrices = {k: Matrix(array=v) for k, v in values.items() if k in ("up", "gate", "down")}
    biases = {k: tuple(fractions(v.reshape(1, -1))[0]) for k, v in values.items()
              if k.endswith("_bias")}
    plain = replace(block, name=f"{block.name}_plain", skip=replace(block.skip, scale=Fraction(0),
                                                                    matrix=None),
                    width=matrices["up"].shape[0], norm=None,
                    layers=(Layer(matrices["up"], matrices["down"], matrices.get("gate"),
                                  biases.get("up_bias"), biases.get("gate_bias"),
                                  biases.get("down_bias")),))
    equal, _, reason = equal_blocks(block, plain)
    if equal is None:
        return f"unknown: {reason}"
    return ("proved: the stored MLP equals the block (canonical forms, exactly)" if equal
            else "REFUTED: the stored MLP differs from the block (please report)")
