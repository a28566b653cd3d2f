"""`claim A equals B` for depth-1 blocks, by canonical forms (docs/rules.md §4, uniqueness).

Forms compare when the two activations share their even part e up to normalisation (any two
relu-family activations; the same analytic σ), or when either block is linear (no keys): the
ridge functions of distinct keys are independent of each other and of linear maps.

With biases (§8.1) the constants γ + Σ v σ(β) compare exactly (`symbolic`): formally equal
constants are equal; formally different ones count as different only when an arb enclosure
of some entry's difference excludes 0 (silu(2) is a rational function of silu(1), so a formal
difference alone proves nothing); otherwise the claim stays unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..certify import widths as cert
from ..model import linalg, symbolic
from ..model.blocks import Block
from . import linear, points
from .canonical import CanonicalForm, canonical_form
from .decision import BIASED

METHOD = "§4 canonical forms"


@dataclass(frozen=True)
class Equality:
    equal: bool | None
    certificate: dict[str, Any] | None = None
    reason: str = ""


def equal_blocks(left: Block, right: Block) -> tuple[bool | None, dict[str, Any] | None, str]:
    """`claim left equals right`: (equal, certificate, reason); None with a reason when
    undecided. Blocks within the exact-work limit (`concrete.MAX_EXACT_WEIGHTS`) are compared
    by `decide` (the forms written out in the certificate); beyond it, where a certificate
    names the weight files instead of embedding the weights, by `integer_forms.decide`
    (exact integers; the checker recomputes the forms from its own reading of the files)."""
    from .concrete import too_large
    from .integer_forms import decide as decide_integer

    large = any(block.is_concrete and too_large(block) for block in (left, right))
    found = decide_integer(left, right) if large else decide(left, right)
    return found.equal, found.certificate, found.reason


def _form(block: Block, biased: bool) -> tuple[CanonicalForm | None, linalg.Rows | None]:
    """(ridge canonical form, None) or (None, Λ) for a linear block, or (None, None).
    `biased`: the §8.1 form (a bias-free block read with zero biases)."""
    if block.depth != 1 or block.layers is None:
        return None, None
    a = linear.slope(block)
    if a is not None:
        return (None, None) if biased else (None, linear.lam(block, a))  # §8.1: not linear
    return canonical_form(block, biased, symbolic=True), None


def decide(left: Block, right: Block) -> Equality:
    biased = left.biased or right.biased  # docs/rules.md §8.1: compare affine keys and γ
    cf_l, lin_l = _form(left, biased)
    cf_r, lin_r = _form(right, biased)
    if biased and (cf_l is None or cf_r is None):
        return Equality(None, reason=BIASED + ": §8.1 compares depth-1 O(a)+N blocks")
    if (cf_l is None and lin_l is None) or (cf_r is None and lin_r is None):
        return Equality(None, reason="canonical forms cover depth-1 blocks with O(a)+N or "
                                     "linear activations only")
    lam_l = cf_l.lam if cf_l else lin_l
    lam_r = cf_r.lam if cf_r else lin_r
    keys_l = cf_l.keys if cf_l else ()
    keys_r = cf_r.keys if cf_r else ()
    if cf_l and cf_r and not cf_l.ridge.same_e(cf_r.ridge) and (keys_l or keys_r):
        return Equality(None, reason=f"{left.activation} and {right.activation} have different "
                                     "even parts; their canonical forms do not compare")
    equal = lam_l == lam_r and keys_l == keys_r
    if biased:
        assert cf_l is not None and cf_r is not None
        equal = equal and cf_l.offsets == cf_r.offsets
        if equal and (cf_l.gamma, cf_l.constants) != (cf_r.gamma, cf_r.constants):
            # only the constants differ, formally: different numbers only if proved so
            if not any(symbolic.nonzero(x - y) for x, y in
                       zip(cf_l.constant(), cf_r.constant(), strict=True)):
                return Equality(None, reason="the canonical forms differ only in constants "
                                             "σ(β) that are not proved different")
            equal = False
    point = None if equal else _differing_point(left, right)
    return Equality(equal, cert.canonical_forms(equal, _json(cf_l, lam_l), _json(cf_r, lam_r),
                                                point))


def _json(cf: CanonicalForm | None, lam: linalg.Rows | None) -> dict[str, Any]:
    if cf is not None:
        return cf.as_json()
    assert lam is not None
    return cert.linear_form(lam)


def _differing_point(left: Block, right: Block) -> dict[str, Any] | None:
    """A rational x0 with A(x0) ≠ B(x0), by exact evaluation where both are rational."""
    if not (left.activation.is_rational and right.activation.is_rational):
        return None
    for x0 in points.candidates(left.dim):
        a, b = left.evaluate_exact(x0), right.evaluate_exact(x0)
        if a != b:
            return cert.differing_point(x0, a, b)
    return None
