"""The checker's canonical forms (MATH.md §4), computed from the embedded weights."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from . import exact
from .exact import Rows, Vec


def form(family: tuple[str, Fraction, Fraction | None], dim: int, skip: Rows,
         layer: dict[str, Any]) -> tuple[Rows, dict[Vec, Vec]]:
    """(Λ, {ū: v}) of x ↦ Sx + D σ(Ux), for a relu-family, analytic-family or linear σ."""
    kind, a, b = family
    up, down = exact.mat(layer["up"]), exact.mat(layer["down"])
    lam = exact.combine(skip, exact.matmul(down, up), a)
    if kind == "linear":
        return lam, {}
    keys: dict[Vec, list[Fraction]] = {}
    for i, u in enumerate(up):
        d = tuple(row[i] for row in down)
        if not any(u) or not any(d):
            continue
        lead = next(x for x in u if x != 0)
        alpha = lead if kind == "relu" else Fraction(1 if lead > 0 else -1)
        key = tuple(x / alpha for x in u)
        weight = b * abs(alpha) if kind == "relu" and b is not None else Fraction(1)
        acc = keys.setdefault(key, [Fraction(0)] * dim)
        for r in range(dim):
            acc[r] += weight * d[r]
    return lam, {k: tuple(v) for k, v in keys.items() if any(v)}


def family_of(activation: dict[str, Any]) -> tuple[str, Fraction, Fraction | None] | None:
    """The form family of σ: relu / analytic (O(a)+N) or linear (σ = az), re-proved."""
    from .lemmas import holds, odd_slope, ridge_family

    found = ridge_family(activation)
    if found is not None:
        return found
    a = odd_slope(activation)
    if a is not None and not activation["gated"] and holds(activation, "Lin", a):
        return "linear", a, None
    return None


def rho(family: tuple[str, Fraction, Fraction | None]) -> Fraction:
    kind, a, b = family
    return a / b if kind == "relu" and b is not None else a


def sorted_keys(keys: dict[Vec, Vec]) -> list[tuple[Vec, Vec]]:
    return sorted(keys.items())


def as_json(family: tuple[str, Fraction, Fraction | None], lam: Rows,
            keys: dict[Vec, Vec]) -> dict[str, Any]:
    """The same JSON shape the prover stores, to compare stored forms with recomputed ones."""
    kind, a, b = family
    if kind == "linear":
        return {"family": "linear", "Lambda": [[str(x) for x in r] for r in lam], "keys": []}
    return {"family": kind, "a": str(a), "b": None if b is None else str(b),
            "Lambda": [[str(x) for x in r] for r in lam],
            "keys": [{"u": [str(x) for x in u], "v": [str(x) for x in v]}
                     for u, v in sorted_keys(keys)]}
