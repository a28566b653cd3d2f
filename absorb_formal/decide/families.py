"""Families (weights not given): never / sometimes / generically not / always (MATH.md §3–4).

Facts, each with the rule that proves it:
- S = 0: the block is plain, so always absorbable at width ≥ m (and sometimes at any width:
  zero weights).
- T1–T4: never (so generically not, not sometimes, not always).
- any O(a) activation, any depth: always at width ≥ m + 2·rank(S) (each layer keeps its own
  neurons and adds rank(S) pairs ±y with ±c/(2a), which realise S).
- relu family in d = 1, any depth: always at width ≥ 2 (one line: two neurons x, −x realise
  each layer); at depth 1 and width 1 (m ≥ 2), generically not but sometimes (S ≠ 0), neither
  always nor generically not (S = 0: all u_i > 0 is an open set of absorbable weights).
- O(a)+N at depth 1 (relu family, analytic family) and linear activations: the table of §4.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from .. import certificates as cert
from .. import linalg
from ..model import Block, Layer, Matrix
from ..properties import properties
from . import concrete, half_activation, skip
from .canonical import ridge
from .decision import BIASED, Decision, undecided
from .never import never

MODALITIES = ("never", "sometimes", "generically not", "always")
MAX_EXAMPLE_DIM = 32  # witness blocks are built only for families this small
# What a rule that proves "never" (or "always") settles about all four modalities.
NEVER = {"never": True, "generically not": True, "sometimes": False, "always": False}
ALWAYS = {"always": True, "sometimes": True, "never": False, "generically not": False}


@dataclass
class Facts:
    """truth[modality] ∈ {True, False}; absent = not decided. Each with method + certificate."""

    truth: dict[str, bool] = field(default_factory=dict)
    method: dict[str, str] = field(default_factory=dict)
    certificate: dict[str, dict[str, Any]] = field(default_factory=dict)
    reason: str = ""

    def set(self, modality: str, value: bool, method: str, certificate: dict[str, Any]) -> None:
        if modality not in self.truth:
            self.truth[modality] = value
            self.method[modality] = method
            self.certificate[modality] = certificate

    def set_all(self, truths: dict[str, bool], method: str,
                certificate: dict[str, Any]) -> None:
        for modality, value in truths.items():
            self.set(modality, value, method, certificate)


def facts(block: Block, size: int) -> Facts:
    out = Facts()
    if block.skip.is_zero:
        _plain(block, size, out)
    else:
        proof = never(block)
        if proof is not None:
            out.set_all(NEVER, proof.rule, proof.certificate)
            return out
        if block.biased:
            bias_table(block, size, out)
        else:
            _odd_linear(block, size, out)
        half = half_activation.family(block, size)  # §9: relu stacks, any depth, w < 2d
        if half is not None:
            out.set("generically not", True, half_activation.METHOD, half)
            out.set("always", False, half_activation.METHOD, half)
    if not out.truth and not out.reason:
        out.reason = BIASED if block.biased else (
            f"no rule of docs/rules.md §3–4 covers {block.activation} families of depth "
            f"{block.depth} at width {size}")
    return out


def _plain(block: Block, size: int, out: Facts) -> None:
    zero = _zero_example(block, size)
    out.set("sometimes", True, "plain family (skip none)", zero)
    out.set("never", False, "plain family (skip none)", zero)
    if size >= block.width:
        rule = {"kind": "rule", "rule": "plain family", "width": size,
                "argument": "with skip none the block is a plain block of width m <= w"}
        out.set("always", True, "plain family (skip none)", rule)
        out.set("generically not", False, "plain family (skip none)", rule)
    family = ridge(block.activation)
    if family is not None and family.family == "relu" and block.dim == 1 and not block.biased:
        _line_table(block, size, 0, out)  # one line: with biases the kinks differ (§8)


def _odd_linear(block: Block, size: int, out: Facts) -> None:
    props = properties(block.activation)
    if props.odd_linear is None or block.activation.gated:
        return
    r = skip.rank(block.skip)
    spare_pairs(block, size, r, out)
    family = ridge(block.activation)
    if family is not None and family.family == "relu" and block.dim == 1:
        _line_table(block, size, r, out)
    if block.depth != 1:
        return
    if props.linear:
        _linear_table(block, size, r, out)
    elif ridge(block.activation) is not None:
        _ridge_table(block, size, r, out)


def spare_pairs(block: Block, size: int, r: int, out: Facts) -> None:
    """O(a), ungated, any depth: always at width ≥ m + 2·rank(S); biases stay (MATH.md §8.3)."""
    props = properties(block.activation)
    a = props.odd_linear
    if a is None or block.activation.gated:
        return
    m = block.width
    if size >= m + 2 * r:
        rule = {"kind": "rule", "rule": "spare pairs", "rank_S": r, "width": size,
                "lemma": props.lemmas["O"],
                "argument": "keep the m neurons of each layer and add rank(S) pairs "
                            "(y, c/(2a)), (-y, -c/(2a)) with S = sum c y^T: "
                            "sigma(z) - sigma(-z) = 2az makes each pair c y^T x"}
        rule = _with_example(block, size, rule, "always")
        out.set_all(ALWAYS, "spare pairs (§4)", rule)


def bias_table(block: Block, size: int, out: Facts) -> None:
    """Families with biases and S ≠ 0 that no never-rule (T3, T2∞) covers (MATH.md §8.3)."""
    from . import bias_families  # its table reuses this module's helpers

    r = skip.rank(block.skip)
    spare_pairs(block, size, r, out)
    if block.depth != 1:
        return
    if properties(block.activation).linear and not block.activation.gated:
        _linear_table(block, size, r, out)  # §8.3: biases change nothing but a constant
        return
    bias_families.table(block, size, r, out)


def _linear_table(block: Block, size: int, r: int, out: Facts) -> None:
    m, d = block.width, block.dim
    generic = min(d, r + m)
    table = {"kind": "rule", "rule": "§4 identity activation", "rank_S": r, "width": size,
             "generic_rank": generic,
             "argument": "B = (S + a DU) x; DU ranges over rank <= min(m, d), so rank(S + aDU) "
                         "ranges over [max(0, rank S - m), min(d, rank S + m)], the top "
                         "value generically; width w absorbs exactly rank <= w"}
    method = "§4 linear blocks"
    out.set("never", r > m + size, method, table)
    out.set("sometimes", r <= m + size, method, _with_example(block, size, table, "sometimes")
            if r <= m + size else table)
    out.set("generically not", generic > size, method, table)
    out.set("always", generic <= size, method, table)


def _ridge_table(block: Block, size: int, r: int, out: Facts) -> None:
    m, d = block.width, block.dim
    family = ridge(block.activation)
    assert family is not None
    never_rule = {"kind": "rule", "rule": "§4 rank of S", "rank_S": r, "width": size,
                  "argument": "if P absorbs B, P - (B - Sx) = Sx is a plain block of width "
                              "m + w, and a plain block equal to Sx needs 2 rank(S) neurons"}
    if m + size < 2 * r:
        out.set_all(NEVER, "§4 rank of S", never_rule)
        return
    if size < m:
        return
    if family.family == "relu" and d == 1 and m >= 2:
        return  # one line: _line_table decided every width
    if r <= m:
        example = _with_example(block, size, {
            "kind": "rule", "rule": "§4 subset condition", "rank_S": r, "width": size,
            "argument": "weights with sum_{i in J} d_i u_i^T = -S/(2a) (J = the first rank(S) "
                        "neurons, from a rank factorisation of S) are absorbable"}, "sometimes")
        out.set("sometimes", True, "§4 subset condition", example)
        out.set("never", False, "§4 subset condition", example)
    if size == m:
        generic = {"kind": "rule", "rule": "§4 genericity", "width": size,
                   "argument": "generic weights put every neuron alive on its own key (p = m), "
                               "leaving no doubles or spare pairs; absorbable then needs "
                               "sum_{i in J} d_i u_i^T = -S/(2a) for one of finitely many J, "
                               "each a proper algebraic condition since S != 0"}
        out.set("generically not", True, "§4 genericity", generic)
        out.set("always", False, "§4 genericity", generic)


def _line_table(block: Block, size: int, r: int, out: Facts) -> None:
    """relu family in d = 1 (MATH.md §4): every neuron is on the one line, so B(x) = Λx + v|x|
    and a plain layer realises any (Λ, v) with two neurons (x and −x), and with one neuron
    exactly Λ = ±ρv, i.e. s + 2a Σ_{i∈J} d_i u_i = 0 for J = {u_i > 0} or J = {u_i < 0}."""
    if size >= 2:
        # Any depth: each layer alone is absorbable at width 2, and a stack of absorbable
        # layers is absorbable (MATH.md §5).
        rule = {"kind": "rule", "rule": "§4 relu family in d = 1", "width": size,
                "argument": "all neurons share one line, so each layer is Lx + v|x|, which "
                            "the two neurons x and -x realise: width 2 <= w always suffices, "
                            "layer by layer"}
        rule = _with_example(block, size, rule, "always")
        out.set_all(ALWAYS, "§4 relu family, d = 1", rule)
    elif block.depth == 1 and block.width >= 2 and r == 1:  # m = 1: the §4 table's generic case
        rule = {"kind": "rule", "rule": "§4 relu family in d = 1, width 1", "rank_S": r,
                "width": size,
                "argument": "one neuron realises Lx + v|x| iff L = +-rho v, i.e. s + 2a "
                            "sum_{i in J} d_i u_i = 0 with J = {u_i > 0} or {u_i < 0}: a proper "
                            "algebraic condition for each J since s != 0, met by some weights"}
        example = _with_example(block, size, rule, "sometimes")
        out.set("sometimes", True, "§4 relu family, d = 1, width 1", example)
        out.set("never", False, "§4 relu family, d = 1, width 1", example)
        out.set("generically not", True, "§4 relu family, d = 1, width 1", rule)
        out.set("always", False, "§4 relu family, d = 1, width 1", rule)
    elif block.depth == 1 and block.width >= 2:  # S = 0: the empty J meets the condition
        rule = {"kind": "rule", "rule": "§4 relu family in d = 1, width 1, S = 0", "width": size,
                "argument": "with S = 0, weights with every u_i > 0 (an open set) give c relu(x), "
                            "one neuron; relu(x) + relu(-x) (m >= 2) is Lx + v|x| with "
                            "L != +-rho v, which one neuron does not realise"}
        out.set("generically not", False, "§4 relu family, d = 1, width 1", rule)
        out.set("always", False, "§4 relu family, d = 1, width 1", rule)


def _zero_example(block: Block, size: int) -> dict[str, Any]:
    return {"kind": "rule", "rule": "zero weights", "width": size,
            "argument": "with all weights 0 and skip none the block is the zero map, which "
                        "a plain block of any width (zero weights) computes"}


def _with_example(block: Block, size: int, rule: dict[str, Any], why: str) -> dict[str, Any]:
    """Attach a concrete member of the family and its witness when the family is small."""
    if too_big_for_example(block):
        return rule
    # A biased family's example: a member with zero biases, stated bias-free (MATH.md §8),
    # whose bias-free witness is a biased plain block with zero biases.
    return attach_example(example_member(replace(block, biased=False), why), size, rule)


def too_big_for_example(block: Block) -> bool:
    return block.dim > MAX_EXAMPLE_DIM or block.width > 4 * MAX_EXAMPLE_DIM or block.depth > 4


def attach_example(member: Block | None, size: int, rule: dict[str, Any]) -> dict[str, Any]:
    """The rule with `member` and its witness at `size`, from the decision procedure itself
    (never asserted); the rule alone when there is no member or no witness."""
    if member is None or too_big_for_example(member):
        return rule
    decision = concrete.at_width(member, size)
    if decision.absorbable is not True:
        return rule
    return {**rule, "example": {"layers": cert.layers(member.layers or ()),
                                "witness": decision.certificate}}


def example_member(block: Block, why: str) -> Block | None:
    """Weights that make the family member absorbable: the first rank(S) neurons carry
    −S/(2a) from a rank factorisation of S; the others are small fixed distinct neurons."""
    a = properties(block.activation).odd_linear
    if a is None:
        return None
    d, m = block.dim, block.width
    terms = linalg.rank_factor(block.skip.rows())
    neurons: list[tuple[tuple[Fraction, ...], tuple[Fraction, ...]]] = []
    for c, y in terms[:m]:
        neurons.append((y, tuple(-x / (2 * a) for x in c)))
    n = 0
    while len(neurons) < m:  # distinct extra neurons u = e_j + (n+1) e_{j+1}, d = e_j
        j = n % d
        u = tuple(Fraction(1) if t == j else Fraction(n + 1) if t == (j + 1) % d and d > 1
                  else Fraction(0) for t in range(d))
        if d == 1:  # u = −(n+2), opposite to the first neuron (rref: y = 1): in the relu
            u = (Fraction(-n - 2),)  # family {u_i > 0} alone carries −S/(2a), width 1 fits
        neurons.append((u, tuple(Fraction(1) if t == j else Fraction(0) for t in range(d))))
        n += 1
    layer = Layer(Matrix([u for u, _ in neurons]),
                  Matrix(linalg.transpose([dv for _, dv in neurons])))
    return replace(block, layers=(layer,) * block.depth)


def decide(block: Block, modality: str, size: int) -> Decision:
    """The claim 'NAME is MODALITY absorbable [at width size]' as a Decision (True = holds)."""
    found = facts(block, size)
    if modality not in found.truth:
        return undecided(found.reason or f"no rule decides whether {block.name} is {modality} "
                                          f"absorbable at width {size}")
    return Decision(found.truth[modality], found.method[modality],
                    found.certificate[modality])
