"""The width search (docs/rules.md, "Canonical forms and keys", "The width search", §4, §8.1):
the checker's side of `subset search` by width search and by key count, and of the witness
`canonical forms equal`.

A depth-1 O(a)+N block is absorbable at width w iff some signs s, doubles Δ and k spare pairs
of cost ≤ w make M_s's restriction to ū_Δ^⊥ of rank ≤ k. The checker recomputes the canonical
form, enumerates every (Δ, k) itself and requires each case's refutation: a subset refutation
(rules/subset.py) of terms it derives for k = 0, a sign enumeration for k ≥ 1. A witness is
checked by comparing canonical forms (rules/canonical.py).
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

from ..kernel import linalg as exact
from ..kernel.contract import Kind, require
from ..kernel.linalg import Rows, whole
from . import canonical as forms
from . import subset


def same_width(cert: dict[str, Any], width: int) -> None:
    """A refutation states the width it refutes: exactly the claim's (every field checked)."""
    require(whole(cert["width"]) == width, f"the certificate is for width {cert['width']}, "
                                         f"not {width}")


def witness(block: dict[str, Any], layers: list[dict[str, Any]]) -> None:
    """`canonical forms equal`: the stored depth-1 layer has the block's canonical form."""
    forms.same_forms(block, layers, single=True)


def _terms(family: tuple[str, Fraction, Fraction | None], lam: Rows,
           keys: list[tuple[exact.Vec, exact.Vec]], singles: list[int],
           basis: list[exact.Vec]) -> tuple[list[Rows], Rows]:
    """(W_ℓ Q for ℓ single, −M_+ Q), as in the width search of docs/rules.md §4."""
    r = forms.rho(family)
    m_plus = lam
    for i in singles:
        u, v = keys[i]
        m_plus = exact.combine(m_plus, exact.outer(v, u), -r)

    def times(rows: Rows) -> Rows:
        return tuple(tuple(exact.dot(row, b) for b in basis) for row in rows)

    terms = [times(exact.combine(exact.zeros(len(lam), len(lam)), exact.outer(keys[i][1],
                                                                              keys[i][0]), 2 * r))
             for i in singles]
    target = tuple(tuple(-x for x in row) for row in times(m_plus))
    return terms, target


def refutation(block: dict[str, Any], width: int, cert: dict[str, Any]) -> None:
    """A `subset search` by width search or key count: not absorbable at `width`."""
    family = forms.family(block)
    require(family[0] != "linear" and block["depth"] == 1, "width search: depth-1 O(a)+N")
    d, biased = block["dim"], bool(block.get("bias"))
    # §8.1: with biases the keys are affine; spare pairs and doubles still need a ≠ 0
    require(not biased or family[1] != 0, "§8.1 needs a != 0")
    lam, key_map, gamma = forms.form(family, d, exact.skip_rows(block), block["layers"][0],
                                     biased, block["activation"])
    # The search reads each key's direction ū only (§8.1): drop β̄ from affine keys; the
    # formal constant neurons (ū = 0) are constants, free through c′, not keys.
    keys = [(u[:d], v) for u, v in forms.sorted_keys(key_map) if any(u[:d])]
    p = len(keys)
    require(cert["canonical_form"] == forms.as_json(family, lam, key_map, gamma),
            "the stored canonical form differs from the recomputed one")
    method = cert["method"]
    same_width(cert, width)
    if method == "key count":
        require(width < max(p, 1), f"{p} keys fit in width {width}")
        require(whole(cert["keys"]) == p, "the stored key count is wrong")
        return
    require(method == "width search", f"unknown refutation method {method!r}")
    # Every case listed is verified, those beyond the width too (a search for the minimal
    # width stores the cases it refuted at the next cost): no listed case goes unchecked.
    cases = {}
    for c in cert["cases"]:
        delta, k = tuple(whole(i) - 1 for i in c["doubles"]), whole(c["spare_pairs"])
        require(list(delta) == sorted(set(delta)) and all(0 <= i < p for i in delta) and k >= 0,
                f"case doubles={list(c['doubles'])}, spare pairs={k} is no case of {p} keys")
        require((delta, k) not in cases, f"case doubles={list(c['doubles'])}, spare pairs={k} "
                                         "is listed twice")
        cases[(delta, k)] = c["refutation"]
        _case(family, lam, keys, delta, k, c["refutation"])
    for extra in range(0, width - p + 1):
        for j in range(extra % 2, min(extra, p) + 1, 2):
            for delta in itertools.combinations(range(p), j):
                k = (extra - j) // 2
                require((delta, k) in cases, f"case doubles={[i + 1 for i in delta]}, "
                                             f"spare pairs={k} is not refuted")


def _case(family: tuple[str, Fraction, Fraction | None], lam: Rows,
          keys: list[tuple[exact.Vec, exact.Vec]], delta: tuple[int, ...], k: int,
          ref: dict[str, Any]) -> None:
    d = len(lam)
    basis = [exact.vec(b) for b in ref["complement_basis"]]
    dirs = [keys[i][0] for i in delta]
    require(basis == exact.nullspace(dirs, d), "Q is not the RREF basis of ū_Δ^⊥")
    require(min(d, len(basis)) > k, "this case is feasible (rank bound)")
    singles = [i for i in range(len(keys)) if i not in delta]
    terms, target = _terms(family, lam, keys, singles, basis)
    if k >= 1:
        require(ref["kind"] == Kind.SUBSET_SEARCH and ref["method"] == "sign enumeration",
                "k >= 1 cases are refuted by enumeration")
        require(len(singles) <= subset.MAX_ENUMERATION, "too many signs to re-enumerate")
        _signs_refuted(terms, target, k)
        return
    subset.refutation(terms, target, ref)


def _signs_refuted(terms: list[Rows], target: Rows, k: int) -> None:
    """rank(M_s Q) > k for all 2^n signs. With every s_ℓ = + it is M_+ Q = −target, and
    turning s_ℓ to − adds terms[ℓ] = 2ρ v_ℓ ū_ℓ^T Q: a Gray-code walk makes one such update
    per sign vector instead of rebuilding M_s."""
    current = [[-x for x in row] for row in target]
    negative = [False] * len(terms)
    for t in range(1, 2 ** len(terms) + 1):
        require(exact.rank(current) > k, f"signs {[-1 if n else 1 for n in negative]} reach "
                                         f"rank <= {k}")
        if t == 2 ** len(terms):
            return
        j = (t & -t).bit_length() - 1  # the bit that changes between Gray codes t − 1 and t
        sign = -1 if negative[j] else 1
        current = [[x + sign * y for x, y in zip(row, step, strict=True)]
                   for row, step in zip(current, terms[j], strict=True)]
        negative[j] = not negative[j]
