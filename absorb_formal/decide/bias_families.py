"""docs/rules.md §8.3: families with biases at depth 1, S ≠ 0, that no never-rule covers.

- relu family (any d), gelu family: never if m + w < 2 rank S; sometimes if rank S ≤ m ≤ w;
  generically not at w = m; always at m + 2 rank S (families.spare_pairs).
- relu²: never if m + w < 2 rank S; sometimes if 2 rank S ≤ m ≤ w; generically not at w = m;
  always at m + 4 rank S.
- square (degree-2 poly): never if m + w < rank S; always at m + 2 rank S; generically: no claim.
- poly (degree ≥ 3): never if m + w < rank S; nothing else.
- bilinear: never if m + w < rank S; always at m + rank S; generically: no claim.
- swiglu, geglu, reglu, glu: never if m + w < rank S; sometimes if rank S ≤ m ≤ w;
  generically not at w = m; always at m + rank S.

The relu² and gated rows' "sometimes" and "always at width" rules carry an example: a member
built as §8.3 says (flip_member) with the witness §8.2's flip sets find for it.

At w = m the never column is the table's (m < rank S; 2m < rank S). Everything else:
`unknown` (the generic engine's, for small sizes). The checker re-derives each rule's
preconditions (checker/dispatch.py `_biased_rule`).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

from ..certify import bodies as cert
from ..model import linalg
from ..model.activations import Activation
from ..model.blocks import Block, Layer, Matrix
from . import flips
from .canonical import ridge
from .family_facts import ALWAYS, NEVER, Facts, attach_example, too_big_for_example, with_example

GATED_KINDS = ("silu", "gelu", "relu", "sigmoid")  # swiglu, geglu, reglu, glu
GAMMA = 1  # gate bias of a linear neuron: σ(1) ≠ 0 for every gated σ of the table


def row(activation: Activation) -> str | None:
    """The row of §8.3's table σ belongs to (None: not in the table)."""
    kind = activation.scalar.kind
    if activation.gated:
        return "gated" if kind in GATED_KINDS else "bilinear" if kind == "identity" else None
    if ridge(activation) is not None:
        return "ridge"
    if kind == "relu_pow" and activation.scalar.power == 2:
        return "relu2"
    if kind == "poly":
        degree = len(activation.scalar.coeffs or ()) - 1  # trailing zeros are trimmed
        return "square" if degree == 2 else "poly" if degree > 2 else None
    return None


def _rule(name: str, r: int, size: int, argument: str, **extra: Any) -> dict[str, Any]:
    return cert.rule(name, size, argument, rank=r, **extra)


def table(block: Block, size: int, r: int, out: Facts) -> None:
    found = row(block.activation)
    if found is None or r == 0:
        return
    m = block.width
    if found in ("square", "poly", "bilinear"):
        out.reason = (f"docs/rules.md §8.3 makes no claim here for {block.activation} families "
                      "with biases (no keys: a tensor-rank question; the generic engine's for "
                      "small sizes)")
    need = 2 * r if found in ("ridge", "relu2") else r
    if m + size < need:
        _never(out, _rule("§8.3 rank of S", r, size,
                          "if P absorbs B, P - (B - Sx - c) = Sx + const is a plain block of "
                          "width m + w, so im S lies in the span of its m + w output columns; "
                          "for the relu families and relu² kinks cancel key by key, so each "
                          "key carries two of them"))
        return
    _always(found, block, size, r, out)
    if size >= m:
        _sometimes(found, block, size, r, out)
    if size == m and found in ("ridge", "relu2", "gated"):
        generic = _rule("§8.3 genericity", r, size,
                        "generic weights put every neuron alive and alone on its key; a plain "
                        "block of width m then flips an index set J (§8.2), each J a proper "
                        "algebraic condition since S != 0")
        out.set("generically not", True, "§8.3 genericity", generic)
        out.set("always", False, "§8.3 genericity", generic)


def _never(out: Facts, rule: dict[str, Any]) -> None:
    out.set_all(NEVER, "§8.3 rank of S", rule)


def _always(found: str, block: Block, size: int, r: int, out: Facts) -> None:
    m = block.width
    if found == "relu2" and size >= m + 4 * r:
        rule = _rule("§8.3 relu^2 pairs", r, size,
                     "per rank-one term p q^T of S four neurons: (q.x)^2 = relu2(q.x) + "
                     "relu2(-q.x) and q.x = ((q.x + 1)^2 - (q.x - 1)^2)/4; constants go to c'")
    elif found == "square" and size >= m + 2 * r:
        rule = _rule("§8.3 square pairs", r, size,
                     "sigma(q.x + 1) - sigma(q.x - 1) = 2 c1 + 4 c2 q.x for sigma = c0 + c1 z "
                     "+ c2 z^2: two neurons per rank-one term of S; constants go to c'")
    elif found in ("gated", "bilinear") and size >= m + r:
        rule = _rule("§8.3 linear neurons", r, size,
                     "gate row 0 with gate bias gamma gives sigma(gamma)(u.x + beta), a linear "
                     "neuron as sigma(gamma) != 0: one per rank-one term of S", gamma=str(GAMMA))
    else:
        return
    rule = _flip_example(found, block, size, rule)
    out.set_all(ALWAYS, rule["rule"], rule)


def _sometimes(found: str, block: Block, size: int, r: int, out: Facts) -> None:
    m = block.width
    if found == "ridge" and r <= m:
        rule = with_example(block, size, _rule(
            "§8.3 subset condition", r, size,
            "members with zero biases and sum_{i in J} d_i u_i^T = -S/(2a) are absorbable "
            "(§4), and a bias-free plain block is a biased one with zero biases"), "sometimes")
    elif found == "relu2" and 2 * r <= m:
        rule = _rule("§8.3 relu^2 flips", r, size,
                     "per rank-one term p q^T of S the member has neurons -p/4 relu2(q.x + 1) "
                     "and p/4 relu2(q.x - 1); flipping both (relu2(z) = z^2 - relu2(-z)) "
                     "changes B by -p q^T x + const, cancelling S")
    elif found == "gated" and r <= m:
        rule = _rule("§8.3 linear neuron in the block", r, size,
                     "per rank-one term p q^T of S the member has a linear neuron (gate row "
                     "0, gate bias gamma) -p/sigma(gamma) (q.x): then B - Sx is plain",
                     gamma=str(GAMMA))
    else:
        return
    if found != "ridge":
        rule = _flip_example(found, block, size, rule)
    out.set("sometimes", True, rule["rule"], rule)
    out.set("never", False, rule["rule"], rule)


def _flip_example(found: str, block: Block, size: int, rule: dict[str, Any]) -> dict[str, Any]:
    """The rule with a member built as §8.3 says and the witness §8.2's flip sets find for it
    at `size` (a witness at m serves any larger width); the rule alone when none fits."""
    if found not in ("relu2", "gated") or too_big_for_example(block):
        return rule
    return attach_example(flip_member(block), size, rule)


Neuron = tuple[tuple[Fraction, ...] | None, Fraction | None, tuple[Fraction, ...], Fraction,
               tuple[Fraction, ...]]  # gate row, gate bias, up row, up bias, down column


def flip_member(block: Block) -> Block | None:
    """A member whose flips cancel S (docs/rules.md §8.3 "sometimes", checked by §8.2): per
    rank-one term p qᵀ of S, relu²: neurons on q·x + 1 and q·x − 1 with down −p/4 and p/4
    (flipping both changes B by −p qᵀx + const); gated σ = az + e(z): one neuron σ(q·x)·1
    with down −p/(2a) (σ(−z) = σ(z) − 2az); GLU, Og(c): σ(q·x)·(q·x) with down −p/(2c).
    Those are the §8.2 identities the checker verifies; a gate-row-0 linear neuron is not
    alone on a key, so §8.2 would not decide the member. The other neurons are alive on
    distinct keys of their own. None: no room (2 rank S > m for relu², rank S > m gated)."""
    rule = flips.rule_for(block)
    if rule is None or block.depth != 1:
        return None
    d, m = block.dim, block.width
    zero, one = Fraction(0), Fraction(1)
    neurons: list[Neuron] = []
    for p, q in linalg.rank_factor(block.skip.rows()):
        if rule.name == "relu^2":
            neurons += [(None, None, q, one, tuple(-x / 4 for x in p)),
                        (None, None, q, -one, tuple(x / 4 for x in p))]
        elif rule.name == "Og(c)":
            neurons.append((q, zero, q, zero, tuple(-x / (2 * rule.value) for x in p)))
        else:
            neurons.append((q, zero, (zero,) * d, one, tuple(-x / (2 * rule.value) for x in p)))
    if len(neurons) > m:
        return None
    _fill(neurons, m, d, gated=rule.name != "relu^2")
    return replace(block, layers=(_layer(neurons, d, gated=rule.name != "relu^2"),))


def _key(neuron: Neuron) -> tuple[Fraction, ...]:
    """The neuron's key up to a non-zero factor: distinct so, distinct up to sign too."""
    gate, gamma, up, beta, _ = neuron
    row = up + (beta,) if gate is None or gamma is None else gate + (gamma,)
    lead = next(x for x in row if x != 0)
    return tuple(x / lead for x in row)


def _fill(neurons: list[Neuron], m: int, d: int, gated: bool) -> None:
    """Extra neurons e_j + (n+1) e_{j+1} with bias n + 2 and down e_j, skipping any whose key
    is taken: alive and alone, as §8.2 needs to decide the member."""
    seen = {_key(neuron) for neuron in neurons}
    n = 0
    while len(neurons) < m:
        j = n % d
        row = tuple(Fraction(1) if t == j else Fraction(n + 1) if t == (j + 1) % d and d > 1
                    else Fraction(0) for t in range(d))
        e_j = tuple(Fraction(1 if t == j else 0) for t in range(d))
        bias = Fraction(n + 2)
        neuron: Neuron = (row, bias, e_j, Fraction(0), e_j) if gated else (
            None, None, row, bias, e_j)
        if _key(neuron) not in seen:
            seen.add(_key(neuron))
            neurons.append(neuron)
        n += 1


def _layer(neurons: list[Neuron], d: int, gated: bool) -> Layer:
    down = Matrix(linalg.transpose([neuron[4] for neuron in neurons]))
    gate = Matrix([n[0] for n in neurons if n[0] is not None]) if gated else None
    gate_bias = tuple(n[1] for n in neurons if n[1] is not None) if gated else None
    return Layer(Matrix([n[2] for n in neurons]), down, gate,
                 tuple(n[3] for n in neurons), gate_bias, (Fraction(0),) * d)
