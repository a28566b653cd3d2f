"""The checker's docs/rules.md §8.2 (flip sets): biased depth-1 relu², gated O(a)+N and Og(c)
blocks at their own width, re-derived from the block and the activation's formula.

A witness must be the block with the neurons of J flipped (relu²: row of U, β_i, d_i; gated
O(a)+N: gate row, γ_i; Og(c): gate row, γ_i, d_i) and c′ = c + the flips' constant, and J
must solve the system: then P − B = −(Σ_J changes) − S x + (c′ − c) = 0 as polynomials (the
flip identity σ(−z) = z² − σ(z), σ(z) − 2az or 2c − σ(z), re-proved here). A refutation
needs every neuron alive and alone on its key (only-if of §8.2) and no J solving the system.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..kernel import linalg as exact
from ..kernel.contract import require
from ..kernel.linalg import Rows, Vec, q, whole
from ..lemmas import relied as lemmas
from . import subset

SECTION = "§8.2"



def rule(act: dict[str, Any]) -> tuple[str, Fraction, bool]:
    """(row of §8.2, a or c or 1, keys up to a factor?), every property re-proved."""
    if not act["gated"]:
        require(act["kind"] == "relu_pow" and int(act["power"]) == 2, "§8.2 covers relu^2 "
                                                                       "among ungated σ")
        # σ(z) + σ(−z) = z² is the flip identity; z|z|/2, homogeneous (H(2)), is the rest
        require(lemmas.holds(act, "Sq", 1) and lemmas.holds(act, "H", 2),
                "sigma(z) + sigma(-z) = z^2 and H(2) are not re-proved")
        return "relu^2", Fraction(1), True
    c = lemmas.value_at_zero(act)  # Og(c) at z = 0 forces c = σ(0)
    if c is not None and c != 0 and lemmas.holds(act, "OgN", c):
        return "Og(c)", c, False
    a = lemmas.odd_slope(act)
    require(a is not None and lemmas.holds(act, "N", a), "neither Og(c) nor O(a)+N is "
                                                         "re-proved for the gate function")
    assert a is not None
    scaled = lemmas.holds(act, "H", 1)
    # keys up to sign need the analytic even part to separate z from 2z (docs/rules.md §4, §8.1)
    require(scaled or lemmas.holds(act, "An"), "sigma is neither H(1) nor analytic")
    return "gated O(a)+N", a, scaled


def _neuron(layer: dict[str, Any], i: int) -> dict[str, Any]:
    out = {"u": exact.vec(layer["up"][i]), "beta": q(layer["up_bias"][i]),
           "d": tuple(q(row[i]) for row in layer["down"])}
    if "gate" in layer:
        out["g"], out["gamma"] = exact.vec(layer["gate"][i]), q(layer["gate_bias"][i])
    return out


def system(block: dict[str, Any], name: str, value: Fraction) -> tuple[list[Rows], Rows]:
    """Terms (one per neuron: d·d quadratic rows, then d linear rows) and target."""
    layer = block["layers"][0]
    d = block["dim"]
    skip = exact.skip_rows(block)
    terms = []
    for i in range(block["width"]):
        n = _neuron(layer, i)
        if name == "Og(c)":
            terms.append(exact.outer(n["d"], n["u"]))
            continue
        if name == "relu^2":
            quad = exact.outer(n["u"], n["u"])
            lin = exact.outer(n["d"], tuple(2 * n["beta"] * x for x in n["u"]))
        else:
            g, u = n["g"], n["u"]
            quad = tuple(tuple((g[r] * u[s] + g[s] * u[r]) / 2 for s in range(d))
                         for r in range(d))
            lin = exact.outer(n["d"], tuple(2 * value * (n["gamma"] * x + n["beta"] * y)
                                            for x, y in zip(u, g, strict=True)))
        terms.append(tuple(tuple(dr * x for x in row) for dr in n["d"] for row in quad) + lin)
    if name == "Og(c)":
        return terms, exact.combine(exact.zeros(d, d), skip, -1 / (2 * value))
    return terms, exact.zeros(d * d, d) + exact.combine(exact.zeros(d, d), skip, Fraction(-1))


def _common(block: dict[str, Any], cert: dict[str, Any]) -> tuple[str, Fraction, bool]:
    require(cert.get("section") == SECTION, "not a §8.2 certificate")
    require(block["depth"] == 1 and block["layers"] is not None, "§8.2: concrete, depth 1")
    found = rule(block["activation"])
    require(cert["rule"] == found[0] and q(cert["value"]) == found[1],
            "the stored rule or its constant differs from the re-derived one")
    return found


def witness(block: dict[str, Any], plain: dict[str, Any], cert: dict[str, Any]) -> None:
    name, value, _ = _common(block, cert)
    m = block["width"]
    flips = {whole(j) - 1 for j in cert["J"]}
    require(all(0 <= j < m for j in flips) and len(flips) == len(cert["J"]), "J is not a set "
                                                                             "of neurons")
    require(len(plain["up"]) == m, "the flipped block has the block's own width")
    mine = block["layers"][0]
    flip_down = name != "gated O(a)+N"
    shift = [Fraction(0)] * block["dim"]
    for i in range(m):
        n, p = _neuron(mine, i), _neuron(plain, i)
        s = -1 if i in flips else 1

        def same(x: Vec, s: int = s) -> Vec:
            return tuple(s * v for v in x)

        if name == "relu^2":
            require(p["u"] == same(n["u"]) and p["beta"] == s * n["beta"], f"up of {i + 1}")
        else:
            require(p["u"] == n["u"] and p["beta"] == n["beta"], f"up of {i + 1}")
            require(p["g"] == same(n["g"]) and p["gamma"] == s * n["gamma"], f"gate of {i + 1}")
        require(p["d"] == (same(n["d"]) if flip_down else n["d"]), f"down column {i + 1}")
        if i in flips:  # the constant of this flip's change (relu²: β², gated: 2aγβ, glu: 2cβ)
            factor = {"relu^2": n["beta"] ** 2, "Og(c)": 2 * value * n["beta"]}.get(
                name, 2 * value * n.get("gamma", Fraction(0)) * n["beta"])
            shift = [x + factor * dr for x, dr in zip(shift, n["d"], strict=True)]
    want = tuple(q(c) + x for c, x in zip(mine["down_bias"], shift, strict=True))
    require(exact.vec(plain["down_bias"]) == want, "c' is not c plus the flips' constant")
    terms, target = system(block, name, value)
    total = exact.zeros(len(target), len(target[0]))
    for i in flips:
        total = exact.combine(total, terms[i], Fraction(1))
    require(total == target, "J does not make the flips' change equal -S x + constant")


def _key(v: Vec, scaled: bool) -> Vec:
    lead = next(x for x in v if x != 0)
    if scaled:
        return tuple(x / lead for x in v)
    return v if lead > 0 else tuple(-x for x in v)


def alive_and_alone(block: dict[str, Any], scaled: bool) -> None:
    seen: set[Vec] = set()
    for i in range(block["width"]):
        n = _neuron(block["layers"][0], i)
        require(any(n["d"]), f"neuron {i + 1} has a zero down column")
        if "g" in n:
            require(any(n["g"]) and (any(n["u"]) or n["beta"] != 0), f"neuron {i + 1} is dead")
            key = _key(n["g"] + (n["gamma"],), scaled)
        else:
            require(any(n["u"]), f"neuron {i + 1} is a constant")
            key = _key(n["u"] + (n["beta"],), scaled)
        require(key not in seen, f"neuron {i + 1} shares its key: §8.2's only-if fails")
        seen.add(key)


def refutation(block: dict[str, Any], width: int, cert: dict[str, Any]) -> None:
    """A §8.2 flip-set refutation (a separating functional or subset search of the flip
    system, whose terms and target are derived here): not absorbable at `width` ≤ m."""
    name, value, scaled = _common(block, cert)
    # at the own width m, hence at every w ≤ m (a witness at w is one at m, zero neurons
    # added); the stored width is m whatever w the claim asks
    require(width <= block["width"] == whole(cert["width"]), "§8.2 refutes the own width "
                                                          "and narrower ones only")
    alive_and_alone(block, scaled)
    terms, target = system(block, name, value)
    subset.refutation(terms, target, cert)
