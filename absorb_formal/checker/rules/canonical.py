"""The checker's canonical forms (docs/rules.md, "Canonical forms and keys", §4), computed from
the embedded weights, and the witnesses checked by comparing forms: `same_forms` serves
`canonical forms equal` (rules/width.py), `linear maps equal` (rules/linear.py) and the
layer-by-layer forms of stacks (rules/concrete.py)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..kernel import linalg as exact
from ..kernel import symbolic
from ..kernel.contract import Invalid, require
from ..kernel.linalg import Rows, Vec
from ..lemmas import values


def form(family: tuple[str, Fraction, Fraction | None], dim: int, skip: Rows,
         layer: dict[str, Any], biased: bool = False, activation: dict[str, Any] | None = None
         ) -> tuple[Rows, dict[Vec, Vec], Vec | None]:
    """(Λ, {ū: v}, None) of x ↦ Sx + D σ(Ux), for a relu-family, analytic-family or linear σ.

    `biased` (docs/rules.md §8.1): x ↦ Sx + D σ(Ux + b) + c, biases absent read as 0; a key is then
    ū + (β̄,) (the affine function, normalised by ū) and the third entry is
    γ = c + a·Σ_{u_i≠0} d_i β_i + Σ_{u_i=0} d_i σ(β_i); σ(β) needs σ exact on Q unless β = 0
    (`activation`; otherwise ValueError: no exact γ); when σ is not rational on Q (silu,
    gelu) the constant neurons are kept formally, as keys with ū = 0 and β̄ = β, v = Σ d_i,
    and so is each term v·σ(β) of a symbolic output bias (a witness's c′, `symbolic`):
    formally equal forms are equal functions, but formally different constants may still
    be equal numbers (`constant_keys`). A linear σ = a·z: (Λ, {}, γ) with γ = c + a·D b."""
    kind, a, b = family
    up, down = exact.mat(layer["up"]), exact.mat(layer["down"])
    lam = exact.combine(skip, exact.matmul(down, up), a)
    betas = exact.vec(layer.get("up_bias") or ["0"] * len(up))
    # c, each entry a rational or (a witness's c′) a symbolic value r + Σ c σ(β)
    constant = [symbolic.parse(x) for x in layer.get("down_bias") or ["0"] * dim]
    gamma = [Fraction(0)] * dim
    if kind == "linear":  # σ = a·z: x ↦ Λx + γ, γ = c + a·D b (docs/rules.md §8)
        for i in range(len(up)):
            _add(gamma, tuple(row[i] for row in down), a * betas[i])
        return lam, {}, _rational(gamma, constant) if biased else None
    keys: dict[Vec, list[Fraction]] = {}
    for i, u in enumerate(up):
        d = tuple(row[i] for row in down)
        if not any(d):
            continue
        if not any(u):  # a constant neuron d_i σ(β_i)
            if betas[i] != 0:
                if activation is None:
                    raise ValueError("a constant neuron needs σ's exact value")
                if activation["kind"] in exact.RATIONAL_KINDS:
                    _add(gamma, d, exact.sigma(activation, betas[i]))
                else:  # σ(β) not rational (silu, gelu): kept formally, as the key u = 0
                    for r in range(dim):
                        constant[r] = symbolic.add(constant[r],
                                                   values.atom(activation["kind"], betas[i]),
                                                   d[r])
            continue
        lead = next(x for x in u if x != 0)
        alpha = lead if kind == "relu" else Fraction(1 if lead > 0 else -1)
        key = tuple(x / alpha for x in u) + ((betas[i] / alpha,) if biased else ())
        _add(gamma, d, a * betas[i])
        weight = b * abs(alpha) if kind == "relu" and b is not None else Fraction(1)
        _add(keys.setdefault(key, [Fraction(0)] * dim), d, weight)
    if activation is not None and activation["kind"] not in exact.RATIONAL_KINDS:
        _formal(constant, activation["kind"], keys)
    return (lam, {k: tuple(v) for k, v in keys.items() if any(v)},
            _rational(gamma, constant) if biased else None)


def _formal(constant: list[symbolic.Poly], kind: str, keys: dict[Vec, list[Fraction]]) -> None:
    """Move each term c·σ(β) of the constant (σ the block's own) to the formal key u = 0,
    β̄ = β (where constant neurons go), leaving the rest in `constant`."""
    dim = len(constant)
    for r in range(dim):
        for monomial, c in list(constant[r].items()):
            if len(monomial) == 1 and monomial[0][1] == 1 and monomial[0][0][0] == kind:
                beta = monomial[0][0][1]
                keys.setdefault((Fraction(0),) * dim + (beta,), [Fraction(0)] * dim)[r] += c
                del constant[r][monomial]


def _rational(gamma: list[Fraction], constant: list[symbolic.Poly]) -> Vec:
    """γ + the constant, which must be rational once its σ(β) terms went to formal keys."""
    out = []
    for g, c in zip(gamma, constant, strict=True):
        value = symbolic.as_rational(c)
        if value is None:
            raise Invalid(f"the output bias {symbolic.text(c)} has terms other than "
                                   "σ(β) of the block's own σ")
        out.append(g + value)
    return tuple(out)


def constant_keys(keys: dict[Vec, Vec], dim: int) -> dict[Vec, Vec]:
    """The formal constant neurons of a §8.1 form: its keys with ū = 0."""
    return {k: v for k, v in keys.items() if not any(k[:dim])}


def constant(found: tuple[Rows, dict[Vec, Vec], Vec | None],
             activation: dict[str, Any]) -> list[symbolic.Poly]:
    """The constant of a biased form as values: γ + Σ v σ(β) over its formal keys ū = 0."""
    _, keys, gamma = found
    assert gamma is not None
    dim = len(gamma)
    out = [symbolic.rational(g) for g in gamma]
    for key, v in constant_keys(keys, dim).items():
        for r in range(dim):
            out[r] = symbolic.add(out[r], values.atom(activation["kind"], key[dim]), v[r])
    return out


def _add(acc: list[Fraction], d: Vec, weight: Fraction) -> None:
    for r in range(len(acc)):
        acc[r] += weight * d[r]


def family_of(activation: dict[str, Any]) -> tuple[str, Fraction, Fraction | None] | None:
    """The form family of σ: relu / analytic (O(a)+N) or linear (σ = az), re-proved."""
    from ..lemmas.relied import holds, odd_slope, ridge_family

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


def family(block: dict[str, Any]) -> tuple[str, Fraction, Fraction | None]:
    """The block's σ as O(a)+N or linear (`family_of`), or Invalid."""
    found = family_of(block["activation"])
    require(found is not None, f"{block['activation']['name']} is neither O(a)+N nor linear "
                               "(lemmas not re-proved)")
    assert found is not None
    return found


def same_forms(block: dict[str, Any], layers: list[dict[str, Any]], single: bool) -> None:
    """Each witness layer has the canonical form of the block's layer (with the block's S);
    `single`: the block has depth 1."""
    require(not single or block["depth"] == 1, "canonical forms decide depth 1 only")
    found = family(block)
    d, biased, act = block["dim"], bool(block.get("bias")), block["activation"]
    for mine, theirs in zip(block["layers"], layers, strict=True):
        want = form(found, d, exact.skip_rows(block), mine, biased, act)
        got = form(found, d, exact.zeros(d, d), theirs, biased, act)
        require(want == got, "the witness's canonical form differs from the block's")
