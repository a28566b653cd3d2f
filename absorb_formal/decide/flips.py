"""Flip sets (docs/rules.md §8.2): biased depth-1 blocks at their own width, for relu², gated
σ = a·z + e(z) with e even and not a polynomial (swiglu, geglu, reglu), and GLU (Og(c)).

When every neuron is alive and alone on its key, a plain block of the same width puts one
neuron on each key and may only *flip* some of them; a flip changes B by a polynomial, so B
is absorbable at width m iff some index set J makes the total change `−S x + constant`:

- relu² (σ(−z) = z² − σ(z); flip row i of U, β_i and d_i): change `−d_i ℓ_i(x)²`, so
  `Σ_J d_i ⊗ u_i u_iᵀ = 0` and `2 Σ_J β_i d_i u_iᵀ = −S`; `c′ = c + Σ_J β_i² d_i`;
- gated O(a)+N (σ(−z) = σ(z) − 2az; flip gate row i and γ_i): change `−2a d_i z_i w_i`, so
  `Σ_J d_i ⊗ sym(g_i u_iᵀ) = 0` and `2a Σ_J d_i (γ_i u_i + β_i g_i)ᵀ = −S`;
  `c′ = c + 2a Σ_J γ_i β_i d_i`;
- Og(c) (σ(−z) = 2c − σ(z); flip gate row i, γ_i and d_i): change `−2c d_i w_i`, so
  `Σ_J d_i u_iᵀ = −S/(2c)`; `c′ = c_out + 2c Σ_J β_i d_i`.

Both conditions of a row are stacked into one 0/1 system for `subset.solve` (each term is
the d·d quadratic rows over the d linear rows). The witness (the flipped block) is sound for
any J that solves the system; the refutation also needs the keys distinct and alive.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

from ..certify import widths as cert
from ..model import linalg
from ..model.blocks import Block, Layer, Matrix
from . import subset
from .decision import Decision, undecided
from .lemmas import properties

METHOD = "§8.2 flip sets"


@dataclass(frozen=True)
class Rule:
    """Which row of §8.2's table: name, its constant (a, c; relu²: 1), and whether keys are
    taken up to a non-zero factor (homogeneous non-polynomial part) or up to sign."""

    name: str
    value: Fraction
    scaled_keys: bool


def rule_for(block: Block) -> Rule | None:
    """The §8.2 row for the block's activation, from proved properties (None: not covered)."""
    act = block.activation
    if not act.gated:
        if act.scalar.kind == "relu_pow" and act.scalar.power == 2:
            return Rule("relu^2", Fraction(1), True)
        return None
    props = properties(act)
    if props.gated_const is not None and props.gated_odd_part:
        return Rule("Og(c)", props.gated_const, False)
    if props.odd_linear is not None and props.nonpoly_even:
        # e = σ − az is homogeneous of degree 1 exactly when σ is (reglu): keys up to a
        # factor; otherwise keys up to sign, separated by an analytic e (docs/rules.md §4, §8.1)
        scaled = props.homogeneous == 1
        if scaled or props.analytic:
            return Rule("gated O(a)+N", props.odd_linear, scaled)
    return None


def _key(vector: tuple[Fraction, ...], scaled: bool) -> tuple[Fraction, ...]:
    """The key's representative: first non-zero entry 1 (up to a factor) or positive (sign)."""
    lead = next(x for x in vector if x != 0)
    if scaled:
        return tuple(x / lead for x in vector)
    return vector if lead > 0 else tuple(-x for x in vector)


def generic_reason(block: Block, rule: Rule) -> str:
    """Why some neuron is dead or shares its key ("" when all are alive and alone, §8.2)."""
    assert block.layers is not None
    layer = block.layers[0]
    assert layer.up_bias is not None
    seen: set[tuple[Fraction, ...]] = set()
    for i in range(block.width):
        u, beta = layer.up.rows[i], layer.up_bias[i]
        if not any(layer.down.column(i)):
            return f"neuron {i + 1} has a zero down column"
        if layer.gate is None:
            if not any(u):
                return f"neuron {i + 1} has a zero up row (a constant)"
            key = _key(u + (beta,), rule.scaled_keys)
        else:
            assert layer.gate_bias is not None
            if not any(layer.gate.rows[i]):
                return f"neuron {i + 1} has a zero gate row (a linear neuron)"
            if not any(u) and beta == 0:
                return f"neuron {i + 1} has a zero up row and up bias"
            key = _key(layer.gate.rows[i] + (layer.gate_bias[i],), rule.scaled_keys)
        if key in seen:
            return f"neuron {i + 1} shares its key with another neuron"
        seen.add(key)
    return ""


def _sym(a: tuple[Fraction, ...], b: tuple[Fraction, ...]) -> linalg.Rows:
    return tuple(tuple((a[r] * b[s] + a[s] * b[r]) / 2 for s in range(len(a)))
                 for r in range(len(a)))


def _stacked(d_i: tuple[Fraction, ...], quad: linalg.Rows, lin: linalg.Rows) -> linalg.Rows:
    """One term of the stacked system: the d blocks d_{i,r}·quad, then the linear rows."""
    rows = [tuple(d_r * x for x in row) for d_r in d_i for row in quad]
    return tuple(rows) + tuple(lin)


def system(block: Block, rule: Rule) -> tuple[list[linalg.Rows], linalg.Rows]:
    """The terms (one per neuron) and the target of the rule's subset-sum system."""
    assert block.layers is not None
    layer = block.layers[0]
    assert layer.up_bias is not None
    dim = block.dim
    skip = block.skip.rows()
    terms = []
    for i in range(block.width):
        d_i, u, beta = layer.down.column(i), layer.up.rows[i], layer.up_bias[i]
        if rule.name == "Og(c)":
            terms.append(linalg.outer(d_i, u))
            continue
        if rule.name == "relu^2":
            quad, lin = linalg.outer(u, u), linalg.outer(d_i, u, 2 * beta)
        else:
            assert layer.gate is not None and layer.gate_bias is not None
            g, gamma = layer.gate.rows[i], layer.gate_bias[i]
            quad = _sym(g, u)
            lin = linalg.outer(d_i, tuple(gamma * x + beta * y for x, y in zip(u, g,
                                                                          strict=True)),
                               2 * rule.value)
        terms.append(_stacked(d_i, quad, lin))
    if rule.name == "Og(c)":
        return terms, tuple(tuple(-x / (2 * rule.value) for x in row) for row in skip)
    return terms, linalg.zeros(dim * dim, dim) + tuple(tuple(-x for x in row) for row in skip)


def constant_shift(layer: Layer, rule: Rule, flips: set[int]) -> tuple[Fraction, ...]:
    """c′ − c: the constant part of the flips' total change, negated (docs/rules.md §8.2)."""
    assert layer.up_bias is not None
    shift = [Fraction(0)] * layer.down.shape[0]
    for i in flips:
        beta = layer.up_bias[i]
        if rule.name == "relu^2":
            factor = beta * beta
        elif rule.name == "Og(c)":
            factor = 2 * rule.value * beta
        else:
            assert layer.gate_bias is not None
            factor = 2 * rule.value * layer.gate_bias[i] * beta
        for r, d_ri in enumerate(layer.down.exact_column(i)):
            shift[r] += factor * d_ri
    return tuple(shift)


def flipped(layer: Layer, rule: Rule, flips: set[int]) -> Layer:
    """The plain block: neurons in `flips` negated as the rule says, c′ matched."""
    def neg_rows(m: Matrix) -> Matrix:
        return Matrix([tuple(-x for x in r) if i in flips else r for i, r in enumerate(m.rows)])

    def neg(v: tuple[Fraction, ...] | None) -> tuple[Fraction, ...] | None:
        return None if v is None else tuple(-x if i in flips else x for i, x in enumerate(v))

    assert layer.down_bias is not None
    keep_down = rule.name == "gated O(a)+N"
    down = layer.down if keep_down else Matrix(
        [tuple(-x if j in flips else x for j, x in enumerate(row)) for row in layer.down.rows])
    c_out = tuple(c + s for c, s in zip(layer.down_bias, constant_shift(layer, rule, flips),
                                        strict=True))
    if rule.name == "relu^2":
        return Layer(neg_rows(layer.up), down, None, neg(layer.up_bias), None, c_out)
    assert layer.gate is not None
    return Layer(layer.up, down, neg_rows(layer.gate), layer.up_bias, neg(layer.gate_bias),
                 c_out)


def decide(block: Block, size: int) -> Decision | None:
    """§8.2 at width `size` ≥ m (a witness at m is one at any larger width), and below m when
    m is refuted (a witness at w < m would be one at m, zero neurons added: the refutation
    at m, which states width m, refutes every narrower width); None when the activation is
    not a §8.2 row, so the caller keeps its own answer."""
    rule = rule_for(block)
    if rule is None or block.layers is None:
        return None
    if block.depth != 1:
        return undecided("§8.2 flip sets decide biased blocks of depth 1 only")
    if size < block.width:
        own = decide(block, block.width)
        if own is not None and own.absorbable is False:
            return replace(own, detail=f"not absorbable at its width {block.width}, hence "
                                       f"at none narrower")
        return undecided(f"§8.2 decides biased {block.activation} blocks at their own width; "
                         "narrower widths need the generic engine")
    why = generic_reason(block, rule)
    if why:
        return undecided(f"§8.2 needs every neuron alive and alone on its key ({why})")
    terms, target = system(block, rule)
    answer = subset.solve(terms, target)
    if answer.status == "unknown":
        return undecided(answer.reason)
    if answer.status == "none":
        if size != block.width:
            return undecided("§8.2's refutation holds at the block's own width only")
        return Decision(False, METHOD,
                        cert.flip_refutation(answer.certificate, rule.name, rule.value, size),
                        detail="no index set J")
    flips = set(answer.subset or ())
    layer = flipped(block.layers[0], rule, flips)
    chosen = sorted(i + 1 for i in flips)
    return Decision(True, METHOD,
                    cert.flip_witness(layer, block.width, rule.name, rule.value, chosen),
                    witness=(layer,), detail="J = {" + ", ".join(map(str, chosen)) + "}")
