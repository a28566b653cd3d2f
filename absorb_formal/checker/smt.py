"""Re-solving solver-based certificates: the stored SMT-LIB2 with z3 and cvc5, and an
independent encoding of the same 0/1 system built by the checker itself."""

from __future__ import annotations

from fractions import Fraction
from math import lcm

TIMEOUT_MS = 60_000


def z3_verdict(smtlib: str) -> str:
    import z3

    solver = z3.Solver()
    solver.set("timeout", TIMEOUT_MS)
    solver.from_string(smtlib)
    return str(solver.check())


def cvc5_verdict(smtlib: str) -> str:
    import cvc5

    solver = cvc5.Solver()
    solver.setOption("tlimit-per", str(TIMEOUT_MS))
    symbols = cvc5.SymbolManager(solver.getTermManager())
    parser = cvc5.InputParser(solver, symbols)
    if "(set-logic" not in smtlib:
        smtlib = "(set-logic ALL)\n" + smtlib
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, smtlib, "certificate")
    answer = "unknown"
    while True:
        command = parser.nextCommand()
        if command.isNull():
            return answer
        said = command.invoke(solver, symbols).strip()
        if said in ("sat", "unsat", "unknown"):
            answer = said


def subset_unsat(columns: list[tuple[Fraction, ...]], target: tuple[Fraction, ...]) -> bool:
    """No 0/1 vector c has Σ c_j columns_j = target: z3 on the unreduced system."""
    import z3

    solver = z3.Solver()
    solver.set("timeout", TIMEOUT_MS)
    bits = [z3.Bool(f"c{j}") for j in range(len(columns))]
    for i, goal in enumerate(target):
        row = [col[i] for col in columns] + [goal]
        scale = lcm(*(v.denominator for v in row))
        terms = [z3.If(b, int(col[i] * scale), 0) for b, col in zip(bits, columns, strict=True)
                 if col[i] != 0]
        solver.add((z3.Sum(terms) if terms else z3.IntVal(0)) == int(goal * scale))
    return solver.check() == z3.unsat


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
