"""JSON forms of certificates (docs/certificates.md): rationals as strings (symbolic values,
σ at rational points, as their text: `model/symbolic.py`), matrices as lists of rows.

Every builder returns a plain dict with a "kind" naming a row of the §7 table, so that
certificates are deterministic, serialisable and readable by the independent checker.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

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


def witness(stack: Sequence[Layer], width: int, check: str, **extra: Any) -> dict[str, Any]:
    """Plain weights P (skip none, same activation and depth) with P ≡ B."""
    return {"kind": "witness", "width": width, "layers": layers(stack), "check": check, **extra}


def summary(certificate: dict[str, Any] | None) -> str:
    """One short phrase for the output line: the certificate's kind and its key numbers."""
    if not certificate:
        return ""
    kind = certificate.get("kind", "")
    if kind == "homogeneity point":
        return (f"homogeneity point x0 = ({', '.join(certificate['x0'])}), "
                f"t = {certificate['t']}, degree {certificate['degree']}")
    if kind == "parity point":
        return f"parity point x0 = ({', '.join(certificate['x0'])})"
    if kind == "lemma + direction":
        index = certificate["direction"]["index"] + 1
        return f"lemma {certificate['property']} + direction e_{index}"
    if kind == "witness":
        return f"witness of width {certificate['width']}"
    if kind == "minimal width":
        below = certificate.get("below")
        tail = f", refutation at {certificate['width'] - 1}: {summary(below)}" if below else ""
        return f"witness at {certificate['width']}{tail}"
    if kind == "subset search":
        method = certificate.get("method", "")
        cases = certificate.get("cases")
        count = f", {len(cases)} case{'s' * (len(cases) != 1)}" if cases else ""
        return f"subset search ({method}{count})"
    if kind == "separating functional":
        return "separating functional Y"
    if kind == "canonical forms":
        return "canonical forms " + ("equal" if certificate["equal"] else "differ")
    if kind == "linear rank":
        return f"rank {certificate['rank']} > width {certificate['width']}"
    if kind == "facts":
        return "facts: " + ", ".join(sorted(certificate["facts"]))
    if kind == "rule":
        return "rule + example witness" if "example" in certificate else "rule"
    return str(kind)
