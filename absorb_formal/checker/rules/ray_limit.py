"""The checker's side of the pre-norm rules (docs/rules.md, "Pre-norm: ray limit" and
"Pre-norm: gated Jacobian"): everything is re-derived from the embedded block, its norm
clause and the weights the checker read itself; the certificate gives only a point x0 and
a direction w (ray limit), or nothing at all (gated Jacobian).

Ray limit. The sublayer is `R(x) = S x + G(x)` with `G = F ∘ N` (pre-norm) or
`G = N₂ ∘ F ∘ N` (sandwich). Along rays `G(tx) → G∞(x) = G with N's ε set to 0`; if `R`
equals a plain stack, `G∞` is constant on an open cone near every point where it is C¹
(Theorem 10.2). So a point x0 of Ω and a direction w with `∇G∞(x0)·w ≠ 0` show that no
plain stack, of any width or depth, equals the sublayer. The checker:
  - computes y0 = Πx0 (LayerNorm) or x0 (RMSNorm) and r = ‖y0‖²/d > 0 (x0 in Ω);
  - requires w ⊥ y0 (and w ⊥ 1 for LayerNorm), so that J_{N∞}(x0) w = γ ⊙ w / √r;
  - computes the pre-activations z = P/√r + Q exactly (P = U(γ ⊙ y0), Q = Uβ + b);
  - for relu and leaky_relu: the signs of p + q√r exactly (each non-zero, so the pattern is
    constant near x0), and the derivative D diag(σ'(z)) U(γ ⊙ w) as a rational vector;
  - otherwise (gelu, gelu_tanh, silu, relu^k, and the gated swiglu, geglu, reglu): the
    derivative in Arb ball arithmetic (python-flint), which must exclude 0 at the
    certificate's output coordinate(s); a ball that contains 0 proves nothing;
  - sandwich: N₂ (ε₂ > 0, γ₂ without zeros) has an invertible Jacobian (RMSNorm) or one
    whose kernel is span(1) (LayerNorm, so two coordinates must differ).

Gated Jacobian. Gated σ with σ(0) = 0, RMSNorm before (and after) the FFN, no biases,
ε > 0: `G(x) = O(‖x‖²)` near 0, like every bias-free plain gated stack, while `R` has
Jacobian S ≠ 0 there (T4).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ..kernel.contract import Invalid, Kind, require
from ..kernel.integers import integers
from ..kernel.linalg import q, skip_is_zero, skip_rows, vec

KIND, GATED_KIND = Kind.RAY_LIMIT, Kind.GATED_PRE_NORM_JACOBIAN  # as decide/ray_limit.py names them
PRECISIONS = (128, 256, 1024)  # bits of Arb precision tried in turn
# σ by the checker's activation kinds: ungated, and the gates of gated blocks.
EXACT_PATTERN = ("relu", "leaky_relu")
SMOOTH = ("gelu", "gelu_tanh", "silu", "relu_pow")



# ---- exact integer views of the weights -----------------------------------------------------

def _as_ints(v: Sequence[Fraction]) -> tuple[np.ndarray, int]:
    den = math.lcm(*(x.denominator for x in v)) if v else 1
    out = np.empty(len(v), dtype=object)
    out[:] = [x.numerator * (den // x.denominator) for x in v]
    return out, den


def matvec(matrix: tuple[np.ndarray, int], v: Sequence[Fraction]) -> list[Fraction]:
    """M v exactly, M given as (ints, denominator)."""
    ints, den = matrix
    x, xden = _as_ints(v)
    return [Fraction(int(n), den * xden) for n in ints.dot(x)]


# ---- the norm, its limit and its Jacobian ---------------------------------------------------

def norm_parts(block: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    norm = block["norm"]
    return norm["placement"], norm["norms"]


def gamma(part: dict[str, Any], d: int) -> list[Fraction]:
    return [Fraction(1)] * d if part["gamma"] is None else list(vec(part["gamma"]))


def beta(part: dict[str, Any], d: int) -> list[Fraction]:
    return [Fraction(0)] * d if part.get("beta") is None else list(vec(part["beta"]))


def centred(part: dict[str, Any], x: Sequence[Fraction]) -> list[Fraction]:
    """Πx for LayerNorm, x for RMSNorm."""
    if part["kind"] == "rmsnorm":
        return list(x)
    mean = sum(x, Fraction(0)) / len(x)
    return [v - mean for v in x]


def usable(part: dict[str, Any], d: int) -> None:
    """ε > 0 and γ without a zero entry: the cases Theorem 10.2's corollary covers here."""
    require(q(part["eps"]) > 0, "eps = 0: not covered (docs/rules.md, normalised sublayers)")
    require(all(g != 0 for g in gamma(part, d)), "γ has a zero entry: not covered")


# ---- σ and σ' on balls ----------------------------------------------------------------------

def _sigma_kind(act: dict[str, Any]) -> str:
    kind = act["kind"]
    require(act["gated"] or kind in EXACT_PATTERN + SMOOTH,
            f"no ray-limit rule for σ = {act['name']} (docs/rules.md: relu, leaky_relu, relu^k, "
            "gelu, gelu_tanh, silu, swiglu, geglu, reglu)")
    return kind


def ball_sigma(kind: str, z: Any, act: dict[str, Any]) -> Any:
    from flint import arb

    if kind == "relu":
        return z if z > 0 else arb(0)
    if kind == "leaky_relu":
        return z if z > 0 else arb(_param(act)) * z
    if kind == "relu_pow":
        return _positive_part_power(z, int(act["power"]))
    if kind == "gelu":
        return z * (1 + (z / arb(2).sqrt()).erf()) / 2
    if kind == "gelu_tanh":
        k = (arb(2) / arb.pi()).sqrt()
        return z * (1 + (k * (z + _arb(Fraction(44715, 10 ** 6)) * z * z * z)).tanh()) / 2
    if kind == "silu":
        return z / (1 + (-z).exp())
    raise Invalid(f"no ray-limit rule for σ = {kind}")


def ball_derivative(kind: str, z: Any, act: dict[str, Any]) -> Any:
    """σ'(z) on a ball; a kink (relu, leaky_relu) must be excluded by the caller."""
    from flint import arb

    if kind == "relu":
        return arb(1) if z > 0 else arb(0)
    if kind == "leaky_relu":
        return arb(1) if z > 0 else arb(_param(act))
    if kind == "relu_pow":
        k = int(act["power"])
        return k * _positive_part_power(z, k - 1)
    if kind == "gelu":
        phi = (-(z * z) / 2).exp() / (2 * arb.pi()).sqrt()
        return (1 + (z / arb(2).sqrt()).erf()) / 2 + z * phi
    if kind == "gelu_tanh":
        k = (arb(2) / arb.pi()).sqrt()
        c = _arb(Fraction(44715, 10 ** 6))
        t = (k * (z + c * z * z * z)).tanh()
        return (1 + t) / 2 + z * (1 - t * t) * k * (1 + 3 * c * z * z) / 2
    if kind == "silu":
        s = 1 / (1 + (-z).exp())
        return s * (1 + z * (1 - s))
    raise Invalid(f"no ray-limit rule for σ = {kind}")


def _positive_part_power(z: Any, k: int) -> Any:
    """max(z, 0)^k on a ball (k >= 1), by products (arb's ** gives nan on a ball around 0)."""
    from flint import arb

    def power(base: Any) -> Any:
        out = arb(1)
        for _ in range(k):
            out *= base
        return out

    if z < 0:
        return arb(0)
    if z > 0:
        return power(z)
    return arb(0).union(power(arb(z.abs_upper())))  # a ball around 0: [0, |z|^k]


def _param(act: dict[str, Any]) -> Fraction:
    return q(act["param"])


def _arb(x: Fraction) -> Any:
    from flint import arb, fmpq

    return arb(fmpq(x.numerator, x.denominator))


def sign_root(p: Fraction, c: Fraction, r: Fraction) -> int:
    """The sign of p + c·√r (r > 0), exactly."""
    if p >= 0 and c >= 0:
        return 0 if p == 0 and c == 0 else 1
    if p <= 0 and c <= 0:
        return -1
    gap = p * p - c * c * r  # p, c of opposite signs: compare p² with c²r
    if gap == 0:
        return 0
    return (1 if p > 0 else -1) * (1 if gap > 0 else -1)


# ---- the ray-limit derivative ----------------------------------------------------------------

Weights = dict[str, Any]  # "up", "down", "gate", biases: embedded strings or files' arrays


def derivative(block: dict[str, Any], layer: Weights, x0: Sequence[Fraction],
               w: Sequence[Fraction]) -> Callable[[int], Any]:
    """The directional derivative ∇(F ∘ N∞)(x0)·w, times √r, coordinate by coordinate: a
    function i ↦ its i-th entry (a Fraction for relu-like σ, else an Arb ball at the current
    precision). Checks x0 ∈ Ω, w's orthogonality and, for relu-like σ, the exact pattern."""
    d = block["dim"]
    act = block["activation"]
    placement, parts = norm_parts(block)
    first = parts[0]
    usable(first, d)
    require(len(x0) == d and len(w) == d, f"x0 and w need {d} entries")
    y0 = centred(first, x0)
    r = sum((v * v for v in y0), Fraction(0)) / d
    require(r > 0, "x0 is not in Ω (Πx0 = 0 for LayerNorm, x0 = 0 for RMSNorm)")
    require(sum((a * b for a, b in zip(w, y0, strict=True)), Fraction(0)) == 0,
            "w is not orthogonal to y0 (the J_N∞ formula needs it)")
    if first["kind"] == "layernorm":
        require(sum(w, Fraction(0)) == 0, "w is not orthogonal to 1 (LayerNorm)")
    g = gamma(first, d)
    scaled_y, scaled_w = [a * b for a, b in zip(g, y0, strict=True)], \
        [a * b for a, b in zip(g, w, strict=True)]
    b0 = beta(first, d)
    gated = act["gated"]
    names = ("gate", "up") if gated else ("up",)
    matrices = {n: integers(layer[n]) for n in (*names, "down")}
    m = block["width"]
    biases = {n: (list(vec(layer[f"{n}_bias"])) if isinstance(layer.get(f"{n}_bias"), list)
                  else _vector(layer.get(f"{n}_bias"), m)) for n in names}
    pre: dict[str, tuple[list[Fraction], list[Fraction], list[Fraction]]] = {}
    for n in names:
        p = matvec(matrices[n], scaled_y)
        c = [a + b for a, b in zip(matvec(matrices[n], b0), biases[n], strict=True)]
        pre[n] = (p, c, matvec(matrices[n], scaled_w))  # z = p/√r + c; V = U(γ ⊙ w)
    kind = _sigma_kind(act)
    down, dden = matrices["down"]

    if not gated and kind in EXACT_PATTERN:
        p, c, v = pre["up"]
        slopes = []
        for j in range(m):
            # sign(p/√r + c) = sign(p + c·√r) · sign(√r) = sign(p + c√r)
            s = sign_root(p[j], c[j], r)
            if s == 0:  # at its kink: allowed only where its pre-activation never moves
                require(_constant_neuron(matrices["up"], j, g, first["kind"]),
                        f"neuron {j + 1} is at its kink at N∞(x0): the pattern is not "
                        "constant near x0")
                slopes.append(Fraction(0))  # a constant contribution: no derivative
                continue
            slopes.append(Fraction(1) if s > 0 else (
                Fraction(0) if kind == "relu" else _param(act)))
        terms = [a * b for a, b in zip(slopes, v, strict=True)]

        def exact_entry(i: int) -> Fraction:
            return sum((Fraction(int(down[i, j])) * terms[j] for j in range(m)
                        if terms[j] != 0), Fraction(0)) / dden

        return exact_entry

    from flint import arb, ctx

    cache: dict[int, list[Any]] = {}  # per precision: each neuron's term, shared by entries

    def ball_terms() -> list[Any]:
        if ctx.prec in cache:
            return cache[ctx.prec]
        root = _arb(r).sqrt()
        terms: list[Any] = []
        if gated:
            gate_kind = {"silu": "silu", "gelu": "gelu", "relu": "relu"}.get(act["kind"])
            require(gate_kind is not None, f"no ray-limit rule for gated σ = {act['kind']}")
            gp, gc, gv = pre["gate"]
            up_p, up_c, up_v = pre["up"]
            for j in range(m):
                zg = _arb(gp[j]) / root + _arb(gc[j])
                zu = _arb(up_p[j]) / root + _arb(up_c[j])
                if gate_kind == "relu":
                    require(not zg.contains(0), f"neuron {j + 1}'s gate is not shown away "
                                                "from its kink")
                terms.append(ball_derivative(gate_kind, zg, act) * _arb(gv[j]) * zu
                             + ball_sigma(gate_kind, zg, act) * _arb(up_v[j]))
        else:
            p, c, v = pre["up"]
            for j in range(m):
                terms.append(arb(0) if v[j] == 0 else
                             ball_derivative(kind, _arb(p[j]) / root + _arb(c[j]), act)
                             * _arb(v[j]))
        cache[ctx.prec] = terms
        return terms

    def ball_entry(i: int) -> Any:
        terms = ball_terms()
        total = arb(0)
        for j in range(m):
            dij = int(down[i, j])
            if dij != 0:
                total += dij * terms[j]
        return total / dden

    return ball_entry


def _constant_neuron(up: tuple[np.ndarray, int], j: int, g: list[Fraction], kind: str) -> bool:
    """Is neuron j's pre-activation u_j·N(x) + b_j the same for every x? For RMSNorm iff
    u_j ⊙ γ = 0; for LayerNorm iff u_j ⊙ γ is a multiple of 1 (Π removes it)."""
    ints, _ = up
    row = [int(v) * gj for v, gj in zip(ints[j], g, strict=True)]
    return all(v == 0 for v in row) if kind == "rmsnorm" else all(v == row[0] for v in row)


def _vector(value: Any, m: int) -> list[Fraction]:
    if value is None:
        return [Fraction(0)] * m
    ints, den = integers(value)
    flat = np.asarray(ints).ravel().tolist()
    require(len(flat) == m, "a bias has the wrong length")
    return [Fraction(int(n), den) for n in flat]


def _shown_nonzero(entry: Callable[[int], Any], d: int, sandwich_layernorm: bool) -> bool:
    """Some entry of the derivative is non-zero (exactly, or by a ball that excludes 0);
    after a LayerNorm N₂, some entry differs from the first (N₂'s Jacobian kills exactly
    span(1)). Entries are tried in order, so nothing about which one is taken on trust."""
    def shows(value: Any) -> bool:
        return value != 0 if isinstance(value, Fraction) else not value.contains(0)

    if sandwich_layernorm:
        first = entry(0)
        return any(shows(entry(i) - first) for i in range(1, d))
    return any(shows(entry(i)) for i in range(d))


def check(block: dict[str, Any], layer: Weights, cert: dict[str, Any]) -> None:
    """A ray-limit certificate: the point x0 and the direction w; the checker finds an
    entry of the derivative it shows non-zero itself (two that differ after a LayerNorm
    N₂)."""
    require(block["depth"] == 1, "the ray limit is checked for depth 1")
    placement, parts = norm_parts(block)
    require(placement in ("pre", "sandwich"), "the ray limit is for pre- and sandwich-norm")
    d = block["dim"]
    x0, w = list(vec(cert["x0"])), list(vec(cert["w"]))
    second_ln = placement == "sandwich" and parts[1]["kind"] == "layernorm"
    if placement == "sandwich":
        usable(parts[1], d)
    entry = derivative(block, layer, x0, w)
    from flint import ctx

    saved = ctx.prec
    try:
        for bits in PRECISIONS:
            ctx.prec = bits
            if _shown_nonzero(entry, d, second_ln):
                break
        else:
            raise Invalid("no entry of the derivative is shown non-zero (every enclosure "
                          "contains 0): nothing is proved")
    finally:
        ctx.prec = saved


def keeps_norm_refuted(block: dict[str, Any], x0: Sequence[Fraction]) -> bool:
    """S x0 ≠ 0 at a point x0 of Ω: then no continuous P has P(N(x)) ≡ S x + F(N(x))
    (P(N(tx)) stays bounded, S tx does not): keeping the norm does not help either."""
    return any(sum((a * b for a, b in zip(row, x0, strict=True)), Fraction(0)) != 0
               for row in skip_rows(block))


def check_gated(block: dict[str, Any], cert: dict[str, Any]) -> None:
    """The gated pre-norm rule: its preconditions, all re-derived (no field but `kind`)."""
    act = block["activation"]
    require(act["gated"] and act["kind"] in ("silu", "gelu", "relu"),
            "the gated pre-norm rule needs a gated σ with σ(0) = 0 (swiglu, geglu, reglu)")
    require(not block.get("bias"), "the gated pre-norm rule needs a block without biases")
    placement, parts = norm_parts(block)
    require(placement in ("pre", "sandwich"), "the gated rule is for pre- and sandwich-norm")
    for part in parts:
        require(part["kind"] == "rmsnorm" and q(part["eps"]) > 0,
                "the gated rule needs RMSNorm with ε > 0 (N(0) = 0, smooth at 0)")
    require(not skip_is_zero(block), "S = 0: the sublayer is a plain gated block")
    require(block["depth"] == 1, "a norm clause is on a block of depth 1")
