"""Re-solving solver-based certificates with z3, cvc5 and CP-SAT.

Subset refutations (docs/rules.md §4) store no solver text: the checker encodes the 0/1 system it
re-derived itself and has both z3 and cvc5 refute it. The generic engine's refutations
(checker/rules/generic.py) are re-solved from the checker's own SMT-LIB text by the same two
verdict functions, cvc5 there as a bounded second opinion."""

from __future__ import annotations

from fractions import Fraction
from math import lcm

TIMEOUT_MS = 60_000


def z3_verdict(smtlib: str, logic: str | None = None, rlimit: int | None = None) -> str:
    """z3's answer: "sat", "unsat", "unknown", or "error" for text it cannot read (a malformed
    certificate is invalid, never a crash). `logic` picks z3's solver for it (QF_NRA: nlsat);
    `rlimit` bounds the work deterministically (nlsat does not always honour timeouts)."""
    import z3

    solver = z3.SolverFor(logic) if logic else z3.Solver()
    solver.set("timeout", TIMEOUT_MS)
    if rlimit is not None:
        solver.set("rlimit", rlimit)
    try:
        solver.from_string(smtlib)
    except z3.Z3Exception:
        return "error"
    return str(solver.check())


def cvc5_verdict(smtlib: str, timeout_ms: int = TIMEOUT_MS) -> str:
    """cvc5's answer to the last check-sat: "sat", "unsat", "unknown" (also when it runs out
    of `timeout_ms`, which cvc5 honours), or "error"."""
    import cvc5

    solver = cvc5.Solver()
    solver.setOption("tlimit-per", str(timeout_ms))
    symbols = cvc5.SymbolManager(solver.getTermManager())
    parser = cvc5.InputParser(solver, symbols)
    if "(set-logic" not in smtlib:
        smtlib = "(set-logic ALL)\n" + smtlib
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, smtlib, "certificate")
    answer = "unknown"
    try:
        while True:
            command = parser.nextCommand()
            if command.isNull():
                return answer
            said = command.invoke(solver, symbols).strip().split(" ")[0]  # "unknown (TIMEOUT)"
            if said in ("sat", "unsat", "unknown"):
                answer = said
    except RuntimeError:  # cvc5 reports parse errors as RuntimeError
        return "error"


def _integer_rows(columns: list[tuple[Fraction, ...]],
                  target: tuple[Fraction, ...]) -> list[list[int]]:
    """`Σ_j columns_j[i]·c_j = target[i]` for every i with a non-zero coefficient or
    right-hand side, each cleared of denominators by its lcm (coefficients, then rhs)."""
    rows = []
    for i, goal in enumerate(target):
        row = [col[i] for col in columns] + [goal]
        if any(row):
            scale = lcm(*(v.denominator for v in row))
            rows.append([int(v * scale) for v in row])
    return rows


def equation_count(columns: list[tuple[Fraction, ...]], target: tuple[Fraction, ...]) -> int:
    """How many equations of the 0/1 system are not 0 = 0."""
    return len(_integer_rows(columns, target))


def _int(value: int) -> str:
    return str(value) if value >= 0 else f"(- {-value})"


def subset_smtlib(columns: list[tuple[Fraction, ...]], target: tuple[Fraction, ...]) -> str:
    """The checker's own SMT-LIB2 encoding of "some 0/1 vector c has Σ c_j columns_j =
    target", built from the system the checker re-derived (unreduced, one equation per
    entry), for z3 and cvc5 alike."""
    lines = ["(set-logic QF_LIA)"] + [f"(declare-fun c{j} () Bool)" for j in range(len(columns))]
    for row in _integer_rows(columns, target):
        terms = [f"(ite c{j} {_int(v)} 0)" for j, v in enumerate(row[:-1]) if v != 0]
        total = f"(+ {' '.join(terms)} 0)" if terms else "0"
        lines.append(f"(assert (= {total} {_int(row[-1])}))")
    return "\n".join(lines + ["(check-sat)"]) + "\n"


def subset_infeasible_cpsat(columns: list[tuple[Fraction, ...]],
                            target: tuple[Fraction, ...]) -> bool:
    """No 0/1 vector c has Σ c_j columns_j = target: CP-SAT on the checker's own encoding
    (integer variables in [0, 1], each equation cleared of denominators by its lcm)."""
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    bits = [model.new_int_var(0, 1, f"c{j}") for j in range(len(columns))]
    for i, goal in enumerate(target):
        row = [col[i] for col in columns]
        scale = lcm(goal.denominator, *(v.denominator for v in row))
        model.add(cp_model.LinearExpr.weighted_sum(bits, [int(v * scale) for v in row])
                  == int(goal * scale))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = TIMEOUT_MS / 1000
    solver.parameters.num_workers = 1
    return solver.solve(model) == cp_model.INFEASIBLE
