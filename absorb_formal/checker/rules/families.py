"""Families (docs/rules.md, "Families", §3–4; §8.3 with biases; §9 (b)): the checker's side of
`rule` certificates, which state which modalities (never, sometimes, generically not,
always) a family of blocks has at a width.

The truth table of each rule is hand-written here (FAMILY_TRUTHS); the rule's preconditions
are re-derived from the block: §4's here, §8.3's in rules/bias_families.py, §5's (bias-free
glu families) in rules/glu_families.py, §9's in rules/half_activation.py. An example member,
when given, must belong to the family and its witness is verified like any witness.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..kernel import linalg as exact
from ..kernel.contract import Invalid, require
from ..kernel.linalg import whole
from ..lemmas import relied as lemmas
from . import bias_families, glu_families
from . import half_activation as half
from .concrete import layer_shapes
from .modular import Layers
from .truths import ALWAYS, GENERICALLY_NOT, NEVER, SOMETIMES

# verifies a witness (a certificate) of a block at a width, with the block's read weights
Witness = Callable[[dict[str, Any], int, dict[str, Any], Layers | None], None]

IDENTITY = "§4 identity activation"  # linear σ: its own table, from rank S, m, d and w
FAMILY_TRUTHS = {
    "§4 rank of S": NEVER,
    "spare pairs": ALWAYS,
    "§4 relu family in d = 1": ALWAYS,
    "§4 relu family in d = 1, width 1": {"sometimes": True, "never": False,
                                         "generically not": True, "always": False},
    "§4 relu family in d = 1, width 1, S = 0": {"generically not": False, "always": False},
    "§4 subset condition": SOMETIMES,
    "§4 genericity": GENERICALLY_NOT,
    "plain family": {"always": True, "generically not": False},
    "zero weights": SOMETIMES,
    # docs/rules.md §8.3, families with biases (depth 1, S != 0): rules/bias_families.py
    "§8.3 rank of S": NEVER,
    "§8.3 relu^2 pairs": ALWAYS,
    "§8.3 square pairs": ALWAYS,
    "§8.3 linear neurons": ALWAYS,
    "§8.3 genericity": GENERICALLY_NOT,
    "§8.3 subset condition": SOMETIMES,
    "§8.3 relu^2 flips": SOMETIMES,
    "§8.3 linear neuron in the block": SOMETIMES,
    half.RULE: GENERICALLY_NOT,  # docs/rules.md §9 (b), any depth
    # docs/rules.md "GLU sign flips", bias-free Og(c) families: rules/glu_families.py
    "§5 rank of S": NEVER,
    "§5 linear neurons": ALWAYS,
    "§5 linear neurons in the block": SOMETIMES,
    "§5 genericity": GENERICALLY_NOT,
}
# The rules that hold with biases: the §4 ones whose argument keeps biases (plain, zero,
# spare pairs, linear maps up to a constant) and the §8.3 table.
BIASED_FAMILY_RULES = frozenset({"plain family", "zero weights", "spare pairs",
                                 IDENTITY, half.RULE,
                                 *(r for r in FAMILY_TRUTHS if r.startswith("§8.3"))})


def truth(block: dict[str, Any], width: int, cert: dict[str, Any], witness: Witness
          ) -> dict[str, bool]:
    """Which modalities of 'block is … absorbable at width' the `rule` certificate settles, and
    how (its table). `witness` verifies the example's witness against the member it names."""
    rule = cert["rule"]
    require(whole(cert["width"]) == width, "the rule was applied at another width")
    if "rank_S" in cert:
        require(whole(cert["rank_S"]) == exact.skip_rank(block), "the stored rank(S) is wrong")
    if rule == IDENTITY:
        table = _identity_table(block, width, cert)
    else:
        require(rule in FAMILY_TRUTHS, f"unknown rule {rule!r}")
        require(not block.get("bias") or rule in BIASED_FAMILY_RULES,
                f"rule {rule!r} does not hold for families with biases (docs/rules.md §8)")
        if rule.startswith("§8.3"):
            bias_families.preconditions(block, rule, width, cert)
        elif rule.startswith("§5 "):
            glu_families.preconditions(block, rule, width)
        else:
            _rule_preconditions(block, rule, width)
        table = FAMILY_TRUTHS[rule]
    if "example" in cert:
        witness(_example_member(block, cert["example"], rule), width,
                cert["example"]["witness"], None)
    return table


def _rule_preconditions(block: dict[str, Any], rule: str, width: int) -> None:
    act, m, d = block["activation"], block["width"], block["dim"]
    r = exact.skip_rank(block)
    if rule == half.RULE:
        half.check_family(block, width)
        return
    if rule in ("plain family", "zero weights"):
        require(exact.skip_is_zero(block), "needs skip none")
        require(rule == "zero weights" or width >= m, "needs width >= m")
        return
    if rule == "spare pairs":
        a = lemmas.odd_slope(act)
        require(a is not None and not act["gated"], "O(a) not re-proved (ungated)")
        require(width >= m + 2 * r, "needs width >= m + 2 rank(S)")
        return
    family = lemmas.ridge_family(act)
    if rule == "§4 relu family in d = 1":  # any depth: a stack of width-2 layers (§4, §5)
        require(family is not None and family[0] == "relu" and d == 1 and width >= 2,
                "needs relu family, d = 1, width >= 2")
        return
    require(family is not None and block["depth"] == 1, "needs a depth-1 O(a)+N activation")
    assert family is not None
    if rule == "§4 rank of S":
        require(m + width < 2 * r, "needs m + width < 2 rank(S)")
    elif rule == "§4 relu family in d = 1, width 1":
        require(family[0] == "relu" and d == 1 and width == 1 and r == 1,
                "needs relu family, d = 1, width 1, S != 0")
    elif rule == "§4 relu family in d = 1, width 1, S = 0":
        require(family[0] == "relu" and d == 1 and width == 1 and m >= 2 and r == 0,
                "needs relu family, d = 1, width 1, m >= 2, S = 0")
    elif rule == "§4 subset condition":
        require(r <= m <= width, "needs rank(S) <= m <= width")
    elif rule == "§4 genericity":
        require(width == m and r > 0, "needs width = m and S != 0")
        require(not (family[0] == "relu" and d == 1 and m >= 2), "relu in d = 1 is always")
    else:  # every rule of the table has its preconditions above
        raise Invalid(f"unknown rule {rule!r}")


# §8.3 rows whose example is a biased member (its biases stated), absorbed by §8.2 flips.
BIASED_EXAMPLE_RULES = frozenset({"§8.3 relu^2 flips", "§8.3 linear neuron in the block",
                                  "§8.3 relu^2 pairs", "§8.3 linear neurons"})


def _example_member(block: dict[str, Any], example: dict[str, Any],
                    rule: str) -> dict[str, Any]:
    """The family member an example names: the block's depth, each layer shaped as one of the
    family's (width m). A biased family's example is a member with zero biases, stated
    bias-free (no bias fields anywhere): its bias-free witness is a biased plain block with
    zero biases (docs/rules.md §8); except for BIASED_EXAMPLE_RULES, whose member carries its
    biases."""
    layers = example["layers"]
    require(isinstance(layers, list) and len(layers) == block["depth"],
            "the example has the wrong depth")
    if block.get("bias") and rule in BIASED_EXAMPLE_RULES:
        for layer in layers:
            layer_shapes(block, layer, block["width"])
        return dict(block, layers=layers)
    if block.get("bias"):
        for layer in [*layers, *example["witness"].get("layers", [])]:
            require(not any(name in layer for name in ("up_bias", "gate_bias", "down_bias")),
                    "the example of a biased family is stated with zero (absent) biases")
    member = dict({key: value for key, value in block.items() if key != "bias"}, layers=layers)
    for layer in layers:
        layer_shapes(member, layer, block["width"])
    return member


def _identity_table(block: dict[str, Any], width: int, cert: dict[str, Any]
                    ) -> dict[str, bool]:
    """`§4 identity activation`: every modality's truth, from rank S, m, d and w."""
    act = block["activation"]
    a = lemmas.odd_slope(act)
    require(a is not None and not act["gated"] and lemmas.holds(act, "Lin", a)
            and block["depth"] == 1, "needs a depth-1 linear activation")
    r, m, d = exact.skip_rank(block), block["width"], block["dim"]
    generic = min(d, r + m)
    require(whole(cert["generic_rank"]) == generic, "the stored generic rank is wrong")
    return {"never": r > m + width, "sometimes": r <= m + width,
            "generically not": generic > width, "always": generic <= width}
