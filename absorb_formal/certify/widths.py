"""Certificates of the exact rules at a width (docs/rules.md §4, §5, §8.2, §9): linear blocks
(`decide/linear.py`), canonical forms and the width search (`width.py`, `equivalence.py`,
`integer_forms.py`), the matrix subset-sum refutations (`subset.py`), the flip sets of §8.2
and §5 (`flips.py`, `glu.py`), stacks of per-layer witnesses (`concrete.py`) and the
half-activation bound (`half_activation.py`).

A witness stores its layers; the checker recomputes what its `check` names (canonical forms,
linear maps, the flip identity). A refutation stores what the checker cannot re-derive
cheaply (a functional Y, coefficients, a basis) and the method that found it; the checker
re-solves the rest itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from ..checker.kernel.contract import FLIP_SECTION, Check, Kind
from ..model.blocks import Layer
from .bodies import matrix, q, vector, witness

# ---- linear blocks, canonical forms, stacks --------------------------------------------------


def linear_rank(lam: Sequence[Sequence[Fraction]], rank: int, width: int) -> dict[str, Any]:
    """Λ = S + a·DU has rank > width: no plain linear block of that width equals it."""
    return {"kind": Kind.LINEAR_RANK, "Lambda": matrix(lam), "rank": rank, "width": width,
            "argument": "a plain linear block of width w has rank <= w"}


def linear_maps_equal(layer: Layer, width: int) -> dict[str, Any]:
    return witness([layer], width, Check.LINEAR_MAPS_EQUAL)


def canonical_forms_equal(layer: Layer, width: int) -> dict[str, Any]:
    """The width search's witness. No choice or canonical form is stored: the checker
    recomputes both forms, and a field it does not check would be one a reader could not
    trust (docs/certificates.md)."""
    return witness([layer], width, Check.CANONICAL_FORMS_EQUAL)


def stack_forms_equal(stack: Sequence[Layer], width: int) -> dict[str, Any]:
    """A stack of per-layer witnesses, each compared with its block layer by canonical forms."""
    return witness(stack, width, Check.STACK_FORMS_EQUAL)


def linear_form(lam: Sequence[Sequence[Fraction]]) -> dict[str, Any]:
    """A linear block's side of `canonical forms`: Λ and no keys."""
    return {"family": "linear", "Lambda": matrix(lam), "keys": []}


def differing_point(x0: Sequence[Fraction], left: Sequence[Any], right: Sequence[Any]
                    ) -> dict[str, Any]:
    """A rational x0 where the two blocks differ, with both exact values."""
    return {"x0": vector(x0), "left": vector(left), "right": vector(right)}


def canonical_forms(equal: bool, left: dict[str, Any], right: dict[str, Any],
                    point: dict[str, Any] | None = None) -> dict[str, Any]:
    """`claim A equals B`: both canonical forms, and where they differ a point, if one was
    found by exact evaluation."""
    out = {"kind": Kind.CANONICAL_FORMS, "equal": equal, "left": left, "right": right}
    if point is not None:
        out["point"] = point
    return out


def integer_canonical_forms(equal: bool, keys: list[int],
                            difference: dict[str, Any] | None = None) -> dict[str, Any]:
    """Forms compared in exact integers (blocks beyond the exact-work limit): the key counts,
    and the first difference when they differ; the checker recomputes both forms."""
    out: dict[str, Any] = {"kind": Kind.INTEGER_CANONICAL_FORMS, "equal": equal, "keys": keys}
    if difference is not None:
        out["difference"] = difference
    return out


# ---- the width search (§4) -------------------------------------------------------------------

def key_count(keys: int, width: int, form: dict[str, Any]) -> dict[str, Any]:
    return {"kind": Kind.SUBSET_SEARCH, "method": "key count", "keys": keys, "width": width,
            "canonical_form": form,
            "argument": f"each of the {keys} keys of the canonical form needs its own neuron"}


def width_search(width: int, form: dict[str, Any], cases: list[dict[str, Any]]
                 ) -> dict[str, Any]:
    return {"kind": Kind.SUBSET_SEARCH, "method": "width search", "width": width,
            "canonical_form": form, "cases": cases,
            "argument": "every (signs, doubles, spare pairs) choice of cost <= width is "
                        "refuted case by case"}


def with_complement(refutation: dict[str, Any], basis: Sequence[Sequence[Fraction]]
                    ) -> dict[str, Any]:
    """A sub-problem's subset refutation, with the basis Q of the complement its terms were
    projected on."""
    return {**refutation, "complement_basis": [vector(v) for v in basis]}


def sign_enumeration(basis: Sequence[Sequence[Fraction]], singles: int, k: int
                     ) -> dict[str, Any]:
    return {"kind": Kind.SUBSET_SEARCH, "method": "sign enumeration",
            "complement_basis": [vector(v) for v in basis],
            "argument": f"every one of the 2^{singles} sign vectors gives rank(M_s Q) > {k}"}


# ---- matrix subset-sum (`subset.py`) ---------------------------------------------------------

def unique_combination(coefficients: Sequence[Fraction]) -> dict[str, Any]:
    return {"kind": Kind.SUBSET_SEARCH, "method": "unique combination",
            "coefficients": vector(coefficients),
            "argument": "the terms are linearly independent and the target's unique "
                        "combination is not 0/1"}


def separating_functional(grid: Sequence[Sequence[Fraction]], value: Fraction
                          ) -> dict[str, Any]:
    return {"kind": Kind.SEPARATING_FUNCTIONAL, "Y": matrix(grid), "Y_dot_target": q(value),
            "argument": "<Y, W_l> = 0 for every term and <Y, T> != 0: no real combination, "
                        "hence no subset, reaches T"}


def enumeration(free: int) -> dict[str, Any]:
    return {"kind": Kind.SUBSET_SEARCH, "method": "enumeration", "free_coordinates": free,
            "argument": f"all 2^{free} 0/1 values of the free coordinates of the reduced "
                        "system give a pivot coordinate outside {0, 1}"}


def lattice_functional(grid: Sequence[Sequence[Fraction]], value: Fraction
                       ) -> dict[str, Any]:
    return {"kind": Kind.SUBSET_SEARCH, "method": "lattice functional", "Y": matrix(grid),
            "Y_dot_target": q(value),
            "argument": "<Y, W_l> is an integer for every term and <Y, T> is not: no integer "
                        "combination of the terms, hence no subset, reaches T"}


def cp_sat(terms: int, equations: int) -> dict[str, Any]:
    return {"kind": Kind.SUBSET_SEARCH, "method": "cp-sat", "terms": terms,
            "equations": equations,
            "argument": "the 0/1 system (one equation per matrix entry, scaled to integers) is "
                        "infeasible; the checker re-solves its own encoding"}


def smt() -> dict[str, Any]:
    """No solver text is stored: the checker encodes the system it re-derives itself and has
    z3 and cvc5 refute it (a stored text would be tied to nothing it checks)."""
    return {"kind": Kind.SUBSET_SEARCH, "method": "smt",
            "argument": "the 0/1 system is unsatisfiable; the checker re-solves its own "
                        "encoding with z3 and cvc5"}


# ---- flip sets: §8.2 (biased) and §5 (GLU) ---------------------------------------------------

def _flip_fields(rule: str, value: Fraction) -> dict[str, Any]:
    return {"section": FLIP_SECTION, "rule": rule, "value": q(value)}


def flip_refutation(refutation: dict[str, Any], rule: str, value: Fraction, width: int
                    ) -> dict[str, Any]:
    """§8.2: no flip set J at the block's own width (the subset search's refutation)."""
    return {**refutation, **_flip_fields(rule, value), "width": width}


def flip_witness(layer: Layer, width: int, rule: str, value: Fraction, flips: list[int]
                 ) -> dict[str, Any]:
    """§8.2's witness: the block with the flip set J (1-based) flipped as the row says."""
    return witness([layer], width, Check.FLIP_IDENTITY, J=flips, **_flip_fields(rule, value))


def glu_refutation(refutation: dict[str, Any], lemma: str, c: Fraction) -> dict[str, Any]:
    """§5: no index set J (the subset search's refutation), under lemma OgN with σ(0) = c."""
    return {**refutation, "lemma": lemma, "c": q(c)}


def glu_witness(layer: Layer, width: int, flips: list[int], lemma: str, c: Fraction
                ) -> dict[str, Any]:
    """§5's witness: gate rows and down columns of J (1-based) negated."""
    return witness([layer], width, Check.GLU_SIGN_FLIPS, J=flips, lemma=lemma, c=q(c))


# ---- the half-activation bound (§9) ----------------------------------------------------------

HALF_ACTIVATION = ("Lemma H: a plain ReLU stack of first width w is affine with Jacobian rank "
                   "<= floor(w/2) on an open set; the block's Jacobian there is a product of "
                   "pattern matrices S + D_k diag(c a_k) U_k, of rank >= rank, so w >= 2 rank")


def norm_test(norm: str, total: Fraction) -> dict[str, Any]:
    """A layer whose pattern matrices are all non-singular by the norm test."""
    return {"test": "norm", "norm": norm, "sum": str(total)}


def pattern_test(least: int, pattern: list[int]) -> dict[str, Any]:
    """A layer whose 2^m patterns were walked: the least rank and the first pattern with it."""
    return {"test": "patterns", "least_rank": least, "least_pattern": pattern}


def half_activation_bound(layers: list[dict[str, Any]], combine: str, rank: int,
                          least_patterns: list[list[int]] | None = None) -> dict[str, Any]:
    """Every pattern product has rank >= `rank` (how the layers combine: non-singular, one
    layer, products, sylvester); without the width, which `half_activation_at` adds."""
    out: dict[str, Any] = {"kind": Kind.HALF_ACTIVATION_BOUND, "layers": layers,
                           "combine": combine, "rank": rank}
    if least_patterns is not None:
        out["least_patterns"] = least_patterns
    out["argument"] = HALF_ACTIVATION
    return out


def half_activation_at(bound: dict[str, Any], width: int) -> dict[str, Any]:
    """The bound refuting width `width` (< 2·rank)."""
    return {**bound, "width": width}
