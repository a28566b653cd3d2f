"""JSON forms of certificates (docs/certificates.md): rationals as strings (symbolic values,
σ at rational points, as their text: `model/symbolic.py`), matrices as lists of rows.

The certificates every pipeline shares — witnesses with stored layers, family rules and
their examples, facts, minimal widths and their bounds — and those of the generic engine
(§6). The rules' own families live beside this module: `never.py` (T1–T4, T2∞), `widths.py`
(canonical forms, width and subset searches, flip sets, the half-activation bound),
`large.py` (residue keys, the modular functional, the unique solution, the constructions of
large blocks) and `sublayers.py` (normalised sublayers). Every builder returns a plain dict
whose "kind" (and a witness's "check") is a member of the contract
(`checker/kernel/contract.py`), the names the checker reads; nothing outside `certify/`
builds one, so that certificates are deterministic, serialisable and spelt one way.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from ..checker.kernel.contract import Check, Kind
from ..model import symbolic
from ..model.blocks import Layer


def q(x: Any) -> str:
    """A rational as its string; a symbolic value (σ at rational points) as its text."""
    return symbolic.text(x)


def vector(v: Sequence[Fraction]) -> list[str]:
    return [q(x) for x in v]


def matrix(rows: Sequence[Sequence[Fraction]]) -> list[list[str]]:
    return [vector(r) for r in rows]


def layers(stack: Sequence[Layer]) -> list[dict[str, Any]]:
    """Each layer's weights; a biased layer's biases too (docs/rules.md §8), so that bias-free
    documents keep their bytes."""
    out = []
    for layer in stack:
        entry: dict[str, Any] = {"up": matrix(layer.up.rows), "down": matrix(layer.down.rows)}
        if layer.gate is not None:
            entry["gate"] = matrix(layer.gate.rows)
        for name in ("up_bias", "gate_bias", "down_bias"):
            bias = getattr(layer, name)
            if bias is not None:
                entry[name] = vector(bias)
        out.append(entry)
    return out


# ---- witnesses whose layers are stored -------------------------------------------------------

def witness(stack: Sequence[Layer], width: int, check: Check, **extra: Any) -> dict[str, Any]:
    """Plain weights P (skip none, same activation and depth) with P ≡ B, and what the checker
    compares them by."""
    return {"kind": Kind.WITNESS, "width": width, "layers": layers(stack), "check": check,
            **extra}


def itself(stack: Sequence[Layer], width: int) -> dict[str, Any]:
    """A plain block (skip none) absorbs itself, zero neurons added up to `width`."""
    return witness(stack, width, Check.ITSELF)


def widened(certificate: dict[str, Any], width: int, stack: Sequence[Layer]) -> dict[str, Any]:
    """A witness certificate restated at a larger width, with its layers padded (`stack`)."""
    return dict(certificate, width=width, layers=layers(stack))


def per_layer(width: int, certificates: list[dict[str, Any]]) -> dict[str, Any]:
    """A stack each of whose layers is absorbed by its own certificate (checked against that
    layer alone), at the widest of their widths."""
    return {"kind": Kind.WITNESS, "check": Check.LAYERS_ABSORBED, "width": width,
            "per_layer": certificates,
            "argument": "each layer of the block equals the plain layer its own certificate "
                        "proves (at most this width; zero neurons pad it); equal layers compose "
                        "to equal stacks"}


# ---- family rules ----------------------------------------------------------------------------

def rule(name: str, width: int, argument: str, rank: int | None = None,
         **extra: Any) -> dict[str, Any]:
    """A family rule of docs/rules.md (§3–5, §8.3, §9), which the checker re-derives from the
    block's activation and shapes: its name, the width, rank S (`rank_S`) where the rule reads
    it, any further field, and the argument in words."""
    rank_s = {} if rank is None else {"rank_S": rank}
    return {"kind": Kind.RULE, "rule": name, **rank_s, "width": width, **extra,
            "argument": argument}


def with_example(certificate: dict[str, Any], member: Sequence[Layer],
                 witness_: dict[str, Any] | None) -> dict[str, Any]:
    """A rule with a member of the family (its layers) and the member's own witness."""
    return {**certificate, "example": {"layers": layers(member), "witness": witness_}}


def facts(found: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A family query's answer: the certificate of each modality proved."""
    return {"kind": Kind.FACTS, "facts": found}


# ---- minimal widths --------------------------------------------------------------------------

def minimal_width(width: int, witness_: dict[str, Any] | None,
                  below: dict[str, Any] | None) -> dict[str, Any]:
    """The min width is `width`: a witness there, a refutation at width − 1 (None at 1)."""
    return {"kind": Kind.MINIMAL_WIDTH, "width": width, "witness": witness_, "below": below}


def minimal_width_bounds(lower: int, upper: int, below: dict[str, Any] | None,
                         above: dict[str, Any] | None) -> dict[str, Any]:
    """lower ≤ min width ≤ upper: a refutation at lower − 1 (None at 1), a witness at upper."""
    return {"kind": Kind.MINIMAL_WIDTH_BOUNDS, "lower": lower, "upper": upper,
            "below": below, "above": above}


# ---- the generic engine (§6) -----------------------------------------------------------------

def polynomial_witness(width: int, shown: list[dict[str, Any]]) -> dict[str, Any]:
    """The polynomial engine's solution (rational or algebraic values, already shown as JSON):
    P − B vanishes as a polynomial identity."""
    return {"kind": Kind.WITNESS, "width": width, "layers": shown,
            "check": Check.POLYNOMIAL_IDENTITY}


def synthesised_witness(stack: Sequence[Layer], width: int, smtlib: str) -> dict[str, Any]:
    """Synthesis's witness, with the SMT-LIB text that finds no point where P differs from B."""
    return witness(stack, width, Check.SMT_NO_DIFFERENCE, smtlib=smtlib)


def finite_point_set(width: int, points: list[list[str]], smtlib: str) -> dict[str, Any]:
    return {"kind": Kind.FINITE_POINT_SET, "width": width, "points": points, "smtlib": smtlib,
            "argument": "no plain block of this width matches B at these points"}


def nullstellensatz(width: int, unknowns: list[str], equations: list[Any],
                    cofactors: list[Any] | None) -> dict[str, Any]:
    """Σ_j h_j f_j = 1 (`cofactors` h_j), or, without them, the reduced Gröbner basis [1]
    that the checker recomputes (it is [1] in every monomial order, so none is named)."""
    common = {"kind": Kind.NULLSTELLENSATZ, "width": width, "unknowns": unknowns,
              "equations": equations}
    if cofactors is not None:
        return {**common, "method": "cofactors", "cofactors": cofactors,
                "argument": "sum_j h_j f_j = 1: the coefficient-matching equations have no "
                            "common solution, even over C"}
    return {**common, "method": "groebner basis",
            "argument": "the reduced Groebner basis of the equations is [1]: no common "
                        "solution, even over C"}


def real_infeasibility(width: int, unknowns: list[str], equations: list[Any],
                       smtlib: str) -> dict[str, Any]:
    return {"kind": Kind.REAL_INFEASIBILITY, "width": width, "unknowns": unknowns,
            "equations": equations, "smtlib": smtlib,
            "argument": "the coefficient-matching equations have no real solution"}


# ---- one line of output ----------------------------------------------------------------------

def summary(certificate: dict[str, Any] | None) -> str:
    """One short phrase for the output line: the certificate's kind and its key numbers."""
    if not certificate:
        return ""
    kind = certificate.get("kind", "")
    if kind == Kind.HOMOGENEITY_POINT:
        return (f"homogeneity point x0 = ({', '.join(certificate['x0'])}), "
                f"t = {certificate['t']}, degree {certificate['degree']}")
    if kind == Kind.PARITY_POINT:
        return f"parity point x0 = ({', '.join(certificate['x0'])})"
    if kind == Kind.LEMMA_DIRECTION:
        index = certificate["direction"]["index"] + 1
        return f"lemma {certificate['property']} + direction e_{index}"
    if kind == Kind.WITNESS:
        return f"witness of width {certificate['width']}"
    if kind == Kind.MINIMAL_WIDTH:
        below = certificate.get("below")
        tail = f", refutation at {certificate['width'] - 1}: {summary(below)}" if below else ""
        return f"witness at {certificate['width']}{tail}"
    if kind == Kind.SUBSET_SEARCH:
        method = certificate.get("method", "")
        cases = certificate.get("cases")
        count = f", {len(cases)} case{'s' * (len(cases) != 1)}" if cases else ""
        return f"subset search ({method}{count})"
    if kind == Kind.SEPARATING_FUNCTIONAL:
        return "separating functional Y"
    if kind == Kind.CANONICAL_FORMS:
        return "canonical forms " + ("equal" if certificate["equal"] else "differ")
    if kind == Kind.LINEAR_RANK:
        return f"rank {certificate['rank']} > width {certificate['width']}"
    if kind == Kind.FACTS:
        return "facts: " + ", ".join(sorted(certificate["facts"]))
    if kind == Kind.RULE:
        return "rule + example witness" if "example" in certificate else "rule"
    return str(kind)
