"""JSON forms of certificates (MATH.md §7): rationals as strings, matrices as lists of rows.

Every builder returns a plain dict with a "kind" naming a row of the §7 table, so that
certificates are deterministic, serialisable and readable by the independent checker.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from .model import Layer


def q(x: Fraction | int) -> str:
    return str(Fraction(x))


def vector(v: Sequence[Fraction]) -> list[str]:
    return [q(x) for x in v]


def matrix(rows: Sequence[Sequence[Fraction]]) -> list[list[str]]:
    return [vector(r) for r in rows]


def layers(stack: Sequence[Layer]) -> list[dict[str, Any]]:
    out = []
    for layer in stack:
        entry = {"up": matrix(layer.up.rows), "down": matrix(layer.down.rows)}
        if layer.gate is not None:
            entry["gate"] = matrix(layer.gate.rows)
        out.append(entry)
    return out


def witness(stack: Sequence[Layer], width: int, check: str, **extra: Any) -> dict[str, Any]:
    """Plain weights P (skip none, same activation and depth) with P ≡ B."""
    return {"kind": "witness", "width": width, "layers": layers(stack), "check": check, **extra}
