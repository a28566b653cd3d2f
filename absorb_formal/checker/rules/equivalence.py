"""Equality of two depth-1 blocks (docs/rules.md, "Equivalence", §4 uniqueness of canonical
forms): the checker's side of `canonical forms` and `integer canonical forms`.

Both forms are recomputed (the integer ones by rules/integer_forms.py, from the weights the
checker read itself); forms compare when the activations share their even part or either is
linear. Unequal forms that differ only in formal constants σ(β) count as unequal only through
an arb enclosure of a difference that excludes 0; a stored point's values are evaluated
exactly.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..kernel import linalg as exact
from ..kernel import symbolic
from ..kernel.contract import require
from ..lemmas import values
from . import canonical as forms
from . import integer_forms, large
from .modular import Layers

Family = tuple[str, Fraction, Fraction | None]


def _depth_one_families(left: dict[str, Any], right: dict[str, Any]
                        ) -> tuple[Family, Family]:
    require(left["depth"] == right["depth"] == 1, "canonical forms decide depth 1 only")
    return forms.family(left), forms.family(right)


def integer(left: dict[str, Any], right: dict[str, Any], cert: dict[str, Any],
            layers_l: Layers | None, layers_r: Layers | None) -> bool:
    """`integer canonical forms`, for blocks of any size: whether the blocks are equal."""
    fam_l, fam_r = _depth_one_families(left, right)
    return integer_forms.check(left, right, large.one_layer(left, layers_l),
                               large.one_layer(right, layers_r), (fam_l, fam_r), cert)


def canonical(left: dict[str, Any], right: dict[str, Any], cert: dict[str, Any]) -> bool:
    """`canonical forms`: whether the blocks are equal."""
    fam_l, fam_r = _depth_one_families(left, right)
    biased = bool(left.get("bias") or right.get("bias"))  # §8.1: bias-free = zero biases
    form_l = forms.form(fam_l, left["dim"], exact.skip_rows(left), left["layers"][0], biased,
                        left["activation"])
    form_r = forms.form(fam_r, right["dim"], exact.skip_rows(right), right["layers"][0],
                        biased, right["activation"])
    comparable = (fam_l[0] == fam_r[0] == "relu" or "linear" in (fam_l[0], fam_r[0])
                  or left["activation"]["kind"] == right["activation"]["kind"]
                  or not (form_l[1] or form_r[1]))
    require(comparable, "the two activations' even parts differ: forms do not compare")
    equal = form_l == form_r
    if not equal and (forms.constant_keys(form_l[1], left["dim"])
                      or forms.constant_keys(form_r[1], right["dim"])):
        # σ(β) kept formally: different formal constants may be equal numbers, so when
        # nothing else differs an enclosure must show some entry of the difference ≠ 0
        def bare(form: tuple[Any, ...], dim: int) -> tuple[Any, ...]:
            return form[0], {k: v for k, v in form[1].items() if any(k[:dim])}

        if bare(form_l, left["dim"]) == bare(form_r, right["dim"]):
            gap = [symbolic.add(x, y, Fraction(-1)) for x, y in
                   zip(forms.constant(form_l, left["activation"]),
                       forms.constant(form_r, right["activation"]), strict=True)]
            require(any(values.sign(g) not in (0, None) for g in gap),
                    "the forms differ only in constants σ(β) not proved different")
    require(equal == bool(cert["equal"]), "the stored verdict disagrees with the forms")
    require(cert["left"] == forms.as_json(fam_l, *form_l)
            and cert["right"] == forms.as_json(fam_r, *form_r),
            "the stored canonical forms differ from the recomputed ones")
    if "point" in cert:
        x0 = exact.vec(cert["point"]["x0"])
        at_left = exact.evaluate(left, left["layers"], x0)
        at_right = exact.evaluate(right, right["layers"], x0)
        require(at_left != at_right, "the blocks agree at x0")
        require(exact.vec(cert["point"]["left"]) == at_left
                and exact.vec(cert["point"]["right"]) == at_right,
                "the stored values at x0 differ from exact evaluation")
    return equal
