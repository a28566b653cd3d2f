"""The matrix subset-sum problem Σ_{ℓ∈J} W_ℓ = T refuted (docs/rules.md, "The generic case
(the paper's theorem)" and "The dense regime"): the checker's side of `separating functional`
and of `subset search` by lattice functional, unique combination, enumeration, smt and cp-sat.

The terms and the target are never read from the certificate: each caller derives them from
the block (a width-search case, rules/width.py; GLU sign flips, rules/glu.py; §8.2 flip sets,
rules/flips.py), and this module checks the stored refutation against them.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

from ..kernel import linalg as exact
from ..kernel.contract import Invalid, Kind, require
from ..kernel.linalg import Rows, q, whole
from ..lemmas import smt

MAX_ENUMERATION = 16  # free coordinates (or signs, rules/width.py) re-enumerated at most


def refutation(terms: list[Rows], target: Rows, ref: dict[str, Any]) -> None:
    """No J ⊆ terms has Σ_J terms = target: `ref` is a separating functional or a subset search
    by one of the methods of docs/certificates.md, checked against the terms and target the
    caller derived itself."""
    columns = [tuple(x for row in t for x in row) for t in terms]
    goal = tuple(x for row in target for x in row)
    kind, method = ref.get("kind"), ref.get("method")
    require(kind == Kind.SUBSET_SEARCH or (kind == Kind.SEPARATING_FUNCTIONAL and method is None),
            f"unknown subset refutation {kind!r}/{method!r}")
    if kind == Kind.SEPARATING_FUNCTIONAL:
        y = tuple(x for row in exact.mat(ref["Y"]) for x in row)
        require(len(y) == len(goal), "Y has the wrong shape")
        # Y lives where the system does: off its support Y would be free, hence unchecked.
        require(all(v == 0 for i, v in enumerate(y)
                    if goal[i] == 0 and all(c[i] == 0 for c in columns)),
                "Y is non-zero where every term and the target vanish")
        require(all(exact.dot(y, c) == 0 for c in columns), "<Y, W_l> != 0 for some term")
        require(exact.dot(y, goal) != 0, "<Y, T> = 0")
        require(q(ref["Y_dot_target"]) == exact.dot(y, goal), "the stored <Y, T> is wrong")
    elif method == "lattice functional":  # no integer combination reaches T (dense regime)
        y = tuple(x for row in exact.mat(ref["Y"]) for x in row)
        require(len(y) == len(goal), "Y has the wrong shape")
        require(all(v == 0 for i, v in enumerate(y)
                    if goal[i] == 0 and all(c[i] == 0 for c in columns)),
                "Y is non-zero where every term and the target vanish")
        require(all(exact.dot(y, c).denominator == 1 for c in columns),
                "<Y, W_l> is not an integer for some term")
        require(exact.dot(y, goal).denominator != 1, "<Y, T> is an integer")
        require(q(ref["Y_dot_target"]) == exact.dot(y, goal), "the stored <Y, T> is wrong")
    elif method == "unique combination":
        coefficients = exact.vec(ref["coefficients"])
        require(exact.rank(columns) == len(columns), "the terms are not independent")
        combined = tuple(sum((c * col[i] for c, col in zip(coefficients, columns, strict=True)),
                             Fraction(0)) for i in range(len(goal)))
        require(combined == goal, "the coefficients do not combine to the target")
        require(any(c not in (0, 1) for c in coefficients), "the combination is 0/1")
    elif method == "enumeration":
        require(whole(ref["free_coordinates"]) == _reenumerate(columns, goal),
                "the stored number of free coordinates is wrong")
    elif method == "smt":
        # The checker's own encoding of the system it re-derived, re-solved by two solvers:
        # a stored SMT-LIB text would be tied to nothing the checker computes.
        text = smt.subset_smtlib(columns, goal)
        require(smt.z3_verdict(text) == "unsat", "z3 finds a subset (checker's own encoding)")
        require(smt.cvc5_verdict(text) == "unsat", "cvc5 finds a subset or gives up "
                                                   "(checker's own encoding)")
    elif method == "cp-sat":
        require((whole(ref["terms"]), whole(ref["equations"]))
                == (len(columns), smt.equation_count(columns, goal)),
                "the stored system size is wrong")
        require(smt.subset_infeasible_cpsat(columns, goal),
                "CP-SAT does not confirm infeasibility (checker's own encoding)")
    else:
        raise Invalid(f"unknown subset refutation {kind!r}/{method!r}")


def _reenumerate(columns: list[exact.Vec], goal: exact.Vec) -> int:
    """Refute every 0/1 value of the free coordinates; the number of free coordinates."""
    rows = [[c[i] for c in columns] + [goal[i]] for i in range(len(goal))]
    reduced, pivots = exact.rref(rows)
    n = len(columns)
    require(n not in pivots, "the target is outside the span: a subset search is not needed, "
                             "but this certificate claims enumeration")
    free = [j for j in range(n) if j not in pivots]
    require(len(free) <= MAX_ENUMERATION, "too many free coordinates to re-enumerate")
    for bits in itertools.product((0, 1), repeat=len(free)):
        chosen = dict(zip(free, bits, strict=True))
        values = [reduced[r][n] - sum((reduced[r][j] for j, b in chosen.items() if b),
                                      Fraction(0)) for r in range(len(pivots))]
        require(not all(v in (0, 1) for v in values), f"a 0/1 solution exists: free={bits}")
    return len(free)
