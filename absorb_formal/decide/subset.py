"""The matrix subset-sum problem `Σ_{ℓ∈J} W_ℓ = T` (docs/rules.md §4, "the generic case").

Decided in exact arithmetic, cheapest argument first:
1. span test: if vec(T) is outside the real span of the vec(W_ℓ), a separating functional Y
   (`⟨Y, W_ℓ⟩ = 0` for all ℓ, `⟨Y, T⟩ ≠ 0`) refutes every subset;
2. if the W_ℓ are linearly independent, T has one combination c; a subset exists iff c is
   0/1 (the unique coefficients are the certificate);
3. otherwise the 0/1 points of the affine solution space: enumerate the free coordinates when
   there are few, else ask OR-Tools CP-SAT (its presolve reasons about the integer lattice of
   the equations and decides random d = 8, m = 128 instances in about 0.05 s, where z3 times
   out: benchmarks/RESULTS.md). Up to Z3_MAX_TERMS terms z3 answers first (the checker
   re-solves its own encoding with z3 and cvc5); z3 also takes the systems whose integers do
   not fit CP-SAT's 64 bits. In the dense regime (many more unknowns than equations) a target
   that is not an integer combination of the terms is refuted exactly first (a Hermite normal
   form gives a `lattice functional`); a short CP-SAT search for the J nearest the reference
   orientation comes first (it finds planted J), then CP-SAT's first try is bounded, then an
   LLL reduction looks for a solution (`lattice.py`: it can find J, never refute), then
   CP-SAT has the rest of the time.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from fractions import Fraction
from math import lcm
from typing import Any

from ..certify import widths as cert
from ..model import linalg
from . import budget, lattice

MAX_ENUMERATED_FREE = 12
Z3_TIMEOUT_MS = 20_000
Z3_MAX_TERMS = 24
# CP-SAT works in 64-bit integers; a row whose |coefficients| sum past this is left to z3.
CPSAT_MAX_ROW_WEIGHT = 2**60
# CP-SAT's nearest-J try in the dense regime (no presolve, the distance to the reference
# orientation minimised, stopped at the first J), in CP-SAT's deterministic work units (about
# a second of a quiet 2-core machine each): planted J at d = 8, m = 256 take 0.02 s.
CPSAT_NEAREST_WORK = 2.0
# CP-SAT's first try in the dense regime (with presolve, which refutes); then LLL, then
# CP-SAT with the rest of the time.
CPSAT_FIRST_WORK = 5.0
# ... and its last try may use the claim's whole remaining time (`--timeout`), up to this.
DENSE_TIMEOUT_MS = 120_000
DENSE_MARGIN_MS = 1_000


@dataclass(frozen=True)
class SubsetAnswer:
    """status: "found" (subset J, 0-based), "none" (certificate refutes all), "unknown"."""

    status: str
    subset: tuple[int, ...] | None = None
    certificate: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


class WrongSubset(RuntimeError):
    """A solver's J does not reach the target exactly: a bug (or a solver bug), reported as an
    internal error, never turned into a witness or a verdict."""


def solve(terms: list[linalg.Rows], target: linalg.Rows,
          timeout_ms: int = Z3_TIMEOUT_MS,
          reference: tuple[int, ...] | None = None) -> SubsetAnswer:
    """Find J ⊆ range(len(terms)) with Σ_{ℓ∈J} terms[ℓ] = target, or refute every J.

    Every J found, whichever solver found it, is re-checked here in exact arithmetic before
    any caller builds a witness from it (§5 GLU flips, §4 width search). `reference`: a
    subset that solutions are expected to differ little from (the block's own orientation
    in the width search); only the dense regime's LLL search uses it."""
    answer = _solve(terms, target, timeout_ms, reference)
    if answer.status == "found":
        chosen = answer.subset or ()
        if len(set(chosen)) != len(chosen) or not all(0 <= j < len(terms) for j in chosen):
            raise WrongSubset(f"internal error: the subset {chosen} is not a set of term indices")
        total = linalg.zeros(len(target), len(target[0]) if target else 0)
        for j in chosen:
            total = linalg.add(total, terms[j], Fraction(1))
        if total != tuple(tuple(row) for row in target):
            raise WrongSubset(f"internal error: the solver's subset {chosen} does not sum to "
                              "the target exactly")
    return answer


def _solve(terms: list[linalg.Rows], target: linalg.Rows, timeout_ms: int,
           reference: tuple[int, ...] | None = None) -> SubsetAnswer:
    columns = [linalg.vec(t) for t in terms]
    goal = linalg.vec(target)
    shape = (len(target), len(target[0]) if target else 0)
    if not terms:
        if linalg.is_zero(target):
            return SubsetAnswer("found", ())
        return _separated(columns, goal, shape)
    quick = linalg.quick_separation(columns, goal)
    if quick is not None:
        return _separated(columns, goal, shape, quick)
    particular, kernel = linalg.solve_affine(columns, goal)
    if particular is None:
        return _separated(columns, goal, shape)
    if not kernel:
        if all(c in (0, 1) for c in particular):
            return SubsetAnswer("found", tuple(i for i, c in enumerate(particular) if c == 1))
        return SubsetAnswer("none", certificate=cert.unique_combination(particular))
    if len(kernel) <= MAX_ENUMERATED_FREE:
        return _enumerate(columns, goal)
    rows = integer_rows(columns, goal)
    fits = all(sum(abs(v) for v in row) < CPSAT_MAX_ROW_WEIGHT for row in rows)
    if len(columns) > Z3_MAX_TERMS and fits:
        return _dense(rows, columns, goal, timeout_ms, shape, reference)
    return _z3(columns, goal, timeout_ms)


def _dense(rows: list[list[int]], columns: list[linalg.Vec], goal: linalg.Vec,
           timeout_ms: int, shape: tuple[int, int],
           reference: tuple[int, ...] | None = None) -> SubsetAnswer:
    """Beyond Z3_MAX_TERMS: an equation that alone has no integer solution is refuted exactly
    (`lattice functional`); then a short CP-SAT search for the J nearest the reference
    (`_cpsat(nearest=...)`: it finds sparse and planted J, which presolve hides); then CP-SAT
    within a deterministic work limit (its presolve decides most systems at once, the same
    way on every machine); if that leaves the system open, the integer lattice of all the
    equations (exact, a Hermite normal form), then LLL reductions look for a solution
    (`lattice.find`: a search that can only find, never refute); then CP-SAT again with the
    rest of the time. Whatever finds J, `solve` re-checks it exactly."""
    y = lattice.obstruction(columns, goal, hermite=False)  # one equation alone: at once
    if y is not None:
        return _lattice_functional(columns, goal, y, shape)
    nearest = _cpsat(rows, columns, goal, timeout_ms, deterministic=CPSAT_NEAREST_WORK,
                     nearest=reference or ())
    if nearest.status != "unknown":
        return nearest
    first = _cpsat(rows, columns, goal, timeout_ms, deterministic=CPSAT_FIRST_WORK)
    if first.status != "unknown":
        return first
    y = lattice.obstruction(columns, goal)  # the equations together (Hermite normal form)
    if y is not None:
        return _lattice_functional(columns, goal, y, shape)
    found = lattice.find(rows, len(columns), max(timeout_ms, DENSE_TIMEOUT_MS), reference)
    if found is not None:
        return SubsetAnswer("found", found)
    # the claim's remaining time, less a margin so that CP-SAT's own reason is reported
    rest = budget.remaining_ms(max(timeout_ms, DENSE_TIMEOUT_MS)) - DENSE_MARGIN_MS
    return _cpsat(rows, columns, goal, max(1, rest))


def _separated(columns: list[linalg.Vec], goal: linalg.Vec, shape: tuple[int, int],
               y: linalg.Vec | None = None) -> SubsetAnswer:
    y = y if y is not None else linalg.separating_vector(columns, goal)
    assert y is not None, "target outside the span must have a separating functional"
    rows, cols = shape
    grid = tuple(tuple(y[r * cols + c] for c in range(cols)) for r in range(rows))
    return SubsetAnswer("none",
                        certificate=cert.separating_functional(grid, linalg.dot(y, goal)))


def _reduced_system(columns: list[linalg.Vec], goal: linalg.Vec
                    ) -> tuple[linalg.Rows, list[int]]:
    augmented = [tuple(col[i] for col in columns) + (goal[i],) for i in range(len(goal))]
    reduced, pivots = linalg.rref(augmented)
    return reduced[: len(pivots)], pivots


def _enumerate(columns: list[linalg.Vec], goal: linalg.Vec) -> SubsetAnswer:
    """Try every 0/1 value of the free coordinates; pivots follow from the RREF."""
    reduced, pivots = _reduced_system(columns, goal)
    q = len(columns)
    free = [j for j in range(q) if j not in pivots]
    for bits in itertools.product((0, 1), repeat=len(free)):
        c = dict(zip(free, bits, strict=True))
        ok = True
        for row, p in zip(reduced, pivots, strict=True):
            value = row[q] - sum((row[j] for j, bit in c.items() if bit), Fraction(0))
            if value not in (0, 1):
                ok = False
                break
            c[p] = int(value)
        if ok:
            return SubsetAnswer("found", tuple(sorted(j for j, bit in c.items() if bit)))
    return SubsetAnswer("none", certificate=cert.enumeration(len(free)))


def smtlib(reduced: linalg.Rows, q: int) -> str:
    """The 0/1 system `Σ_j row_j·b_j = rhs` (rows scaled to integers) as SMT-LIB2 text.

    Printed here, not by z3, so the stored text does not change with the solver's version."""
    lines = ["(set-logic QF_LIA)", "(set-info :status unsat)"]
    lines += [f"(declare-fun b{j} () Bool)" for j in range(q)]
    for row in reduced:
        scale = lcm(*(v.denominator for v in row))
        terms = [f"(ite b{j} {_int(row[j] * scale)} 0)" for j in range(q) if row[j] != 0]
        total = f"(+ {' '.join(terms)} 0)" if terms else "0"
        lines.append(f"(assert (= {total} {_int(row[q] * scale)}))")
    lines.append("(check-sat)")
    return "\n".join(lines) + "\n"


def integer_rows(columns: list[linalg.Vec], goal: linalg.Vec) -> list[list[int]]:
    """The equations `Σ_j columns_j[i]·b_j = goal[i]`, each scaled to coprime integers
    (coefficients then right-hand side); all-zero equations are dropped."""
    rows = []
    for i, rhs in enumerate(goal):
        row = [col[i] for col in columns] + [rhs]
        if any(row):
            scale = lcm(*(v.denominator for v in row))
            rows.append([int(v * scale) for v in row])
    return rows


def _lattice_functional(columns: list[linalg.Vec], goal: linalg.Vec, y: linalg.Vec,
                        shape: tuple[int, int]) -> SubsetAnswer:
    """The integer-lattice refutation (`lattice.obstruction`), with Y shaped like the target;
    re-checked here before it refutes anything (as every J found is)."""
    if (any(linalg.dot(y, c).denominator != 1 for c in columns)
            or linalg.dot(y, goal).denominator == 1):
        raise WrongSubset("internal error: the lattice functional does not separate the target")
    rows, cols = shape
    grid = tuple(tuple(y[r * cols + c] for c in range(cols)) for r in range(rows))
    return SubsetAnswer("none", certificate=cert.lattice_functional(grid, linalg.dot(y, goal)))


def _cpsat(rows: list[list[int]], columns: list[linalg.Vec], goal: linalg.Vec,
           timeout_ms: int, deterministic: float | None = None,
           nearest: tuple[int, ...] | None = None) -> SubsetAnswer:
    """One worker and a fixed seed, so the answer (and the subset found) is reproducible;
    `deterministic` bounds CP-SAT's own work units (the same on every machine) as well.

    `nearest` R: look for the J nearest R (the objective |J Δ R|, stopped at the first J
    found), without presolve. A planted J that flips few of R is then the optimum of the
    linear relaxation — the ℓ1 recovery of a sparse F = J Δ R, d² equations for |F| ≪ d²
    unknowns — and CP-SAT's LP finds it at once (d = 8, m = 256: 0.02 s), where its presolve,
    rewriting the large-coefficient equations, hides it (nothing in 10 s). The objective
    changes which J is found, never whether one exists: INFEASIBLE refutes as always."""
    from ortools.sat.python import cp_model

    q = len(columns)
    model = cp_model.CpModel()
    bits = [model.new_bool_var(f"b{j}") for j in range(q)]
    for row in rows:
        model.add(sum(c * bits[j] for j, c in enumerate(row[:q]) if c) == row[q])
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_time_in_seconds = budget.remaining_ms(timeout_ms) / 1000
    if deterministic is not None:
        solver.parameters.max_deterministic_time = deterministic
    if nearest is not None:
        chosen = set(nearest)
        model.minimize(sum(1 - bits[j] if j in chosen else bits[j] for j in range(q)))
        solver.parameters.cp_model_presolve = False
        solver.parameters.linearization_level = 2
        solver.parameters.stop_after_first_solution = True
    status = solver.solve(model)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        # solve() re-checks the subset exactly, as for every solver
        return SubsetAnswer("found", tuple(j for j in range(q) if solver.boolean_value(bits[j])))
    if status == cp_model.INFEASIBLE:
        return SubsetAnswer("none", certificate=cert.cp_sat(q, len(rows)))
    return SubsetAnswer("unknown", reason=f"CP-SAT: {solver.status_name(status).lower()} "
                                          f"(subset search over {q} terms)")


def _int(value: Fraction) -> str:
    n = int(value)
    return str(n) if n >= 0 else f"(- {-n})"


def _z3(columns: list[linalg.Vec], goal: linalg.Vec, timeout_ms: int) -> SubsetAnswer:
    import z3

    reduced, _ = _reduced_system(columns, goal)
    q = len(columns)
    text = smtlib(reduced, q)
    solver = z3.SolverFor("QF_LIA")
    solver.set("random_seed", 0)
    solver.set("timeout", budget.remaining_ms(timeout_ms))
    solver.from_string(text)
    verdict = solver.check()
    if verdict == z3.sat:
        model = solver.model()
        chosen = tuple(j for j in range(q)
                       if z3.is_true(model.eval(z3.Bool(f"b{j}"), model_completion=True)))
        return SubsetAnswer("found", chosen)
    if verdict == z3.unsat:
        return SubsetAnswer("none", certificate=cert.smt())  # no solver text stored
    return SubsetAnswer("unknown", reason=f"z3: {solver.reason_unknown()} "
                                          f"(subset search over {q} terms)")

