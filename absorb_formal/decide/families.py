"""Families (weights not given): never / sometimes / generically not / always (docs/rules.md §3–4).

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
- glu (Og(c)) without biases at depth 1: never / sometimes / generically not / always from
  §5's linear neurons and genericity (`glu_families`).
"""

from __future__ import annotations

from typing import Any

from ..certify import bodies as cert
from ..model.blocks import Block
from . import bias_families, glu_families, half_activation, skip
from .canonical import ridge
from .decision import BIASED, Decision, undecided
from .family_facts import ALWAYS, NEVER, Facts, with_example
from .lemmas import properties
from .never import never

MODALITIES = ("never", "sometimes", "generically not", "always")


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
            glu_families.table(block, size, skip.rank(block.skip), out)  # §5, bias-free glu
        half = half_activation.family(block, size)  # §9: relu stacks, any depth, w < 2d
        if half is not None:
            out.set("generically not", True, half_activation.METHOD, half)
            out.set("always", False, half_activation.METHOD, half)
    if not out.truth and not out.reason:
        out.reason = BIASED if block.biased else (
            f"no rule of docs/rules.md covers {block.activation} families of depth "
            f"{block.depth} at width {size}")
    return out


def _plain(block: Block, size: int, out: Facts) -> None:
    zero = zero_example(block, size)
    out.set("sometimes", True, "plain family (skip none)", zero)
    out.set("never", False, "plain family (skip none)", zero)
    if size >= block.width:
        rule = cert.rule("plain family", size,
                         "with skip none the block is a plain block of width m <= w")
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
    """O(a), ungated, any depth: always at width ≥ m + 2·rank(S); biases stay
    (docs/rules.md §8.3)."""
    props = properties(block.activation)
    a = props.odd_linear
    if a is None or block.activation.gated:
        return
    m = block.width
    if size >= m + 2 * r:
        rule = cert.rule("spare pairs", size,
                         "keep the m neurons of each layer and add rank(S) pairs "
                         "(y, c/(2a)), (-y, -c/(2a)) with S = sum c y^T: "
                         "sigma(z) - sigma(-z) = 2az makes each pair c y^T x",
                         rank=r, lemma=props.lemmas["O"])
        rule = with_example(block, size, rule, "always")
        out.set_all(ALWAYS, "spare pairs (§4)", rule)


def bias_table(block: Block, size: int, out: Facts) -> None:
    """Families with biases and S ≠ 0 that no never-rule (T3, T2∞) covers (docs/rules.md §8.3)."""
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
    table = cert.rule("§4 identity activation", size,
                      "B = (S + a DU) x; DU ranges over rank <= min(m, d), so rank(S + aDU) "
                      "ranges over [max(0, rank S - m), min(d, rank S + m)], the top "
                      "value generically; width w absorbs exactly rank <= w",
                      rank=r, generic_rank=generic)
    method = "§4 linear blocks"
    out.set("never", r > m + size, method, table)
    out.set("sometimes", r <= m + size, method, with_example(block, size, table, "sometimes")
            if r <= m + size else table)
    out.set("generically not", generic > size, method, table)
    out.set("always", generic <= size, method, table)


def _ridge_table(block: Block, size: int, r: int, out: Facts) -> None:
    m, d = block.width, block.dim
    family = ridge(block.activation)
    assert family is not None
    never_rule = cert.rule("§4 rank of S", size,
                           "if P absorbs B, P - (B - Sx) = Sx is a plain block of width "
                           "m + w, and a plain block equal to Sx needs 2 rank(S) neurons",
                           rank=r)
    if m + size < 2 * r:
        out.set_all(NEVER, "§4 rank of S", never_rule)
        return
    if size < m:
        return
    if family.family == "relu" and d == 1 and m >= 2:
        return  # one line: _line_table decided every width
    if r <= m:
        example = with_example(block, size, cert.rule(
            "§4 subset condition", size,
            "weights with sum_{i in J} d_i u_i^T = -S/(2a) (J = the first rank(S) "
            "neurons, from a rank factorisation of S) are absorbable", rank=r), "sometimes")
        out.set("sometimes", True, "§4 subset condition", example)
        out.set("never", False, "§4 subset condition", example)
    if size == m:
        generic = cert.rule("§4 genericity", size,
                            "generic weights put every neuron alive on its own key (p = m), "
                            "leaving no doubles or spare pairs; absorbable then needs "
                            "sum_{i in J} d_i u_i^T = -S/(2a) for one of finitely many J, "
                            "each a proper algebraic condition since S != 0")
        out.set("generically not", True, "§4 genericity", generic)
        out.set("always", False, "§4 genericity", generic)


def _line_table(block: Block, size: int, r: int, out: Facts) -> None:
    """relu family in d = 1 (docs/rules.md §4): every neuron is on the one line, so B(x) = Λx + v|x|
    and a plain layer realises any (Λ, v) with two neurons (x and −x), and with one neuron
    exactly Λ = ±ρv, i.e. s + 2a Σ_{i∈J} d_i u_i = 0 for J = {u_i > 0} or J = {u_i < 0}."""
    if size >= 2:
        # Any depth: each layer alone is absorbable at width 2, and a stack of absorbable
        # layers is absorbable (docs/rules.md §5).
        rule = cert.rule("§4 relu family in d = 1", size,
                         "all neurons share one line, so each layer is Lx + v|x|, which "
                         "the two neurons x and -x realise: width 2 <= w always suffices, "
                         "layer by layer")
        rule = with_example(block, size, rule, "always")
        out.set_all(ALWAYS, "§4 relu family, d = 1", rule)
    elif block.depth == 1 and block.width >= 2 and r == 1:  # m = 1: the §4 table's generic case
        rule = cert.rule("§4 relu family in d = 1, width 1", size,
                         "one neuron realises Lx + v|x| iff L = +-rho v, i.e. s + 2a "
                         "sum_{i in J} d_i u_i = 0 with J = {u_i > 0} or {u_i < 0}: a proper "
                         "algebraic condition for each J since s != 0, met by some weights",
                         rank=r)
        example = with_example(block, size, rule, "sometimes")
        out.set("sometimes", True, "§4 relu family, d = 1, width 1", example)
        out.set("never", False, "§4 relu family, d = 1, width 1", example)
        out.set("generically not", True, "§4 relu family, d = 1, width 1", rule)
        out.set("always", False, "§4 relu family, d = 1, width 1", rule)
    elif block.depth == 1 and block.width >= 2:  # S = 0: the empty J meets the condition
        rule = cert.rule("§4 relu family in d = 1, width 1, S = 0", size,
                         "with S = 0, weights with every u_i > 0 (an open set) give c relu(x), "
                         "one neuron; relu(x) + relu(-x) (m >= 2) is Lx + v|x| with "
                         "L != +-rho v, which one neuron does not realise")
        out.set("generically not", False, "§4 relu family, d = 1, width 1", rule)
        out.set("always", False, "§4 relu family, d = 1, width 1", rule)


def zero_example(block: Block, size: int) -> dict[str, Any]:
    return cert.rule("zero weights", size,
                     "with all weights 0 and skip none the block is the zero map, which "
                     "a plain block of any width (zero weights) computes")


def decide(block: Block, modality: str, size: int) -> Decision:
    """The claim 'NAME is MODALITY absorbable [at width size]' as a Decision (True = holds)."""
    found = facts(block, size)
    if modality not in found.truth:
        return undecided(found.reason or f"no rule decides whether {block.name} is {modality} "
                                          f"absorbable at width {size}")
    return Decision(found.truth[modality], found.method[modality],
                    found.certificate[modality])
