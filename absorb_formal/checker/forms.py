"""The checker's canonical forms (docs/rules.md §4), computed from the embedded weights."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from . import exact
from .exact import Rows, Vec


def form(family: tuple[str, Fraction, Fraction | None], dim: int, skip: Rows,
         layer: dict[str, Any], biased: bool = False, activation: dict[str, Any] | None = None
         ) -> tuple[Rows, dict[Vec, Vec], Vec | None]:
    """(Λ, {ū: v}, None) of x ↦ Sx + D σ(Ux), for a relu-family, analytic-family or linear σ.

    `biased` (docs/rules.md §8.1): x ↦ Sx + D σ(Ux + b) + c, biases absent read as 0; a key is then
    ū + (β̄,) (the affine function, normalised by ū) and the third entry is
    γ = c + a·Σ_{u_i≠0} d_i β_i + Σ_{u_i=0} d_i σ(β_i); σ(β) needs σ exact on Q unless β = 0
    (`activation`; otherwise ValueError: no exact γ)."""
    kind, a, b = family
    up, down = exact.mat(layer["up"]), exact.mat(layer["down"])
    lam = exact.combine(skip, exact.matmul(down, up), a)
    if kind == "linear":
        if biased:
            raise ValueError("§8.1 forms are for O(a)+N activations")
        return lam, {}, None
    betas = exact.vec(layer.get("up_bias") or ["0"] * len(up))
    gamma = list(exact.vec(layer.get("down_bias") or ["0"] * dim))
    keys: dict[Vec, list[Fraction]] = {}
    for i, u in enumerate(up):
        d = tuple(row[i] for row in down)
        if not any(d):
            continue
        if not any(u):  # a constant neuron d_i σ(β_i)
            if betas[i] != 0:
                if activation is None:
                    raise ValueError("a constant neuron needs σ's exact value")
                _add(gamma, d, exact.sigma(activation, betas[i]))
            continue
        lead = next(x for x in u if x != 0)
        alpha = lead if kind == "relu" else Fraction(1 if lead > 0 else -1)
        key = tuple(x / alpha for x in u) + ((betas[i] / alpha,) if biased else ())
        _add(gamma, d, a * betas[i])
        weight = b * abs(alpha) if kind == "relu" and b is not None else Fraction(1)
        _add(keys.setdefault(key, [Fraction(0)] * dim), d, weight)
    return (lam, {k: tuple(v) for k, v in keys.items() if any(v)},
            tuple(gamma) if biased else None)


def _add(acc: list[Fraction], d: Vec, weight: Fraction) -> None:
    for r in range(len(acc)):
        acc[r] += weight * d[r]


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
            keys: dict[Vec, Vec], gamma: Vec | None = None) -> dict[str, Any]:
    """The same JSON shape the prover stores, to compare stored forms with recomputed ones
    (biased, §8.1: each key's last entry is its β̄, and γ is stored)."""
    kind, a, b = family
    if kind == "linear":
        return {"family": "linear", "Lambda": [[str(x) for x in r] for r in lam], "keys": []}
    dim = len(lam)
    out: dict[str, Any] = {"family": kind, "a": str(a), "b": None if b is None else str(b),
           "Lambda": [[str(x) for x in r] for r in lam],
           "keys": [{"u": [str(x) for x in u[:dim]], "v": [str(x) for x in v]}
                    for u, v in sorted_keys(keys)]}
    if gamma is not None:
        for entry, (u, _) in zip(out["keys"], sorted_keys(keys), strict=True):
            entry["beta"] = str(u[dim])
        out["gamma"] = [str(x) for x in gamma]
    return out
